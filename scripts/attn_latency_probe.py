#!/usr/bin/env python3
"""Where does the decode attention's time go when its context is short? (GPU diagnostic)

In the decode timeline (decode_timeline_h200.json) the split-K kernel ends 6.6 µs after the prep kernel at a 64-token
context, where it reads almost nothing, while the small kernels around it end 1.2-2 µs after their predecessors. This
times the attention's kernels of one layer as the decode step launches them (programmatic dependent launch where
`effqwen.kernels.pdl_on`), LAYERS layers back to back on distinct caches in one CUDA graph, µs per layer (median of 5
replays), at contexts CTXS:
  - empty: LAYERS launches of a kernel that only enters PDL (the launch floor of one kernel in such a chain),
  - prep, split, combine alone; split + combine (`fused_attn_rows`); prep + split + combine (`fused_attn_decode`),
  - split + combine under other split settings (stages, warps, keys per step: `ATTN_STAGES`, `ATTN_WARPS`, `ATTN_BL`),
  - prep + split + combine with plain launches (no PDL),
  - the layer's W4A16 q/k/v and o projections (fragment kernels) alone, and around prep + split + combine (the attention
    in the engine's context), each also with the attention kernels launched plainly (attn_pdl=False).

GPU:  PYTHONPATH=. OUT=... python3 scripts/attn_latency_probe.py     -> data/results/attn_latency_probe_h200.json
"""
import os, pathlib, shutil, sys, time
import torch
import triton, triton.language as tl

sys.path.insert(0, os.path.dirname(__file__))
from gluon_stream_probe import _chain_us
from attn_decode_sweep import _attn_inputs, LAYERS, LMAX

CTXS = [int(v) for v in os.environ.get('CTXS', '64,2048,8192').split(',')]
VARIANTS = [tuple(int(x) for x in v.split(',')) for v in os.environ.get('VARIANTS', '64,4,1;64,4,2;64,8,3;32,4,3;32,4,2').split(';') if v]   # (BL, warps, stages)

@triton.jit
def _empty_kernel(x_ptr, PDL: tl.constexpr = False):
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()

def main():
    import effqwen.engine as E
    import effqwen.kernels as K
    from effqwen.core import write_result
    t0, dev = time.time(), torch.device('cuda')
    H, Hkv, D, dims, kcs, vcs = _attn_inputs(dev)
    dims = dims[:7] + (bool(dims[7]),)   # (the norm offset as the prep kernel's flag)
    R = dims[3]
    proj = torch.randn(1, 2 * H * D + 2 * Hkv * D, device=dev, dtype=torch.bfloat16)
    cos, sin = torch.randn(LMAX, R, device=dev, dtype=torch.bfloat16), torch.randn(LMAX, R, device=dev, dtype=torch.bfloat16)
    qn, kn = torch.randn(D, device=dev) * 0.1, torch.randn(D, device=dev) * 0.1
    q = torch.randn(1, H, D, device=dev, dtype=torch.bfloat16)
    chunk = E.ATTN_CHUNK; NS = -(-LMAX // chunk); BR = max(16, E._np2(H // Hkv))
    part = E.attn_partials(Hkv, NS, BR, D, dev)
    own = (E.ATTN_BL, E.ATTN_WARPS, E.ATTN_STAGES)
    def split(i, pos):
        (bl, ns), pdl = E._attn_tiles(D, dev, 1, 2), E._attn_pdl(q)
        mp, lp, ap = part
        E._attn_split_kernel[(Hkv, NS)](q, kcs[i], vcs[i], pos, mp, lp, ap, LMAX, NS, D ** -0.5, REP=H // Hkv, BR=BR, D=D, CHUNK=chunk,
                                        BL=bl, IEEE=False, T=1, H=H, num_warps=E.ATTN_WARPS, num_stages=ns, CAUSAL=True, WIN=0,
                                        PREFETCH=False, DYN=E.ATTN_DYN_CHUNK, **pdl)
    y = torch.empty(1, H * D, device=dev, dtype=torch.bfloat16)
    def combine(pos):
        (bl, _), (bs, bd) = E._attn_tiles(D, dev, 1, 2), E.ATTN_COMBINE_DECODE
        mp, lp, ap = part
        E._attn_combine_kernel[(H * (D // bd),)](mp, lp, ap, pos, proj, y, NS, REP=H // Hkv, BR=BR, D=D, CHUNK=chunk, GATE=True,
                                                 T=1, H=H, PS=proj.shape[-1], BS=bs, num_warps=4, CAUSAL=True, WIN=0, BD=bd,
                                                 DYN=E.ATTN_DYN_CHUNK, BL=bl, **E._attn_pdl(y))
    x = torch.zeros(1, device=dev)
    # the layer's linears as the engine runs them: W4A16 fragment kernels, distinct weights per layer (together past the L2)
    import effqwen.gluon as G
    from gluon_stream_probe import _w4_copy
    NP, C = proj.shape[-1], 2560
    wq = [_w4_copy(NP, C) for _ in range(LAYERS)]; wo = [_w4_copy(C, H * D) for _ in range(LAYERS)]
    hx = torch.randn(1, C, device=dev, dtype=torch.bfloat16); pj = torch.empty_like(proj); ox = torch.empty(1, C, device=dev, dtype=torch.bfloat16)
    def lin(i):   # q/k/v then o projections without the attention between (o reads the previous call's output)
        G.w4a16_fragment_matmul(hx, *wq[i], out=pj); G.w4a16_fragment_matmul(y, *wo[i], out=ox)
    def layer(i, pos):
        G.w4a16_fragment_matmul(hx, *wq[i], out=pj)
        a = E.fused_attn_decode(pj, cos, sin, pos, qn, kn, kcs[i], vcs[i], dims, part)
        G.w4a16_fragment_matmul(a, *wo[i], out=ox)
    rows = []
    def rec(name, ctx, calls, **kw):
        us = _chain_us(calls)
        rows.append(dict(part=name, ctx=ctx, us=us, **kw)); print(rows[-1], flush=True)
    rec('empty', 0, [lambda: _empty_kernel[(132,)](x, **E._attn_pdl(x))] * LAYERS)
    for ctx in CTXS:
        pos = torch.tensor([ctx - 1], device=dev)
        rec('prep', ctx, [lambda i=i: E.fused_attn_prep(proj, cos, sin, pos, qn, kn, kcs[i], vcs[i], dims) for i in range(LAYERS)])
        rec('split', ctx, [lambda i=i: split(i, pos) for i in range(LAYERS)])
        rec('combine', ctx, [lambda: combine(pos)] * LAYERS)
        rec('split+combine', ctx, [lambda i=i: E.fused_attn_rows(q, proj, pos, kcs[i], vcs[i], dims, part) for i in range(LAYERS)])
        rec('prep+split+combine', ctx, [lambda i=i: E.fused_attn_decode(proj, cos, sin, pos, qn, kn, kcs[i], vcs[i], dims, part) for i in range(LAYERS)])
        for bl, nw, ns in VARIANTS:
            E.ATTN_BL, E.ATTN_WARPS, E.ATTN_STAGES = bl, nw, ns
            try: rec('split+combine', ctx, [lambda i=i: E.fused_attn_rows(q, proj, pos, kcs[i], vcs[i], dims, part) for i in range(LAYERS)], bl=bl, warps=nw, stages=ns)
            except Exception as e: rows.append(dict(part='split+combine', ctx=ctx, bl=bl, warps=nw, stages=ns, error=str(e)[-300:]))
            finally: E.ATTN_BL, E.ATTN_WARPS, E.ATTN_STAGES = own
        for name, calls in (('qkv+o', [lambda i=i: lin(i) for i in range(LAYERS)]),
                            ('qkv+prep+split+combine+o', [lambda i=i: layer(i, pos) for i in range(LAYERS)])):
            rec(name, ctx, calls)
            E.ATTN_PDL = False
            try: rec(name, ctx, calls, attn_pdl=False)
            finally: E.ATTN_PDL = True
        pdl = K.PDL; K.PDL = False
        try: rec('prep+split+combine', ctx, [lambda i=i: E.fused_attn_decode(proj, cos, sin, pos, qn, kn, kcs[i], vcs[i], dims, part) for i in range(LAYERS)], pdl=False)
        finally: K.PDL = pdl
    res = dict(shape='qwen3.5-4b attention', layers=LAYERS, cache_len=LMAX, default=dict(zip(('bl', 'warps', 'stages'), own)),
               chunk=chunk, dyn_chunk=E.ATTN_DYN_CHUNK, combine_decode=E.ATTN_COMBINE_DECODE, rows=rows, triton=triton.__version__,
               wall_s=time.time() - t0,
               note=('µs per layer: LAYERS calls on distinct caches back to back in one CUDA graph (no flush), median of 5 '
                     'replays; PDL as the decode step launches the attention kernels unless pdl=False; split+combine rows with '
                     'bl/warps/stages: the split kernel under those settings'))
    out = os.environ.get('OUT')
    if out: os.environ['EFFQWEN_OUT'] = out
    print(write_result('attn_latency_probe_h200', res, 'gpu'))

if __name__ == '__main__': main()
