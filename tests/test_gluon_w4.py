"""The Gluon fragment-layout W4A16 prototype (`scripts/gluon_w4.py`): its packer on the CPU (round trip, where each
code lands in a lane's mma fragment, the bad-shape errors), and on a CUDA GPU the kernel against the reference."""
import importlib.util, pytest, torch
from pathlib import Path

def _module():
    spec = importlib.util.spec_from_file_location('gluon_w4', Path(__file__).parents[1]/'scripts'/'gluon_w4.py')
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m

G = _module()

def test_fragment_packing():
    G.check_pack()                                           # round trip + the placement of elements in 4 words
    wp = torch.randint(-2**31, 2**31 - 1, (48, 128 // 8), dtype=torch.int64).to(torch.int32)
    f = G.to_fragment_layout(wp)
    assert f.shape == (3, 2, 32, 4) and f.dtype == torch.int32
    # a weight whose codes are all 8 (= 0) except one: exactly one nibble of one word is not 8
    from effqwen.kernels import pack_int4
    c = torch.zeros(16, 64, dtype=torch.int64); c[9, 37] = -5
    words = G.to_fragment_layout(pack_int4(c)).to(torch.int64) & 0xFFFFFFFF
    nib = (words[..., None] >> (4 * torch.arange(8))) & 0xF
    assert int((nib != 8).sum()) == 1
    with pytest.raises(ValueError, match='multiple of 16'): G.to_fragment_layout(torch.zeros(20, 8, dtype=torch.int32))

def test_shape_errors():
    with pytest.raises(ValueError, match='1..16 tokens'): G.check_shape(17, 64, 512, 4, 1)
    with pytest.raises(ValueError, match='multiple of 128·WK'): G.check_shape(1, 64, 640, 4, 1)
    with pytest.raises(ValueError, match='multiple of 16·WM'): G.check_shape(1, 48, 512, 1, 2)

@pytest.mark.skipif(not torch.cuda.is_available() or G.gluon is None, reason='needs a CUDA GPU and triton.experimental.gluon')
@pytest.mark.parametrize('M', [1, 5, 16])
@pytest.mark.parametrize('WK,WM,DEPTH', [(4, 1, 2), (2, 2, 2), (4, 1, 3), (4, 1, 0), (2, 1, 0), (2, 2, 0)])
def test_kernel_matches_reference(M, WK, WM, DEPTH):
    from effqwen import kernels as K
    N, Kd = 96, 1024
    wp = K.pack_int4(torch.randint(-8, 8, (N, Kd), device='cuda'))
    s = (torch.rand(N, Kd // 128, device='cuda') * 0.02 + 0.002).to(torch.bfloat16)
    x = torch.randn(M, Kd, device='cuda').to(torch.bfloat16)
    y = G.w4_fragment_mm(x, G.to_fragment_layout(wp), s, WK, WM, DEPTH)
    ref = K.w4a16_mm_ref(x, wp, s).float()
    assert (y.float() - ref).abs().mean() / ref.abs().mean() < 1e-2
