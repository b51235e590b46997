"""GPU checks of `effqwen.engine` (skipped without CUDA).

On a tiny random Qwen3.5 (3 Gated-DeltaNet + 1 gated attention layer) and a tiny Llama on the GPU, with the default
`EngineOptions` (fused kernels, CUDA graphs, `ArgmaxHead`, programmatic dependent launch in the prefill / decode /
verify graphs): greedy output equals HF's (float32; bfloat16 up to rounding ties), verify and `commit(n)` give HF's
logits, the W4A16 engine on the fragment kernels equals HF with the same quantized linears, the recorded prefill equals
the eager one, `ArgmaxHead` gives the BF16 head's tokens, speculative decoding with the recorded drafter and the
one-graph round is lossless, and each fused kernel equals its torch function.
"""
import copy
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

def _wide():
    "A tiny Qwen3.5 whose dims the fragment kernels take (multiples of 128, group 128)."
    return tiny_qwen35(0, torch.bfloat16, initializer_range=0.2, hidden_size=256, intermediate_size=512, head_dim=64,
                       linear_key_head_dim=64, linear_value_head_dim=64).cuda()

def _agree_up_to_ties(m, pr, out, ref, ulps=4):
    "Engine and HF greedy agree, or first differ where HF's own top-2 logits are within a few bf16 ulps (a rounding tie)."
    diff = (out[0] != ref[0]).nonzero()
    if len(diff) == 0: return
    j = int(diff[0])
    with torch.no_grad(): lg = m(torch.cat([pr[0], ref[0, :j]])[None]).logits[0, -1].float()
    margin, tol = (lg[ref[0, j]] - lg[out[0, j]]).item(), ulps * 2.0 ** -8 * lg.abs().max().item()
    assert abs(margin) <= tol, f'first divergence at token {j}: HF prefers its token by {margin:.4g}, |margin| > {tol:.3g} (not a tie)'

@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16])
def test_greedy_equals_hf(dtype):
    from effqwen.engine import Engine, EngineOptions
    for name, m in _models(dtype).items():
        eng = Engine(m, max_seq_len=160)
        assert set(eng.graphs) == {'decode', 'verify', 'commit'} and eng.fused and type(eng.head).__name__ == 'ArgmaxHead'
        for pr in _prompts():
            ref, out = greedy_generate(m, pr, 40), eng.generate(pr, 40)
            if dtype == torch.float32: assert torch.equal(out, ref), (name, pr.shape)
            else: _agree_up_to_ties(m, pr, out, ref)
        if dtype == torch.float32:   # the torch path, and the speculative entry of `generate`
            et = Engine(m, max_seq_len=160, options=EngineOptions(fused=False))
            for pr in _prompts()[:2]: assert torch.equal(et.generate(pr, 24), greedy_generate(m, pr, 24)), name
    m = tiny_qwen35(0, torch.float32, initializer_range=0.2, head_dim=256).cuda()   # head dim 256 with a float32 cache: the tiles fit
    eng = Engine(m, max_seq_len=160)
    for pr in _prompts(): assert torch.equal(eng.generate(pr, 24), greedy_generate(m, pr, 24)), pr.shape

def test_verify_commit_equal_hf():
    from effqwen.engine import Engine, EngineOptions
    m = _models(torch.float32)['qwen3.5']
    eng = Engine(m, max_seq_len=160, options=EngineOptions(argmax_head=False))
    pr, blk = _prompts()[1], torch.randint(0, 255, (16,), device='cuda')
    with torch.no_grad():
        full = m(torch.cat([pr[0], blk])[None]).logits[0]
        eng.prefill(pr)
        assert rel_error(eng.verify(blk), full[23:39]) < 3e-3   # (HF's Gated-DeltaNet on a GPU: fla's TF32 chunk kernel)
        nxt = torch.tensor([5], device='cuda')
        for n in (1, 7, 16):
            eng.prefill(pr); eng.verify(blk); eng.commit(n); eng.tok[:1] = nxt
            got = eng.decode_one_token().clone()
            eng.prefill(torch.cat([pr[0], blk[:n]])[None]); eng.tok[:1] = nxt
            fresh = eng.decode_one_token().clone()
            want = m(torch.cat([pr[0], blk[:n], nxt])[None]).logits[0, -1]
            tol = 3e-3 if n < 16 else 1e-2                          # (the TF32 error of fla's kernel grows with the sequence)
            assert rel_error(got, fresh) < tol and rel_error(got, want) < tol, (n, rel_error(got, fresh), rel_error(got, want))

def test_w4a16_fragment_engine_equals_hf_w4a16():
    """The engine's W4A16 linears on the Gluon fragment kernels (SwiGLU in the gate+up epilogue) generate HF's W4A16 greedy
    tokens up to rounding ties; verify-16's tokens are the BF16-head engine's; the library kernels (fragment off) too."""
    from effqwen.kernels import W4A16Linear, replace_linears, gluon
    from effqwen.engine import Engine, EngineOptions
    if gluon.gluon is None: pytest.skip('no Gluon')
    m = _wide()
    mk = lambda l: W4A16Linear.from_float(l, group_size=128)
    m4 = copy.deepcopy(m); replace_linears(m4, mk)
    for opts in (EngineOptions(fragment=True), EngineOptions(fragment=False)):
        eng = Engine(m, max_seq_len=160, convert=mk, options=opts)
        assert all(L.mlp_in.fragment_swiglu == opts.fragment for L in eng.layers)
        for pr in _prompts(): _agree_up_to_ties(m4, pr, eng.generate(pr, 32), greedy_generate(m4, pr, 32))
    pr, blk = _prompts()[1], torch.randint(0, 255, (16,), device='cuda')
    ep = Engine(m, max_seq_len=160, convert=mk, options=EngineOptions(fragment=True, argmax_head=False))
    with torch.no_grad():
        full = m4(torch.cat([pr[0], blk])[None]).logits[0, pr.shape[1]:pr.shape[1] + 16]
        ep.prefill(pr); assert rel_error(ep.verify(blk), full) < 3e-2

def test_pdl_steps_give_same_tokens():
    "Programmatic dependent launch changes when kernels start, not a value: the W4A16 fragment engine with PDL in no step and in the default steps gives the same tokens and states, each twice."
    from effqwen.kernels import W4A16Linear
    from effqwen.engine import Engine, EngineOptions
    m = _wide()
    runs = []
    for steps in ((), ('prefill', 'decode', 'verify'), (), ('prefill', 'decode', 'verify')):
        eng = Engine(m, max_seq_len=192, convert=lambda l: W4A16Linear.from_float(l, group_size=128), options=EngineOptions(pdl_steps=steps))
        got = []
        for pr in _prompts():
            eng.prefill(pr); t = eng.decode_n_tokens(40).clone()
            got.append((t, torch.stack([L.S.clone() for L in eng.layers if L.kind == 'linear_attention'])))
        runs.append(got)
    for r in runs[1:]:
        for (t, S), (t0, S0) in zip(r, runs[0]): assert torch.equal(t, t0) and torch.equal(S, S0)

def test_recorded_prefill_equals_eager_prefill():
    "The recorded prefill (padded to its bucket, replayed) gives the eager exact-length prefill's logits, taps and decoding."
    from effqwen.engine import Engine, EngineOptions
    for name, m in _models(torch.float32).items():
        rec = Engine(m, max_seq_len=160, tap_layers=(0, 1), options=EngineOptions(argmax_head=False))
        eag = Engine(m, max_seq_len=160, tap_layers=(0, 1), options=EngineOptions(argmax_head=False, cuda_graphs=False))
        g = torch.Generator().manual_seed(1)
        for L in (5, 23, 64, 70, 100):                        # buckets 64, 64, 64, 128, 128: the 2nd, 3rd and 5th replay
            pr = torch.randint(0, 255, (1, L), generator=g).cuda()
            outs = [(e.prefill(pr).clone(), e._prefill_feats.clone(), e.decode_n_tokens(8).clone()) for e in (rec, eag)]
            (a, fa, da), (b, fb, db) = outs
            assert rel_error(a, b) < 1e-5 and rel_error(fa, fb) < 1e-5 and torch.equal(da, db), (name, L, rel_error(a, b), rel_error(fa, fb))
        assert getattr(rec, 'prefill_graph_error', None) is None and set(rec.prefill_graphs) == {64, 128}

def test_argmax_head_equals_bf16_head():
    "`ArgmaxHead` at the 4B head's shape: the BF16 head's argmax for 1 and 16 rows; inside a bf16 engine's graphs, the BF16 head's tokens."
    import torch.nn as nn, torch.nn.functional as F
    from effqwen.engine import ArgmaxHead, Engine, EngineOptions
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
    ea, ep = Engine(m, max_seq_len=128), Engine(m, max_seq_len=128, options=EngineOptions(argmax_head=False))
    for pr in _prompts():
        assert torch.equal(ea.generate(pr, 24), ep.generate(pr, 24))
        blk = torch.randint(0, 255, (16,), device='cuda')
        ea.prefill(pr); ep.prefill(pr); ea.verify(blk); ep.verify(blk)
        assert torch.equal(ea.next_tok, ep.next_tok)
    s = ep.generate(_prompts()[0], 16, temperature=1.0, generator=torch.Generator('cuda').manual_seed(0))   # sampling runs
    assert s.shape == (1, 16)

@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16])
def test_speculative_rounds(dtype):
    """With the recorded `StaticDrafter`: the one-graph round, the pipelined round op by op and the host loop give the same
    tokens and acceptance lengths (float32: the target's greedy tokens), for engines verifying 16 and 8 rows, full attention
    and a window; `generate(drafter=)` is the same loop."""
    from effqwen.engine import Engine, StaticDrafter, speculative_generate, round_graph_ok
    from effqwen.dflash import DFlashDrafter, DFlashConfig
    m = _models(dtype)['qwen3.5']
    dr = DFlashDrafter(DFlashConfig.for_target(m, mask_token_id=255, block_size=16, num_hidden_layers=2, target_layer_ids=(0, 2),
                                               initializer_range=0.2)).cuda().to(dtype).bind(m)
    for bs in (16, 8):
        eng = Engine(m, max_seq_len=200, tap_layers=(0, 2), block_size=bs)
        for W in (None, 20):
            dr.set_sliding_window(W)
            sd = StaticDrafter(dr, 200)
            assert sd.graph is not None and round_graph_ok(eng, sd)
            for pr in _prompts():
                for n in (40, 3):
                    a = speculative_generate(eng, sd, pr, n, pipelined=False)
                    for rg in (False, True):
                        b = speculative_generate(eng, sd, pr, n, round_graph=rg)
                        assert b.round_graph == rg and torch.equal(a.new_tokens, b.new_tokens) and a.acceptance_lengths == b.acceptance_lengths, (bs, W, n, rg)
                    if dtype == torch.float32: assert torch.equal(b.new_tokens.cuda(), greedy_generate(m, pr, n))
        assert torch.equal(eng.generate(pr, 40, drafter=sd), speculative_generate(eng, sd, pr, 40).new_tokens)
        eng.setup(220)                                      # new step buffers: the rounds recorded over the old ones are dropped
        assert not getattr(eng, '_round_graphs', None)

@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16])
def test_fused_kernels_match_torch(dtype):
    from effqwen.engine import ops as E
    torch.manual_seed(0)
    torch.backends.cudnn.allow_tf32 = False              # the reference's conv1d in float32 must not run in TF32
    tol, dev = (1e-5 if dtype == torch.float32 else 2e-2), 'cuda'
    x, y = torch.randn(5, 320, device=dev, dtype=dtype), torch.randn(5, 320, device=dev, dtype=dtype)
    for off, w in ((True, torch.rand(320, device=dev) + 0.5), (False, (torch.rand(320, device=dev) + 0.5).to(dtype))):
        xo, h = E.fused_add_rms_norm(x, y, w, 1e-6, off); xr, hr = E.add_rms_norm(x, y, w, 1e-6, off)
        assert rel_error(xo, xr) < tol and rel_error(h, hr) < tol
    gu = torch.randn(3, 2 * 600, device=dev, dtype=dtype)
    assert rel_error(E.fused_swiglu(gu), E.swiglu(gu)) < tol
    Hk, Hv, Dk, Dv, Kc = 2, 4, 32, 64, 4
    Kd, Vd = Hk * Dk, Hv * Dv; C = 2 * Kd + Vd
    dims = (C, Kd, Vd, Hk, Hv, Dk, Dv, 1e-6)
    cw, neg_a = (torch.randn(C, Kc, device=dev) * 0.5).to(dtype), -torch.rand(Hv, device=dev) * 4
    dtb, nw = torch.randn(Hv, device=dev).to(dtype), (torch.rand(Dv, device=dev) + 0.5).to(dtype)
    proj = torch.randn(1, C + Vd + 2 * Hv, device=dev, dtype=dtype)
    S0, cb0 = torch.randn(Hv, Dk, Dv, device=dev) * 0.3, torch.randn(C, Kc, device=dev, dtype=dtype)
    S1, cb1, S2, cb2 = S0.clone(), cb0.clone(), S0.clone(), cb0.clone()
    yr, yf = E.gdn_decode(proj, cb1, S1, cw, neg_a, dtb, nw, dims), E.fused_gdn_decode(proj, cb2, S2, cw, neg_a, dtb, nw, dims)
    assert rel_error(yf, yr) < tol and rel_error(S2, S1) < tol and torch.equal(cb2, cb1)
    T = 16
    proj = torch.randn(T, C + Vd + 2 * Hv, device=dev, dtype=dtype)
    mk = lambda: (torch.zeros(C, Kc + T, device=dev, dtype=dtype), torch.zeros(Hv, T, Dk, device=dev), torch.zeros(Hv, T, Dv, device=dev), torch.zeros(Hv, T, device=dev))
    sr, sf = mk(), mk()
    yr, yf = E.gdn_verify(proj, cb0, S0, cw, neg_a, dtb, nw, dims, *sr), E.fused_gdn_verify(proj, cb0, S0, cw, neg_a, dtb, nw, dims, *sf)
    assert rel_error(yf, yr) < tol * 4 and all(rel_error(a, b) < tol * 4 for a, b in zip(sf, sr))
    for n in (1, 7, 16):
        S1, cb1, S2, cb2 = S0.clone(), cb0.clone(), S0.clone(), cb0.clone()
        nn_ = torch.tensor([n], device=dev)
        E.gdn_commit(S1, cb1, *sr, nn_); E.fused_gdn_commit(S2, cb2, *sr, nn_)
        assert rel_error(S2, S1) < 1e-5 and torch.equal(cb2, cb1), n
    from transformers.models.qwen3_5 import modeling_qwen3_5 as hf
    proj = torch.randn(100, C + Vd + 2 * Hv, device=dev, dtype=dtype)
    z = lambda: (torch.zeros(Hv, Dk, Dv, device=dev), torch.zeros(C, Kc, device=dev, dtype=dtype))
    (S1, cb1), (S2, cb2) = z(), z()
    yr = E.gdn_prefill(proj, cb1, S1, cw, neg_a, dtb, nw, dims, hf.torch_chunk_gated_delta_rule)
    yf = E.fused_gdn_prefill(proj, cb2, S2, cw, neg_a, dtb, nw, dims, hf.torch_chunk_gated_delta_rule)
    assert rel_error(yf, yr) < 3e-3 + tol and rel_error(S2, S1) < 3e-3 + tol and torch.equal(cb2, cb1)
    if (fla := E.fla_rules(dev)[0]) is not None:   # grouped values (q/k not repeated) = the repeated call of the same kernel
        (S3, cb3), (S4, cb4) = z(), z()
        yg = E.fused_gdn_prefill(proj, cb3, S3, cw, neg_a, dtb, nw, dims, fla, gva=True)
        yp = E.fused_gdn_prefill(proj, cb4, S4, cw, neg_a, dtb, nw, dims, fla, gva=False)
        assert rel_error(yg, yp) < 1e-3 + tol and rel_error(S3, S4) < 1e-3 + tol and torch.equal(cb3, cb4)
    H, Hkv, D, R, Lmax = 8, 2, 64, 16, 300
    cos, sin = torch.randn(Lmax, R, device=dev, dtype=dtype), torch.randn(Lmax, R, device=dev, dtype=dtype)
    qn, kn = torch.rand(D, device=dev) + 0.5, torch.rand(D, device=dev) + 0.5
    for gate in (True, False):
        dims = (H, Hkv, D, R, gate, True, 1e-6, True)
        for T, p in ((1, 0), (1, 37), (1, 299), (16, 40)):
            proj = torch.randn(T, H * D * (2 if gate else 1) + 2 * Hkv * D, device=dev, dtype=dtype)
            kc, vc = torch.randn(Hkv, Lmax + 16, D, device=dev, dtype=dtype), torch.randn(Hkv, Lmax + 16, D, device=dev, dtype=dtype)
            pos = torch.tensor([p], device=dev)
            k1, v1, k2, v2 = kc.clone(), vc.clone(), kc.clone(), vc.clone()
            q, k, v, g = E.attn_qkv(proj, cos[p:p + T], sin[p:p + T], qn, kn, dims)
            yr = E.gated(E.attn_cache(q, k, v, k1, v1, pos, D ** -0.5), g)
            yf = E.fused_attn_rows(E.fused_attn_prep(proj, cos, sin, pos, qn, kn, k2, v2, dims), proj, pos, k2, v2, dims, chunk=32)
            assert rel_error(yf, yr) < (tol if dtype == torch.float32 else 4e-2), (gate, T, p, rel_error(yf, yr))
            assert rel_error(k2, k1) < tol and torch.equal(v2, v1)
