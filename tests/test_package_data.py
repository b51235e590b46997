"""The tuned kernel picks are package data: a non-editable install of the package carries `effqwen/kernels/configs/*.json`
and the installed library finds them there (not in the repo's data/)."""
import shutil, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

def test_installed_package_carries_the_kernel_picks(tmp_path):
    src, site = tmp_path / 'src', tmp_path / 'site'   # (a copy: the build leaves nothing in the checkout)
    shutil.copytree(ROOT / 'effqwen', src / 'effqwen', ignore=shutil.ignore_patterns('__pycache__'))
    for f in ('setup.py', 'settings.ini', 'README.md', 'pyproject.toml'): shutil.copy(ROOT / f, src / f)
    r = subprocess.run([sys.executable, '-m', 'pip', 'install', '-q', '--no-deps', '--no-build-isolation', '--no-compile', '--no-cache-dir',
                        '--target', str(site), str(src)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert (site / 'effqwen' / 'kernels' / 'configs' / 'h200.json').is_file()
    code = ("import effqwen, effqwen.kernels.tuning as t; from pathlib import Path; "
            f"assert Path(effqwen.__file__).is_relative_to({str(site)!r}), effqwen.__file__; "
            "p = t.shipped_picks('h200'); assert len(p['library']) > 40 and p['fragment'] and p['alone'], p; print('ok')")
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env={'PYTHONPATH': str(site), 'PATH': '/usr/bin:/bin', 'HOME': str(tmp_path)})
    assert r.returncode == 0 and r.stdout.strip().endswith('ok'), r.stdout[-2000:] + r.stderr[-2000:]
