"""The Gluon fragment-layout kernels (`effqwen.gluon`): packers on the CPU (round trips, where single codes / sign bits
land in a lane's mma fragment, bad-shape errors, the modules' switch), and on a CUDA GPU both kernels against the
references, for every CTA shape and prefetch mode the benchmark sweeps."""
import pytest, torch
import effqwen.gluon as G
from effqwen import kernels as K
from effqwen.core import test_rel_error as check_marlin, rel_error

def test_w4_fragment_packing():
    c = torch.zeros(16, 64, dtype=torch.int64); c[9, 37] = -5          # one non-zero code: exactly one nibble is not 8
    words = G.w4_to_fragment(K.pack_int4(c)).to(torch.int64) & 0xFFFFFFFF
    assert words.shape == (1, 1, 32, 4)
    nib = (words[..., None] >> (4 * torch.arange(8))) & 0xF
    assert int((nib != 8).sum()) == 1 and torch.equal(G.w4_fragment_codes(G.w4_to_fragment(K.pack_int4(c))), c)
    with pytest.raises(ValueError, match='multiple of 16'): G.w4_to_fragment(torch.zeros(20, 8, dtype=torch.int32))

def test_bcq_fragment_packing():
    s = -torch.ones(2, 16, 128, dtype=torch.int8); s[1, 11, 77] = 1    # all −1 but one sign: exactly one bit set, in plane 1
    f = G.bcq_to_fragment(K.pack_sign_words(s))
    assert f.shape == (1, 1, 2, 32, 2) and f.dtype == torch.int32
    bits = ((f.to(torch.int64) & 0xFFFFFFFF)[..., None] >> torch.arange(32)) & 1
    assert int(bits.sum()) == 1 and int(bits[0, 0, 1].sum()) == 1 and torch.equal(G.bcq_fragment_signs(f), s)
    with pytest.raises(ValueError, match='multiple of 16'): G.bcq_to_fragment(torch.zeros(2, 20, 4, dtype=torch.int32))

def test_config_and_errors():
    assert G.fragment_config('w4a16', 1, 9216, 2560) == (4, 1, 0) and G.fragment_config('w4a16', 16, 9216, 2560) == (4, 1, 0)
    assert G.fragment_config('w4a16', 1, 2560, 9216) == (8, 1, 1) and G.fragment_config('bcq', 1, 9216, 2560) == (4, 1, 0)
    assert G.fragment_config('w4a16', 1, 2560, 4096) == (8, 1, 0) and G.fragment_config('w4a16', 8, 4096, 2560) == (4, 1, 0)
    with pytest.raises(ValueError, match='multiple of 128'): G.fragment_config('w4a16', 1, 64, 96)
    lin = torch.nn.Linear(256, 40)
    assert 'multiple of 16' in G.fragment_supported(K.W4A16Linear.from_float(lin))
    with pytest.raises(ValueError, match='no fragment path'): K.W4A16Linear.from_float(lin).use_fragment()

def _offline_ok() -> bool:
    "Gluon and the Triton wheel's ptxas / cuobjdump (compile for sm_90 without a GPU)."
    import os
    if G.gluon is None: return False
    b = os.path.join(os.path.dirname(G.triton.__file__), 'backends/nvidia/bin')
    return all(os.access(os.path.join(b, t), os.X_OK) for t in ('ptxas', 'cuobjdump'))

@pytest.mark.skipif(not _offline_ok(), reason='needs triton.experimental.gluon and the wheel\'s ptxas / cuobjdump')
@pytest.mark.parametrize('depth', [0, 1])   # 0: cp.async (Triton >= 3.9 names it async_load), 1: registers first
def test_sub136_halves_the_mma_offline(depth):
    """Compiled for sm_90 without a GPU: `SUB136` leaves half the W4A16 kernel's HMMAs (no correction mma) and adds one
    bf16x2 subtract per word half; without it there is none."""
    ops = {sub: G.census(G.compile_offline('w4a16', 4, 8, 2560, DEPTH=depth, SUB136=sub))[1] for sub in (False, True)}
    hmma = {sub: sum(c for o, c in ops[sub].items() if o.startswith('HMMA')) for sub in ops}
    hadd = {sub: sum(c for o, c in ops[sub].items() if o.startswith('HADD2')) for sub in ops}
    assert hmma[False] > 0 and hmma[True] * 2 == hmma[False]
    assert hadd[False] == 0 and hadd[True] == 2 * hmma[False]   # 2 word halves per A fragment's 4 words, per mma step

@pytest.mark.skipif(not _offline_ok(), reason='needs triton.experimental.gluon and the wheel\'s ptxas / cuobjdump')
def test_x_loads_unmasked_offline():
    """Compiled for sm_90 without a GPU (M = 1 on 8 mma columns): tokens ≥ M read token M − 1's row (`_x_offsets`), so the
    x loads of both kernels carry no predicate and need no zero-fill (no CS2R)."""
    import re
    for kern in (G.compile_offline('w4a16', 4, 8, 2560, DEPTH=0, SUB136=True), G.compile_offline('w4a16', 4, 8, 2560, DEPTH=1),
                 G.compile_offline('bcq', 4, 8, 2560, Q=3)):
        sass, ops, _ = G.census(kern)
        assert 'CS2R' not in ops
        x_loads = re.findall(r'^\s+/\*[0-9a-f]+\*/\s+(@!?P\d+\s+)?LDG\.E\.128 ', sass, re.M)   # x (the weights: .EF or LDGSTS)
        assert len(x_loads) == 20 and not any(x_loads)

@pytest.mark.skipif(not _offline_ok(), reason='needs triton.experimental.gluon and the wheel\'s ptxas / cuobjdump')
def test_fence_keeps_weight_loads_up_front_offline():
    """Compiled for sm_90 without a GPU, DEPTH 1 without PDL: with `FENCE` every weight word load (evict-first) and scale
    load comes before the first HMMA; without it ptxas sinks some of them below (`_gdc_enter`)."""
    import re
    def order(fence):
        sass = G.census(G.compile_offline('w4a16', 4, 8, 2560, DEPTH=1, SUB136=True, FENCE=fence))[0]
        ops = re.findall(r'^\s+/\*[0-9a-f]+\*/\s+(?:@!?P\d+\s+)?([A-Z][A-Z0-9_.]*)', sass, re.M)
        first = next(i for i, o in enumerate(ops) if o.startswith('HMMA'))
        loads = [i for i, o in enumerate(ops) if o in ('LDG.E.EF.128', 'LDG.E.U16')]
        assert len(loads) == 20   # 5 groups per warp, each 2 word loads (k64 steps) and 2 scale loads (rows r, r + 8)
        return sum(i > first for i in loads)
    assert order(True) == 0
    assert order(False) > 0

@pytest.mark.skipif(not _offline_ok(), reason='needs triton.experimental.gluon and the wheel\'s ptxas / cuobjdump')
def test_gdc_early_moves_only_the_trigger_offline():
    """Compiled for sm_90 without a GPU under PDL: with EARLY (`GDC_EARLY`) the W4A16 (DEPTH 0, 1) and BCQ kernels let
    the next kernel launch before their wait, without it after; both ways every weight word (cp.async or evict-first
    load) is requested before the wait, and only x (the 16-byte plain loads) after it."""
    import re
    for fmt, depth, words in (('w4a16', 0, 10), ('w4a16', 1, 10), ('bcq', 0, 15)):
        for early in (False, True):
            ptx = G.compile_offline(fmt, 4, 8, 2560, DEPTH=depth, PDL=True, EARLY=early).asm['ptx']
            assert ptx.count('griddepcontrol.wait') == 1 and ptx.count('griddepcontrol.launch_dependents') == 1
            wait = ptx.index('griddepcontrol.wait')
            assert (ptx.index('griddepcontrol.launch_dependents') < wait) == early, (fmt, depth, early)
            word = r'cp\.async\.c[ag]\.shared|ld\.global\.L1::evict_first'
            assert len(re.findall(word, ptx[:wait])) == words and not re.findall(word, ptx[wait:]), (fmt, depth, early)
            assert len(re.findall(r'ld\.global\.v4\.b32', ptx[wait:])) == 20   # x: 5 groups × 2 k64 blocks × 2 loads

def test_fragment_picks_only_for_their_gpu():
    doc = dict(provenance=dict(device='GPU A'), rows=[dict(N=96, K=1024, M=1, best='wk2 d1'), dict(N=96, K=1024, M=16, best='wk4 d0'),
                                                    dict(N=64, K=512, M=1), dict(N=64, K=512, M=16, best='wk2 wm2 d0')])
    try:
        assert G.load_fragment_picks(doc, 'GPU B') == 0 and not G._FRAG_TUNED
        assert G.load_fragment_picks(doc, 'GPU A') == 3
        assert G._FRAG_TUNED == {(True, 96, 1024): (2, 1, 1), (False, 96, 1024): (4, 1, 0), (False, 64, 512): (2, 2, 0)}
        assert G.fragment_config('w4a16', 1, 96, 1024) == (4, 1, 0)   # no device: the rule, not the picks
        with pytest.raises(ValueError, match='not'): G.load_fragment_picks(dict(provenance=dict(device='GPU A'), rows=[dict(N=1, K=1, M=1, best='w4')]), 'GPU A')
    finally: G._FRAG_TUNED.clear()

def test_alone_picks_only_for_launches_without_pdl():
    doc = dict(provenance=dict(device='GPU A'), rows=[dict(N=96, K=1024, M=1, best_alone='wk2 d1 nofence red1'), dict(N=64, K=512, M=1, best_alone='wk4 wm2 d0')])
    try:
        assert G.load_alone_picks(doc, 'GPU B') == 0 and not G._FRAG_ALONE
        assert G.load_alone_picks(doc, 'GPU A') == 2
        assert G._FRAG_ALONE == {(True, 96, 1024): (2, 1, 1, False, True), (True, 64, 512): (4, 2, 0, True, False)}
        assert G._fence_for(1, 96, 1024, (2, 1, 1), pdl=False) is False and G._fence_for(1, 64, 512, (4, 2, 0), pdl=False) is True
        assert G._fence_for(1, 96, 1024, (2, 1, 1), pdl=True) == G._use_fence(1, 1)   # under PDL the rule, as before
        if G.RED1 is None:   # RED1 (the warps' sum in one shared-memory pass) as the pick says, alone only
            assert G._red1_for(1, 96, 1024, (2, 1, 1), pdl=False) and not G._red1_for(1, 96, 1024, (2, 1, 1), pdl=True)
            assert not G._red1_for(1, 64, 512, (4, 2, 0), pdl=False)
        assert G.fragment_config('w4a16', 1, 96, 1024, pdl=False) == G.fragment_config('w4a16', 1, 96, 1024)   # no device: the rule
        with pytest.raises(ValueError, match='alone sweep pick'): G.load_alone_picks(dict(provenance=dict(device='GPU A'), rows=[dict(N=1, K=1, M=1, best_alone='w4 nofence')]), 'GPU A')
    finally: G._FRAG_ALONE.clear()

def test_modules_reference_path_on_cpu():
    torch.manual_seed(0)
    for m in (K.W4A16Linear.from_float(torch.nn.Linear(256, 32)), K.BCQLinear(256, 32, planes=2, group_size=64)):
        if isinstance(m, K.BCQLinear):
            m.weight_signs.copy_(K.bcq_to_kernel_layout(K.pack_sign_words(torch.randint(0, 2, (2, 32, 256)) * 2 - 1)))
            m.weight_alpha.copy_(torch.rand(2, 32, 4) * 0.1)
        x = torch.randn(2, 3, 256)
        y0 = m(x); m.use_fragment()
        assert m.weight_fragment is not None and 'weight_fragment' not in m.state_dict()
        ref = (x.float() @ (G.w4_fragment_dequantize(m.weight_fragment, m.weight_scale) if isinstance(m, K.W4A16Linear)
                            else G.bcq_fragment_dequantize(m.weight_fragment, m.weight_alpha)).T)
        assert torch.allclose(ref + (0 if m.bias is None else m.bias), y0, atol=1e-4)   # the packed weight is the module's weight
        m.use_fragment(False); assert m.weight_fragment is None

gpu = pytest.mark.skipif(not torch.cuda.is_available() or G.gluon is None, reason='needs a CUDA GPU and triton.experimental.gluon')

@gpu
@pytest.mark.parametrize('M', [1, 5, 16])
@pytest.mark.parametrize("cfg", [(4, 1, 2), (2, 2, 2), (4, 1, 3), (4, 1, 0), (4, 1, 1), (2, 2, 1), (2, 1, 0), (2, 2, 0), None])
@pytest.mark.parametrize('sub136', [False, True])
def test_w4_kernel_matches_reference(M, cfg, sub136, monkeypatch):
    "Marlin's error test against the dequantized product, with the correction mma and with `SUB136` (code − 8, no correction)."
    monkeypatch.setattr(G, 'SUB136', 16 if sub136 else 0)   # the largest M that takes it
    N, Kd = 96, 1024
    wp = K.pack_int4(torch.randint(-8, 8, (N, Kd), device='cuda'))
    s = (torch.rand(N, Kd // 128, device='cuda') * 0.02 + 0.002).to(torch.bfloat16)
    x = torch.randn(M, Kd, device='cuda').to(torch.bfloat16)
    y = G.w4a16_fragment_matmul(x, G.w4_to_fragment(wp), s, cfg)
    ref = K.w4a16_mm_ref(x, wp, s).float()
    check_marlin(y, ref, 1e-3)                                   # Marlin's test: mean |y − ref| / mean |ref|
    assert (y.float() - ref).abs().max() / ref.abs().max() < 1e-2

@gpu
@pytest.mark.parametrize('M', [1, 5, 16])
@pytest.mark.parametrize('N,Kd,cfg,split', [(96, 3072, (8, 1, 1), 3), (96, 3072, (4, 1, 1), 2), (160, 1024, (4, 1, 0), 2), (96, 3072, (4, 1, 2), 3)])
def test_w4_kernel_split_k(M, N, Kd, cfg, split):
    "Split-K (K slices, the last CTA of a row block adds the partials): the reference's product, again on a second call (counters reset)."
    wp = K.pack_int4(torch.randint(-8, 8, (N, Kd), device='cuda'))
    s = (torch.rand(N, Kd // 128, device='cuda') * 0.02 + 0.002).to(torch.bfloat16)
    x = torch.randn(M, Kd, device='cuda').to(torch.bfloat16)
    w = G.w4_to_fragment(wp)
    ref = K.w4a16_mm_ref(x, wp, s).float()
    for _ in range(2):
        y = torch.zeros(M, N, device='cuda', dtype=torch.bfloat16)
        G.w4a16_fragment_matmul(x, w, s, cfg, out=y, split=split)
        check_marlin(y, ref, 1e-3)
        assert (y.float() - ref).abs().max() / ref.abs().max() < 1e-2
    with pytest.raises(ValueError, match='split'): G.w4a16_fragment_matmul(x, w, s, cfg, split=5)

@gpu
@pytest.mark.parametrize('M', [1, 5, 16])
@pytest.mark.parametrize('Q,group,cfg', [(3, 128, (4, 1)), (2, 64, (2, 1)), (4, 256, (2, 1)), (3, 128, (1, 1)), (3, 128, (2, 2)), (3, 64, (1, 2)), (3, 128, None)])
def test_bcq_kernel_matches_reference(M, Q, group, cfg):
    N, Kd = 96, 1024
    signs = K.pack_sign_words(torch.randint(0, 2, (Q, N, Kd), device='cuda') * 2 - 1)
    alpha = (torch.rand(Q, N, Kd // group, device='cuda') * 0.02 + 0.002).to(torch.bfloat16)
    x = torch.randn(M, Kd, device='cuda').to(torch.bfloat16)
    y = G.bcq_fragment_matmul(x, G.bcq_to_fragment(signs), alpha, cfg)
    ref = K.bcq_mm_ref(x, signs, alpha).float()
    check_marlin(y, ref, 1e-3)
    assert (y.float() - ref).abs().max() / ref.abs().max() < 1e-2

def test_swiglu_epilogue_order_reference_and_errors_on_cpu():
    torch.manual_seed(0)
    assert G.swiglu_rows(32).tolist() == list(range(8)) + list(range(16, 24)) + list(range(8, 16)) + list(range(24, 32))
    m = K.W4A16Linear.from_float(torch.nn.Linear(256, 64, bias=False), group_size=128)
    x = torch.randn(3, 256).to(torch.bfloat16); m = m.to(torch.bfloat16)
    y_plain = m(x)
    m.use_fragment(swiglu=True)
    assert m.fragment_swiglu and 'fragment_scale' not in m.state_dict() and 'weight_fragment' not in m.state_dict()
    assert torch.equal(m(x), y_plain)                                           # the plain product keeps the library path
    z = G.w4a16_fragment_matmul(x, m.weight_fragment, m.fragment_scale, swiglu_out=True)   # the reference of the epilogue kernel
    check_marlin(z, K.swiglu_ref(G.w4a16_fragment_matmul(x, G.w4_to_fragment(m.weight_packed, kernel_layout=True), m.weight_scale)), 1e-3)
    assert z.shape == (3, 32) and torch.equal(m.forward_swiglu_out(x), K.swiglu_ref(y_plain))   # on the CPU: the two steps
    m.use_fragment(False); assert not m.fragment_swiglu and m.fragment_scale is None
    with pytest.raises(ValueError, match='without bias'):
        K.W4A16Linear.from_float(torch.nn.Linear(256, 64, bias=True), group_size=128).use_fragment(swiglu=True)
    with pytest.raises(ValueError, match='without bias'):
        K.BCQLinear.from_float(torch.nn.Linear(256, 64, bias=False), planes=2, group_size=128).use_fragment(swiglu=True)

@gpu
@pytest.mark.parametrize('M', [1, 5, 16])
@pytest.mark.parametrize('cfg', [(4, 1, 2), (4, 1, 1), (4, 1, 0), (2, 2, 0), None])
@pytest.mark.parametrize('sub136', [False, True])
def test_w4_swiglu_epilogue_equals_product_then_swiglu_kernel(M, cfg, sub136, monkeypatch):
    """The SwiGLU epilogue on a `swiglu_rows`-ordered fused [gate | up] weight equals the plain fragment kernel followed
    by the engine's SwiGLU kernel, bit for bit (same products per row, same roundings), also with `SUB136`."""
    from effqwen.engine import fused_swiglu
    monkeypatch.setattr(G, 'SUB136', 16 if sub136 else 0)   # the largest M that takes it
    N, Kd = 96, 1024
    wp = K.pack_int4(torch.randint(-8, 8, (N, Kd), device='cuda'))
    s = (torch.rand(N, Kd // 128, device='cuda') * 0.02 + 0.002).to(torch.bfloat16)
    x = torch.randn(M, Kd, device='cuda').to(torch.bfloat16)
    p = G.swiglu_rows(N).cuda()
    z = G.w4a16_fragment_matmul(x, G.w4_to_fragment(wp.index_select(0, p).contiguous()), s.index_select(0, p).contiguous(), cfg, swiglu_out=True)
    assert torch.equal(z, fused_swiglu(G.w4a16_fragment_matmul(x, G.w4_to_fragment(wp), s, cfg)))

def test_engine_norm_epilogue_plumbing_on_cpu(monkeypatch):
    """`NORM_EPILOGUE` hands each layer's output and down projections, with the residual and the next norm's weight, to
    `w4a16_fragment_add_norm` in decode / verify (prefill keeps the norm kernels). On a CPU the check that admits a
    linear is widened to CPU tensors, so the function's torch reference runs in its place: the engine's tokens and
    logits must not change, and every such linear but the first layer's input norm must go through it."""
    import effqwen.engine as E
    m, mk, pr, blk = _plumbing_model(); out, calls = {}, []
    own = E._add_norm_fragment
    monkeypatch.setattr(E, '_norm_epilogue_ok', lambda m, v: isinstance(m, K.W4A16Linear) and m.weight_fragment is not None and v.shape[0] <= 16)
    monkeypatch.setattr(E, '_add_norm_fragment', lambda *a: calls.append(1) or own(*a))
    for on in (False, True):
        monkeypatch.setattr(E, 'NORM_EPILOGUE', on)
        eng = E.Engine(m, max_seq_len=48, convert=mk, fused=False); eng.use_fragment(True)
        calls.clear(); eng.prefill(pr); assert not calls                      # prefill: the norm kernels
        out[on] = torch.stack([eng.decode_one_token().clone() for _ in range(4)]), eng.verify(blk).clone()
        assert len(calls) == (5 * 2 * len(eng.layers) if on else 0)          # 4 decodes + 1 verify, 2 per layer
    check_marlin(out[True][0], out[False][0], 1e-4); check_marlin(out[True][1], out[False][1], 1e-4)
    assert torch.equal(out[True][0].argmax(-1), out[False][0].argmax(-1))

@pytest.mark.parametrize('swiglu', [False, True])
def test_engine_norm_split_plumbing_on_cpu(monkeypatch, swiglu):
    """`NORM_SPLIT` hands each layer's output and down projections to `w4a16_fragment_add_ss` and the input / MLP
    projections after them to `w4a16_fragment_matmul(norm_in=)` in decode / verify (prefill keeps the norm kernels; the
    final norm before the head stays a kernel). On a CPU the checks that admit the linears are widened to CPU tensors,
    so the functions' torch references run in their place: the tokens and logits must not change; with and without
    the SwiGLU epilogue's copy of the gate+up projection."""
    import effqwen.engine as E
    m, mk, pr, blk = _plumbing_model(); out, calls = {}, []
    own_ss, own_mm = E._add_ss_fragment, G.w4a16_fragment_matmul
    ok = lambda m, v: isinstance(m, K.W4A16Linear) and m.weight_fragment is not None and m.bias is None and v.shape[0] <= 16
    monkeypatch.setattr(E, '_norm_epilogue_ok', ok); monkeypatch.setattr(E, '_norm_in_ok', ok)
    monkeypatch.setattr(E, '_add_ss_fragment', lambda *a: calls.append('ss') or own_ss(*a))
    monkeypatch.setattr(G, 'w4a16_fragment_matmul', lambda *a, **k: (calls.append('in') if k.get('norm_in') is not None else None) or own_mm(*a, **k))
    monkeypatch.setattr(E, 'SWIGLU_EPILOGUE', swiglu)
    for on in (False, True):
        monkeypatch.setattr(E, 'NORM_SPLIT', on)
        eng = E.Engine(m, max_seq_len=48, convert=mk, fused=False); eng.use_fragment(True)
        calls.clear(); eng.prefill(pr); assert not calls                      # prefill: the norm kernels
        out[on] = torch.stack([eng.decode_one_token().clone() for _ in range(4)]), eng.verify(blk).clone()
        frag = lambda l: getattr(l, 'weight_fragment', None) is not None       # (the tiny GDN in_proj has no fragment copy: N % 16)
        n = 5 * (sum(frag(L.proj) for L in eng.layers[1:]) + sum(frag(L.mlp_in) for L in eng.layers)) if on else 0   # 4 decodes + 1 verify
        assert not on or 0 < n < 5 * (2 * len(eng.layers) - 1)               # both the split and the fallback (norm kernel) run
        assert calls.count('ss') == n and calls.count('in') == n, (calls.count('ss'), calls.count('in'), n)
    check_marlin(out[True][0], out[False][0], 1e-4); check_marlin(out[True][1], out[False][1], 1e-4)
    assert torch.equal(out[True][0].argmax(-1), out[False][0].argmax(-1))

def test_add_norm_reference_on_cpu():
    """`w4a16_fragment_add_norm` on a CPU: the product, then the engine's add + RMSNorm (`effqwen.engine.add_rms_norm`,
    Qwen3.5's (1 + w) and Llama's forms); bad shapes raise."""
    from effqwen.engine import add_rms_norm
    torch.manual_seed(0)
    wp = K.pack_int4(torch.randint(-8, 8, (64, 256))); s = torch.rand(64, 2) * 0.02 + 0.002
    words, x, r = G.w4_to_fragment(wp), torch.randn(3, 256), torch.randn(3, 64)
    y = G.w4a16_fragment_matmul(x, words, s)
    for offset, w in ((True, 1 + torch.randn(64) * 0.1), (False, torch.rand(64))):
        xo, h = G.w4a16_fragment_add_norm(x, words, s, r, w, 1e-6, offset)
        xr, hr = add_rms_norm(r, y, w, 1e-6, offset)
        check_marlin(xo, xr, 1e-6); check_marlin(h, hr, 1e-5)
    with pytest.raises(ValueError, match='residual'): G.w4a16_fragment_add_norm(x, words, s, r[:, :32], w, 1e-6, True)

@gpu
@pytest.mark.parametrize('M', [1, 5, 16])
@pytest.mark.parametrize('cfg', [(8, 1, 1), (4, 1, 0), (2, 2, 0), None])
def test_w4_add_norm_epilogue_equals_product_then_norm_kernel(M, cfg):
    """The add + RMSNorm epilogue (the last CTA normalizes) against the fragment kernel followed by the engine's norm
    kernel: the new residual bit for bit, the normalized rows to one bf16 rounding (the sum of squares is added in
    another order); twice in a row, so the CTAs' counter is seen to reset."""
    from effqwen.engine import fused_add_rms_norm
    torch.manual_seed(0)
    N, Kd = 2560, 4096
    wp = K.pack_int4(torch.randint(-8, 8, (N, Kd), device='cuda'))
    s = (torch.rand(N, Kd // 128, device='cuda') * 0.02 + 0.002).to(torch.bfloat16)
    words, scr = G.w4_to_fragment(wp), G.add_norm_scratch(N, 'cuda')
    for offset in (True, False):
        for _ in range(2):
            x, r = torch.randn(M, Kd, device='cuda').to(torch.bfloat16), torch.randn(M, N, device='cuda').to(torch.bfloat16)
            w = (1 + 0.1 * torch.randn(N, device='cuda')) if offset else torch.rand(N, device='cuda').to(torch.bfloat16)
            xo, h = G.w4a16_fragment_add_norm(x, words, s, r, w, 1e-6, offset, scr, cfg)
            xr, hr = fused_add_rms_norm(r, G.w4a16_fragment_matmul(x, words, s, cfg), w, 1e-6, offset)
            assert torch.equal(xo, xr) and int(scr[1].item()) == 0
            d = (h.float() - hr.float()).abs()
            assert bool((d <= hr.float().abs() * 2 ** -7 + 1e-6).all()), float(d.max())

def test_add_ss_norm_in_reference_on_cpu():
    """`w4a16_fragment_add_ss` then `w4a16_fragment_matmul(norm_in=)` on a CPU: the same as the product, the engine's add
    + RMSNorm, then the next product (Qwen3.5's (1 + w) and Llama's forms), also with the SwiGLU epilogue; bad input raises."""
    from effqwen.engine import add_rms_norm
    torch.manual_seed(0)
    wp, wp2 = K.pack_int4(torch.randint(-8, 8, (128, 256))), K.pack_int4(torch.randint(-8, 8, (64, 128)))
    s, s2 = torch.rand(128, 2) * 0.02 + 0.002, torch.rand(64, 1) * 0.02 + 0.002
    words, words2, x, r = G.w4_to_fragment(wp), G.w4_to_fragment(wp2), torch.randn(3, 256), torch.randn(3, 128)
    y, ss = G.w4a16_fragment_matmul(x, words, s), torch.empty(16)
    for offset, w in ((True, 1 + torch.randn(128) * 0.1), (False, torch.rand(128))):
        xo, h, n = G.w4a16_fragment_add_ss(x, words, s, r, ss, w, 1e-6)
        xr, hr = add_rms_norm(r, y, w, 1e-6, offset)
        check_marlin(xo, xr, 1e-6); check_marlin(h, xr * w, 1e-6)
        check_marlin(G.w4a16_fragment_matmul(h, words2, s2, norm_in=n), G.w4a16_fragment_matmul(hr, words2, s2), 1e-5)
        check_marlin(G.w4a16_fragment_matmul(h, words2, s2, swiglu_out=True, norm_in=n), G.w4a16_fragment_matmul(hr, words2, s2, swiglu_out=True), 1e-5)
    with pytest.raises(ValueError, match='residual'): G.w4a16_fragment_add_ss(x, words, s, r[:, :32], ss, w, 1e-6)
    with pytest.raises(ValueError, match='norm_in ss'): G.w4a16_fragment_matmul(h, words2, s2, norm_in=n._replace(G=16))
    with pytest.raises(ValueError, match='NormIn'): G.w4a16_fragment_matmul(h, words2, s2, norm_in=(ss, 1, 1e-6))

@gpu
@pytest.mark.parametrize('M', [1, 5, 16])
@pytest.mark.parametrize('cfg', [(8, 1, 1), (4, 1, 0), (4, 1, 1), (2, 2, 0), (4, 1, 2), None])
def test_w4_add_ss_then_norm_in_equals_norm_kernel(M, cfg):
    """The add + sums-of-squares epilogue, then the next product taking h = residual · norm weight and scaling by the
    1 / RMS (NORM_IN), against the fragment kernel, the engine's norm kernel and the fragment kernel: the new residual
    and h bit for bit; the next product within Marlin's error of its torch reference (float32 on the CPU), and as
    close to the exact product (the norm in float32, unrounded) as the unfused path is, within 25%: the two round the
    normalized input to bf16 at different scales (before the 1 / RMS here, after it there), so they differ from each
    other by about as much as each differs from the exact product (~2e-3); plain and with the SwiGLU epilogue; twice in
    a row with new inputs."""
    from effqwen.engine import fused_add_rms_norm
    torch.manual_seed(0)
    N, Kd, N2 = 2560, 4096, 1024
    wp, wp2 = K.pack_int4(torch.randint(-8, 8, (N, Kd), device='cuda')), K.pack_int4(torch.randint(-8, 8, (N2, N), device='cuda'))
    s = (torch.rand(N, Kd // 128, device='cuda') * 0.02 + 0.002).to(torch.bfloat16)
    s2 = (torch.rand(N2, N // 128, device='cuda') * 0.02 + 0.002).to(torch.bfloat16)
    words, words2, ss = G.w4_to_fragment(wp), G.w4_to_fragment(wp2), torch.empty(N, device='cuda')
    cfg2 = None if cfg is None or cfg[0] == 8 else cfg                        # (K = 2560 takes WK ≤ 4)
    for offset in (True, False):
        for _ in range(2):
            x, r = torch.randn(M, Kd, device='cuda').to(torch.bfloat16), torch.randn(M, N, device='cuda').to(torch.bfloat16)
            w = (1 + 0.1 * torch.randn(N, device='cuda')) if offset else torch.rand(N, device='cuda').to(torch.bfloat16)
            xo, h, n = G.w4a16_fragment_add_ss(x, words, s, r, ss, w, 1e-6, cfg)
            xr, hr = fused_add_rms_norm(r, G.w4a16_fragment_matmul(x, words, s, cfg), w, 1e-6, offset)
            assert torch.equal(xo, xr) and torch.equal(h, (xr.float() * w.float()).to(torch.bfloat16))
            assert torch.allclose(G.norm_rstd_ref(n, M, N), torch.rsqrt(xr.float().pow(2).mean(-1) + 1e-6), rtol=1e-5)
            for sw in (False, True):
                got = G.w4a16_fragment_matmul(h, words2, s2, cfg2, swiglu_out=sw, norm_in=n)
                cpu = G.w4a16_fragment_matmul(h.cpu(), words2.cpu(), s2.cpu(), swiglu_out=sw, norm_in=n._replace(ss=n.ss.cpu()))
                check_marlin(got, cpu.cuda(), 1e-3)
                hx = xr.float() * torch.rsqrt(xr.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()   # the norm, unrounded
                exact = G.w4a16_fragment_matmul(hx.cpu(), words2.cpu(), s2.cpu(), swiglu_out=sw).cuda()     # float32 reference
                e, e0 = rel_error(got, exact), rel_error(G.w4a16_fragment_matmul(hr, words2, s2, cfg2, swiglu_out=sw), exact)
                assert e < 1.25 * e0 + 1e-4, (e, e0)

@gpu
def test_w4_prefetch_changes_nothing_but_the_cache():
    """Requesting another weight into L2 (`prefetch=`, after or before each CTA's work) leaves the product bit for bit
    (M = 1 and 16); a prefetch that is not CUDA int32 words, or an unknown position, raises."""
    torch.manual_seed(0)
    N, Kd = 2560, 4096
    words = G.w4_to_fragment(K.pack_int4(torch.randint(-8, 8, (N, Kd), device='cuda')))
    nxt = G.w4_to_fragment(K.pack_int4(torch.randint(-8, 8, (1024, 2560), device='cuda')))
    s = (torch.rand(N, Kd // 128, device='cuda') * 0.02 + 0.002).to(torch.bfloat16)
    for M in (1, 16):
        x = torch.randn(M, Kd, device='cuda').to(torch.bfloat16)
        y = G.w4a16_fragment_matmul(x, words, s)
        for at in (1, 2): assert torch.equal(G.w4a16_fragment_matmul(x, words, s, prefetch=nxt, prefetch_at=at), y)
    with pytest.raises(ValueError, match='prefetch'): G.w4a16_fragment_matmul(x, words, s, prefetch=nxt.float())
    with pytest.raises(ValueError, match='prefetch'): G.w4a16_fragment_matmul(x, words, s, prefetch=nxt, prefetch_at=3)

@gpu
@pytest.mark.parametrize('M', [1, 5])
@pytest.mark.parametrize('red1', [False, True])
@pytest.mark.parametrize('WK,WM', [(2, 1), (4, 2)])
def test_w4_alone_pick_launch_matches_reference(M, red1, WK, WM):
    """A launch without PDL at an alone pick (DEPTH 1 without the fence; the warps' sum by `gl.sum` or in one
    shared-memory pass, RED1) takes the pick, and passes Marlin's error test."""
    if G.RED1 is not None: pytest.skip('EFFQWEN_FRAG_RED1 forces RED1')
    N, Kd = 96, 1024
    wp = K.pack_int4(torch.randint(-8, 8, (N, Kd), device='cuda'))
    s = (torch.rand(N, Kd // 128, device='cuda') * 0.02 + 0.002).to(torch.bfloat16)
    x = torch.randn(M, Kd, device='cuda').to(torch.bfloat16)
    ref = K.w4a16_mm_ref(x, wp, s).float()
    G.fragment_config('w4a16', 1, N, Kd, x.device)   # the autoload of the committed picks happens once, before the test's own
    own = dict(G._FRAG_ALONE)
    try:
        G._FRAG_ALONE[(True, N, Kd)] = (WK, WM, 1, False, red1)
        with K.no_pdl():
            assert G._red1_for(M, N, Kd, (WK, WM, 1), pdl=False) == red1
            assert G.launch_name('w4a16', M, N, Kd, x.device, pdl=False) == f'wk{WK}' + (f' wm{WM}' if WM > 1 else '') + ' d1 nofence' + (' red1' if red1 else '')
            y = G.w4a16_fragment_matmul(x, G.w4_to_fragment(wp), s)
        check_marlin(y, ref, 1e-3)
    finally: G._FRAG_ALONE.clear(); G._FRAG_ALONE.update(own)

@gpu
def test_modules_on_gpu_match_library_path():
    torch.manual_seed(0)
    m = K.W4A16Linear.from_float(torch.nn.Linear(2560, 4096, device='cuda'), group_size=128).cuda()
    x = torch.randn(1, 7, 2560, device='cuda').to(torch.bfloat16)
    y0 = m(x); m.use_fragment(); y1 = m(x)
    check_marlin(y1, y0, 1e-3)
    g = K.W4A16Linear.from_float(torch.nn.Linear(2560, 1024, bias=False, device='cuda'), group_size=128).cuda().to(torch.bfloat16)
    yg = K.swiglu_ref(g(x)); g.use_fragment(swiglu=True)
    check_marlin(g.forward_swiglu_out(x), yg, 1e-3)                          # gate+up with the SwiGLU in the kernel's epilogue
    y17 = m(torch.randn(17, 2560, device='cuda').to(torch.bfloat16))        # more than 16 rows: the library path
    assert y17.shape == (17, 4096)

def _plumbing_model():
    "The engine plumbing tests' tiny Qwen3.5 (dims the fragment kernels take), its W4A16 conversion, a prompt and a block."
    from effqwen.model import tiny_qwen35
    m = tiny_qwen35(0, initializer_range=0.2, hidden_size=256, intermediate_size=512, head_dim=64,
                    linear_key_head_dim=64, linear_value_head_dim=64)
    return m, (lambda l: K.W4A16Linear.from_float(l, group_size=128)), torch.randint(0, 255, (1, 9)), torch.randint(0, 255, (16,))

def test_engine_swiglu_epilogue_plumbing_on_cpu(monkeypatch):
    """`SWIGLU_EPILOGUE` puts each layer's gate+up projection on the SwiGLU-epilogue fragment copy and the decode / verify
    steps call `forward_swiglu_out`; on a CPU that falls back to the two steps, so the engine's tokens and logits equal
    the engine's without it (the GPU kernel itself: `test_w4_swiglu_epilogue_equals_product_then_swiglu_kernel`)."""
    import effqwen.engine as E
    m, mk, pr, blk = _plumbing_model(); out = {}
    for on in (False, True):
        monkeypatch.setattr(E, 'SWIGLU_EPILOGUE', on)
        eng = E.Engine(m, max_seq_len=48, convert=mk, fused=False)
        assert eng.use_fragment(True) >= 8 and all(L.mlp_in.fragment_swiglu == on for L in eng.layers)
        calls = []
        for L in eng.layers: monkeypatch.setattr(L.mlp_in, 'forward_swiglu_out', (lambda f: lambda x: calls.append(1) or f(x))(L.mlp_in.forward_swiglu_out))
        eng.prefill(pr)
        out[on] = torch.stack([eng.decode_one_token().clone() for _ in range(4)]), eng.verify(blk).clone()
        assert (len(calls) > 0) == on                          # decode / verify took the epilogue path (prefill does not)
    assert torch.equal(out[True][0], out[False][0]) and torch.equal(out[True][1], out[False][1])
