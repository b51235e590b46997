#!/usr/bin/env python3
"""Issue 7 kernel sweep: candidate W4A16 / BCQ mat-vec kernels against the current ones, cuBLAS bf16 and tinygemm.

GPU:  PYTHONPATH=. python3 scripts/kernel_sweep.py --out $OUT [--budget 190]           (exploration, last round's list)
      PYTHONPATH=. python3 scripts/kernel_sweep.py --out $OUT --final                   (validation of the library dispatch)
CPU:  PYTHONPATH=. python3 scripts/kernel_sweep.py --cpu      (TRITON_INTERPRET=1, tiny shapes, correctness only)

Every candidate is checked against the dequantized float32 reference (marlin's mean relative error < 1e-3) before
it is timed; timing is `effqwen.kernels._bench` (CUDA-graph replay of 10 x (256 MB L2 flush, call) minus the
flushes; median). Candidates are compiled (and checked) in parallel worker processes first, so the main process
only times. Results go to `<out>/kernel_sweep.json`, rewritten after every shape.

History (rounds 1-4 collected in data/results/kernel_sweep_h200.json, round 5 in kernel_sweep_lut_h200.json): run1 timed `_w4_mv_v2` with 1-10 unrolled tiles and 16-byte
activation loads, the mantissa-trick BCQ kernel `_bcq_mv_v2` and wider `mv`/`tc` config grids; run2 the tiled
weight layout (`to_blocked`, `_w4_tc_v3`) and the load-only floors with / without the split-K reduction; run3 the
prefetching loop (`TILES == 0`) with whole rows per program and small-row tensor-core configs (the `candidates`
list below); run4 (`--final`) the library's `mv2` dispatch. Earlier rounds' candidate lists were replaced by later
ones; their kernels are kept here. Round 6 (`--only _T`: the transposed (K/8, N) weight layout `_w4_mvT`, every
4B M = 1 shape, with load-only floors; 6b `--only _Ts` (4-8 rows per program), 6c `--only _C,_Ts` (chunks loaded
first, `_w4_mvC`), 6d `--only _R,_C` (the same chunking on the row-major layout, `_w4_mvR`); all in
data/results/kernel_sweep_t_h200.json, whose rounds 7a-7d ran this script from branch tiled-layout-wip):
      PYTHONPATH=. python3 scripts/kernel_sweep.py --out $OUT --only _T --budget 420
Round 5 (`--only lut`: M = 1 only, the LUT-GEMM BCQ kernels `_bcq_lut` /
`_bcq_lut_smem` next to the baselines, plus `lut_checks` at Q = 2..4, groups 64/128 on the GPU):
      PYTHONPATH=. python3 scripts/kernel_sweep.py --out $OUT --only lut --budget 170
"""
import argparse, json, os, sys, time, traceback
import torch

CPU = not torch.cuda.is_available()
if CPU: os.environ.setdefault('TRITON_INTERPRET', '1')
import triton, triton.language as tl
import torch.nn.functional as F
from effqwen import kernels as Kn
from effqwen.kernels import _w4_mv_tile, _w4_pair, _splitk_epilogue, _k_range, _w4_codes, KernelConfig
from effqwen.core import rel_error

INTERP = os.environ.get('TRITON_INTERPRET', '0') == '1'

# ----------------------------------------------------------------------------------------------------------------
# candidate kernels

@triton.jit
def _xs(ptr, E: tl.constexpr, XBF16: tl.constexpr):
    "Unmasked activation load times 2**E as float32 (bf16: bits shifted up plus E in the exponent, one IMAD)."
    if XBF16: return ((tl.load(ptr).to(tl.int16, bitcast=True).to(tl.int32) << 16) + (E << 23)).to(tl.float32, bitcast=True)
    else: return tl.load(ptr).to(tl.float32) * (2.0 ** E)

@triton.jit
def _xsc(v, E: tl.constexpr, XBF16: tl.constexpr):
    "Already-loaded activations (int32 raw fp32 bits if XBF16 else float32) times 2**E."
    if XBF16: return (v + (E << 23)).to(tl.float32, bitcast=True)
    else: return v * (2.0 ** E)

@triton.jit
def _ld(w_rows, s_rows, x_ptr, t, nmask, rw, sg, GROUP: tl.constexpr, BLOCK_K: tl.constexpr, WPG: tl.constexpr,
        XBF16: tl.constexpr, EVEN_N: tl.constexpr):
    "Tile t's words, scales and pre-scaled activations (standard layout)."
    wp = w_rows + (t * (BLOCK_K // 8) + rw)[None, :, :]
    sp = s_rows + ((t * BLOCK_K + sg * (WPG * 8)) // GROUP)[None, :]
    if EVEN_N:
        w = tl.load(wp, eviction_policy='evict_first'); s = tl.load(sp)
    else:
        w = tl.load(wp, mask=nmask[:, None, None], other=0, eviction_policy='evict_first')
        s = tl.load(sp, mask=nmask[:, None], other=0.0)
    xb = x_ptr + t * BLOCK_K + rw * 8
    return (w, s, _xs(xb + 0, 8, XBF16), _xs(xb + 2, 4, XBF16), _xs(xb + 4, 8, XBF16), _xs(xb + 6, 4, XBF16),
            _xs(xb + 1, 8, XBF16), _xs(xb + 3, 4, XBF16), _xs(xb + 5, 8, XBF16), _xs(xb + 7, 4, XBF16))

@triton.jit
def _w4_mv_v2(
    x_ptr, w_ptr, s_ptr, y_ptr, ws_ptr, lock_ptr,
    N, K, KW, SPLIT_K, MLO, MHI, ONE,
    GROUP: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, G: tl.constexpr, WPG: tl.constexpr,
    TILES: tl.constexpr,     # K tiles per program, unrolled (split = K tiles / TILES exactly)
    XBF16: tl.constexpr, EVEN_N: tl.constexpr,
    XVEC: tl.constexpr,      # activations as one 16-byte load per word column, split in registers
    LOADONLY: tl.constexpr,  # diagnostic: same loads, trivial compute (result is garbage)
    BLOCKED: tl.constexpr = False,  # weight in the tiled layout [N/BLOCK_N][K/BLOCK_K][BLOCK_N][BLOCK_K/8]
    EPI: tl.constexpr = True,       # False (diagnostic): store the partial, no split-K reduction
    PREFETCH: tl.constexpr = False, # with TILES == 0: register double-buffering
):
    pid = tl.program_id(0)
    pid_n, pid_k = pid // SPLIT_K, pid % SPLIT_K
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N); nmask = rn < N
    rw = tl.arange(0, G)[:, None] * WPG + tl.arange(0, WPG)[None, :]
    sg = tl.arange(0, G)
    if BLOCKED: w_rows = w_ptr + pid_n.to(tl.int64) * BLOCK_N * KW + tl.arange(0, BLOCK_N)[:, None, None] * (BLOCK_K // 8)
    else: w_rows = w_ptr + rn[:, None, None].to(tl.int64) * KW
    s_rows = s_ptr + rn[:, None].to(tl.int64) * (K // GROUP)
    acc = tl.zeros((BLOCK_N, G, WPG), dtype=tl.float32)
    if TILES == 0:   # runtime loop over this split's K tiles; PREFETCH: the next tile's loads are issued before this one's math
        t0, t1 = _k_range(pid_k, K, SPLIT_K, BLOCK_K)
        w, s, xe0, xo0, xe1, xo1, xe2, xo2, xe3, xo3 = _ld(w_rows, s_rows, x_ptr, t0, nmask, rw, sg, GROUP, BLOCK_K, WPG, XBF16, EVEN_N)
        for t in range(t0, t1):
            if PREFETCH:
                tn = tl.minimum(t + 1, t1 - 1)
                wn, sn, ye0, yo0, ye1, yo1, ye2, yo2, ye3, yo3 = _ld(w_rows, s_rows, x_ptr, tn, nmask, rw, sg, GROUP, BLOCK_K, WPG, XBF16, EVEN_N)
                acc = _w4_mv_tile(acc, w, s, xe0, xo0, xe1, xo1, xe2, xo2, xe3, xo3, MLO, MHI, ONE)
                w, s, xe0, xo0, xe1, xo1, xe2, xo2, xe3, xo3 = wn, sn, ye0, yo0, ye1, yo1, ye2, yo2, ye3, yo3
            else:
                w, s, xe0, xo0, xe1, xo1, xe2, xo2, xe3, xo3 = _ld(w_rows, s_rows, x_ptr, t, nmask, rw, sg, GROUP, BLOCK_K, WPG, XBF16, EVEN_N)
                acc = _w4_mv_tile(acc, w, s, xe0, xo0, xe1, xo1, xe2, xo2, xe3, xo3, MLO, MHI, ONE)
    for i in tl.static_range(TILES):
        t = pid_k * TILES + i
        if BLOCKED: wp = w_rows + (t * (BLOCK_N * BLOCK_K // 8) + rw)[None, :, :]
        else: wp = w_rows + (t * (BLOCK_K // 8) + rw)[None, :, :]
        sp = s_rows + ((t * BLOCK_K + sg * (WPG * 8)) // GROUP)[None, :]
        if EVEN_N:
            w = tl.load(wp, eviction_policy='evict_first'); s = tl.load(sp)
        else:
            w = tl.load(wp, mask=nmask[:, None, None], other=0, eviction_policy='evict_first')
            s = tl.load(sp, mask=nmask[:, None], other=0.0)
        if LOADONLY:
            acc += ((w & 0x7FFF) | ONE).to(tl.float32, bitcast=True) * s.to(tl.float32)[:, :, None]
        else:
            xb = x_ptr + t * BLOCK_K + rw * 8
            if XVEC:
                xv = tl.load(xb[:, :, None] + tl.arange(0, 8)[None, None, :])          # (G, WPG, 8)
                if XBF16: xv = xv.to(tl.int16, bitcast=True).to(tl.int32) << 16
                else: xv = xv.to(tl.float32)
                ev, od = tl.split(tl.reshape(xv, (G, WPG, 4, 2)))                       # cols 0,2,4,6 / 1,3,5,7
                e04, e26 = tl.split(tl.reshape(ev, (G, WPG, 2, 2)))
                o15, o37 = tl.split(tl.reshape(od, (G, WPG, 2, 2)))
                x0, x4 = tl.split(e04); x2, x6 = tl.split(e26); x1, x5 = tl.split(o15); x3, x7 = tl.split(o37)
                xe0 = _xsc(x0, 8, XBF16); xo0 = _xsc(x2, 4, XBF16); xe1 = _xsc(x4, 8, XBF16); xo1 = _xsc(x6, 4, XBF16)
                xe2 = _xsc(x1, 8, XBF16); xo2 = _xsc(x3, 4, XBF16); xe3 = _xsc(x5, 8, XBF16); xo3 = _xsc(x7, 4, XBF16)
            else:
                xe0 = _xs(xb + 0, 8, XBF16); xo0 = _xs(xb + 2, 4, XBF16)
                xe1 = _xs(xb + 4, 8, XBF16); xo1 = _xs(xb + 6, 4, XBF16)
                xe2 = _xs(xb + 1, 8, XBF16); xo2 = _xs(xb + 3, 4, XBF16)
                xe3 = _xs(xb + 5, 8, XBF16); xo3 = _xs(xb + 7, 4, XBF16)
            acc = _w4_mv_tile(acc, w, s, xe0, xo0, xe1, xo1, xe2, xo2, xe3, xo3, MLO, MHI, ONE)
    if EPI: _splitk_epilogue(tl.sum(tl.sum(acc, axis=2), axis=1), y_ptr, ws_ptr, lock_ptr, rn, nmask, pid_n, pid_k, N, SPLIT_K)
    else: tl.store(ws_ptr + pid_k * N + rn, tl.sum(tl.sum(acc, axis=2), axis=1), mask=nmask)


@triton.jit
def _w4_tc_v3(
    x_ptr, w_ptr, s_ptr, y_ptr, ws_ptr, lock_ptr, M, N, K, KW, SPLIT_K,
    GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    ASM: tl.constexpr, F16: tl.constexpr, DOT_F32: tl.constexpr,
    STAGES: tl.constexpr,
):
    "The tensor-core kernel on the tiled layout [N/BLOCK_N][K/BLOCK_K][BLOCK_N][BLOCK_K/8] (N % BLOCK_N == 0)."
    pid_n, pid_k, pid_m = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N); nmask = rn < N
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M); mmask = rm < M
    rk = tl.arange(0, BLOCK_K)
    if ASM: wc = tl.arange(0, BLOCK_K // 8)
    else: wc = tl.arange(0, BLOCK_K) // 8   # the interpreter's unpacking wants one word per column
    tile0 = w_ptr + pid_n.to(tl.int64) * BLOCK_N * KW + tl.arange(0, BLOCK_N)[:, None] * (BLOCK_K // 8) + wc[None, :]
    s_rows = s_ptr + rn.to(tl.int64) * (K // GROUP)
    x_cols = x_ptr + rm[None, :].to(tl.int64) * K
    t0, t1 = _k_range(pid_k, K, SPLIT_K, BLOCK_K)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for t in tl.range(t0, t1, num_stages=STAGES):
        k0 = t * BLOCK_K
        w = tl.load(tile0 + t * (BLOCK_N * BLOCK_K // 8))
        xt = tl.load(x_cols + (k0 + rk)[:, None], mask=mmask[None, :], other=0.0)
        s = tl.load(s_rows + k0 // GROUP).to(tl.float32)
        c = _w4_codes(w, BLOCK_N, BLOCK_K, ASM, F16)
        if DOT_F32: part = tl.dot(c.to(tl.float32), xt.to(tl.float32), input_precision='ieee')
        else: part = tl.dot(c, xt)
        acc += s[:, None] * part
    offs = rm[None, :] * N + rn[:, None]
    _splitk_epilogue(acc, y_ptr, ws_ptr, lock_ptr, offs, nmask[:, None] & mmask[None, :],
                     pid_m * tl.num_programs(0) + pid_n, pid_k, M * N, SPLIT_K)


def to_blocked(w, bn, bk):
    "(N, K/8) words -> tiled [N/bn][K/bk][bn][bk/8], flattened back to (N, K/8)."
    N, KW = w.shape
    return w.view(N // bn, bn, KW // (bk // 8), bk // 8).permute(0, 2, 1, 3).contiguous().view(N, KW)


@triton.jit
def _bit_fma(v, p: tl.constexpr, xsc, acc, ONE):
    "acc + (1 + bit·2**(p-23))·x' : one LOP3 and one FFMA per bit (x' = x·2**(23-p), so the product is x' + bit·x)."
    return tl.fma(((v & (1 << p)) | ONE).to(tl.float32, bitcast=True), xsc, acc)

@triton.jit
def _plane_load(b_ptr, a_ptr, r, bo, ao, nmask, KW, K, GROUP: tl.constexpr, EVEN_N: tl.constexpr):
    "One plane's sign words (rows r, word offsets bo) and alphas (group offsets ao); unmasked when N fills the blocks."
    if EVEN_N:
        b = tl.load(b_ptr + r[:, None, None] * KW + bo, eviction_policy='evict_first')
        al = tl.load(a_ptr + r[:, None] * (K // GROUP) + ao)
    else:
        b = tl.load(b_ptr + r[:, None, None] * KW + bo, mask=nmask[:, None, None], other=0, eviction_policy='evict_first')
        al = tl.load(a_ptr + r[:, None] * (K // GROUP) + ao, mask=nmask[:, None], other=0.0)
    return b, al

@triton.jit
def _bcq_mv_v2(
    x_ptr, b_ptr, a_ptr, y_ptr, ws_ptr, lock_ptr,
    N, K, KW, SPLIT_K, ONE,
    Q: tl.constexpr,         # planes, 1..4
    GROUP: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, G: tl.constexpr, WPG: tl.constexpr,
    TILES: tl.constexpr, XBF16: tl.constexpr, EVEN_N: tl.constexpr,
):
    "BCQ mat-vec, mantissa trick: Σ_{bit set} x via one LOP3 + one FFMA per bit and plane (kernel layout: bit i+16e = column 2i+e)."
    pid = tl.program_id(0)
    pid_n, pid_k = pid // SPLIT_K, pid % SPLIT_K
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N); nmask = rn < N
    rw = tl.arange(0, G)[:, None] * WPG + tl.arange(0, WPG)[None, :]
    sg = tl.arange(0, G)
    acc = tl.zeros((BLOCK_N, G, WPG), dtype=tl.float32)
    for i in tl.static_range(TILES):
        t = pid_k * TILES + i
        r0 = rn.to(tl.int64)
        bo = (t * (BLOCK_K // 32) + rw)[None, :, :]
        ao = ((t * BLOCK_K + sg * (WPG * 32)) // GROUP)[None, :]
        b0, al0 = _plane_load(b_ptr, a_ptr, r0, bo, ao, nmask, KW, K, GROUP, EVEN_N)
        if Q > 1: b1, al1 = _plane_load(b_ptr, a_ptr, r0 + N, bo, ao, nmask, KW, K, GROUP, EVEN_N)
        if Q > 2: b2, al2 = _plane_load(b_ptr, a_ptr, r0 + 2 * N, bo, ao, nmask, KW, K, GROUP, EVEN_N)
        if Q > 3: b3, al3 = _plane_load(b_ptr, a_ptr, r0 + 3 * N, bo, ao, nmask, KW, K, GROUP, EVEN_N)
        xb = x_ptr + t * BLOCK_K + rw * 32
        xs = tl.zeros((G, WPG), dtype=tl.float32)    # Σ x
        xsc = tl.zeros((G, WPG), dtype=tl.float32)   # Σ x' (what the FFMAs add on top of the bit sums)
        s0 = tl.zeros((BLOCK_N, G, WPG), dtype=tl.float32)
        s1 = tl.zeros((BLOCK_N, G, WPG), dtype=tl.float32)
        s2 = tl.zeros((BLOCK_N, G, WPG), dtype=tl.float32)
        s3 = tl.zeros((BLOCK_N, G, WPG), dtype=tl.float32)
        for r in tl.static_range(4):            # shift group r holds word bits 8r .. 8r+7 at mantissa bits 15..22
            if r == 0:
                v0 = b0 << 15
                if Q > 1: v1 = b1 << 15
                if Q > 2: v2 = b2 << 15
                if Q > 3: v3 = b3 << 15
            elif r == 1:
                v0 = b0 << 7
                if Q > 1: v1 = b1 << 7
                if Q > 2: v2 = b2 << 7
                if Q > 3: v3 = b3 << 7
            elif r == 2:
                v0 = b0 >> 1
                if Q > 1: v1 = b1 >> 1
                if Q > 2: v2 = b2 >> 1
                if Q > 3: v3 = b3 >> 1
            else:
                v0 = b0 >> 9
                if Q > 1: v1 = b1 >> 9
                if Q > 2: v2 = b2 >> 9
                if Q > 3: v3 = b3 >> 9
            for j in tl.static_range(8):
                bi = 8 * r + j                    # word bit
                col = 2 * (bi % 16) + bi // 16    # its column
                xraw = tl.load(xb + col)
                if XBF16:
                    xbits = xraw.to(tl.int16, bitcast=True).to(tl.int32) << 16
                    xsj = (xbits + ((8 - j) << 23)).to(tl.float32, bitcast=True)
                    xs += xbits.to(tl.float32, bitcast=True)
                else:
                    xf = xraw.to(tl.float32)
                    xsj = xf * (2.0 ** (8 - j))
                    xs += xf
                xsc += xsj
                xq = xsj[None, :, :]
                s0 = _bit_fma(v0, 15 + j, xq, s0, ONE)
                if Q > 1: s1 = _bit_fma(v1, 15 + j, xq, s1, ONE)
                if Q > 2: s2 = _bit_fma(v2, 15 + j, xq, s2, ONE)
                if Q > 3: s3 = _bit_fma(v3, 15 + j, xq, s3, ONE)
        base = (2.0 * xsc + xs)[None, :, :]    # Σ±x = 2 Σ_{bit} x − Σ x = 2 (s − Σx') − Σx
        acc += (2.0 * s0 - base) * al0.to(tl.float32)[:, :, None]
        if Q > 1: acc += (2.0 * s1 - base) * al1.to(tl.float32)[:, :, None]
        if Q > 2: acc += (2.0 * s2 - base) * al2.to(tl.float32)[:, :, None]
        if Q > 3: acc += (2.0 * s3 - base) * al3.to(tl.float32)[:, :, None]
    _splitk_epilogue(tl.sum(tl.sum(acc, axis=2), axis=1), y_ptr, ws_ptr, lock_ptr, rn, nmask, pid_n, pid_k, N, SPLIT_K)


# LUT-GEMM-style BCQ (issue 7, round 5). The sign-select kernels above spend 2 instructions per weight bit and plane
# (LOP3 + FFMA, or bit test + predicated FADD). Here the MU activations that one MU-bit slice of a sign word covers
# are summed once per K tile in all 2**MU sign patterns (a table shared by every row and plane of the program); a
# slice then costs one extract (SHF + LOP3), one table read and one add: ~4-6 instructions per MU bits instead of
# 2·MU. sm_90 SASS of the main loops (Triton 3.6 and 3.9 compiled on the CPU, Q = 3, instructions per weight bit and
# plane): library `_bcq_mv_kernel` 2.65 (128x256) / 3.2 (32x512); global table + LDG (`_bcq_lut`, GLOBAL) 0.78 at
# MU = 8 and 1.59 at MU = 4 (128x128; a 64-bit pointer pair, LEA + LEA.HI.X, per lookup); Gluon shared-memory table
# (`_bcq_lut_smem`) 1.19 at MU = 4 and 0.82 at MU = 8 (256 rows); tl.gather on a register table 2.9-3.9 (shuffles).
# The table build (2**MU adds per slice) is amortised over BLOCK_N·Q lookups; at MU = 8 it is built once per call by
# `_bcq_lut_build` (a second, 20-program launch). Kernel layout: bit i + 16e of a word is column 2i + e, so slice p of word w holds columns
# 32w + 2((MU·p + j) % 16) + (MU·p + j) // 16, j < MU (bit j of the slice).

@triton.jit
def _lut_xcol(x_ptr, k0, wi, pi, j: tl.constexpr, MU: tl.constexpr):
    "float32 activation of bit j of slice (wi, pi) of the tile starting at column k0 (wi: (WT, 1, 1), pi: (1, FPW, 1))."
    bi = MU * pi + j
    return tl.load(x_ptr + k0 + 32 * wi + 2 * (bi % 16) + bi // 16).to(tl.float32)

@triton.jit
def _lut_pair(xa, xb):
    "(WT, FPW, 4) table of ±xa ± xb, entry c = 2·bit(xb) + bit(xa) (bit 1 = +)."
    c = tl.arange(0, 4)[None, None, :]
    return tl.where((c & 1) != 0, xa, -xa) + tl.where((c & 2) != 0, xb, -xb)

@triton.jit
def _lut_table(x_ptr, k0, wi, pi, WT: tl.constexpr, FPW: tl.constexpr, MU: tl.constexpr):
    "(WT, FPW, 2**MU) table: entry c of slice (w, p) = Σ_j (2·bit_j(c) − 1)·x[col(w, p, j)]; one add per entry (outer sums)."
    t2a = _lut_pair(_lut_xcol(x_ptr, k0, wi, pi, 0, MU), _lut_xcol(x_ptr, k0, wi, pi, 1, MU))
    t2b = _lut_pair(_lut_xcol(x_ptr, k0, wi, pi, 2, MU), _lut_xcol(x_ptr, k0, wi, pi, 3, MU))
    t4 = tl.reshape(t2b[:, :, :, None] + t2a[:, :, None, :], (WT, FPW, 16))          # c = 4·hi + lo
    if MU == 8:
        t2c = _lut_pair(_lut_xcol(x_ptr, k0, wi, pi, 4, MU), _lut_xcol(x_ptr, k0, wi, pi, 5, MU))
        t2d = _lut_pair(_lut_xcol(x_ptr, k0, wi, pi, 6, MU), _lut_xcol(x_ptr, k0, wi, pi, 7, MU))
        t4h = tl.reshape(t2d[:, :, :, None] + t2c[:, :, None, :], (WT, FPW, 16))
        return tl.reshape(t4h[:, :, :, None] + t4[:, :, None, :], (WT, FPW, 256))     # c = 16·hi + lo
    else:
        return t4

@triton.jit
def _bcq_lut(
    x_ptr, b_ptr, a_ptr, y_ptr, ws_ptr, lock_ptr, lut_ptr,
    N, K, KW, SPLIT_K,
    Q: tl.constexpr,        # planes (unrolled)
    MU: tl.constexpr,       # bits per table lookup: 4 or 8
    GROUP: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,  # columns per tile: multiple of 32 that divides GROUP (one α per row, plane and tile)
    GLOBAL: tl.constexpr,   # True: read the whole-K table that `_bcq_lut_build` wrote to lut_ptr (L1/L2-resident), one
                            # LDG per slice; False: build the tile's table in registers and look up with tl.gather
    STAGES: tl.constexpr,
):
    "BCQ mat-vec (M = 1), LUT-GEMM style: y[n] = Σ_q Σ_tiles α_q · Σ_slices T[slice, signs of the slice]."
    WT: tl.constexpr = BLOCK_K // 32       # words per row and tile
    FPW: tl.constexpr = 32 // MU           # slices per word
    NT: tl.constexpr = 1 << MU             # table entries per slice
    pid = tl.program_id(0)
    pid_n, pid_k = pid // SPLIT_K, pid % SPLIT_K
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N); nmask = rn < N
    t0, t1 = _k_range(pid_k, K, SPLIT_K, BLOCK_K)
    if GLOBAL:
        # (BLOCK_N, WT) words: the vectorised load gives each thread whole words (slices cut with constant shifts)
        # and puts the lanes of a warp on different rows of the same words, so one warp-wide table read touches one
        # slice's table (64 B at MU = 4: one L1 wavefront; 1 KB at MU = 8: up to 8). Per slice: extract (PRMT at
        # MU = 8, SHF + SGXT at 4), LEA + LEA.HI.X (table pointer), LDG, FADD; per word and plane one FFMA with α.
        wi = tl.arange(0, WT)[None, :]
        acc = tl.zeros((BLOCK_N, WT), dtype=tl.float32)
        for t in tl.range(t0, t1, num_stages=STAGES):
            k0 = t * BLOCK_K
            tb = lut_ptr + (k0 // MU + wi * FPW) * NT          # (1, WT) pointers to slice 0 of each word's tables
            for q in tl.static_range(Q):
                rows = (q * N + rn).to(tl.int64)
                b = tl.load(b_ptr + rows[:, None] * KW + (t * WT + wi), mask=nmask[:, None], other=0,
                            eviction_policy='evict_first')
                al = tl.load(a_ptr + rows * (K // GROUP) + k0 // GROUP, mask=nmask, other=0.0).to(tl.float32)
                s = tl.load(tb + (b & (NT - 1)), eviction_policy='evict_last')
                for p in tl.static_range(1, FPW):
                    s += tl.load(tb + (p * NT) + ((b >> (MU * p)) & (NT - 1)), eviction_policy='evict_last')
                acc += s * al[:, None]
        tot = tl.sum(acc, axis=1)
    else:
        # tl.gather on a (WT, FPW, 2**MU) register table: Triton 3.9 lowers it to warp shuffles (2 SHFL + selects per
        # lookup at MU = 4, hundreds at MU = 8: sm_90 SASS ~3.9 instructions per bit at MU = 4) -- kept for the record.
        wi = tl.arange(0, WT)[:, None, None]
        pi = tl.arange(0, FPW)[None, :, None]
        sh = pi * MU
        acc = tl.zeros((WT, FPW, BLOCK_N), dtype=tl.float32)
        for t in tl.range(t0, t1, num_stages=STAGES):
            k0 = t * BLOCK_K
            tab = _lut_table(x_ptr, k0, wi, pi, WT, FPW, MU)
            for q in tl.static_range(Q):
                rows = (q * N + rn).to(tl.int64)
                b = tl.load(b_ptr + rows[None, None, :] * KW + (t * WT + wi), mask=nmask[None, None, :], other=0,
                            eviction_policy='evict_first')                                   # (WT, 1, BLOCK_N)
                al = tl.load(a_ptr + rows * (K // GROUP) + k0 // GROUP, mask=nmask, other=0.0).to(tl.float32)
                acc += tl.gather(tab, (b >> sh) & (NT - 1), axis=2) * al[None, None, :]
        tot = tl.sum(tl.sum(acc, axis=1), axis=0)
    _splitk_epilogue(tot, y_ptr, ws_ptr, lock_ptr, rn, nmask, pid_n, pid_k, N, SPLIT_K)

@triton.jit
def _bcq_lut_build(x_ptr, lut_ptr, MU: tl.constexpr, BLOCK_K: tl.constexpr):
    "Whole-K table for `_bcq_lut(GLOBAL=True)`: slice s = k // MU at lut[s·2**MU : (s+1)·2**MU], one program per BLOCK_K columns."
    WT: tl.constexpr = BLOCK_K // 32
    FPW: tl.constexpr = 32 // MU
    NT: tl.constexpr = 1 << MU
    k0 = tl.program_id(0) * BLOCK_K
    wi = tl.arange(0, WT)[:, None, None]
    pi = tl.arange(0, FPW)[None, :, None]
    tab = _lut_table(x_ptr, k0, wi, pi, WT, FPW, MU)
    tl.store(lut_ptr + (k0 // MU + wi * FPW + pi) * NT + tl.arange(0, NT)[None, None, :], tab)


# LUT-GEMM BCQ with the tables in *shared memory*, through Gluon (written for the GPU machine's Triton 3.6: there
# shared memory has no element gather, and plain tl.gather is lowered to warp shuffles). gl.gather on a table whose
# entry axis is split across warps cannot be done with shuffles, so Triton's gather lowering stores the table to shared
# memory once per call and each lookup is one LDS at a 32-bit address: per slice one extract (SHF+LOP3, constant
# shift: each thread holds one row's words, all slices), ~1 address op, one LDS, one FADD: ~4-5 instructions per MU
# bits. The lanes of a warp take 32 rows of the same word, so at MU = 4 they read the same 16-entry table (16 banks:
# conflict-free); at MU = 8 a 256-entry table (random banks: ~3-4-way conflicts, traded for half the instructions).
# Each (tile, plane) re-stores the tile's tables (BLOCK_K / MU · 2**MU floats, loaded from `_bcq_lut_build`'s global
# table). GPU only: the interpreter does not run Gluon.
try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    _gl_barrier = gl.thread_barrier if hasattr(gl, 'thread_barrier') else gl.barrier
except ImportError:
    gluon = None

if gluon is not None:
    @gluon.jit
    def _bcq_lut_smem(
        lut_ptr, b_ptr, a_ptr, y_ptr, ws_ptr, lock_ptr, N, K, KW, SPLIT_K,
        Q: gl.constexpr, MU: gl.constexpr, GROUP: gl.constexpr, BLOCK_N: gl.constexpr,
        BLOCK_K: gl.constexpr,   # divides GROUP; BLOCK_K / MU <= 32
        NW: gl.constexpr,        # num_warps; BLOCK_N a multiple of 32 · NW
    ):
        "y = x W^T for BCQ at M = 1: SPLIT_K programs per BLOCK_N rows side by side; split-K reduction as `_splitk_epilogue`."
        WT: gl.constexpr = BLOCK_K // 32
        FPW: gl.constexpr = 32 // MU
        NT: gl.constexpr = 1 << MU
        L3: gl.constexpr = gl.BlockedLayout([WT, FPW, 1], [1, 1, 32], [1, 1, NW], [1, 0, 2])              # (WT, FPW, BLOCK_N)
        LS: gl.constexpr = gl.BlockedLayout([1, 1, 1], [WT, FPW, 32 // (WT * FPW)], [1, 1, NW], [2, 1, 0])  # (WT, FPW, NT)
        LW: gl.constexpr = gl.SliceLayout(1, L3)                                                           # (WT, BLOCK_N)
        pid_n, pid_k = gl.program_id(0) // SPLIT_K, gl.program_id(0) % SPLIT_K
        per = gl.cdiv(K // BLOCK_K, SPLIT_K)
        t0 = pid_k * per
        t1 = gl.minimum(t0 + per, K // BLOCK_K)
        rn = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, LW))
        nmask = rn < N
        wi = gl.arange(0, WT, layout=gl.SliceLayout(1, LW))
        sh = gl.arange(0, FPW, layout=gl.SliceLayout(0, gl.SliceLayout(2, L3))) * MU
        sw = gl.arange(0, WT, layout=gl.SliceLayout(1, gl.SliceLayout(2, LS)))
        sp = gl.arange(0, FPW, layout=gl.SliceLayout(0, gl.SliceLayout(2, LS)))
        sc = gl.arange(0, NT, layout=gl.SliceLayout(0, gl.SliceLayout(1, LS)))
        toff = (sw[:, None, None] * FPW + sp[None, :, None]) * NT + sc[None, None, :]
        acc = gl.zeros([WT, FPW, BLOCK_N], gl.float32, L3)
        for t in range(t0, t1):
            k0 = t * BLOCK_K
            tab = gl.load(lut_ptr + (k0 // MU) * NT + toff)
            for q in gl.static_range(Q):
                rows = (q * N + rn).to(gl.int64)
                b = gl.load(b_ptr + rows[None, :] * KW + (t * WT + wi)[:, None], mask=nmask[None, :], other=0,
                            eviction_policy='evict_first')
                al = gl.load(a_ptr + rows * (K // GROUP) + k0 // GROUP, mask=nmask, other=0.0).to(gl.float32)
                idx = (b[:, None, :] >> sh[None, :, None]) & (NT - 1)
                acc += gl.gather(tab, idx, 2) * al[None, None, :]
        tot = gl.sum(gl.sum(acc, axis=1), axis=0)
        if SPLIT_K == 1:
            gl.store(y_ptr + rn, tot.to(y_ptr.dtype.element_ty), mask=nmask)
        else:
            gl.store(ws_ptr + pid_k * N + rn, tot, mask=nmask)
            _gl_barrier()
            arrived = gl.atomic_add(lock_ptr + pid_n, 1, sem='acq_rel')
            if arrived == SPLIT_K - 1:   # the last program of this row block reduces
                tot = gl.zeros_like(tot)
                for sk in range(0, SPLIT_K):
                    tot += gl.load(ws_ptr + sk * N + rn, mask=nmask, other=0.0, cache_modifier='.cg')
                gl.store(y_ptr + rn, tot.to(y_ptr.dtype.element_ty), mask=nmask)
                gl.atomic_xchg(lock_ptr + pid_n, 0)

# Round 6: the transposed layout. The weight is stored (K/8, N): word kw of every row side by side, so the words a
# thread loads with one 16-byte load are four *rows* of the same eight columns and share their eight activations (the
# row-major kernels give each thread four words of one row: 32 different activations, loaded and converted per
# word). A program takes BLOCK_N rows and a K slice of KWA + KWB words (two power-of-two tiles: 2560 = 256 + 64 words,
# 9216 = 1024 + 128), issues every load of the slice first, then does the math; one cross-thread reduction at the end.
# TILED: [N/BLOCK_N][K/8][BLOCK_N], each program's slice contiguous in memory.

@triton.jit
def _w4T_load(w_ptr, s_ptr, kw0, rn, nmask, N, KW, base, RS,
              KWT: tl.constexpr, GROUP: tl.constexpr, EVEN_N: tl.constexpr, BLOCK_N: tl.constexpr):
    "Words (KWT, BLOCK_N) from word kw0 on, and their scales (KWT, BLOCK_N) (transposed scales (K/GROUP, N))."
    kw = kw0 + tl.arange(0, KWT)
    wp = w_ptr + base + kw[:, None].to(tl.int64) * RS + tl.arange(0, BLOCK_N)[None, :]
    sp = s_ptr + ((kw * 8) // GROUP)[:, None].to(tl.int64) * N + rn[None, :]
    if EVEN_N:
        w = tl.load(wp, eviction_policy='evict_first'); s = tl.load(sp)
    else:
        w = tl.load(wp, mask=nmask[None, :], other=0, eviction_policy='evict_first'); s = tl.load(sp, mask=nmask[None, :], other=0.0)
    return w, s

@triton.jit
def _xT8(x_ptr, kw0, KWT: tl.constexpr, XBF16: tl.constexpr):
    "The 8 pre-scaled activations of words kw0 .. kw0 + KWT, (KWT,) each, in the slot order of `_w4T_tile`."
    xb = x_ptr + (kw0 + tl.arange(0, KWT)) * 8
    return (_xs(xb + 0, 8, XBF16), _xs(xb + 2, 4, XBF16), _xs(xb + 4, 8, XBF16), _xs(xb + 6, 4, XBF16),
            _xs(xb + 1, 8, XBF16), _xs(xb + 3, 4, XBF16), _xs(xb + 5, 8, XBF16), _xs(xb + 7, 4, XBF16))

@triton.jit
def _w4T_tile(acc, w, s, xe0, xo0, xe1, xo1, xe2, xo2, xe3, xo3, MLO, MHI, ONE, LOADONLY: tl.constexpr):
    "acc (KWT, BLOCK_N) + code·x·scale of each word (slot order of `_w4_mv_tile`)."
    if LOADONLY:
        return acc + ((w & 0x7FFF) | ONE).to(tl.float32, bitcast=True) * s.to(tl.float32)
    corr = 1.03125 * (xe0 + xe1 + xe2 + xe3) + 1.5 * (xo0 + xo1 + xo2 + xo3)
    p = _w4_pair(w << 15, xe0[:, None], xo0[:, None], -corr[:, None], MLO, MHI, ONE)
    p = _w4_pair(w << 7, xe1[:, None], xo1[:, None], p, MLO, MHI, ONE)
    p = _w4_pair(w >> 1, xe2[:, None], xo2[:, None], p, MLO, MHI, ONE)
    p = _w4_pair(w >> 9, xe3[:, None], xo3[:, None], p, MLO, MHI, ONE)
    return acc + p * s.to(tl.float32)

@triton.jit
def _w4T_math(acc, w, s, x_ptr, kw0, KWT: tl.constexpr, XBF16: tl.constexpr, MLO, MHI, ONE, LOADONLY: tl.constexpr):
    "acc (KWT, BLOCK_N) + code·x·scale of each word, the activations loaded here."
    return _w4T_tile(acc, w, s, *_xT8(x_ptr, kw0, KWT, XBF16), MLO, MHI, ONE, LOADONLY)

@triton.jit
def _w4_mvT(x_ptr, w_ptr, s_ptr, y_ptr, ws_ptr, lock_ptr, N, K, KW, SPLIT_K, MLO, MHI, ONE,
            GROUP: tl.constexpr, BLOCK_N: tl.constexpr,
            KWA: tl.constexpr, KWB: tl.constexpr,   # words of the slice: KWA + KWB (KWB 0: one tile)
            XBF16: tl.constexpr, EVEN_N: tl.constexpr, TILED: tl.constexpr, LOADONLY: tl.constexpr):
    pid_n, pid_k = tl.program_id(0) // SPLIT_K, tl.program_id(0) % SPLIT_K
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N); nmask = rn < N
    if TILED: base = pid_n.to(tl.int64) * BLOCK_N * KW; RS = BLOCK_N
    else: base = pid_n.to(tl.int64) * BLOCK_N; RS = N
    kw0 = pid_k * (KWA + KWB)
    wa, sa = _w4T_load(w_ptr, s_ptr, kw0, rn, nmask, N, KW, base, RS, KWA, GROUP, EVEN_N, BLOCK_N)
    if KWB > 0: wb, sb = _w4T_load(w_ptr, s_ptr, kw0 + KWA, rn, nmask, N, KW, base, RS, KWB, GROUP, EVEN_N, BLOCK_N)
    acc = _w4T_math(tl.zeros((KWA, BLOCK_N), dtype=tl.float32), wa, sa, x_ptr, kw0, KWA, XBF16, MLO, MHI, ONE, LOADONLY)
    tot = tl.sum(acc, axis=0)
    if KWB > 0:
        accb = _w4T_math(tl.zeros((KWB, BLOCK_N), dtype=tl.float32), wb, sb, x_ptr, kw0 + KWA, KWB, XBF16, MLO, MHI, ONE, LOADONLY)
        tot += tl.sum(accb, axis=0)
    _splitk_epilogue(tot, y_ptr, ws_ptr, lock_ptr, rn, nmask, pid_n, pid_k, N, SPLIT_K)

# Round 6c: the same tiled transposed layout, the slice cut into NCH equal chunks of CKW words. Every chunk's words,
# scales and activations are loaded first (in chunk order), then the chunks are computed in order: the memory system
# serves all programs' first chunks first, so the math of chunk i overlaps the transfer of chunks > i (one (KW, BN)
# tensor is processed op by op over all of its elements, and its first op waits for every load).

@triton.jit
def _w4C_load(w_ptr, s_ptr, x_ptr, kw0, rn, nmask, N, base, RS,
              CKW: tl.constexpr, GROUP: tl.constexpr, EVEN_N: tl.constexpr, BLOCK_N: tl.constexpr, XBF16: tl.constexpr):
    w, s = _w4T_load(w_ptr, s_ptr, kw0, rn, nmask, N, 0, base, RS, CKW, GROUP, EVEN_N, BLOCK_N)
    return (w, s) + _xT8(x_ptr, kw0, CKW, XBF16)

@triton.jit
def _w4_mvC(x_ptr, w_ptr, s_ptr, y_ptr, ws_ptr, lock_ptr, N, K, KW, SPLIT_K, MLO, MHI, ONE,
            GROUP: tl.constexpr, BLOCK_N: tl.constexpr,
            CKW: tl.constexpr, NCH: tl.constexpr,   # the slice: NCH (1..12) chunks of CKW words
            XBF16: tl.constexpr, EVEN_N: tl.constexpr, LOADONLY: tl.constexpr):
    pid_n, pid_k = tl.program_id(0) // SPLIT_K, tl.program_id(0) % SPLIT_K
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N); nmask = rn < N
    base = pid_n.to(tl.int64) * BLOCK_N * KW
    k0 = pid_k * (NCH * CKW)
    c0 = _w4C_load(w_ptr, s_ptr, x_ptr, k0, rn, nmask, N, base, BLOCK_N, CKW, GROUP, EVEN_N, BLOCK_N, XBF16)
    if NCH > 1: c1 = _w4C_load(w_ptr, s_ptr, x_ptr, k0 + 1 * CKW, rn, nmask, N, base, BLOCK_N, CKW, GROUP, EVEN_N, BLOCK_N, XBF16)
    if NCH > 2: c2 = _w4C_load(w_ptr, s_ptr, x_ptr, k0 + 2 * CKW, rn, nmask, N, base, BLOCK_N, CKW, GROUP, EVEN_N, BLOCK_N, XBF16)
    if NCH > 3: c3 = _w4C_load(w_ptr, s_ptr, x_ptr, k0 + 3 * CKW, rn, nmask, N, base, BLOCK_N, CKW, GROUP, EVEN_N, BLOCK_N, XBF16)
    if NCH > 4: c4 = _w4C_load(w_ptr, s_ptr, x_ptr, k0 + 4 * CKW, rn, nmask, N, base, BLOCK_N, CKW, GROUP, EVEN_N, BLOCK_N, XBF16)
    if NCH > 5: c5 = _w4C_load(w_ptr, s_ptr, x_ptr, k0 + 5 * CKW, rn, nmask, N, base, BLOCK_N, CKW, GROUP, EVEN_N, BLOCK_N, XBF16)
    if NCH > 6: c6 = _w4C_load(w_ptr, s_ptr, x_ptr, k0 + 6 * CKW, rn, nmask, N, base, BLOCK_N, CKW, GROUP, EVEN_N, BLOCK_N, XBF16)
    if NCH > 7: c7 = _w4C_load(w_ptr, s_ptr, x_ptr, k0 + 7 * CKW, rn, nmask, N, base, BLOCK_N, CKW, GROUP, EVEN_N, BLOCK_N, XBF16)
    if NCH > 8: c8 = _w4C_load(w_ptr, s_ptr, x_ptr, k0 + 8 * CKW, rn, nmask, N, base, BLOCK_N, CKW, GROUP, EVEN_N, BLOCK_N, XBF16)
    if NCH > 9: c9 = _w4C_load(w_ptr, s_ptr, x_ptr, k0 + 9 * CKW, rn, nmask, N, base, BLOCK_N, CKW, GROUP, EVEN_N, BLOCK_N, XBF16)
    if NCH > 10: c10 = _w4C_load(w_ptr, s_ptr, x_ptr, k0 + 10 * CKW, rn, nmask, N, base, BLOCK_N, CKW, GROUP, EVEN_N, BLOCK_N, XBF16)
    if NCH > 11: c11 = _w4C_load(w_ptr, s_ptr, x_ptr, k0 + 11 * CKW, rn, nmask, N, base, BLOCK_N, CKW, GROUP, EVEN_N, BLOCK_N, XBF16)
    acc = _w4T_tile(tl.zeros((CKW, BLOCK_N), dtype=tl.float32), *c0, MLO, MHI, ONE, LOADONLY)
    if NCH > 1: acc = _w4T_tile(acc, *c1, MLO, MHI, ONE, LOADONLY)
    if NCH > 2: acc = _w4T_tile(acc, *c2, MLO, MHI, ONE, LOADONLY)
    if NCH > 3: acc = _w4T_tile(acc, *c3, MLO, MHI, ONE, LOADONLY)
    if NCH > 4: acc = _w4T_tile(acc, *c4, MLO, MHI, ONE, LOADONLY)
    if NCH > 5: acc = _w4T_tile(acc, *c5, MLO, MHI, ONE, LOADONLY)
    if NCH > 6: acc = _w4T_tile(acc, *c6, MLO, MHI, ONE, LOADONLY)
    if NCH > 7: acc = _w4T_tile(acc, *c7, MLO, MHI, ONE, LOADONLY)
    if NCH > 8: acc = _w4T_tile(acc, *c8, MLO, MHI, ONE, LOADONLY)
    if NCH > 9: acc = _w4T_tile(acc, *c9, MLO, MHI, ONE, LOADONLY)
    if NCH > 10: acc = _w4T_tile(acc, *c10, MLO, MHI, ONE, LOADONLY)
    if NCH > 11: acc = _w4T_tile(acc, *c11, MLO, MHI, ONE, LOADONLY)
    _splitk_epilogue(tl.sum(acc, axis=0), y_ptr, ws_ptr, lock_ptr, rn, nmask, pid_n, pid_k, N, SPLIT_K)

def w4_C(x, wt, st, bn, split, nw, ckw, loadonly=0):
    "Round 6c launcher: tiled transposed weight (`to_T(.., bn)`), slices of KW/split words in chunks of ckw."
    M, K = x.shape; KW, N = wt.shape; group = K // st.shape[0]
    if KW % split or (KW // split) % ckw or not 1 <= (KW // split) // ckw <= 12 or N % bn: raise ValueError('bad tiling')
    y = torch.empty(1, N, dtype=Kn._store_dtype(x.dtype), device=x.device)
    ws, locks = _bufs(split, 1, N, x.device, bn)
    _w4_mvC[(N // bn * split,)](x, wt, st, y, ws if ws is not None else y, locks, N, K, KW, split, *Kn._MV_MASKS,
        GROUP=group, BLOCK_N=bn, CKW=ckw, NCH=(KW // split) // ckw, XBF16=x.dtype == torch.bfloat16 and not INTERP,
        EVEN_N=True, LOADONLY=bool(loadonly), num_warps=nw, num_stages=1)
    return y.to(x.dtype)

def C_configs(N, K, cpu=False):
    "Round 6c: (bn, split, warps, chunk words) with 2..12 chunks and 8..48 words per thread."
    if cpu: return [(4, 1, 1, 16), (8, 2, 1, 8), (4, 1, 2, 32)]
    out = []
    KW = K // 8
    for split in (1, 2):
        for bn in (4, 8, 16):
            for nw in (1, 2, 4):
                for ckw in (32, 64, 128):
                    if KW % split or (KW // split) % ckw or N % bn: continue
                    nch = (KW // split) // ckw
                    wpt = bn * (KW // split) / (32 * nw)
                    if 2 <= nch <= 12 and 8 <= wpt <= 48 and ckw * bn >= 32 * nw * 4 and (split == 1 or N <= 4096):
                        out.append((bn, split, nw, ckw))
    return out

# Round 6d: the chunked whole-row structure of 6c on the row-major kernel layout (no new layout): a program takes
# BLOCK_N rows and the K slice in NCH chunks of BLOCK_K columns; every chunk's words and scales are loaded first,
# the activations of a chunk right before its math (they are L1/L2-hot and would cost 8 registers per word column).

@triton.jit
def _w4R_load(w_rows, s_rows, t, rw, GROUP: tl.constexpr, BLOCK_K: tl.constexpr, G: tl.constexpr, WPG: tl.constexpr):
    w = tl.load(w_rows + (t * (BLOCK_K // 8) + rw)[None, :, :], eviction_policy='evict_first')
    s = tl.load(s_rows + ((t * BLOCK_K + tl.arange(0, G) * (WPG * 8)) // GROUP)[None, :])
    return w, s

@triton.jit
def _w4R_math(acc, w, s, x_ptr, t, rw, BLOCK_K: tl.constexpr, XBF16: tl.constexpr, MLO, MHI, ONE):
    xb = x_ptr + t * BLOCK_K + rw * 8
    return _w4_mv_tile(acc, w, s, _xs(xb + 0, 8, XBF16), _xs(xb + 2, 4, XBF16), _xs(xb + 4, 8, XBF16), _xs(xb + 6, 4, XBF16),
                       _xs(xb + 1, 8, XBF16), _xs(xb + 3, 4, XBF16), _xs(xb + 5, 8, XBF16), _xs(xb + 7, 4, XBF16), MLO, MHI, ONE)

@triton.jit
def _w4_mvR(x_ptr, w_ptr, s_ptr, y_ptr, ws_ptr, lock_ptr, N, K, KW, SPLIT_K, MLO, MHI, ONE,
            GROUP: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, G: tl.constexpr, WPG: tl.constexpr,
            NCH: tl.constexpr, XBF16: tl.constexpr):
    pid_n, pid_k = tl.program_id(0) // SPLIT_K, tl.program_id(0) % SPLIT_K
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N); nmask = rn < N
    rw = tl.arange(0, G)[:, None] * WPG + tl.arange(0, WPG)[None, :]
    w_rows = w_ptr + rn[:, None, None].to(tl.int64) * KW
    s_rows = s_ptr + rn[:, None].to(tl.int64) * (K // GROUP)
    t0 = pid_k * NCH
    w0, s0 = _w4R_load(w_rows, s_rows, t0, rw, GROUP, BLOCK_K, G, WPG)
    if NCH > 1: w1, s1 = _w4R_load(w_rows, s_rows, t0 + 1, rw, GROUP, BLOCK_K, G, WPG)
    if NCH > 2: w2, s2 = _w4R_load(w_rows, s_rows, t0 + 2, rw, GROUP, BLOCK_K, G, WPG)
    if NCH > 3: w3, s3 = _w4R_load(w_rows, s_rows, t0 + 3, rw, GROUP, BLOCK_K, G, WPG)
    if NCH > 4: w4, s4 = _w4R_load(w_rows, s_rows, t0 + 4, rw, GROUP, BLOCK_K, G, WPG)
    if NCH > 5: w5, s5 = _w4R_load(w_rows, s_rows, t0 + 5, rw, GROUP, BLOCK_K, G, WPG)
    if NCH > 6: w6, s6 = _w4R_load(w_rows, s_rows, t0 + 6, rw, GROUP, BLOCK_K, G, WPG)
    if NCH > 7: w7, s7 = _w4R_load(w_rows, s_rows, t0 + 7, rw, GROUP, BLOCK_K, G, WPG)
    if NCH > 8: w8, s8 = _w4R_load(w_rows, s_rows, t0 + 8, rw, GROUP, BLOCK_K, G, WPG)
    if NCH > 9: w9, s9 = _w4R_load(w_rows, s_rows, t0 + 9, rw, GROUP, BLOCK_K, G, WPG)
    acc = _w4R_math(tl.zeros((BLOCK_N, G, WPG), dtype=tl.float32), w0, s0, x_ptr, t0, rw, BLOCK_K, XBF16, MLO, MHI, ONE)
    if NCH > 1: acc = _w4R_math(acc, w1, s1, x_ptr, t0 + 1, rw, BLOCK_K, XBF16, MLO, MHI, ONE)
    if NCH > 2: acc = _w4R_math(acc, w2, s2, x_ptr, t0 + 2, rw, BLOCK_K, XBF16, MLO, MHI, ONE)
    if NCH > 3: acc = _w4R_math(acc, w3, s3, x_ptr, t0 + 3, rw, BLOCK_K, XBF16, MLO, MHI, ONE)
    if NCH > 4: acc = _w4R_math(acc, w4, s4, x_ptr, t0 + 4, rw, BLOCK_K, XBF16, MLO, MHI, ONE)
    if NCH > 5: acc = _w4R_math(acc, w5, s5, x_ptr, t0 + 5, rw, BLOCK_K, XBF16, MLO, MHI, ONE)
    if NCH > 6: acc = _w4R_math(acc, w6, s6, x_ptr, t0 + 6, rw, BLOCK_K, XBF16, MLO, MHI, ONE)
    if NCH > 7: acc = _w4R_math(acc, w7, s7, x_ptr, t0 + 7, rw, BLOCK_K, XBF16, MLO, MHI, ONE)
    if NCH > 8: acc = _w4R_math(acc, w8, s8, x_ptr, t0 + 8, rw, BLOCK_K, XBF16, MLO, MHI, ONE)
    if NCH > 9: acc = _w4R_math(acc, w9, s9, x_ptr, t0 + 9, rw, BLOCK_K, XBF16, MLO, MHI, ONE)
    _splitk_epilogue(tl.sum(tl.sum(acc, axis=2), axis=1), y_ptr, ws_ptr, lock_ptr, rn, nmask, pid_n, pid_k, N, SPLIT_K)

def w4_R(x, w, s, bn, split, nw, bk):
    "Round 6d launcher: row-major kernel layout, N % bn == 0, K/split in chunks of bk columns (1..10 chunks)."
    M, K = x.shape; N = w.shape[0]; group = K // s.shape[1]
    if K % (split * bk) or not 1 <= K // (split * bk) <= 10 or N % bn: raise ValueError('bad tiling')
    y = torch.empty(1, N, dtype=Kn._store_dtype(x.dtype), device=x.device)
    ws, locks = _bufs(split, 1, N, x.device, bn)
    _w4_mvR[(N // bn * split,)](x, w, s, y, ws if ws is not None else y, locks, N, K, K // 8, split, *Kn._MV_MASKS,
        GROUP=group, BLOCK_N=bn, BLOCK_K=bk, G=max(bk // group, 1), WPG=min(bk, group) // 8, NCH=K // (split * bk),
        XBF16=x.dtype == torch.bfloat16 and not INTERP, num_warps=nw, num_stages=1)
    return y.to(x.dtype)

def R_configs(N, K, cpu=False):
    "Round 6d: (bn, split, warps, bk) with 2..10 chunks and 8..64 words per thread."
    if cpu: return [(4, 1, 1, 128), (8, 2, 1, 64)]
    out = []
    for split in (1, 2, 4):
        for bn in (4, 8, 16, 32):
            for nw in (1, 2, 4):
                for bk in (256, 512, 1024):
                    if K % (split * bk) or N % bn: continue
                    nch = K // (split * bk)
                    wpt = bn * K / split / 8 / (32 * nw)
                    if 2 <= nch <= 10 and 8 <= wpt <= 64 and bn * bk // 8 >= 32 * nw * 4 and (split == 1 or N <= 4096):
                        out.append((bn, split, nw, bk))
    return out

def _pow2_split(kw):
    "kw = a + b with a the largest power of two <= kw and b a power of two or 0; None if impossible."
    a = 1 << (kw.bit_length() - 1); b = kw - a
    return (a, b) if b == 0 or b & (b - 1) == 0 else None

def to_T(wk, s, bn=None):
    "Kernel-layout words (N, K/8) -> (K/8, N) (bn: tiled [N/bn][K/8][bn]); scales (N, G) -> (G, N)."
    N, KW = wk.shape
    wt = wk.t().contiguous() if bn is None else wk.view(N // bn, bn, KW).permute(0, 2, 1).contiguous().view(KW, N)
    return wt, s.t().contiguous()

def w4_T(x, wt, st, bn, split, nw, tiled=0, loadonly=0):
    M, K = x.shape; KW, N = wt.shape; group = K // st.shape[0]
    if KW % split: raise ValueError('bad split')
    ab = _pow2_split(KW // split)
    if ab is None or (tiled and N % bn): raise ValueError('bad tiling')
    y = torch.empty(1, N, dtype=Kn._store_dtype(x.dtype), device=x.device)
    ws, locks = _bufs(split, 1, N, x.device, bn)
    _w4_mvT[(-(-N // bn) * split,)](x, wt, st, y, ws if ws is not None else y, locks, N, K, KW, split, *Kn._MV_MASKS,
        GROUP=group, BLOCK_N=bn, KWA=ab[0], KWB=ab[1], XBF16=x.dtype == torch.bfloat16 and not INTERP, EVEN_N=N % bn == 0,
        TILED=bool(tiled), LOADONLY=bool(loadonly), num_warps=nw, num_stages=1)
    return y.to(x.dtype)

# ----------------------------------------------------------------------------------------------------------------
# launchers

def _bufs(split, M, N, dev, bn):
    ws = torch.empty(split, M, N, dtype=torch.float32, device=dev) if split > 1 else None
    return ws, Kn._locks(dev, -(-N // bn))

def w4_v2(x, w, s, bn, bk, tiles, nw, xvec=0, loadonly=0, blocked=0, epi=1, prefetch=0, split=1):
    "tiles > 0: that many unrolled K tiles per program (split = K tiles / tiles); tiles == 0: runtime loop, `split` programs per row block."
    M, K = x.shape; N = w.shape[0]; group = K // s.shape[1]
    k_tiles = K // bk
    if K % bk or (tiles and k_tiles % tiles): raise ValueError('bad tiling')
    if tiles: split = k_tiles // tiles
    y = torch.empty(1, N, dtype=Kn._store_dtype(x.dtype), device=x.device)
    ws, locks = _bufs(split, 1, N, x.device, bn)
    _w4_mv_v2[(-(-N // bn) * split,)](x, w, s, y, ws if ws is not None else y, locks, N, K, K // 8, split, *Kn._MV_MASKS,
        GROUP=group, BLOCK_N=bn, BLOCK_K=bk, G=max(bk // group, 1), WPG=min(bk, group) // 8, TILES=tiles,
        XBF16=x.dtype == torch.bfloat16 and not INTERP, EVEN_N=N % bn == 0, XVEC=bool(xvec), LOADONLY=bool(loadonly),
        BLOCKED=bool(blocked), EPI=bool(epi), PREFETCH=bool(prefetch), num_warps=nw, num_stages=1)
    return y.to(x.dtype)

def w4_tc3(x, w, s, bn, bk, split, nw, st):
    M, K = x.shape; N = w.shape[0]; group = K // s.shape[1]
    if N % bn or K % bk or group % bk: raise ValueError('bad tiling')
    bm = max(16, min(64, triton.next_power_of_2(M)))
    y = torch.empty(M, N, dtype=Kn._store_dtype(x.dtype), device=x.device)
    ws = torch.empty(split, M, N, dtype=torch.float32, device=x.device) if split > 1 else y
    grid = (N // bn, split, triton.cdiv(M, bm))
    locks = Kn._locks(x.device, grid[0] * grid[2])
    _w4_tc_v3[grid](x, w, s, y, ws, locks, M, N, K, K // 8, split, GROUP=group, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                    ASM=not INTERP, F16=x.dtype == torch.float16, DOT_F32=INTERP or x.dtype == torch.float32, STAGES=st,
                    num_warps=nw, num_stages=st)
    return y.to(x.dtype)

def bcq_v2(x, b, a, bn, bk, tiles, nw):
    M, K = x.shape; Q, N = b.shape[:2]; group = K // a.shape[2]
    k_tiles = K // bk
    if K % bk or k_tiles % tiles: raise ValueError('bad tiling')
    split = k_tiles // tiles
    y = torch.empty(1, N, dtype=Kn._store_dtype(x.dtype), device=x.device)
    ws, locks = _bufs(split, 1, N, x.device, bn)
    _bcq_mv_v2[(-(-N // bn) * split,)](x, b, a, y, ws if ws is not None else y, locks, N, K, K // 32, split, Kn._MV_MASKS[2],
        Q=Q, GROUP=group, BLOCK_N=bn, BLOCK_K=bk, G=max(bk // group, 1), WPG=min(bk, group) // 32, TILES=tiles,
        XBF16=x.dtype == torch.bfloat16 and not INTERP, EVEN_N=N % bn == 0, num_warps=nw, num_stages=1)
    return y.to(x.dtype)

_LUT_BUF: dict = {}

def bcq_lut(x, b, a, mu, bn, bk, split, nw, glob=0, st=1):
    "LUT BCQ mat-vec (M = 1): `_bcq_lut` with MU = mu over `split` K slices; glob: table built once per call in global memory."
    M, K = x.shape; Q, N = b.shape[:2]; group = K // a.shape[2]
    if M != 1 or K % bk or group % bk or bk % 32 or mu not in (4, 8): raise ValueError('bad tiling')
    y = torch.empty(1, N, dtype=Kn._store_dtype(x.dtype), device=x.device)
    ws, locks = _bufs(split, 1, N, x.device, bn)
    lut = y
    if glob:
        key = (x.device, K, mu)
        if key not in _LUT_BUF: _LUT_BUF[key] = torch.empty(K // mu * (1 << mu), dtype=torch.float32, device=x.device)
        lut = _LUT_BUF[key]
        _bcq_lut_build[(K // bk,)](x, lut, MU=mu, BLOCK_K=bk, num_warps=4)
    _bcq_lut[(-(-N // bn) * split,)](x, b, a, y, ws if ws is not None else y, locks, lut, N, K, K // 32, split,
        Q=Q, MU=mu, GROUP=group, BLOCK_N=bn, BLOCK_K=bk, GLOBAL=bool(glob), STAGES=st, num_warps=nw, num_stages=1)
    return y.to(x.dtype)

def bcq_lut_smem(x, b, a, mu, bn, bk, split, nw):
    "Gluon shared-memory LUT BCQ mat-vec (M = 1): table build (Triton) + `_bcq_lut_smem`."
    M, K = x.shape; Q, N = b.shape[:2]; group = K // a.shape[2]
    if gluon is None or INTERP: raise RuntimeError('Gluon kernels need a GPU (no interpreter support)')
    if M != 1 or K % bk or group % bk or bk % 32 or mu not in (4, 8) or bk // mu > 32 or bn % (32 * nw): raise ValueError('bad tiling')
    key = (x.device, K, mu)
    if key not in _LUT_BUF: _LUT_BUF[key] = torch.empty(K // mu * (1 << mu), dtype=torch.float32, device=x.device)
    lut = _LUT_BUF[key]
    _bcq_lut_build[(K // bk,)](x, lut, MU=mu, BLOCK_K=bk, num_warps=4)
    y = torch.empty(1, N, dtype=x.dtype, device=x.device)
    ws, locks = _bufs(split, 1, N, x.device, bn)
    _bcq_lut_smem[(-(-N // bn) * split,)](lut, b, a, y, ws if ws is not None else y, locks, N, K, K // 32, split, Q=Q, MU=mu, GROUP=group, BLOCK_N=bn, BLOCK_K=bk, NW=nw, num_warps=nw)
    return y

# ----------------------------------------------------------------------------------------------------------------
# data and candidates

_DATA: dict = {}

def make_data(N, K, M, dev, dt, group=128, Q=3, seed=0):
    "Random operands (same seed in every process); cached per process."
    key = (N, K, M, str(dev), dt)
    if key in _DATA: return _DATA[key]
    g = torch.Generator(device=dev).manual_seed(seed)
    codes = torch.randint(-8, 8, (N, K), generator=g, device=dev)
    w4 = Kn.pack_int4(codes); del codes
    s4 = (torch.rand(N, K // group, generator=g, device=dev) * 0.01 + 1e-3).to(dt)
    b = Kn.pack_sign_words(torch.randint(0, 2, (Q, N, K), generator=g, device=dev, dtype=torch.int8) * 2 - 1)
    a = ((torch.rand(Q, N, K // group, generator=g, device=dev) * 0.01) / 2 ** torch.arange(Q, device=dev)[:, None, None]).to(dt)
    x = torch.randn(M, K, generator=g, device=dev).to(dt)
    _DATA.clear()
    _DATA[key] = d = dict(x=x, w4=w4, w4k=Kn.w4a16_to_kernel_layout(w4), s4=s4, b=b, bk=Kn.bcq_to_kernel_layout(b), a=a)
    return d

def _blk(d, bn, bk):
    "The kernel-layout weight in the tiled layout for (bn, bk), cached in d."
    key = ('blk', bn, bk)
    if key not in d: d[key] = to_blocked(d['w4k'], bn, bk)
    return d[key]

def _Tw(d, bn=None):
    "The transposed (bn: tiled) weight and transposed scales, cached in d."
    key = ('T', bn)
    if key not in d: d[key] = to_T(d['w4k'], d['s4'], bn)
    return d[key]

def T_configs(N, K, cpu=False):
    "(bn, split, warps, tiled) of round 6 that keep <= 48 words per thread and a power-of-two split of each slice."
    if cpu: return [(16, 1, 4, 0), (32, 2, 4, 1), (16, 4, 2, 0)]
    out = []
    KW = K // 8
    for split in (1, 2, 4, 5, 8, 9, 10, 16, 18):
        if KW % split or _pow2_split(KW // split) is None: continue
        for bn in (16, 32, 64, 128, 256):
            for nw in (2, 4, 8):
                wpt = bn * (KW // split) / (32 * nw)
                progs = -(-N // bn) * split
                if 16 <= wpt <= 48 and 264 <= progs <= 4096 and bn * 4 >= 64 and bn >= 4 * 32 * nw / max(KW // split, 1):
                    out.append((bn, split, nw, 0))
                    if N % bn == 0 and bn <= 64: out.append((bn, split, nw, 1))
    return out

def T_small_configs(N, K, cpu=False):
    "Round 6b: 4 or 8 rows per program (16-32 bytes per word row), many programs, 8..48 words per thread."
    if cpu: return [(4, 1, 1, 1), (8, 2, 1, 0)]
    out = []
    KW = K // 8
    for split in (1, 2, 4):
        if KW % split or _pow2_split(KW // split) is None: continue
        for bn in (4, 8):
            for nw in (1, 2, 4):
                wpt = bn * (KW // split) / (32 * nw)
                if 8 <= wpt <= 48 and KW // split >= 8 * nw:
                    out.append((bn, split, nw, 1)); out.append((bn, split, nw, 0))
    return out

def candidates(N, K, M, cpu=False):
    "[(name, family, fmt, fn(d) -> callable)]; fmt in w4a16 / bcq / none (no correctness check)."
    C = []
    add = lambda name, fam, fmt, f: C.append((name, fam, fmt, f))
    kt = lambda bk: K // bk if K % bk == 0 else 0
    if not cpu:
        add('bf16', 'base', 'bf16', lambda d: (lambda wb=Kn.w4a16_dequantize_triton(d['w4k'], d['s4'], d['x'].dtype, kernel_layout=True): (lambda: F.linear(d['x'], wb)))())
        add('tinygemm', 'base', 'tinygemm', lambda d: (lambda tg=Kn._tinygemm(d['w4'], d['s4'], 128): (lambda: torch.ops.aten._weight_int4pack_mm(d['x'], tg[0], 128, tg[1])))())
    add('w4a16 current', 'w4_cur', 'w4a16', lambda d: (lambda: Kn.w4a16_matmul(d['x'], d['w4k'], d['s4'], kernel_layout=True)))
    add('bcq3 current', 'bcq_cur', 'bcq', lambda d: (lambda: Kn.bcq_matmul(d['x'], d['bk'], d['a'], kernel_layout=True)))
    if M == 1:
        for bn, sp, nw, tiled in T_configs(N, K, cpu):   # round 6
            if tiled and N % bn: continue
            add(f"T {bn} sk{sp} w{nw}" + (' tiled' if tiled else ''), 'w4_T', 'w4a16',
                lambda d, a=(bn, sp, nw, tiled): (lambda wt=_Tw(d, a[0] if a[3] else None): (lambda: w4_T(d['x'], wt[0], wt[1], *a)))())
            if not cpu and (N, K) == (9216, 2560) and nw == 4 and not tiled:
                add(f"loadonly T {bn} sk{sp} w{nw}", 'floor_T', 'none',
                    lambda d, a=(bn, sp, nw): (lambda wt=_Tw(d): (lambda: w4_T(d['x'], wt[0], wt[1], *a, 0, 1)))())
        for bn, sp, nw, bk in R_configs(N, K, cpu):   # round 6d
            add(f"R {bn} sk{sp} w{nw} k{bk}", 'w4_R', 'w4a16', lambda d, a=(bn, sp, nw, bk): (lambda: w4_R(d['x'], d['w4k'], d['s4'], *a)))
        for bn, sp, nw, ckw in C_configs(N, K, cpu):   # round 6c
            add(f"C {bn} sk{sp} w{nw} c{ckw}", 'w4_C', 'w4a16',
                lambda d, a=(bn, sp, nw, ckw): (lambda wt=_Tw(d, a[0]): (lambda: w4_C(d['x'], wt[0], wt[1], *a)))())
            if not cpu and (N, K) == (9216, 2560):
                add(f"loadonly C {bn} sk{sp} w{nw} c{ckw}", 'floor_C', 'none',
                    lambda d, a=(bn, sp, nw, ckw): (lambda wt=_Tw(d, a[0]): (lambda: w4_C(d['x'], wt[0], wt[1], *a, 1)))())
        for bn, sp, nw, tiled in T_small_configs(N, K, cpu):   # round 6b: a few rows per program, whole K
            if tiled and N % bn: continue
            add(f"Ts {bn} sk{sp} w{nw}" + (' tiled' if tiled else ''), 'w4_Ts', 'w4a16',
                lambda d, a=(bn, sp, nw, tiled): (lambda wt=_Tw(d, a[0] if a[3] else None): (lambda: w4_T(d['x'], wt[0], wt[1], *a)))())
            if not cpu and (N, K) == (9216, 2560) and tiled:
                add(f"loadonly Ts {bn} sk{sp} w{nw} tiled", 'floor_Ts', 'none',
                    lambda d, a=(bn, sp, nw): (lambda wt=_Tw(d, a[0]): (lambda: w4_T(d['x'], wt[0], wt[1], *a, 1, 1)))())
        add('v2 128x256 t1 w4', 'w4_v2', 'w4a16', lambda d: (lambda: w4_v2(d['x'], d['w4k'], d['s4'], 128, 256, 1, 4)))
        loop = ([(bn, bk, nw, pf, sp) for bn, bk in [(16, 512), (32, 256), (32, 512), (64, 256), (16, 256), (64, 512)] for nw in (2, 4) for pf in (0, 1) for sp in (1, 2)
                 if not (bn == 64 and nw == 2) and (sp == 1 or N <= 4096)]) if not cpu else [(16, 128, 4, 0, 1), (16, 128, 4, 1, 2), (32, 256, 2, 1, 1)]
        for bn, bk, nw, pf, sp in loop:
            if kt(bk) and sp <= kt(bk):
                add(f"loop {bn}x{bk} w{nw} sk{sp}" + (' pf' if pf else ''), 'w4_loop', 'w4a16',
                    lambda d, a=(bn, bk, nw, pf, sp): (lambda: w4_v2(d['x'], d['w4k'], d['s4'], a[0], a[1], 0, a[2], 0, 0, 0, 1, a[3], a[4])))
        mv = [(bn, bk, nw, st) for bn, bk in [(32, 512), (32, 256), (64, 256), (16, 512)] for nw in (4,) for st in (1, 2, 3)] if not cpu else [(16, 128, 4, 2)]
        for bn, bk, nw, st in mv:
            if kt(bk):
                c = KernelConfig('mv', bn, bk, 1, nw, st)
                add(f'mv {bn}x{bk} sk1 w{nw} st{st}', 'w4_mv_sk1', 'w4a16', lambda d, c=c: (lambda: Kn.w4a16_matmul(d['x'], d['w4k'], d['s4'], config=c, kernel_layout=True)))
        for bn, bk, sp, nw in ([(32, 512, 1, 4), (16, 512, 1, 4), (64, 256, 1, 4), (32, 256, 1, 4), (64, 512, 1, 8), (32, 512, 2, 4), (16, 512, 1, 2)] if not cpu else [(16, 128, 1, 4)]):
            if kt(bk):
                c = KernelConfig('mv', bn, bk, sp, nw, 1)
                add(f'bcq mv {bn}x{bk} sk{sp} w{nw}', 'bcq_mv_sk1', 'bcq', lambda d, c=c: (lambda: Kn.bcq_matmul(d['x'], d['bk'], d['a'], config=c, kernel_layout=True)))
        # LUT-GEMM BCQ (round 5): global table (one small build kernel per call + the mat-vec), MU = 8 and 4; tl.gather once
        lut = ([(mu, bn, 128, sp, nw) for mu in (8, 4) for bn, sp, nw in [(128, 2, 4), (128, 4, 4), (64, 1, 4), (64, 2, 4), (256, 4, 8), (32, 1, 4)]]
               if not cpu else [(8, 16, 64, 2, 4), (4, 32, 128, 1, 4)])
        for mu, bn, bk, sp, nw in lut:
            if kt(bk) and sp <= kt(bk):
                add(f'lut{mu} g {bn}x{bk} sk{sp} w{nw}', f'bcq_lut{mu}', 'bcq', lambda d, a=(mu, bn, bk, sp, nw): (lambda: bcq_lut(d['x'], d['bk'], d['a'], *a, 1)))
        for mu, bn, bk, sp, nw in ([(4, 32, 128, 2, 4), (4, 64, 128, 1, 4)] if not cpu else [(4, 16, 64, 2, 4)]):
            if kt(bk) and sp <= kt(bk):
                add(f'lut{mu} gather {bn}x{bk} sk{sp} w{nw}', 'bcq_lut_gather', 'bcq', lambda d, a=(mu, bn, bk, sp, nw): (lambda: bcq_lut(d['x'], d['bk'], d['a'], *a, 0)))
        if not cpu and gluon is not None:   # Gluon shared-memory tables (one row per lane: bn = 32 · warps)
            for mu, bn, sp, nw in [(4, 64, 4, 2), (4, 128, 4, 4), (4, 128, 8, 4), (4, 64, 10, 2), (8, 128, 4, 4), (8, 128, 8, 4), (8, 256, 4, 8), (8, 64, 5, 2)]:
                if kt(128) and sp <= kt(128):
                    add(f'lut{mu} smem {bn}x128 sk{sp} w{nw}', f'bcq_lut{mu}_smem', 'bcq', lambda d, a=(mu, bn, 128, sp, nw): (lambda: bcq_lut_smem(d['x'], d['bk'], d['a'], *a)))
        if not cpu and (N, K) == (9216, 2560):
            for bn, bk, nw in [(32, 512, 4), (16, 512, 2), (32, 256, 2)]:
                add(f"loadonly loop {bn}x{bk} w{nw} sk1", 'floor', 'none', lambda d, a=(bn, bk, nw): (lambda: w4_v2(d['x'], d['w4k'], d['s4'], a[0], a[1], 0, a[2], 0, 1, 0, 1, 1, 1)))
    else:   # M = 16: tensor-core kernels with small row blocks (no / little split-K), standard and tiled layouts
        for bn, bk, nw, st, sp in ([(64, 64, 4, 4, 4)] + [(bn, bk, nw, st, sp) for bn in (16, 32) for bk in (64, 128) for nw in (2, 4) for st in (3, 4) for sp in (1, 2)]
                                   if not cpu else [(16, 64, 4, 1, 2)]):
            if kt(bk) and sp <= kt(bk):
                c = KernelConfig('tc', bn, bk, sp, nw, st)
                add(f'tc {bn}x{bk} sk{sp} w{nw} st{st}', 'w4_tc', 'w4a16', lambda d, c=c: (lambda: Kn.w4a16_matmul(d['x'], d['w4k'], d['s4'], config=c, kernel_layout=True)))
        for bn, bk, nw, st, sp in ([(64, 64, 4, 4, 4), (32, 64, 4, 3, 1), (32, 128, 4, 3, 1), (16, 128, 4, 3, 1), (32, 64, 4, 4, 2)] if not cpu else [(16, 32, 4, 2, 1)]):
            if kt(bk) and sp <= kt(bk) and N % bn == 0:
                add(f'tc3 {bn}x{bk} sk{sp} w{nw} st{st} blocked', 'w4_tc3', 'w4a16',
                    lambda d, a=(bn, bk, sp, nw, st): (lambda w=_blk(d, a[0], a[1]): (lambda: w4_tc3(d['x'], w, d['s4'], *a)))())
    return C

PREV_TABLE = {(9216, 2560): KernelConfig('mv', 128, 256, 5, 4, 1), (4096, 2560): KernelConfig('mv', 128, 256, 10, 4, 1)}   # before mv2

def final_candidates(N, K, M):
    "Validation run: the library's dispatch (now with mv2) against the baselines, the previous table entry and every mv2 candidate."
    C = []
    add = lambda name, fam, fmt, f: C.append((name, fam, fmt, f))
    add('bf16', 'base', 'bf16', lambda d: (lambda wb=Kn.w4a16_dequantize_triton(d['w4k'], d['s4'], d['x'].dtype, kernel_layout=True): (lambda: F.linear(d['x'], wb)))())
    add('tinygemm', 'base', 'tinygemm', lambda d: (lambda tg=Kn._tinygemm(d['w4'], d['s4'], 128): (lambda: torch.ops.aten._weight_int4pack_mm(d['x'], tg[0], 128, tg[1])))())
    add('w4a16 dispatch', 'w4_cur', 'w4a16', lambda d: (lambda: Kn.w4a16_matmul(d['x'], d['w4k'], d['s4'], kernel_layout=True)))
    add('bcq3 dispatch', 'bcq_cur', 'bcq', lambda d: (lambda: Kn.bcq_matmul(d['x'], d['bk'], d['a'], kernel_layout=True)))
    if M == 1:
        prev = PREV_TABLE.get((N, K))
        if prev is not None:
            add(f'w4a16 previous table {prev.kernel} {prev.block_n}x{prev.block_k} sk{prev.split_k}', 'w4_prev', 'w4a16',
                lambda d, c=prev: (lambda: Kn.w4a16_matmul(d['x'], d['w4k'], d['s4'], config=c, kernel_layout=True)))
        for c in Kn._candidates('w4a16', 1, K, 128, True, N):
            if c.kernel == 'mv2':
                add(f'mv2 {c.block_n}x{c.block_k} sk{c.split_k} w{c.num_warps} st{c.num_stages}', 'w4_mv2', 'w4a16',
                    lambda d, c=c: (lambda: Kn.w4a16_matmul(d['x'], d['w4k'], d['s4'], config=c, kernel_layout=True)))
    return C

CHECK_SHAPES = ((1000, 2560, 128), (33, 512, 64), (4096, 384, 128), (250, 1024, 32))
CHECK_DTYPES = ('bfloat16', 'float16', 'float32')

def final_checks(dev='cuda', shapes=CHECK_SHAPES, dtypes=CHECK_DTYPES):
    "GPU correctness of mv2 (marlin's test): every candidate on an uneven shape, twice (counters reset), all activation dtypes."
    out = []
    for N, Kd, g in shapes:
        torch.manual_seed(0)
        w = Kn.pack_int4(torch.randint(-8, 8, (N, Kd), device=dev)); wk = Kn.w4a16_to_kernel_layout(w)
        for dt in [getattr(torch, d) for d in dtypes]:
            s = (torch.rand(N, Kd // g, device=dev) * 0.02 + 0.002).to(dt)
            x = torch.randn(1, Kd, device=dev, dtype=dt)
            ref = Kn.w4a16_mm_ref(x, w, s)
            cs = [c for c in Kn._candidates('w4a16', 1, Kd, g, True, N) if c.kernel == 'mv2'] + [Kn.KernelConfig('mv2', 16, 64, 64, 2, 2)]
            for c in cs:
                for _ in range(2):
                    e = rel_error(Kn.w4a16_matmul(x, wk, s, config=c, kernel_layout=True), ref)
                    out.append(dict(N=N, K=Kd, group=g, dtype=str(dt), config=str(c), err=e, ok=e < 1e-3))
    if dev == 'cuda': torch.cuda.synchronize()
    locks_zero = int(Kn._LOCKS[torch.device('cuda', torch.cuda.current_device()) if dev == 'cuda' else torch.device('cpu')].abs().sum()) == 0
    bad = [r for r in out if not r['ok']]
    print(f'final checks: {len(out)} mv2 launches, {len(bad)} above 1e-3, max rel. err {max(r["err"] for r in out):.3g}, counters zero: {locks_zero}', flush=True)
    for r in bad[:10]: print('  BAD', r)
    return dict(n=len(out), bad=bad, max_err=max(r['err'] for r in out), locks_zero=locks_zero)

def lut_checks(dev='cpu', Qs=(2, 3, 4), groups=(64, 128)):
    """The LUT kernels at Q = 2, 3, 4, groups 64 / 128, MU = 4 / 8, global table and tl.gather, an uneven N, split-K 1-2
    (the sweep's own data is Q = 3, group 128 only). On the GPU (bf16 activations) the global-table and Gluon
    shared-memory kernels, fewer configs (compile time)."""
    bad, rows = 0, []
    for Q in Qs:
        for g in groups:
            torch.manual_seed(Q * 1000 + g)
            N, Kd = 40, 512
            b = Kn.bcq_to_kernel_layout(Kn.pack_sign_words(torch.randint(0, 2, (Q, N, Kd), device=dev) * 2 - 1))
            a = ((torch.rand(Q, N, Kd // g, device=dev) * 0.01) / 2 ** torch.arange(Q, device=dev)[:, None, None]).to(torch.float32 if dev == 'cpu' else torch.bfloat16)
            x = torch.randn(1, Kd, device=dev).to(torch.float32 if dev == 'cpu' else torch.bfloat16)
            ref = Kn.bcq_mm_ref(x, b, a, kernel_layout=True)
            runs = [(f'mu={mu} {"global" if glob else "gather"} {bn}x{bk} sk{sp}', lambda mu=mu, glob=glob, bn=bn, bk=bk, sp=sp: bcq_lut(x, b, a, mu, bn, bk, sp, 4, glob))
                    for mu in (4, 8) for glob in (1, 0) for bn, bk, sp in ((16, 64, 2), (32, min(g, 128), 1)) if dev == 'cpu' or (glob and bn == 16)]
            if dev != 'cpu' and gluon is not None:
                runs += [(f'mu={mu} smem {bn}x{bk} sk{sp}', lambda mu=mu, bn=bn, bk=bk, sp=sp, nw=nw: bcq_lut_smem(x, b, a, mu, bn, bk, sp, nw))
                         for mu in (4, 8) for bn, bk, sp, nw in ((64, 64, 3, 2), (32, min(g, 128), 1, 1)) if not (mu == 8 and bn == 32)]
            for name, fn in runs:
                try:
                    e = rel_error(fn(), ref)
                except Exception as ex:
                    e = float('inf'); name += f' {type(ex).__name__}: {str(ex)[:200]}'
                bad += not e < 1e-3
                rows.append(dict(Q=Q, group=g, name=name, err=e, ok=e < 1e-3))
                print(f'lut check ({dev}) Q={Q} g={g} {N}x{Kd} {name}: rel.err {e:.2e}', 'ok' if e < 1e-3 else 'FAIL', flush=True)
    return bad, rows

def check(fmt, d, out):
    if fmt == 'w4a16': ref = Kn.w4a16_mm_ref(d['x'], d['w4k'], d['s4'], kernel_layout=True)
    elif fmt == 'bcq': ref = Kn.bcq_mm_ref(d['x'], d['bk'], d['a'], kernel_layout=True)
    else: return None
    return rel_error(out, ref)

# ----------------------------------------------------------------------------------------------------------------
# parallel compile + check

FINAL = '--final' in sys.argv
ONLY = sys.argv[sys.argv.index('--only') + 1] if '--only' in sys.argv[:-1] else None   # (read here too: spawned workers see sys.argv)

def _cands(N, K, M):
    C = final_candidates(N, K, M) if FINAL else candidates(N, K, M)
    if ONLY: C = [c for c in C if c[1] in ('base', 'w4_cur', 'bcq_cur') or any(o in c[1] for o in ONLY.split(','))]
    return C

def _worker(args):
    if args[0] == 'lutcheck':
        torch.cuda.set_device(0)
        try: return {args: lut_checks('cuda', (args[1],), (args[2],))}
        except Exception as e: return {args: (1, [dict(Q=args[1], group=args[2], fail=f'{type(e).__name__}: {e}')])}
    if args[0] == 'check':
        try: return {('check', args[1], args[2]): final_checks('cuda', (args[1],), (args[2],))}
        except Exception as e: return {('check', args[1], args[2]): dict(fail=f'{type(e).__name__}: {e}', bad=[], n=0, max_err=0, locks_zero=True)}
    N, K, M, names = args
    torch.cuda.set_device(0)
    d = make_data(N, K, M, 'cuda', torch.bfloat16)
    out = {}
    for name, fam, fmt, mk in _cands(N, K, M):
        if name not in names: continue
        t = time.time()
        try:
            fn = mk(d); y = fn(); torch.cuda.synchronize()
            out[name] = dict(err=check(fmt, d, y), compile_s=time.time() - t)
        except Exception as e:
            out[name] = dict(fail=f'{type(e).__name__}: {str(e)[:300]}')
    return out

def precompile(jobs, workers, checks=()):
    "jobs: [(N, K, M, [names])] -> {(N, K, M, name): result}; checks: extra ('check', shape, dtype) tasks."
    import multiprocessing as mp
    chunks = list(checks)
    for N, K, M, names in jobs:
        for i in range(0, len(names), 3): chunks.append((N, K, M, names[i:i + 3]))
    res = {}
    ctx = mp.get_context('spawn')
    with ctx.Pool(workers) as pool:
        for ch, r in zip(chunks, pool.imap(_worker, chunks)):
            if ch[0] in ('check', 'lutcheck'): res.update(r); continue
            for n, v in r.items(): res[(ch[0], ch[1], ch[2], n)] = v
    return res

# ----------------------------------------------------------------------------------------------------------------

def _fmt(e): return 'n/a' if e is None else f'{e:.2g}'

def _sig(name):
    "A candidate's name without its per-shape K split (' t<tiles>' / ' sk<split>'), to carry winners to other shapes."
    return ' '.join(p for p in name.split() if not (p[:1] == 't' and p[1:].isdigit()) and not (p[:2] == 'sk' and p[2:].isdigit()))

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--out', default='_runs/kernel_sweep')
    ap.add_argument('--cpu', action='store_true')
    ap.add_argument('--budget', type=float, default=200.0, help='seconds after which no new timing starts')
    ap.add_argument('--workers', type=int, default=12)
    ap.add_argument('--sections', default='main,other')
    ap.add_argument('--final', action='store_true', help='validation of the library dispatch (mv2) instead of the exploration')
    ap.add_argument('--only', default=None, help='comma-separated family substrings (e.g. lut): time only those candidates plus bf16 / tinygemm / current kernels')
    a = ap.parse_args()
    t0 = time.time()
    if CPU or a.cpu:
        bad = 0
        for (N, Kd) in [(64, 512), (32, 768)]:
            for M in (1, 16):
                d = make_data(N, Kd, M, 'cpu', torch.float32)
                for name, fam, fmt, mk in candidates(N, Kd, M, cpu=True):
                    if fmt not in ('w4a16', 'bcq'): continue
                    try:
                        e = check(fmt, d, mk(d)())
                        ok = e < 1e-3
                    except Exception as ex:
                        e, ok = f'{type(ex).__name__}: {ex}', False
                        traceback.print_exc()
                    bad += not ok
                    print(f'{N}x{Kd} M={M} {name:40s} rel.err {e}', 'ok' if ok else 'FAIL', flush=True)
        bad += lut_checks()[0]
        r = final_checks('cpu', ((40, 512, 128), (33, 512, 64)))
        bad += len(r['bad']) + (not r['locks_zero'])
        print('cpu check done,', bad, 'failures', f'({time.time() - t0:.0f} s)')
        sys.exit(1 if bad else 0)

    os.makedirs(a.out, exist_ok=True)
    dev = torch.device('cuda')
    res = dict(device=torch.cuda.get_device_name(), triton=triton.__version__, torch=torch.__version__, rows=[], floors={}, date=time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()))
    path = os.path.join(a.out, 'kernel_sweep.json')
    save = lambda: json.dump(res, open(path, 'w'), indent=1)
    main_shape = [(9216, 2560, 1), (9216, 2560, 16)]
    other = [(2560, 9216, 1), (4096, 2560, 1), (2560, 9216, 16), (4096, 2560, 16)]
    if a.final:
        main_shape = [(9216, 2560, 1), (4096, 2560, 1), (2560, 9216, 1), (8192, 2560, 1), (1024, 2560, 1), (2560, 4096, 1)]
        other = [(9216, 2560, 16), (4096, 2560, 16), (2560, 9216, 16)]
    if a.only:   # a focused M = 1 round
        main_shape, other = [(9216, 2560, 1)], [(4096, 2560, 1), (2560, 9216, 1)]
    if a.only and ('_T' in a.only or '_C' in a.only or '_R' in a.only):   # round 6: every engine M = 1 shape of Qwen3.5-4B precompiled in parallel
        main_shape, other = [(9216, 2560, 1), (4096, 2560, 1), (2560, 9216, 1), (12352, 2560, 1), (2560, 4096, 1), (10240, 2560, 1)], []
    jobs = [(N, Kd, M, [c[0] for c in _cands(N, Kd, M)]) for N, Kd, M in main_shape]
    t = time.time()
    checks = [('check', sh, dt) for sh in CHECK_SHAPES for dt in CHECK_DTYPES] if a.final else []
    if a.only and 'lut' in a.only: checks += [('lutcheck', Q, g) for Q in (2, 4) for g in (64, 128)]
    pre = precompile(jobs, a.workers, checks)
    lc = [pre.pop(k) for k in list(pre) if k[0] == 'lutcheck']
    if lc:
        res['lut_checks'] = dict(bad=sum(r[0] for r in lc), rows=[row for r in lc for row in r[1]])
        print(f"lut checks: {len(res['lut_checks']['rows'])} launches, {res['lut_checks']['bad']} failures",
              [r for r in res['lut_checks']['rows'] if not r.get('ok')][:8], flush=True)
    if a.final:
        cr = [pre.pop(k) for k in list(pre) if k[0] == 'check']
        res['checks'] = dict(launches=sum(r['n'] for r in cr), bad=[b for r in cr for b in r['bad']], fails=[r['fail'] for r in cr if 'fail' in r],
                             max_err=max(r['max_err'] for r in cr), locks_zero=all(r['locks_zero'] for r in cr))
        print('checks:', {k: v for k, v in res['checks'].items() if k != 'bad'}, 'bad:', res['checks']['bad'][:5], flush=True)
    print(f'precompiled {len(pre)} candidates in {time.time() - t:.0f} s', flush=True)
    res['precompile_s'] = time.time() - t
    # floors: the benchmark runner's (empty kernel, streaming read of the key shape's W4A16 bytes; same timer)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'tests'))
    from gpu_kernels_run import floors
    res['floors'] = floors()
    save()

    def time_shape(N, Kd, M, names=None, prechecked=None):
        d = make_data(N, Kd, M, 'cuda', torch.bfloat16)
        out = []
        for name, fam, fmt, mk in _cands(N, Kd, M):
            if names is not None and _sig(name) not in names and fam not in ('base', 'w4_cur', 'bcq_cur'): continue
            if time.time() - t0 > a.budget: print('budget spent; stop'); res['stopped_at'] = [N, Kd, M, name]; break
            r = dict(N=N, K=Kd, M=M, name=name, family=fam)
            p = (prechecked or {}).get((N, Kd, M, name))
            try:
                if p is not None and 'fail' in p: r['fail'] = p['fail']; out.append(r); continue
                fn = mk(d)
                if p is None or p.get('err') is None:
                    y = fn(); r['err'] = check(fmt, d, y)
                else: r['err'] = p['err']
                if r['err'] is not None and not r['err'] < 1e-3: r['fail'] = f"rel. error {r['err']:.3g}"; out.append(r); continue
                r['us'] = Kn._bench(fn, 5)
            except Exception as e:
                r['fail'] = f'{type(e).__name__}: {str(e)[:300]}'
            out.append(r)
        res['rows'] += out
        save()
        ok = sorted([r for r in out if 'us' in r], key=lambda r: r['us'])
        print(f'== {N}x{Kd} M={M}', flush=True)
        for r in ok: print(f"  {r['us']:7.2f} us  {r['family']:10s} {r['name']:40s} err {_fmt(r['err'])}", flush=True)
        for r in out:
            if 'fail' in r: print(f"  FAIL {r['name']}: {r['fail'][:160]}", flush=True)
        return out

    best = {}
    for N, Kd, M in main_shape:
        out = time_shape(N, Kd, M, prechecked=pre)
        for fam in {r['family'] for r in out}:
            rs = sorted([r for r in out if r['family'] == fam and 'us' in r], key=lambda r: r['us'])
            best[(M, fam)] = list(dict.fromkeys(_sig(r['name']) for r in rs))[:2]
    if 'other' in a.sections:
        for N, Kd, M in other:
            if time.time() - t0 > a.budget: break
            time_shape(N, Kd, M)
    res['total_s'] = time.time() - t0
    save()
    print(f'done in {res["total_s"]:.0f} s -> {path}')

if __name__ == '__main__':
    main()
