"""Checks of `effqwen.bcq` that a notebook holds badly: the whole fit → refit → pack → kernel-layout chain on
SmolLM2's 576-wide inputs (CPU), and on a GPU (skipped without one) that every step stays on the weight's device,
matches the CPU result, and how long the fit takes at Qwen3.5-4B shapes (`pytest -s` prints the timings)."""
import time
import pytest, torch
from effqwen.bcq import (bcq_fit, bcq_dequant, gptq_bcq, refit_scales_hessian, output_error, pack_bcq, unpack_bcq,
                         to_kernel_layout, bits_per_weight, correlated_hessian)

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a GPU')


def _chain(W, H, fmt='sa3', Q=3, G=64):
    codes, al = gptq_bcq(W, H, Q, G, iters=10)
    p = pack_bcq(codes, al, fmt)
    words, a16 = to_kernel_layout(p)
    c2, a2 = unpack_bcq(p)
    return codes, al, p, words, a16, c2, a2


def test_chain_cpu_smollm2_width():
    torch.manual_seed(0)
    W, H = torch.randn(64, 576), correlated_hessian(576, n=1024)
    codes, al, p, words, a16, c2, a2 = _chain(W, H)
    assert torch.equal(c2, codes)
    assert p.bits_per_weight == bits_per_weight('sa3', 576)
    assert words.shape == (3, 64, 18) and a16.shape == (3, 64, 9)
    plain = output_error(W, bcq_dequant(*bcq_fit(W, 3, 64, 10)), H, relative=True)
    assert output_error(W, bcq_dequant(c2, a2), H, relative=True) < plain


@cuda
def test_cuda_matches_cpu():
    torch.manual_seed(0)
    W, H = torch.randn(128, 576), correlated_hessian(576, n=1024)
    ref = _chain(W, H)
    got = _chain(W.cuda(), H.cuda())
    for t in got[:2] + got[3:]: assert t.is_cuda, 'a result left the GPU'
    assert all(t.is_cuda for t in (got[2].signs, got[2].scales, got[2].d))
    # float sums differ in the last bits between devices, which can flip a near-tie code: compare outputs, not bits
    e_cpu = output_error(W, bcq_dequant(ref[5], ref[6]), H, relative=True)
    e_gpu = output_error(W, bcq_dequant(got[5], got[6]).cpu(), H, relative=True)
    assert abs(e_gpu - e_cpu) < 0.05 * e_cpu, (e_cpu, e_gpu)
    assert (got[0].cpu() == ref[0]).float().mean() > 0.99


@cuda
@pytest.mark.parametrize('N,K', [(9216, 2560), (2560, 9216)])   # Qwen3.5-4B MLP up/gate and down shapes
def test_cuda_qwen4b_shapes(N, K):
    torch.manual_seed(0)
    W = torch.randn(N, K, device='cuda') * 0.02
    H = correlated_hessian(K, n=4096, device="cuda")
    t = {}
    torch.cuda.synchronize(); t0 = time.perf_counter()
    codes, al = bcq_fit(W, 4, 128, 20); torch.cuda.synchronize(); t['bcq_fit Q4 g128'] = time.perf_counter() - t0
    t0 = time.perf_counter()
    c2, a2 = refit_scales_hessian(W, codes, H, 128); torch.cuda.synchronize(); t['refit'] = time.perf_counter() - t0
    t0 = time.perf_counter()
    cg, ag = gptq_bcq(W, H, 4, 128, refit=False); torch.cuda.synchronize(); t['gptq_bcq sweep'] = time.perf_counter() - t0
    t0 = time.perf_counter()
    p = pack_bcq(cg, ag, 'sa4_128'); words, a16 = to_kernel_layout(p); torch.cuda.synchronize(); t['pack + kernel layout'] = time.perf_counter() - t0
    t0 = time.perf_counter()
    po = pack_bcq(cg, ag, 'sa4_128', W, H); torch.cuda.synchronize(); t['output-aware pack'] = time.perf_counter() - t0
    err = {k: output_error(W, bcq_dequant(c, a), H, relative=True)
           for k, (c, a) in dict(als=(codes, al), als_refit=(c2, a2), gptq=(cg, ag), gptq_u8=unpack_bcq(p),
                                 gptq_u8_output_aware=unpack_bcq(po)).items()}
    print(f'\n({N}, {K}) ' + ', '.join(f'{k} {v:.2f}s' for k, v in t.items()) + ' | rel. output error ' +
          ', '.join(f'{k} {v:.4f}' for k, v in err.items()))
    assert err['als_refit'] <= err['als'] * (1 + 1e-6)
    assert err['gptq'] < err['als']
    assert p.bits_per_weight == bits_per_weight('sa4_128', K)
    assert err['gptq_u8_output_aware'] <= err['gptq_u8']


def test_kernel_layout_matches_kernels_module():
    "`to_kernel_layout` gives exactly what `effqwen.kernels` packs and dequantizes (skipped until that module exists)."
    kernels = pytest.importorskip('effqwen.kernels')
    torch.manual_seed(0)
    W = torch.randn(32, 576)
    codes, al = bcq_fit(W, 3, 64, 5)
    for words, a16 in (to_kernel_layout(codes, al), to_kernel_layout(pack_bcq(codes, al, 'sa3'))):
        assert torch.equal(words, kernels.pack_sign_words(codes))
        ref = bcq_dequant(codes, a16.float())
        assert torch.allclose(kernels.bcq_dequantize(words, a16, torch.float32).float(), ref, rtol=1e-6, atol=1e-7)


def test_sa4_beats_int4_rtn_after_packing():
    "4 planes contain the 16-level symmetric grid: the packed sa4 fit (u8 scales) must beat symmetric INT4 RTN g64."
    from effqwen.quant import IntQuantizer, rtn_quantize
    torch.manual_seed(0)
    for W in (torch.randn(64, 576), torch.distributions.StudentT(3.).sample((64, 576))):
        int4 = (rtn_quantize(W, IntQuantizer(4, 64))[0] - W).pow(2).sum()
        codes, al = bcq_fit(W, 4, 64, 10)
        packed = (bcq_dequant(*unpack_bcq(pack_bcq(codes, al, 'sa4'))) - W).pow(2).sum()
        greedy = (bcq_dequant(*bcq_fit(W, 4, 64, 10, init='greedy')) - W).pow(2).sum()
        assert packed < int4, (packed.item(), int4.item())
        assert (bcq_dequant(codes, al) - W).pow(2).sum() <= greedy * (1 + 1e-5)


def test_bcq_groups_that_do_not_divide_are_refused():
    "A group that divides none of a layer's inputs is an error naming the width and the fix, never a silently skipped layer."
    from effqwen.bcq_model import candidate_schemes
    assert candidate_schemes(576, (2, 3), (64, 128)) == ['sa2', 'sa3']          # 128 does not divide 576: only g64 remains
    with pytest.raises(ValueError, match=r'no group in \(128,\) divides in_features=576.*64 divides'):
        candidate_schemes(576, (2, 3), (128,))
    with pytest.raises(ValueError, match='does not divide in_features 576'):
        gptq_bcq(torch.randn(8, 576), torch.eye(576), 2, 128)
    with pytest.raises(ValueError, match='must be positive integers'):
        gptq_bcq(torch.randn(8, 576), torch.eye(576), 2, 0)
