"""GPU checks of the library kernels `effqwen.kernels.triton` (skipped without CUDA).

Marlin-style: each kernel's product against the dequantized reference, `mean|C - C_ref| / mean|C_ref| < 1e-3`, swept
over M in {1, 2, 4, 8, 16, 64, 512} (mat-vec, tensor-core, dequantize + cuBLAS), N not a multiple of any block, K not a
power of two, several groups and both half dtypes; the shipped picks and the rule; split-K counters left at zero;
programmatic dependent launch changes no bit; bad inputs raise ValueError; the modules and custom ops compile under
`torch.compile(fullgraph=True)`; the INT8 head kernel and its row maxima.
"""
import pytest, torch, torch.nn as nn
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')

from effqwen.core import rel_error
from effqwen import kernels as K
from effqwen.kernels.triton import _LOCKS

MS = (1, 2, 4, 8, 16, 64, 512)

def w4(N, Kd, group, dtype, dev='cuda'):
    return (K.pack_int4(torch.randint(-8, 8, (N, Kd), device=dev)), (torch.rand(N, Kd // group, device=dev) * 0.02 + 0.002).to(dtype))

def bcq(Q, N, Kd, group, dtype, dev='cuda'):
    return (K.pack_sign_words(torch.randint(0, 2, (Q, N, Kd), device=dev) * 2 - 1),
            (torch.rand(Q, N, Kd // group, device=dev) * 0.02 / 2 ** torch.arange(Q, device=dev)[:, None, None]).to(dtype))

def locks_zero():
    torch.cuda.synchronize()
    return int(_LOCKS[torch.device('cuda', torch.cuda.current_device())].abs().sum()) == 0

@pytest.mark.parametrize('N,Kd,group,dtype', [(33, 512, 32, torch.bfloat16), (1000, 2560, 128, torch.bfloat16), (1000, 2560, 128, torch.float16),
                                               (4096, 384, 128, torch.bfloat16), (9216, 2560, 128, torch.bfloat16)])
def test_w4a16_and_bcq_sweep(N, Kd, group, dtype):
    "Every M through the default configs (the shipped picks at the 4B gate shape on an H200, else the rule), W4A16 and BCQ3."
    w, s = w4(N, Kd, group, dtype); wk = K.w4a16_to_kernel_layout(w)
    b, a = bcq(3, N, Kd, group, dtype); bk = K.bcq_to_kernel_layout(b)
    for M in MS:
        x = torch.randn(M, Kd, device='cuda', dtype=dtype)
        rd = dtype if M > 64 else torch.float32   # large M: dequantize (to x's dtype) + cuBLAS, whose reference rounds the weight so
        e = rel_error(K.w4a16_matmul(x, wk, s, kernel_layout=True), K.w4a16_mm_ref(x, w, s, weight_dtype=rd))
        assert e < 1e-3, f'w4a16 M={M} N={N} K={Kd} g{group} {dtype}: {e:.3g}'
        rb = dtype if M > 64 or (M > 1 and group < 64) else torch.float32   # (BCQ, groups of 32: dequantize + cuBLAS from 2 rows)
        e = rel_error(K.bcq_matmul(x, bk, a, kernel_layout=True), K.bcq_mm_ref(x, b, a, weight_dtype=rb))
        assert e < 1e-3, f'bcq M={M} N={N} K={Kd} g{group} {dtype}: {e:.3g}'
    assert locks_zero()

@pytest.mark.parametrize('cfg', [K.KernelConfig('mv', 128, 256, 5), K.KernelConfig('mv', 32, 512, 1, 4, 2), K.KernelConfig('mv', 64, 256, 20, 4, 3),
                                 K.KernelConfig('tc', 64, 128, 4), K.KernelConfig('tc', 64, 64, 2, 4, 4), K.KernelConfig('dequant', 16, 512)])
def test_configs_and_other_formats(cfg):
    "Explicit configs (split-K beyond the tiles, the register prefetch, Triton's stages), Q = 2 / 4 / 6 planes, fp32 activations, the portable layout."
    N, Kd = 1000, 2560
    w, s = w4(N, Kd, 128, torch.bfloat16)
    for M in ((1,) if cfg.kernel == 'mv' else (1, 16, 40)):
        x = torch.randn(M, Kd, device='cuda', dtype=torch.bfloat16)
        rd = torch.bfloat16 if cfg.kernel == 'dequant' else torch.float32
        for _ in range(2):   # twice: the split-K counters must have been reset by the first launch
            assert rel_error(K.w4a16_matmul(x, w, s, config=cfg), K.w4a16_mm_ref(x, w, s, weight_dtype=rd)) < 1e-3, (cfg, M)
    for Q, g in ((2, 64), (4, 256), (6, 64)):
        b, a = bcq(Q, N, Kd, g, torch.float32); x = torch.randn(3, Kd, device='cuda')
        assert rel_error(K.bcq_matmul(x, b, a), K.bcq_mm_ref(x, b, a)) < 1e-3, (Q, g)
    assert locks_zero()

def test_poisoned_output_bad_inputs_and_ops():
    "Every output element is written; bad inputs raise ValueError naming the tensor; the modules and custom ops compile."
    w, s = w4(1000, 2560, 128, torch.bfloat16); wk = K.w4a16_to_kernel_layout(w)
    for M, c in [(1, K.KernelConfig('tc', 128, 128, 4)), (7, K.KernelConfig('tc', 64, 128, 1)), (1, K.KernelConfig('mv', 32, 256, 4))]:
        torch.full((M * 1000 * 64,), float('nan'), device='cuda', dtype=torch.bfloat16); torch.cuda.synchronize()
        assert torch.isfinite(K.w4a16_matmul(torch.randn(M, 2560, device='cuda', dtype=torch.bfloat16), wk, s, config=c, kernel_layout=True)).all()
    w, s = w4(64, 256, 128, torch.bfloat16)
    x = torch.randn(2, 256, device='cuda', dtype=torch.bfloat16)
    for f, msg in [(lambda: K.w4a16_matmul(x.int(), w, s), 'x has dtype'), (lambda: K.w4a16_matmul(x, w.float(), s), 'weight_packed has dtype'),
                   (lambda: K.w4a16_matmul(x.T.contiguous().T, w, s), 'x is not contiguous'),
                   (lambda: K.w4a16_matmul(x, w, torch.ones(64, 3, device='cuda')), 'not a multiple of the group'),
                   (lambda: K.w4a16_matmul(x.cpu(), w, s), 'is on cuda'), (lambda: K.w4a16_matmul(x, w, s, config=K.KernelConfig('mv')), "needs M = 1")]:
        with pytest.raises(ValueError, match=msg): f()
    lin = nn.Linear(512, 96, bias=True, device='cuda', dtype=torch.bfloat16)
    for q in (K.W4A16Linear.from_float(lin, group_size=128), K.BCQLinear.from_float(lin, planes=3, group_size=64)):
        x = torch.randn(2, 3, 512, device='cuda', dtype=torch.bfloat16)
        ref = (x.float() @ q.dequantize().T).to(x.dtype) + q.bias
        assert rel_error(q(x), ref) < 1e-3 and rel_error(torch.compile(q, fullgraph=True)(x), ref) < 1e-3
    w, s = w4(96, 512, 128, torch.bfloat16)
    torch.library.opcheck(K.w4a16_mm, (torch.randn(4, 512, device='cuda', dtype=torch.bfloat16), w, s), test_utils=('test_schema', 'test_faketensor'))

@pytest.mark.parametrize('kernel,M,stages', [('mv', 1, 1), ('mv', 1, 2), ('tc', 1, 1), ('tc', 16, 3)])
def test_pdl_chain_equals_plain_launches(kernel, M, stages):
    """A chain of dependent W4A16 products launched with programmatic dependent launch, eagerly and in a CUDA graph,
    equals the chain launched plainly, bit for bit: a kernel that read its input before its wait would see stale values."""
    if not K.pdl_on('cuda'): pytest.skip('programmatic dependent launch needs compute capability >= 9')
    torch.manual_seed(0)
    D, n = 2048, 12
    ws = [(K.w4a16_to_kernel_layout(w), s) for w, s in (w4(D, D, 128, torch.bfloat16) for _ in range(n))]
    cfg = K.KernelConfig(kernel, 64 if kernel == 'tc' else 128, 128 if kernel == 'tc' else 256, split_k=4, num_stages=stages)
    x0 = torch.randn(M, D, device='cuda', dtype=torch.bfloat16)
    def chain(x):
        for w, s in ws: x = K.w4a16_matmul(x, w, s, config=cfg, kernel_layout=True)
        return x
    with K.pdl(False): ref = chain(x0.clone())
    got = chain(x0.clone()); torch.cuda.synchronize()
    assert torch.equal(got, ref)
    xs = x0.clone()
    st = torch.cuda.Stream(); st.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(st): chain(xs); chain(xs)
    torch.cuda.current_stream().wait_stream(st)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g): out = chain(xs)
    for _ in range(3): xs.copy_(x0); g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, ref) and locks_zero()

@pytest.mark.parametrize('M', [1, 16, 40])
def test_w8a16_head_kernel(M):
    "The INT8 head kernel (one scale per row) against the float32 reference, with its row maxima."
    torch.manual_seed(0)
    lin = nn.Linear(2560, 4097, bias=False, device='cuda')
    q, s = K.w8a16_quantize(lin.weight)
    x = torch.randn(M, 2560, device='cuda').to(torch.bfloat16)
    ref = (x.float() @ (q.float() * s.float()[:, None]).T).to(torch.bfloat16)
    assert rel_error(K.w8a16_matmul(x, q, s), ref) < 2e-4
    mx = torch.full((M + 1,), float('-inf'), device='cuda')
    y = K.w8a16_matmul(x, q, s, rowmax=mx)
    assert torch.equal(mx[:M].to(torch.bfloat16), y.max(1).values) and mx[M] == float('-inf')
