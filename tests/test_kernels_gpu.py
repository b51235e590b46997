"""GPU checks of `effqwen.kernels` (skipped without CUDA).

marlin-style: each kernel's product against the dequantized reference, `mean|C - C_ref| / mean|C_ref| < 1e-3`.
The fast path (weights in the kernel layout, tensor-core kernels with inline-PTX unpacking) is swept over
M in {1, 2, 4, 8, 16, 64, 512}, N not a multiple of any block, K not a power of two, several groups and both half
dtypes, plus every tuning candidate on one shape; the compressed-tensors-layout kernels (unchanged) on a few M;
split-K counters left at zero; bad inputs raise ValueError; the custom ops pass `opcheck` and compile under
`torch.compile(fullgraph=True)`.
"""
import pytest, torch, torch.nn as nn
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')

from effqwen.core import rel_error
from effqwen import kernels as K

MS = (1, 2, 4, 8, 16, 64, 512)
SHAPES = [(33, 512), (1000, 2560), (4096, 384)]   # (N, K): odd N, K = 3 * 128

def w4(N, Kd, group, dtype, dev='cuda'):
    return (K.pack_int4(torch.randint(-8, 8, (N, Kd), device=dev)),
            (torch.rand(N, Kd // group, device=dev) * 0.02 + 0.002).to(dtype))

def bcq(Q, N, Kd, group, dtype, dev='cuda'):
    return (K.pack_sign_words(torch.randint(0, 2, (Q, N, Kd), device=dev) * 2 - 1),
            (torch.rand(Q, N, Kd // group, device=dev) * 0.02 / 2 ** torch.arange(Q, device=dev)[:, None, None]).to(dtype))

def ref_dtype(M, dtype, kl=True):
    "Large M runs dequantize (to x's dtype) + cuBLAS by default: its reference rounds the weight the same way."
    return dtype if M > (64 if kl else 16) else torch.float32

def locks_zero():
    torch.cuda.synchronize()
    return int(K._LOCKS[torch.device('cuda', torch.cuda.current_device())].abs().sum()) == 0

@pytest.mark.parametrize('N,Kd,group,dtype', [(N, Kd, g, dt) for N, Kd in SHAPES for g in (32, 128) for dt in (torch.bfloat16, torch.float16)
                                               if dt == torch.bfloat16 or (N, Kd) == SHAPES[1]])
def test_w4a16_kernel_layout_sweep(N, Kd, group, dtype):
    w, s = w4(N, Kd, group, dtype); wk = K.w4a16_to_kernel_layout(w)
    for M in MS:
        x = torch.randn(M, Kd, device='cuda', dtype=dtype)
        e = rel_error(K.w4a16_matmul(x, wk, s, kernel_layout=True), K.w4a16_mm_ref(x, w, s, weight_dtype=ref_dtype(M, dtype)))
        assert e < 1e-3, f'w4a16 tc M={M} N={N} K={Kd} g{group} {dtype}: rel. error {e:.3g}'
    assert locks_zero()

@pytest.mark.parametrize('Q,group', [(2, 64), (3, 128), (4, 256), (6, 64)])
@pytest.mark.parametrize('N,Kd', [(33, 512), (1000, 2560), (4096, 768)])
def test_bcq_kernel_layout_sweep(Q, group, N, Kd):
    for dtype in ((torch.bfloat16, torch.float16) if Q == 3 else (torch.bfloat16,)):
        b, a = bcq(Q, N, Kd, group, dtype); bk = K.bcq_to_kernel_layout(b)
        for M in MS:
            x = torch.randn(M, Kd, device='cuda', dtype=dtype)
            e = rel_error(K.bcq_matmul(x, bk, a, kernel_layout=True), K.bcq_mm_ref(x, b, a, weight_dtype=ref_dtype(M, dtype)))
            assert e < 1e-3, f'bcq tc Q={Q} M={M} N={N} K={Kd} g{group} {dtype}: rel. error {e:.3g}'

def test_layout_conversion_on_gpu():
    "The conversion gives the same bits on the GPU as on the CPU, and round-trips."
    w, _ = w4(1000, 2560, 128, torch.bfloat16); b, _ = bcq(3, 100, 512, 128, torch.bfloat16)
    assert torch.equal(K.w4a16_to_kernel_layout(w).cpu(), K.w4a16_to_kernel_layout(w.cpu()))
    assert torch.equal(K.w4a16_from_kernel_layout(K.w4a16_to_kernel_layout(w)), w)
    assert torch.equal(K.bcq_from_kernel_layout(K.bcq_to_kernel_layout(b)), b)

def test_compressed_tensors_layout_kernels():
    "The kernels that read the compressed-tensors layout directly (unchanged) still agree with the reference."
    w, s = w4(1000, 2560, 128, torch.bfloat16); b, a = bcq(3, 1000, 2560, 128, torch.bfloat16)
    for M in (1, 5, 16, 64, 100):
        x = torch.randn(M, 2560, device='cuda', dtype=torch.bfloat16)
        e = rel_error(K.w4a16_matmul(x, w, s), K.w4a16_mm_ref(x, w, s, weight_dtype=ref_dtype(M, x.dtype, False)))
        assert e < 1e-3, f'w4a16 M={M}: {e:.3g}'
        e = rel_error(K.bcq_matmul(x, b, a), K.bcq_mm_ref(x, b, a, weight_dtype=ref_dtype(M, x.dtype, False)))
        assert e < 1e-3, f'bcq M={M}: {e:.3g}'

@pytest.mark.parametrize('M', [1, 16, 40])
@pytest.mark.parametrize('fmt', ['w4a16', 'bcq'])
def test_every_candidate(fmt, M):
    "Whatever `tune` picks is correct: every kernel-layout candidate config, split-K included, on one shape."
    N, Kd, group = 1000, 2560, 128
    w, s = w4(N, Kd, group, torch.bfloat16) if fmt == 'w4a16' else bcq(3, N, Kd, group, torch.bfloat16)
    wk = K.w4a16_to_kernel_layout(w) if fmt == 'w4a16' else K.bcq_to_kernel_layout(w)
    mm, ref = (K.w4a16_matmul, K.w4a16_mm_ref) if fmt == 'w4a16' else (K.bcq_matmul, K.bcq_mm_ref)
    x = torch.randn(M, Kd, device='cuda', dtype=torch.bfloat16)
    for c in K._candidates(fmt, M, Kd, group, kl=True, N=N):
        r = ref(x, w, s, weight_dtype=torch.bfloat16 if c.kernel == 'dequant' else torch.float32)
        for _ in range(2):   # twice: the split-K counters must have been reset by the first launch
            e = rel_error(mm(x, wk, s, config=c, kernel_layout=True), r)
            assert e < 1e-3, f'{fmt} M={M} {c}: rel. error {e:.3g}'
    assert locks_zero()

def test_fp32_activations():
    w, s = w4(200, 512, 128, torch.float32); b, a = bcq(2, 200, 512, 64, torch.float32)
    x = torch.randn(3, 512, device='cuda')
    assert rel_error(K.w4a16_matmul(x, K.w4a16_to_kernel_layout(w), s, kernel_layout=True), K.w4a16_mm_ref(x, w, s)) < 1e-3
    assert rel_error(K.bcq_matmul(x, K.bcq_to_kernel_layout(b), a, kernel_layout=True), K.bcq_mm_ref(x, b, a)) < 1e-3

def test_poisoned_output_is_overwritten():
    "Every output element is written (outputs are fresh allocations; NaN-poison the caching allocator's memory first)."
    w, s = w4(1000, 2560, 128, torch.bfloat16); wk = K.w4a16_to_kernel_layout(w)
    for M, c in [(1, K.KernelConfig('tc', 128, 128, 4)), (7, K.KernelConfig('tc', 64, 128, 1)), (1, K.KernelConfig('gemv', 32, 256, 4))]:
        torch.full((M * 1000 * 64,), float('nan'), device='cuda', dtype=torch.bfloat16); torch.cuda.synchronize()
        y = K.w4a16_matmul(torch.randn(M, 2560, device='cuda', dtype=torch.bfloat16), wk if c.kernel == 'tc' else w, s, config=c,
                           kernel_layout=c.kernel == 'tc')
        assert torch.isfinite(y).all()

def test_bad_inputs_cuda():
    w, s = w4(64, 256, 128, torch.bfloat16)
    x = torch.randn(2, 256, device='cuda', dtype=torch.bfloat16)
    for f, msg in [(lambda: K.w4a16_matmul(x.int(), w, s), 'x has dtype'),
                   (lambda: K.w4a16_matmul(x, w.float(), s), 'weight_packed has dtype'),
                   (lambda: K.w4a16_matmul(x.T.contiguous().T, w, s), 'x is not contiguous'),
                   (lambda: K.w4a16_matmul(x, w, torch.ones(64, 3, device='cuda')), 'not a multiple of the group'),
                   (lambda: K.w4a16_matmul(x, w, s[:10].contiguous()), 'weight_scale must be'),
                   (lambda: K.w4a16_matmul(x.cpu(), w, s), 'is on cuda'),
                   (lambda: K.w4a16_matmul(x, w, s, config=K.KernelConfig('tc', 64, 128)), 'kernel layout'),
                   (lambda: K.bcq_matmul(x, *bcq(3, 64, 256, 64, torch.bfloat16)[:1], torch.ones(2, 64, 4, device='cuda')), 'weight_alpha must be')]:
        with pytest.raises(ValueError, match=msg): f()

def test_modules_and_custom_ops():
    torch.manual_seed(0)
    lin = nn.Linear(512, 96, bias=True, device='cuda', dtype=torch.bfloat16)
    for q in (K.W4A16Linear.from_float(lin, group_size=128), K.BCQLinear.from_float(lin, planes=3, group_size=64)):
        x = torch.randn(2, 3, 512, device='cuda', dtype=torch.bfloat16)
        ref = (x.float() @ q.dequantize().T).to(x.dtype) + q.bias   # the bias is added to the rounded product, as in forward
        assert rel_error(q(x), ref) < 1e-3
        cq = torch.compile(q, fullgraph=True)
        assert rel_error(cq(x), ref) < 1e-3
    w, s = w4(96, 512, 128, torch.bfloat16); b, a = bcq(3, 96, 512, 128, torch.bfloat16)
    x = torch.randn(4, 512, device='cuda', dtype=torch.bfloat16)
    torch.library.opcheck(K.w4a16_mm, (x, w, s), test_utils=('test_schema', 'test_faketensor'))
    torch.library.opcheck(K.bcq_mm, (x, b, a), test_utils=('test_schema', 'test_faketensor'))
    torch.library.opcheck(K.w4a16_mm, (x, K.w4a16_to_kernel_layout(w), s, True), test_utils=('test_schema', 'test_faketensor'))

@pytest.mark.parametrize('kernel,M,stages', [('mv2', 1, 1), ('mv2', 1, 2), ('mv', 1, 1), ('mv', 1, 2), ('tc', 1, 1), ('tc', 16, 3)])
def test_pdl_chain_equals_plain_launches(kernel, M, stages):
    """A chain of dependent W4A16 products (each output is the next one's input, launched back to back),
    launched with programmatic dependent launch and recorded in a CUDA graph, equals the same chain launched plainly,
    bit for bit: a kernel that read its input before `_pdl_wait` would see the previous step's stale values."""
    if not K.pdl_on(torch.device('cuda')): pytest.skip('programmatic dependent launch needs compute capability >= 9')
    torch.manual_seed(0)
    D, n = 2048, 12
    ws = [w4(D, D, 128, torch.bfloat16) for _ in range(n)]   # each product grows the activations ~4x: bf16 holds 12
    ws = [(K.w4a16_to_kernel_layout(w), s) for w, s in ws]
    cfg = K.KernelConfig(kernel, 64 if kernel == 'tc' else 128, 128 if kernel == 'tc' else 256, split_k=4, num_stages=stages)
    x0 = torch.randn(M, D, device='cuda', dtype=torch.bfloat16)
    def chain(x):
        for w, s in ws: x = K.w4a16_matmul(x, w, s, config=cfg, kernel_layout=True)
        return x
    own = K.PDL
    try:
        K.PDL = False; ref = chain(x0.clone())
        K.PDL = True; got = chain(x0.clone()); torch.cuda.synchronize()
        assert torch.equal(got, ref)
        xs = x0.clone()
        s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s): chain(xs); chain(xs)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g): out = chain(xs)
        for _ in range(3):
            xs.copy_(x0); g.replay()
        torch.cuda.synchronize()
    finally: K.PDL = own
    assert torch.equal(out, ref) and locks_zero()

@pytest.mark.parametrize('kernel,stages', [('mv2', 1), ('mv2', 2), ('mv', 1), ('mv', 2)])
def test_swiglu_in_matvec_equals_two_kernels(kernel, stages):
    """The down projection with the SwiGLU inside its activation loads (`w4a16_swiglu_matmul`, M = 1) equals the
    engine's SwiGLU kernel followed by the mat-vec, bit for bit (the same roundings, the same exp)."""
    from effqwen.engine import fused_swiglu
    torch.manual_seed(0)
    for N, Kd in ((2560, 9216), (1000, 2560)):
        w, s = w4(N, Kd, 128, torch.bfloat16); wk = K.w4a16_to_kernel_layout(w)
        gu = torch.randn(1, 2 * Kd, device='cuda', dtype=torch.bfloat16) * 3
        cfg = K.KernelConfig(kernel, 128, 128, split_k=4, num_stages=stages)
        assert torch.equal(K.w4a16_swiglu_matmul(gu, wk, s, config=cfg), K.w4a16_matmul(fused_swiglu(gu), wk, s, config=cfg, kernel_layout=True))
        assert locks_zero()

@pytest.mark.parametrize('M', [1, 5, 16, 40])
@pytest.mark.parametrize('N,Kd', [(1000, 2560), (4097, 384)])
def test_w8a16_head_kernel(M, N, Kd):
    "The INT8 head kernel (`w8a16_matmul`, one scale per row) against the float32 reference; the module and its compiled op; rowmax=."
    torch.manual_seed(0)
    lin = nn.Linear(Kd, N, bias=False, device='cuda')
    q = K.W8A16Linear.from_float(lin).cuda()
    x = torch.randn(M, Kd, device='cuda').to(torch.bfloat16)
    ref = (x.float() @ q.dequantize().T).to(torch.bfloat16)   # rounded as the kernel's bf16 output is (the rounding alone: ~1.4e-3 against float32)
    assert rel_error(K.w8a16_matmul(x, q.weight_codes, q.weight_scale), ref) < 2e-4
    assert rel_error(torch.compile(q, fullgraph=True)(x), ref) < 2e-4
    mx = torch.full((M + 1,), float('-inf'), device='cuda')        # rowmax=: each row's largest product, max-accumulated
    y = K.w8a16_matmul(x, q.weight_codes, q.weight_scale, rowmax=mx)
    assert torch.equal(mx[:M].to(torch.bfloat16), y.max(1).values) and mx[M] == float('-inf')   # (rounding is monotone)

@pytest.mark.parametrize('T', [1, 16])
def test_fused_argmax_equals_torch(T):
    "The engine's two-kernel argmax (`effqwen.engine.fused_argmax`) against torch's, ties included (first index); decode bookkeeping."
    from effqwen import engine as E
    torch.manual_seed(0)
    x = torch.randn(T, 248320, device='cuda').to(torch.bfloat16)
    x[0, 7] = x[0, 200000] = 40.0                          # a tie across column blocks: the first index
    if T > 1: x[1, 4096] = x[1, 4097] = 40.0              # a tie inside one block
    nt = torch.zeros(16, dtype=torch.long, device='cuda')
    E.fused_argmax(x, nt)
    assert torch.equal(nt[:T], x.argmax(-1)) and nt[0] == 7
    pos, tok, out = torch.tensor([3], device='cuda'), torch.zeros(16, dtype=torch.long, device='cuda'), torch.zeros(9, dtype=torch.long, device='cuda')
    E.fused_argmax(x[:1], nt, None, pos, tok, out)
    assert pos.item() == 4 and tok[0].item() == 7 and out[4].item() == 7
