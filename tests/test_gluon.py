"""The Gluon fragment kernels (`effqwen.kernels.gluon`): compiled for sm_90 without a GPU (the Triton wheel's ptxas),
the properties their design rests on; on a CUDA GPU both kernels against the references, for every load variant and CTA
shape, the SwiGLU epilogue bit for bit against the product then the engine's SwiGLU kernel, and the launch a quantized
linear makes alone (the alone picks) against its reference."""
import os, re
import pytest, torch
from effqwen.kernels import gluon as G, layouts as L
from effqwen.core import test_rel_error as check_marlin
from effqwen.kernels.tuning import pdl

def _offline_ok()->bool:
    "Gluon and the Triton wheel's ptxas / cuobjdump (compile for sm_90 without a GPU)."
    if G.gluon is None or os.environ.get('TRITON_INTERPRET') == '1': return False
    b = os.path.join(os.path.dirname(G.triton.__file__), 'backends/nvidia/bin')
    return all(os.access(os.path.join(b, t), os.X_OK) for t in ('ptxas', 'cuobjdump'))

offline = pytest.mark.skipif(not _offline_ok(), reason="needs triton.experimental.gluon and the wheel's ptxas / cuobjdump")
gpu = pytest.mark.skipif(not torch.cuda.is_available() or G.gluon is None, reason='needs a CUDA GPU and triton.experimental.gluon')

@offline
@pytest.mark.parametrize('depth', [0, 1])
def test_sub136_halves_the_mma_offline(depth):
    "`SUB136` leaves half the W4A16 kernel's HMMAs (no correction mma) and adds one bf16x2 subtract per word half."
    from effqwen.bench import compile_offline, census
    ops = {sub: census(compile_offline('w4a16', 4, 8, 2560, DEPTH=depth, SUB136=sub))[1] for sub in (False, True)}
    hmma = {sub: sum(c for o, c in ops[sub].items() if o.startswith('HMMA')) for sub in ops}
    hadd = {sub: sum(c for o, c in ops[sub].items() if o.startswith('HADD2')) for sub in ops}
    assert hmma[False] > 0 and hmma[True] * 2 == hmma[False]
    assert hadd[False] == 0 and hadd[True] == 2 * hmma[False]

@offline
def test_loads_offline():
    """x loads carry no predicate and need no zero-fill (tokens past M read token M - 1's row); with FENCE every weight and
    scale load comes before the first HMMA (without it ptxas sinks some); under PDL every weight word is requested and
    the next kernel launched before the wait, and only x (16-byte plain loads) after it."""
    from effqwen.bench import compile_offline, census
    for kern in (compile_offline('w4a16', 4, 8, 2560, DEPTH=0, SUB136=True), compile_offline('w4a16', 4, 8, 2560, DEPTH=1), compile_offline('bcq', 4, 8, 2560, Q=3)):
        sass, ops = census(kern)
        assert 'CS2R' not in ops
        x_loads = re.findall(r'^\s+/\*[0-9a-f]+\*/\s+(@!?P\d+\s+)?LDG\.E\.128 ', sass, re.M)
        assert len(x_loads) == 20 and not any(x_loads)
    def sunk(fence):
        sass = census(compile_offline('w4a16', 4, 8, 2560, DEPTH=1, SUB136=True, FENCE=fence))[0]
        ops = re.findall(r'^\s+/\*[0-9a-f]+\*/\s+(?:@!?P\d+\s+)?([A-Z][A-Z0-9_.]*)', sass, re.M)
        first = next(i for i, o in enumerate(ops) if o.startswith('HMMA'))
        loads = [i for i, o in enumerate(ops) if o in ('LDG.E.EF.128', 'LDG.E.U16')]
        assert len(loads) == 20
        return sum(i > first for i in loads)
    assert sunk(True) == 0 and sunk(False) > 0
    for fmt, depth, words in (('w4a16', 0, 10), ('w4a16', 1, 10), ('bcq', 0, 15)):
        ptx = compile_offline(fmt, 4, 8, 2560, DEPTH=depth, PDL=True).asm['ptx']
        wait = ptx.index('griddepcontrol.wait')
        assert ptx.count('griddepcontrol.wait') == 1 and ptx.index('griddepcontrol.launch_dependents') < wait
        word = r'cp\.async\.c[ag]\.shared|ld\.global\.L1::evict_first'
        assert len(re.findall(word, ptx[:wait])) == words and not re.findall(word, ptx[wait:]), (fmt, depth)
        assert len(re.findall(r'ld\.global\.v4\.b32', ptx[wait:])) == 20

def _w4(N, Kd, dev='cuda'):
    codes = torch.randint(-8, 8, (N, Kd), device=dev)
    return codes, (torch.rand(N, Kd // 128, device=dev) * 0.02 + 0.002).to(torch.bfloat16)

@gpu
@pytest.mark.parametrize('M', [1, 5, 16])
@pytest.mark.parametrize('cfg', [(4, 1, 2), (2, 2, 2), (4, 1, 0), (4, 1, 1), (2, 2, 1), (8, 1, 1), None])
def test_w4_kernel_matches_reference(M, cfg):
    torch.manual_seed(0)
    for N, Kd in ((96, 1024), (256, 3072)) + (((9216, 2560),) if cfg is None else ()):   # (the 4B gate shape: the H200's picks, RED1 alone)
        codes, s = _w4(N, Kd)
        words = L.w4_to_fragment(L.pack_int4(codes))
        x = torch.randn(M, Kd, device='cuda', dtype=torch.bfloat16)
        if cfg and Kd % (128 * cfg[0]): continue
        check_marlin(G.w4a16_fragment_matmul(x, words, s, cfg), (x.float() @ (codes.float() * s.float().repeat_interleave(128, 1)).T).to(x.dtype))
        with pdl(False): check_marlin(G.w4a16_fragment_matmul(x, words, s, cfg), (x.float() @ (codes.float() * s.float().repeat_interleave(128, 1)).T).to(x.dtype))   # alone: the alone picks' choices

@gpu
@pytest.mark.parametrize('M', [1, 5, 16])
@pytest.mark.parametrize('cfg', [(4, 1, 2), (4, 1, 1), (4, 1, 0), (2, 2, 0), None])
def test_w4_swiglu_epilogue_equals_product_then_swiglu_kernel(M, cfg):
    "silu(gate) · up from the kernel's epilogue equals the product (bf16) followed by the engine's SwiGLU kernel, bit for bit."
    from effqwen.engine.ops import fused_swiglu
    torch.manual_seed(0)
    N, Kd = 512, 1024
    codes, s = _w4(N, Kd)
    p = L.swiglu_rows(N).cuda()
    words, wp = L.w4_to_fragment(L.pack_int4(codes)), L.w4_to_fragment(L.pack_int4(codes[p]))
    x = torch.randn(M, Kd, device='cuda', dtype=torch.bfloat16)
    assert torch.equal(G.w4a16_fragment_matmul(x, wp, s[p].contiguous(), cfg, swiglu_out=True), fused_swiglu(G.w4a16_fragment_matmul(x, words, s, cfg)))

@gpu
@pytest.mark.parametrize('M', [1, 5, 16])
@pytest.mark.parametrize('Q,group,cfg', [(3, 128, (4, 1)), (2, 64, (2, 1)), (4, 256, (2, 1)), (3, 128, (2, 2)), (3, 128, None)])
def test_bcq_kernel_matches_reference(M, Q, group, cfg):
    torch.manual_seed(0)
    N, Kd = 96, 1024
    signs = torch.randint(0, 2, (Q, N, Kd), device='cuda') * 2 - 1
    alpha = (torch.rand(Q, N, Kd // group, device='cuda') * 0.05).to(torch.bfloat16)
    x = torch.randn(M, Kd, device='cuda', dtype=torch.bfloat16)
    ref = (x.float() @ (signs.float() * alpha.float().repeat_interleave(group, -1)).sum(0).T).to(x.dtype)
    check_marlin(G.bcq_fragment_matmul(x, L.bcq_to_fragment(L.pack_sign_words(signs)), alpha, cfg), ref)

@gpu
def test_modules_on_gpu_match_library_path():
    "A quantized linear's forward on the fragment copy equals its library path (1..16 rows), and more rows keep the library path."
    from effqwen.kernels import W4A16Linear, BCQLinear
    torch.manual_seed(0)
    lin = torch.nn.Linear(1024, 256, device='cuda', dtype=torch.bfloat16)
    for m in (W4A16Linear.from_float(lin), BCQLinear.from_float(lin, planes=3, group_size=128)):
        for M in (1, 16, 40):
            x = torch.randn(M, 1024, device='cuda', dtype=torch.bfloat16)
            y0 = m(x); m.use_fragment(); y1 = m(x); m.use_fragment(False)
            check_marlin(y1, y0)
