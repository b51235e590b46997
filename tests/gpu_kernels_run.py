"""GPU benchmark run of `effqwen.kernels` (issue 7), written so that partial results survive a time limit.

1. The previous kernels (compressed-tensors layout, the configs tuned in the committed `kernels_h200.json`) on the
   key shape, Qwen3.5-4B gate/up 9216x2560 at M = 1 and 16, in this same run: a same-machine before/after.
2. `benchmark_linears` at the 4B shapes (then 9B while the budget lasts), M in {1, 2, 4, 8, 16}; the result JSON
   is rewritten after every shape.

Usage (GPU machine): EFFQWEN_OUT=$OUT python3 tests/gpu_kernels_run.py [time budget in s for starting new shapes]
Run `pytest tests/test_kernels_gpu.py` first for correctness.
"""
import json, os, sys, time
from pathlib import Path
import torch
from effqwen import kernels as K
from effqwen.core import write_result, repo_root, rel_error

def old_kernels(out):
    "Time the compressed-tensors-layout kernels with their committed tuned configs at the key shape."
    prev = json.loads((repo_root()/'data'/'results'/'kernels_h200.json').read_text())
    N, Kd, g, dev, dt = 9216, 2560, 128, 'cuda', torch.bfloat16
    torch.manual_seed(0)
    w4, s4 = K.pack_int4(torch.randint(-8, 8, (N, Kd), device=dev)), (torch.rand(N, Kd // g, device=dev) * 0.01 + 1e-3).to(dt)
    b3 = K.pack_sign_words(torch.randint(0, 2, (3, N, Kd), device=dev, dtype=torch.int8) * 2 - 1)
    a3 = (torch.rand(3, N, Kd // g, device=dev) * 0.01).to(dt)
    rows = []
    for M in (1, 16):
        x = torch.randn(M, Kd, device=dev, dtype=dt)
        for fmt, mm, w, s in [('w4a16', K.w4a16_matmul, w4, s4), ('bcq', K.bcq_matmul, b3, a3)]:
            entry = prev['tuned'].get(f'{fmt} M<={M} {N}x{Kd}')
            cfg = K.KernelConfig(**entry['best']) if entry else None
            ref = (K.w4a16_mm_ref if fmt == 'w4a16' else K.bcq_mm_ref)(x, w, s)
            err = rel_error(mm(x, w, s, config=cfg), ref)
            us = K._bench(lambda: mm(x, w, s, config=cfg), 5)
            rows.append(dict(shape='Qwen3.5-4B/gate_proj', N=N, K=Kd, M=M, method=('w4a16' if fmt == 'w4a16' else 'bcq3') + '_ct_old',
                             config=entry and entry['best'], us=us, rel_err=err))
            print(f'old {fmt} M={M}: {us:.1f} us (rel. err {err:.2g}, config {cfg})', flush=True)
    (out/'old_kernels.json').write_text(json.dumps(dict(rows=rows, note='committed configs, this run'), indent=1))
    return rows

if __name__ == '__main__':
    budget = float(sys.argv[1]) if len(sys.argv) > 1 else 120
    out = Path(os.environ['EFFQWEN_OUT'])
    t = time.time()
    try: old = old_kernels(out)
    except Exception as e: old = []; print('old kernels failed:', e, flush=True)
    save = lambda r: write_result('kernels_h200', dict(r, old_kernels=old), 'gpu')
    res = K.benchmark_linears(models=('Qwen3.5-4B', 'Qwen3.5-9B'), Ms=(1, 2, 4, 8, 16), tune_rep=2,
                              progress=lambda m: print(f'[{time.time() - t:5.0f}s] {m}', flush=True), checkpoint=save, time_budget_s=budget)
    save(res)
    print(f'DONE in {time.time() - t:.0f}s', flush=True)
