"""Prototype (not in the library): BCQ sign-select on tensor cores, in Gluon, for M = 1..16 tokens on the H200 (sm_90).

BCQ stores w = Σ_q α[q, n, group] · b[q, n, k] with b = ±1 bit planes. The sign select "pick +x or −x by the bit, sum,
then scale once per group and plane" is exactly x · b_q with b_q a ±1 matrix, which a bf16 mma computes exactly (products
of ±1 and a bf16 are exact, the sum is fp32). So, as in `gluon_w4.py`:

* **Fragment layout.** Each plane is repacked once into [N/16, K/128, Q, 32 lanes, 2] int32 words: the word a lane
  loads for one k64 block holds its 32 sign bits of the mma.m16n8k16 A fragment for 4 k16 steps (bit 16 r0 + 4 s +
  2 r2 + r1 for row g + 8 r1, k16 step s, k 2 t + 8 r2 + r0); 8 bytes per lane cover a k128 chunk of one plane.
* **Sign to ±1.0 in 2 instructions per pair.** `lop3((w << (15 − p)), 0x80008000, 0x3F803F80, 0xAE)` puts bits p and
  p + 16 into the sign bits of two bf16 1.0s: ±1 pairs that feed `mma_v2` directly (no offset, no multiply).
* **α once per group and plane.** Each plane's mma accumulates into its own fp32 tile over a group; then
  acc += α_q · tile_q.
* **Everything in flight.** A warp's whole K slice of all planes is copied with cp.async into shared memory at the
  start (one commit group per k128 chunk); the math waits chunk by chunk. The x order is the same k permutation as
  the W4 prototype (16-byte loads, no shared memory).

    PYTHONPATH=<triton 3.6 dir>:.:scripts python scripts/gluon_bcq.py census WK NT K Q GROUP   # offline sm_90 SASS census
    python scripts/gluon_bcq.py check-pack                                                    # packer round trip (CPU)
"""
import sys
import torch

from effqwen.kernels import unpack_sign_words, _to_int32

def to_bcq_fragment_layout(weight_signs: torch.Tensor) -> torch.Tensor:
    """(Q, N, K/32) words of `pack_sign_words` -> [N/16, K/128, Q, 32, 2] fragment words. Word (rb, kc, q, lane = 4 g + t, h),
    bit 16 r0 + 4 s + 2 r2 + r1 holds plane q's sign (1 = +1) of row 16 rb + 8 r1 + g, k = 128 kc + 64 h + 16 t + 4 s + 2 r2 + r0."""
    Q, N, KW = weight_signs.shape
    K = KW * 32
    if N % 16 or K % 128: raise ValueError(f'weight_signs ({Q}, {N}, {KW}): N must be a multiple of 16 and K = 32·{KW} of 128 for the fragment layout')
    b = (unpack_sign_words(weight_signs) > 0).to(torch.int64)                       # (Q, N, K) bits
    b = b.view(Q, N // 16, 2, 8, K // 128, 2, 4, 4, 2, 2)                           # q, rb, r1, g, kc, h, t, s, r2, r0
    b = b.permute(1, 4, 0, 3, 6, 5, 9, 7, 8, 2).reshape(N // 16, K // 128, Q, 32, 2, 32)   # rb, kc, q, (g t), h, (r0 s r2 r1)
    return _to_int32((b << torch.arange(32, device=b.device)).sum(-1)).contiguous()

def from_bcq_fragment_layout(words: torch.Tensor) -> torch.Tensor:
    "Inverse of `to_bcq_fragment_layout` (the kernel's reading of the words, in torch): (Q, N, K) signs ±1 (int8)."
    NB, KC, Q = words.shape[:3]
    bits = ((words.to(torch.int64) & 0xFFFFFFFF)[..., None] >> torch.arange(32, device=words.device)) & 1
    b = bits.view(NB, KC, Q, 8, 4, 2, 2, 4, 2, 2)                                    # rb, kc, q, g, t, h, r0, s, r2, r1
    b = b.permute(2, 0, 9, 3, 1, 5, 4, 7, 8, 6).reshape(Q, NB * 16, KC * 128)
    return (b * 2 - 1).to(torch.int8)

def check_pack():
    from effqwen.kernels import pack_sign_words
    Q, N, K = 3, 48, 384
    s = torch.randint(0, 2, (Q, N, K), dtype=torch.int8) * 2 - 1
    f = to_bcq_fragment_layout(pack_sign_words(s))
    assert torch.equal(from_bcq_fragment_layout(f), s), 'round trip'
    for rb, kc, q, g, t, h, s_, r2, r1, r0 in [(1, 2, 0, 3, 1, 1, 2, 1, 0, 1), (2, 0, 2, 7, 3, 0, 3, 0, 1, 0), (0, 1, 1, 0, 0, 1, 1, 1, 1, 1)]:
        word = int(f[rb, kc, q, 4 * g + t, h]) & 0xFFFFFFFF
        bit = (word >> (16 * r0 + 4 * s_ + 2 * r2 + r1)) & 1
        assert 2 * bit - 1 == int(s[q, 16 * rb + 8 * r1 + g, 128 * kc + 64 * h + 16 * t + 4 * s_ + 2 * r2 + r0])
    print('BCQ fragment packing: round trip and element placement ok')

try:
    import triton
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    import gluon_w4 as W
except ImportError as e:
    gluon = None; _GLUON_ERR = e

def layouts(WK: int, NT: int, WM: int = 1):
    "MMA / operand layouts and the x layout of the W4 prototype, plus the layout of one chunk's words: [64·WK·WM], 2 words per lane."
    MMA, A, B, _, XL = W.layouts(WK, NT, WM)
    WL2 = gl.DistributedLinearLayout(reg_bases=[[1]], lane_bases=[[2], [4], [8], [16], [32]], warp_bases=[[64 << i] for i in range(W._bits(WK * WM))],
                                     block_bases=[], shape=[64 * WK * WM])
    return MMA, A, B, WL2, XL

if gluon is not None:
    @gluon.jit
    def _sgn(w, SH: gl.constexpr):
        "Bits 15 − SH and 31 − SH of w as two bf16 ±1.0 (1 -> +1): shift, then lop3 (~a & 0x80008000) | 0x3F803F80."
        m = gl.full(w.shape, 0x80008000 - 2**32, gl.int32, w.type.layout)
        c = gl.full(w.shape, 0x3F803F80, gl.int32, w.type.layout)
        return gl.inline_asm_elementwise("lop3.b32 $0, $1, $2, $3, 0xae;", "=r,r,r,r", [w << SH, m, c], dtype=gl.int32, is_pure=True, pack=1)

    @gluon.jit
    def _u(w, R: gl.constexpr):
        "The 4 k16 steps of fragment register R = 2 r2 + r1 (bit 4 s + R): [n, s0, s1] int32 pairs."
        return gl.join(gl.join(_sgn(w, 15 - R), _sgn(w, 11 - R)), gl.join(_sgn(w, 7 - R), _sgn(w, 3 - R)))

    @gluon.jit
    def _signs_a(w, A: gl.constexpr, WK: gl.constexpr, WM: gl.constexpr):
        "One word per lane (one plane, one k64 block) -> its 32 ±1 values as the [WK, 16·WM, 64] A operand (no data movement)."
        x = gl.join(gl.join(W._pair(_u(w, 0)), W._pair(_u(w, 1))), gl.join(W._pair(_u(w, 2)), W._pair(_u(w, 3))))   # [n, s0, s1, r0, r1, r2]
        x = gl.reshape(gl.permute(x, [0, 2, 1, 3, 4, 5]), [WK, WM, 8, 4, 4, 2, 2, 2])                           # [wk, wm, g, t, s, r0, r1, r2]
        x = gl.permute(x, [0, 1, 6, 2, 4, 7, 3, 5])                                                              # [wk, wm, r1, g, s, r2, t, r0]
        return gl.convert_layout(gl.reshape(x, [WK, 16 * WM, 64]), A, assert_trivial=True)

    @gluon.jit
    def bcq_fragment_kernel(b_ptr, a_ptr, x_ptr, y_ptr, M, N, K: gl.constexpr, GROUP: gl.constexpr, Q: gl.constexpr, WK: gl.constexpr,
                            NT: gl.constexpr, WM: gl.constexpr, MMA: gl.constexpr, A: gl.constexpr, B: gl.constexpr, WL2: gl.constexpr, XL: gl.constexpr):
        "y[M, N] = x[M, K] · Wᵀ, W = Σ_q α_q b_q, for M ≤ NT; grid N / (16·WM)."
        gl.static_assert((GROUP == 64) or (GROUP == 128) or (GROUP == 256), 'group 64, 128 or 256')
        KC: gl.constexpr = K // 128           # k128 chunks per row
        KW: gl.constexpr = K // WK            # k per warp
        KCW: gl.constexpr = KW // 128         # chunks per warp
        GK: gl.constexpr = GROUP // 64        # k64 blocks per group
        NGR: gl.constexpr = K // GROUP
        RM: gl.constexpr = 16 * WM            # rows per CTA
        rb = gl.program_id(0)
        xw = gl.arange(0, WK, layout=gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(3, XL))))
        xn = gl.arange(0, NT, layout=gl.SliceLayout(0, gl.SliceLayout(2, gl.SliceLayout(3, XL))))
        xt = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(3, XL))))
        xe = gl.arange(0, 16, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, XL))))
        xoff = xn[None, :, None, None] * K + xw[:, None, None, None] * KW + xt[None, None, :, None] * 16 + xe[None, None, None, :]
        xmask = (xn[None, :, None, None] < M) & (xe[None, None, None, :] < 16)
        idx = gl.arange(0, 64 * WK * WM, layout=WL2)   # warp = wm + WM·wk
        woff = gl.max_contiguous(gl.multiple_of(((rb * WM + (idx >> 6) % WM) * KC + (idx >> 6) // WM * KCW) * (Q * 64) + (idx & 63), 2), 2)
        ACC_R: gl.constexpr = gl.SliceLayout(2, MMA)
        sw = gl.arange(0, WK, layout=gl.SliceLayout(1, ACC_R))
        sr = gl.arange(0, RM, layout=gl.SliceLayout(0, ACC_R))
        aoff = (rb * RM + sr[None, :]) * NGR + sw[:, None] * (KW // GROUP)
        bufs = ()   # one shared allocation per (chunk, plane): Triton's barrier analysis then sees no overlap between the copies
        for c in gl.static_range(KCW):
            for q in gl.static_range(Q):
                buf = gl.allocate_shared_memory(gl.int32, [64 * WK * WM], gl.SwizzledSharedLayout(1, 1, 1, [0]))
                gl.nvidia.ampere.async_copy.async_copy_global_to_shared(buf, b_ptr + woff + (c * Q + q) * 64)
                bufs = bufs + (buf,)
            gl.nvidia.ampere.async_copy.commit_group()
        acc = gl.zeros([WK, RM, NT], gl.float32, MMA)
        zero = gl.zeros([WK, RM, NT], gl.float32, MMA)
        part = ()
        for q in gl.static_range(Q):
            part = part + (zero,)
        for c in gl.static_range(KCW):
            x0 = W._xb(x_ptr, xoff, xmask, 2 * c, B, WK, NT)
            x1 = W._xb(x_ptr, xoff, xmask, 2 * c + 1, B, WK, NT)
            gl.nvidia.ampere.async_copy.wait_group(KCW - 1 - c)   # this thread's copies of chunk c have landed (it reads only its own words)
            for h in gl.static_range(2):
                new = ()
                for q in gl.static_range(Q):
                    w0, w1 = gl.split(gl.reshape(bufs[c * Q + q].load(WL2), [32 * WK * WM, 2]))
                    if h == 0:
                        new = new + (gl.nvidia.ampere.mma_v2(_signs_a(w0, A, WK, WM), x0, part[q]),)
                    else:
                        new = new + (gl.nvidia.ampere.mma_v2(_signs_a(w1, A, WK, WM), x1, part[q]),)
                part = new
                if (2 * c + h + 1) % GK == 0:    # a group ends: α once per group and plane
                    for q in gl.static_range(Q):
                        al = gl.load(a_ptr + q * N * NGR + aoff + (2 * c + h) // GK).to(gl.float32)
                        acc += al[:, :, None] * part[q]
                    part = ()
                    for q in gl.static_range(Q):
                        part = part + (zero,)
        out = gl.sum(acc, axis=0)
        OL: gl.constexpr = gl.SliceLayout(0, MMA)
        orr = gl.arange(0, RM, layout=gl.SliceLayout(1, OL))
        on = gl.arange(0, NT, layout=gl.SliceLayout(0, OL))
        gl.store(y_ptr + on[None, :] * N + rb * RM + orr[:, None], out.to(gl.bfloat16), mask=on[None, :] < M)

LAST = {}   # the CompiledKernel of the last launch (for the occupancy diagnostic)

def check_shape(M: int, N: int, K: int, Q: int, group: int, WK: int, WM: int = 1):
    "Clear errors for shapes the prototype does not cover."
    if not 1 <= M <= 16: raise ValueError(f'M={M}: the fragment kernel takes 1..16 tokens (verify width); use dequant + cuBLAS above')
    if N % (16 * WM): raise ValueError(f'N={N} is not a multiple of 16·WM = {16 * WM}: pick a smaller WM')
    if K % (128 * WK) or (K // WK) % group: raise ValueError(f'K={K}: each of the WK={WK} warps must take whole k128 chunks and whole groups of {group}: pick another WK')
    if not 1 <= Q <= 8: raise ValueError(f'Q={Q} planes: 1..8')

def bcq_fragment_mm(x, words, alpha, WK: int = 4, WM: int = 1, out=None):
    "x (M, K) bf16 @ Wᵀ with the sign planes in the fragment layout (`to_bcq_fragment_layout`) and α (Q, N, K/group) -> (M, N) bf16."
    if gluon is None: raise ImportError(f'the fragment kernel needs triton.experimental.gluon: {_GLUON_ERR}')
    M, K = x.shape; NB, KC, Q = words.shape[:3]; N = NB * 16
    if KC * 128 != K: raise ValueError(f'words cover K = {KC * 128} but x has K = {K}')
    group = K // alpha.shape[-1]
    check_shape(M, N, K, Q, group, WK, WM)
    NT = 8 if M <= 8 else 16
    y = out if out is not None else torch.empty(M, N, dtype=torch.bfloat16, device=x.device)
    MMA, A, B, WL2, XL = layouts(WK, NT, WM)
    LAST['kernel'] = bcq_fragment_kernel[(N // (16 * WM),)](words, alpha, x, y, M, N, K=K, GROUP=group, Q=Q, WK=WK, NT=NT, WM=WM, MMA=MMA, A=A, B=B,
                                                             WL2=WL2, XL=XL, num_warps=WK * WM)
    return y

def compile_offline(WK: int, NT: int, K: int, Q: int, GROUP: int = 128, WM: int = 1):
    "Compile for sm_90 without a GPU (the Triton wheel ships ptxas)."
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    MMA, A, B, WL2, XL = layouts(WK, NT, WM)
    consts = dict(K=K, GROUP=GROUP, Q=Q, WK=WK, NT=NT, WM=WM, MMA=MMA, A=A, B=B, WL2=WL2, XL=XL)
    sig = {'b_ptr': '*i32', 'a_ptr': '*bf16', 'x_ptr': '*bf16', 'y_ptr': '*bf16', 'M': 'i32', 'N': 'i32'} | {k: 'constexpr' for k in consts}
    return triton.compile(GluonASTSource(fn=bcq_fragment_kernel, signature=sig, constexprs=consts, attrs={(i,): [['tt.divisibility', 16]] for i in range(4)}),
                          target=GPUTarget('cuda', 90, 32), options={'num_warps': WK * WM})

if __name__ == '__main__':
    if sys.argv[1:2] == ['check-pack']: check_pack()
    elif sys.argv[1:2] == ['census']:
        _, ops, res = W.census(compile_offline(*[int(v) for v in sys.argv[2:]]))
        print(ops); print(res)
    else: sys.exit(__doc__)
