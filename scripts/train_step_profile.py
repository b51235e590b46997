"""Where one drafter training step spends its GPU time, at a run's sizes (`gpu_drafter.py train`: batch 4 chunks of
4,096 tokens, 512 anchors, 2 layers, the 16,384-row draft vocabulary, float32 with TF32, flex_attention's block mask):
`dflash_loss` + backward + clip + AdamW on random response tokens and random bf16 features (the step's cost does not
depend on their values). Session 31 trained at 107 ms a step; by arithmetic (not measured) the step's matmuls are about
4 TFLOP, a few ms at the H200's TF32 rate, so the profile says what the rest is.

    WORK=/tmp/xfer PYTHONPATH=/tmp/site:. OUT=$OUT python3 scripts/train_step_profile.py   # -> data/results/drafter_train_step_profile_<gpu>.json
    DEV=cpu WORK=... python3 scripts/train_step_profile.py                                 # a dry run at tiny sizes (no result written)
"""
import json, os, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import torch

def top_ops(prof, cuda: bool, n: int = 25) -> tuple[list, float]:
    "A torch.profiler run's n ops of most self time (GPU time on CUDA, else CPU), and the self time of all, in ms."
    attr = 'self_device_time_total' if cuda else 'self_cpu_time_total'
    ev = sorted(prof.key_averages(), key=lambda e: -getattr(e, attr, 0))
    return ([dict(name=e.key[:120], self_ms=getattr(e, attr) / 1e3, calls=e.count) for e in ev[:n]],
            sum(getattr(e, attr) for e in prof.key_averages()) / 1e3)

def main():
    from transformers import AutoModelForCausalLM
    from effqwen.core import write_result
    from effqwen.dflash import DFlashConfig, DFlashDrafter, dflash_loss
    dev = os.environ.get('DEV', 'cuda'); cuda = dev == 'cuda'; work = os.environ.get('WORK', '/tmp/xfer')
    B, S, N, layers, dv = (4, 4096, 512, 2, 16384) if cuda else (1, 128, 8, 1, 512)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    target = AutoModelForCausalLM.from_pretrained(f'{work}/smollm2', dtype=torch.float32).to(dev).eval()
    cfg = DFlashConfig.for_target(target, mask_token_id=16, num_hidden_layers=layers, block_size=16, n_taps=4)
    m = DFlashDrafter(cfg).to(dev).bind(target)
    m.set_draft_vocab(torch.arange(dv))
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(100, cfg.vocab_size, (B, S), generator=g).to(dev)
    lm = torch.zeros(B, S, dtype=torch.bool, device=dev); lm[:, S // 8:] = True
    feats = torch.randn(B, S, cfg.n_taps * cfg.hidden_size, generator=g).to(dev, torch.bfloat16)
    params = [p for p in m.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    def step():
        r = dflash_loss(m, ids, feats, lm, N, 7.0, g)
        opt.zero_grad(set_to_none=True); r.loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0); opt.step()
        return r
    m.train()
    for _ in range(3): step()                                     # warm-up (flex_attention compiles)
    sync(); t = time.time(); n = 5
    for _ in range(n): step()
    sync(); step_ms = (time.time() - t) / n * 1e3
    print(f'step {step_ms:.1f} ms', flush=True)
    from torch.profiler import profile, ProfilerActivity
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=acts) as prof:
        step(); sync()
    top, total = top_ops(prof, cuda)
    for r in top[:25]: print(f"{r['self_ms']:8.2f} ms {r['calls']:5d}  {r['name']}")
    print(f'profiled step: {total:.1f} ms of {"GPU" if cuda else "CPU"} self time; wall {step_ms:.1f} ms a step', flush=True)
    if not cuda: print('dry run on the CPU: no result written'); return
    if os.environ.get('OUT'): os.environ['EFFQWEN_OUT'] = os.environ['OUT']
    gpu = torch.cuda.get_device_name().split()[-1].lower()
    print(write_result(f'drafter_train_step_profile_{gpu}', dict(batch=B, seq=S, anchors=N, layers=layers, draft_vocab=dv, step_ms=step_ms,
                                                                gpu_self_ms=total, top_kernels=top, peak_gb=torch.cuda.max_memory_allocated() / 2**30,
                                                                note='effqwen.dflash.dflash_loss + backward + clip + AdamW, float32 drafter with TF32, '
                                                                     'flex_attention block mask, random tokens and bf16 features; 3 warm-up steps, '
                                                                     '5 timed, then one profiled (torch.profiler, self CUDA time per op)'), 'gpu', device='cuda'))

if __name__ == '__main__':
    main()
