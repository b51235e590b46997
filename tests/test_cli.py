"""The `effqwen` console script: profiles, bad input, a `reproduce --profile ci` of every experiment notebook into
`--out` that leaves the checkout untouched, and `--model PATH` on a tiny Qwen3.5 checkpoint saved to a folder."""
import json, os, re, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
EFFQWEN = [str(Path(sys.executable).parent / 'effqwen')]  # the installed console script
SKIP = ('.git', 'data/cache', '.pytest_cache')   # caches may fill (converted models); nothing else may change


def run(*args, **kw):
    return subprocess.run([*EFFQWEN, *args], capture_output=True, text=True, cwd=ROOT, **kw)


def snapshot():
    "Every file of the checkout (caches and byte-code aside) with its size and mtime, and git's view of the tree."
    skipped = lambda rel: rel.startswith(SKIP) or '__pycache__' in rel
    files = {}
    for dirpath, dirnames, names in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if not skipped((Path(dirpath) / d).relative_to(ROOT).as_posix())]
        for n in names:
            st = (Path(dirpath) / n).stat()
            files[(Path(dirpath) / n).relative_to(ROOT).as_posix()] = (st.st_size, st.st_mtime_ns)
    git = subprocess.run(['git', 'status', '--porcelain', '--ignored', '--untracked-files=all'], cwd=ROOT,
                         capture_output=True, text=True).stdout.splitlines()
    return files, [l for l in git if not skipped(l[3:])]


def test_profiles_lists_all():
    r = run('profiles')
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [l.split()[0] for l in lines] == ['ci', 'cpu', 'gpu', 'paper']
    assert all(('; budget ' in l) != ('; measured ' in l) for l in lines), lines   # a measured time, or a budget labelled as one


@pytest.mark.parametrize('args, message', [
    (['--profile', 'laptop'], 'choose one of ci, cpu, gpu, paper'),
    (['--profile', 'ci', '--only', 'nope'], 'choose from 20_baseline'),
    (['--profile', 'ci', '--out', 'settings.ini'], '--out settings.ini: is a file; pass a folder'),
    (['--profile', 'ci', '--model', '/no/such/ckpt'], '--model /no/such/ckpt: no such folder'),
    (['--profile', 'ci', '--model', 'nbs'], '--model nbs: no config.json in it'),
    (['--profile', 'ci', '--assets', '/no/such/bundle'], '--assets /no/such/bundle: no such folder'),
    (['--profile', 'ci', '--git-sha', 'HEAD'], '--git-sha HEAD: expected a commit id'),
])
def test_bad_input_is_a_clear_error(args, message):
    r = run('reproduce', *args)
    assert r.returncode == 2 and message in r.stderr, (r.returncode, r.stderr[-2000:])
    assert 'Traceback' not in r.stderr


def test_reproduce_ci_all_notebooks_into_out(tmp_path):
    "Every experiment notebook on the ci profile: products, run record and executed notebooks under --out; the checkout unchanged."
    before = snapshot()
    out = tmp_path / 'out'
    r = run('reproduce', '--profile', 'ci', '--out', str(out), timeout=1500)
    assert r.returncode == 0, r.stderr[-5000:]
    nbs = sorted(p.stem for p in (ROOT / 'nbs').glob('2*.ipynb'))
    for i, nb in enumerate(nbs, 1):   # one progress line per notebook, with its time
        assert re.search(rf'\[{i}/{len(nbs)}\] {nb} done in \d+', r.stderr), r.stderr[-3000:]
    assert 'ERROR' not in r.stderr and 'KeyboardInterrupt' not in r.stderr, r.stderr[-3000:]
    assert 'WARNING | Kernel' not in r.stderr and 'papermill INFO' not in r.stderr   # no kernel or papermill chatter
    rec = json.loads((out / 'data' / 'results' / 'reproduce_ci.json').read_text())
    assert rec['complete'] and sorted(rec['notebooks']) == nbs and rec['total_seconds'] > 0
    assert rec['provenance']['command'] == f'effqwen reproduce --profile ci --out {out}'
    doc = json.loads((out / 'data' / 'results' / 'baseline_ci.json').read_text())
    pv = doc['provenance']
    assert pv['profile'] == 'ci' and pv['git_sha'] != 'unknown' and pv['command'].endswith(f"[20_baseline.ipynb: profile='ci', out='{out}']")
    assert doc['ppl'] > 1 and set(doc['tasks']) >= {'boolq', 'piqa'}
    assert (out / 'figures' / 'baseline_ci.png').exists() and list((out / 'data' / 'tables').glob('*_ci.md'))
    runs = list((out / '_runs').iterdir())
    assert len(runs) == 1 and sorted(p.stem for p in runs[0].glob('*.ipynb')) == nbs
    after = snapshot()
    assert after[1] == before[1], (before[1], after[1])
    changed = sorted(k for k in set(before[0]) | set(after[0]) if before[0].get(k) != after[0].get(k))
    assert not changed, changed


def test_reproduce_with_a_local_checkpoint(tmp_path):
    "`--model PATH` reaches the notebook: a tiny Qwen3.5 saved with save_pretrained is the target the baseline measures."
    from effqwen.model import load_tokenizer, tiny_qwen35
    tok = load_tokenizer('tiny-qwen3.5')
    ckpt = tmp_path / 'tiny-qwen3.5-ckpt'
    tiny_qwen35(0, vocab_size=len(tok), eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id).save_pretrained(ckpt)
    tok.save_pretrained(ckpt)
    out = tmp_path / 'out'
    r = run('reproduce', '--profile', 'ci', '--only', 'baseline', '--model', str(ckpt), '--out', str(out), timeout=900)
    assert r.returncode == 0, r.stderr[-5000:]
    doc = json.loads((out / 'data' / 'results' / 'baseline_ci.json').read_text())
    assert doc['provenance']['model'] == str(ckpt) and doc['model'] == str(ckpt)
    assert f"model='{ckpt}'" in doc['provenance']['command']
    assert doc['ppl'] > 1
