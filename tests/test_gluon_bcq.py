"""The Gluon BCQ sign-select prototype (`scripts/gluon_bcq.py`): its packer on the CPU (round trip, where each sign bit
lands in a lane's mma fragment, the bad-shape errors), and on a CUDA GPU the kernel against the reference."""
import importlib.util, sys, pytest, torch
from pathlib import Path

def _module():
    sys.path.insert(0, str(Path(__file__).parents[1]/'scripts'))   # gluon_bcq imports gluon_w4's layouts and helpers
    spec = importlib.util.spec_from_file_location('gluon_bcq', Path(__file__).parents[1]/'scripts'/'gluon_bcq.py')
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m

G = _module()

def test_bcq_fragment_packing():
    G.check_pack()                                           # round trip + the placement of three elements
    from effqwen.kernels import pack_sign_words
    s = -torch.ones(2, 16, 128, dtype=torch.int8); s[1, 11, 77] = 1   # all −1 but one sign: exactly one bit set
    f = G.to_bcq_fragment_layout(pack_sign_words(s))
    assert f.shape == (1, 1, 2, 32, 2) and f.dtype == torch.int32
    bits = ((f.to(torch.int64) & 0xFFFFFFFF)[..., None] >> torch.arange(32)) & 1
    assert int(bits.sum()) == 1 and int(bits[0, 0, 1].sum()) == 1
    with pytest.raises(ValueError, match='multiple of 16'): G.to_bcq_fragment_layout(torch.zeros(2, 20, 4, dtype=torch.int32))

def test_bcq_shape_errors():
    with pytest.raises(ValueError, match='1..16 tokens'): G.check_shape(17, 64, 512, 3, 128, 4)
    with pytest.raises(ValueError, match='whole k128 chunks'): G.check_shape(1, 64, 640, 3, 128, 4)
    with pytest.raises(ValueError, match='whole k128 chunks'): G.check_shape(1, 64, 512, 3, 256, 4)
    with pytest.raises(ValueError, match='multiple of 16'): G.check_shape(1, 40, 512, 3, 128, 4)
    with pytest.raises(ValueError, match='smaller WM'): G.check_shape(1, 48, 512, 3, 128, 4, 2)

@pytest.mark.skipif(not torch.cuda.is_available() or G.gluon is None, reason='needs a CUDA GPU and triton.experimental.gluon')
@pytest.mark.parametrize('M', [1, 5, 16])
@pytest.mark.parametrize('Q,group,WK,WM', [(3, 128, 4, 1), (2, 64, 2, 1), (4, 256, 2, 1), (3, 128, 1, 1), (3, 128, 2, 2), (3, 64, 1, 2)])
def test_bcq_kernel_matches_reference(M, Q, group, WK, WM):
    from effqwen import kernels as K
    N, Kd = 96, 1024
    signs = K.pack_sign_words(torch.randint(0, 2, (Q, N, Kd), device='cuda') * 2 - 1)
    alpha = (torch.rand(Q, N, Kd // group, device='cuda') * 0.02 + 0.002).to(torch.bfloat16)
    x = torch.randn(M, Kd, device='cuda').to(torch.bfloat16)
    y = G.bcq_fragment_mm(x, G.to_bcq_fragment_layout(signs), alpha, WK, WM)
    ref = K.bcq_mm_ref(x, signs, alpha).float()
    assert (y.float() - ref).abs().max() / ref.abs().max() < 1e-2
