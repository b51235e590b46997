"""Tune the W4A16 kernels at the shapes the engine actually runs (its fused linears: Gated-DeltaNet / attention input
projections, gate+up, down, out) for M = 1 (decode) and M = 16 (verify-16), and the dequantize kernel of prefill
(M > 64: dequantize to bf16, then cuBLAS), at the Qwen3.5-4B shape on the GPU, and
save the picks as the per-GPU table `_config_for` loads first (`data/results/kernel_tune_h200.json`). The kernel
benchmark's picks (`kernels_h200.json`, loaded after it) cover only the unfused linears, so without this table the
engine's fused shapes run on the heuristic default config.

Per shape it records the µs of the config the engine used before (table or default) and of the tuned one, both from
`tune`'s timing (`_bench`: CUDA graph, L2 flushed), and the per-step sums weighted by how often the engine calls each
shape — a prediction to check against the next latency run, not a latency result.

    python scripts/tune_engine_shapes.py --out $OUT      # on the GPU
    DEV=cpu TINY=1 TRITON_INTERPRET=1 python scripts/tune_engine_shapes.py   # dry run (tiny shapes, interpreter, no timing)
"""
import argparse, os, time
from collections import Counter
import torch

DEV = os.environ.get('DEV', 'cuda'); TINY = bool(os.environ.get('TINY'))

def main():
    ap = argparse.ArgumentParser(); ap.add_argument('--out', default=None); ap.add_argument('--rep', type=int, default=3)
    ap.add_argument('--deadline', type=float, default=400.0)
    a = ap.parse_args(); t0 = time.time()
    import effqwen.kernels as K
    from effqwen.engine import Engine
    if TINY:
        from effqwen.model import tiny_qwen35
        m, group = tiny_qwen35(0), 32
    else:
        from effqwen.model import load_target
        m, group = load_target('qwen3.5-4b', device=DEV, dtype='bfloat16')[0], 128
    eng = Engine(m, max_seq_len=256, convert=lambda l: K.W4A16Linear.from_float(l, group_size=group))
    mods = [mm for mm in eng.linears(head=False) if isinstance(mm, K.W4A16Linear)]
    count = Counter((mm.out_features, mm.in_features) for mm in mods)
    by_shape = {(mm.out_features, mm.in_features): mm for mm in mods}
    rows = []
    for (N, Kd), n in sorted(count.items()):
        mm = by_shape[(N, Kd)]
        for M in (1, 16):
            if time.time() - t0 > a.deadline: rows.append(dict(N=N, K=Kd, M=M, skipped='deadline')); continue
            x = torch.randn(M, Kd, device=DEV, dtype=torch.bfloat16)
            before = K._config_for('w4a16', M, N, Kd, group, x.dtype, x.device, None, kl=True)   # what the engine ran
            if DEV == 'cuda':
                t_before = K._bench(lambda: K.w4a16_matmul(x, mm.weight_packed, mm.weight_scale, config=before, kernel_layout=True), a.rep)
                best, times, errs = K.tune('w4a16', x, mm.weight_packed, mm.weight_scale, rep=a.rep, kernel_layout=True)
                rows.append(dict(N=N, K=Kd, M=M, calls_per_step=n, before=before.__dict__, before_us=t_before, best=best.__dict__,
                                 best_us=times[best], candidates=len(times), max_rel_err=max(errs.values())))
            else:   # dry run: check the picked config computes the right thing, no timing
                err = K.rel_error(K.w4a16_matmul(x.float(), mm.weight_packed, mm.weight_scale, config=before, kernel_layout=True),
                                  K.w4a16_mm_ref(x.float(), mm.weight_packed, mm.weight_scale, kernel_layout=True))
                rows.append(dict(N=N, K=Kd, M=M, calls_per_step=n, before=before.__dict__, rel_err=float(err)))
            print(rows[-1] if DEV != 'cuda' else f"{N}x{Kd} M={M} x{n}: {rows[-1]['before_us']:.1f} -> {rows[-1]['best_us']:.1f} us {rows[-1]['best']}", flush=True)
    # prefill (M > 64): the weight is dequantized to bf16 for cuBLAS; time the dequantize kernel alone per block config
    # (the matmul after it is the same cuBLAS call whatever the config) and keep the fastest for the M > 64 bucket
    dq = [(4, 512, 2), (4, 512, 4), (4, 1024, 4), (2, 1024, 4), (8, 512, 4), (16, 512, 4), (8, 1024, 4), (16, 1024, 8)]   # (the v2 kernel's fast region)
    for (N, Kd), n in sorted(count.items()):
        mm, M = by_shape[(N, Kd)], 8192
        if time.time() - t0 > a.deadline: rows.append(dict(N=N, K=Kd, M=M, skipped='deadline')); continue
        before = K._config_for('w4a16', M, N, Kd, group, torch.bfloat16, torch.device(DEV), None, kl=True)
        deq = lambda c: K.w4a16_dequantize_triton(mm.weight_packed, mm.weight_scale, torch.bfloat16, c.block_n, c.block_k, True, c.num_warps)
        ref, times = deq(before), {}
        for bn, bk, nw in dq:
            c = K.KernelConfig('dequant', bn, bk, 1, nw, 1)
            if not torch.equal(deq(c), ref): raise RuntimeError(f'dequantize {c} differs from {before} at {N}x{Kd}')   # exact: same products
            times[c] = K._bench(lambda: deq(c), a.rep) if DEV == 'cuda' else 0.0
        best = min(times, key=times.get)
        if DEV == 'cuda': K._TUNED[('w4a16', True, K._m_bucket(M), N, Kd, group, str(torch.bfloat16))] = best
        t_before = times[before] if before in times else K._bench(lambda: deq(before), a.rep) if DEV == 'cuda' else 0.0
        rows.append(dict(N=N, K=Kd, M=M, calls_per_step=n, before=before.__dict__, before_us=t_before,
                         best=best.__dict__, best_us=times[best], candidates=len(times), what='dequantize kernel only (prefill)'))
        print(f"{N}x{Kd} prefill dequant x{n}: {rows[-1]['before_us']:.1f} -> {rows[-1]['best_us']:.1f} us {rows[-1]['best']}", flush=True)
    step = {f'M{M}': {k: sum(r[k] * r['calls_per_step'] for r in rows if r.get('M') == M and k in r) for k in ('before_us', 'best_us')} for M in (1, 16, 8192)}
    doc = dict(shape='tiny-qwen3.5' if TINY else 'qwen3.5-4b', group=group, shapes=rows, per_step_linears_us=step,
               rows=K.tuned_rows({k: v for k, v in K._TUNED.items() if (k[3], k[4]) in count}),   # the engine's shapes only (not the autoloaded benchmark picks)
               wall_s=time.time() - t0, device=torch.cuda.get_device_name() if DEV == 'cuda' else 'cpu (dry run)')
    print('per step (sum over the engine\'s W4A16 linears, us):', step)
    from effqwen.core import write_result
    if a.out: os.environ['EFFQWEN_OUT'] = a.out
    print(write_result('kernel_tune_h200' if not TINY else 'kernel_tune_dryrun', doc, 'gpu', device=DEV))

if __name__ == '__main__': main()
