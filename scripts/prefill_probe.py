"""Exploratory probe of the W4A16 engine's prefill at the Qwen3.5-4B shape (random weights) on the GPU: the whole
kernel list of one 8192-token prefill (torch.profiler), the host-side ops of a short (64-token) prefill, and
micro-benchmarks of the prefill's own kernels in their variants (q/k/v prep rows per program, conv kernel's
region-aligned stores and tile, dequantize tiles) at the engine's shapes, each checked against the configuration in use,
and flash-linear-attention's recurrent vs chunk rule on short prompts. Writes `prefill_probe_h200.json`; a diagnostic for choosing defaults, not a result table.

    python scripts/prefill_probe.py --out $OUT
"""
import argparse, json, os, statistics, time
from collections import defaultdict
import torch
from triton.testing import do_bench


def us(fn, rep=200):
    return do_bench(fn, warmup=25, rep=rep, return_mode='median') * 1e3


def kernel_list(fn, n=1):
    from torch.profiler import profile, ProfilerActivity
    fn(); torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(n): fn()
        torch.cuda.synchronize()
    k = defaultdict(lambda: [0.0, 0])
    for e in p.events():
        if e.device_type == torch.autograd.DeviceType.CUDA: k[e.name[:100]][0] += e.device_time / n; k[e.name[:100]][1] += 1 / n
    return sorted([dict(name=a, us=round(b[0], 1), count=round(b[1], 2)) for a, b in k.items()], key=lambda r: -r['us'])


def host_ops(fn, top=30):
    from torch.profiler import profile, ProfilerActivity
    fn(); torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU]) as p:
        fn(); torch.cuda.synchronize()
    rows = sorted(p.key_averages(), key=lambda e: -e.self_cpu_time_total)[:top]
    return [dict(op=e.key[:80], self_us=round(e.self_cpu_time_total, 1), count=e.count) for e in rows]


def wall_ms(fn, n=5):
    fn(); torch.cuda.synchronize(); ts = []
    for _ in range(n):
        t = time.perf_counter(); fn(); torch.cuda.synchronize(); ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser(); ap.add_argument('--out', default=None); a = ap.parse_args(); t0 = time.time()
    import effqwen.engine as E, effqwen.kernels as K
    from effqwen.engine import Engine, reference_drafter_config
    from effqwen.model import load_target
    res = dict(micro={})
    dev, bf = 'cuda', torch.bfloat16
    # --- micro: the kernel-layout dequantize (`_w4a16_dequant_kl_kernel`) at the engine's shapes, its default config and
    # the (rows, columns, warps) candidates it was chosen from; every config must give torch's dequantized weight exactly
    cands = ((16, 512, 4), (8, 512, 4), (32, 256, 4), (16, 1024, 8), (32, 512, 8), (64, 256, 8), (8, 1024, 4), (4, 1024, 4),
             (4, 512, 4), (2, 1024, 4), (2, 512, 4), (4, 512, 2))
    dq = {}
    for N, Kd in ((2560, 4096), (2560, 9216), (10240, 2560), (12352, 2560), (18432, 2560)):
        lin = K.W4A16Linear.from_float(torch.nn.Linear(Kd, N, bias=False, device=dev, dtype=bf), group_size=128)
        wp, ws, ref = lin.weight_packed, lin.weight_scale, lin.dequantize(bf)
        c = K._config_for('w4a16', 8192, N, Kd, 128, bf, wp.device, None, kl=True)
        row = dict(default=f'{c.block_n}x{c.block_k}w{c.num_warps}', bytes=N * Kd * 2 + N * Kd // 2 + N * Kd // 128 * 2)
        for bn, bk, nw in cands:
            if Kd % bk: continue
            f = lambda: K.w4a16_dequantize_triton(wp, ws, bf, bn, bk, True, nw)
            row[f'{bn}x{bk}w{nw}'] = us(f) if torch.equal(f(), ref) else 'mismatch'
        dq[f'{N}x{Kd}'] = row; print('dequant', N, Kd, row, flush=True)
    res['micro']['dequant_library'] = dq
    # --- the engine
    m = load_target('qwen3.5-4b', device=dev, dtype='bfloat16')[0]
    cfg = reference_drafter_config(m)
    torch.manual_seed(0)
    P = 8192
    eng = Engine(m, max_seq_len=P + 64, tap_layers=cfg.target_layer_ids, block_size=cfg.block_size,
                 convert=lambda l: K.W4A16Linear.from_float(l, group_size=128))
    ids = torch.randint(0, 1000, (1, P), device=dev)
    # --- micro: attn prep and conv at the engine's shapes, on this prompt's projections
    L0 = next(L for L in eng.layers if L.kind != 'linear_attention'); Lg = next(L for L in eng.layers if L.kind == 'linear_attention')
    h = torch.randn(P, m.config.hidden_size, device=dev, dtype=bf) * 0.1
    with torch.no_grad():
        pa, pg = L0.proj(h), Lg.proj(h)
    pos = torch.zeros(1, dtype=torch.long, device=dev)
    ap_rows, refq, bt_own = {}, None, E.ATTN_PREP_BT
    for bt in (1, 4, 8, 16, 32):
        E.ATTN_PREP_BT = bt
        f = lambda: E.fused_attn_prep(pa, eng.cos, eng.sin, pos, L0.qn_w, L0.kn_w, L0.kc, L0.vc, eng.attn_dims)
        q = f().clone(); refq = q if refq is None else refq
        d = (q.float() - refq.float()).abs()
        ap_rows[f'bt{bt}'] = dict(us=us(f), differing=float((d > 0).float().mean()), max_abs=float(d.max()), max_rel=float((d / refq.float().abs().clamp_min(1e-3)).max()))
    E.ATTN_PREP_BT = bt_own
    res['micro']['attn_prep'] = ap_rows; print('attn_prep', ap_rows, flush=True)
    cv, refy = {}, None
    C, Kd_, Vd, Hk, Hv, Dk, Dv, eps = eng.gdn_dims
    KC = Lg.conv_buf.shape[1]
    for bt, nw, al in ((32, 4, False), (32, 4, True), (16, 4, True), (64, 4, True), (64, 8, True), (128, 8, True), (32, 2, True)):
        qkv = pg.new_empty(2 * P * Kd_ + P * Vd)
        f = lambda: E._conv_prefill_kernel[(-(-P // bt), -(-C // Dk))](pg, Lg.conv_w, qkv, P, C, Kd_, Vd, pg.shape[1], KC=KC, BT=bt, BC=Dk,
                                                                                     QKNORM=True, ALIGNED=al, num_warps=nw)
        f(); refy = qkv.clone() if refy is None else refy
        cv[f'bt{bt}w{nw}{"a" if al else ""}'] = us(f) if torch.equal(qkv, refy) else 'mismatch'
    res['micro']['conv'] = cv; print('conv', cv, flush=True)
    # --- prefill wall, kernel list, short prefill's host ops
    res['prefill_8192_ms'] = wall_ms(lambda: eng.prefill(ids)); print('prefill 8192', res['prefill_8192_ms'], flush=True)
    # (a module flag changes what a prefill records: the recorded graphs are dropped around each change)
    E.ATTN_PREP_BT = 1; eng.drop_prefill_graphs(); res['prefill_8192_ms_bt1'] = wall_ms(lambda: eng.prefill(ids))
    E.ATTN_PREP_BT = bt_own; eng.drop_prefill_graphs()
    print('prefill 8192 bt1', res['prefill_8192_ms_bt1'], flush=True)
    res['prefill_kernels'] = kernel_list(lambda: eng.prefill(ids))
    print('kernel sum', sum(r['us'] for r in res['prefill_kernels']), flush=True)
    for s in (64, 512, 2048):
        ids_s = ids[:, :s]
        res[f'prefill_{s}_ms'] = wall_ms(lambda: eng.prefill(ids_s))
        res[f'prefill_{s}_gpu_us'] = sum(r['us'] for r in kernel_list(lambda: eng.prefill(ids_s)))
        print('prefill', s, res[f'prefill_{s}_ms'], 'ms wall', res[f'prefill_{s}_gpu_us'], 'us gpu', flush=True)
    rr, rec_own = {}, E.GDN_PREFILL_RECURRENT_MAX
    for s_ in (16, 64, 256, 512):
        ids_s = ids[:, :s_]; row = {}
        for mx in (0, 1 << 20):
            E.GDN_PREFILL_RECURRENT_MAX = mx; eng.drop_prefill_graphs()
            lg = eng.prefill(ids_s).float().clone()
            row[f'max{mx}'] = dict(wall_ms=wall_ms(lambda: eng.prefill(ids_s)), gpu_us=sum(r['us'] for r in kernel_list(lambda: eng.prefill(ids_s))))
            row[f'max{mx}']['logits'] = lg
        a_, b_ = row['max0'].pop('logits'), row[f'max{1 << 20}'].pop('logits')
        row['rel_err_recurrent_vs_chunk'] = float((a_ - b_).norm() / a_.norm()); row['same_argmax'] = bool(a_.argmax() == b_.argmax())
        rr[s_] = row; print('gdn rule', s_, row, flush=True)
    E.GDN_PREFILL_RECURRENT_MAX = rec_own; eng.drop_prefill_graphs()
    res['gdn_recurrent_vs_chunk'] = rr
    import cProfile, pstats, io
    eng.prefill(ids[:, :64]); torch.cuda.synchronize()
    pr = cProfile.Profile(); pr.enable(); eng.prefill(ids[:, :64]); torch.cuda.synchronize(); pr.disable()
    st = io.StringIO(); pstats.Stats(pr, stream=st).sort_stats('tottime').print_stats(25); res['prefill_64_cprofile'] = st.getvalue()[-6000:]
    print(st.getvalue()[-4000:], flush=True)
    res['prefill_64_host'] = host_ops(lambda: eng.prefill(ids[:, :64]))
    for r in res['prefill_64_host'][:15]: print(r, flush=True)
    res['wall_s'] = time.time() - t0
    from effqwen.core import write_result
    if a.out: os.environ['EFFQWEN_OUT'] = a.out
    print(write_result('prefill_probe_h200', res, 'gpu', device=dev))


if __name__ == '__main__': main()
