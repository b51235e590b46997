"`python -m effqwen.train` on 2 CPU processes (gloo DDP) == 1 process at the same global batch; rank 0 alone writes checkpoints."
import json
from pathlib import Path
import pytest, torch
import effqwen.train
from effqwen.train import main, compare_runs
from effqwen.model import tiny_qwen35


def _fresh_accelerate_state():
    "Forked workers inherit accelerate's process-wide state: clear what an earlier test's Accelerator left, so the launch is a real 2-process run."
    from accelerate.state import AcceleratorState, GradientState
    AcceleratorState._reset_state(reset_partial_state=True); GradientState._reset_state()


def _worker(argv):
    torch.set_num_threads(1)
    main(argv)


def _args(stage, d, world):
    return [stage, '--profile', 'ci', '--steps', '3', '--global-batch', '4', '--micro-batch', '1', '--eval-every', '2',
            '--out', str(d), '--ckpt', str(d/f'ckpt{world}'), '--name', f'{stage}_w{world}']


@pytest.mark.parametrize('stage', ['qad', 'drafter'])
def test_two_processes_equal_one(tmp_path, stage):
    from accelerate import debug_launcher
    tiny_qwen35(0)   # the forked workers inherit these imports (transformers' model code); no Accelerator before the launch
    _fresh_accelerate_state()
    debug_launcher(_worker, args=(_args(stage, tmp_path, 2),), num_processes=2)
    _fresh_accelerate_state()
    one = main(_args(stage, tmp_path, 1))
    res = {w: json.loads((tmp_path/'data'/'results'/f'{stage}_w{w}_ci.json').read_text()) for w in (1, 2)}
    test = {w: (r['processes'], r['global_batch'], r['grad_accum'], r['steps_done']) for w, r in res.items()}
    assert test == {1: (1, 4, 4, 3), 2: (2, 4, 2, 3)}
    torch.testing.assert_close(torch.tensor(res[2]['train_loss']), torch.tensor(res[1]['train_loss']), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.tensor(res[2]['held_out']), torch.tensor(res[1]['held_out']), atol=1e-5, rtol=1e-5)
    assert len(set(res[1]['train_loss'])) > 1, 'the loss did not move: the comparison would be vacuous'
    c = compare_runs(res[1], res[2])
    assert c['loss_max_rel_diff'] < 1e-4 and c['processes'] == [1, 2] and c['efficiency'] > 0
    # rank 0 alone wrote the checkpoint: one state, nothing per process
    names = {p.relative_to(tmp_path/'ckpt2').as_posix() for p in (tmp_path/'ckpt2').rglob('*') if p.is_file()}
    want = {'qad': {'best.pt', 'last/state.pt', 'last/history.json'}, 'drafter': {'last.pt', 'drafter/config.json', 'drafter/model.safetensors'}}
    assert names == want[stage], names
    assert one['path'].endswith(f'{stage}_w1_ci.json')


def test_resume_across_process_counts(tmp_path):
    "A run interrupted on 2 processes resumes on 1 (the checkpoint is the whole run's state) and ends as an uninterrupted run."
    from accelerate import debug_launcher
    tiny_qwen35(0)
    _fresh_accelerate_state()
    a = _args('drafter', tmp_path, 2)
    debug_launcher(_worker, args=(a + ['--stop-after', '2'],), num_processes=2)
    _fresh_accelerate_state()
    resumed = main(a + ['--resume', '--name', 'resumed'])   # the same split of the global batch: 1 process x 4 micro-batches of 1
    full = main(_args('drafter', tmp_path, 1) + ['--name', 'full'])
    assert resumed['steps_done'] == full['steps_done'] == 3
    torch.testing.assert_close(torch.tensor(resumed['train_loss']), torch.tensor(full['train_loss']), atol=1e-5, rtol=1e-5)
