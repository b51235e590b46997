"The `effqwen` console script: profiles, bad input, and an end-to-end `reproduce` on the ci profile."
import json, os, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EFFQWEN = [str(Path(sys.executable).parent / 'effqwen')]  # the installed console script


def run(*args, **kw):
    return subprocess.run([*EFFQWEN, *args], capture_output=True, text=True, cwd=ROOT, **kw)


def test_profiles_lists_all():
    r = run('profiles')
    assert r.returncode == 0
    assert [l.split()[0] for l in r.stdout.splitlines()] == ['ci', 'cpu', 'gpu', 'paper']


def test_unknown_profile_is_a_clear_error():
    r = run('reproduce', '--profile', 'laptop')
    assert r.returncode == 2 and 'choose one of ci, cpu, gpu, paper' in r.stderr


def test_unknown_experiment_is_a_clear_error():
    r = run('reproduce', '--profile', 'ci', '--only', 'nope')
    assert r.returncode == 2 and 'choose from 20_baseline' in r.stderr


def test_reproduce_baseline_ci_end_to_end(tmp_path):
    "papermill injects the profile, the notebook writes a result with provenance under --out, never into data/."
    before = sorted((ROOT / 'data' / 'results').glob('*.json'))
    stamp = {p: p.stat().st_mtime for p in before}
    r = run('reproduce', '--profile', 'ci', '--only', 'baseline', '--out', str(tmp_path / 'out'),
            '--run-dir', str(tmp_path / 'run'), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads((tmp_path / 'out' / 'data' / 'results' / 'baseline_ci.json').read_text())
    assert doc['provenance']['profile'] == 'ci' and doc['provenance']['git_sha'] != 'unknown'
    assert doc['ppl'] > 1 and set(doc['tasks']) >= {'boolq', 'piqa'}
    assert (tmp_path / 'out' / 'figures' / 'baseline_ci.png').exists()
    assert (tmp_path / 'run' / '20_baseline.ipynb').exists()
    assert {p: p.stat().st_mtime for p in sorted((ROOT / 'data' / 'results').glob('*.json'))} == stamp
