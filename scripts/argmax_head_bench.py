#!/usr/bin/env python3
"""The LM head's step tail at the Qwen3.5-4B head shape (248320 x 2560, bf16, random N(0, 0.02) weights), three ways,
each as CUDA-graph replays of CALLS back-to-back calls (per-call time = replay / CALLS; the head's 1.27 GB never fits
in L2): the engine's BF16 head (cuBLAS) + copy + `fused_argmax`; the W8A16 head (`w8a16_matmul`) + `fused_argmax` (the
INT8-head option: other logits); `ArgmaxHead.argmax_into` (the BF16 head's argmax from the INT8 copy + a BF16
rescoring). At 1 and 16 rows (decode, verify-16). Also checks `ArgmaxHead`'s tokens against the BF16 head's argmax on
ROWS random rows per row count and records how many rows its bound leaves to rescore.

GPU:  PYTHONPATH=. OUT=... python3 scripts/argmax_head_bench.py     -> $OUT/argmax_head_h200.json (and data/results/)
      SWEEP=1: also the head GEMV's configurations; SWEEP_PICK=1: the pick kernel's load width and warps (whole head timed)
"""
import json, os, pathlib, shutil, sys, time
import torch, torch.nn as nn, torch.nn.functional as F
from effqwen.core import get_profile, write_result
from effqwen.engine import ArgmaxHead, fused_argmax, ARGMAX_BLOCK
from effqwen.kernels import W8A16Linear, pdl_on

CALLS, ROWS = int(os.environ.get('CALLS', '20')), int(os.environ.get('ROWS', '256'))
V, K = 248320, 2560

sys.path.insert(0, os.path.dirname(__file__))
from gluon_stream_probe import _chain_us

def graph_us(fn, calls=CALLS):
    "µs per call of CALLS calls of fn back to back in one CUDA graph (`gluon_stream_probe._chain_us`)."
    return _chain_us([fn] * calls)

def parts(ah, h):
    "ArgmaxHead's GEMV alone (with and without its row maxima), µs per call; and the head GEMV's configurations (SWEEP=1)."
    import triton
    from effqwen.kernels import w8a16_matmul
    T, V = h.shape[0], ah.out_features
    nt = torch.zeros(16, dtype=torch.long, device='cuda')
    ah.argmax_into(h, nt); z = ah._scratch[0]
    out = dict(gemv_rowmax=graph_us(lambda: ah._gemv(h)),   # (the pick kernel is not timed alone: it needs the GEMV's row maxima,
               gemv_plain=graph_us(lambda: w8a16_matmul(h, ah.weight_codes, ah.weight_scale, block_n=ah.block_n, out=z[:T], **ah.gemv_cfg)))
    ah._scratch[1].fill_(float('-inf'))                       #  which it resets; argmax_head − gemv_rowmax is its share):
    ah.argmax_into(h, nt)                                     #  the GEMV's repeats left the maxima set, as no step may
    if os.environ.get('SWEEP') == '1':
        sw = {}
        for bn, bk, nw, ns in [(64, 256, 4, 4), (64, 256, 4, 3), (64, 256, 4, 5), (64, 256, 8, 4), (64, 512, 4, 3), (64, 512, 8, 3),
                               (64, 128, 4, 6), (64, 128, 4, 8), (32, 256, 4, 4), (32, 512, 4, 3), (32, 256, 2, 4), (128, 256, 4, 4),
                               (128, 256, 8, 4), (128, 128, 4, 6), (128, 512, 8, 3), (256, 128, 8, 4), (256, 256, 8, 3)]:
            mx = torch.full((T,), float('-inf'), device='cuda')
            try: sw[f'bn{bn}_bk{bk}_w{nw}_s{ns}'] = graph_us(lambda: w8a16_matmul(h, ah.weight_codes, ah.weight_scale, block_n=bn, block_k=bk, num_warps=nw,
                                                                                    num_stages=ns, out=z[:T], rowmax=mx))
            except Exception as e: sw[f'bn{bn}_bk{bk}_w{nw}_s{ns}'] = f'{type(e).__name__}: {str(e)[:120]}'
        out['gemv_sweep'] = sw
    if os.environ.get('SWEEP_PICK') == '1':   # the pick kernel's rescoring loads (HEAD_PICK_BK) and warps: the whole head, timed
        import effqwen.engine as E
        own, sp = (E.HEAD_PICK_BK, E.HEAD_PICK_WARPS), {}
        try:
            for bk in (4096, 2048, 1024, 512):
                for nw in (4, 8):
                    E.HEAD_PICK_BK, E.HEAD_PICK_WARPS = (bk, bk), nw
                    ah.argmax_into(h, nt); sp[f'bk{bk}_w{nw}'] = graph_us(lambda: ah.argmax_into(h, nt))
                    ok = torch.equal(nt[:T], F.linear(h, ah.weight).argmax(-1))
                    if not ok: sp[f'bk{bk}_w{nw}_tokens_differ'] = True
        finally: E.HEAD_PICK_BK, E.HEAD_PICK_WARPS = own
        out['pick_sweep'] = sp
    return out

def main():
    t0 = time.time(); torch.manual_seed(0)
    lin = nn.Linear(K, V, bias=False, device='cuda', dtype=torch.bfloat16); nn.init.normal_(lin.weight, std=0.02)
    ah, h8 = ArgmaxHead(lin), W8A16Linear.from_float(lin)
    res = dict(shape=dict(V=V, K=K), calls=CALLS, rows_checked=ROWS, pdl=pdl_on(torch.device('cuda')), us={}, check={}, listed={})
    for T in (1, 16):
        h = torch.randn(T, K, device='cuda').to(torch.bfloat16)
        nt = torch.zeros(16, dtype=torch.long, device='cuda'); lg = torch.empty(16, V, device='cuda', dtype=torch.bfloat16)
        P = -(-V // ARGMAX_BLOCK); sc = (torch.empty(16 * P, device='cuda'), torch.empty(16 * P, device='cuda', dtype=torch.int32))
        def bf16():
            l = F.linear(h, lin.weight); lg[:T].copy_(l); fused_argmax(l, nt, sc)
        def int8():
            fused_argmax(h8(h), nt, sc)
        def exact(): ah.argmax_into(h, nt)
        res['us'][T] = {k: graph_us(f) for k, f in (('bf16_head', bf16), ('int8_head', int8), ('argmax_head', exact))}
        res['us'][T]['argmax_head_parts'] = p = parts(ah, h)
        p['pick_and_final_derived'] = res['us'][T]['argmax_head'] - p['gemv_rowmax']
        print(T, res['us'][T], flush=True)
        bad, listed = [], []
        for i in range(0, ROWS, T):
            x = torch.randn(T, K, device='cuda').to(torch.bfloat16)
            ah.argmax_into(x, nt); ref = F.linear(x, lin.weight).argmax(-1)
            for j in (nt[:T] != ref).nonzero().flatten().tolist():   # a mismatch: the two rows' exact float32 logits (a bf16 rounding tie?)
                a, b = int(nt[j]), int(ref[j]); ex = (x[j].float() @ lin.weight[[a, b]].float().T).tolist()
                bad.append(dict(ours=a, bf16_head=b, fp32_logits=ex, bf16_logits=[float(v) for v in torch.tensor(ex).to(torch.bfloat16)],
                                cublas_bf16=F.linear(x[j:j + 1], lin.weight[[a, b]]).float()[0].tolist()))
            z = ah._scratch[0][:T].float(); hn = x.float().norm(dim=1, keepdim=True)   # the INT8 logits the kernel wrote (bf16), its thresholds
            lo = z.max(1, keepdim=True).values - hn * ah.err_max                       # (the kernel's float32 row maxima are reset to -inf)
            listed += ((z + z.abs() * 2**-8 + hn * ah.err) >= lo - lo.abs() * 2**-7).sum(1).tolist()
        res['check'][T] = dict(rows=len(listed), not_equal_bf16_argmax=len(bad), mismatches=bad)
        ls = sorted(listed); res['listed'][T] = dict(median=ls[len(ls) // 2], max=ls[-1], mean=sum(ls) / len(ls))
        print(T, res['check'][T], res['listed'][T], flush=True)
    res['wall_s'] = time.time() - t0
    res['note'] = ('µs per call, CUDA-graph replay of back-to-back calls; bf16_head: F.linear (cuBLAS) + copy into the engine\'s logits buffer + '
                   'fused_argmax (the engine\'s step tail); int8_head: W8A16 GEMV + fused_argmax (other logits); argmax_head: ArgmaxHead (the BF16 '
                   'head\'s argmax); pick_and_final_derived = argmax_head − gemv_rowmax (the pick kernel needs the GEMV\'s row maxima). listed: rows the bound leaves to rescore per token, recomputed in torch from the kernel\'s INT8 logits')
    p = write_result('argmax_head_h200', res, get_profile('gpu'))
    if os.environ.get('OUT'): shutil.copy(p, pathlib.Path(os.environ['OUT'])/'argmax_head_h200.json')
    print('wrote', p)

if __name__ == '__main__': main()
