"""Where the engine's time goes at the Qwen3.5-4B shape (random weights, batch 1): torch.profiler kernel traces of one
prefill of `--prompt` tokens, one decode step, one verify-16 step (the W4A16 engine) and one step of the 5-layer DFlash
drafter (bf16, full attention), each run eagerly (outside its CUDA graph, so every kernel is traced; the graph replays
the same kernels without the launch gaps). Kernels are grouped by what they are (cuBLAS matmul, our Triton W4A16
kernels, flash-linear-attention chunk kernels, attention, torch elementwise/reductions, copies) — a breakdown for
deciding what to optimize, not a latency result (26_latency has those).

    python scripts/profile_steps.py --out $OUT          # on the GPU -> $OUT/data/results/step_profile_h200.json
    python scripts/profile_steps.py --render            # -> data/tables/step_profile.md
    python scripts/profile_steps.py --only fragment_ab --out $OUT   # parts alone (also: attr_ab, skip_ab, sub136_ab, early_ab, ctx_curve, decode_chain_ab, swiglu_epilogue_ab, norm_epilogue_ab, norm_split_ab, gdn_xcat_ab, frag_picks_ab, pdl_ab, split_ab, fence_ab, argmax_head_ab, decode_profile, ...)
                                                        # -> step_<parts>_h200.json; --render-ab -> engine_step_ab.md (every step_*_ab_h200.json)
    DEV=cpu TINY=1 python scripts/profile_steps.py      # dry run on a CPU (tiny Qwen3.5, CPU op times)
"""
import argparse, json, os, re, time
from collections import defaultdict
from pathlib import Path
import torch

DEV = os.environ.get('DEV', 'cuda'); TINY = bool(os.environ.get('TINY'))
GROUPS = [('w4a16 triton', r'w4a16|_mv2?_kernel|_tc_kernel|dequant|fragment'), ('cuBLAS matmul', r'gemm|gemv|cutlass|nvjet|sm90_xmma|matmul|cublas|addmm|aten::mm'),
          ('gated-deltanet (fla / ours)', r'chunk|gdn|delta|_conv_|fused_recurrent|solve_tril|wy_|cumsum'),
          ('attention', r'flash|fmha|attn|attention|softmax|sdpa'), ('norm / swiglu (triton)', r'rms|norm|swiglu|silu'),
          ('copy / cat / index', r'copy|cat|index|gather|scatter|fill|memcpy|memset'), ('torch elementwise / reduce', r'elementwise|vectorized|reduce|unrolled|argmax|aten::')]

def group_of(name: str) -> str:
    n = name.lower()
    return next((g for g, pat in GROUPS if re.search(pat, n)), 'other')

def profile(fn, n: int = 1) -> dict:
    "Kernel (GPU) or op (CPU) self times of n calls of fn, grouped; plus the 12 costliest kernels."
    from torch.profiler import profile as tp, ProfilerActivity
    acts = [ProfilerActivity.CUDA] if DEV == 'cuda' else [ProfilerActivity.CPU]
    fn()
    if DEV == 'cuda': torch.cuda.synchronize()
    with tp(activities=acts) as prof:
        for _ in range(n): fn()
        if DEV == 'cuda': torch.cuda.synchronize()
    groups, kernels = defaultdict(lambda: [0.0, 0]), defaultdict(lambda: [0.0, 0])
    for e in prof.events():
        if DEV == 'cuda' and e.device_type != torch.autograd.DeviceType.CUDA: continue
        if DEV != 'cuda' and (e.cpu_parent is not None or not e.name.startswith('aten::')): continue   # top-level aten ops on CPU
        us = (e.device_time if DEV == 'cuda' else e.cpu_time) / n
        g = groups[group_of(e.name)]; g[0] += us; g[1] += 1 / n
        k = kernels[e.name[:120]]; k[0] += us; k[1] += 1 / n
    tot = sum(v[0] for v in groups.values())
    return dict(total_us=tot, kernels=sum(v[1] for v in groups.values()),
                groups={g: dict(us=v[0], count=v[1], share=v[0] / max(tot, 1e-9)) for g, v in sorted(groups.items(), key=lambda x: -x[1][0])},
                top=[dict(name=k, us=v[0], count=v[1]) for k, v in sorted(kernels.items(), key=lambda x: -x[1][0])[:12]])

def idle_gaps(fn, top: int = 8, min_us: float = 20.0) -> dict|None:
    """Where the GPU waits during one call of fn (CUDA only): kernels and CPU ops traced together, the union of kernel
    intervals against the call's span, and the longest idle gaps with the kernels around them and the CPU ops that ran
    meanwhile (a gap means the host had not yet launched the next kernel). The tracer slows the host, so the gaps are
    larger than in an untraced call; where they fall is the point."""
    if DEV != 'cuda': return None
    from torch.profiler import profile as tp, ProfilerActivity
    fn(); torch.cuda.synchronize()
    with tp(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn(); torch.cuda.synchronize()
    ev = prof.events()
    ks = [(e.time_range.start, e.time_range.end, e.name) for e in ev if e.device_type == torch.autograd.DeviceType.CUDA]
    cpu = [(e.time_range.start, e.time_range.end, e.name) for e in ev
           if e.device_type != torch.autograd.DeviceType.CUDA and (e.cpu_parent is None or e.cpu_parent.cpu_parent is None)]
    return gap_stats(ks, cpu, top, min_us) if ks else None

def gap_stats(ks: list, cpu: list, top: int = 8, min_us: float = 20.0) -> dict:
    "Idle time between (start, end, name) kernel intervals (overlaps merged) and the host ops [(start, end, name)] inside the longest gaps."
    ks = sorted(ks, key=lambda k: k[0])
    busy, gaps, end, prev = 0.0, [], ks[0][0], ks[0][2]
    for a, b, name in ks:
        if a > end + min_us: gaps.append((a - end, end, a, prev, name))
        if b > end: busy += b - max(a, end); end = b; prev = name
    gaps.sort(reverse=True)
    def during(a, b):
        ov = defaultdict(float)
        for c0, c1, n in cpu:
            if c1 > a and c0 < b: ov[n[:60]] += min(c1, b) - max(c0, a)
        return [dict(op=n, us=round(u, 1)) for n, u in sorted(ov.items(), key=lambda x: -x[1])[:4]]
    span = ks[-1][1] - ks[0][0]
    return dict(span_us=span, busy_us=busy, idle_us=span - busy, gaps_over_min=len(gaps), idle_in_gaps_us=sum(g[0] for g in gaps), min_gap_us=min_us,
                top=[dict(us=round(g[0], 1), after=g[3][:60], before=g[4][:60], cpu=during(g[1], g[2])) for g in gaps[:top]])

def prefill_ab(eng, ids, reps: int = 3, rounds: int = 3) -> dict:
    """Prefill wall time (ms, median of `rounds` x `reps` runs, the combinations interleaved round by round against
    drift) with the copy- and time-saving prefill paths on and off: flash-linear-attention's grouped values
    (`eng.chunk_gva`, q/k not repeated), SDPA's `enable_gqa` (k/v not repeated), the next layer's dequantize on a side
    stream (`PREFILL_DEQUANT_AHEAD`), the W4A16 linears called directly (`PREFILL_DIRECT`, less host time per call) and
    q/k L2-normalized in the conv kernel (`PREFILL_QK_NORM`, not in two passes of the chunk rule), each run eagerly,
    and the engine's own paths replayed from the graph recorded for the prompt's size bucket (`PREFILL_GRAPHS`);
    the engine is left as it was. Every combination must give the same next token."""
    import effqwen.engine as E
    own = (eng.chunk_gva, E.PREFILL_SDPA_GQA, E.PREFILL_DEQUANT_AHEAD, E.PREFILL_DIRECT, E.PREFILL_QK_NORM)
    graphs_own = E.PREFILL_GRAPHS
    sync = (lambda: torch.cuda.synchronize()) if DEV == 'cuda' else (lambda: None)
    g1 = own[0]                                   # grouped values only where the engine has them (flash-linear-attention)
    combos = [(False, False, False, False, False), (g1, False, False, False, False), (g1, True, False, False, False),
              (g1, True, False, True, False), (g1, True, False, True, True), (g1, False, False, True, True), (g1, True, True, False, True)]
    combos = [c + (False,) for c in dict.fromkeys(combos)] + [own + (True,)]   # + the engine's own paths, prefill replayed from a recorded graph
    key = lambda c: 'gva={:d},sdpa_gqa={:d},ahead={:d},direct={:d},qknorm={:d},graphs={:d}'.format(*c)
    ts, toks, errors = {key(c): [] for c in combos}, set(), {}
    def run(c):
        eng.chunk_gva, E.PREFILL_SDPA_GQA, E.PREFILL_DEQUANT_AHEAD, E.PREFILL_DIRECT, E.PREFILL_QK_NORM = c[:5]
        E.PREFILL_GRAPHS = bool(c[5]); eng.drop_prefill_graphs()      # each combination eagerly; the last also recorded
        eng.prefill(ids); sync()
        for _ in range(reps):
            t = time.perf_counter(); eng.prefill(ids); sync(); ts[key(c)].append((time.perf_counter() - t) * 1e3)
        toks.add(int(eng.next_tok[0]))
    for r in range(rounds):
        for c in combos:
            if key(c) in errors: continue
            try: run(c)
            except Exception as e:                                # a path that fails leaves the others (and the default) measured
                errors[key(c)] = f'{type(e).__name__}: {e}'[:300]; print('prefill', key(c), 'failed:', errors[key(c)], flush=True)
    eng.chunk_gva, E.PREFILL_SDPA_GQA, E.PREFILL_DEQUANT_AHEAD, E.PREFILL_DIRECT, E.PREFILL_QK_NORM = own
    E.PREFILL_GRAPHS = graphs_own; eng.drop_prefill_graphs()
    out = {k: sorted(v)[len(v) // 2] for k, v in ts.items() if v and k not in errors}
    for k, v in out.items(): print('prefill', k, f'{v:.2f} ms', flush=True)
    return dict(ms=out, runs=rounds * reps, same_next_token=len(toks) == 1,
                engine_default=dict(gva=own[0], sdpa_gqa=own[1], ahead=own[2], direct=own[3], qknorm=own[4]), errors=errors)

def pdl_probe() -> str|None:
    """Compile and run the PDL kernels once (the fused norm, then a W4A16 mat-vec); if that fails, turn programmatic
    dependent launch off for the rest of this run (the profile then measures the plain launches) and say why."""
    import effqwen.kernels as Kn
    if DEV != 'cuda' or not Kn.pdl_on(torch.device('cuda')): return None
    try:
        from effqwen.engine import fused_add_rms_norm
        lin = Kn.W4A16Linear.from_float(torch.nn.Linear(512, 256, bias=False, device='cuda', dtype=torch.bfloat16), group_size=128)
        x = torch.randn(1, 512, device='cuda', dtype=torch.bfloat16)
        lin(fused_add_rms_norm(x, None, torch.ones(512, device='cuda'), 1e-6, False)[1]); torch.cuda.synchronize()
        return None
    except Exception as e:
        Kn.PDL = False; print('PDL probe failed, PDL off:', e, flush=True)
        return f'{type(e).__name__}: {e}'[:300]

def steps_ab(eng, ids, settings: dict, reps: int = 25, rounds: int = 3, setup: bool = False) -> dict:
    """Decode-1 and verify-16 step time (ms: CUDA-graph replay between CUDA events, median over `rounds` x `reps`
    replays after the prompt, the settings alternating round by round) under each of `settings` ({name: function that
    applies it}); the graphs are recorded again for each setting (`setup`: the engine's whole state is set up again).
    Also `decode_n`: ms per token of `decode_n_tokens` as `benchmark_latency` times it (the replays back to back, host
    clock around the synced call, after 4 warm-up tokens; decode_chain_ab's rounds of it agreed to 0.003 ms where the
    single replays spread by 0.05). Every setting must give the same 16 greedy tokens: `same_tokens`, and where they
    part, `tokens_part` names each setting's first round and token that differ from the first setting's first round
    (a setting that parts from its own earlier rounds is nondeterministic, not just another rounding). The caller
    restores its own setting afterwards."""
    from effqwen.engine import _gpu_ms, _sync
    errors, rounds_toks, dev = {}, {}, torch.device(DEV)
    nd = min(64, eng.max_seq_len - ids.shape[-1] - 8)
    ts = {k: dict(decode=[], verify=[], decode_n=[]) for k in settings}
    for r in range(rounds):
        for key, apply in settings.items():
            if key in errors: continue
            try:
                apply()
                if setup: eng.setup(eng.max_seq_len)
                else: eng._capture()
                eng.prefill(ids); rounds_toks.setdefault(key, []).append(eng.decode_n_tokens(16).tolist())
                eng.prefill(ids); ts[key]['decode'].append(_gpu_ms(lambda: eng._step('decode'), reps, warmup=3))
                eng.prefill(ids); ts[key]['verify'].append(_gpu_ms(lambda: eng._step('verify'), reps, warmup=3))
                if nd >= 8:
                    eng.prefill(ids); eng.decode_n_tokens(4); t = _sync(dev)    # (the engine's clock: synced, then perf_counter)
                    eng.decode_n_tokens(nd); ts[key]['decode_n'].append((_sync(dev) - t) / nd * 1e3)
            except Exception as e:
                errors[key] = f'{type(e).__name__}: {e}'[:300]
    out = {k: (dict(error=errors[k]) if k in errors else {f'{s}_ms': sorted(v)[len(v) // 2] for s, v in d.items() if v} | {f'{s}_rounds_ms': v for s, v in d.items() if v})
           for k, d in ts.items()}
    for k, v in out.items(): print(k, {a: b for a, b in v.items() if not a.endswith('rounds_ms')}, flush=True)
    same = len(rounds_toks) == len(settings) and len({tuple(t) for rs in rounds_toks.values() for t in rs}) == 1
    return dict(ms=out, same_tokens=same, **({} if same else dict(tokens_part=tokens_part(rounds_toks))))

def tokens_part(rounds_toks: dict) -> dict:
    """{setting: None (same tokens in every round as the first setting's first round) or [round, token index] of its
    first difference}, from {setting: [tokens of each round]} ({} when no setting decoded: every one failed)."""
    if not rounds_toks: return {}
    ref = next(iter(rounds_toks.values()))[0]
    def first(rs):
        for r, t in enumerate(rs):
            for i, (x, y) in enumerate(zip(t, ref)):
                if x != y: return [r, i]
            if len(t) != len(ref): return [r, min(len(t), len(ref))]
        return None
    return {k: first(rs) for k, rs in rounds_toks.items()}

def frag_picks_ab(eng, ids) -> dict|None:
    """Decode-1 / verify-16 with the W4A16 fragment kernels' (WK, WM, DEPTH) from the built-in rule (`picks=rule`) and from
    each fragment sweep in data/results (`kernel_stream_sweep_h200*.json`, plus 'name=path,...' in env FRAG_PICKS_AB).
    A sweep times each product alone; the engine runs them back to back under PDL, so its picks are checked here.
    Per M bucket the setting with the fastest step is taken (decode for M ≤ 8, verify-16 for M = 16) and its rows are
    written to data/results/fragment_picks_h200.json, the file the engine loads (`effqwen.gluon._autoload_picks`)."""
    import effqwen.gluon as G
    if DEV != 'cuda' or not eng.use_graphs: return None
    from effqwen.core import repo_root, write_result
    files = {f.stem.removeprefix('kernel_stream_sweep_h200').lstrip('_') or 'sweep': str(f)
             for f in sorted((repo_root()/'data'/'results').glob('kernel_stream_sweep_h200*.json'))}
    files |= dict(kv.split('=', 1) for kv in os.environ.get('FRAG_PICKS_AB', '').split(',') if kv)
    own, dev = dict(G._FRAG_TUNED), torch.cuda.get_device_name()
    def use(f):
        G._FRAG_TUNED.clear()
        if f: print('picks', f, G.load_fragment_picks(f, dev), flush=True)
    try: r = steps_ab(eng, ids, {'picks=rule': lambda: use(None)} | {f'picks={k}': (lambda f=f: use(f)) for k, f in files.items()})
    finally: G._FRAG_TUNED.clear(); G._FRAG_TUNED.update(own); eng._capture()
    ok = {k: v for k, v in r['ms'].items() if 'decode_ms' in v}
    chosen, rows = {}, []
    for bucket, step, small in (('M<=8', 'decode_ms', True), ('M>8', 'verify_ms', False)):
        k = chosen[bucket] = min(ok, key=lambda k: ok[k][step])
        if k != 'picks=rule':
            rows += [x for x in json.loads(Path(files[k[6:]]).read_text())['rows'] if (x['M'] <= 8) == small and x.get('best')]
    print('fragment picks taken:', chosen, flush=True)
    write_result('fragment_picks_h200', dict(rows=rows, chosen=chosen, files=files, ab_ms=r['ms'], same_tokens=r['same_tokens'],
                                             note='per M bucket, the fragment configs of the setting with the fastest engine step '
                                                  '(scripts/profile_steps.py --only frag_picks_ab)'), 'gpu', device=DEV)
    return dict(r, files=files, chosen=chosen)

def pdl_ab(eng, ids) -> dict|None:
    """Decode-1 / verify-16 with programmatic dependent launch off and on (`effqwen.kernels.PDL`: the W4A16 kernels load
    their weights while the kernel before them runs), every step recorded with it (`PDL_STEPS` = decode and verify)."""
    import effqwen.kernels as Kn, effqwen.engine as E
    if DEV != 'cuda' or not eng.use_graphs or not Kn.pdl_on(eng.device): return None
    own = (Kn.PDL, E.PDL_STEPS)
    def use(on): Kn.PDL, E.PDL_STEPS = on, ('decode', 'verify')
    try: r = steps_ab(eng, ids, {f'pdl={int(on)}': (lambda on=on: use(on)) for on in (False, True)})
    finally: Kn.PDL, E.PDL_STEPS = own; eng._capture()
    return dict(r, module_default=own[0])

def flag_ab(eng, ids, flag: str, label: str, gluon: bool = False, module: str = 'effqwen.engine') -> dict|None:
    """Decode-1 / verify-16 with `module`'s boolean `flag` off and on (read while the steps are recorded, so each
    setting records its graphs again), labelled `label=0/1`; the module's own value is restored after."""
    import importlib
    E = importlib.import_module(module)
    if DEV != 'cuda' or not eng.use_graphs: return None
    if gluon:
        import effqwen.gluon as G
        if G.gluon is None: return dict(error=f'no Gluon: {G._GLUON_ERR}')
    own = getattr(E, flag)
    try: r = steps_ab(eng, ids, {f'{label}={int(on)}': (lambda on=on: setattr(E, flag, on)) for on in (False, True)})
    finally: setattr(E, flag, own); eng._capture()
    return dict(r, module_default=own)

def fence_ab(eng, ids) -> dict|None:
    """Decode-1 / verify-16 with `effqwen.gluon.FENCE` off and on (W4A16 fragment launches: DEPTH 0's scales requested
    with its weight copies, and without PDL a fence that keeps the weight loads up front). Same sums: same tokens."""
    return flag_ab(eng, ids, 'FENCE', 'fence', gluon=True, module='effqwen.gluon')

def split_ab(eng, ids) -> dict|None:
    """Decode-1 / verify-16 with the plain W4A16 fragment products on split-K kernels (`effqwen.gluon.FRAG_SPLIT` specs,
    ';'-separated in env SPLIT_AB; default: the down projection 2560 x 9216 in 3 K slices at decode, unsplit at verify; 2 slices
    do not divide its K among the 8 warps the engine's config gives it)
    against none. Split-K sums in another order, so tokens may differ at near-ties of random weights (same_tokens)."""
    import effqwen.gluon as G
    if DEV != 'cuda' or not eng.use_graphs or G.gluon is None: return None
    own = G.FRAG_SPLIT
    specs = [''] + os.environ.get('SPLIT_AB', '2560x9216:3/1').split(';')
    def use(spec): G.FRAG_SPLIT = spec
    try: r = steps_ab(eng, ids, {f"split={spec or 'none'}": (lambda spec=spec: use(spec)) for spec in specs})
    finally: G.FRAG_SPLIT = own; eng._capture()
    return dict(r, module_default=own)

def argmax_head_ab(eng, ids) -> dict|None:
    """Decode-1 / verify-16 with the BF16 LM head (cuBLAS, then `fused_argmax`) and with `effqwen.engine.ArgmaxHead` (the
    same argmax from the head's INT8 copy and a BF16 rescoring of the rows it cannot rule out): the same tokens expected.
    HEAD_GEMVS='bn,bk,warps,stages;...' adds ArgmaxHead variants with those head-GEMV configs (`HEAD_GEMV`)."""
    import effqwen.engine as E
    if DEV != 'cuda' or not eng.use_graphs: return None
    own = eng.head
    heads = {'head=argmax8': E.ArgmaxHead(own)}
    for spec in filter(None, os.environ.get('HEAD_GEMVS', '').split(';')):   # more GEMV configs: 'bn,bk,warps,stages;...'
        bn, bk, nw, ns = (int(v) for v in spec.split(','))
        heads[f'head=argmax8 gemv={spec}'] = ah = E.ArgmaxHead(own, block_n=bn)
        ah.gemv_cfg = dict(block_k=bk, num_warps=nw, num_stages=ns)
    def use(h): eng.head = h
    try: r = steps_ab(eng, ids, {'head=bf16': lambda: use(own)} | {k: (lambda h=h: use(h)) for k, h in heads.items()}, setup=True)
    finally: eng.head = own; eng.setup(eng.max_seq_len)
    return r

def sub136_ab(eng, ids) -> dict|None:
    """Decode-1 / verify-16 with `effqwen.gluon.SUB136` (the largest M whose W4A16 fragment launches dequantize to
    code − 8 and drop the constant-A correction mma: half the tensor-core work) at 0 (never), 1 (decode only) and 16
    (decode and verify), and at 1 with plain products (no epilogue) up to 16 rows (`SUB136_PLAIN`). Its sums round differently, so random weights' tokens may part at a near-tie (same_tokens)."""
    import effqwen.gluon as G
    if DEV != 'cuda' or not eng.use_graphs: return None
    if G.gluon is None: return dict(error=f'no Gluon: {G._GLUON_ERR}')
    own = G.SUB136, G.SUB136_PLAIN
    def use(m, p=0): G.SUB136, G.SUB136_PLAIN = m, p
    sets = {f'sub136={m}': (lambda m=m: use(m)) for m in (0, 1, 16)} | {'sub136=1 plain=16': lambda: use(1, 16)}   # plain: products without an epilogue
    try: r = steps_ab(eng, ids, sets)
    finally: use(*own); eng._capture()
    return dict(r, module_default=own[0], module_default_plain=own[1])

def early_ab(eng, ids) -> dict|None:
    """Decode-1 / verify-16 with the decode kernels' loads that need not wait for the kernel before them issued before
    its PDL wait: the one-token Gated-DeltaNet kernel's state slice (`GDN_STATE_EARLY`) and the split-K attention's
    keys / values prefetched into L2 (`ATTN_PREFETCH`), each alone and both. The same values are read, so the tokens
    must be the same. Five rounds; best at a long context (--prompt 8192) for the attention's part."""
    import effqwen.engine as E
    if DEV != 'cuda' or not eng.use_graphs: return None
    own = E.GDN_STATE_EARLY, E.ATTN_PREFETCH
    def use(g, a): E.GDN_STATE_EARLY, E.ATTN_PREFETCH = g, a
    sets = {f'gdn_early={int(g)} attn_prefetch={int(a)}': (lambda g=g, a=a: use(g, a)) for g, a in ((0, 0), (1, 0), (0, 1), (1, 1))}
    try: r = steps_ab(eng, ids, sets, rounds=5)
    finally: use(*own); eng._capture()
    return dict(r, context=int(ids.shape[1]), module_default=dict(gdn_state_early=own[0], attn_prefetch=own[1]))

def skip_ab(eng, ids) -> dict|None:
    """What fusing decode's small kernels away could save at most: decode-1 with kernels left out of the recorded step
    (their outputs replaced by a zero buffer made before recording, so no kernel replaces them): the Gated-DeltaNet
    output kernel (gated RMSNorm + conv-window shift), the attention's prep and combine kernels, and both. A timing
    upper bound only: the skipped settings compute wrong values (tokens differ by design; only `skip=none` is the
    engine). Verify is untouched."""
    import effqwen.engine as E
    if DEV != 'cuda' or not eng.use_graphs: return None
    own_g, own_a = E.fused_gdn_decode, E.fused_attn_decode
    zeros = {}
    def zero(shape, like):
        key = (tuple(shape), like.dtype)
        if key not in zeros: zeros[key] = torch.zeros(shape, dtype=like.dtype, device=like.device)
        return zeros[key]
    def gdn_no_out(proj, conv_buf, S, conv_w, neg_a, dt_bias, norm_w, dims, bv=None, warps=None):
        C, Kd, Vd, Hk, Hv, Dk, Dv, eps = dims
        bv = min(bv or E.GDN_BV, E._np2(Dv)); o = zero((Hv, Dv), proj)
        E._gdn_step_kernel[(Hv, E.triton.cdiv(Dv, bv))](proj, conv_buf, conv_w, neg_a, dt_bias, S, o, Kd, Vd, C, Hv, Dk ** -0.5,
                          RATIO=Hv // Hk, DK=Dk, DV=Dv, BK=E._np2(Dk), BV=bv, KC=conv_buf.shape[1], num_warps=warps or E.GDN_WARPS,
                          EARLY_S=E.GDN_STATE_EARLY, **E._pdl(o))
        return zero((1, Vd), proj)
    def attn_split_only(proj, cos, sin, pos, qn_w, kn_w, kc, vc, dims, part=None, chunk=None):
        H, Hkv, D = dims[:3]
        q, chunk = zero((1, H, D), proj), chunk or E.ATTN_CHUNK
        rep, Lmax = H // Hkv, kc.shape[1]
        BR, NS = max(16, E._np2(rep)), E.triton.cdiv(Lmax, chunk)
        mp, lp, ap = part if part is not None else E.attn_partials(Hkv, NS, BR, D, q.device)
        bl, ns = E._attn_tiles(D, q.device, 1, kc.element_size())
        E._attn_split_kernel[(Hkv, NS)](q, kc, vc, pos, mp, lp, ap, Lmax, NS, D ** -0.5, REP=rep, BR=BR, D=D, CHUNK=chunk,
                          BL=bl, IEEE=False, T=1, H=H, num_warps=E.ATTN_WARPS, num_stages=ns, **E._pdl(q))
        return zero((1, H * D), proj)
    sets = {'skip=none': (own_g, own_a), 'skip=gdn_out': (gdn_no_out, own_a), 'skip=attn_prep+combine': (own_g, attn_split_only),
            'skip=both': (gdn_no_out, attn_split_only)}
    def use(g, a): E.fused_gdn_decode, E.fused_attn_decode = g, a
    try: r = steps_ab(eng, ids, {k: (lambda v=v: use(*v)) for k, v in sets.items()})
    finally: use(own_g, own_a); eng._capture()
    return dict(r, context=int(ids.shape[1]), note='timing upper bound: skipped kernels compute nothing (tokens differ by design)')

def decode_chain_ab(eng, ids) -> dict|None:
    """ms per token of `decode_n_tokens` as `benchmark_latency` times it (host clock around the synced call, after 4
    warm-up tokens) with one recorded graph per decode step and with `DECODE_CHAIN` steps per graph (CHAINS='1,8' by
    default, comma-separated), with the engine's BF16 head and with `ArgmaxHead` (CHAIN_HEADS='bf16,argmax8'). The
    settings alternate round by round (ROUNDS, default 5); each head's chains must give the same tokens."""
    import effqwen.engine as E
    if DEV != 'cuda' or not eng.use_graphs: return None
    own, own_head = E.DECODE_CHAIN, eng.head
    chains = [int(c) for c in os.environ.get('CHAINS', '1,8').split(',')]
    make = {'bf16': lambda: own_head, 'argmax8': lambda: E.ArgmaxHead(own_head)}
    heads = {k: make[k]() for k in os.environ.get('CHAIN_HEADS', 'bf16,argmax8').split(',')}
    nd = min(64, eng.max_seq_len - ids.shape[-1] - 8)
    ms, toks = {(h, c): [] for h in heads for c in chains}, {}
    try:
        for _ in range(int(os.environ.get('ROUNDS', '5'))):
            for h, head in heads.items():
                eng.head = head
                for c in chains:
                    E.DECODE_CHAIN = c; eng.setup(eng.max_seq_len)     # (records the graphs, with the chain, for this head)
                    eng.prefill(ids); eng.decode_n_tokens(4); torch.cuda.synchronize()
                    t = time.perf_counter(); out = eng.decode_n_tokens(nd); torch.cuda.synchronize()
                    ms[h, c].append((time.perf_counter() - t) / nd * 1e3); toks[h, c] = out.tolist()
    finally: E.DECODE_CHAIN, eng.head = own, own_head; eng.setup(eng.max_seq_len)
    r = dict(tokens=nd, ms={f'head={h} chain={c}': dict(decode_ms=sorted(v)[len(v) // 2], decode_rounds_ms=v) for (h, c), v in ms.items()},
             same_tokens={h: len({tuple(toks[h, c]) for c in chains}) == 1 for h in heads})
    for k, v in r['ms'].items(): print(k, round(v['decode_ms'], 4), [round(x, 4) for x in v['decode_rounds_ms']], flush=True)
    print('same tokens', r['same_tokens'], flush=True)
    return r

def swiglu_ab(eng, ids) -> dict|None:
    """Decode-1 / verify-16 with the SwiGLU as its own kernel and inside the W4A16 down projection's mat-vec
    (`DECODE_SWIGLU_MATVEC`: the down projection loads gate and up and applies silu(gate)·up itself)."""
    return flag_ab(eng, ids, 'DECODE_SWIGLU_MATVEC', 'swiglu_mv')

def fragment_ab(eng, ids) -> dict|None:
    """Decode-1 / verify-16 with the W4A16 linears on the library's Triton kernels and on the Gluon fragment-layout kernels
    (`Engine.use_fragment`, `effqwen.gluon`), same graphs path otherwise; the 16 greedy tokens must agree."""
    if DEV != 'cuda' or not eng.use_graphs: return None
    import effqwen.gluon as G
    if G.gluon is None: return dict(error=f'no Gluon: {G._GLUON_ERR}')
    n = {}
    def use(on): n[on] = eng.use_fragment(on, capture=False)
    try: r = steps_ab(eng, ids, {f'fragment={int(on)}': (lambda on=on: use(on)) for on in (False, True)})
    finally: eng.use_fragment(False)
    return dict(r, linears_switched=n.get(True))

def swiglu_epilogue_ab(eng, ids) -> dict|None:
    """Decode-1 / verify-16 on the Gluon fragment kernels with the SwiGLU as its own kernel and in the gate+up kernel's
    epilogue (`SWIGLU_EPILOGUE`: `use_fragment(swiglu=True)` on each layer's fused gate+up projection)."""
    if DEV != 'cuda' or not eng.use_graphs: return None
    import effqwen.gluon as G, effqwen.engine as E
    if G.gluon is None: return dict(error=f'no Gluon: {G._GLUON_ERR}')
    own = E.SWIGLU_EPILOGUE
    def use(on): E.SWIGLU_EPILOGUE = on; eng.use_fragment(True, capture=False)
    try: r = steps_ab(eng, ids, {f'swiglu_epilogue={int(on)}': (lambda on=on: use(on)) for on in (False, True)})
    finally: E.SWIGLU_EPILOGUE = own; eng.use_fragment(E.fragment_default(eng.device))
    return dict(r, module_default=own)

def norm_epilogue_ab(eng, ids) -> dict|None:
    """Decode-1 / verify-16 with the add + RMSNorm as its own kernel and in the epilogue of the W4A16 fragment linear
    before it (`NORM_EPILOGUE`: attention / Gated-DeltaNet output and MLP down projections; the last CTA normalizes)."""
    return flag_ab(eng, ids, 'NORM_EPILOGUE', 'norm_epilogue', gluon=True)

def norm_split_ab(eng, ids) -> dict|None:
    """Decode-1 / verify-16 with the add + RMSNorm as its own kernel and split between the W4A16 fragment linears around
    it (`NORM_SPLIT`: the output / down projection adds to the residual and writes per-CTA sums of squares and h = residual
    · norm weight, the next projection takes h and scales its product by the 1 / RMS)."""
    return flag_ab(eng, ids, 'NORM_SPLIT', 'norm_split', gluon=True)

def gdn_xcat_ab(eng, ids) -> dict|None:
    """Decode-1 / verify-16 with commit's xcat filled by two torch copies per Gated-DeltaNet layer and by the verify
    output kernel's extra programs (`GDN_VERIFY_XCAT`; verify only: decode does not change)."""
    return flag_ab(eng, ids, 'GDN_VERIFY_XCAT', 'gdn_xcat')

def decode_profile(eng, ids) -> dict:
    """Kernel breakdown (`profile`) of the decode-1 and verify-16 steps as the engine runs them now (its module settings,
    e.g. the fragment kernels and the SwiGLU epilogue), after a prompt of `ids`: the part of a full run, alone (`--only`)."""
    eng.prefill(ids)
    with torch.no_grad():
        d = profile(lambda: (eng._run(1, 'decode'), eng.pos.sub_(1)), n=5)
        v = profile(lambda: eng._run(eng.block_size, 'verify'), n=5)
    for k, x in (('decode', d), ('verify16', v)):
        print(k, round(x['total_us']), 'us,', round(x['kernels']), 'kernels', {g: round(y['us']) for g, y in x['groups'].items()}, flush=True)
    import effqwen.engine as E
    return dict(steps=dict(decode=d, verify16=v), fragment=bool(getattr(eng, 'linears', None)) and any(
        getattr(m, 'weight_fragment', None) is not None for m in eng.linears()), swiglu_epilogue=E.SWIGLU_EPILOGUE)

def ctx_curve(eng, ids, rounds: int = 3) -> dict:
    """Decode-1 on one engine (one cache size, one set of graphs) at several positions: after one prefill of `ids` the
    position is set directly (the keys past the prompt are whatever the cache holds: timing does not read them), then
    the CUDA-graph replay time (ms, median of `rounds` x 25 replays, positions alternating) and an eager kernel trace
    (`profile`) at each. What grows with the context and by how much, inside one engine: the latency run builds an
    engine per setting, so its decode-vs-context differences also hold any cost that follows the cache's size."""
    from effqwen.engine import _gpu_ms
    P, top = int(ids.shape[1]), eng.max_seq_len - 40
    ps = sorted({p for p in (64, 1024, 2048, 4096, 8192, P) if p <= top})
    eng.prefill(ids)
    ms = {p: [] for p in ps}
    with torch.no_grad():
        for _ in range(rounds):
            for p in ps:
                eng.pos.fill_(p); ms[p].append(_gpu_ms(lambda: eng._step('decode'), 25, warmup=3))
        prof = {}
        for p in ps:
            eng.pos.fill_(p)
            prof[p] = profile(lambda: (eng._run(1, 'decode'), eng.pos.sub_(1)), n=5)
    out = {str(p): dict(decode_ms=sorted(ms[p])[len(ms[p]) // 2], rounds_ms=ms[p], kernel_us=prof[p]['total_us'],
                        groups={g: round(v['us'], 2) for g, v in prof[p]['groups'].items()}, top=prof[p]['top'][:10]) for p in ps}
    for p, v in out.items(): print('ctx', p, round(v['decode_ms'], 4), 'ms;', {g: round(u) for g, u in v['groups'].items()}, flush=True)
    return dict(positions=out, cache_len=eng.cache_len, max_seq_len=eng.max_seq_len)

def after_prefill(eng, ids, rounds: int = 3, n: int = 64) -> dict:
    """Is decode slower right after a long prefill? Per prompt length p (64 / 2048 / the prompt), as the latency run
    times it: prefill p tokens, decode 4, then time `n` decode tokens (ms a token); the same after 1 s idle between the
    prefill and the decode ('rested'); and `n` more tokens straight after ('steady': the GPU busy with decode only).
    The SM clock and power (NVML, via torch.cuda) are read after each prefill and each timed decode. Rounds alternate."""
    import time as _t
    def clk():
        try: return dict(sm_mhz=torch.cuda.clock_rate(), power_w=torch.cuda.power_draw() / 1e3)
        except Exception as e: return dict(error=str(e)[:80])
    ps = sorted({64, 2048, int(ids.shape[1])})
    out = {str(p): dict(latency_run=[], rested=[], steady=[], clocks=[]) for p in ps}
    def timed():
        torch.cuda.synchronize(); t = _t.perf_counter(); eng.decode_n_tokens(n); torch.cuda.synchronize()
        return (_t.perf_counter() - t) / n * 1e3
    for _ in range(rounds):
        for p in ps:
            o = out[str(p)]
            eng.prefill(ids[:, :p]); torch.cuda.synchronize(); c0 = clk()
            eng.decode_n_tokens(4); o['latency_run'].append(timed()); c1 = clk()
            o['steady'].append(timed())
            eng.prefill(ids[:, :p]); torch.cuda.synchronize(); _t.sleep(1.0); c2 = clk()
            eng.decode_n_tokens(4); o['rested'].append(timed())
            o['clocks'].append(dict(after_prefill=c0, after_decode=c1, after_rest=c2))
            print('after_prefill', p, {k: round(o[k][-1], 4) for k in ('latency_run', 'steady', 'rested')}, c0, c1, flush=True)
    for o in out.values():
        for k in ('latency_run', 'rested', 'steady'): o[k + '_median'] = sorted(o[k])[len(o[k]) // 2]
    return dict(positions=out, decode_tokens=n, rounds=rounds)

def attn_chunk_ab(eng, ids, chunks=(64, 128, 256, 512)) -> dict|None:
    """Decode-1 / verify-16 by cache positions per program of the split-K decode attention (`ATTN_CHUNK`: fewer
    positions, more programs over the same keys); the engine is set up again for each (its attention scratch is sized
    by it), two rounds."""
    import effqwen.engine as E
    if DEV != 'cuda' or not eng.use_graphs or not any(L.kind != 'linear_attention' for L in eng.layers): return None
    own = E.ATTN_CHUNK
    def use(c): E.ATTN_CHUNK = c
    try: r = steps_ab(eng, ids, {str(c): (lambda c=c: use(c)) for c in chunks}, rounds=2, setup=True)
    finally: E.ATTN_CHUNK = own; eng.setup(eng.max_seq_len)
    return dict(r, context=int(ids.shape[1]), module_default=own)

def attr_ab(eng, ids) -> dict|None:
    """Decode-1 / verify-16 under settings of module attributes read while the steps are recorded, from env ATTR_AB:
    'name:ATTR=value,ATTR=value;name:...' (values Python literals; ATTR of effqwen.engine, or gluon.ATTR of
    effqwen.gluon; a setting with no assignment is the modules' own values), ATTR_AB_SETUP=1 to set the engine up again
    per setting (attributes that size its scratch), AB_ROUNDS rounds (default 3). The modules' values are restored."""
    import ast, importlib
    if DEV != 'cuda' or not eng.use_graphs: return None
    mods = dict(engine=importlib.import_module('effqwen.engine'), gluon=importlib.import_module('effqwen.gluon'))
    def parse(spec):
        name, _, assigns = spec.partition(':')
        out = []
        for a in filter(None, assigns.split(',')):
            k, v = a.split('=', 1); m, _, attr = k.strip().rpartition('.')
            mod = mods[m or 'engine']
            if not hasattr(mod, attr): raise ValueError(f'ATTR_AB: {m or "engine"} has no attribute {attr}')
            out.append((mod, attr, ast.literal_eval(v.strip())))
        return name.strip(), out
    sets = [parse(s) for s in filter(None, os.environ.get('ATTR_AB', '').split(';'))]
    if not sets: raise ValueError("attr_ab needs env ATTR_AB='name:ATTR=value,...;name:...'")
    own = {(id(mod), attr): (mod, attr, getattr(mod, attr)) for _, a in sets for mod, attr, _ in a}
    def use(assigns):
        for mod, attr, v in own.values(): setattr(mod, attr, v)
        for mod, attr, v in assigns: setattr(mod, attr, v)
    setup = os.environ.get('ATTR_AB_SETUP', '0') == '1'
    try: r = steps_ab(eng, ids, {n: (lambda a=a: use(a)) for n, a in sets}, rounds=int(os.environ.get('AB_ROUNDS', 3)), setup=setup)
    finally:
        use([])
        if setup: eng.setup(eng.max_seq_len)
        else: eng._capture()
    return dict(r, context=int(ids.shape[1]), settings=os.environ['ATTR_AB'])

def _group_rows(steps: dict) -> list:
    "Table rows: per kernel group, each step's µs (share, kernels per step); then each step's total."
    names = [g for g, _ in GROUPS] + ['other']
    rows = [dict(group=g, **{k: (f"{v['groups'][g]['us']:,.0f} ({v['groups'][g]['share']:.0%}, {v['groups'][g]['count']:.0f})" if g in v['groups'] else '–')
                             for k, v in steps.items()}) for g in names if any(g in v['groups'] for v in steps.values())]
    return rows + [dict(group='**total**', **{k: f"{v['total_us']:,.0f} ({v['kernels']:.0f} kernels)" for k, v in steps.items()})]

def render(path: str = 'data/results/step_profile_h200.json'):
    "Table: per step, GPU time by kernel group (µs and share) and kernel count, then each step's costliest kernels."
    from effqwen.core import render_table, write_table, provenance_line
    doc = json.load(open(path)); steps = doc['steps']
    rows = _group_rows(steps)
    md = (f"### Where the step time goes: {doc['shape']} shape, batch 1, {doc['provenance']['device']}\n\n"
          + render_table(rows, [('group', 'kernel group', '{}')] + [(k, k, '{}') for k in steps]) + '\n'
          + f"GPU kernel time in µs (share of the step, kernels per step) from torch.profiler, each step run eagerly (outside its CUDA graph) "
            f"after a warm-up: prefill of {doc['prompt']} tokens, decode-1 and verify-16 of the W4A16 engine (the fused paths that were the defaults at the run's commit: the top kernels name them), one step of the "
            "5-layer bf16 DFlash drafter with full attention. Sums of kernel times, not wall time: the CUDA-graph replay runs the same kernels "
            "without launch gaps (26_latency has the step latencies). A breakdown for choosing what to optimize, not a benchmark.\n\n"
          + '\n'.join(f"- {k}: " + '; '.join(f"`{t['name'][:60]}` {t['us']:,.0f} µs × {t['count']:.0f}" for t in v['top'][:4]) for k, v in steps.items())
          + (f"\n\nPrefill wall time of the same engine (ms, median of {doc['prefill_ab'].get('runs', 5)} runs, the combinations interleaved) with and without the time-saving paths — "
             
             '`gva`: flash-linear-attention\'s grouped-value chunk kernel on q/k as they are (off: repeated to H_v heads, as transformers calls it); '
             '`sdpa_gqa`: SDPA\'s `enable_gqa` (off: k/v repeated to H heads); `ahead`: the next layer\'s weights dequantized on a side stream; '
             '`direct`: the W4A16 linears\' dequantize + cuBLAS called directly rather than through the custom op (less host time per call); '
             '`qknorm`: q/k L2-normalized in the conv kernel rather than in two passes of the chunk rule; '
             '`graphs`: the prompt padded to its size bucket and the prefill replayed from the graph recorded for it (the others eager): '
             + ', '.join(f"{k} {v:.1f}" for k, v in doc['prefill_ab']['ms'].items())
             + f"; same next token in every combination: {doc['prefill_ab']['same_next_token']}." if 'prefill_ab' in doc else '')
          + (f"\n\nGPU idle inside one traced prefill: {doc['prefill_idle']['idle_us'] / 1e3:.1f} ms of a {doc['prefill_idle']['span_us'] / 1e3:.1f} ms span "
             f"({doc['prefill_idle']['gaps_over_min']} gaps over {doc['prefill_idle']['min_gap_us']:.0f} µs; the tracer slows the host, so gaps are larger than untraced). Longest: "
             + '; '.join(f"{g['us']:.0f} µs after `{g['after'][:40]}` (host: {', '.join(c['op'][:40] for c in g['cpu'][:2])})" for g in doc['prefill_idle']['top'][:4])
             if doc.get('prefill_idle') else '')
          + ("\n\nDecode-1 / verify-16 step (CUDA-graph replay, ms, median of 3 rounds of 25 replays after the prompt, settings alternating) with programmatic dependent launch "
             "of the W4A16 kernels and the small kernels before them off and on: "
             + ', '.join(f"{k} " + (f"{v['decode_ms']:.3f} / {v['verify_ms']:.3f}" if 'decode_ms' in v else f"failed ({v.get('error', '')[:80]})") for k, v in doc['pdl_ab']['ms'].items())
             + f"; same greedy tokens: {doc['pdl_ab']['same_tokens']}." if doc.get('pdl_ab') else '')
          + (f"\n\nDecode-1 / verify-16 step (ms, as above, {doc['attn_chunk_ab']['context']}-token context) by cache positions per program of the "
             "split-K decode attention (`ATTN_CHUNK`): "
             + ', '.join(f"{k} " + (f"{v['decode_ms']:.3f} / {v['verify_ms']:.3f}" if 'decode_ms' in v else f"failed ({v.get('error', '')[:80]})") for k, v in doc['attn_chunk_ab']['ms'].items())
             + f"; same greedy tokens: {doc['attn_chunk_ab']['same_tokens']}." if doc.get('attn_chunk_ab') else '')
          + ("\n\nDecode-1 / verify-16 step (ms, as above) with the SwiGLU as its own kernel (0) and inside the W4A16 down "
             "projection's mat-vec (1, `DECODE_SWIGLU_MATVEC`): "
             + ', '.join(f"{k} " + (f"{v['decode_ms']:.3f} / {v['verify_ms']:.3f}" if 'decode_ms' in v else f"failed ({v.get('error', '')[:80]})") for k, v in doc['swiglu_ab']['ms'].items())
             + f"; same greedy tokens: {doc['swiglu_ab']['same_tokens']}." if doc.get('swiglu_ab') else '')
          + '\n\n' + provenance_line(doc) + '\n')
    print(write_table('step_profile', md, doc['provenance']['profile'])); print(md)

def render_decode_profile(path: str = 'data/results/step_decode_profile_h200.json'):
    "Table of a `--only decode_profile` run: decode-1 / verify-16 GPU time by kernel group as the engine ran at that commit."
    from effqwen.core import render_table, write_table, provenance_line
    doc = json.load(open(path)); steps = doc['decode_profile']['steps']
    rows = _group_rows(steps)
    md = (f"### Decode-1 and verify-16 kernels of the W4A16 engine: {doc['shape']} shape, {doc['prompt']}-token context, {doc['provenance']['device']}\n\n"
          + render_table(rows, [('group', 'kernel group', '{}')] + [(k, k, '{}') for k in steps]) + '\n'
          + 'GPU kernel time in µs (share, kernels per step) from torch.profiler, the steps run eagerly after the prompt (sums of kernel times, '
            'not wall time; 26_latency has the step latencies). Engine settings of the run: fragment kernels '
          + f"{doc['decode_profile'].get('fragment')}, SwiGLU epilogue {doc['decode_profile'].get('swiglu_epilogue')}. Costliest kernels:\n\n"
          + '\n'.join(f"- {k}: " + '; '.join(f"`{t['name'][:60]}` {t['us']:,.0f} µs × {t['count']:.0f}" for t in v['top'][:8]) for k, v in steps.items())
          + '\n\n' + provenance_line(doc) + '\n')
    print(write_table('step_decode_profile', md, 'gpu')); print(md)

def render_ab(paths: list|None = None):
    "Table of the partial runs' A/B parts (`--only`, one file each): decode-1 / verify-16 ms per setting, and whether the tokens agreed."
    import glob
    from effqwen.core import render_table, write_table, provenance_line
    paths = paths or sorted(glob.glob('data/results/step_*_ab_h200.json')); rows, docs = [], []
    for path in paths:
        doc = json.load(open(path)); docs.append(doc)
        for part, r in doc.items():
            if not isinstance(r, dict) or 'ms' not in r: continue
            for k, v in r['ms'].items():   # against the A/B's first setting (decode_chain_ab: the first of the same head)
                head = k.split(' chain=')[0] if ' chain=' in k else None
                base = next(b for j, b in r['ms'].items() if head is None or j.startswith(head + ' '))
                same = r.get('same_tokens'); same = same.get(head.split('=')[1]) if isinstance(same, dict) and head else same
                rows.append(dict(part=part, setting=k, ctx=doc['prompt'], decode=v.get('decode_ms'), verify=v.get('verify_ms'), decode_n=v.get('decode_n_ms'),
                                 dr=base['decode_ms'] / v['decode_ms'] if 'decode_ms' in v else None,
                                 vr=base['verify_ms'] / v['verify_ms'] if 'verify_ms' in v and 'verify_ms' in base else None, same=same,
                                 sha=doc['provenance']['git_sha'][:7]))
    doc = docs[-1]
    cols = [('part', 'A/B'), ('setting', 'setting'), ('ctx', 'context tokens', '{}'), ('decode', 'decode-1 ms', '{:.3f}'), ('decode_n', 'decode ms / token, back to back', '{:.3f}'), ('verify', 'verify-16 ms', '{:.3f}'),
            ('dr', 'decode speedup', '{:.3f}×'), ('vr', 'verify speedup', '{:.3f}×'), ('same', 'same greedy tokens'), ('sha', 'run at')]
    md = (f"### Engine step A/B at the {doc['shape']} shape (random weights, W4A16)\n\n" + render_table(rows, cols)
          + '\nCUDA-graph replays between CUDA events, median over 3 rounds × 25 replays, the settings alternating round by round; '
            '"back to back": ms per token of `decode_n_tokens` (up to 64 replays, host clock around the synced call, as the latency '
            'benchmark times decode), median of the same rounds, in the A/Bs run at cb1417e or later (the column is empty for older runs) '
            '(`scripts/profile_steps.py --only PART`). Speedups are against the first setting of each A/B. `fragment_ab`: the W4A16 '
            'linears on the library\'s Triton kernels (0) or on the Gluon fragment-layout kernels (1, `Engine.use_fragment`: '
          + f"{next((d['fragment_ab'].get('linears_switched') for d in docs if d.get('fragment_ab')), None)} linears switched; the LM head is not a W4A16 linear in this engine). "
          + 'The greedy tokens of random weights follow near-ties, so a kernel '
            'that sums in another order can change them (the kernels themselves pass Marlin\'s error test, `tests/test_gluon.py`). '
          + '`decode_chain_ab`: ms per token of `decode_n_tokens` as the latency benchmark times it (host clock around the synced call, '
            'median over 5 rounds), one CUDA graph per decode step (chain=1) or that many steps per graph (`DECODE_CHAIN`), '
            'against chain=1 with the same head; its tokens are compared within each head. `tail_ab` (an option that existed only at its '
            'run\'s commit, removed after it): the decode step\'s attention combine / Gated-DeltaNet output kernel done by each group\'s '
            'last program inside the split / step kernel\'s launch, one launch a mixer instead of two. `attn_tma_ab` (likewise removed '
            'after its run): the split-K attention\'s key / value tiles loaded through TMA descriptors. `early_ab` (three runs of one commit, '
            '`early_ab_run2` / `_run3` the repeats): the one-token Gated-DeltaNet kernel\'s state slice loaded before its '
            'programmatic-dependent-launch wait (`GDN_STATE_EARLY`), the split-K attention\'s keys / values prefetched into L2 before '
            'it (`ATTN_PREFETCH`); both read the same values, so tokens that differ mean some setting read something else, and both '
            'stay off until a run that records `tokens_part` (which setting, which round) says which; its medians are over 5 rounds. '
            '`skip_ab`: a bound, not an option: decode with kernels left out of the recorded step (their output a zero buffer, their '
            'work not done), the Gated-DeltaNet output kernel, the attention\'s prep and combine, or both; those settings compute wrong '
            'values by design. `fused_decode_ab` (the option existed only at its runs\' commit, removed after them): the decode '
            'attention in two kernels (`ATTN_FUSED=prep`: prep + split-K in one, then the combine) or one (`all`: each kv head\'s last '
            'program combines), and the Gated-DeltaNet output kernel\'s work in the step kernel (`gdn_fused=1`: each key head\'s last '
            'program normalizes); `step_fused_decode_all_ab_h200.json` has the four settings over 5 rounds, '
            '`step_fused_decode_ab_h200.json` off against prep over 9. `attr_ab` (session 42, 8192 tokens, env ATTR_AB names the '
            'settings): in `step_attr_tiles_ab_h200.json` the split-K attention with smaller tiles (s2: 64 keys × 2 stages, bl32s3 / '
            'bl32s4: 32 keys × 3 / 4), 8 warps (w8) and its kernels launched without PDL (pdl0, `ATTN_PDL`); in '
            '`step_attr_cap_ab_h200.json` (the latency benchmark\'s 8,472-position cache, 34 chunks) its grid capped at 33 programs '
            'per kv head (cap, an option removed after the run) against one program per chunk (nocap), medians over 4 rounds; in '
            '`step_attr_embed_ab_h200.json` (session 43, the same cache, 4 rounds) the decode / verify steps with the embedding '
            'lookup as its own kernel (embed_off) or gathered by the first norm kernel (embed_on, `EMBED_NORM`); in '
            '`step_attr_dyn_p2048_ab_h200.json` / `step_attr_dyn_p8192_ab_h200.json` (session 43, the same cache, 4 rounds) the decode split-K '
            'attention\'s chunks fixed at 256 positions (static) or sized by the live context (dyn, `ATTN_DYN_CHUNK`); in '
            '`step_attr_early_p64_ab_h200.json` / `step_attr_early_p8192_ab_h200.json` (session 46, the same cache, 3 / 4 rounds, run '
            'from 40908c9 with the option added, uncommitted then: `-dirty`) the Gluon fragment kernels letting the next kernel launch '
            'after their programmatic-dependent-launch wait (base) or before it (early, `effqwen.gluon.GDC_EARLY`, now the default); in '
            '`step_attr_early_knobs_p8192_ab_h200.json` (session 46, GDC_EARLY on, 3 rounds, the engine set up again per setting) three '
            'options measured again with it: 4 decode steps per graph (chain4, `DECODE_CHAIN`), the add + RMSNorm split over the linears '
            'around it (nsplit, `NORM_SPLIT`) and in the output / down projections\' epilogue (nepi, `NORM_EPILOGUE`); their tokens '
            'differ (the norm options round differently); none is faster beyond noise (nsplit: decode within 1%, verify-16 7% slower).\n\n'
          + 'Each A/B is its own run (`run at`: its commit); decode / verify times differ between runs as the engine changed.\n\n'
          + '\n\n'.join(f"`{os.path.basename(p)}`: " + provenance_line(d) for p, d in zip(paths, docs)) + '\n')
    print(write_table('engine_step_ab', md, 'gpu')); print(md)

def main():
    ap = argparse.ArgumentParser(); ap.add_argument('--out', default=None); ap.add_argument('--prompt', type=int, default=8192)
    ap.add_argument('--render', action='store_true'); ap.add_argument('--render-ab', action='store_true'); ap.add_argument('--render-decode', action='store_true')
    ap.add_argument('--only', default=None, help="comma list of parts to run (e.g. 'fragment_ab'); default: all")
    a = ap.parse_args(); t0 = time.time()
    if a.out: os.environ['EFFQWEN_OUT'] = a.out      # every result of this run (the parts may write their own) goes under it
    if a.render: return render()
    if a.render_ab: return render_ab()
    if a.render_decode: return render_decode_profile()
    from effqwen.engine import Engine, StaticDrafter, reference_drafter_config
    from effqwen.kernels import W4A16Linear
    from effqwen.dflash import DFlashDrafter, DFlashConfig
    if TINY:
        from effqwen.model import tiny_qwen35
        m, P, group = tiny_qwen35(0), 24, 32
        cfg = DFlashConfig.for_target(m, mask_token_id=255, block_size=16, num_hidden_layers=1, target_layer_ids=(0, 2))
    else:
        from effqwen.model import load_target
        m, P, group = load_target('qwen3.5-4b', device=DEV, dtype='bfloat16')[0], a.prompt, 128
        cfg = reference_drafter_config(m)
    torch.manual_seed(0)
    L = int(os.environ.get("MAX_SEQ_LEN", P + 64))   # the engine's max_seq_len (benchmark_latency: 8,472 at the 4B settings)
    res = dict(shape='tiny-qwen3.5' if TINY else 'qwen3.5-4b', prompt=P, steps={}, pdl_probe_error=pdl_probe())
    eng = Engine(m, max_seq_len=L, tap_layers=cfg.target_layer_ids, block_size=cfg.block_size,
                 convert=lambda l: W4A16Linear.from_float(l, group_size=group))
    ids = torch.randint(0, min(1000, m.config.vocab_size), (1, P), device=DEV)
    only = set(a.only.split(',')) if a.only else None
    if only:   # a partial run: just these A/B parts, written under its own name
        for part in sorted(only): res[part] = globals()[part](eng, ids)
        name = 'step_' + '_'.join(sorted(only))      # e.g. step_fragment_ab, step_decode_profile
    else:
        res['prefill_ab'] = prefill_ab(eng, ids)
        res['pdl_ab'] = pdl_ab(eng, ids)
        res['attn_chunk_ab'] = attn_chunk_ab(eng, ids)
        res['swiglu_ab'] = swiglu_ab(eng, ids)
        res['fragment_ab'] = fragment_ab(eng, ids)
        res['swiglu_epilogue_ab'] = swiglu_epilogue_ab(eng, ids)
        res['norm_epilogue_ab'] = norm_epilogue_ab(eng, ids)
        res['norm_split_ab'] = norm_split_ab(eng, ids)
        res['gdn_xcat_ab'] = gdn_xcat_ab(eng, ids)
        res['prefill_idle'] = idle_gaps(lambda: eng.prefill(ids))
        if res['prefill_idle']: print('prefill idle', {k: v for k, v in res['prefill_idle'].items() if k != 'top'}, res['prefill_idle']['top'][:3], flush=True)
        res['steps']['prefill'] = profile(lambda: eng.prefill(ids))
        print('prefill', round(res['steps']['prefill']['total_us']), 'us', flush=True)
        eng.prefill(ids)
        with torch.no_grad():
            res['steps']['decode'] = profile(lambda: (eng._run(1, 'decode'), eng.pos.sub_(1)), n=5)
            res['steps']['verify16'] = profile(lambda: eng._run(eng.block_size, 'verify'), n=5)
        dr = DFlashDrafter(cfg).to(DEV, next(m.parameters()).dtype).eval().bind(m)
        sd = StaticDrafter(dr, L, cuda_graphs=False)
        sd.propose(ids[:, :P], torch.randn(1, P, cfg.n_taps * cfg.hidden_size, device=DEV, dtype=sd.ctx_in.dtype), eng.block_size - 1); sd.n_new.zero_()
        with torch.no_grad(): res['steps']['drafter_bf16_full'] = profile(sd._step, n=5)
        for k, v in res['steps'].items(): print(k, round(v['total_us']), 'us,', round(v['kernels']), 'kernels', {g: round(x['us']) for g, x in v['groups'].items()}, flush=True)
        name = 'step_profile'
    res['wall_s'] = time.time() - t0
    res['device'] = torch.cuda.get_device_name() if DEV == 'cuda' else 'cpu (dry run)'
    from effqwen.core import write_result
    print(write_result(f'{name}_h200' if not TINY else f'{name}_dryrun', res, 'gpu', device=DEV))

if __name__ == '__main__': main()
