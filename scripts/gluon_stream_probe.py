"""Where the M = 1 W4A16 time goes (GPU diagnostic): the Gluon fragment kernel's load variants (DEPTH 0 = cp.async of
everything first, 1 = every word in registers first, 2 = a register pipeline; EVICT = weight words evict-first in L2)
beside the library kernel, cuBLAS BF16, torch's tinygemm int4 and a plain streaming read of the same bytes, each timed
three ways in one run:

- `memset`: `effqwen.kernels._bench` (CUDA-graph replay, L2 flushed by zeroing 256 MB: the L2 is then full of dirty
  lines, which the timed call's reads must write back first; what `triton.testing.do_bench` does);
- `read`: the same with the L2 flushed by reading 256 MB (clean lines);
- `chain`: 16 calls on 16 distinct copies of the weight back to back in one CUDA graph (no flush: each call's weight
  is out of L2 because the 15 others went through it), per call; for the Gluon and library kernels also with
  programmatic dependent launch (`+pdl`), as in the engine's decode graph.

    python scripts/gluon_stream_probe.py [--out DIR]   # GPU -> data/results/kernel_stream_probe_h200.json
    python scripts/gluon_stream_probe.py sweep [--out DIR]   # GPU -> data/results/kernel_stream_sweep_h200.json: the engine's
                                                       # W4A16 shapes, every (WK, WM, DEPTH) at M = 1 and 16, chain and chain + PDL only;
                                                       # the engine takes picks only through `profile_steps.py --only frag_picks_ab`
                                                       # (SWEEP_M=1: M = 1 only; SWEEP_TAG=t: written as kernel_stream_sweep_h200_t.json)
    python scripts/gluon_stream_probe.py prefetch [--out DIR]   # GPU -> data/results/kernel_prefetch_probe_h200.json: back to back
                                                       # with / without requesting the next call's weights into L2
    python scripts/gluon_stream_probe.py early [--out DIR]   # GPU -> data/results/kernel_early_trigger_probe_h200.json: back to
                                                       # back under PDL with the next kernel's trigger after / before the wait (GDC_EARLY)
    python scripts/gluon_stream_probe.py boundary [--out DIR]   # GPU -> data/results/kernel_boundary_probe_h200.json: µs per call
                                                       # back to back against the bytes per call (fixed cost per kernel)
    python scripts/gluon_stream_probe.py split [--out DIR]   # GPU -> data/results/kernel_split_probe_h200.json: split-K of the
                                                       # plain products, every (WK, DEPTH) x slices, M = 1 and 16, chain + PDL
    python scripts/gluon_stream_probe.py compute [--out DIR]   # GPU -> data/results/kernel_compute_probe_h200.json: the kernel without its
                                                       # correction MMAs / without its dequantize (wrong products, time only)
    python scripts/gluon_stream_probe.py compute-sub136 [--out DIR]   # GPU -> data/results/kernel_compute_probe_h200_m16.json: the
                                                       # plain kernel at M = 16 per shape, SUB136 off and on
    python scripts/gluon_stream_probe.py compute-sub136-small [--out DIR]   # GPU -> data/results/kernel_compute_probe_h200_m2_8.json:
                                                       # the plain kernel at M = 2, 4, 8 per shape, SUB136 off and on
    python scripts/gluon_stream_probe.py alone [--out DIR]   # GPU -> data/results/kernel_alone_sweep_h200.json: M = 1 alone (no PDL,
                                                       # L2 flushed) at every benchmarked shape, every config x FENCE: the picks
                                                       # for launches outside the engine's graphs (effqwen.gluon.load_alone_picks)
    python scripts/gluon_stream_probe.py render        # -> data/tables/kernel_stream_probe.md, kernel_stream_sweep.md, kernel_split_probe.md, ...
"""
import argparse, itertools, json, os, time, traceback
import torch

SHAPES = [(9216, 2560, 1), (2560, 9216, 1), (4096, 2560, 1), (9216, 2560, 16), (2560, 9216, 16)]   # (N, K, M)
RUN_SPLIT = {(2560, 9216, 1): [(4, 1, 6)], (2560, 9216, 16): [(4, 1, 3)]}   # (WK, DEPTH, S): the split probe's fastest alone
RUN_BCQ = (1,)   # row counts with the Gluon BCQ 3-plane kernel beside (issue 7: BCQ3 >= 1.2x W4A16 at M = 1)
CANDS = [(4, 1, 2), (4, 1, 1), (4, 1, 0), (8, 1, 2), (8, 1, 1), (8, 1, 0)]        # (WK, WM, DEPTH)
CHAIN = 16
NAME = 'kernel_stream_probe_h200'

def _read_kernel():
    import triton, triton.language as tl
    @triton.jit
    def read_words(w_ptr, out_ptr, n, BLOCK: tl.constexpr, ITERS: tl.constexpr):
        "Sum of int32 words (evict-first), one partial per program: the bytes of a weight streamed with nothing else."
        pid = tl.program_id(0)
        acc = tl.zeros([BLOCK], tl.int32)
        for i in tl.static_range(ITERS):
            offs = (pid * ITERS + i) * BLOCK + tl.arange(0, BLOCK)
            acc += tl.load(w_ptr + offs, mask=offs < n, other=0, eviction_policy='evict_first')
        tl.store(out_ptr + pid, tl.sum(acc))
    return read_words

def _chain_us(calls, reps: int = 5) -> float:
    "µs per call of `calls` (one per weight copy) replayed back to back from one CUDA graph (no flush), median of reps."
    st = torch.cuda.Stream(); st.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(st):
        for c in calls: c()
    torch.cuda.current_stream().wait_stream(st); torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for c in calls: c()
    g.replay(); ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); g.replay(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b))
    del g
    return sorted(ts)[len(ts) // 2] * 1e3 / len(calls)

def _w4_copy(N: int, K: int) -> tuple:
    "A random W4A16 weight on the fragment layout with its group-128 scales, on the GPU."
    import effqwen.gluon as G
    return (G.w4_to_fragment(torch.randint(-2**31, 2**31 - 1, (N, K // 8), dtype=torch.int64).to(torch.int32).cuda()),
            (torch.rand(N, K // 128, device='cuda') * 0.02 + 0.005).to(torch.bfloat16))

def _write(name: str, out: str | None, t0: float, **doc):
    "A probe's result -> data/results/<name>.json (under out when given), with the Triton / torch versions and wall time."
    import triton
    from effqwen.core import write_result
    if out: os.environ['EFFQWEN_OUT'] = out
    print(write_result(name, doc | dict(chain=CHAIN, triton=triton.__version__, torch=torch.__version__, wall_s=time.time() - t0), 'gpu'))

def run(out: str | None):
    import triton
    import effqwen.gluon as G
    from effqwen import kernels as Kn
    from effqwen.core import write_result
    read_words = _read_kernel()
    torch.manual_seed(0); rows, t0 = [], time.time()
    pdl_default, ev_default, fe_default = Kn.PDL, G.EVICT, G.FENCE
    for N, K, M in SHAPES:
        wps = [torch.randint(-2**31, 2**31 - 1, (N, K // 8), dtype=torch.int64).to(torch.int32).cuda() for _ in range(CHAIN)]
        s = (torch.rand(N, K // 128, device='cuda') * 0.02 + 0.005).to(torch.bfloat16)
        words = [G.w4_to_fragment(w) for w in wps]
        wkl = [Kn.w4a16_to_kernel_layout(w) for w in wps]
        x = torch.randn(M, K, device='cuda').to(torch.bfloat16)
        ref = Kn.w4a16_mm_ref(x, wps[0], s).float()
        y = torch.empty(M, N, device='cuda', dtype=torch.bfloat16)
        row = dict(N=N, K=K, M=M, weight_bytes=N * K // 2 + 2 * N * (K // 128), methods={})
        def record(name, call_of, pdl_ok=False, err=None):
            "Time call_of(i) (the call on weight copy i) three ways (+ the chain under PDL where the kernel takes it)."
            r = dict(rel_err=err) if err is not None else {}
            try:
                Kn.PDL = False
                r['memset'] = Kn._bench(lambda: call_of(0), 5, flush='memset')
                r['read'] = Kn._bench(lambda: call_of(0), 5, flush='read')
                r['chain'] = _chain_us([lambda i=i: call_of(i) for i in range(CHAIN)])
                if pdl_ok:
                    Kn.PDL = True
                    r['chain+pdl'] = _chain_us([lambda i=i: call_of(i) for i in range(CHAIN)])
            except Exception: r['error'] = traceback.format_exc()[-800:]
            finally: Kn.PDL = pdl_default
            row['methods'][name] = r
            print(N, K, M, name, {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items() if k != 'error'}, r.get('error', '')[-300:], flush=True)
        bref = None   # the BCQ rows' float32 product (set below)
        def gluon(name, call_of):
            "A Gluon kernel: its error, then `record` (a failure to launch is recorded as such)."
            try:
                yy = call_of(0); torch.cuda.synchronize()
                rf = bref if name.startswith('gluon bcq') else ref
                err = float((yy.float() - rf).abs().mean() / rf.abs().mean())
            except Exception: row['methods'][name] = dict(error=traceback.format_exc()[-800:]); return
            record(name, call_of, pdl_ok=True, err=err)
        variants = [(False, True, ''), (True, True, ''), (True, False, ' nofence')]   # (EVICT, FENCE, name suffix)
        for WK, WM, D in CANDS:
            if K % (128 * WK) or (D == 0 and 8 * K > G._SMEM_MAX): continue
            for ev, fe, sfx in variants:
                G.EVICT, G.FENCE = ev, fe
                gluon(f'gluon wk{WK} d{D} ev{int(ev)}{sfx}', lambda i, c=(WK, WM, D): G.w4a16_fragment_matmul(x, words[i], s, c, out=y, split=1))
        for WK, D, S in RUN_SPLIT.get((N, K, M), []):
            for fe, sfx in ((True, ''), (False, ' nofence')):
                G.EVICT, G.FENCE = True, fe
                gluon(f'gluon wk{WK} d{D} s{S} ev1{sfx}', lambda i, c=(WK, 1, D), S=S: G.w4a16_fragment_matmul(x, words[i], s, c, out=y, split=S))
        if M in RUN_BCQ:   # BCQ 3 planes, group 128, on random signs and α (3 bits + α per weight: 0.76x the W4A16 bytes)
            signs = [torch.randint(-2**31, 2**31 - 1, (3, N, K // 32), dtype=torch.int64).to(torch.int32).cuda() for _ in range(CHAIN)]
            alpha = (torch.rand(3, N, K // 128, device='cuda') * 0.02 + 0.002).to(torch.bfloat16)
            bw = [G.bcq_to_fragment(b) for b in signs]
            bref = Kn.bcq_mm_ref(x, signs[0], alpha).float()
            row['bcq3_bytes'] = 3 * N * K // 8 + 2 * 3 * N * (K // 128)
            del signs
            for WK in (4, 8):
                if K % (128 * WK): continue
                G.EVICT = True
                gluon(f'gluon bcq3 wk{WK}', lambda i, c=(WK, 1): G.bcq_fragment_matmul(x, bw[i], alpha, c, out=y))
            del bw
        G.EVICT, G.FENCE = ev_default, fe_default
        record('library w4a16', lambda i: Kn.w4a16_matmul(x, wkl[i], s, kernel_layout=True), pdl_ok=True,
               err=float((Kn.w4a16_matmul(x, wkl[0], s, kernel_layout=True).float() - ref).abs().mean() / ref.abs().mean()))
        wb = [Kn.w4a16_dequantize(wps[i], s, dtype=torch.bfloat16) for i in range(4)]   # 4 copies: 4 × 2 bytes/weight already exceed the L2
        record('cublas bf16', lambda i: x @ wb[i % 4].T)
        del wb
        try:
            tg = [Kn._tinygemm(wps[i], s, 128) for i in range(CHAIN)]
            record('tinygemm int4', lambda i: torch.ops.aten._weight_int4pack_mm(x, tg[i][0], 128, tg[i][1]))
            del tg
        except Exception: row['methods']['tinygemm int4'] = dict(error=traceback.format_exc()[-800:])
        BLOCK, ITERS = 1024, 4
        nw = words[0].numel(); grid = (triton.cdiv(nw, BLOCK * ITERS),)
        part = torch.empty(grid[0], dtype=torch.int32, device='cuda')
        record('stream read (same bytes)', lambda i: read_words[grid](words[i], part, nw, BLOCK=BLOCK, ITERS=ITERS, num_warps=4))
        rows.append(row)
        del words, wkl, wps; torch.cuda.empty_cache()
    doc = dict(rows=rows, triton=triton.__version__, torch=torch.__version__, chain=CHAIN, wall_s=time.time() - t0, sub136_max_m=int(G.SUB136),
               note='µs per call (FENCE: W4A16 gluon rows without "nofence" take effqwen.gluon._use_fence\'s rule at this commit: weight loads ahead of a '
                    'fence ptxas keeps them behind without PDL, and at DEPTH 0 every group\'s scales with the copies; "nofence": FENCE off, the kernel as before; gluon bcq3 wkW: the BCQ 3-plane kernel, group 128, random signs and α, rel_err against its own float32 product; '
                    'gluon wkW dD sS: split-K in S slices) (gluon rows of at most sub136_max_m rows: effqwen.gluon.SUB136, no correction mma). memset / read: effqwen.kernels._bench with that L2 flush; chain: CHAIN calls on distinct weight copies back '
                    'to back in one CUDA graph, per call (chain+pdl: launched with programmatic dependent launch). gluon wkW dD evE: '
                    'the fragment kernel with W warps on K, load variant D (0 cp.async first, 1 registers first, 2 register pipeline), '
                    'E = evict-first weight loads (cp.async in Triton 3.6 takes no L2 hint, so D0 is the same either way); rel_err = '
                    'mean |y - ref| / mean |ref| (Marlin). stream read: a Triton kernel summing the fragment words (same bytes, evict-first).')
    if out: os.environ['EFFQWEN_OUT'] = out
    print(write_result(NAME, doc, 'gpu'))

ENGINE_SHAPES = [(18432, 2560), (12352, 2560), (10240, 2560), (2560, 9216), (2560, 4096)]   # (N, K) of the 4B engine's W4A16 linears
SWEEP = 'kernel_stream_sweep_h200'
SWEEP_M = tuple(int(m) for m in os.environ.get('SWEEP_M', '1,16').split(','))   # row counts the sweep times (SWEEP_M=1: decode only)
SWEEP_TAG = os.environ.get('SWEEP_TAG', '')   # the result as kernel_stream_sweep_h200_<tag>.json (beside the main sweep; frag_picks_ab tries every one)

def _fits(N: int, K: int, WK: int, WM: int, D: int, S: int = 1) -> bool:
    """Whether the fragment kernel takes (WK, WM, DEPTH) with S K slices at (N, K): whole 128-wide groups per warp and slice,
    whole row blocks, DEPTH 0's words in shared memory, DEPTH 1's in registers (at most 2304 k per warp)."""
    import effqwen.gluon as G
    return not (K % (128 * WK * S) or N % (16 * WM) or (D == 0 and 8 * (K // S) * WM > G._SMEM_MAX) or (D == 1 and K // (WK * S) > 2304))

def sweep(out: str | None):
    """Every (WK, WM, DEPTH) of the fragment kernel at the engine's shapes, M = 1 and 16 (env SWEEP_M), timed as the engine runs
    them: in a chain, ± PDL; launches of at most `effqwen.gluon.SUB136` rows on its path (recorded as sub136_max_m)."""
    import effqwen.gluon as G
    from effqwen import kernels as Kn
    torch.manual_seed(0); rows, t0 = [], time.time()
    pdl_default = Kn.PDL
    for N, K in ENGINE_SHAPES:
        wps = [torch.randint(-2**31, 2**31 - 1, (N, K // 8), dtype=torch.int64).to(torch.int32).cuda() for _ in range(CHAIN)]
        s = (torch.rand(N, K // 128, device='cuda') * 0.02 + 0.005).to(torch.bfloat16)
        words = [G.w4_to_fragment(w) for w in wps]
        for M in SWEEP_M:
            x = torch.randn(M, K, device='cuda').to(torch.bfloat16)
            ref = Kn.w4a16_mm_ref(x, wps[0], s).float()
            y = torch.empty(M, N, device='cuda', dtype=torch.bfloat16)
            row = dict(N=N, K=K, M=M, default=list(G.fragment_config('w4a16', M, N, K)), configs={})
            for WK, WM, D in itertools.product((2, 4, 8), (1, 2), (0, 1, 2)):   # WK = 2 / WM = 2: CTAs that fit one wave at large N
                if not _fits(N, K, WK, WM, D): continue
                c, r = (WK, WM, D), {}
                try:
                    G.w4a16_fragment_matmul(x, words[0], s, c, out=y); torch.cuda.synchronize()
                    r['rel_err'] = float((y.float() - ref).abs().mean() / ref.abs().mean())
                    for pdl in (False, True):
                        Kn.PDL = pdl
                        r['chain+pdl' if pdl else 'chain'] = _chain_us([lambda i=i: G.w4a16_fragment_matmul(x, words[i], s, c, out=y) for i in range(CHAIN)])
                except Exception: r['error'] = traceback.format_exc()[-800:]
                finally: Kn.PDL = pdl_default
                row['configs'][f'wk{WK} d{D}' if WM == 1 else f'wk{WK} wm{WM} d{D}'] = r
            ok = {k: v['chain+pdl'] for k, v in row['configs'].items() if 'chain+pdl' in v and v['rel_err'] < 1e-3}
            if ok: row['best'] = min(ok, key=ok.get)
            rows.append(row); print(json.dumps({k: v for k, v in row.items() if k != 'configs'}), {k: v.get('chain+pdl') for k, v in row['configs'].items()}, flush=True)
        del words, wps; torch.cuda.empty_cache()
    _write(f'{SWEEP}_{SWEEP_TAG}' if SWEEP_TAG else SWEEP, out, t0, rows=rows, evict=G.EVICT, sub136_max_m=int(G.SUB136),
           note='µs per call of the Gluon W4A16 fragment kernel, CHAIN calls on distinct weight copies back to back in one CUDA graph '
                '(chain+pdl: launched with programmatic dependent launch, as in the engine decode / verify graphs); default = '
                'effqwen.gluon.fragment_config\'s rule at the run\'s commit; best = fastest under PDL with Marlin rel. error < 1e-3')

PF_NAME = 'kernel_prefetch_probe_h200'
LAYER = [(12352, 2560), (2560, 4096), (18432, 2560), (2560, 9216)]   # a Gated-DeltaNet layer's W4A16 products in decode order

def _seq_cases():
    """The chained-call cases of `prefetch` and `early`: each engine shape alone (CHAIN weight copies) and the 4B layer's
    sequence four times, each at M = 1 and 16, as (seq, weights, x per K, outputs, the outputs of one call each outside a
    graph, the result row to fill) on the GPU; a sequence's weights are dropped after its two row counts."""
    import effqwen.gluon as G
    for name, seq in ({f'{N}x{K}': [(N, K)] * CHAIN for N, K in ENGINE_SHAPES} | {'layer x4': LAYER * 4}).items():
        ws = [_w4_copy(N, K) for N, K in seq]
        for M in (1, 16):
            xs = {K: torch.randn(M, K, device='cuda').to(torch.bfloat16) for _, K in seq}
            ys = [torch.empty(M, N, device='cuda', dtype=torch.bfloat16) for N, _ in seq]
            ref = [G.w4a16_fragment_matmul(xs[K], w, s) for (w, s), (N, K) in zip(ws, seq)]
            yield seq, ws, xs, ys, ref, dict(seq=name, M=M, calls=len(seq), mb=sum(w.numel() * 4 + s.numel() * 2 for w, s in ws) / 1e6)
        ws.clear(); torch.cuda.empty_cache()

def prefetch(out: str | None):
    """The fragment kernel back to back under PDL (one CUDA graph, `_chain_us`), each call on its own weight copy, with
    and without requesting the next call's weights into L2 (`w4a16_fragment_matmul(prefetch=)`: pf1 after each CTA's
    work, pf2 before it): each engine shape alone (CHAIN copies) and the 4B layer's sequence four times, M = 1 and 16.
    Outputs must equal the calls without prefetch bit for bit."""
    import effqwen.gluon as G
    from effqwen import kernels as Kn
    torch.manual_seed(0); rows, t0 = [], time.time()
    pdl_default = Kn.PDL; Kn.PDL = True
    try:
        for seq, ws, xs, ys, ref, row in _seq_cases():
            row['us'] = {}
            for pf in (0, 1, 2):
                calls = [lambda i=i, pf=pf: G.w4a16_fragment_matmul(xs[seq[i][1]], ws[i][0], ws[i][1], out=ys[i], prefetch_at=pf or 1,
                                                                    prefetch=ws[(i + 1) % len(ws)][0] if pf else None) for i in range(len(seq))]
                for c in calls: c()
                torch.cuda.synchronize()
                row[f'pf{pf}_equal'] = all(torch.equal(y, r) for y, r in zip(ys, ref))
                row['us'][f'pf{pf}'] = _chain_us(calls)
            row['tb_s'] = {k: row['mb'] / row['calls'] / v for k, v in row['us'].items()}   # MB per call / µs = TB/s
            rows.append(row); print(json.dumps(row), flush=True)
    finally: Kn.PDL = pdl_default
    _write(PF_NAME, out, t0, rows=rows,
           note='µs per call of the Gluon W4A16 fragment kernel (its engine config), calls on distinct weight copies back to back '
                'in one CUDA graph under PDL; pf0: no prefetch, pf1: each CTA requests its share of the next call\'s weight words '
                'into L2 after its own work, pf2: before it; tb_s: weight + scale bytes per µs')

EARLY_NAME = 'kernel_early_trigger_probe_h200'

def early(out: str | None):
    """`effqwen.gluon.GDC_EARLY` off and on: the fragment kernels back to back under PDL (one CUDA graph, `_chain_us`),
    each call on its own weight copy, letting the next kernel launch after their wait (off) or before it (on); each engine
    shape alone (CHAIN copies) and the 4B layer's sequence four times, M = 1 and 16, the two settings alternated over
    ROUNDS. Outputs must equal the calls outside the graph bit for bit."""
    import effqwen.gluon as G
    from effqwen import kernels as Kn
    torch.manual_seed(0); rows, t0 = [], time.time()
    pdl_default, early_default = Kn.PDL, G.GDC_EARLY; Kn.PDL = True
    rounds = int(os.environ.get('ROUNDS', 3))
    try:
        for seq, ws, xs, ys, ref, row in _seq_cases():
            row['runs'] = {'off': [], 'on': []}
            calls = [lambda i=i: G.w4a16_fragment_matmul(xs[seq[i][1]], ws[i][0], ws[i][1], out=ys[i]) for i in range(len(seq))]
            for _ in range(rounds):
                for e in (False, True):
                    G.GDC_EARLY = e
                    row['runs']['on' if e else 'off'].append(_chain_us(calls))
                    row[f'equal_{"on" if e else "off"}'] = all(torch.equal(y, r) for y, r in zip(ys, ref))
            row['us'] = {k: sorted(v)[len(v) // 2] for k, v in row['runs'].items()}
            row['tb_s'] = {k: row['mb'] / row['calls'] / v for k, v in row['us'].items()}
            rows.append(row); print(json.dumps(row), flush=True)
    finally: Kn.PDL, G.GDC_EARLY = pdl_default, early_default
    _write(EARLY_NAME, out, t0, rows=rows, rounds=rounds,
           note='µs per call of the Gluon W4A16 fragment kernel (its engine config), calls on distinct weight copies back to back '
                'in one CUDA graph under PDL; off: each kernel lets the next launch after its griddepcontrol.wait, on (GDC_EARLY): '
                'before it; us: median over the rounds (runs: each round\'s median of 5 replays); tb_s: weight + scale bytes per µs')

BND_NAME = 'kernel_boundary_probe_h200'

def boundary(out: str | None):
    """What a kernel boundary costs the engine's W4A16 products: the fragment kernel back to back under PDL (one CUDA
    graph, CHAIN calls on distinct weight copies, `_chain_us`) at K = 2560 and 9216 and N from 256 to 18432 rows, M = 1;
    a least-squares line through µs per call against MB per call gives the fixed cost per call (intercept) and the
    streaming rate of the bytes beyond it (1 / slope)."""
    import effqwen.gluon as G
    from effqwen import kernels as Kn
    torch.manual_seed(0); rows, t0 = [], time.time()
    pdl_default = Kn.PDL; Kn.PDL = True
    try:
        for K in (2560, 9216):
            for N in (256, 512, 1024, 2560, 5120, 10240, 18432):
                ws = [_w4_copy(N, K) for _ in range(CHAIN)]
                x, y = torch.randn(1, K, device='cuda').to(torch.bfloat16), torch.empty(1, N, device='cuda', dtype=torch.bfloat16)
                us = _chain_us([lambda w=w, s=s: G.w4a16_fragment_matmul(x, w, s, out=y) for w, s in ws])
                rows.append(dict(N=N, K=K, mb=(ws[0][0].numel() * 4 + ws[0][1].numel() * 2) / 1e6, us=us,
                                 config=list(G.fragment_config('w4a16', 1, N, K, x.device))))
                print(json.dumps(rows[-1]), flush=True)
                del ws; torch.cuda.empty_cache()
    finally: Kn.PDL = pdl_default
    fits = {}
    for K in (2560, 9216):
        r = [q for q in rows if q['K'] == K]
        A = torch.tensor([[1.0, q['mb']] for q in r], dtype=torch.float64); b = torch.tensor([q['us'] for q in r], dtype=torch.float64)
        c = torch.linalg.lstsq(A, b[:, None]).solution[:, 0]
        fits[str(K)] = dict(fixed_us=float(c[0]), tb_s=float(1 / c[1]))
    print(json.dumps(fits))
    _write(BND_NAME, out, t0, rows=rows, fits=fits,
           note='µs per call of the Gluon W4A16 fragment kernel at M = 1 (the engine\'s config for the shape), calls on distinct '
                'weight copies back to back in one CUDA graph under PDL; fits: least squares µs = fixed_us + MB / tb_s per K')

COMPUTE_VARIANTS = ('base', 'nocorr', 'nodq')
COMPUTE_SHAPES = [(N, K, M) for M in (int(m) for m in os.environ.get('COMPUTE_M', '1').split(','))   # COMPUTE_M=16: the verify width
                  for N, K in ((9216, 2560), (2560, 9216), (4096, 2560), (12352, 2560), (18432, 2560), (2560, 4096))]   # (2560x4096: the output projections)

def _patch_compute(variant: str):
    """Probe only, in a fresh process before anything compiles: swap `effqwen.gluon._group` for one that skips the
    kernel's constant-A correction MMAs (`nocorr`: half the tensor-core work), or that and the dequantize ALU work too
    (`nodq`: the words bitcast to bf16 pairs instead of unpacked). The products are wrong: only their time is used."""
    import effqwen.gluon as G
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    if variant not in COMPUTE_VARIANTS: raise ValueError(f'variant {variant!r}: pick one of {COMPUTE_VARIANTS}')
    if 'EFFQWEN_FRAG_SUB136' not in os.environ: G.SUB136 = 0   # base: the kernel with its correction mma (EFFQWEN_FRAG_SUB136=1: SUB136's)
    if variant == 'base': return
    _pair, _dq = G._pair, G._dq

    @gluon.jit
    def _dq_cheap(w, A: gl.constexpr, WK: gl.constexpr, WM: gl.constexpr):
        q = _pair(w)
        x = gl.join(gl.join(q, q), gl.join(q, q))
        x = gl.reshape(x, [WK, WM, 8, 4, 4, 2, 2, 2])
        x = gl.permute(x, [0, 1, 6, 2, 4, 7, 3, 5])
        return gl.convert_layout(gl.reshape(x, [WK, 16 * WM, 64]), A, assert_trivial=True)

    dq = _dq if variant == 'nocorr' else _dq_cheap   # (a closure, as _dq and _pair are: the jit resolves it at compile time)

    @gluon.jit
    def _group_probe(acc, st, a136, A: gl.constexpr, WK: gl.constexpr, WM: gl.constexpr, NT: gl.constexpr, MMA: gl.constexpr,
                     SUB: gl.constexpr = False):   # (SUB: `_group`'s signature; the probe runs with SUB136 off)
        w0, w1, x0, x1, sc = st
        p = gl.zeros([WK, 16 * WM, NT], gl.float32, MMA)
        p = gl.nvidia.ampere.mma_v2(dq(w0, A, WK, WM), x0, p)
        p = gl.nvidia.ampere.mma_v2(dq(w1, A, WK, WM), x1, p)
        return acc + sc.to(gl.float32)[:, :, None] * p

    G._group = _group_probe

def compute_one(variant: str):
    "One variant's timings (a JSON line on stdout): the engine's fragment config per shape, L2 flushed by a memset and back to back under PDL."
    _patch_compute(variant)
    import effqwen.gluon as G
    from effqwen import kernels as Kn
    torch.manual_seed(0); pdl_default, out = Kn.PDL, {}
    for N, K, M in COMPUTE_SHAPES:
        ws = [_w4_copy(N, K) for _ in range(CHAIN)]
        x = torch.randn(M, K, device='cuda').to(torch.bfloat16); y = torch.empty(M, N, device='cuda', dtype=torch.bfloat16)
        c = G.fragment_config('w4a16', M, N, K, x.device)
        r = dict(config=list(c), sub136=G._use_sub136(M))   # (EFFQWEN_FRAG_SUB136=16 COMPUTE_M=16: the verify width on that path)
        try:
            ref = x.float() @ G.w4_fragment_dequantize(*ws[0]).T                 # Marlin's mean relative error against the float32 product
            r['rel_err'] = float((G.w4a16_fragment_matmul(x, *ws[0], c, out=y).float() - ref).abs().mean() / ref.abs().mean())
            Kn.PDL = False; r['memset'] = Kn._bench(lambda: G.w4a16_fragment_matmul(x, *ws[0], c, out=y), 5, flush='memset')
            Kn.PDL = True; r['chain+pdl'] = _chain_us([lambda i=i: G.w4a16_fragment_matmul(x, *ws[i], c, out=y) for i in range(CHAIN)])
        except Exception: r['error'] = traceback.format_exc()[-800:]
        finally: Kn.PDL = pdl_default
        out[f'{N}x{K} M={M}'] = r
        del ws; torch.cuda.empty_cache()
    print('RESULT ' + json.dumps(out), flush=True)

def _compute_runs(runs: dict) -> dict:
    "{name: (variant, extra env)}: each `compute_one` in its own process (the swap must precede every compile); its RESULT per name."
    import subprocess, sys
    res = {}
    for name, (v, env) in runs.items():
        p = subprocess.run([sys.executable, __file__, 'compute-one', '--variant', v], capture_output=True, text=True, env=os.environ | env)
        line = [l for l in p.stdout.splitlines() if l.startswith('RESULT ')]
        res[name] = json.loads(line[-1][7:]) if line else dict(error=(p.stderr or p.stdout)[-1500:])
        print(name, json.dumps(res[name])[:600], flush=True)
    return res

def compute(out: str | None):
    """Is the fragment kernel's tensor-core or ALU work on its critical path at M = 1? Each variant of `_patch_compute`
    timed as `compute_one` does; probe only (the variants' products are wrong). -> data/results/kernel_compute_probe_h200.json"""
    t0 = time.time()
    res = _compute_runs({v: (v, {}) for v in COMPUTE_VARIANTS})
    _write('kernel_compute_probe_h200', out, t0, variants=res,
           note='µs per call of the W4A16 fragment kernel (the engine\'s config per shape, M = 1): memset = effqwen.kernels._bench with '
                'a 256 MB memset flush; chain+pdl = CHAIN calls on distinct weight copies back to back in one CUDA graph under PDL. '
                'base: the kernel; nocorr: without its constant-A correction MMAs; nodq: also without its dequantize ALU work '
                '(words bitcast). Probe only: nocorr / nodq compute wrong products.')

def _sub136_runs(out: str | None, name: str, ms: str, settings: tuple, what: str):
    "The plain kernel at the row counts `ms` per engine shape, once per EFFQWEN_FRAG_SUB136 setting, as `compute_one` times it -> name."
    t0 = time.time()
    res = _compute_runs({f'sub136_max_m={s}': ('base', dict(COMPUTE_M=ms, EFFQWEN_FRAG_SUB136=s)) for s in settings})
    _write(name, out, t0, variants=res,
           note=f'µs per call of the W4A16 fragment kernel at M = {ms.replace(",", ", ")}, the engine\'s config per shape: memset = effqwen.kernels._bench with a '
                '256 MB memset flush; chain+pdl = CHAIN calls on distinct weight copies back to back in one CUDA graph under PDL. The plain ' + what)

def compute_sub136(out: str | None):
    """The plain kernel at M = 16 (the verify width) per shape, with the constant-A correction mma and with `SUB136`
    (code − 8, one mma), as `compute_one` times it. -> data/results/kernel_compute_probe_h200_m16.json"""
    _sub136_runs(out, 'kernel_compute_probe_h200_m16', '16', ('0', '16'),
                 'kernel (no epilogue) with SUB136 off (EFFQWEN_FRAG_SUB136=0: the constant-A correction mma) and on at M = 16 (=16: '
                 'code - 8, one mma). scripts/gluon_stream_probe.py compute-sub136')

def compute_sub136_small(out: str | None):
    """The plain kernel at M = 2, 4, 8 (the same 8-column mma as decode's M = 1) per engine shape, with the correction mma
    (EFFQWEN_FRAG_SUB136=1: only M = 1 on SUB136) and with `SUB136` (=8), as `compute_one` times it.
    -> data/results/kernel_compute_probe_h200_m2_8.json"""
    _sub136_runs(out, 'kernel_compute_probe_h200_m2_8', '2,4,8', ('1', '8'),
                 'kernel with SUB136 for M <= 1 only (EFFQWEN_FRAG_SUB136=1: these M take the constant-A correction mma) and for M <= 8 '
                 '(=8: code - 8, one mma). scripts/gluon_stream_probe.py compute-sub136-small')

def render():
    from effqwen.core import write_table, provenance_line
    doc = json.load(open(f'data/results/{NAME}.json'))
    lines = ['### Where the M = 1 W4A16 time goes (µs per call, one H200 run)', '',
             '| shape (N×K, M) | method | memset flush | read flush | chain | chain + PDL | rel. error |', '|---|---|---|---|---|---|---|']
    f = lambda v: '–' if v is None else f'{v:.2f}'
    for r in doc['rows']:
        for name, m in r['methods'].items():
            if 'error' in m and 'memset' not in m: lines.append(f"| {r['N']}×{r['K']}, {r['M']} | {name} | failed | | | | |"); continue
            e = m.get('rel_err')
            lines.append(f"| {r['N']}×{r['K']}, {r['M']} | {name} | {f(m.get('memset'))} | {f(m.get('read'))} | {f(m.get('chain'))} | "
                         f"{f(m.get('chain+pdl'))} | {'' if e is None else f'{e:.1e}'} |")
    sub = doc.get('sub136_max_m', 0)   # (runs before SUB136: every gluon row with the correction mma)
    lines += ['', doc['note'] + (f' In this run SUB136 = {sub}: the gluon rows of M ≤ {sub} dequantize to code − 8 and skip the correction mma.'
                                 if sub else ' In this run every gluon row has the correction mma.'), '', provenance_line(doc)]
    print(write_table('kernel_stream_probe', '\n'.join(lines), doc['provenance']['profile']))
    import effqwen.gluon as G
    sw = json.load(open(f'data/results/{SWEEP}.json'))
    cfgs = sorted({k for r in sw['rows'] for k in r['configs']})
    lines = ['### The fragment kernel at the engine\'s W4A16 shapes, back to back under PDL (µs per call, one H200 run)', '',
             '| N×K | M | ' + ' | '.join(cfgs) + ' | best | rule without a sweep |', '|---|---|' + '---|' * (len(cfgs) + 2)]
    for r in sw['rows']:
        cell = lambda k: f"{r['configs'][k]['chain+pdl']:.2f}" if 'chain+pdl' in r['configs'].get(k, {}) else '–'
        WK, WM, D = G.fragment_config('w4a16', r['M'], r['N'], r['K']); rule = f'wk{WK} d{D}' if WM == 1 else f'wk{WK} wm{WM} d{D}'   # the rule at this commit (no device: no picks)
        lines.append(f"| {r['N']}×{r['K']} | {r['M']} | " + ' | '.join(cell(k) for k in cfgs) + f" | {r.get('best', '–')} | {rule} |")
    lines += ['', sw['note'] + '. Without PDL (chain) the same calls take: ' + '; '.join(
        f"{r['N']}×{r['K']} M={r['M']} {r['best']}: {r['configs'][r['best']]['chain']:.2f}" for r in sw['rows'] if r.get('best')) + '.', '', provenance_line(sw)]
    print(write_table('kernel_stream_sweep', '\n'.join(lines), sw['provenance']['profile']))
    pf = json.load(open(f'data/results/{PF_NAME}.json'))
    lines = ['### The next call\'s weights requested into L2 (`prefetch`), back to back under PDL (µs per call, one H200 run)', '',
             '| calls | M | MB | no prefetch | after the CTA\'s work | before it | TB/s without | outputs equal |', '|---|---|---|---|---|---|---|---|']
    for r in pf['rows']:
        u = r['us']
        lines.append(f"| {r['seq']} | {r['M']} | {r['mb'] / r['calls']:.1f} | {u['pf0']:.2f} | {u['pf1']:.2f} | {u['pf2']:.2f} | "
                     f"{r['tb_s']['pf0']:.2f} | {all(r[f'pf{i}_equal'] for i in (1, 2))} |")
    lines += ['', pf['note'] + f". 'layer x4': a Gated-DeltaNet layer's products ({', '.join(f'{n}×{k}' for n, k in LAYER)}) four times.", '', provenance_line(pf)]
    print(write_table('kernel_prefetch_probe', '\n'.join(lines), pf['provenance']['profile']))
    bd = json.load(open(f'data/results/{BND_NAME}.json'))
    lines = ['### What a kernel boundary costs: the fragment kernel back to back under PDL at M = 1 (µs per call, one H200 run)', '',
             '| N×K | MB per call | config (WK, WM, DEPTH) | µs per call | TB/s |', '|---|---|---|---|---|']
    for r in bd['rows']:
        lines.append(f"| {r['N']}×{r['K']} | {r['mb']:.2f} | {tuple(r['config'])} | {r['us']:.2f} | {r['mb'] / r['us']:.2f} |")
    lines += ['', 'Least-squares line per K: ' + '; '.join(f"K = {k}: {f['fixed_us']:.2f} µs per call plus the bytes at {f['tb_s']:.2f} TB/s"
                                                       for k, f in bd['fits'].items()) + '.', '', bd['note'], '', provenance_line(bd)]
    print(write_table('kernel_boundary_probe', '\n'.join(lines), bd['provenance']['profile']))
    sp = json.load(open(f'data/results/{SPLIT_NAME}.json'))
    T = ('memset', 'read', 'chain', 'chain+pdl')
    lines = ['### Split-K of the fragment kernel: the fastest config per timing, split and unsplit (µs per call, one H200 run)', '',
             '| N×K | M | timing | fastest (any split) | µs | fastest unsplit | µs | unsplit / split |', '|---|---|---|---|---|---|---|---|']
    for r in sp['rows']:
        for t in T:
            b, u = r.get(f'best_{t}'), r.get(f'best_unsplit_{t}')
            if not (b and u): continue
            tb, tu = r['configs'][b][t], r['configs'][u][t]
            lines.append(f"| {r['N']}×{r['K']} | {r['M']} | {t} | {b} | {tb:.2f} | {u} | {tu:.2f} | {tu / tb:.2f}× |")
    lines += ['', sp['note'] + '; every config is in the JSON.', '', provenance_line(sp)]
    print(write_table('kernel_split_probe', '\n'.join(lines), sp['provenance']['profile']))
    xo = json.load(open('data/results/kernel_xorder_probe_h200.json'))   # (the xorder stage ran at 11803d6; the flags are gone)
    lines = ['### Where x and the scales are requested (µs per call, one H200 run, `kernel_xorder_probe_h200`)', '',
             '| N×K, M | config | variant | memset | read | chain | chain + PDL | equal to base |', '|---|---|---|---|---|---|---|---|']
    for r in xo['rows']:
        for name, m in r['configs'].items():
            c, v = name.rsplit(' ', 1)
            lines.append(f"| {r['N']}×{r['K']}, {r['M']} | {c} | {v} | " + ' | '.join(f'{m[t]:.2f}' for t in T) + f" | {m['equal_base']} |")
        lines.append(f"| {r['N']}×{r['K']}, {r['M']} | stream read | | " + ' | '.join(f"{r['stream_read'][t]:.2f}" for t in T[:3]) + ' | – | |')
    lines += ['', xo['note'], '', provenance_line(xo)]
    print(write_table('kernel_xorder_probe', '\n'.join(lines), xo['provenance']['profile']))
    import glob
    for f in sorted(glob.glob('data/results/kernel_ab_h200_*.json')):
        ab, tag = json.load(open(f)), f.split('kernel_ab_h200_')[1][:-5]
        lines = [f'### A/B `{tag}`: the fragment kernels of `{ab["base"]}` (base) and of the commit (new), one H200 run (µs per call, medians of {ab["rounds"]} interleaved rounds)', '',
                 '| kernel | N×K, M | config | ' + ' | '.join(f'{t} base / new' for t in T) + ' | equal |', '|---|---|---|' + '---|' * (len(T) + 1)]
        for r in ab['rows']:
            for name, m in r['configs'].items():
                if 'base' not in m: lines.append(f"| {r['fmt']} | {r['N']}×{r['K']}, {r['M']} | {name} | failed |" + ' |' * len(T)); continue
                lines.append(f"| {r['fmt']} | {r['N']}×{r['K']}, {r['M']} | {name} | " + ' | '.join(f"{m['base'][t]:.2f} / {m['new'][t]:.2f}" for t in T) + f" | {m['equal']} |")
        lines += ['', ab['note'], '', provenance_line(ab)]
        print(write_table(f'kernel_ab_{tag}', '\n'.join(lines), ab['provenance']['profile']))

SPLIT_NAME = 'kernel_split_probe_h200'
SPLIT_SHAPES = [(2560, 9216), (2560, 4096)]   # the engine's plain products with the fewest CTAs (160 row blocks: 1.2 per SM)

SPLIT_S = tuple(int(v) for v in os.environ.get('SPLIT_S', '1,2,3,4,6,8,9').split(','))   # K slices tried
SPLIT_WK = tuple(int(v) for v in os.environ.get('SPLIT_WK', '2,4,8').split(','))           # warps on K tried
SPLIT_M = tuple(int(v) for v in os.environ.get('SPLIT_M', '1,16').split(','))

def split(out: str | None):
    """Split-K of the fragment kernel (`w4a16_fragment_matmul(split=S)`: K in S slices, one CTA each, the last adds the
    partials) at the engine's plain products with the fewest row blocks, M in SPLIT_M: every (WK, DEPTH) x S that divides
    K into whole groups, timed alone with the L2 flushed (`_bench`, memset and read flush: issue 7's measurement) and back
    to back (`_chain_us`, CHAIN weight copies, without and with PDL); error against the float32 product of the same codes
    (Marlin's mean relative error), and whether a second call (counters reset by the first) gives the same output."""
    import effqwen.gluon as G
    from effqwen import kernels as Kn
    torch.manual_seed(0); rows, t0 = [], time.time()
    pdl_default = Kn.PDL
    try:
        for N, K in SPLIT_SHAPES:
            ws = [_w4_copy(N, K) for _ in range(CHAIN)]
            Wf = G.w4_fragment_dequantize(*ws[0])
            for M in SPLIT_M:
                x, y = torch.randn(M, K, device='cuda').to(torch.bfloat16), torch.empty(M, N, device='cuda', dtype=torch.bfloat16)
                ref = x.float() @ Wf.T
                d = G.fragment_config('w4a16', M, N, K, x.device)
                row = dict(N=N, K=K, M=M, default=list(d), configs={})
                for WK, D, S in itertools.product(SPLIT_WK, (0, 1), SPLIT_S):
                    if K % (128 * WK * S) or (D == 0 and 8 * K // S > G._SMEM_MAX) or (D == 1 and K // (WK * S) > 2304): continue
                    c, r = (WK, 1, D), {}
                    try:
                        Kn.PDL = False
                        G.w4a16_fragment_matmul(x, ws[0][0], ws[0][1], c, out=y, split=S); torch.cuda.synchronize()
                        r['rel_err'] = float((y.float() - ref).abs().mean() / ref.abs().mean())
                        y1 = y.clone(); y.zero_(); G.w4a16_fragment_matmul(x, ws[0][0], ws[0][1], c, out=y, split=S); torch.cuda.synchronize()
                        r['again_equal'] = bool(torch.equal(y, y1))
                        call = lambda i, c=c, S=S: G.w4a16_fragment_matmul(x, ws[i][0], ws[i][1], c, out=y, split=S)
                        r['memset'] = Kn._bench(lambda: call(0), 5, flush='memset')
                        r['read'] = Kn._bench(lambda: call(0), 5, flush='read')
                        r['chain'] = _chain_us([lambda i=i: call(i) for i in range(CHAIN)])
                        Kn.PDL = True
                        r['chain+pdl'] = _chain_us([lambda i=i: call(i) for i in range(CHAIN)])
                    except Exception: r['error'] = traceback.format_exc()[-600:]
                    finally: Kn.PDL = pdl_default
                    row['configs'][f'wk{WK} d{D} s{S}'] = r
                    print(N, K, M, f'wk{WK} d{D} s{S}', {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items() if k != 'error'}, r.get('error', '')[-300:], flush=True)
                good = {k: v for k, v in row['configs'].items() if 'memset' in v and v['again_equal']}
                e0 = min((v['rel_err'] for v in good.values()), default=0.0)
                good = {k: v for k, v in good.items() if v['rel_err'] <= 1.05 * e0}   # the same error as the best unsplit sum (the split changes only the order)
                for t in ('memset', 'read', 'chain', 'chain+pdl'):
                    if good: row[f'best_{t}'] = min(good, key=lambda k: good[k][t])
                    s1 = {k: v for k, v in good.items() if k.endswith(' s1')}
                    if s1: row[f'best_unsplit_{t}'] = min(s1, key=lambda k: s1[k][t])
                rows.append(row); print(json.dumps({k: v for k, v in row.items() if k != 'configs'}), flush=True)
            del ws; torch.cuda.empty_cache()
    finally: Kn.PDL = pdl_default
    _write(SPLIT_NAME, out, t0, rows=rows,
           note='µs per call of the Gluon W4A16 fragment kernel with split-K (S slices of K, one CTA each; the last CTA of a row '
                'block adds the float32 partials): memset / read = effqwen.kernels._bench (the call alone, L2 flushed by zeroing / '
                'reading 256 MB, no PDL); chain = CHAIN calls on distinct weight copies back to back in one CUDA graph, per call; '
                'chain+pdl = the same under programmatic dependent launch. rel_err: mean |y - ref| / mean |ref| against the float32 '
                'product of the same codes; again_equal: a second call gives the same output; best_<timing>: fastest with '
                'again_equal and rel_err within 5% of the smallest (the split changes only the summation order)')

ALONE = 'kernel_alone_sweep_h200'
ALONE_ROUNDS = int(os.environ.get('ALONE_ROUNDS', '3'))   # interleaved rounds of the finalists
ALONE_SPLIT = os.environ.get('ALONE_SPLIT', '0') == '1'   # also split-K candidates (' s<S>'; probe only: the picks take no split)

def _alone_shapes() -> list:
    "(N, K) of every Qwen3.5-4B / 9B linear that `benchmark_linears` times (env ALONE_SHAPES='NxK,...': those)."
    from effqwen.kernels import QWEN35_SHAPES
    if os.environ.get('ALONE_SHAPES'): return [tuple(int(v) for v in t.split('x')) for t in os.environ['ALONE_SHAPES'].split(',')]
    return list(dict.fromkeys(nk for m in ('Qwen3.5-4B', 'Qwen3.5-9B') for nk in QWEN35_SHAPES[m].values()))

def alone(out: str | None):
    """The W4A16 fragment kernel at M = 1 alone, as issue 7's targets time it (`effqwen.kernels._bench`: no PDL, L2
    flushed by a memset; also by a read), at every linear shape the kernel benchmark times: every (WK, WM, DEPTH 0 / 1) x
    FENCE, and with WK <= 4 also with RED1 (the warps' sum in one shared-memory pass), once, then the three fastest and the config a launch took before this sweep existed (`rule`: the engine's picks
    or `fragment_config`'s rule, and `_use_fence`) in ALONE_ROUNDS interleaved rounds, beside a plain read of the same
    words, tinygemm int4 and cuBLAS BF16 (not for the LM heads); best_alone = the finalist with the lowest median under the
    memset flush: the pick `effqwen.gluon.load_alone_picks` takes. Variants: 'wk<WK> [wm<WM> ]d<D>[ nofence][ red1]'."""
    os.environ['EFFQWEN_FRAG_ALONE'] = '0'   # the launches this sweep replaces, not its own earlier picks
    import effqwen.gluon as G
    from effqwen import kernels as Kn
    G._FRAG_ALONE.clear()
    torch.manual_seed(0); rows, t0 = [], time.time()
    fe0, r0 = G.FENCE, G.RED1
    import triton
    read_words = _read_kernel()
    def name_of(WK, WM, D, fe, S=1, r1=False): return f'wk{WK}' + (f' wm{WM}' if WM > 1 else '') + f' d{D}' + ('' if fe else ' nofence') + (f' s{S}' if S > 1 else '') + (' red1' if r1 else '')
    try:
        for N, K in _alone_shapes():
            wp = torch.randint(-2**31, 2**31 - 1, (N, K // 8), dtype=torch.int64).to(torch.int32).cuda()
            s = (torch.rand(N, K // 128, device='cuda') * 0.02 + 0.005).to(torch.bfloat16)
            words = G.w4_to_fragment(wp)
            x = torch.randn(1, K, device='cuda').to(torch.bfloat16)
            ref = Kn.w4a16_mm_ref(x, wp, s).float()
            y = torch.empty(1, N, device='cuda', dtype=torch.bfloat16)
            G.FENCE = fe0
            rc = G.fragment_config('w4a16', 1, N, K, x.device, pdl=False)
            rule = (*rc, G._use_fence(1, rc[2]))
            row = dict(N=N, K=K, M=1, weight_bytes=N * K // 2 + 2 * N * (K // 128), rule=name_of(*rule), rel_err={}, once={}, rounds={})
            def call(v):
                WK, WM, D, fe, S, r1 = tuple(v) + (1, False)[len(v) - 4:]   # (split, red1) default to none
                G.FENCE, G.RED1 = fe, r1
                return G.w4a16_fragment_matmul(x, words, s, (WK, WM, D), out=y, split=S)
            def check(v):
                try:
                    with Kn.no_pdl(): call(v)
                    torch.cuda.synchronize()
                except Exception: print(name_of(*v), traceback.format_exc()[-400:], flush=True); return False
                e = row['rel_err'][name_of(*v)] = float((y.float() - ref).abs().mean() / ref.abs().mean())
                return e < 1e-3
            cands = [(WK, WM, D, fe) for WK, WM, D in itertools.product((2, 4, 8), (1, 2), (0, 1)) for fe in (True, False) if _fits(N, K, WK, WM, D)]
            if ALONE_SPLIT:   # split-K (one CTA per slice, the last adds the partials): WM = 1, S slices of whole groups
                cands += [(WK, 1, D, fe, S) for WK, D, fe, S in itertools.product((2, 4, 8), (0, 1), (True, False), (2, 3, 4, 5, 6, 8, 9, 10))
                          if _fits(N, K, WK, 1, D, S)]
            cands += [(WK, WM, D, fe, 1, True) for WK, WM, D, fe, *S in cands if not S and WK <= 4]   # the warps' sum in one pass (RED1)
            for v in cands:
                if check(v): row['once'][name_of(*v)] = Kn._bench(lambda v=v: call(v), 5, flush='memset')
            best = sorted((v for v in cands if name_of(*v) in row['once']), key=lambda v: row['once'][name_of(*v)])[:3]
            fins = [v for v in dict.fromkeys(best + [rule]) if name_of(*v) in row['rel_err'] or check(v)]
            others = {}
            if N < 100_000:
                wb = Kn.w4a16_dequantize(wp, s, dtype=torch.bfloat16)
                tg = Kn._tinygemm(wp, s, 128)
                nw = words.numel(); BLOCK, ITERS = 1024, 4; grid = (triton.cdiv(nw, BLOCK * ITERS),)
                part = torch.empty(grid[0], dtype=torch.int32, device='cuda')
                others = {'stream read (same bytes)': lambda: read_words[grid](words, part, nw, BLOCK=BLOCK, ITERS=ITERS, num_warps=4),
                          'tinygemm int4': lambda: torch.ops.aten._weight_int4pack_mm(x, tg[0], 128, tg[1]),
                          'cublas bf16': lambda: x @ wb.T}
            for r in range(ALONE_ROUNDS):
                for nm, fn in [(name_of(*v), lambda v=v: call(v)) for v in fins] + list(others.items()):
                    for fl in ('memset', 'read'):
                        row['rounds'].setdefault(nm, {}).setdefault(fl, []).append(Kn._bench(fn, 5, flush=fl))
            row['median'] = {nm: {fl: sorted(v)[len(v) // 2] for fl, v in d.items()} for nm, d in row['rounds'].items()}
            row['best_alone'] = min((name_of(*v) for v in fins), key=lambda nm: row['median'][nm]['memset'])
            rows.append(row)
            print(N, K, 'rule', row['rule'], 'best', row['best_alone'], {k: {a: round(b, 2) for a, b in v.items()} for k, v in row['median'].items()}, flush=True)
            others.clear(); del words, wp; torch.cuda.empty_cache()
    finally: G.FENCE, G.RED1 = fe0, r0
    _write(ALONE + ('_split' if ALONE_SPLIT else '') , out, t0, rows=rows, rounds=ALONE_ROUNDS, sub136_max_m=int(G.SUB136), split_candidates=ALONE_SPLIT, 
           note='µs per call at M = 1 alone (effqwen.kernels._bench, no PDL): once = every (WK, WM, DEPTH 0 / 1) x FENCE (x RED1 at WK <= 4: '
                '" red1", the warps\' sum in one shared-memory pass) once with the memset flush; rounds / median = the three fastest, the config a launch took before this sweep (rule: the engine\'s '
                'picks or fragment_config\'s rule, with _use_fence), a plain Triton read of the same words, tinygemm int4 and cuBLAS '
                'BF16 (not for the LM heads), in interleaved rounds with the memset and the read flush; best_alone = the finalist '
                'with the lowest memset median (effqwen.gluon.load_alone_picks); rel_err = Marlin\'s mean |y - ref| / mean |ref|')

if __name__ == '__main__':
    ap = argparse.ArgumentParser(); ap.add_argument('stage', nargs='?', default='run', choices=['run', 'sweep', 'prefetch', 'early', 'boundary', 'split', 'compute', 'compute-one', 'compute-sub136', 'compute-sub136-small', 'alone', 'render']); ap.add_argument('--out'); ap.add_argument('--variant', default='base')
    a = ap.parse_args()
    {'run': lambda: run(a.out), 'sweep': lambda: sweep(a.out), 'prefetch': lambda: prefetch(a.out), 'early': lambda: early(a.out), 'boundary': lambda: boundary(a.out), 'split': lambda: split(a.out), 'compute': lambda: compute(a.out), 'compute-sub136': lambda: compute_sub136(a.out), 'compute-sub136-small': lambda: compute_sub136_small(a.out), 'compute-one': lambda: compute_one(a.variant), 'alone': lambda: alone(a.out), 'render': render}[a.stage]()
