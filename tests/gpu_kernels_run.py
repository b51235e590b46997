"""GPU benchmark run of `effqwen.kernels` (issue 7), written so that partial results survive a time limit.

1. The previous kernels on the key shape, Qwen3.5-4B gate/up 9216x2560 at M = 1 and 16, in this same run (a
   same-machine before/after): the compressed-tensors-layout kernels with the configs tuned in the first run
   (`*_ct_old`), and the kernel-layout tensor-core kernels with the configs tuned in the committed
   `kernels_h200.json` (`*_tc_prev`; at M = 1 the CUDA-core `mv` kernels replace them).
2. The timer's floors at the key shape: an empty kernel and a plain streaming read of the same bytes.
3. `benchmark_linears` at the 4B shapes (then 9B while the budget lasts), M in {1, 2, 4, 8, 16}; the result JSON
   is rewritten after every shape.

Usage (GPU machine): EFFQWEN_OUT=$OUT python3 tests/gpu_kernels_run.py [time budget in s for starting new shapes]
(env TUNE_REP=0: no tuning, the committed picks; the Gluon fragment kernels are timed beside for M <= 16)
Run `pytest tests/test_kernels_gpu.py` first for correctness.
"""
import json, os, sys, time
from dataclasses import asdict
from pathlib import Path
import torch
from effqwen import kernels as K
from effqwen.core import write_result, repo_root, rel_error

def floors():
    """What the timer gives for (a) an empty kernel and (b) a plain streaming read of the key shape's W4A16 bytes
    (9216x2560 packed + scales, 12.2 MB), under both L2 flushes: the achievable floor at this size, as opposed to the
    datasheet roofline."""
    import triton, triton.language as tl

    @triton.jit
    def _empty(p): pass

    @triton.jit
    def _readsum(p, out, n_words, BLOCK: tl.constexpr, ITERS: tl.constexpr):
        pid = tl.program_id(0); acc = tl.zeros((BLOCK,), tl.int32)
        for i in tl.static_range(ITERS):
            o = (pid * ITERS + i) * BLOCK + tl.arange(0, BLOCK)
            acc ^= tl.load(p + o, mask=o < n_words, other=0)
        tl.store(out + pid, tl.sum(acc, 0))

    buf = torch.zeros(16, device='cuda')
    res = dict(empty_kernel_us=K._bench(lambda: _empty[(1,)](buf)), empty_kernel_1024_programs_us=K._bench(lambda: _empty[(1024,)](buf)))
    nbytes = K.weight_bytes('w4a16', 9216, 2560)
    w = torch.randint(0, 2**31 - 1, (nbytes // 4,), device='cuda', dtype=torch.int32)
    out = torch.empty(1 << 20, device='cuda', dtype=torch.int32)
    for flush in ('memset', 'read'):
        best = min(K._bench(lambda: _readsum[(triton.cdiv(w.numel(), B * I),)](w, out, w.numel(), BLOCK=B, ITERS=I, num_warps=nw), flush=flush)
                   for B, I, nw in [(1024, 1, 4), (1024, 4, 4), (2048, 2, 8)])
        res[f'read_{nbytes}B_{flush}_us'] = best
    print('floors:', {k: round(v, 2) for k, v in res.items()}, flush=True)
    return dict(res, note='best of 3 grid shapes of a streaming XOR-reduce kernel; same _bench timer as every row')

def old_kernels(out):
    "Time the compressed-tensors-layout kernels with their committed tuned configs at the key shape."
    prev = json.loads((repo_root()/'data'/'results'/'kernels_h200.json').read_text())
    N, Kd, g, dev, dt = 9216, 2560, 128, 'cuda', torch.bfloat16
    torch.manual_seed(0)
    w4, s4 = K.pack_int4(torch.randint(-8, 8, (N, Kd), device=dev)), (torch.rand(N, Kd // g, device=dev) * 0.01 + 1e-3).to(dt)
    b3 = K.pack_sign_words(torch.randint(0, 2, (3, N, Kd), device=dev, dtype=torch.int8) * 2 - 1)
    a3 = (torch.rand(3, N, Kd // g, device=dev) * 0.01).to(dt)
    rows = []
    first = {r['method'] + str(r['M']): r.get('config') for r in prev.get('old_kernels', [])}   # first-run ct configs
    tc_prev = {k: v['best'] for k, v in prev['tuned'].items()}                                  # second-run tc configs
    for M in (1, 16):
        x = torch.randn(M, Kd, device=dev, dtype=dt)
        for fmt, mm, w, s in [('w4a16', K.w4a16_matmul, K.w4a16_to_kernel_layout(w4), s4), ('bcq', K.bcq_matmul, K.bcq_to_kernel_layout(b3), a3)]:
            cfg = tc_prev.get(f'{fmt} M<={M} {N}x{Kd}')
            if not cfg or cfg['kernel'] != 'tc': continue
            cfg = K.KernelConfig(**cfg)
            ref = (K.w4a16_mm_ref if fmt == 'w4a16' else K.bcq_mm_ref)(x, w, s, kernel_layout=True)
            err = rel_error(mm(x, w, s, config=cfg, kernel_layout=True), ref)
            us = K._bench(lambda: mm(x, w, s, config=cfg, kernel_layout=True), 5)
            rows.append(dict(shape='Qwen3.5-4B/gate_proj', N=N, K=Kd, M=M, method=('w4a16' if fmt == 'w4a16' else 'bcq3') + '_tc_prev',
                             config=asdict(cfg), us=us, rel_err=err))
            print(f'prev tc {fmt} M={M}: {us:.1f} us (rel. err {err:.2g}, config {cfg})', flush=True)
        for fmt, mm, w, s in [('w4a16', K.w4a16_matmul, w4, s4), ('bcq', K.bcq_matmul, b3, a3)]:
            entry = first.get(('w4a16' if fmt == 'w4a16' else 'bcq3') + f'_ct_old{M}')
            cfg = K.KernelConfig(**entry) if entry else None
            ref = (K.w4a16_mm_ref if fmt == 'w4a16' else K.bcq_mm_ref)(x, w, s)
            err = rel_error(mm(x, w, s, config=cfg), ref)
            us = K._bench(lambda: mm(x, w, s, config=cfg), 5)
            rows.append(dict(shape='Qwen3.5-4B/gate_proj', N=N, K=Kd, M=M, method=('w4a16' if fmt == 'w4a16' else 'bcq3') + '_ct_old',
                             config=entry, us=us, rel_err=err))
            print(f'old {fmt} M={M}: {us:.1f} us (rel. err {err:.2g}, config {cfg})', flush=True)
    prev_path = repo_root()/'_scratch'/'kernels_prev.py'   # the committed kernels.py before the issue-7 rework (optional)
    if prev_path.exists():
        import importlib.util
        spec = importlib.util.spec_from_file_location('kernels_prev', prev_path); P = importlib.util.module_from_spec(spec); spec.loader.exec_module(P)
        x = torch.randn(1, Kd, device=dev, dtype=dt)
        for fmt, mm, w, s, cfg in [('w4a16', P.w4a16_matmul, K.w4a16_to_kernel_layout(w4), s4, P.KernelConfig('mv', 64, 128, 4, 4, 2)),
                                   ('bcq3', P.bcq_matmul, K.bcq_to_kernel_layout(b3), a3, P.KernelConfig('mv', 256, 128, 16, 4, 1))]:
            ref = (K.w4a16_mm_ref if fmt == 'w4a16' else K.bcq_mm_ref)(x, w, s, kernel_layout=True)
            err = rel_error(mm(x, w, s, config=cfg, kernel_layout=True), ref)
            us = K._bench(lambda: mm(x, w, s, config=cfg, kernel_layout=True), 5)
            rows.append(dict(shape='Qwen3.5-4B/gate_proj', N=N, K=Kd, M=1, method=f'{fmt}_mv_prev', config=asdict(cfg), us=us, rel_err=err))
            print(f'prev mv {fmt} M=1: {us:.1f} us (rel. err {err:.2g}, config {cfg})', flush=True)
    (out/'old_kernels.json').write_text(json.dumps(dict(rows=rows, note='committed configs, this run'), indent=1))
    return rows

if __name__ == '__main__':
    budget = float(sys.argv[1]) if len(sys.argv) > 1 else 120
    out = Path(os.environ['EFFQWEN_OUT'])
    t = time.time()
    try: fl = floors()
    except Exception as e: fl = {}; print('floors failed:', e, flush=True)
    try: old = old_kernels(out)
    except Exception as e: old = []; print('old kernels failed:', e, flush=True)
    committed = json.loads((repo_root()/'data'/'results'/'kernels_h200.json').read_text())
    keep = {k: committed[k] for k in ('previous_run',) if k in committed}   # first run's M = 64/512 rows (prefill projection)
    tune_rep = int(os.environ.get('TUNE_REP', '2'))   # 0: no tuning; the library kernels take the committed picks (autoloaded), carried over
    if tune_rep == 0:
        keep |= dict(tuned=committed.get('tuned', {}), tuned_from=f"not re-tuned (TUNE_REP=0): the picks of the committed run of {committed['provenance'].get('date', '?')[:10]}, "
                                                          f"git {committed['provenance'].get('git_sha', '?')[:7]}, which the library kernels loaded")
    def save(r):
        path = write_result('kernels_h200', dict(r, old_kernels=old, floors=fl, **keep), 'gpu')
        if os.environ.get('EFFQWEN_SHA'):   # the GPU copy's .git can be stale: stamp the sha of the checkout that sent the tree
            doc = json.loads(path.read_text())
            doc['provenance'].update(git_sha=os.environ['EFFQWEN_SHA'], note=os.environ.get('EFFQWEN_NOTE', ''), command=os.environ.get('EFFQWEN_CMD', ''))
            path.write_text(json.dumps(doc, indent=1) + '\n')
        (out/'kernels_h200.json').write_text(path.read_text())
    res = K.benchmark_linears(models=('Qwen3.5-4B', 'Qwen3.5-9B'), Ms=(1, 2, 4, 8, 16), tune_rep=tune_rep,
                              progress=lambda m: print(f'[{time.time() - t:5.0f}s] {m}', flush=True), checkpoint=save, time_budget_s=budget)
    save(res)
    print(f'DONE in {time.time() - t:.0f}s', flush=True)
