#!/usr/bin/env python3
"""Can the decode attention's key / value reads come from L2? A probe of prefetching one layer's live cache into L2
(evict-last) ahead of the split-K kernel, with the weights of the layers in between streamed (evict-first) after it.

At 8192 tokens of the 4B shape a full-attention layer reads 33.5 MB of cache, at about 2.4 TB/s (13.8 µs alone,
kernel_ncu_probe_h200_attn.json), while the W4A16 linears around it use about half the chip's bandwidth. If lines
prefetched evict-last survive the weight stream, a prefetch on a side stream during the layer before could take the
cache reads off the attention's critical path.

Each case is one CUDA graph: an L2 flush (a 256 MB memset), then its parts, replayed REPS times; µs per replay minus the
flush-only graph's. Parts:
  S(X)  a Triton read of X MB of other memory with evict-first loads (the weights of the layers in between),
  P     the prefetch of the cache rows below the position: `line` = prefetch.global.L2 per 128-byte line (evict-last or
        normal), `bulk` = cp.async.bulk.prefetch.L2 of 16 KB pieces with an evict-last cache policy,
  A     `effqwen.engine.fused_attn_rows` for one token at position CTX - 1 (split-K + combine, the engine's settings),
  C(X)  P on a second stream while S(X) runs on the first (fork / join inside the graph).
The attention's cost with a part before it = T(... A) - T(...): so the L2's effect shows as A's cost after P and S(X).

GPU:  PYTHONPATH=. OUT=... python3 scripts/kv_prefetch_probe.py     -> data/results/kv_prefetch_probe_h200.json
"""
import os, pathlib, shutil, sys, time
import torch
import triton, triton.language as tl

sys.path.insert(0, os.path.dirname(__file__))
from read_ceiling_probe import _read_kernel as _stream_kernel   # evict-first XOR-fold of int32 words

CTX, LMAX, HKV, H, D = int(os.environ.get('CTX', '8192')), 8472, 4, 16, 256
REPS = int(os.environ.get('REPS', '30'))
XS = [int(v) for v in os.environ.get('XS', '0,16,48,96').split(',')]

@triton.jit
def _pf_kernel(kc_ptr, vc_ptr, pos_ptr, LMAX, NP, D: tl.constexpr, MODE: tl.constexpr, PIECE: tl.constexpr, BLOCK: tl.constexpr):
    "Program (s, p): slice p of NP of segment s (kv head s // 2, keys if s is even) over the rows below pos + 1."
    s = tl.program_id(0); p = tl.program_id(1)
    L = tl.load(pos_ptr) + 1
    n = L * D                                                   # elements of the segment's live rows
    base = (s // 2).to(tl.int64) * LMAX * D
    ptr = tl.where(s % 2 == 0, kc_ptr, vc_ptr) + base
    EL: tl.constexpr = PIECE // 2                               # bf16 elements per piece (a 128-byte line, or a bulk piece)
    pieces = (n + EL - 1) // EL
    per = (pieces + NP - 1) // NP
    lo = p * per; hi = tl.minimum(lo + per, pieces)
    for i in range(lo, hi, BLOCK):
        j = tl.minimum(i + tl.arange(0, BLOCK), hi - 1).to(tl.int64)
        a = ptr + j * EL
        if MODE == 0:
            tl.inline_asm_elementwise("prefetch.global.L2::evict_last [$1]; // $0 unused", "=r,l", [a], dtype=tl.int32, is_pure=False, pack=1)
        elif MODE == 1:
            tl.inline_asm_elementwise("prefetch.global.L2 [$1]; // $0 unused", "=r,l", [a], dtype=tl.int32, is_pure=False, pack=1)
        else:
            nb = (tl.minimum(n - j * EL, EL) * 2).to(tl.int32)      # bytes of this piece (a multiple of 16: D·2 is)
            tl.inline_asm_elementwise("{ .reg .b64 pol; createpolicy.fractional.L2::evict_last.b64 pol, 1.0; "
                                      "cp.async.bulk.prefetch.L2.global.L2::cache_hint [$1], $2, pol; } // $0 unused",
                                      "=r,l,r", [a, nb], dtype=tl.int32, is_pure=False, pack=1)

def _graph_us(parts, flush, reps=REPS) -> float:
    "µs per replay of one graph: flush, then each part (a callable, or a (side, main) pair run on two streams)."
    cur = torch.cuda.current_stream(); side = torch.cuda.Stream()
    def body():
        flush.zero_()
        for p in parts:
            if isinstance(p, tuple):
                s = torch.cuda.current_stream()
                side.wait_stream(s)
                with torch.cuda.stream(side): p[0]()
                p[1]()
                s.wait_stream(side)
            else: p()
    st = torch.cuda.Stream(); st.wait_stream(cur)
    with torch.cuda.stream(st): body(); body()
    cur.wait_stream(st); torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps): body()
    g.replay(); torch.cuda.synchronize(); ts = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); g.replay(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b) * 1e3 / reps)
    del g
    return sorted(ts)[2]

def main():
    from effqwen.core import get_profile, write_result
    from effqwen.engine import fused_attn_rows, attn_partials, ATTN_CHUNK
    import effqwen.kernels as K
    K.PDL = False   # plain launches: every part ends before the next starts
    t0 = time.time(); torch.manual_seed(0); dev = torch.device('cuda')
    kc = (torch.randn(HKV, LMAX, D, device=dev) * 0.5).to(torch.bfloat16); vc = torch.randn_like(kc)
    q = torch.randn(1, H, D, device=dev).to(torch.bfloat16)
    pos = torch.tensor([CTX - 1], device=dev)
    NS = triton.cdiv(LMAX, ATTN_CHUNK); part = attn_partials(HKV, NS, 16, D, dev)
    dims = (H, HKV, D, 64, False, False, 1e-6, False)
    flush = torch.empty(256 << 20, dtype=torch.int8, device=dev)
    big = torch.randint(-2**31, 2**31 - 1, (max(XS + [1]) << 18,), dtype=torch.int32, device=dev)   # X MB = X << 18 words
    sout = torch.empty(132 * 8, dtype=torch.int32, device=dev)
    def stream(x):
        nw, progs, block = x << 18, 132 * 8, 2048
        per = -(-nw // progs); per = -(-per // block) * block   # words per program, whole steps
        return lambda: _stream_kernel[(progs,)](big, sout, nw, per, BLOCK=block, num_warps=8)
    attn = lambda: fused_attn_rows(q, None, pos, kc, vc, dims, part)
    def pf(mode):   # line: 16 programs a segment, 128 lines a step; bulk: one warp a program, 32 pieces each (no repeats at 8192)
        np_, piece, block, warps = (16, 128, 128, 4) if mode < 2 else (8, 16384, 32, 1)
        return lambda: _pf_kernel[(2 * HKV, np_)](kc, vc, pos, LMAX, np_, D=D, MODE=mode, PIECE=piece, BLOCK=block, num_warps=warps)
    ref = attn().clone()
    rows = []; base = _graph_us([], flush)
    def case(name, parts, **kw):
        us = _graph_us(parts, flush) - base
        rows.append(dict(case=name, us=us, **kw)); print(rows[-1], flush=True); return us
    case('A', [attn])
    modes = {'line_evict_last': 0, 'line_normal': 1, 'bulk_evict_last': 2}
    for mname, m in modes.items():
        case('P', [pf(m)], prefetch=mname); case('P A', [pf(m), attn], prefetch=mname)
    for x in XS:
        if x == 0: continue
        s_us = case('S', [stream(x)], x_mb=x); sa = case('S A', [stream(x), attn], x_mb=x)
        for mname, m in modes.items():
            ps = case('P S', [pf(m), stream(x)], x_mb=x, prefetch=mname)
            psa = case('P S A', [pf(m), stream(x), attn], x_mb=x, prefetch=mname)
            c = case('C', [(pf(m), stream(x))], x_mb=x, prefetch=mname)
            ca = case('C A', [(pf(m), stream(x)), attn], x_mb=x, prefetch=mname)
            rows.append(dict(case='summary', x_mb=x, prefetch=mname, attn_after_stream_us=sa - s_us, attn_after_prefetch_stream_us=psa - ps,
                             stream_us=s_us, stream_with_side_prefetch_us=c, stream_side_prefetch_attn_us=ca, stream_attn_us=sa))
            print(rows[-1], flush=True)
    same = torch.equal(attn(), ref)
    res = dict(ctx=CTX, lmax=LMAX, hkv=HKV, heads=H, head_dim=D, cache_mb=2 * HKV * CTX * D * 2 / 2**20, reps=REPS, flush_us=base,
               rows=rows, attn_output_unchanged=same, wall_s=time.time() - t0,
               note=('µs per CUDA-graph replay after a 256 MB memset flush, the flush-only graph subtracted; S(X): X MB read '
                     'evict-first by a Triton kernel (132·8 programs); P: the live cache rows prefetched into L2 (line: one '
                     'prefetch per 128 bytes; bulk: cp.async.bulk.prefetch.L2 of 16 KB with an evict-last policy); A: '
                     'fused_attn_rows, one token at position CTX - 1; C: P on a second stream while S runs; plain launches (no PDL)'))
    p = write_result('kv_prefetch_probe_h200', res, get_profile('gpu'))
    if os.environ.get('OUT'): shutil.copy(p, pathlib.Path(os.environ['OUT'])/p.name)
    print('wrote', p)

if __name__ == '__main__': main()
