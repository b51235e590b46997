"""Prototype (not in the library): a Marlin-style W4A16 skinny GEMM (M = 1..16 tokens) written in Gluon, Triton's
explicit-layout dialect, for the H200 (sm_90; Triton 3.6). Session 11 found that Triton's `tl.dot` on our INT4 layouts
routes the unpacked codes through shared memory (STS.U16 + LDSM); Gluon lets the layout be written down instead:

* **Fragment layout.** The weight is repacked once into [N/16, K/64, 32 lanes, 4 k16 steps] int32 words: the word a
  lane loads for one k16 step holds exactly its 8 values of the mma.m16n8k16 A fragment (rows g, g+8; four k), so
  the unpacked registers feed `mma_v2` with no data movement (`gl.convert_layout(..., assert_trivial=True)` checks it
  at compile time). One 16-byte load per lane covers 4 k16 steps.
* **Dequantisation: 3 shifts + 4 `lop3` per word.** `lop3(w >> 4i, 0x000F000F, 0x43004300)` gives two bf16 values
  128 + code (the nibble lands in the mantissa of 128.0). The offset (code − 8 = (128 + code) − 136) is folded into a
  second mma with a constant A of 136 per k16 step, and the group scale is applied in fp32 after each 128-wide group.
* **k order.** Inside each 64-wide k block the fragment's k order is permuted (the same for A and B), so that a lane's
  16 activation values are contiguous in x: two 16-byte loads from global per k64, no shared memory at all.
* **Grid.** One CTA = WM row blocks of 16 × WK warps splitting K (a 3-D dot, reduced over the warps at the end);
  groups are prefetched DEPTH − 1 ahead in registers.

    PYTHONPATH=<triton 3.6 dir>:. python scripts/gluon_w4.py census WK NT K WM [DEPTH]   # offline sm_90 SASS census
    python scripts/gluon_w4.py check-pack                                               # packer round trip (CPU)

`scripts/gluon_w4_bench.py` checks it against the reference and times it beside the library's kernels on a GPU.
"""
import collections, os, re, subprocess, sys, tempfile
import torch

# ---------------------------------------------------------------------------------------------------- packing (torch)
from effqwen.kernels import unpack_int4, _to_int32

P_OF_J = [(j >> 1) + 4 * (j & 1) for j in range(8)]   # nibble slot of fragment element j = r0 + 2 r1 + 4 r2 (lop3 pairs slot i, i + 4)

def codes_of(weight_packed: torch.Tensor) -> torch.Tensor:
    "compressed-tensors pack-quantized (N, K/8) int32 -> (N, K) nibbles 0..15 (code + 8)."
    return unpack_int4(weight_packed).to(torch.int64) + 8

def to_fragment_layout(weight_packed: torch.Tensor) -> torch.Tensor:
    """(N, K/8) compressed-tensors words -> [N/16, K/64, 32, 4] fragment words. Word (rb, kb, lane = 4 g + t, s), nibble
    slot P_OF_J[j] holds row 16 rb + g + 8 r1, k = 64 kb + 16 t + 4 s + 2 r2 + r0 (j = r0 + 2 r1 + 4 r2)."""
    c = codes_of(weight_packed)
    N, K = c.shape
    if N % 16 or K % 64: raise ValueError(f'weight ({N}, {K}): N must be a multiple of 16 and K of 64 for the fragment layout')
    c = c.view(N // 16, 2, 8, K // 64, 4, 4, 2, 2).permute(0, 3, 2, 4, 5, 6, 1, 7)   # rb, kb, g, t, s, r2, r1, r0
    w = (c.reshape(N // 16, K // 64, 32, 4, 8) << torch.tensor([4 * p for p in P_OF_J], device=c.device)).sum(-1)
    return _to_int32(w).contiguous()

def from_fragment_layout(words: torch.Tensor, N: int, K: int) -> torch.Tensor:
    "Inverse of `to_fragment_layout` (the kernel's reading of the words, in torch): (N, K) nibbles."
    c = ((words.to(torch.int64) & 0xFFFFFFFF)[..., None] >> torch.tensor([4 * p for p in P_OF_J], device=words.device)) & 0xF
    return c.view(N // 16, K // 64, 8, 4, 4, 2, 2, 2).permute(0, 6, 2, 1, 3, 4, 5, 7).reshape(N, K)

def check_pack():
    N, K = 64, 256
    wp = torch.randint(-2**31, 2**31 - 1, (N, K // 8), dtype=torch.int64).to(torch.int32)
    f, c = to_fragment_layout(wp), codes_of(wp)
    assert torch.equal(from_fragment_layout(f, N, K), c), 'round trip'
    for rb, kb, g, t, s, j in [(1, 2, 3, 1, 2, 5), (3, 0, 7, 3, 3, 7), (0, 3, 0, 0, 0, 0), (2, 1, 5, 2, 1, 2)]:
        r0, r1, r2 = j & 1, (j >> 1) & 1, j >> 2
        word = int(f[rb, kb, 4 * g + t, s]) & 0xFFFFFFFF
        assert (word >> (4 * P_OF_J[j])) & 0xF == int(c[rb * 16 + g + 8 * r1, kb * 64 + 16 * t + 4 * s + 2 * r2 + r0])
    print('fragment packing: round trip and element placement ok')

# ------------------------------------------------------------------------------------------------------ kernel (Gluon)
try:
    import triton
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
except ImportError as e:                                  # the packer above needs only torch
    gluon = None; _GLUON_ERR = e

def _bits(n): return (n - 1).bit_length()

def layouts(WK: int, NT: int, WM: int = 1):
    """The kernel's layouts for WK warps splitting K, WM row blocks of 16 and NT (8 or 16) token columns. Warp id =
    wm + WM·wk (the order of the MMA layout for warps_per_cta [WK, WM, 1])."""
    MMA = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[WK, WM, 1], instr_shape=[1, 16, 8])
    A = gl.DotOperandLayout(operand_index=0, parent=MMA, k_width=2)
    B = gl.DotOperandLayout(operand_index=1, parent=MMA, k_width=2)
    # the words of one k64 step: idx = s + 4·lane + 128·warp, 4 consecutive words (one 16-byte load) per lane
    WL = gl.DistributedLinearLayout(reg_bases=[[1], [2]], lane_bases=[[4], [8], [16], [32], [64]],
                                    warp_bases=[[128 << i] for i in range(_bits(WK * WM))], block_bases=[], shape=[128 * WK * WM])
    # x of one k64 block as [WK, NT, 4 (t), 16 (e)], physical k = 16 t + e, e = 4 s + 2 rb + r0 (the WM warps load the same x)
    XL = gl.DistributedLinearLayout(reg_bases=[[0, 0, 0, 1], [0, 0, 0, 2], [0, 0, 0, 4], [0, 0, 0, 8]] + ([[0, 8, 0, 0]] if NT == 16 else []),
                                    lane_bases=[[0, 0, 1, 0], [0, 0, 2, 0], [0, 1, 0, 0], [0, 2, 0, 0], [0, 4, 0, 0]],
                                    warp_bases=[[0, 0, 0, 0]] * _bits(WM) + [[1 << i, 0, 0, 0] for i in range(_bits(WK))],
                                    block_bases=[], shape=[WK, NT, 4, 16])
    return MMA, A, B, WL, XL

if gluon is not None:
    @gluon.jit
    def _lop3(w, m, c):
        "(w & m) | c in one instruction (ptxas otherwise emits an and and an or)."
        return gl.inline_asm_elementwise("lop3.b32 $0, $1, $2, $3, 0xea;", "=r,r,r,r", [w, m, c], dtype=gl.int32, is_pure=True, pack=1)

    @gluon.jit
    def _pair(q):
        "The two bf16 halves of a 32-bit word."
        return gl.join(q.to(gl.int16).to(gl.bfloat16, bitcast=True), (q >> 16).to(gl.int16).to(gl.bfloat16, bitcast=True))

    @gluon.jit
    def _dq(w, A: gl.constexpr, WK: gl.constexpr, WM: gl.constexpr):
        "One word per lane and k16 step -> its 8 values 128 + code as the [WK, 16·WM, 64] A operand (no data movement)."
        m = gl.full(w.shape, 0x000F000F, gl.int32, w.type.layout)
        c = gl.full(w.shape, 0x43004300, gl.int32, w.type.layout)
        x = gl.join(gl.join(_pair(_lop3(w, m, c)), _pair(_lop3(w >> 4, m, c))),
                    gl.join(_pair(_lop3(w >> 8, m, c)), _pair(_lop3(w >> 12, m, c))))   # [128·WM·WK, r0, r1, r2]
        x = gl.reshape(x, [WK, WM, 8, 4, 4, 2, 2, 2])           # [wk, wm, g, t, s, r0, r1, r2]
        x = gl.permute(x, [0, 1, 6, 2, 4, 7, 3, 5])             # [wk, wm, r1, g, s, r2, t, r0]
        return gl.convert_layout(gl.reshape(x, [WK, 16 * WM, 64]), A, assert_trivial=True)

    @gluon.jit
    def _xb(x_ptr, xoff, xmask, kb, B: gl.constexpr, WK: gl.constexpr, NT: gl.constexpr):
        "x of k64 block kb (per warp) as the B operand: logical k = 16 s + 8 rb + 2 t + r0 <-> physical 16 t + 4 s + 2 rb + r0."
        v = gl.load(x_ptr + xoff + kb * 64, mask=xmask, other=0.0)   # [wk, n, t, e]
        v = gl.permute(gl.reshape(v, [WK, NT, 4, 4, 2, 2]), [0, 3, 4, 2, 5, 1])   # [wk, s, rb, t, r0, n]
        return gl.convert_layout(gl.reshape(v, [WK, 64, NT]), B, assert_trivial=True)

    @gluon.jit
    def _stage(w_ptr, s_ptr, x_ptr, woff, soff, xoff, xmask, g, B: gl.constexpr, WK: gl.constexpr, NT: gl.constexpr, HG: gl.constexpr):
        "The loads of group g: its two k64 steps of words and x, and its scales."
        return (gl.load(w_ptr + woff + (g * HG) * 128), gl.load(w_ptr + woff + (g * HG + 1) * 128),
                _xb(x_ptr, xoff, xmask, g * HG, B, WK, NT), _xb(x_ptr, xoff, xmask, g * HG + 1, B, WK, NT), gl.load(s_ptr + soff + g))

    @gluon.jit
    def _group(acc, st, a136, A: gl.constexpr, WK: gl.constexpr, WM: gl.constexpr, NT: gl.constexpr, MMA: gl.constexpr):
        "acc += scale · (W − 8)·x over one 128-wide group: two k64 mma steps on 128 + code, minus the constant-A 136 mma."
        w0, w1, x0, x1, sc = st
        p = gl.zeros([WK, 16 * WM, NT], gl.float32, MMA)
        p = gl.nvidia.ampere.mma_v2(_dq(w0, A, WK, WM), x0, p)
        p = gl.nvidia.ampere.mma_v2(_dq(w1, A, WK, WM), x1, p)
        c = gl.zeros([WK, 16 * WM, NT], gl.float32, MMA)
        c = gl.nvidia.ampere.mma_v2(a136, x0, c)
        c = gl.nvidia.ampere.mma_v2(a136, x1, c)
        return acc + sc.to(gl.float32)[:, :, None] * (p - c)

    @gluon.jit
    def _pipelined(acc, w_ptr, s_ptr, x_ptr, woff, soff, xoff, xmask, a136, NG: gl.constexpr, DEPTH: gl.constexpr, A: gl.constexpr, B: gl.constexpr,
                   WK: gl.constexpr, WM: gl.constexpr, NT: gl.constexpr, HG: gl.constexpr, MMA: gl.constexpr):
        "The group loop with the next DEPTH − 1 groups' loads in flight (registers rotate; the tail re-loads the last group)."
        sa = _stage(w_ptr, s_ptr, x_ptr, woff, soff, xoff, xmask, 0, B, WK, NT, HG)
        sb = _stage(w_ptr, s_ptr, x_ptr, woff, soff, xoff, xmask, gl.minimum(1, NG - 1), B, WK, NT, HG)
        if DEPTH == 3:
            sd = _stage(w_ptr, s_ptr, x_ptr, woff, soff, xoff, xmask, gl.minimum(2, NG - 1), B, WK, NT, HG)
        for g in range(NG):
            sc = _stage(w_ptr, s_ptr, x_ptr, woff, soff, xoff, xmask, gl.minimum(g + DEPTH, NG - 1), B, WK, NT, HG)
            acc = _group(acc, sa, a136, A, WK, WM, NT, MMA)
            if DEPTH == 3:
                sa = sb
                sb = sd
                sd = sc
            else:
                sa = sb
                sb = sc
        return acc

    @gluon.jit
    def w4_fragment_kernel(w_ptr, s_ptr, x_ptr, y_ptr, M, N, K: gl.constexpr, GROUP: gl.constexpr, WK: gl.constexpr, NT: gl.constexpr,
                           WM: gl.constexpr, DEPTH: gl.constexpr, MMA: gl.constexpr, A: gl.constexpr, B: gl.constexpr,
                           WL: gl.constexpr, XL: gl.constexpr):
        "y[M, N] = x[M, K] · Wᵀ for M ≤ NT; grid N / (16·WM)."
        gl.static_assert(GROUP == 128, 'group 128 (two k64 steps per group)')
        gl.static_assert((DEPTH == 0) or (DEPTH == 2) or (DEPTH == 3), 'DEPTH 0 (all loads first), 2 or 3')
        KB: gl.constexpr = K // 64
        KW: gl.constexpr = K // WK            # k per warp
        NG: gl.constexpr = KW // GROUP        # groups per warp
        HG: gl.constexpr = GROUP // 64
        RM: gl.constexpr = 16 * WM            # rows per CTA
        rb = gl.program_id(0)
        xw = gl.arange(0, WK, layout=gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(3, XL))))
        xn = gl.arange(0, NT, layout=gl.SliceLayout(0, gl.SliceLayout(2, gl.SliceLayout(3, XL))))
        xt = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(3, XL))))
        xe = gl.arange(0, 16, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, XL))))
        xoff = xn[None, :, None, None] * K + xw[:, None, None, None] * KW + xt[None, None, :, None] * 16 + xe[None, None, None, :]
        xmask = (xn[None, :, None, None] < M) & (xe[None, None, None, :] < 16)
        idx = gl.arange(0, 128 * WK * WM, layout=WL)
        woff = (rb * WM + (idx >> 7) % WM) * (KB * 128) + (idx >> 7) // WM * (KW // 64 * 128) + (idx & 127)
        woff = gl.max_contiguous(gl.multiple_of(woff, 4), 4)
        ACC_R: gl.constexpr = gl.SliceLayout(2, MMA)
        sw = gl.arange(0, WK, layout=gl.SliceLayout(1, ACC_R))
        sr = gl.arange(0, RM, layout=gl.SliceLayout(0, ACC_R))
        soff = (rb * RM + sr[None, :]) * (K // GROUP) + sw[:, None] * NG
        a136 = gl.full([WK, RM, 64], 136.0, gl.bfloat16, A)
        acc = gl.zeros([WK, RM, NT], gl.float32, MMA)
        if DEPTH == 0:   # the warp's whole K slice of weight in flight at once: cp.async into shared memory, one commit group per group
            bufs = ()   # one allocation per k64 step, so that Triton's barrier analysis sees no overlap between the copies
            for g in gl.static_range(NG):
                for h in gl.static_range(HG):
                    b = gl.allocate_shared_memory(gl.int32, [128 * WK * WM], gl.SwizzledSharedLayout(1, 1, 1, [0]))
                    gl.nvidia.ampere.async_copy.async_copy_global_to_shared(b, w_ptr + woff + (g * HG + h) * 128)
                    bufs = bufs + (b,)
                gl.nvidia.ampere.async_copy.commit_group()
            for g in gl.static_range(NG):
                sc = gl.load(s_ptr + soff + g)
                x0 = _xb(x_ptr, xoff, xmask, g * HG, B, WK, NT)
                x1 = _xb(x_ptr, xoff, xmask, g * HG + 1, B, WK, NT)
                gl.nvidia.ampere.async_copy.wait_group(NG - 1 - g)   # this thread's copies of group g have landed (it reads only its own words)
                acc = _group(acc, (bufs[g * HG].load(WL), bufs[g * HG + 1].load(WL), x0, x1, sc), a136, A, WK, WM, NT, MMA)
        else:
            acc = _pipelined(acc, w_ptr, s_ptr, x_ptr, woff, soff, xoff, xmask, a136, NG, DEPTH, A, B, WK, WM, NT, HG, MMA)
        out = gl.sum(acc, axis=0)                                   # [RM, NT]: the WK warps' partial sums
        OL: gl.constexpr = gl.SliceLayout(0, MMA)
        orr = gl.arange(0, RM, layout=gl.SliceLayout(1, OL))
        on = gl.arange(0, NT, layout=gl.SliceLayout(0, OL))
        gl.store(y_ptr + on[None, :] * N + rb * RM + orr[:, None], out.to(gl.bfloat16), mask=on[None, :] < M)

LAST = {}   # the CompiledKernel of the last launch (for the occupancy diagnostic)

def check_shape(M: int, N: int, K: int, WK: int, WM: int):
    "Clear errors for shapes the prototype does not cover."
    if not 1 <= M <= 16: raise ValueError(f'M={M}: the fragment kernel takes 1..16 tokens (verify width); use the dequant + cuBLAS path above')
    if N % (16 * WM): raise ValueError(f'N={N} is not a multiple of 16·WM = {16 * WM}: pick a smaller WM')
    if K % (128 * WK): raise ValueError(f'K={K} is not a multiple of 128·WK = {128 * WK} (each warp takes whole groups): pick another WK')

def w4_fragment_mm(x, words, scales, WK: int = 4, WM: int = 1, DEPTH: int = 2, out=None):
    "x (M, K) bf16 @ Wᵀ with W in the fragment layout (`to_fragment_layout`) and (N, K/128) bf16 scales -> (M, N) bf16."
    if gluon is None: raise ImportError(f'the fragment kernel needs triton.experimental.gluon: {_GLUON_ERR}')
    M, K = x.shape; N = words.shape[0] * 16
    check_shape(M, N, K, WK, WM)
    NT = 8 if M <= 8 else 16
    y = out if out is not None else torch.empty(M, N, dtype=torch.bfloat16, device=x.device)
    MMA, A, B, WL, XL = layouts(WK, NT, WM)
    LAST['kernel'] = w4_fragment_kernel[(N // (16 * WM),)](words, scales, x, y, M, N, K=K, GROUP=128, WK=WK, NT=NT, WM=WM, DEPTH=DEPTH,
                                          MMA=MMA, A=A, B=B, WL=WL, XL=XL, num_warps=WK * WM)
    return y

# -------------------------------------------------------------------------------------------------- offline census
def compile_offline(WK: int, NT: int, K: int, WM: int = 1, DEPTH: int = 2):
    "Compile for sm_90 without a GPU (the Triton wheel ships ptxas)."
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    MMA, A, B, WL, XL = layouts(WK, NT, WM)
    consts = dict(K=K, GROUP=128, WK=WK, NT=NT, WM=WM, DEPTH=DEPTH, MMA=MMA, A=A, B=B, WL=WL, XL=XL)
    sig = {'w_ptr': '*i32', 's_ptr': '*bf16', 'x_ptr': '*bf16', 'y_ptr': '*bf16', 'M': 'i32', 'N': 'i32'} | {k: 'constexpr' for k in consts}
    return triton.compile(GluonASTSource(fn=w4_fragment_kernel, signature=sig, constexprs=consts, attrs={(i,): [['tt.divisibility', 16]] for i in range(4)}),
                          target=GPUTarget('cuda', 90, 32), options={'num_warps': WK * WM})

def census(kern) -> tuple[str, dict, list]:
    "(SASS, instruction counts, resource usage) of a compiled kernel."
    f = tempfile.NamedTemporaryFile(suffix='.cubin', delete=False); f.write(kern.asm['cubin']); f.close()
    tool = os.path.join(os.path.dirname(triton.__file__), 'backends/nvidia/bin/cuobjdump')
    sass = subprocess.run([tool, '-sass', f.name], capture_output=True, text=True).stdout
    ops = collections.Counter(re.findall(r'^\s+/\*[0-9a-f]+\*/\s+(?:@!?P\d+\s+)?([A-Z][A-Z0-9_.]*)', sass, re.M))
    res = subprocess.run([tool, '-res-usage', f.name], capture_output=True, text=True).stdout
    os.unlink(f.name)
    return sass, dict(sorted(ops.items())), re.findall(r'REG:\d+|STACK:\d+|SHARED:\d+|LOCAL:\d+', res)

if __name__ == '__main__':
    if sys.argv[1:2] == ['check-pack']: check_pack()
    elif sys.argv[1:2] == ['census']:
        a = [int(v) for v in sys.argv[2:]]
        _, ops, res = census(compile_offline(*a))
        print(ops); print(res)
    else: sys.exit(__doc__)
