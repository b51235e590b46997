#!/usr/bin/env python3
"""Kernel shapes for the 4B LM head's INT8 GEMV at one row (248320 x 2560 int8, per-row scales), against the library's
`w8a16_matmul` (tl.dot of the bf16 row padded to 16 rows with the weight tile transposed): the same product with the
operands swapped (weight tile as the dot's first operand: 64+ weight rows on the MMA's M side, the activation row padded
to 16 on N), and a register-only GEMV (no dot: int8 -> float32 times the row, summed over K). Each with the row-max
epilogue `ArgmaxHead` needs (atomic max per program), each checked against the library's output, each timed as
CUDA-graph replays (`gluon_stream_probe._chain_us`), swept over tile sizes, warps and stages.

GPU:  PYTHONPATH=. OUT=... python3 scripts/head_gemv_probe.py     -> data/results/head_gemv_probe_h200.json (and $OUT)
      LIB_ONLY=1: only the library kernel, at the 16 configurations `argmax_head_bench.py`'s sweep left out (block_n 32 / 64,
      block_k 128 / 256, 2 / 4 warps, 2 / 3 stages), the engine's (64, 256, 4, 3) timed between every 4  -> ..._library.json
"""
import itertools, os, pathlib, shutil, sys, time
import torch
import triton, triton.language as tl

sys.path.insert(0, os.path.dirname(__file__))
from gluon_stream_probe import _chain_us

V, K, CALLS = 248320, 2560, int(os.environ.get('CALLS', '10'))

@triton.jit
def _swap_kernel(x_ptr, w_ptr, s_ptr, y_ptr, mx_ptr, M, N, K, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BM: tl.constexpr):
    "y[m, n] for BLOCK_N weight rows: acc (BLOCK_N, BM) += dot(W tile (BLOCK_N, BLOCK_K) as bf16, x tileᵀ (BLOCK_K, BM))."
    rn = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N); nm = rn < N
    rm = tl.arange(0, BM); mm = rm < M
    acc = tl.zeros((BLOCK_N, BM), tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        w = tl.load(w_ptr + rn[:, None].to(tl.int64) * K + rk[None, :], mask=nm[:, None], other=0, eviction_policy='evict_first')
        x = tl.load(x_ptr + rm[None, :] * K + rk[:, None], mask=mm[None, :], other=0.0)       # (BLOCK_K, BM)
        acc = tl.dot(w.to(tl.bfloat16), x, acc)
    s = tl.load(s_ptr + rn, mask=nm, other=0.0).to(tl.float32)
    y = acc * s[:, None]
    tl.store(y_ptr + rm[None, :] * N + rn[:, None], y.to(y_ptr.dtype.element_ty), mask=nm[:, None] & mm[None, :])
    tl.atomic_max(mx_ptr + rm, tl.max(tl.where(nm[:, None], y, float('-inf')), 0), mask=mm, sem='relaxed')

@triton.jit
def _reg_kernel(x_ptr, w_ptr, s_ptr, y_ptr, mx_ptr, N, K, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    "One row: acc (BLOCK_N,) += Σ_k W[n, k]·x[k] in float32, no dot."
    rn = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N); nm = rn < N
    acc = tl.zeros((BLOCK_N, BLOCK_K), tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        w = tl.load(w_ptr + rn[:, None].to(tl.int64) * K + rk[None, :], mask=nm[:, None], other=0, eviction_policy='evict_first')
        x = tl.load(x_ptr + rk).to(tl.float32)
        acc += w.to(tl.float32) * x[None, :]
    s = tl.load(s_ptr + rn, mask=nm, other=0.0).to(tl.float32)
    y = tl.sum(acc, 1) * s
    tl.store(y_ptr + rn, y.to(y_ptr.dtype.element_ty), mask=nm)
    tl.atomic_max(mx_ptr, tl.max(tl.where(nm, y, float('-inf')), 0), sem='relaxed')

def main():
    from effqwen.core import get_profile, write_result, rel_error
    from effqwen.kernels import w8a16_matmul, w8a16_quantize
    t0 = time.time(); torch.manual_seed(0)
    w = (torch.randn(V, K, device='cuda') * 0.02).to(torch.bfloat16)
    q, s = w8a16_quantize(w, torch.bfloat16); del w
    x = torch.randn(1, K, device='cuda').to(torch.bfloat16)
    ref = w8a16_matmul(x, q, s)
    y = torch.empty(1, V, device='cuda', dtype=torch.bfloat16); mx = torch.full((1,), float('-inf'), device='cuda')
    rows = []
    def timed(name, cfg, fn):
        try:
            mx.fill_(float('-inf')); fn(); torch.cuda.synchronize()
            err, mxok = rel_error(y, ref), bool(mx[0].to(torch.bfloat16) == ref.max())
            us = sorted(_chain_us([fn] * CALLS) for _ in range(2))[0]
            rows.append(dict(kernel=name, config=cfg, us=us, rel_err=err, rowmax_ok=mxok, tb_s=q.numel() / us / 1e6))
        except Exception as e:
            rows.append(dict(kernel=name, config=cfg, error=f'{type(e).__name__}: {str(e)[:160]}'))
        print(rows[-1], flush=True)
    lib = lambda bn, bk, nw, ns: timed('library', dict(block_n=bn, block_k=bk, warps=nw, stages=ns),
                                       lambda: w8a16_matmul(x, q, s, block_n=bn, block_k=bk, num_warps=nw, num_stages=ns, out=y, rowmax=mx))
    if os.environ.get('LIB_ONLY') == '1':   # the library kernel's configurations the earlier sweep left out, the engine's between them
        for i, (bn, bk, nw, ns) in enumerate(itertools.product((32, 64), (128, 256), (2, 4), (2, 3))):
            if i % 4 == 0: lib(64, 256, 4, 3)
            lib(bn, bk, nw, ns)
        lib(64, 256, 4, 3)
    else:
        ends = [(64, 256, 4, 3), (64, 256, 4, 4)]   # the library first and again last (a first measurement can run slow)
        for cfg in ends: lib(*cfg)
        for bn, bk, nw, ns in itertools.product((64, 128), (128, 256), (4, 8), (2, 3, 4)):
            timed('swap', dict(block_n=bn, block_k=bk, warps=nw, stages=ns),
                  lambda: _swap_kernel[(triton.cdiv(V, bn),)](x, q, s, y, mx, 1, V, K, BLOCK_N=bn, BLOCK_K=bk, BM=16, num_warps=nw, num_stages=ns))
        for bn, bk, nw, ns in itertools.product((16, 32, 64), (256, 512), (4, 8), (1, 2, 3)):
            timed('register', dict(block_n=bn, block_k=bk, warps=nw, stages=ns),
                  lambda: _reg_kernel[(triton.cdiv(V, bn),)](x, q, s, y, mx, V, K, BLOCK_N=bn, BLOCK_K=bk, num_warps=nw, num_stages=ns))
        for cfg in ends: lib(*cfg)
    ok = [r for r in rows if 'us' in r and r['rel_err'] < 2e-3 and r['rowmax_ok']]
    best = {k: min((r for r in ok if r['kernel'] == k), key=lambda r: r['us'], default=None) for k in ('library', 'swap', 'register')}
    res = dict(shape=dict(V=V, K=K), calls=CALLS, rows=rows, best=best, wall_s=time.time() - t0,
               note=('µs per call of the 4B head INT8 GEMV at one row with its row-max epilogue (atomic max), CUDA-graph replays, '
                     'best of 2; rel_err against the library kernel\'s output; rowmax_ok: the row max equals the output\'s max'))
    p = write_result('head_gemv_probe_h200' + ('_library' if os.environ.get('LIB_ONLY') == '1' else ''), res, get_profile('gpu'))
    if os.environ.get('OUT'): shutil.copy(p, pathlib.Path(os.environ['OUT'])/p.name)
    print('wrote', p, {k: (v['config'], round(v['us'], 1)) if v else None for k, v in best.items()})

if __name__ == '__main__': main()
