"""`effqwen reproduce --assets DIR` with a bundle built offline from a tiny hand-written wheel: the notebooks' kernels
import from the installed wheels, and a damaged part stops the command before any notebook runs, naming the part."""
import json, subprocess, sys
from pathlib import Path
from effqwen.cli import _tiny_nb, _tiny_wheel, pack_parts, reproduce

ROOT = Path(__file__).resolve().parents[1]
EFFQWEN = [str(Path(sys.executable).parent / 'effqwen')]
PY = f'{sys.version_info.major}.{sys.version_info.minor}'


def test_kernels_import_from_the_bundle(tmp_path):
    pack_parts([_tiny_wheel(tmp_path, body='VALUE = 42\n')], tmp_path / 'bundle', part_bytes=300, python=PY)
    assert len(list((tmp_path / 'bundle').glob('*.part*'))) > 1   # the wheel is cut into several parts
    (tmp_path / 'nbs').mkdir()
    _tiny_nb(tmp_path / 'nbs' / '20_uses_asset.ipynb',
             "import effqwen_fake_asset\nfrom effqwen.core import get_profile, write_result\n"
             "write_result('asset', {'value': effqwen_fake_asset.VALUE}, get_profile(profile, out=out))")
    try: reproduce('ci', nbs=tmp_path / 'nbs', out=tmp_path / 'out', assets=tmp_path / 'bundle')
    finally: sys.path[:] = [p for p in sys.path if not p.startswith(str(tmp_path))]   # use_assets put the bundle's folder first
    doc = json.loads((tmp_path / 'out' / 'data' / 'results' / 'asset_ci.json').read_text())
    assert doc['value'] == 42
    assert (tmp_path / 'bundle' / 'site' / 'effqwen_fake_asset.py').exists()


def test_a_damaged_part_stops_the_command(tmp_path):
    pack_parts([_tiny_wheel(tmp_path)], tmp_path / 'bundle', part_bytes=300, python=PY)
    part = tmp_path / 'bundle' / 'effqwen_fake_asset-0.1-py3-none-any.whl.part001'
    part.write_bytes(part.read_bytes()[:-1])
    r = subprocess.run([*EFFQWEN, 'reproduce', '--profile', 'ci', '--only', 'baseline', '--out', str(tmp_path / 'out'),
                        '--assets', str(tmp_path / 'bundle')], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and f'bundle part {part} has 299 bytes, the manifest says 300' in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / 'out' / 'data').exists()   # nothing ran
