"""What the Gluon fragment kernels execute per thread, counted from their sm_90 SASS without a GPU, beside the bytes each
format reads: the structural side of issue 7's "BCQ 3-plane ≥ 1.2× our W4A16 at M = 1".

    PYTHONPATH=<triton 3.6, the device's>:. python scripts/gluon_census.py     # -> data/results/kernel_census_sm90.json
    python scripts/gluon_census.py render                                       # -> data/tables/kernel_census_sm90.md

The Triton 3.6 wheel for this machine's Python unpacks anywhere (`python -m zipfile -e triton-3.6.0-cp311-*.whl DIR`,
then `chmod +x DIR/triton/backends/nvidia/bin/*`); another Triton compiles other SASS, and the result records which one
ran. Every kernel: the 4B gate/up product's per-warp K slice (K = 2560, 4 warps on K, one 16-row block, DEPTH 0 = the
engine's config there), at M = 1 (NT = 8) and M = 16 (NT = 16); W4A16 with and without `SUB136` also with the register
pipeline (DEPTH 2) at M = 1, and at the down projection's verify config (K = 9216, 8 warps on K, DEPTH 0, M = 16); and
the gate shape's alone pick (DEPTH 1 without the fence, M = 1) with its warps summed by `gl.sum` and by `RED1`.
Counts are static instructions of the compiled code, not timings: at DEPTH 0 the k-loop is unrolled, so they are one
CTA thread's whole run; the DEPTH 2 register pipeline may keep a runtime loop, so there only the registers compare.
"""
import argparse, json, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NAME = 'kernel_census_sm90'
K, WK = 2560, 4
KERNELS = [('w4a16 g128 (correction mma)', 'w4a16', dict(SUB136=False)), ('w4a16 g128, SUB136', 'w4a16', dict(SUB136=True)),
           ('bcq2 g128', 'bcq', dict(Q=2, GROUP=128)), ('bcq3 g128', 'bcq', dict(Q=3, GROUP=128)),
           ('bcq3 g256', 'bcq', dict(Q=3, GROUP=256)), ('bcq4 g128', 'bcq', dict(Q=4, GROUP=128))]
W4 = KERNELS[:2]
ALONE = [('w4a16 g128, SUB136, no fence', 'w4a16', dict(SUB136=True, FENCE=False)),             # the gate shape's alone pick (wk4 d1 nofence),
          ('w4a16 g128, SUB136, no fence, RED1', 'w4a16', dict(SUB136=True, FENCE=False, RED1=True))]   # with the warps' sum by gl.sum / RED1
CONFIGS = ([(k, (K, WK, 0, M)) for k in KERNELS for M in (1, 16)] + [(k, c) for k in W4 for c in ((K, WK, 2, 1), (9216, 8, 0, 16))]
           + [(k, (K, WK, 1, 1)) for k in ALONE])   # (kernel, (K, WK, DEPTH, M))
ALU = ('LOP3', 'HADD2', 'HFMA2', 'HMUL2', 'PRMT', 'SHF', 'IMAD', 'IADD3', 'FFMA', 'FMUL', 'FADD', 'SEL', 'FSEL')

def run():
    import triton
    import effqwen.gluon as G
    from effqwen.core import write_result
    from effqwen.kernels import weight_bytes
    if G.gluon is None: raise SystemExit(f'no Gluon: {G._GLUON_ERR}')
    rows = []
    for (label, fmt, kw), (k, wk, depth, M) in CONFIGS:
        NT = 8 if M == 1 else 16
        _, ops, res = G.census(G.compile_offline(fmt, wk, NT, k, DEPTH=depth, **kw))
        r = dict(kernel=label, K=k, warps_on_k=wk, depth=depth, M=M, NT=NT, registers=int(next(x for x in res if x.startswith('REG:'))[4:]),
                 hmma=sum(c for o, c in ops.items() if o.startswith('HMMA')),
                 alu=sum(c for o, c in ops.items() if o.startswith(ALU)), instructions=sum(ops.values()),
                 bar_sync=sum(c for o, c in ops.items() if o.startswith('BAR.SYNC')), shfl=sum(c for o, c in ops.items() if o.startswith('SHFL')),
                 local_memory=any(x.startswith('LOCAL:') and x != 'LOCAL:0' for x in res))
        rows.append(r); print(r, flush=True)
    fmts = [('w4a16', 128), ('bcq2', 128), ('bcq3', 64), ('bcq3', 128), ('bcq3', 256), ('bcq4', 128)]
    ref = weight_bytes('w4a16', 9216, K, 128)
    byts = [dict(format=f'{m} g{g}', bytes_per_weight=weight_bytes(m, 9216, K, g) / (9216 * K),
                 speedup_bound_vs_w4a16_g128=ref / weight_bytes(m, 9216, K, g)) for m, g in fmts]
    p = write_result(NAME, dict(rows=rows, bytes=byts, triton=triton.__version__, target='sm_90 SASS from an offline compile (no GPU)',
                                shape=dict(N=9216),
                                note='static SASS instruction counts of the compiled code (effqwen.gluon.compile_offline + census): at DEPTH 0 the k-loop is '
                                     'unrolled, so one CTA thread\'s whole run; a DEPTH 2 row may keep a runtime loop, so there only the registers compare; '
                                     'hmma: HMMA.16816 instructions; bar_sync / shfl: CTA barriers / warp shuffles; alu: integer / bf16x2 / fp32 arithmetic, logic and permutes '
                                     f'({", ".join(ALU)}); speedup_bound: the W4A16 g128 bytes over the format\'s bytes (both read at '
                                     'the same rate), the most a format can gain from reading fewer bytes'), 'gpu', device='cpu')
    print(p)

def render():
    from effqwen.core import write_table, provenance_line
    doc = json.loads(Path(f'data/results/{NAME}.json').read_text())
    at = lambda r: (r['K'], r['depth'], r['M'])
    base = {at(r): r for r in doc['rows'] if r['kernel'] == 'w4a16 g128, SUB136'}
    lines = [f"### What the fragment kernels execute per thread (sm_90 SASS, offline compile, Triton {doc['triton']})", '',
             f"One CTA thread of a {doc['shape']['N']}-row product; static counts, not timings; the ratios against W4A16 with "
             'SUB136 at the same K, DEPTH and M.', '',
             '| kernel | K | warps on K | DEPTH | M | registers | HMMA | ALU | bar.sync | shfl | all | HMMA vs W4A16 SUB136 | all vs W4A16 SUB136 |',
             '|---|---|---|---|---|---|---|---|---|---|---|---|---|']
    for r in doc['rows']:
        b = base.get(at(r))
        lines.append(f"| {r['kernel']} | {r['K']} | {r['warps_on_k']} | {r['depth']} | {r['M']} | {r['registers']} | {r['hmma']} | {r['alu']} | "
                     f"{r['bar_sync']} | {r['shfl']} | {r['instructions']} | "
                     + (f"{r['hmma'] / b['hmma']:.1f}× | {r['instructions'] / b['instructions']:.2f}× |" if r['depth'] == 0 and b else '– | – |'))
    lines += ['', '| format | bytes per weight (incl. scales) | speedup bound vs W4A16 g128 |', '|---|---|---|']
    lines += [f"| {b['format']} | {b['bytes_per_weight']:.4f} | {b['speedup_bound_vs_w4a16_g128']:.3f}× |" for b in doc['bytes']]
    lines += ['', doc['note'] + '.', '', provenance_line(doc)]
    print(write_table(NAME, '\n'.join(lines) + '\n', doc['provenance']['profile']))

if __name__ == '__main__':
    ap = argparse.ArgumentParser(); ap.add_argument('stage', nargs='?', default='run', choices=['run', 'render'])
    a = ap.parse_args()
    run() if a.stage == 'run' else render()
