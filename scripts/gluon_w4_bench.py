"""The Gluon fragment-layout kernels (`effqwen.gluon`; prototypes in `scripts/gluon_w4.py` / `gluon_bcq.py` until session
13, when the committed results were measured) on a GPU: W4A16 checked against the float32 reference and timed beside the library's W4A16 kernel (`w4a16_matmul` on the kernel layout, its tuned config) and cuBLAS BF16,
with the library's timer (`effqwen.kernels._bench`: CUDA-graph replay with an L2 flush), at the engine's W4A16 shapes,
M = 1 / 8 / 16, for several CTA shapes (WK warps splitting K × WM row blocks) and prefetch depths.

    python scripts/gluon_w4_bench.py run [--out DIR]       # GPU -> data/results/kernel_gluon_w4_h200.json
    python scripts/gluon_w4_bench.py run-bcq [--out DIR]   # GPU -> data/results/kernel_gluon_bcq_h200.json (BCQ beside W4A16)
    python scripts/gluon_w4_bench.py render                # -> data/tables/kernels_gluon_w4.md, kernels_gluon_bcq.md
"""
import argparse, json, os, time, traceback
from pathlib import Path
import torch

SHAPES = [(9216, 2560), (2560, 9216), (12352, 2560), (10240, 2560), (2560, 4096), (4096, 2560)]   # (N, K) of the engine's W4A16 linears
CANDS = [(4, 1, 2), (8, 1, 2), (2, 1, 2), (4, 1, 0), (2, 1, 0), (8, 1, 0), (2, 2, 0)]                   # (WK, WM, DEPTH); DEPTH 0 = all cp.async first
BCQ_CANDS = [(4, 1), (2, 1), (8, 1), (2, 2)]                                                                              # WK of the BCQ kernel
BCQ_Q = (3, 2, 4)
NAME, BCQ_NAME = 'kernel_gluon_w4_h200', 'kernel_gluon_bcq_h200'

def _checked_time(call, M: int, N: int, ref) -> dict:
    "One candidate: `call(y)` writes the (M, N) product into y; its max relative error against ref and its `_bench` µs (or the error)."
    from effqwen import kernels as Kn
    y = torch.zeros(M, N, device='cuda', dtype=torch.bfloat16)
    try:
        call(y); torch.cuda.synchronize()
        return dict(rel_err=float((y.float() - ref).abs().max() / ref.abs().max()), us=Kn._bench(lambda: call(y), 5))
    except Exception: return dict(error=traceback.format_exc()[-600:])

def _pick_best(r: dict):
    "The fastest candidate of a row whose error is below 1e-2 -> r['best'], r['best_us']."
    ok = {k: v['us'] for k, v in r['gluon'].items() if 'us' in v and v['rel_err'] < 1e-2}
    if ok: r['best'] = min(ok, key=ok.get); r['best_us'] = ok[r['best']]

def run(out: str | None, budget_s: float):
    import effqwen.gluon as G
    from effqwen import kernels as Kn
    from effqwen.core import write_result
    torch.manual_seed(0); rows, t0 = [], time.time()
    for N, K in SHAPES:
        wp = torch.randint(-2**31, 2**31 - 1, (N, K // 8), dtype=torch.int64).to(torch.int32).cuda()
        s = (torch.rand(N, K // 128, device='cuda') * 0.02 + 0.005).to(torch.bfloat16)
        words, wkl, wbf = G.w4_to_fragment(wp), Kn.w4a16_to_kernel_layout(wp), Kn.w4a16_dequantize(wp, s, dtype=torch.bfloat16)
        for M in (1, 8, 16):
            if time.time() - t0 > budget_s: break
            x = torch.randn(M, K, device='cuda').to(torch.bfloat16)
            ref = Kn.w4a16_mm_ref(x, wp, s).float()
            r = dict(N=N, K=K, M=M, library_us=Kn._bench(lambda: Kn.w4a16_matmul(x, wkl, s, kernel_layout=True), 5),
                     bf16_cublas_us=Kn._bench(lambda: x @ wbf.T, 5), gluon={})
            for WK, WM, D in CANDS:
                if K % (128 * WK) or N % (16 * WM) or (D == 0 and 8 * K > G._SMEM_MAX): continue
                r['gluon'][f'wk{WK}_wm{WM}_d{D}'] = _checked_time(lambda y: G.w4a16_fragment_matmul(x, words, s, (WK, WM, D), out=y), M, N, ref)
            _pick_best(r); rows.append(r)
            print(json.dumps({k: v for k, v in r.items() if k != 'gluon'}), flush=True)
    import triton
    doc = dict(rows=rows, triton=triton.__version__, torch=torch.__version__, candidates=[dict(WK=a, WM=b, DEPTH=d) for a, b, d in CANDS], wall_s=time.time() - t0,
               note='the Gluon fragment-layout kernel (effqwen.gluon; a prototype in scripts/gluon_w4.py until session 13); rel_err = max |y - ref| / max |ref| against the float32 '
                    'reference of the same codes and scales (random); library = w4a16_matmul on the kernel layout (tuned config on an H200)')
    if out: os.environ["EFFQWEN_OUT"] = out
    print(write_result(NAME, doc, 'gpu'))

def run_bcq(out: str | None, budget_s: float):
    """BCQ at Q = 3 (then 2, 4), group 128: the Gluon sign-select kernel (`effqwen.gluon`) beside the library's BCQ kernel
    and, in the same loop, the library's W4A16 and the Gluon W4A16 (DEPTH 0 and 2) on the same x: the issue's ratio."""
    import effqwen.gluon as G
    from effqwen import kernels as Kn
    from effqwen.core import write_result
    torch.manual_seed(0); rows, t0 = [], time.time()
    for Q in BCQ_Q:
        for N, K in SHAPES:
            signs = torch.randint(-2**31, 2**31 - 1, (Q, N, K // 32), dtype=torch.int64).to(torch.int32).cuda()
            alpha = (torch.rand(Q, N, K // 128, device='cuda') * 0.02 + 0.002).to(torch.bfloat16)
            words, skl = G.bcq_to_fragment(signs), Kn.bcq_to_kernel_layout(signs)
            if Q == 3:
                wp = torch.randint(-2**31, 2**31 - 1, (N, K // 8), dtype=torch.int64).to(torch.int32).cuda()
                s = (torch.rand(N, K // 128, device='cuda') * 0.02 + 0.005).to(torch.bfloat16)
                wkl, wfr = Kn.w4a16_to_kernel_layout(wp), G.w4_to_fragment(wp)
            for M in ((1, 8, 16) if Q == 3 else (1,)):
                if time.time() - t0 > budget_s: break
                x = torch.randn(M, K, device='cuda').to(torch.bfloat16)
                ref = Kn.bcq_mm_ref(x, signs, alpha).float()
                r = dict(N=N, K=K, M=M, Q=Q, library_bcq_us=Kn._bench(lambda: Kn.bcq_matmul(x, skl, alpha, kernel_layout=True), 5), gluon={})
                if Q == 3:
                    r['library_w4_us'] = Kn._bench(lambda: Kn.w4a16_matmul(x, wkl, s, kernel_layout=True), 5)
                    yw = torch.zeros(M, N, device='cuda', dtype=torch.bfloat16)
                    r['gluon_w4_us'] = {f'wk{wk}_d{d}': Kn._bench(lambda: G.w4a16_fragment_matmul(x, wfr, s, (wk, 1, d), out=yw), 5)
                                        for wk, d in ((4, 0), (4, 2), (8, 0), (8, 2)) if K % (128 * wk) == 0}
                for WK, WM in BCQ_CANDS:
                    if N % (16 * WM) or K % (128 * WK): continue
                    r['gluon'][f'wk{WK}_wm{WM}'] = _checked_time(lambda y: G.bcq_fragment_matmul(x, words, alpha, (WK, WM), out=y), M, N, ref)
                _pick_best(r); rows.append(r)
                print(json.dumps({k: v for k, v in r.items() if k != 'gluon'}), flush=True)
    import triton
    doc = dict(rows=rows, triton=triton.__version__, torch=torch.__version__, group=128, candidates=[dict(WK=a, WM=b) for a, b in BCQ_CANDS], wall_s=time.time() - t0,
               note='the Gluon BCQ fragment kernel (effqwen.gluon; a prototype in scripts/gluon_bcq.py until session 13); rel_err = max |y - ref| / max |ref| against the float32 '
                    'reference of the same (random) signs and α; library_bcq = bcq_matmul on its kernel layout; for Q = 3 the W4A16 '
                    'kernels (library and Gluon prototype) are timed in the same loop, for the issue\'s BCQ3-vs-W4A16 ratio')
    if out: os.environ["EFFQWEN_OUT"] = out
    print(write_result(BCQ_NAME, doc, 'gpu'))

def render():
    from effqwen.core import read_result, render_table, write_table, provenance_line
    doc = read_result(NAME, 'gpu')
    rows = [dict(shape=f"{r['N']}×{r['K']}", M=r['M'], lib=r['library_us'], bf16=r['bf16_cublas_us'], best=r.get('best', '–'), best_us=r.get('best_us'),
                 ratio=r['library_us'] / r['best_us'] if r.get('best_us') else None,
                 err=max((v['rel_err'] for v in r['gluon'].values() if 'rel_err' in v), default=None)) for r in doc['rows']]
    cols = [('shape', 'N×K'), ('M', 'M'), ('lib', 'library W4A16 µs', '{:.2f}'), ('bf16', 'cuBLAS BF16 µs', '{:.2f}'), ('best', 'Gluon config (WK, WM, depth)'),
            ('best_us', 'Gluon µs', '{:.2f}'), ('ratio', 'library / Gluon', '{:.2f}×'), ('err', 'max rel. error', '{:.1e}')]
    md = ('### W4A16 on an mma fragment layout (Gluon, `effqwen.gluon`)\n\n' + render_table(rows, cols)
          + '\nOne CUDA-graph timing run per row (`effqwen.kernels._bench`, L2 flushed); the Gluon column is the fastest of the CTA '
            'shapes tried (all in the JSON); its error is the worst over those shapes. The kernel is `effqwen.gluon.w4a16_fragment_matmul`; runs '
            'before session 13\'s move into the library measured the same kernel code as `scripts/gluon_w4.py` (the git sha below). '
            'This run predates the evict-first loads, PDL and `DEPTH = 1` (session 15): '
            '[kernel_stream_probe](kernel_stream_probe.md) times those variants beside this timer.\n\n'
          + provenance_line(doc) + '\n')
    print(write_table('kernels_gluon_w4', md, 'gpu')); print(md)
    try: doc = read_result(BCQ_NAME, 'gpu')
    except FileNotFoundError: return
    rows = []
    for r in doc['rows']:
        gw = min(r.get('gluon_w4_us', {}).values(), default=None)
        rows.append(dict(shape=f"{r['N']}×{r['K']}", M=r['M'], Q=r['Q'], lib=r['library_bcq_us'], best=r.get('best', '–'), best_us=r.get('best_us'),
                         libw4=r.get('library_w4_us'), gw4=gw, r_lib=r['library_w4_us'] / r['best_us'] if r.get('best_us') and r.get('library_w4_us') else None,
                         r_gw=gw / r['best_us'] if r.get('best_us') and gw else None,
                         err=max((v['rel_err'] for v in r['gluon'].values() if 'rel_err' in v), default=None)))
    cols = [('shape', 'N×K'), ('M', 'M'), ('Q', 'planes'), ('lib', 'library BCQ µs', '{:.2f}'), ('best', 'Gluon BCQ config (WK, WM)'), ('best_us', 'Gluon BCQ µs', '{:.2f}'),
            ('libw4', 'library W4A16 µs', '{:.2f}'), ('gw4', 'Gluon W4A16 µs', '{:.2f}'), ('r_lib', 'library W4A16 / Gluon BCQ', '{:.2f}×'),
            ('r_gw', 'Gluon W4A16 / Gluon BCQ', '{:.2f}×'), ('err', 'max rel. error', '{:.1e}')]
    md = ('### BCQ sign-select on tensor cores (Gluon, `effqwen.gluon`), beside W4A16 in the same loop\n\n' + render_table(rows, cols)
          + '\nGroup 128, random signs and α. The issue\'s target is BCQ 3-plane at M = 1 at least 1.2× faster than our W4A16: the two '
            'ratio columns give it against the library\'s W4A16 kernel and against the Gluon W4A16 kernel (its fastest of DEPTH 0 / 2 '
            'and WK 4 / 8 here). Timer: `effqwen.kernels._bench` (CUDA graph, L2 flushed). The kernel is `effqwen.gluon.bcq_fragment_matmul`; runs before session 13\'s move into the library measured the same kernel code as `scripts/gluon_bcq.py` (the git sha below). '
            'This run predates the evict-first hint and PDL (session 15; the BCQ kernel\'s `cp.async` copies take no L2 hint in Triton 3.6, so only PDL changes it, and it is off under this timer).\n\n'
          + provenance_line(doc) + '\n')
    print(write_table('kernels_gluon_bcq', md, 'gpu')); print(md)

if __name__ == '__main__':
    ap = argparse.ArgumentParser(); ap.add_argument('stage', choices=['run', 'run-bcq', 'render'])
    ap.add_argument('--out', default=None, help='write data/ under this folder (the device: $OUT)'); ap.add_argument('--budget', type=float, default=150)
    a = ap.parse_args()
    run(a.out, a.budget) if a.stage == 'run' else run_bcq(a.out, a.budget) if a.stage == 'run-bcq' else render()
