"Drafter training through accelerate: 2 CPU processes (gloo DDP) == 1 process with the same micro-batches accumulated."
import torch
from effqwen.model import tiny_qwen35
from effqwen.dflash import DFlashConfig, DFlashDrafter, target_features, train_drafter


def _setup():
    torch.manual_seed(0)
    tq = tiny_qwen35(0, initializer_range=0.2)
    ids = torch.randint(0, 255, (8, 40))
    lm = torch.zeros_like(ids, dtype=torch.bool); lm[:, 6:] = True
    dr = DFlashDrafter(DFlashConfig.for_target(tq, mask_token_id=255, block_size=8, num_hidden_layers=1)).bind(tq)
    with torch.no_grad(): feats = target_features(tq, ids, dr.target_layer_ids)
    return tq, dr, ids, lm, feats


def _train(out, grad_accum, world):
    from accelerate import Accelerator
    torch.set_num_threads(1)
    tq, dr, ids, lm, feats = _setup()
    acc = Accelerator(gradient_accumulation_steps=grad_accum, cpu=True) if world > 1 else None
    r = train_drafter(dr, None, ids, lm, steps=3, batch_size=4, n_anchors=8, lr=3e-3, features=feats, grad_accum=grad_accum, accelerator=acc)
    if acc is None or acc.is_main_process:
        torch.save(dict(state={k: v.detach().clone() for k, v in dr.state_dict().items()}, losses=r.losses), out)


def _fresh_accelerate_state():
    "Forked workers inherit accelerate's process-wide state: clear what an earlier test's Accelerator left, so the launch is a real 2-process run."
    from accelerate.state import AcceleratorState, GradientState
    AcceleratorState._reset_state(reset_partial_state=True); GradientState._reset_state()


def test_ddp_two_processes_match_grad_accumulation(tmp_path):
    from accelerate import debug_launcher
    _setup()   # the forked workers inherit these imports (transformers' model code: ~20 s each to import on 2 busy cores);
               # no Accelerator before the launch: a forked worker would inherit its process state (one process, not DDP)
    _fresh_accelerate_state()
    debug_launcher(_train, args=(str(tmp_path / 'ddp.pt'), 1, 2), num_processes=2)
    _train(str(tmp_path / 'single.pt'), 2, 1)
    ddp, single = torch.load(tmp_path / 'ddp.pt'), torch.load(tmp_path / 'single.pt')
    assert ddp['state'].keys() == single['state'].keys() and ddp['state']
    for k in ddp['state']: torch.testing.assert_close(ddp['state'][k], single['state'][k], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(torch.tensor(ddp['losses']), torch.tensor(single['losses']), atol=1e-5, rtol=1e-5)
    start = _setup()[1].state_dict()
    moved = sum(int((start[k] != v).sum()) for k, v in single['state'].items())
    assert moved > 0, 'training did not change any weight: the comparison would be vacuous'


def test_batch_must_split_over_processes_and_micro_batches():
    import pytest
    tq, dr, ids, lm, feats = _setup()
    with pytest.raises(ValueError, match='does not split'):
        train_drafter(dr, None, ids, lm, steps=1, batch_size=3, grad_accum=2, features=feats)
