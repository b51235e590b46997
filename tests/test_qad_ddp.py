"QAD through accelerate: 2 CPU processes (gloo DDP) == 1 process with the equivalent gradient accumulation."
import copy, os
import torch, torch.nn as nn
from effqwen.model import tiny_qwen35
from effqwen.qad import QADConfig, qad_train, rtn_grid, to_frozen_grid


def _setup():
    torch.manual_seed(0)
    teacher = tiny_qwen35(0)
    with torch.no_grad(): teacher.model.norm.weight.fill_(3.0)
    names = [n for n, l in teacher.named_modules() if isinstance(l, nn.Linear) and 'lm_head' not in n]
    ids = torch.randint(0, 256, (16, 16))
    data = dict(input_ids=ids, attention_mask=torch.ones_like(ids))
    return teacher, rtn_grid(teacher, names, 4, 32), data


def _train(out, grad_accum):
    from accelerate import Accelerator
    torch.set_num_threads(1)
    teacher, grid, data = _setup()
    student = to_frozen_grid(copy.deepcopy(teacher), grid)
    cfg = QADConfig(steps=4, lr=3e-4, micro_batch=2, grad_accum=grad_accum, eval_every=100, chunk=8, restore_best=False)
    acc = Accelerator(gradient_accumulation_steps=grad_accum, cpu=True)
    qad_train(student, teacher, data, data, cfg, accelerator=acc)
    if acc.is_main_process:
        torch.save({n: p.detach() for n, p in student.named_parameters() if p.requires_grad}, out)


def _fresh_accelerate_state():
    "Forked workers inherit accelerate's process-wide state: clear what an earlier test's Accelerator left, so the launch is a real 2-process run."
    from accelerate.state import AcceleratorState, GradientState
    AcceleratorState._reset_state(reset_partial_state=True); GradientState._reset_state()


def test_ddp_two_processes_match_grad_accumulation(tmp_path):
    from accelerate import debug_launcher
    _fresh_accelerate_state()
    debug_launcher(_train, args=(str(tmp_path / 'ddp.pt'), 1), num_processes=2)
    _train(str(tmp_path / 'single.pt'), 2)
    ddp, single = torch.load(tmp_path / 'ddp.pt'), torch.load(tmp_path / 'single.pt')
    assert ddp.keys() == single.keys() and ddp
    moved = 0
    for k in ddp:
        torch.testing.assert_close(ddp[k], single[k], atol=1e-6, rtol=1e-5)
    teacher, grid, _ = _setup()
    start = to_frozen_grid(copy.deepcopy(teacher), grid)
    moved = sum(int((p.detach() != single[n]).sum()) for n, p in start.named_parameters() if p.requires_grad)
    assert moved > 0, 'training did not change any weight: the comparison would be vacuous'
