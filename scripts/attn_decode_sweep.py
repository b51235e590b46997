"""The decode step's small kernels at the Qwen3.5-4B shape, on their own (GPU diagnostic).

Attention: the split-K decode attention (16 query heads, 4 KV heads, head dim 256, output gate) over a long static cache.
A decode step spent ~30 µs per attention layer at an 8K context (latency_h200.json: long minus short decode, over 8
layers) against ~8 µs to read its keys and values once. The first run of this script (attn_decode_sweep_h200_serial_combine.json,
at 5d55160) found the combine kernel's one-chunk-at-a-time loop costly at small chunks; the combine now loads 16 chunks'
partials per step (`ATTN_COMBINE_BS`). At an 8K context the combine has only 16 programs (one per query head), each
reading every chunk's partials for the whole head; `ATTN_COMBINE_BD` splits the head's dims over more programs (the
`cbd<BD>` keys, default split config). This times `effqwen.engine.fused_attn_rows` (split kernel + combine) for every
(CHUNK, BL, warps, stages):

- `chain`: LAYERS calls back to back in one CUDA graph, each on its own cache (together larger than the L2, so each call
  reads its keys and values from HBM, as the decode step's 8 attention layers do), µs per call, median of 5 replays;
  programmatic dependent launch as the engine launches them;
- at T = 1 (decode) and T = 16 (verify), contexts 2048 and 8192;
- outputs checked against the engine's default configuration (max abs difference; the summation order changes with
  CHUNK and BL, so they agree to bf16 rounding, not bit for bit).

Gated DeltaNet: `fused_gdn_decode` (the one-token step kernel + the gated-norm output kernel) by value columns per
program and warps (`GDN_BV`, `GDN_WARPS`), LAYERS calls on distinct states back to back; outputs and states compared bit for bit with the
default's (the compiled reductions over keys may be laid out differently per BV, so on a GPU they need not be equal).

    python scripts/attn_decode_sweep.py [--out DIR]   # GPU -> data/results/attn_decode_sweep_h200.json (attention, GDN)
    python scripts/attn_decode_sweep.py gdn [--out DIR]   # GPU, the GDN decode step and verify alone -> data/results/gdn_decode_sweep_h200.json
    python scripts/attn_decode_sweep.py combine [--out DIR]   # GPU: the one-row combine's shapes -> attn_combine_sweep_h200.json
                                                      # (SWEEP_TAG=chunks: the chunk / tiles under them;
                                                      # SWEEP_SETS='chunk,bl,stages[,bs,bd];...' with SWEEP_TAG=<name>: those)
    python scripts/attn_decode_sweep.py render        # -> data/tables/attn_decode_sweep.md (both files)
"""
import argparse, itertools, json, os, sys, time, traceback
import torch

sys.path.insert(0, os.path.dirname(__file__))
NAME, LAYERS, LMAX = 'attn_decode_sweep_h200', 8, 8472      # the latency run's cache (8192 + 256 new + 16 + margin)
CHUNKS, BLS, WARPS, STAGES = (64, 128, 256, 512), (32, 64), (4, 8), (3, 4)
COMBINE_BDS = tuple(int(b) for b in os.environ.get('COMBINE_BDS', '128,64,32').split(',') if b)   # combine head-dim slices tried with the default split config

def _attn_inputs(dev) -> tuple:
    "(H, Hkv, D, the engine's attention dims, LAYERS random key caches, LAYERS value caches) at the Qwen3.5-4B shape."
    from effqwen.model import qwen35_config
    c = qwen35_config('qwen3.5-4b')
    H, Hkv, D = c.num_attention_heads, c.num_key_value_heads, c.head_dim
    dims = (H, Hkv, D, int(D * getattr(c, 'partial_rotary_factor', 1.0)), True, True, c.rms_norm_eps, 1.0)
    torch.manual_seed(0)
    kcs = [torch.randn(Hkv, LMAX, D, device=dev, dtype=torch.bfloat16) for _ in range(LAYERS)]
    vcs = [torch.randn(Hkv, LMAX, D, device=dev, dtype=torch.bfloat16) for _ in range(LAYERS)]
    return H, Hkv, D, dims, kcs, vcs

def run(out: str | None):
    import effqwen.engine as E
    from effqwen.core import write_result
    from gluon_stream_probe import _chain_us
    t0, dev = time.time(), 'cuda'
    H, Hkv, D, dims, kcs, vcs = _attn_inputs(dev)
    own = (E.ATTN_CHUNK, E.ATTN_BL, E.ATTN_WARPS, E.ATTN_STAGES)
    own_bd = E.ATTN_COMBINE_BD
    rows = []
    for ctx, T in itertools.product((2048, 8192), (1, 16)):
        pos = torch.tensor([ctx - T], device=dev)                    # rows see keys 0..ctx-1 (the last row's own key included)
        q = torch.randn(T, H, D, device=dev, dtype=torch.bfloat16)
        proj = torch.randn(T, 2 * H * D + 2 * Hkv * D, device=dev, dtype=torch.bfloat16)
        BR = max(16, E._np2(T * H // Hkv))
        row, ref = dict(ctx=ctx, T=T, bytes=2 * Hkv * ctx * D * 2, configs={}), None
        # (CHUNK, BL, warps, stages, combine head dims per program): the default first (the reference), every split
        # config with the whole-head combine, then the default split config with the combine over BD-dim slices
        settings = [own + (0,)] + [k + (0,) for k in itertools.product(CHUNKS, BLS, WARPS, STAGES) if k != own] + [own + (bd,) for bd in COMBINE_BDS]
        for chunk, bl, nw, ns, bd in settings:
            key = f'c{chunk} bl{bl} w{nw} s{ns}' + (f' cbd{bd}' if bd else '')
            try:
                E.ATTN_CHUNK, E.ATTN_BL, E.ATTN_WARPS, E.ATTN_STAGES, E.ATTN_COMBINE_BD = chunk, bl, nw, ns, bd
                part = E.attn_partials(Hkv, -(-LMAX // chunk), BR, D, dev)
                y = E.fused_attn_rows(q, proj, pos, kcs[0], vcs[0], dims, part, chunk); torch.cuda.synchronize()
                if ref is None: ref = y.float()
                r = dict(max_abs_diff=float((y.float() - ref).abs().max()))
                r['chain'] = _chain_us([lambda i=i: E.fused_attn_rows(q, proj, pos, kcs[i], vcs[i], dims, part, chunk) for i in range(LAYERS)])
                r['gbs'] = row['bytes'] / r['chain'] / 1e3
            except Exception: r = dict(error=traceback.format_exc()[-600:])
            finally: E.ATTN_CHUNK, E.ATTN_BL, E.ATTN_WARPS, E.ATTN_STAGES, E.ATTN_COMBINE_BD = own + (own_bd,)
            row['configs'][key] = r
        ok = {k: v['chain'] for k, v in row['configs'].items() if 'chain' in v and v['max_abs_diff'] < 0.05}
        row['default'] = 'c{} bl{} w{} s{}'.format(*own)
        if ok: row['best'] = min(ok, key=ok.get)
        rows.append(row)
        print(ctx, T, row['default'], row['configs'][row['default']].get('chain'), '-> best', row.get('best'),
              row['configs'].get(row.get('best'), {}).get('chain'), flush=True)
    gdn = gdn_rows(E, dev)
    import triton
    doc = dict(gdn=gdn, shape='qwen3.5-4b attention', heads=H, kv_heads=Hkv, head_dim=D, cache_len=LMAX, layers=LAYERS, rows=rows,
               triton=triton.__version__, wall_s=time.time() - t0,
               note='µs per call of effqwen.engine.fused_attn_rows (split-K kernel + combine + gate), LAYERS calls on distinct caches '
                    'back to back in one CUDA graph; gbs = keys + values of the context / time; default = the engine\'s module '
                    'settings at the run\'s commit; best = fastest with max |Δ| < 0.05 against the default\'s output')
    if out: os.environ['EFFQWEN_OUT'] = out
    print(write_result(NAME, doc, 'gpu'))

COMBINE_NAME = 'attn_combine_sweep_h200'

def run_combine(out: str | None):
    """The one-row combine by (chunks per step, head dims per program) (`ATTN_COMBINE_DECODE`; SWEEP_TAG=chunks: the
    split kernel's (CHUNK, BL, stages) under two of those shapes), decode (T = 1) at contexts 2048 and 8192: µs per
    `fused_attn_rows` call as in `run` (LAYERS calls on distinct caches in one CUDA graph).
    Writes attn_combine_sweep_h200[_<tag>].json (at 64b6570 this stage was `tma`, with TMA tile rows: attn_tma_sweep_h200*.json)."""
    import effqwen.engine as E
    from effqwen.core import write_result
    from gluon_stream_probe import _chain_us
    t0, dev = time.time(), 'cuda'
    H, Hkv, D, dims, kcs, vcs = _attn_inputs(dev)
    own = (E.ATTN_CHUNK, E.ATTN_BL, E.ATTN_STAGES, E.ATTN_COMBINE_DECODE)
    def put(chunk, bl, ns, cmb): E.ATTN_CHUNK, E.ATTN_BL, E.ATTN_STAGES, E.ATTN_COMBINE_DECODE = chunk, bl, ns, cmb
    if os.environ.get('SWEEP_TAG') == 'chunks':   # the split kernel by chunk and tiles under two of the combine's shapes
        sets = [own] + [(ch, bl, ns, cm) for ch, bl, ns in ((128, 64, 3), (128, 32, 3), (128, 32, 4), (512, 64, 3), (256, 32, 4), (256, 64, 4))
                        for cm in ((32, 32), (64, 32))] + [(256, 64, 3, cm) for cm in ((32, 16), (32, 64), (16, 16))]
    elif os.environ.get('SWEEP_SETS'):   # 'chunk,bl,stages[,bs,bd];...': those split tiles (and one-row combine shapes)
        specs = [[int(x) for x in spec.split(',')] for spec in os.environ['SWEEP_SETS'].split(';') if spec]
        if any(len(v) not in (3, 5) for v in specs): raise ValueError(f"SWEEP_SETS={os.environ['SWEEP_SETS']!r}: give 'chunk,bl,stages' or 'chunk,bl,stages,bs,bd' per setting, ';' between")
        sets = [own] + [(v[0], v[1], v[2], tuple(v[3:]) if len(v) == 5 else own[3]) for v in specs]
    else: sets = [own] + [(256, 64, 3, cm) for cm in (None, (16, 32), (32, 32), (64, 32), (64, 64), (64, 16))]
    rows, T = [], 1
    for ctx in (2048, 8192):
        pos = torch.tensor([ctx - T], device=dev)
        q = torch.randn(T, H, D, device=dev, dtype=torch.bfloat16)
        proj = torch.randn(T, 2 * H * D + 2 * Hkv * D, device=dev, dtype=torch.bfloat16)
        BR = max(16, E._np2(T * H // Hkv))
        row, ref = dict(ctx=ctx, T=T, bytes=2 * Hkv * ctx * D * 2, configs={}), None
        for chunk, bl, ns, cmb in sets:
            key = f"ptr c{chunk} bl{bl} s{ns}" + (f' combine {cmb[0]}x{cmb[1]}' if cmb else '')
            if key in row['configs']: continue
            try:
                put(chunk, bl, ns, cmb)
                part = E.attn_partials(Hkv, -(-LMAX // chunk), BR, D, dev)
                y = E.fused_attn_rows(q, proj, pos, kcs[0], vcs[0], dims, part, chunk); torch.cuda.synchronize()
                if ref is None: ref = y.float()
                r = dict(max_abs_diff=float((y.float() - ref).abs().max()), tiles=list(E._attn_tiles(D, q.device, T)))
                r['chain'] = _chain_us([lambda i=i: E.fused_attn_rows(q, proj, pos, kcs[i], vcs[i], dims, part, chunk) for i in range(LAYERS)])
                r['gbs'] = row['bytes'] / r['chain'] / 1e3
            except Exception: r = dict(error=traceback.format_exc()[-600:])
            finally: put(*own)
            row['configs'][key] = r
            print(ctx, T, key, {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items() if k != 'error'}, r.get('error', '')[-200:], flush=True)
        ok = {k: v['chain'] for k, v in row['configs'].items() if 'chain' in v and v['max_abs_diff'] < 0.05}
        row['default'] = next(iter(row['configs']))
        if ok: row['best'] = min(ok, key=ok.get)
        rows.append(row)
    import triton
    doc = dict(shape='qwen3.5-4b attention', heads=H, kv_heads=Hkv, head_dim=D, cache_len=LMAX, layers=LAYERS, rows=rows,
               triton=triton.__version__, wall_s=time.time() - t0, dyn_chunk=E.ATTN_DYN_CHUNK,
               note='µs per call of effqwen.engine.fused_attn_rows (split-K kernel + combine + gate), LAYERS calls on distinct caches '
                    'back to back in one CUDA graph; ptr: key and value tiles by pointer loads (cp.async); combine BSxBD: the '
                    'one-row combine\'s chunks per step and head dims per program (ATTN_COMBINE_DECODE); tiles: (BL, stages) after '
                    'the shared-memory fit; default = the first (the module settings at the run\'s commit); best = fastest with '
                    'max |Δ| < 0.05 against it')
    if out: os.environ['EFFQWEN_OUT'] = out
    print(write_result(COMBINE_NAME + (f"_{os.environ['SWEEP_TAG']}" if os.environ.get('SWEEP_TAG') else ''), doc, 'gpu'))

def _gdn_inputs(E, dev, T: int) -> dict:
    "Random inputs of the Gated-DeltaNet step at the 4B shape: T rows of the fused projection, LAYERS states and conv windows."
    from effqwen.model import qwen35_config
    c = E.EngineConfig.from_hf(qwen35_config('qwen3.5-4b')); Hv = c.lin_v_heads
    torch.manual_seed(0)
    return dict(c=c, dims=(c.conv_dim, c.key_dim, c.value_dim, c.lin_k_heads, Hv, c.lin_k_dim, c.lin_v_dim, c.rms_eps),
                proj=torch.randn(T, c.conv_dim + c.value_dim + 2 * Hv, device=dev, dtype=torch.bfloat16),
                S=[torch.randn(Hv, c.lin_k_dim, c.lin_v_dim, device=dev) * 0.1 for _ in range(LAYERS)],
                cb=[torch.randn(c.conv_dim, c.conv_kernel, device=dev, dtype=torch.bfloat16) for _ in range(LAYERS)],
                w=(torch.randn(c.conv_dim, c.conv_kernel, device=dev, dtype=torch.bfloat16) * 0.3, -torch.rand(Hv, device=dev) * 4,
                   torch.ones(Hv, device=dev, dtype=torch.bfloat16), torch.ones(c.lin_v_dim, device=dev, dtype=torch.bfloat16)))

def _sweep_bv_warps(label: str, own: tuple, cands, call, reset=lambda: None) -> dict:
    """Every (BV, warps) of `cands` after the default `own`: `call(i, bv, nw)` runs layer i's inputs and returns the tensors
    to compare (layer 0's against the default's), then LAYERS calls back to back in one CUDA graph (µs per call)."""
    from gluon_stream_probe import _chain_us
    out, ref = dict(default=f'bv{own[0]} w{own[1]}', configs={}), None
    for bv, nw in [own] + [k for k in cands if k != own]:
        try:
            reset(); got = [t.float().clone() for t in call(0, bv, nw)]; torch.cuda.synchronize()
            if ref is None: ref = got
            r = dict(bit_equal=all(torch.equal(a, b) for a, b in zip(got, ref)), max_abs_diff=max(float((a - b).abs().max()) for a, b in zip(got, ref)))
            r['chain'] = _chain_us([lambda i=i: call(i, bv, nw) for i in range(LAYERS)])
        except Exception: r = dict(error=traceback.format_exc()[-600:])
        out['configs'][f'bv{bv} w{nw}'] = r
        print(label, bv, nw, r, flush=True)
    ok = {k: v['chain'] for k, v in out['configs'].items() if v.get('max_abs_diff', 1) < 0.05}
    if ok: out['best'] = min(ok, key=ok.get)
    return out

def gdn_rows(E, dev) -> dict:
    "µs per `fused_gdn_decode` call (step kernel + output kernel) by GDN_BV and warps at the 4B shape, LAYERS distinct states."
    g = _gdn_inputs(E, dev, 1); c = g['c']
    S0, cb0 = [s.clone() for s in g['S']], [b.clone() for b in g['cb']]
    def reset():   # the decode step updates its state and conv window in place: every setting starts from the same ones
        for a, b in zip(g['S'] + g['cb'], S0 + cb0): a.copy_(b)
    def call(i, bv, nw):
        y = E.fused_gdn_decode(g['proj'], g['cb'][i], g['S'][i], *g['w'], g['dims'], bv, nw)
        return y, g['S'][i], g['cb'][i]
    out = _sweep_bv_warps('gdn', (E.GDN_BV, E.GDN_WARPS), itertools.product((16, 32, 64), (1, 2, 4, 8)), call, reset)
    return dict(out, shape=dict(heads_v=c.lin_v_heads, heads_k=c.lin_k_heads, dk=c.lin_k_dim, dv=c.lin_v_dim, conv=c.conv_dim))

def gdn_verify_rows(E, dev, T: int = 16) -> dict:
    "µs per `fused_gdn_verify` call (T rows, the one-chunk kernel + output kernel) by value columns per program and warps."
    g = _gdn_inputs(E, dev, T); c, Hv = g['c'], g['c'].lin_v_heads
    scr = [(torch.zeros(c.conv_dim, c.conv_kernel + T, device=dev, dtype=torch.bfloat16), torch.zeros(Hv, T, c.lin_k_dim, device=dev),
            torch.zeros(Hv, T, c.lin_v_dim, device=dev), torch.zeros(Hv, T, device=dev)) for _ in range(LAYERS)]
    def call(i, bv, nw):
        y = E.fused_gdn_verify(g['proj'], g['cb'][i], g['S'][i], *g['w'], g['dims'], *scr[i], bv=bv, warps=nw)
        return y, scr[i][2]
    out = _sweep_bv_warps('gdn verify', (E.GDN_VERIFY_BV or E.GDN_BV, E.GDN_VERIFY_WARPS), itertools.product((16, 32, 64), (2, 4, 8)), call)
    return dict(out, rows=T, gdn_verify=E.GDN_VERIFY)

def run_gdn(out: str | None):
    "The GDN step sweep alone, written as gdn_decode_sweep_h200.json (the attention rows keep their own run)."
    import effqwen.engine as E
    from effqwen.core import write_result
    t0 = time.time(); g = gdn_rows(E, 'cuda'); gv = gdn_verify_rows(E, 'cuda')
    if out: os.environ['EFFQWEN_OUT'] = out
    print(write_result('gdn_decode_sweep_h200', dict(gdn=g, gdn_verify=gv, layers=LAYERS, wall_s=time.time() - t0,
          note='µs per fused_gdn_decode call (gdn: step kernel + gated-norm output kernel) and per 16-row fused_gdn_verify call '
               '(gdn_verify), LAYERS distinct states back to back in one CUDA graph, by value columns per program and warps; '
               'best = fastest with max |Δ| < 0.05 against the run\'s default'), 'gpu'))

def render():
    from effqwen.core import write_table, provenance_line
    doc = json.load(open(f'data/results/{NAME}.json'))
    lines = ['### Split-K decode attention at the Qwen3.5-4B shape (µs per call, one H200 run)', '',
             '| context | rows | run\'s default | µs | GB/s | best | µs | GB/s | max abs Δ | engine now | µs |', '|---|---|---|---|---|---|---|---|---|---|---|']
    import effqwen.engine as E
    for r in doc['rows']:
        bl, ns = (E.ATTN_BL, E.ATTN_STAGES) if r['T'] == 1 else E.ATTN_VERIFY_TILES     # the module's settings at this commit
        now = f'c{E.ATTN_CHUNK} bl{bl} w{E.ATTN_WARPS} s{ns}'
        d, b, n = r['configs'][r['default']], r['configs'].get(r.get('best'), {}), r['configs'].get(now, {})
        lines.append(f"| {r['ctx']} | {r['T']} | {r['default']} | {d.get('chain', float('nan')):.2f} | {d.get('gbs', float('nan')):.0f} | "
                     f"{r.get('best', '–')} | {b.get('chain', float('nan')):.2f} | {b.get('gbs', float('nan')):.0f} | {b.get('max_abs_diff', float('nan')):.3g} | "
                     f"{now} | {n.get('chain', float('nan')):.2f} |")
    g, gdoc = doc.get('gdn'), None
    if os.path.exists('data/results/gdn_decode_sweep_h200.json'):   # a later GDN-only run replaces the attention run's GDN rows
        gdoc = json.load(open('data/results/gdn_decode_sweep_h200.json')); g = gdoc['gdn']
    if g:
        lines += ['', '### Gated-DeltaNet decode step by value columns per program (µs per call)', '',
                  '| GDN_BV, warps | µs | bit-equal to the run\'s default | max abs Δ |', '|---|---|---|---|']
        for k, v in g['configs'].items():
            d = str(g['default']); d = d if d.startswith('bv') else f'bv{d} w4'   # (the first run swept BV at 4 warps)
            lines.append(f"| {k}{' (run default)' if k in (d, d[2:-3]) else ''}{' (best)' if k == str(g.get('best')) else ''} | "
                         f"{v.get('chain', float('nan')):.2f} | {v.get('bit_equal', 'failed')} | {v.get('max_abs_diff', float('nan')):.3g} |")
    gv = (gdoc or {}).get('gdn_verify')
    if gv:
        lines += ['', f"### Gated-DeltaNet verify ({gv['rows']} rows, '{gv['gdn_verify']}' kernel + output kernel) by value columns per program and warps (µs per call)", '',
                  '| GDN verify BV, warps | µs | max abs Δ against the run\'s default |', '|---|---|---|']
        for k, v in gv['configs'].items():
            lines.append(f"| {k}{' (run default)' if k == gv['default'] else ''}{' (best)' if k == gv.get('best') else ''} | "
                         f"{v.get('chain', float('nan')):.2f} | {v.get('max_abs_diff', float('nan')):.3g} |")
    lines += ['', doc['note'] + '.', '', provenance_line(doc)]
    if gdoc: lines += ['', 'GDN rows: ' + gdoc['note'] + '. ' + provenance_line(gdoc)]
    import glob
    for path in sorted(glob.glob('data/results/attn_tma_sweep_h200*.json') + glob.glob(f'data/results/{COMBINE_NAME}*.json')):   # stage `combine` (`tma` at 64b6570)
        t = json.load(open(path))
        lines += ['', f"### `{os.path.basename(path)}`: split-K attention by tile loads, chunk and one-row combine shape (µs per call)", '',
                  '| context | rows | setting | µs | GB/s | max abs Δ vs the first |', '|---|---|---|---|---|---|']
        for r in t['rows']:
            for k, v in r['configs'].items():
                mark = ' (first)' if k == r['default'] else ' (best)' if k == r.get('best') else ''
                lines.append(f"| {r['ctx']} | {r['T']} | {k}{mark} | {v.get('chain', float('nan')):.2f} | {v.get('gbs', float('nan')):.0f} | "
                             f"{v.get('max_abs_diff', float('nan')):.3g} |" if 'chain' in v else f"| {r['ctx']} | {r['T']} | {k} | failed | | |")
        lines += ['', t['note'] + '.', '', provenance_line(t)]
    print(write_table('attn_decode_sweep', '\n'.join(lines), doc['provenance']['profile']))

if __name__ == '__main__':
    ap = argparse.ArgumentParser(); ap.add_argument('stage', nargs='?', default='run', choices=['run', 'gdn', 'combine', 'render']); ap.add_argument('--out')
    a = ap.parse_args()
    {'run': lambda: run(a.out), 'gdn': lambda: run_gdn(a.out), 'combine': lambda: run_combine(a.out), 'render': render}[a.stage]()
