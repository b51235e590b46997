"""GPU checks of `effqwen.engine` (skipped without CUDA).

On a tiny random Qwen3.5 (3 Gated-DeltaNet + 1 gated attention layer) and a tiny Llama on the GPU, with the decode,
verify and commit steps recorded as CUDA graphs: greedy output equals HF's greedy output (float32 and bfloat16),
verify gives HF's logits at every block row and `commit(n)` leaves HF's state for every n, the W4A16 engine (Triton
kernels inside the graphs) equals HF with the same quantized linears, speculative decoding with the graph-captured
drafter is lossless, and the torch.compile'd steps (slowest: compiling) give the same tokens. The engine's fused
Triton kernels (the default on a GPU) are checked one by one against the torch step functions, and the torch path
(`fused=False`) still equals HF.
"""
import copy
import itertools
import pytest, torch
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')

from effqwen.core import rel_error
from effqwen.model import tiny_qwen35, tiny_llama, greedy_generate

def _models(dtype):
    torch.manual_seed(0)
    return {'qwen3.5': tiny_qwen35(0, dtype, initializer_range=0.2).cuda(), 'llama': tiny_llama(0, dtype, initializer_range=0.2).cuda()}

def _prompts():
    g = torch.Generator().manual_seed(0)
    return [torch.randint(0, 255, (1, L), generator=g).cuda() for L in (5, 23, 70)]

def _agree_up_to_ties(m, pr, out, ref, ulps=4):
    """Engine and HF greedy agree, or first differ where HF's own top-2 logits are within a few bf16 ulps (a rounding tie).

    After such a flip the continuations legitimately differ, so only the first divergence is judged."""
    diff = (out[0] != ref[0]).nonzero()
    if len(diff) == 0: return
    j = int(diff[0])
    with torch.no_grad():
        lg = m(torch.cat([pr[0], ref[0, :j]])[None]).logits[0, -1].float()
    margin = (lg[ref[0, j]] - lg[out[0, j]]).item()   # < 0: HF's full forward itself prefers the engine's token (HF's cached greedy sat on the tie)
    tol = ulps * 2.0 ** -8 * lg.abs().max().item()
    assert abs(margin) <= tol, f'first divergence at token {j}: HF prefers its token by {margin:.4g}, |margin| > {tol:.3g} (not a tie)'

@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16])
def test_greedy_equals_hf(dtype):
    from effqwen.engine import Engine
    for name, m in _models(dtype).items():
        eng = Engine(m, max_seq_len=160)
        assert set(eng.graphs) == {'decode', 'verify', 'commit'}
        for pr in _prompts():
            ref, out = greedy_generate(m, pr, 40), eng.generate(pr, 40)
            if dtype == torch.float32: assert torch.equal(out, ref), (name, pr.shape)
            else: _agree_up_to_ties(m, pr, out, ref)   # bf16: block vs token-by-token rounding may flip a near-tie

def test_greedy_equals_hf_float32_head_dim_256():
    "The 4B's attention head dim (256) with a float32 cache: the split-K attention's key / value tiles must fit shared memory at 4 bytes per element (they were sized for bf16 and failed to launch)."
    from effqwen.engine import Engine
    m = tiny_qwen35(0, torch.float32, initializer_range=0.2, head_dim=256).cuda()
    eng = Engine(m, max_seq_len=160)
    assert eng.fused
    for pr in _prompts(): assert torch.equal(eng.generate(pr, 24), greedy_generate(m, pr, 24)), pr.shape

def test_verify_commit_equal_hf():
    from effqwen.engine import Engine
    m = _models(torch.float32)['qwen3.5']
    eng = Engine(m, max_seq_len=160)
    pr, blk = _prompts()[1], torch.randint(0, 255, (16,), device='cuda')
    with torch.no_grad():
        full = m(torch.cat([pr[0], blk])[None]).logits[0]
        eng.prefill(pr)
        # on a GPU, HF's Gated-DeltaNet runs flash-linear-attention's Triton chunk kernels, whose fp32 tl.dot uses
        # TF32 (~1e-3 relative): the reference itself is only that precise (measured 9.99e-4 on an H200)
        assert rel_error(eng.verify(blk), full[23:39]) < 3e-3
        nxt = torch.tensor([5], device='cuda')
        for n in (1, 7, 16):
            eng.prefill(pr); eng.verify(blk); eng.commit(n); eng.tok[:1] = nxt
            got = eng.decode_one_token().clone()
            eng.prefill(torch.cat([pr[0], blk[:n]])[None]); eng.tok[:1] = nxt
            fresh = eng.decode_one_token().clone()                  # the engine's own prefill of the same prefix
            want = m(torch.cat([pr[0], blk[:n], nxt])[None]).logits[0, -1]
            # Measured on an H200 (scripts/engine_commit_diag.py): commit vs fresh prefill 8.6e-5 / 4.9e-4 /
            # 3.5e-3 and commit vs HF 4.0e-4 / 9.2e-4 / 6.9e-3 for n = 1 / 7 / 16, while the fresh prefill of the
            # same 39 tokens is itself 3.6e-3 from HF: both sides run fla's TF32 chunk kernel, whose error grows with
            # the sequence; the n = 16 tolerance covers that measured TF32 error, not a looser rollback.
            tol = 3e-3 if n < 16 else 1e-2
            assert rel_error(got, fresh) < tol and rel_error(got, want) < tol, (n, rel_error(got, fresh), rel_error(got, want))

def test_w4a16_engine_equals_hf_w4a16():
    from effqwen.engine import Engine
    from effqwen.kernels import W4A16Linear, replace_linears
    m = _models(torch.bfloat16)['qwen3.5']
    mk = lambda l: W4A16Linear.from_float(l, group_size=32)
    m4 = copy.deepcopy(m); replace_linears(m4, mk)
    eng = Engine(m, max_seq_len=160, convert=mk)
    for pr in _prompts():
        ref, out = greedy_generate(m4, pr, 32), eng.generate(pr, 32)
        _agree_up_to_ties(m4, pr, out, ref)

@pytest.mark.parametrize('swiglu_epilogue,norm_epilogue,norm_split', [pytest.param(False, False, False, id='plain'),
                                                                       pytest.param(True, False, False, id='swiglu_epilogue'),
                                                                       pytest.param(True, True, False, id='norm_epilogue'),
                                                                       pytest.param(True, False, True, id='norm_split'),
                                                                       pytest.param(False, False, True, id='norm_split_plain_mlp')])
def test_w4a16_fragment_engine_equals_hf_w4a16(swiglu_epilogue, norm_epilogue, norm_split, monkeypatch):
    """The engine with its W4A16 linears on the Gluon fragment kernels (`Engine.use_fragment`; group 128 and dims the
    kernels take: a tiny Qwen3.5 widened to 256) generates HF's W4A16 greedy tokens, up to rounding ties; also with the
    SwiGLU in the gate+up kernel's epilogue (`SWIGLU_EPILOGUE`), the add + RMSNorm in the output / down projections'
    (`NORM_EPILOGUE`), or split between them and the next projection (`NORM_SPLIT`); and the verify-16 step's logits
    close to HF's on the same block (bf16: 3e-2 relative)."""
    import effqwen.gluon as G
    if G.gluon is None: pytest.skip(f'no Gluon: {G._GLUON_ERR}')
    import effqwen.engine as E
    from effqwen.engine import Engine
    monkeypatch.setattr(E, 'SWIGLU_EPILOGUE', swiglu_epilogue); monkeypatch.setattr(E, 'NORM_EPILOGUE', norm_epilogue)
    monkeypatch.setattr(E, 'NORM_SPLIT', norm_split)
    from effqwen.kernels import W4A16Linear, replace_linears
    m = tiny_qwen35(0, torch.bfloat16, initializer_range=0.2, hidden_size=256, intermediate_size=512, head_dim=64,
                    linear_key_head_dim=64, linear_value_head_dim=64).cuda()
    mk = lambda l: W4A16Linear.from_float(l, group_size=128)
    m4 = copy.deepcopy(m); replace_linears(m4, mk)
    eng = Engine(m, max_seq_len=160, convert=mk)
    assert eng.use_fragment(True) >= 8                        # the layers' o / out, gate+up, down (and full attention's qkv)
    assert all(L.mlp_in.fragment_swiglu == swiglu_epilogue for L in eng.layers)
    for pr in _prompts():
        ref, out = greedy_generate(m4, pr, 32), eng.generate(pr, 32)
        _agree_up_to_ties(m4, pr, out, ref)
    pr, blk = _prompts()[1], torch.randint(0, 255, (16,), device='cuda')
    with torch.no_grad():
        full = m4(torch.cat([pr[0], blk])[None]).logits[0, pr.shape[1]:pr.shape[1] + 16]
        eng.prefill(pr); assert rel_error(eng.verify(blk), full) < 3e-2

def test_speculative_with_static_drafter():
    from effqwen.engine import Engine, StaticDrafter, speculative_generate
    from effqwen.dflash import DFlashDrafter, DFlashConfig
    m = _models(torch.float32)['qwen3.5']
    dr = DFlashDrafter(DFlashConfig.for_target(m, mask_token_id=255, block_size=16, num_hidden_layers=2, target_layer_ids=(0, 2))).cuda().bind(m)
    eng = Engine(m, max_seq_len=200, tap_layers=(0, 2))
    for W, fz in ((None, True), (None, False), (8, False), (20, True)):   # the fused step takes windows >= the block
        dr.set_sliding_window(W)
        sd = StaticDrafter(dr, 200, fused=fz)
        assert sd.graph is not None
        for pr in _prompts():
            assert torch.equal(speculative_generate(eng, sd, pr, 40).new_tokens.cuda(), greedy_generate(m, pr, 40))
    # float32: the fused step (fused linears, the split-K block attention) proposes what the plain step does (a drafter
    # with larger weights than the default init, so that its attention moves its drafts: a masking error shows)
    dr = DFlashDrafter(DFlashConfig.for_target(m, mask_token_id=255, block_size=16, num_hidden_layers=2, target_layer_ids=(0, 2),
                                               initializer_range=0.2)).cuda().bind(m)
    for W in (None, 20):
        dr.set_sliding_window(W)
        sf, sp = StaticDrafter(dr, 200, fused=True), StaticDrafter(dr, 200, fused=False)
        feats, ids = torch.randn(1, 60, dr.fc.in_features, device='cuda'), torch.randint(0, 255, (1, 61))
        for lo, hi in [(0, 30), (30, 33), (33, 34), (34, 60)]:
            a, b = sf.propose(ids[:, :hi + 1], feats[:, lo:hi], 15)[0], sp.propose(ids[:, :hi + 1], feats[:, lo:hi], 15)[0]
            assert torch.equal(a, b), (W, lo, hi, a, b)

def test_compiled_steps():   # slow: torch.compile of the step functions
    from effqwen.engine import Engine
    m = _models(torch.float32)['qwen3.5']
    eng = Engine(m, max_seq_len=160, compile=True)
    for pr in _prompts()[:2]:
        assert torch.equal(eng.generate(pr, 32), greedy_generate(m, pr, 32))


def test_torch_path_equals_hf():
    from effqwen.engine import Engine
    for name, m in _models(torch.float32).items():
        eng = Engine(m, max_seq_len=160, fused=False)
        assert not eng.fused
        for pr in _prompts()[:2]: assert torch.equal(eng.generate(pr, 32), greedy_generate(m, pr, 32)), name

@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16])
def test_fused_kernels_match_torch(dtype, monkeypatch):
    import effqwen.engine as E
    torch.manual_seed(0)
    torch.backends.cudnn.allow_tf32 = False              # the reference's conv1d in float32 must not run in TF32
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    dev = 'cuda'
    # residual add + RMSNorm (both conventions), SwiGLU
    x, y = torch.randn(5, 320, device=dev, dtype=dtype), torch.randn(5, 320, device=dev, dtype=dtype)
    for off, w in ((True, torch.rand(320, device=dev) + 0.5), (False, (torch.rand(320, device=dev) + 0.5).to(dtype))):
        xo, h = E.fused_add_rms_norm(x, y, w, 1e-6, off); xr, hr = E.add_rms_norm(x, y, w, 1e-6, off)
        assert rel_error(xo, xr) < tol and rel_error(h, hr) < tol
        assert rel_error(E.fused_add_rms_norm(x, None, w, 1e-6, off)[1], E.rms_norm(x, w, 1e-6, off)) < tol
    gu = torch.randn(3, 2 * 600, device=dev, dtype=dtype)
    assert rel_error(E.fused_swiglu(gu), E.swiglu(gu)) < tol
    # one Gated-DeltaNet token (states in place) and a prefill, Qwen3.5-like head ratio 2
    Hk, Hv, Dk, Dv, Kc = 2, 4, 32, 64, 4
    Kd, Vd = Hk * Dk, Hv * Dv; C = 2 * Kd + Vd
    dims = (C, Kd, Vd, Hk, Hv, Dk, Dv, 1e-6)
    cw, neg_a = (torch.randn(C, Kc, device=dev) * 0.5).to(dtype), -torch.rand(Hv, device=dev) * 4
    dtb, nw = torch.randn(Hv, device=dev).to(dtype), (torch.rand(Dv, device=dev) + 0.5).to(dtype)
    for bv in (16, 64):
        proj = torch.randn(1, C + Vd + 2 * Hv, device=dev, dtype=dtype)
        S0, cb0 = torch.randn(Hv, Dk, Dv, device=dev) * 0.3, torch.randn(C, Kc, device=dev, dtype=dtype)
        S1, cb1, S2, cb2 = S0.clone(), cb0.clone(), S0.clone(), cb0.clone()
        yr = E.gdn_decode(proj, cb1, S1, cw, neg_a, dtb, nw, dims)
        yf = E.fused_gdn_decode(proj, cb2, S2, cw, neg_a, dtb, nw, dims, bv=bv)
        assert rel_error(yf, yr) < tol and rel_error(S2, S1) < tol and torch.equal(cb2, cb1)
    # commit of n block tokens after a verify: the Triton kernel against `gdn_commit` (state and conv window)
    T = 16
    proj = torch.randn(T, C + Vd + 2 * Hv, device=dev, dtype=dtype)
    S0, cb0 = torch.randn(Hv, Dk, Dv, device=dev) * 0.3, torch.randn(C, Kc, device=dev, dtype=dtype)
    scr = (torch.zeros(C, Kc + T, device=dev, dtype=dtype), torch.zeros(Hv, T, Dk, device=dev), torch.zeros(Hv, T, Dv, device=dev), torch.zeros(Hv, T, device=dev))
    E.gdn_verify(proj, cb0, S0, cw, neg_a, dtb, nw, dims, *scr)
    for n in (1, 7, 16):
        S1, cb1, S2, cb2 = S0.clone(), cb0.clone(), S0.clone(), cb0.clone()
        nn_ = torch.tensor([n], device=dev)
        E.gdn_commit(S1, cb1, *scr, nn_); E.fused_gdn_commit(S2, cb2, *scr, nn_)
        assert rel_error(S2, S1) < 1e-5 and torch.equal(cb2, cb1), n
    from transformers.models.qwen3_5 import modeling_qwen3_5 as hf
    proj = torch.randn(100, C + Vd + 2 * Hv, device=dev, dtype=dtype)
    S1, cb1, S2, cb2 = (torch.zeros(Hv, Dk, Dv, device=dev), torch.zeros(C, Kc, device=dev, dtype=dtype),
                        torch.zeros(Hv, Dk, Dv, device=dev), torch.zeros(C, Kc, device=dev, dtype=dtype))
    yr = E.gdn_prefill(proj, cb1, S1, cw, neg_a, dtb, nw, dims, hf.torch_chunk_gated_delta_rule)
    yf = E.fused_gdn_prefill(proj, cb2, S2, cw, neg_a, dtb, nw, dims, hf.torch_chunk_gated_delta_rule)
    assert rel_error(yf, yr) < 3e-3 + tol and rel_error(S2, S1) < 3e-3 + tol and torch.equal(cb2, cb1)   # fla's chunk kernel: TF32
    if (fla := E.fla_chunk_rule(torch.device(dev))) is not None:   # grouped values (q/k not repeated) = the repeated call of the same kernel
        S3, cb3, S4, cb4 = (torch.zeros_like(S1), torch.zeros_like(cb1), torch.zeros_like(S1), torch.zeros_like(cb1))
        yg = E.fused_gdn_prefill(proj, cb3, S3, cw, neg_a, dtb, nw, dims, fla, gva=True)
        yp = E.fused_gdn_prefill(proj, cb4, S4, cw, neg_a, dtb, nw, dims, fla, gva=False)
        assert rel_error(yg, yp) < 1e-3 + tol and rel_error(S3, S4) < 1e-3 + tol and torch.equal(cb3, cb4)
        assert rel_error(yg, yr) < 3e-3 + tol
    # one attention token over a cache, several chunks (positions past the length must not count), with and without gate
    H, Hkv, D, R, Lmax = 8, 2, 64, 16, 300
    cos, sin = torch.randn(Lmax, R, device=dev, dtype=dtype), torch.randn(Lmax, R, device=dev, dtype=dtype)
    qn, kn = torch.rand(D, device=dev) + 0.5, torch.rand(D, device=dev) + 0.5
    for gate in (True, False):
        dims = (H, Hkv, D, R, gate, True, 1e-6, True)
        proj = torch.randn(1, H * D * (2 if gate else 1) + 2 * Hkv * D, device=dev, dtype=dtype)
        kc, vc = torch.randn(Hkv, Lmax, D, device=dev, dtype=dtype), torch.randn(Hkv, Lmax, D, device=dev, dtype=dtype)
        for (p, chunk), dyn in itertools.product(((0, 32), (37, 32), (299, 32)), (False, True)):   # one chunk size: fewer compiles;
            monkeypatch.setattr(E, 'ATTN_DYN_CHUNK', dyn)   # 299 spans 10 chunks; dyn: chunks by the context (`ATTN_DYN_CHUNK`)
            pos = torch.tensor([p], device=dev)
            k1, v1, k2, v2 = kc.clone(), vc.clone(), kc.clone(), vc.clone()
            q, k, v, g = E.attn_qkv(proj, cos[p:p + 1], sin[p:p + 1], qn, kn, dims)
            yr = E.gated(E.attn_cache(q, k, v, k1, v1, pos, D ** -0.5), g)
            yf = E.fused_attn_decode(proj, cos, sin, pos, qn, kn, k2, v2, dims, chunk=chunk)
            assert rel_error(yf, yr) < (tol if dtype == torch.float32 else 4e-2), (gate, p, chunk, dyn, rel_error(yf, yr))   # bf16: the reference rounds scores to bf16
            assert rel_error(k2, k1) < tol and torch.equal(v2, v1)

def test_fused_engine_matches_torch_engine():
    from effqwen.engine import Engine
    m = _models(torch.bfloat16)['qwen3.5']
    a, b = Engine(m, max_seq_len=160, fused=False), Engine(m, max_seq_len=160)
    assert b.fused and not a.fused
    pr = _prompts()[2]
    assert rel_error(b.prefill(pr), a.prefill(pr)) < 2e-2
    for t in range(8):                                   # teacher-forced: both engines fed the same tokens
        tok = a.logits[0].argmax().view(1); a.tok[:1] = tok; b.tok[:1] = tok
        assert rel_error(b.decode_one_token(), a.decode_one_token()) < 3e-2, t

def test_recorded_prefill_equals_eager_prefill():
    """GPU prefill pads the prompt to its size bucket and replays the graph recorded at the bucket's first prompt
    (`prefill_padded`): the replayed prompts (other lengths, same bucket) give the eager exact-length prefill's logits,
    taps and next token, and the decoding after them."""
    import effqwen.engine as E
    from effqwen.engine import Engine
    for name, m in _models(torch.float32).items():
        eng = Engine(m, max_seq_len=160, tap_layers=(0, 1))
        g = torch.Generator().manual_seed(1)
        for L in (5, 23, 64, 70, 100):                        # buckets 64, 64, 64, 128, 128: the 2nd, 3rd and 5th replay
            pr = torch.randint(0, 255, (1, L), generator=g).cuda()
            outs = []
            for rec in (True, False):
                E.PREFILL_GRAPHS = rec
                try: lp = eng.prefill(pr).clone(); f = eng._prefill_feats.clone(); d = eng.decode_n_tokens(8).clone()
                finally: E.PREFILL_GRAPHS = True
                outs.append((lp, f, d))
            (a, fa, da), (b, fb, db) = outs
            assert rel_error(a, b) < 1e-5 and rel_error(fa, fb) < 1e-5 and torch.equal(da, db), (name, L, rel_error(a, b), rel_error(fa, fb))
        assert getattr(eng, 'prefill_graph_error', None) is None and set(eng.prefill_graphs) == {64, 128}, (name, getattr(eng, 'prefill_graph_error', None))
        eng.drop_prefill_graphs()                                 # recorded again, in a new pool, after the graphs are dropped
        for _ in range(2): eng.prefill(pr)
        assert getattr(eng, 'prefill_graph_error', None) is None and set(eng.prefill_graphs) == {128}, (name, getattr(eng, 'prefill_graph_error', None))

def test_argmax_head_equals_bf16_head():
    """`ArgmaxHead` at the 4B head's shape (248320 × 2560, bf16, random): the BF16 head's argmax for 1 and 16 rows, with
    few candidates listed; inside the recorded decode / verify graphs of a bf16 tiny Qwen3.5 engine it gives the plain
    head's tokens."""
    import torch.nn as nn, torch.nn.functional as F
    from effqwen.engine import ArgmaxHead, Engine
    torch.manual_seed(0)
    lin = nn.Linear(2560, 248320, bias=False, device='cuda', dtype=torch.bfloat16)
    nn.init.normal_(lin.weight, std=0.02)
    ah = ArgmaxHead(lin)
    for T in (1, 16, 1, 16):
        h = torch.randn(T, 2560, device='cuda').to(torch.bfloat16)
        nt = torch.zeros(16, dtype=torch.long, device='cuda')
        ah.argmax_into(h, nt); torch.cuda.synchronize()
        assert torch.equal(nt[:T], F.linear(h, lin.weight).argmax(-1))
    del lin, ah; torch.cuda.empty_cache()
    m = tiny_qwen35(0, torch.bfloat16, initializer_range=0.2).cuda()
    ea, ep = Engine(m, max_seq_len=128, convert_head=ArgmaxHead.from_linear), Engine(m, max_seq_len=128)
    for pr in _prompts():
        assert torch.equal(ea.generate(pr, 24), ep.generate(pr, 24))
        blk = torch.randint(0, 255, (16,), device='cuda')
        ea.prefill(pr); ep.prefill(pr); ea.verify(blk); ep.verify(blk)
        assert torch.equal(ea.next_tok, ep.next_tok)

@pytest.mark.parametrize('head', ['bf16', 'argmax8'])
def test_decode_chain_equals_single_steps(head, monkeypatch):
    """`DECODE_CHAIN`: decode steps recorded back to back in one graph give the tokens of one graph per step (whole
    chunks from the chain graph, the rest step by step), with the plain head and with `ArgmaxHead` (whose pick kernel
    resets its scratch for the next step inside the graph)."""
    import effqwen.engine as E
    m = tiny_qwen35(0, torch.bfloat16, initializer_range=0.2).cuda()
    conv = E.ArgmaxHead.from_linear if head == 'argmax8' else None
    ref = E.Engine(m, max_seq_len=128, convert_head=conv)
    monkeypatch.setattr(E, 'DECODE_CHAIN', 4)
    eng = E.Engine(m, max_seq_len=128, convert_head=conv)
    assert set(eng.graphs) == {'decode', 'verify', 'commit', 'decode_chain'} and eng.decode_chain == 4
    for pr in _prompts():
        for n in (1, 4, 11):
            ref.prefill(pr); eng.prefill(pr)
            assert torch.equal(eng.decode_n_tokens(n), ref.decode_n_tokens(n)), (pr.shape, n)
            assert eng.length == ref.length and int(eng.pos) == int(ref.pos)
        assert torch.equal(eng.generate(pr, 30), ref.generate(pr, 30))
    monkeypatch.setattr(E, 'DECODE_CHAIN', 0)
    with pytest.raises(ValueError, match='DECODE_CHAIN'): eng._capture()

@pytest.mark.parametrize('setting', ['GDN_STATE_EARLY', 'ATTN_PREFETCH', 'ATTN_PDL', 'EMBED_NORM'])
def test_early_loads_give_same_tokens_and_states(setting, monkeypatch):
    """The decode kernels' loads issued before their programmatic-dependent-launch wait (`GDN_STATE_EARLY`: the one-token
    Gated-DeltaNet kernel's state slice; `ATTN_PREFETCH`: the split-K attention's keys / values into L2) read the same
    values, so the W4A16 engine's recorded decode graph (PDL on) gives bit-identical tokens and recurrent states with the
    option off and on; each setting runs twice, so an engine that does not repeat itself fails too. `ATTN_PDL` (the
    attention's kernels launched with or without PDL) and `EMBED_NORM` (the embedding rows gathered by the first norm
    kernel instead of an embedding kernel before it) must not change a value either. (The engine A/B at
    the 4B shape saw the settings' tokens differ: `data/results/step_early_ab_h200.json`.)"""
    import effqwen.engine as E
    import effqwen.kernels as K
    from effqwen.kernels import W4A16Linear
    if not K.PDL: pytest.skip('programmatic dependent launch is off (EFFQWEN_PDL=0)')
    m = _models(torch.bfloat16)['qwen3.5']
    runs = {}
    for on in (False, True, False, True):
        monkeypatch.setattr(E, setting, on)
        eng = E.Engine(m, max_seq_len=192, convert=lambda l: W4A16Linear.from_float(l, group_size=32))
        got = []
        for pr in _prompts():
            eng.prefill(pr); t = eng.decode_n_tokens(48).clone()
            got.append((t, torch.stack([L.S.clone() for L in eng.layers if L.kind == 'linear_attention'])))
        runs.setdefault(on, []).append(got)
    ref = runs[False][0]
    for on, rs in runs.items():
        for r, got in enumerate(rs):
            for i, ((t, S), (t0, S0)) in enumerate(zip(got, ref)):
                assert torch.equal(t, t0) and torch.equal(S, S0), (setting, on, r, i)

def test_gdc_early_gives_same_tokens_and_states(monkeypatch):
    """`effqwen.gluon.GDC_EARLY` (the fragment kernels let the next kernel launch before their programmatic-dependent-
    launch wait) changes only when kernels start: the W4A16 engine on the fragment kernels (group 128, a tiny Qwen3.5
    widened to 256) gives bit-identical decode tokens, recurrent states and verify-16 logits with it off and on, each
    setting twice (the 4B-shape A/Bs: `data/results/step_attr_early_p*_ab_h200.json`)."""
    import effqwen.gluon as G
    import effqwen.engine as E
    import effqwen.kernels as K
    from effqwen.kernels import W4A16Linear
    if G.gluon is None: pytest.skip(f'no Gluon: {G._GLUON_ERR}')
    if not K.PDL: pytest.skip('programmatic dependent launch is off (EFFQWEN_PDL=0)')
    m = tiny_qwen35(0, torch.bfloat16, initializer_range=0.2, hidden_size=256, intermediate_size=512, head_dim=64,
                    linear_key_head_dim=64, linear_value_head_dim=64).cuda()
    blk = torch.randint(0, 255, (16,), device='cuda', generator=torch.Generator('cuda').manual_seed(1))
    runs = {}
    for on in (False, True, False, True):
        monkeypatch.setattr(G, 'GDC_EARLY', on)
        eng = E.Engine(m, max_seq_len=192, convert=lambda l: W4A16Linear.from_float(l, group_size=128))
        assert eng.use_fragment(True) >= 8
        got = []
        for pr in _prompts():
            eng.prefill(pr); t = eng.decode_n_tokens(40).clone()
            S = torch.stack([L.S.clone() for L in eng.layers if L.kind == 'linear_attention'])
            eng.prefill(pr); got.append((t, S, eng.verify(blk).clone()))
        runs.setdefault(on, []).append(got)
    ref = runs[False][0]
    for on, rs in runs.items():
        for r, got in enumerate(rs):
            for i, (a, b) in enumerate(zip(got, ref)):
                assert all(torch.equal(u, v) for u, v in zip(a, b)), (on, r, i)

@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16])
def test_round_graph_equals_pipelined_rounds(dtype, monkeypatch):
    """A pipelined round replayed as one recorded graph, and with its block and accept as two kernels (`ROUND_KERNELS`),
    gives the tokens and acceptance lengths of the round's torch ops issued one by one."""
    import effqwen.engine as E
    from effqwen.engine import Engine, StaticDrafter, speculative_generate, round_graph_ok
    monkeypatch.setattr(E, 'ROUND_KERNELS', E.ROUND_KERNELS)
    from effqwen.dflash import DFlashDrafter, DFlashConfig
    m = _models(dtype)['qwen3.5']
    dr = DFlashDrafter(DFlashConfig.for_target(m, mask_token_id=255, block_size=16, num_hidden_layers=2, target_layer_ids=(0, 2),
                                               initializer_range=0.2)).cuda().to(dtype).bind(m)
    for bs in (16, 8):                      # (an engine verifying 8 rows with the block-16 drafter)
        eng = Engine(m, max_seq_len=200, tap_layers=(0, 2), block_size=bs)
        for W in (None, 20):
            dr.set_sliding_window(W)
            sd = StaticDrafter(dr, 200)
            assert round_graph_ok(eng, sd)
            for pr in _prompts():
                for n in (40, 3):
                    E.ROUND_KERNELS = False
                    a = speculative_generate(eng, sd, pr, n, round_graph=False)           # the round's torch ops, one by one
                    for kern, rg in ((False, True), (True, False), (True, True)):
                        E.ROUND_KERNELS = kern
                        assert E.round_kernels(eng) == kern
                        b = speculative_generate(eng, sd, pr, n, round_graph=rg)
                        assert b.round_graph == rg and not a.round_graph
                        assert torch.equal(a.new_tokens, b.new_tokens) and a.acceptance_lengths == b.acceptance_lengths, (bs, W, n, kern, rg)
                    if dtype == torch.float32: assert torch.equal(b.new_tokens.cuda(), greedy_generate(m, pr, n))
            assert any(k[0] == id(sd) for k in eng._round_graphs)   # recorded once per engine, proposer and round-kernel setting
        # setup() allocates new step buffers and records the steps again: the rounds recorded over the old ones are dropped
        eng.setup(220)
        assert not getattr(eng, '_round_graphs', None)
        pr = _prompts()[0]
        assert torch.equal(speculative_generate(eng, sd, pr, 40, round_graph=True).new_tokens, speculative_generate(eng, sd, pr, 40, round_graph=False).new_tokens)
