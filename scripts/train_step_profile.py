"""Where one drafter training step spends its GPU time, at a run's sizes (`gpu_drafter.py train`: batch 4 chunks of
4,096 tokens, 512 anchors, 2 layers, the 16,384-row draft vocabulary, float32 with TF32, flex_attention's block mask):
`dflash_loss` + backward + clip + AdamW on random response tokens and random bf16 features (the step's cost does not
depend on their values), with the drafter's flex_attention in float32 and in bf16 (`effqwen.dflash.FLEX_DTYPE`, what
`DRAFTER_ATTN_DTYPE=bfloat16` trains with), and how far the bf16 attention's loss and gradients are from float32's on
the same weights and batch. Without a bundle under WORK the target is SmolLM2's sizes with random weights.

Session 33's profile (`drafter_train_step_profile_h200.json`, float32 only) put flex_attention's backward at 11x its
forward: in torch 2.13's source (the GPU has 2.11) inductor gives a float32 backward 16x16 tiles and one stage, bf16 on sm90 64x128 and three.
That file lists each compiled kernel twice (the launching op and the kernel share a name); `top_ops` now keeps the
device-side kernels only.

    WORK=/tmp/xfer PYTHONPATH=/tmp/site:. OUT=$OUT python3 scripts/train_step_profile.py   # -> data/results/drafter_train_step_attn_<gpu>.json
    DEV=cpu WORK=... python3 scripts/train_step_profile.py                                 # a dry run at tiny sizes (no result written;
                                                                                           # the CPU trains on the dense mask, so both runs are float32 there)
"""
import json, os, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import torch

def top_ops(prof, cuda: bool, n: int = 25) -> tuple[list, float]:
    """A torch.profiler run's n entries of most self time and the self time of all, in ms: on CUDA the device-side kernels
    only (an op that launches a kernel carries that kernel's time too, and a compiled kernel's op has its name), else CPU ops."""
    from torch.autograd import DeviceType
    attr = 'self_device_time_total' if cuda else 'self_cpu_time_total'
    ev = list(prof.key_averages())
    if cuda: ev = [e for e in ev if getattr(e, 'device_type', None) == DeviceType.CUDA] or ev
    ev.sort(key=lambda e: -getattr(e, attr, 0))
    return ([dict(name=e.key[:120], self_ms=getattr(e, attr) / 1e3, calls=e.count) for e in ev[:n]],
            sum(getattr(e, attr) for e in ev) / 1e3)

def main():
    from transformers import AutoModelForCausalLM
    from effqwen.core import write_result
    import effqwen.dflash as D
    from effqwen.dflash import DFlashConfig, DFlashDrafter, dflash_loss
    dev = os.environ.get('DEV', 'cuda'); cuda = dev == 'cuda'; work = os.environ.get('WORK', '/tmp/xfer')
    B, S, N, layers, dv = (4, 4096, 512, 2, 16384) if cuda else (1, 128, 8, 1, 512)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    if Path(f'{work}/smollm2').exists():
        target, what = AutoModelForCausalLM.from_pretrained(f'{work}/smollm2', dtype=torch.float32).to(dev).eval(), 'SmolLM2-135M-Instruct'
    else:                                       # no bundle on this machine: SmolLM2's sizes with random weights (the step's cost
        from round_graph_bench import smollm2_shaped   # does not depend on the frozen embedding / head values)
        target, what = smollm2_shaped(dev, torch.float32).eval(), 'random weights at SmolLM2-135M sizes'
    print('target:', what, flush=True)
    cfg = DFlashConfig.for_target(target, mask_token_id=16, num_hidden_layers=layers, block_size=16, n_taps=4)
    m = DFlashDrafter(cfg).to(dev).bind(target)
    m.set_draft_vocab(torch.arange(dv))
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(100, cfg.vocab_size, (B, S), generator=g).to(dev)
    lm = torch.zeros(B, S, dtype=torch.bool, device=dev); lm[:, S // 8:] = True
    feats = torch.randn(B, S, cfg.n_taps * cfg.hidden_size, generator=g).to(dev, torch.bfloat16)
    params = [p for p in m.parameters() if p.requires_grad]
    init = [p.detach().clone() for p in params]
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    dtypes = dict(float32=None, bfloat16=torch.bfloat16)

    def loss_grads(dt):   # the loss and gradients at the initial weights, same batch and anchors
        D.FLEX_DTYPE = dt
        with torch.no_grad():
            for p, p0 in zip(params, init): p.copy_(p0)
        m.zero_grad(set_to_none=True); r = dflash_loss(m, ids, feats, lm, N, 7.0, torch.Generator().manual_seed(1)); r.loss.backward()
        return r.loss.item(), torch.cat([p.grad.flatten() for p in params]).double()   # (a float32 cosine of ~10M entries can pass 1)
    m.train()
    (l32, g32), (l16, g16) = loss_grads(None), loss_grads(torch.bfloat16)
    agree = dict(loss_float32=l32, loss_bfloat16=l16, loss_rel_diff=abs(l16 - l32) / abs(l32),
                 grad_cosine=torch.nn.functional.cosine_similarity(g32, g16, dim=0).item(), grad_rel_error=((g16 - g32).norm() / g32.norm()).item())
    print('bf16 attention against float32 at the same weights and batch:', {k: round(v, 6) for k, v in agree.items()}, flush=True)

    runs = {}
    from torch.profiler import profile, ProfilerActivity
    for name, dt in dtypes.items():
        D.FLEX_DTYPE = dt
        opt = torch.optim.AdamW(params, lr=1e-4)
        def step():
            r = dflash_loss(m, ids, feats, lm, N, 7.0, g)
            opt.zero_grad(set_to_none=True); r.loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0); opt.step()
            return r
        for _ in range(3): step()                                     # warm-up (flex_attention compiles for each dtype)
        sync(); t = time.time(); n = 5
        for _ in range(n): step()
        sync(); step_ms = (time.time() - t) / n * 1e3
        with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
            step(); sync()
        top, total = top_ops(prof, cuda)
        print(f'attention {name}: step {step_ms:.1f} ms; profiled step {total:.1f} ms of {"GPU kernel" if cuda else "CPU"} self time', flush=True)
        for r in top[:12]: print(f"   {r['self_ms']:8.2f} ms {r['calls']:5d}  {r['name']}")
        runs[name] = dict(step_ms=step_ms, kernel_ms=total, top_kernels=top)
    D.FLEX_DTYPE = None
    speedup = runs['float32']['step_ms'] / runs['bfloat16']['step_ms']
    print(f'bf16 attention: {speedup:.2f}x the float32 step', flush=True)
    if not cuda: print('dry run on the CPU: no result written'); return
    if os.environ.get('OUT'): os.environ['EFFQWEN_OUT'] = os.environ['OUT']
    gpu = torch.cuda.get_device_name().split()[-1].lower()
    print(write_result(f'drafter_train_step_attn_{gpu}', dict(batch=B, seq=S, anchors=N, layers=layers, draft_vocab=dv, runs=runs, speedup=speedup,
                                                             agreement=agree, peak_gb=torch.cuda.max_memory_allocated() / 2**30, target=what,
                                                             note='effqwen.dflash.dflash_loss + backward + clip + AdamW, float32 drafter with TF32, '
                                                                  'flex_attention block mask with q/k/v in float32 and in bf16 (FLEX_DTYPE), random tokens '
                                                                  'and bf16 features; per precision 3 warm-up steps, 5 timed, then one profiled '
                                                                  '(torch.profiler, self time of the device kernels); agreement: loss and gradients '
                                                                  'of both at the initial weights, same batch and anchors'), 'gpu', device='cuda'))

if __name__ == '__main__':
    main()
