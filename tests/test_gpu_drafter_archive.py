"""`scripts/gpu_drafter.py archive` (no GPU): a new run replaces the committed result, the committed one moves into the
session-runs file newest first (a training run in summary), the note lands in the new run's provenance, and bad calls
(the same run again, no note, an unknown result) are refused before anything is written."""
import importlib.util, json, pathlib
import pytest

_p = pathlib.Path(__file__).resolve().parents[1]/'scripts'/'gpu_drafter.py'
_spec = importlib.util.spec_from_file_location('gpu_drafter', _p); G = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(G)

def _run(sha, date, tau):
    o = dict(lengths=[3, 1, 2], divergence=[dict(at=1)], tau=tau, n=2, lossless=1)
    ba = dict(train=dict(acc=[0.8], tau=5.0), held_out=dict(acc=[0.7], tau=4.0))
    return dict(provenance=dict(profile='gpu', git_sha=sha, date=date),
                train=dict(steps=dict(stage2=3), train_s=dict(stage2=1.0), data={}, sizes=dict(pack_len=8), block_accuracy=dict(stage2=ba),
                           losses=dict(stage2=[1.0, 0.5])),
                eval=dict(stage2=dict(gsm8k=o)), step_ms=dict(draft=0.1), lossless_fp32=dict(n=2, identical=2, divergence=[]))

def test_archive(tmp_path):
    res, runs_f = tmp_path/'drafter_training_gpu.json', tmp_path/'drafter_training_gpu_session_runs.json'
    res.write_text(json.dumps(_run('bbb', '2026-12-01T08:00:00', 2.3)))
    runs_f.write_text(json.dumps(dict(note='old', runs=[dict(provenance=dict(git_sha='aaa', date='2026-11-30T08:00:00'))])))
    new = tmp_path/'new.json'; new.write_text(json.dumps(_run('ccc', '2026-12-01T13:00:00', 2.5)))
    with pytest.raises(ValueError, match='--note'): G.archive(res, new, '')
    with pytest.raises(ValueError, match='committed run already'): G.archive(res, res, 'x')
    with pytest.raises(ValueError, match='session-runs'): G.archive(tmp_path/'other.json', new, 'x')
    assert json.loads(res.read_text())['provenance']['git_sha'] == 'bbb'          # nothing written by the refused calls
    G.archive(res, new, 'the command')
    doc, runs = json.loads(res.read_text()), json.loads(runs_f.read_text())
    assert doc['provenance'] == dict(profile='gpu', git_sha='ccc', date='2026-12-01T13:00:00', note='the command')
    assert doc['eval'] == _run('ccc', '', 2.5)['eval']                            # the payload untouched
    assert [r['provenance']['git_sha'] for r in runs['runs']] == ['bbb', 'aaa']   # newest first
    old = runs['runs'][0]
    assert old['eval']['stage2']['gsm8k'] == dict(tau=2.3, n=2, lossless=1)       # per-round lengths and divergences dropped
    assert 'losses' not in old and old['sizes'] == dict(pack_len=8) and old['lossless_fp32'] == dict(n=2, identical=2)

def test_archive_first_run_and_result_of(tmp_path):
    "A result's first run is installed with nothing to archive; a returned file is matched to its result by name prefix."
    assert G.result_of(pathlib.Path('x/drafter_e2e_step_ab_gpu_rep2.json'), tmp_path) == tmp_path/'drafter_e2e_step_ab_gpu.json'
    assert G.result_of(pathlib.Path('drafter_e2e_swa_gpu.json'), tmp_path) == tmp_path/'drafter_e2e_swa_gpu.json'
    with pytest.raises(ValueError, match='rename it'): G.result_of(pathlib.Path('e2e.json'), tmp_path)
    res, new = tmp_path/'drafter_e2e_swa_gpu.json', tmp_path/'new.json'
    new.write_text(json.dumps(dict(provenance=dict(git_sha='ddd', date='2026-12-01'), eval={})))
    G.archive(res, new, 'windows')
    assert json.loads(res.read_text())['provenance']['note'] == 'windows'
    assert not (tmp_path/'drafter_e2e_swa_gpu_session_runs.json').exists()

def test_refit(tmp_path):
    "A stage-2 refit's result: its training record and each e2e file whole; bad inputs are refused before anything is written."
    tr, e1, e2, out = tmp_path/'train_stage2.json', tmp_path/'a.json', tmp_path/'b.json', tmp_path/'refit.json'
    tr.write_text(json.dumps(dict(steps=dict(stage2=10), data={})))
    e1.write_text(json.dumps(dict(provenance=dict(git_sha='eee', date='2026-12-01T16:06'), drafter_sha256='aa', eval={})))
    e2.write_text(json.dumps(dict(provenance=dict(git_sha='eee', date='2026-12-01T16:07'), drafter_sha256='bb', eval={})))
    with pytest.raises(ValueError, match='--note'): G.refit(tr, [e1, e2], '', out)
    with pytest.raises(ValueError, match='--e2e'): G.refit(tr, [], 'x', out)
    bad = tmp_path/'train_stage1.json'; bad.write_text(json.dumps(dict(steps=dict(stage1=10))))
    with pytest.raises(ValueError, match='no stage-2'): G.refit(bad, [e1], 'x', out)
    assert not out.exists()
    G.refit(tr, [e1, e2], 'the commands', out)
    doc = json.loads(out.read_text())
    assert doc['provenance'] == dict(git_sha='eee', date='2026-12-01T16:07', note='the commands')
    assert [r['drafter_sha256'] for r in doc['e2e']] == ['aa', 'bb'] and doc['train']['steps'] == dict(stage2=10)

def test_token_batches():
    "The regen stage's batches: at most `batch` prompts, rows × (longest prompt + new tokens) within the cap, order kept."
    n = {0: 10, 1: 20, 2: 30, 3: 4000, 4: 4000, 5: 4000, 6: 5}
    b = G.token_batches(list(n), n, 3, 9000, 256)
    assert b == [[0, 1, 2], [3, 4], [5, 6]] and [i for x in b for i in x] == list(n)
    assert all(len(x) * (max(n[i] for i in x) + 256) <= 9000 for x in b)
    assert G.token_batches(list(n), n, 100, 10**9, 256) == [list(n)]
    assert G.token_batches([3], n, 4, 100, 256) == [[3]]                   # one prompt over the cap still runs, alone
    with pytest.raises(ValueError, match='REGEN_TOKENS'): G.token_batches([0], n, 0, 100, 1)

def test_regen_order():
    "Windows in their order, each longest first: a deadline in the last window drops its shortest prompts, not its long ones."
    L = {10: 5, 11: 900, 12: 40, 13: 7, 14: 3000, 15: 1}
    assert G.regen_order([10, 11, 12, 13, 14, 15], L, 3) == [11, 12, 10, 14, 13, 15]
    assert G.regen_order([], L, 4) == [] and sorted(G.regen_order(list(L), L, 100)) == sorted(L)
    with pytest.raises(ValueError, match='window'): G.regen_order([10], L, 0)

def test_feature_gb():
    "The feature budget's arithmetic: a 4,096-token chunk of SmolLM2's 4 taps x 576 float32 values is 37.7 MB."
    assert abs(G.feature_gb(1, 4096, 4 * 576, 4) * 2**30 / 1e6 - 37.7) < 0.1
    assert G.feature_gb(3000, 4096, 2304, 4) > G.FEATURE_GB > G.feature_gb(1000, 1024, 2304, 4)   # the long-prompt run goes online, session 22's did not

def _answers_tar(tmp_path, bf16: dict, int4: dict):
    import io, tarfile
    tar = tmp_path/'regen_data.tar.xz'
    with tarfile.open(tar, 'w:xz') as t:
        for n, d in (('bf16', bf16), ('int4', int4)):
            b = json.dumps(d).encode(); i = tarfile.TarInfo(f'regen_{n}.json'); i.size = len(b); t.addfile(i, io.BytesIO(b))
    return tar

def test_regen_check_and_record_e2e(tmp_path):
    """regen_check counts a run's answers against the extra file (rows past the bundle's are its rows, extra/long ids the
    long prompts); record_e2e joins the e2e file, the training record and that check, and refuses a missing note or an
    existing result."""
    extra = tmp_path/'prompts_extra.json'   # bundle rows 0-3, extra rows 4-7 (rows 5 and 7 long)
    extra.write_text(json.dumps(dict(train=[dict(id='extra/code/1'), dict(id='extra/long/essay/2'), dict(id='extra/text/3'), dict(id='extra/long/wiki/4')])))
    tar = _answers_tar(tmp_path, {str(i): 'a' for i in (0, 1, 2, 3, 4, 6, 7)}, {str(i): 'b' for i in (0, 2)})
    c = G.regen_check(tar, extra, bf16_asked=8, int4_asked=4, bundle_rows=4)
    assert (c['bf16_answers'], c['bf16_long_prompts_asked'], c['bf16_long_prompts_answered'], c['bf16_missing_rows_all_long']) == (7, 2, 1, True)
    assert (c['int4_answers'], c['int4_long_prompts_asked'], c['int4_missing_rows_all_long']) == (2, 0, False)
    e2e, rec = tmp_path/'e2e.json', tmp_path/'train.json'
    e2e.write_text(json.dumps(dict(provenance=dict(git_sha='abc'), eval={})))
    rec.write_text(json.dumps(dict(data=dict(bf16=dict(asked=8), int4=dict(asked=4)), steps=dict(stage1=2))))
    out = tmp_path/'drafter_e2e_x_gpu.json'
    with pytest.raises(ValueError, match='--note'): G.record_e2e(e2e, out, '', rec, tar, extra)
    G.record_e2e(e2e, out, 'the command', rec, tar, extra)
    doc = json.loads(out.read_text())
    assert doc['provenance'] == dict(git_sha='abc', note='the command') and doc['train']['steps'] == dict(stage1=2)
    assert doc['regen_check']['bf16_asked'] == 8 and doc['regen_answers']['sha256'] == G.sha(tar.read_bytes())
    with pytest.raises(ValueError, match='exists'): G.record_e2e(e2e, out, 'again', rec, tar, extra)

def test_record_regen_run(tmp_path, monkeypatch):
    "Each regen call appends its loop and attention to regen_<name>_runs.json; answers saved before it have none."
    assert G.regen_runs(tmp_path, 'bf16') == []
    monkeypatch.setenv('EFFQWEN_REGEN_STATIC', '1'); monkeypatch.setenv('EFFQWEN_REGEN_GQA', '1')
    G.record_regen_run(tmp_path, 'bf16', 12, 3.04)
    monkeypatch.setenv('EFFQWEN_REGEN_STATIC', '0'); monkeypatch.delenv('EFFQWEN_REGEN_GQA')
    G.record_regen_run(tmp_path, 'bf16', 5, 1.0)
    runs = G.regen_runs(tmp_path, 'bf16')
    assert [(r['answered'], r['seconds'], r['static'], r['gqa']) for r in runs] == [(12, 3.0, True, True), (5, 1.0, False, False)]
    assert G.regen_runs(tmp_path, 'int4') == [] and not list(tmp_path.glob('*.tmp'))
