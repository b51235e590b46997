#!/usr/bin/env python3
"""How fast can an H200 read the 4B LM head's INT8 copy at all? The read ceiling that `ArgmaxHead`'s W8A16 GEMV is
judged against: the same 248320 x 2560 bytes (636 MB, never L2-resident) read by
  - a Triton streaming-read kernel (each program XOR-folds BLOCK bytes per step into one word; grid and block swept),
  - torch: a DtoD copy of the bytes (reads and writes them: the combined traffic is reported),
  - the head GEMV itself (`w8a16_matmul` with and without its row maxima, at `effqwen.engine.HEAD_GEMV`),
each as CUDA-graph replays of CALLS calls (`gluon_stream_probe._chain_us`). TB/s = bytes read (copy: read + written) / time.

GPU:  PYTHONPATH=. OUT=... python3 scripts/read_ceiling_probe.py     -> data/results/read_ceiling_h200.json (and $OUT)
"""
import os, pathlib, shutil, sys, time
import torch
import triton, triton.language as tl

sys.path.insert(0, os.path.dirname(__file__))
from gluon_stream_probe import _chain_us

V, K, CALLS = 248320, 2560, int(os.environ.get('CALLS', '10'))

@triton.jit
def _read_kernel(x_ptr, out_ptr, n_words, per_prog, BLOCK: tl.constexpr):
    "Program p XOR-folds int32 words [p·per_prog, (p+1)·per_prog) in BLOCK-word steps (evict-first) and stores one word."
    p = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.int32)
    base = p.to(tl.int64) * per_prog
    for i in range(0, per_prog, BLOCK):
        o = base + i + tl.arange(0, BLOCK)
        acc ^= tl.load(x_ptr + o, mask=o < n_words, other=0, eviction_policy='evict_first')
    tl.store(out_ptr + p, tl.reduce(acc, 0, _xor))

@triton.jit
def _xor(a, b): return a ^ b

def main():
    from effqwen.core import get_profile, write_result
    from effqwen.engine import ArgmaxHead, HEAD_GEMV
    from effqwen.kernels import w8a16_matmul
    t0 = time.time(); torch.manual_seed(0)
    codes = torch.randint(-127, 128, (V, K), dtype=torch.int8, device='cuda')
    nbytes = codes.numel(); words = codes.view(torch.int32).reshape(-1); nw = words.numel()
    rows = []
    for progs in (132 * 4, 132 * 8, 132 * 16, 132 * 32):
        for block, warps in ((1024, 4), (2048, 4), (2048, 8), (4096, 8)):
            per = -(-nw // progs); per = -(-per // block) * block
            out = torch.empty(progs, dtype=torch.int32, device='cuda')
            us = _chain_us([lambda: _read_kernel[(progs,)](words, out, nw, per, BLOCK=block, num_warps=warps)] * CALLS)
            rows.append(dict(method='triton read', programs=progs, block_words=block, warps=warps, us=us, tb_s=nbytes / us / 1e6))
            print(rows[-1], flush=True)
    dst = torch.empty_like(codes)
    us = _chain_us([lambda: dst.copy_(codes)] * CALLS)
    rows.append(dict(method='torch copy (read + write)', us=us, tb_s=2 * nbytes / us / 1e6)); print(rows[-1], flush=True)
    del dst
    lin = torch.nn.Linear(K, V, bias=False, device='cuda', dtype=torch.bfloat16); torch.nn.init.normal_(lin.weight, std=0.02)
    ah = ArgmaxHead(lin); del lin
    h = torch.randn(1, K, device='cuda').to(torch.bfloat16)
    z, mx = torch.empty(1, V, device='cuda', dtype=torch.bfloat16), torch.full((1,), float('-inf'), device='cuda')
    ts = {'head GEMV': [], 'head GEMV + row max': []}
    for _ in range(3):   # alternating, median of 3 (a single first measurement ran ~10 % slow in a trial run)
        for name, kw in (('head GEMV', {}), ('head GEMV + row max', dict(rowmax=mx))):
            ts[name].append(_chain_us([lambda: w8a16_matmul(h, ah.weight_codes, ah.weight_scale, block_n=ah.block_n, out=z, **ah.gemv_cfg, **kw)] * CALLS))
    for name, v in ts.items():
        us = sorted(v)[1]
        rows.append(dict(method=name, config=list(HEAD_GEMV), us=us, us_runs=v, tb_s=nbytes / us / 1e6)); print(rows[-1], flush=True)
    best = max((r for r in rows if r['method'] == 'triton read'), key=lambda r: r['tb_s'])
    res = dict(bytes=nbytes, calls=CALLS, rows=rows, best_read=best,
               gemv_fraction_of_best_read={r['method']: r['tb_s'] / best['tb_s'] for r in rows if r['method'].startswith('head GEMV')},
               wall_s=time.time() - t0,
               note=('the 4B LM head INT8 copy (248320 x 2560 bytes) read back to back, CUDA-graph replays; triton read: a '
                     'streaming XOR-fold over int32 words, swept over programs / words per step / warps; the head GEMV at the '
                     'engine\'s HEAD_GEMV config, 1 row, median of 3 alternating measurements; gemv_fraction_of_best_read = GEMV TB/s / the fastest read\'s'))
    p = write_result('read_ceiling_h200', res, get_profile('gpu'))
    if os.environ.get('OUT'): shutil.copy(p, pathlib.Path(os.environ['OUT'])/p.name)
    print('wrote', p, 'best read', round(best['tb_s'], 3), 'TB/s; GEMV fractions', res['gemv_fraction_of_best_read'])

if __name__ == '__main__': main()
