"""Quick CTA-shape sweep of the Gluon prototypes (W4A16 DEPTH 0 / 2 and BCQ3) at a few shapes, with the library's timer.
Exploration only (the committed numbers come from gluon_w4_bench.py).    python scripts/gluon_sweep.py"""
import json, torch
import effqwen.gluon as G
from effqwen import kernels as Kn

torch.manual_seed(0)
for N, K in [(9216, 2560), (2560, 9216), (12352, 2560)]:
    wp = torch.randint(-2**31, 2**31 - 1, (N, K // 8), dtype=torch.int64).to(torch.int32).cuda()
    s = (torch.rand(N, K // 128, device='cuda') * 0.02 + 0.005).to(torch.bfloat16); w = G.w4_to_fragment(wp)
    sg = torch.randint(-2**31, 2**31 - 1, (3, N, K // 32), dtype=torch.int64).to(torch.int32).cuda()
    a = (torch.rand(3, N, K // 128, device='cuda') * 0.02 + 0.002).to(torch.bfloat16); bw = G.bcq_to_fragment(sg)
    for M in (1, 16):
        x = torch.randn(M, K, device='cuda').to(torch.bfloat16); y = torch.empty(M, N, device='cuda', dtype=torch.bfloat16)
        r = dict(N=N, K=K, M=M, w4={}, bcq3={})
        for WK, WM, D in [(4, 1, 0), (4, 2, 0), (4, 4, 0), (2, 2, 0), (2, 4, 0), (8, 1, 0), (8, 2, 0), (4, 1, 2), (4, 2, 2), (8, 1, 2), (16, 1, 0)]:
            if N % (16 * WM) or K % (128 * WK): continue
            try: r['w4'][f'{WK},{WM},{D}'] = round(Kn._bench(lambda: G.w4a16_fragment_matmul(x, w, s, (WK, WM, D), out=y), 5), 2)
            except Exception as e: r['w4'][f'{WK},{WM},{D}'] = str(e)[-200:]
        for WK, WM in [(4, 1), (4, 2), (4, 4), (2, 2), (2, 4), (1, 4), (1, 8), (8, 1), (8, 2), (2, 8)]:
            if N % (16 * WM) or K % (128 * WK): continue
            try: r['bcq3'][f'{WK},{WM}'] = round(Kn._bench(lambda: G.bcq_fragment_matmul(x, bw, a, (WK, WM), out=y), 5), 2)
            except Exception as e: r['bcq3'][f'{WK},{WM}'] = str(e)[-200:]
        print(json.dumps(r), flush=True)
