"""Nsight Compute counters of the M = 1 W4A16 kernels, each launch alone with the caches flushed (GPU diagnostic for
issue 7's isolated-time target): the Gluon fragment kernel in several configs, torch's tinygemm int4 and a plain
streaming read of the same bytes, at the down projection (2560 x 9216), the gate/up-sized 9216 x 2560, and the down
projection at M = 16. ncu replays each launch per counter pass (`--cache-control all`: caches flushed before each pass,
`--clock-control none`: the GPU's own clocks, as the benchmarks run), so every row is one kernel alone, like
`effqwen.kernels._bench`. What it is for: where a kernel that streams the same bytes as the read kernel spends the
other half of its time (warps resident, instructions per warp, stall reasons per issued instruction).

    python scripts/kernel_ncu_probe.py [--out DIR]   # GPU with ncu on PATH -> data/results/kernel_ncu_probe_h200.json
    python scripts/kernel_ncu_probe.py target        # the launches ncu profiles (run by the line above)
    python scripts/kernel_ncu_probe.py attn [--out DIR]   # the decode split-K attention kernel -> kernel_ncu_probe_h200_attn.json
    python scripts/kernel_ncu_probe.py source --out DIR   # per-SASS-instruction warp sampling of the 4B gate product at M = 1
                                                      # alone (raw ncu pages under DIR/ncu_source/) -> kernel_ncu_source_h200.json
    python scripts/kernel_ncu_probe.py source-summary --out DIR --gpu 'NVIDIA H200'   # that summary again from DIR/ncu_source (pages fetched from the GPU)
    python scripts/kernel_ncu_probe.py render        # -> data/tables/kernel_ncu_probe.md (both results)
"""
import argparse, csv, io, json, os, shutil, subprocess, sys, time
from pathlib import Path
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent)); sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
NAME = 'kernel_ncu_probe_h200'
KERNELS = 'regex:read_words|w4_fragment_kernel|tinygemm'
# (N, K, M): [(WK, WM, DEPTH, split), ...]
RUNS = {(2560, 9216, 1): [(8, 1, 0, 1), (8, 1, 1, 1), (4, 1, 1, 6)], (9216, 2560, 1): [(4, 1, 0, 1), (4, 1, 1, 1)],
        (2560, 9216, 16): [(8, 1, 0, 1), (4, 1, 0, 3)]}
METRICS = ['gpu__time_duration.sum', 'dram__bytes_read.sum', 'dram__throughput.avg.pct_of_peak_sustained_elapsed',
           'launch__grid_size', 'launch__block_size', 'launch__registers_per_thread', 'launch__shared_mem_per_block_dynamic',
           'sm__warps_active.avg.pct_of_peak_sustained_active', 'smsp__issue_active.avg.pct_of_peak_sustained_active',
           'smsp__inst_executed.sum', 'sm__cycles_active.avg', 'gpc__cycles_elapsed.max'] + [
           f'smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio'
           for s in ('long_scoreboard', 'short_scoreboard', 'wait', 'barrier', 'lg_throttle', 'math_pipe_throttle', 'mio_throttle',
                     'no_instruction', 'not_selected', 'selected', 'dispatch_stall', 'membar', 'sleeping')]

def target():
    "The launches, in order; their labels to stdout as one JSON line (ncu matches them to its rows by order)."
    import triton
    import effqwen.gluon as G
    from effqwen import kernels as Kn
    from gluon_stream_probe import _read_kernel, _w4_copy
    rk, labels, calls = _read_kernel(), [], []
    torch.manual_seed(0)
    for (N, K, M), cfgs in RUNS.items():
        w, s = _w4_copy(N, K)
        x, y = torch.randn(M, K, device='cuda').to(torch.bfloat16), torch.empty(M, N, device='cuda', dtype=torch.bfloat16)
        if M == 1:
            nw = w.numel(); grid = (triton.cdiv(nw, 4096),); part = torch.empty(grid[0], dtype=torch.int32, device='cuda')
            calls.append(lambda w=w, nw=nw, grid=grid, part=part: rk[grid](w, part, nw, BLOCK=1024, ITERS=4, num_warps=4))
            labels.append(f'{N}x{K} M={M} stream read (same bytes)')
            wp = torch.randint(-2**31, 2**31 - 1, (N, K // 8), dtype=torch.int64).to(torch.int32).cuda()
            tg = Kn._tinygemm(wp, s, 128)
            calls.append(lambda x=x, tg=tg: torch.ops.aten._weight_int4pack_mm(x, tg[0], 128, tg[1]))
            labels.append(f'{N}x{K} M={M} tinygemm int4')
        for WK, WM, D, S in cfgs:
            calls.append(lambda x=x, w=w, s=s, y=y, c=(WK, WM, D), S=S: G.w4a16_fragment_matmul(x, w, s, c, out=y, split=S))
            labels.append(f'{N}x{K} M={M} gluon wk{WK} d{D} s{S}')
    torch.cuda.synchronize()
    for c in calls: c()   # (each Triton / Gluon kernel compiles at its first call; ncu profiles the launch that follows)
    torch.cuda.synchronize()
    print('LABELS ' + json.dumps(labels), flush=True)

ATTN_RUNS = [(8192, 256, 64, 3, 4), (8192, 256, 64, 3, 8), (8192, 128, 32, 3, 4), (2048, 256, 64, 3, 4)]   # (context, CHUNK, BL, stages, warps)
# (the run at 34f3847 also timed ATTN_PEEL, an unmasked loop of whole key steps, since removed: kernel_ncu_probe_h200_attn.json)

def target_attn():
    """The decode split-K attention kernel (`effqwen.engine._attn_split_kernel`, one token, the 4B shape's 16 query / 4 kv
    heads of 256 dims over the latency run's 8,472-position cache) at ATTN_RUNS' settings; labels as in `target`."""
    import effqwen.engine as E
    from attn_decode_sweep import _attn_inputs, LMAX
    H, Hkv, D, dims, kcs, vcs = _attn_inputs('cuda')
    labels, calls = [], []
    for ctx, chunk, bl, ns, nw in ATTN_RUNS:
        pos = torch.tensor([ctx - 1], device='cuda')
        q = torch.randn(1, H, D, device='cuda', dtype=torch.bfloat16); proj = torch.randn(1, 2 * H * D + 2 * Hkv * D, device='cuda', dtype=torch.bfloat16)
        part = E.attn_partials(Hkv, -(-LMAX // chunk), 16, D, 'cuda')
        def call(q=q, proj=proj, pos=pos, part=part, chunk=chunk, bl=bl, ns=ns, nw=nw):
            E.ATTN_BL, E.ATTN_STAGES, E.ATTN_WARPS = bl, ns, nw
            E.fused_attn_rows(q, proj, pos, kcs[0], vcs[0], dims, part, chunk)
        calls.append(call); labels.append(f'attn split ctx {ctx} c{chunk} bl{bl} s{ns} w{nw} dyn{int(E.ATTN_DYN_CHUNK)}')
    torch.cuda.synchronize()
    for c in calls: c()
    torch.cuda.synchronize()
    print('LABELS ' + json.dumps(labels), flush=True)

SOURCE_RUNS = [('wk4 d1 nofence', (4, 1, 1), False), ('wk4 d1 fence', (4, 1, 1), True), ('wk4 d0 fence', (4, 1, 0), True)]   # 9216 x 2560, M = 1, alone

def target_source():
    "The 4B gate product at M = 1 alone (no PDL) at SOURCE_RUNS' configs, for `source`; labels as in `target`."
    import effqwen.gluon as G
    from effqwen import kernels as Kn
    from gluon_stream_probe import _w4_copy
    torch.manual_seed(0)
    w, s = _w4_copy(9216, 2560)
    x, y = torch.randn(1, 2560, device='cuda').to(torch.bfloat16), torch.empty(1, 9216, device='cuda', dtype=torch.bfloat16)
    def call(cfg, fence):
        G.FENCE = fence
        with Kn.no_pdl(): G.w4a16_fragment_matmul(x, w, s, cfg, out=y, split=1)
    for _, cfg, fe in SOURCE_RUNS: call(cfg, fe)   # compile
    torch.cuda.synchronize()
    for _, cfg, fe in SOURCE_RUNS: call(cfg, fe)
    torch.cuda.synchronize()
    print('LABELS ' + json.dumps([l for l, _, _ in SOURCE_RUNS]), flush=True)

def source(out: str):
    """Warp-state sampling per SASS instruction (Nsight Compute's SourceCounters) of the 4B gate product at M = 1 alone:
    where the warps wait. Writes the raw report pages to OUT/ncu_source/ (sass_<i>.csv per launch, details.txt)."""
    ncu = shutil.which('ncu') or '/usr/local/cuda/bin/ncu'
    d = Path(out)/'ncu_source'; d.mkdir(parents=True, exist_ok=True)
    rep = d/'w4'
    p = subprocess.run([ncu, '--cache-control', 'all', '--clock-control', 'none', '--kernel-name', 'regex:w4_fragment_kernel', '--launch-skip', str(len(SOURCE_RUNS)),
                        '--section', 'SourceCounters', '--section', 'WarpStateStats', '--section', 'SpeedOfLight', '--section', 'LaunchStats',
                        '--import-source', 'no', '-f', '-o', str(rep), sys.executable, __file__, 'target-source'], capture_output=True, text=True, timeout=400)
    (d/'profile_log.txt').write_text(p.stdout[-20000:] + '\n---\n' + p.stderr[-20000:])
    q = subprocess.run([ncu, '-i', str(rep) + '.ncu-rep', '--page', 'details', '--print-details', 'all'], capture_output=True, text=True)
    (d/'details.txt').write_text(q.stdout + q.stderr[-3000:])
    for i in range(len(SOURCE_RUNS)):
        q = subprocess.run([ncu, '-i', str(rep) + '.ncu-rep', '--page', 'source', '--csv', '--print-source', 'sass', '--launch-skip', str(i), '--launch-count', '1'],
                           capture_output=True, text=True)
        (d/f'sass_{i}.csv').write_text(q.stdout + ('\n#stderr ' + q.stderr[-3000:] if q.returncode else ''))
    print(p.returncode, sorted(x.name for x in d.iterdir()), flush=True)
    source_summary(str(d), torch.cuda.get_device_name())

SOURCE_NAME = 'kernel_ncu_source_h200'

def source_summary(d: str, gpu: str | None = None):
    """`source`'s raw pages (DIR/ncu_source: sass_<i>.csv, details.txt) -> data/results/kernel_ncu_source_h200.json: per
    launch, ncu's duration, the warp-state samples by opcode, the share stalled on long scoreboard (waiting for a global
    load), the share on the first use of each weight word (the instruction that reads an `LDG.E.EF.128` destination
    first; DEPTH 0 copies the words through shared memory instead, so 0 there), and the ten instructions with the most
    samples."""
    import re
    from effqwen.core import write_result
    d = Path(d)
    durs = [float(v) for v in re.findall(r'^\s+Duration\s+us\s+([\d.]+)', (d/'details.txt').read_text(), re.M)]
    rows = []
    for i, (label, _, _) in enumerate(SOURCE_RUNS):
        lines = (d/f'sass_{i}.csv').read_text().splitlines()
        sass = list(csv.DictReader(io.StringIO('\n'.join(l for l in lines[1:] if not l.startswith('#')))))
        n = lambda r, k: float(r.get(k) or 0)
        tot = sum(n(r, 'Warp Stall Sampling (All Samples)') for r in sass)
        ops, pending, word_use = {}, [], 0.0   # pending: the register quads of weight loads not read yet
        for r in sass:
            toks = r['Source'].split()
            if not toks: continue
            op = toks[1] if toks[0].startswith('@') else toks[0]
            ops[op.split('.')[0]] = ops.get(op.split('.')[0], 0.0) + n(r, 'Warp Stall Sampling (All Samples)')
            regs = {int(v) for v in re.findall(r'\bR(\d+)\b', r['Source'])}
            if op.startswith('LDG.E.EF.128'):   # a 16-byte weight load into R<d>..R<d+3>
                d0 = int(re.search(r'\bR(\d+)\b', r['Source']).group(1)); pending.append(set(range(d0, d0 + 4))); continue
            hit = [q for q in pending if q & regs]
            if hit: word_use += n(r, 'Warp Stall Sampling (All Samples)'); pending = [q for q in pending if not q & regs]
        top = sorted(range(len(sass)), key=lambda j: -n(sass[j], 'Warp Stall Sampling (All Samples)'))[:10]
        rows.append(dict(label=label, us=durs[i] if i < len(durs) else None, samples=tot, instructions=len(sass),
                         by_opcode={k: v / tot for k, v in sorted(ops.items(), key=lambda kv: -kv[1]) if v},
                         long_scoreboard=sum(n(r, 'stall_long_sb') for r in sass) / tot, first_use_of_words=word_use / tot,
                         top=[dict(index=j, sass=sass[j]['Source'].strip(), share=n(sass[j], 'Warp Stall Sampling (All Samples)') / tot) for j in top]))
        print(label, rows[-1]['us'], 'us', f"long scoreboard {rows[-1]['long_scoreboard']:.0%}, first use of words {rows[-1]['first_use_of_words']:.0%}", flush=True)
    path = write_result(SOURCE_NAME, dict(rows=rows, note='Nsight Compute SourceCounters of the 4B gate product (9216 x 2560, M = 1) alone, one launch per '
                                          'config (--cache-control all, --clock-control none); shares are of all warp-state samples; first_use_of_words: '
                                          'samples on the first instruction that reads each evict-first weight load\'s destination registers'), 'gpu')
    if gpu:   # pages measured on that GPU, summarized here: the device is the GPU's
        doc = json.loads(path.read_text()); doc['provenance']['device'] = gpu; path.write_text(json.dumps(doc, indent=1) + '\n')
    print(path)

def run(out: str | None, stage: str = 'target'):
    from effqwen.core import write_result
    ncu = shutil.which('ncu') or '/usr/local/cuda/bin/ncu'
    if not os.path.exists(ncu): raise SystemExit('needs Nsight Compute (ncu)')
    t0 = time.time()
    p = subprocess.run([ncu, '--cache-control', 'all', '--clock-control', 'none', '--kernel-name', KERNELS if stage == 'target' else 'regex:_attn_split_kernel',
                        '--metrics', ','.join(METRICS), '--csv', sys.executable, __file__, stage], capture_output=True, text=True, timeout=540)
    labels = json.loads(next(l for l in p.stdout.splitlines() if l.startswith('LABELS '))[7:])
    rows = {}
    for r in csv.DictReader(io.StringIO('\n'.join(l for l in p.stdout.splitlines() if l.startswith('"')))):
        rows.setdefault(r['ID'], dict(kernel=r['Kernel Name'][:80], metrics={}))['metrics'][r['Metric Name']] = float(r['Metric Value'].replace(',', '') or 'nan')
    prof = [rows[k] for k in sorted(rows, key=int)]
    # every label's kernel is the last matching launch of its call (a call may launch more than one matching kernel: none here)
    if len(prof) != len(labels):   # (labels by order only hold when each call launched one matching kernel: keep the names then)
        print(f'{len(prof)} profiled launches for {len(labels)} labels; labelled by kernel name', p.stderr[-1500:], flush=True)
        labels = [f"{r['kernel'][:40]} #{i}" for i, r in enumerate(prof)]
    res = [dict(label=l, **r) for l, r in zip(labels, prof)]
    for r in res:
        m = r['metrics']; w = m['launch__grid_size'] * m['launch__block_size'] / 32
        r['warps'] = w; r['inst_per_warp'] = m['smsp__inst_executed.sum'] / w
        r['us'] = m['gpu__time_duration.sum'] / 1e3; r['tb_s'] = m['dram__bytes_read.sum'] / m['gpu__time_duration.sum'] / 1e3
        print(r['label'], round(r['us'], 2), 'us', round(r['tb_s'], 2), 'TB/s', {k: m[k] for k in METRICS[7:10]}, flush=True)
    if out: os.environ['EFFQWEN_OUT'] = out
    print(write_result(NAME + ('_attn' if stage != 'target' else ''), dict(rows=res, metrics=METRICS, ncu=subprocess.run([ncu, '--version'], capture_output=True, text=True).stdout.strip().splitlines()[-1],
                                  wall_s=time.time() - t0,
                                  note='Nsight Compute, each launch alone (--cache-control all, --clock-control none); us = gpu__time_duration; '
                                       'tb_s = DRAM bytes read / duration; warps = grid x block / 32; inst_per_warp = smsp__inst_executed / warps; '
                                       'stall ratios = warps stalled for that reason per issued instruction (smsp__average_warps_issue_stalled_*)'), 'gpu'))

def render():
    from effqwen.core import write_table, provenance_line
    st = ('long_scoreboard', 'wait', 'barrier', 'short_scoreboard', 'math_pipe_throttle')
    lines = []
    for name, title in ((NAME, 'The M = 1 W4A16 kernels'), (NAME + '_attn', 'The decode split-K attention kernel (4B shape, one token)')):
        if not Path(f'data/results/{name}.json').exists(): continue
        doc = json.loads(Path(f'data/results/{name}.json').read_text())
        lines += [f'### {title} under Nsight Compute, each launch alone (one H200 run)', '',
                  '| kernel | µs | TB/s | warps | instructions per warp | warps active % | issue active % | ' + ' | '.join(s.replace('_', ' ') for s in st) + ' |',
                  '|---|---|---|---|---|---|---|' + '---|' * len(st)]
        for r in doc['rows']:
            m = r['metrics']
            lines.append(f"| {r['label']} | {r['us']:.2f} | {r['tb_s']:.2f} | {r['warps']:.0f} | {r['inst_per_warp']:.0f} | "
                         f"{m['sm__warps_active.avg.pct_of_peak_sustained_active']:.1f} | {m['smsp__issue_active.avg.pct_of_peak_sustained_active']:.1f} | "
                         + ' | '.join(f"{m[f'smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio']:.2f}" for s in st) + ' |')
        lines += ['', doc['note'] + f"; {doc['ncu']}.", '', provenance_line(doc), '']
    print(write_table('kernel_ncu_probe', '\n'.join(lines).rstrip(), json.loads(Path(f'data/results/{NAME}.json').read_text())['provenance']['profile']))

if __name__ == '__main__':
    ap = argparse.ArgumentParser(); ap.add_argument('stage', nargs='?', default='run', choices=['run', 'attn', 'target', 'target_attn', 'source', 'target-source', 'source-summary', 'render']); ap.add_argument('--out'); ap.add_argument('--gpu', help='source-summary: the GPU the pages were measured on')
    a = ap.parse_args()
    {'run': lambda: run(a.out), 'attn': lambda: run(a.out, 'target_attn'), 'target': target, 'target_attn': target_attn, 'source': lambda: source(a.out), 'target-source': target_source, 'source-summary': lambda: source_summary(a.out + '/ncu_source', a.gpu), 'render': render}[a.stage]()
