"""A/B of the Gluon fragment kernels against another version of `effqwen/gluon.py` in one GPU run (GPU diagnostic).

Changes to the kernels are often worth 0.1-0.3 µs a call, about the run-to-run spread on the H200, so a comparison
against an earlier run's numbers says little. This loads a second copy of the module from a file (e.g. the committed
version: `git show HEAD:effqwen/gluon.py > /tmp/gluon_base.py`) next to the working one and times both on the same
weights, interleaved over ROUNDS rounds (base, new, base, new, ...), four ways: alone with the L2 flushed by zeroing /
reading 256 MB (`effqwen.kernels._bench`), and CHAIN calls on distinct weight copies back to back in one CUDA graph,
without and with programmatic dependent launch (the engine's decode graph). Outputs are compared bit for bit.

    python scripts/gluon_ab.py --base /tmp/gluon_base.py --tag NAME [--out DIR]   # -> data/results/kernel_ab_h200_NAME.json
"""
import argparse, importlib.util, os, statistics, sys, time, traceback
import torch
sys.path.insert(0, os.path.dirname(__file__))
from gluon_stream_probe import CHAIN, _chain_us, _w4_copy, _write

W4_SHAPES = [(9216, 2560, 1), (18432, 2560, 1), (12352, 2560, 1), (2560, 9216, 1), (2560, 4096, 1),
             (9216, 2560, 16), (18432, 2560, 16), (2560, 9216, 16)]   # (N, K, M): issue 7's shape and the 4B engine's
BCQ_SHAPES = [(9216, 2560, 1), (2560, 9216, 1)]                         # BCQ 3 planes, group 128
ROUNDS = int(os.environ.get('AB_ROUNDS', '3'))

def load_base(path: str):
    "The module at path as `effqwen._gluon_base` (its relative imports resolve inside the installed package)."
    spec = importlib.util.spec_from_file_location('effqwen._gluon_base', path)
    mod = importlib.util.module_from_spec(spec); sys.modules[spec.name] = mod; spec.loader.exec_module(mod)
    return mod

def timings(call, Kn) -> dict:
    "µs per call of call(i) (weight copy i): alone (memset / read flush), back to back, back to back under PDL."
    own = Kn.PDL
    try:
        Kn.PDL = False
        r = dict(memset=Kn._bench(lambda: call(0), 5, flush='memset'), read=Kn._bench(lambda: call(0), 5, flush='read'),
                 chain=_chain_us([lambda i=i: call(i) for i in range(CHAIN)]))
        Kn.PDL = True
        r['chain+pdl'] = _chain_us([lambda i=i: call(i) for i in range(CHAIN)])
    finally: Kn.PDL = own
    return r

def main(base_path: str, tag: str, out: str | None):
    import effqwen.gluon as G
    from effqwen import kernels as Kn
    B = load_base(base_path)
    mods = dict(base=B, new=G)
    torch.manual_seed(0); rows, t0 = [], time.time()
    cases = [('w4a16', *s) for s in W4_SHAPES] + [('bcq3', *s) for s in BCQ_SHAPES]
    for fmt, N, K, M in cases:
        x, y = torch.randn(M, K, device='cuda').to(torch.bfloat16), torch.empty(M, N, device='cuda', dtype=torch.bfloat16)
        if fmt == 'w4a16':
            ws = [_w4_copy(N, K) for _ in range(CHAIN)]
            cfgs = [G.fragment_config('w4a16', M, N, K, x.device)]
            cfgs += [c for c in ((4, 1, 0), (4, 1, 1)) if c not in cfgs and K % (128 * c[0]) == 0 and not (c[2] == 0 and 8 * K > G._SMEM_MAX)
                     and not (c[2] == 1 and K // c[0] > 2304)]
            calls = {(v, c): (lambda i, m=m, c=c: m.w4a16_fragment_matmul(x, ws[i][0], ws[i][1], c, out=y, split=1))
                     for v, m in mods.items() for c in cfgs}
        else:
            signs = [torch.randint(-2**31, 2**31 - 1, (3, N, K // 32), dtype=torch.int64).to(torch.int32).cuda() for _ in range(CHAIN)]
            alpha = (torch.rand(3, N, K // 128, device='cuda') * 0.02 + 0.002).to(torch.bfloat16)
            ws = [G.bcq_to_fragment(b) for b in signs]; del signs
            cfgs = [G.fragment_config('bcq', M, N, K)]
            calls = {(v, c): (lambda i, m=m, c=c: m.bcq_fragment_matmul(x, ws[i], alpha, c, out=y)) for v, m in mods.items() for c in cfgs}
        row = dict(fmt=fmt, N=N, K=K, M=M, configs={})
        for c in cfgs:
            name = f'wk{c[0]}' + (f' wm{c[1]}' if c[1] > 1 else '') + (f' d{c[2]}' if len(c) > 2 else '')
            r = dict(rounds={'base': [], 'new': []})
            try:
                outs = {}
                for v in mods:
                    calls[v, c](0); torch.cuda.synchronize(); outs[v] = y.clone()
                r['equal'] = bool(torch.equal(outs['base'], outs['new']))
                for _ in range(ROUNDS):
                    for v in mods: r['rounds'][v].append(timings(calls[v, c], Kn))
                for v in mods:
                    r[v] = {t: statistics.median(rr[t] for rr in r['rounds'][v]) for t in r['rounds'][v][0]}
            except Exception: r['error'] = traceback.format_exc()[-800:]
            row['configs'][name] = r
            print(fmt, N, K, M, name, r.get('equal'), {v: {t: round(u, 2) for t, u in r[v].items()} for v in mods if v in r}, r.get('error', '')[-300:], flush=True)
        rows.append(row)
        del ws; torch.cuda.empty_cache()
    _write(f'kernel_ab_h200_{tag}', out, t0, rows=rows, rounds=ROUNDS, base=os.path.basename(base_path),
           note='µs per call of the Gluon fragment kernels of two versions of effqwen/gluon.py in one run, on the same weights: '
                'base (the module loaded from the file `base`) and new (effqwen.gluon at this commit), interleaved over `rounds` '
                'rounds, medians: memset / read = effqwen.kernels._bench (alone, L2 flushed by zeroing / reading 256 MB, no PDL); '
                'chain = CHAIN calls on distinct weight copies back to back in one CUDA graph, per call; chain+pdl = the same '
                'under programmatic dependent launch. equal: the two outputs are equal bit for bit. W4A16: the engine\'s config '
                '(fragment_config) and wk4 d0 / d1; BCQ: 3 planes, group 128, random signs and alpha.')

if __name__ == '__main__':
    ap = argparse.ArgumentParser(); ap.add_argument('--base', required=True); ap.add_argument('--tag', required=True); ap.add_argument('--out')
    a = ap.parse_args()
    main(a.base, a.tag, a.out)
