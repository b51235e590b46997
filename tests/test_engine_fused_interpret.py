"""The engine's fused path (the Triton kernels a GPU runs by default) against its torch path, on a CPU: Triton's
interpreter (`TRITON_INTERPRET=1`, read when effqwen is imported, hence a subprocess) runs the same kernels on tiny
hybrid (Qwen3.5) and dense (Llama) models: prefill, decode, the verify-16 block and decoding on after `commit(n)`,
the padded (recorded) prefill, the attention's split-K shapes, a drafter block's attention and the speculative round's
two kernels."""
import os, subprocess, sys, textwrap
import pytest

pytest.importorskip('triton')

def _interpret(script:str, timeout:int):
    "Run `script` in a subprocess under Triton's interpreter; it must print 'ok' last."
    env = dict(os.environ, TRITON_INTERPRET='1', OMP_NUM_THREADS=os.environ.get('OMP_NUM_THREADS', '2'))
    r = subprocess.run([sys.executable, '-c', textwrap.dedent(script)], env=env, capture_output=True, text=True, timeout=timeout,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert r.returncode == 0 and r.stdout.strip().endswith('ok'), r.stdout[-3000:] + r.stderr[-3000:]

def test_fused_engine_matches_torch_under_interpreter():
    """Every mode of the fused engine equals the torch engine (BF16 head: its logits), for every kept length class of
    `commit` on the hybrid model; the default `ArgmaxHead` gives the same tokens; the first norm's embedding gather gives
    NaN rows for ids outside the table."""
    _interpret('''
    import torch
    from effqwen.engine import Engine, EngineOptions, fused_embed_rms_norm, fused_add_rms_norm
    from effqwen.core import rel_error
    from effqwen.model import tiny_qwen35, tiny_llama
    torch.manual_seed(0)
    tab, w = torch.randn(40, 72, dtype=torch.bfloat16), torch.randn(72)
    for ids in (torch.tensor([3, 39, 0, 3]), torch.tensor([5, 40, -1])):
        x, h = fused_embed_rms_norm(tab, ids, w, 1e-6, True)
        ok = (ids >= 0) & (ids < 40)
        xr, hr = fused_add_rms_norm(tab[ids.clamp(0, 39)], None, w, 1e-6, True)
        assert torch.equal(x[ok], xr[ok]) and torch.equal(h[ok], hr[ok]) and x[~ok].isnan().all() and h[~ok].isnan().all()
    for name, m, ns in (('qwen3.5', tiny_qwen35(0, initializer_range=0.2), (1, 5, 16)), ('llama', tiny_llama(0, initializer_range=0.2), (5,))):
        ef = Engine(m, max_seq_len=64, options=EngineOptions(fused=True, argmax_head=False))
        et = Engine(m, max_seq_len=64, options=EngineOptions(fused=False))
        ea = Engine(m, max_seq_len=64, options=EngineOptions(fused=True))
        assert ef.fused and not et.fused and type(ea.head).__name__ == 'ArgmaxHead' and type(ef.head).__name__ == 'Linear'
        pr, blk = torch.randint(0, 255, (1, 11)), torch.randint(0, 255, (16,))
        worst = 0.0
        for n in ns:
            outs = []
            for e in (ef, et):
                lp = e.prefill(pr).clone(); ld = e.decode_one_token().clone()
                lv = e.verify(blk).clone()
                e.commit(n); e.tok[:1] = torch.tensor([7]); la = e.decode_one_token().clone()
                outs.append((lp, ld, lv, la))
            for a, b in zip(*outs): worst = max(worst, rel_error(a, b))
        print(name, 'worst rel error fused vs torch', worst)
        assert worst < 1e-4, (name, worst)
        assert torch.equal(ea.generate(pr, 6), et.generate(pr, 6))
        assert ea.prefill(pr) is None and ea.verify(blk) is None
        et.prefill(pr); et.verify(blk)
        assert torch.equal(ea.next_tok, et.next_tok), (ea.next_tok, et.next_tok)
    print('ok')
    ''', 900)

def test_padded_prefill_matches_exact_under_interpreter():
    """The recorded GPU prefill pads the prompt to its size bucket (`prefill_padded`): the logits, the taps, every
    Gated-DeltaNet state / conv window and attention cache row of the prompt, and the decoding after it equal the
    exact-length prefill's."""
    _interpret('''
    import torch
    from effqwen.engine import Engine, EngineOptions
    from effqwen.core import rel_error
    from effqwen.model import tiny_qwen35, tiny_llama
    torch.manual_seed(0)
    for name, m in (('qwen3.5', tiny_qwen35(0, initializer_range=0.2)), ('llama', tiny_llama(0, initializer_range=0.2))):
        e = Engine(m, max_seq_len=160, tap_layers=(0, 1), options=EngineOptions(fused=True, argmax_head=False))
        for P in ((11, 70) if name == 'qwen3.5' else (70,)):  # buckets of 64 and 128 rows
            pr = torch.randint(0, 255, (P,))
            outs = []
            for padded in (False, True):
                e.reset()
                if padded: e.prefill_padded(pr, P, record=False); e.pos.fill_(P); e.length = P; e.tok[:1].copy_(e.next_tok[:1])
                else: e.prefill(pr)
                lp, f = e.logits[0].clone(), e._prefill_feats.clone()
                st = [t.clone() for L in e.layers for t in ((L.S, L.conv_buf) if L.kind == 'linear_attention' else (L.kc[:, :P], L.vc[:, :P]))]
                outs.append([lp, f] + st + [e.decode_one_token().clone() for _ in range(3)])
            worst = max(rel_error(a, b) for a, b in zip(*outs))
            print(name, P, 'worst rel error padded vs exact', worst)
            assert outs[0][1].shape == outs[1][1].shape and worst < 1e-4, (name, P, worst)
    print('ok')
    ''', 900)

def test_attention_shapes_under_interpreter():
    """The split-K attention against masked matmuls (`gqa_attention`) where its shapes matter: chunks of 8 keys (blocks
    straddle chunks), the decode combine's own shape (chunks per step, head dims per program) and the whole-head one,
    chunks sized by the live context for one row (1, 6, 22, 46 keys), verify rows, cache rows past the context and the
    partials' padding rows holding NaN (never read); a drafter block (non-causal, windows inside a chunk, skipping
    chunks, reaching before the first key); and the `StaticDrafter` step on these kernels drafts the drafter's tokens."""
    _interpret('''
    import torch
    from effqwen.engine import fused_attn_rows, attn_partials, gqa_attention, block_attn, StaticDrafter
    from effqwen.core import rel_error
    from effqwen.dflash import DFlashConfig, DFlashDrafter, DraftCache
    from effqwen.model import tiny_qwen35
    torch.manual_seed(0)
    H, Hkv, D, L = 4, 2, 32, 64
    dims = (H, Hkv, D, D, True, False, 1e-6, False)
    kc, vc = torch.randn(Hkv, L, D), torch.randn(Hkv, L, D)
    def ref(q, proj, p, T):
        see = torch.arange(L)[None] <= (p + torch.arange(T))[:, None]
        o = gqa_attention(q, [(kc, vc)], see, D ** -0.5)
        return o * torch.sigmoid(proj[:, :2 * H * D].reshape(T, H, 2 * D)[..., D:].reshape(T, H * D))
    for T in (1, 3):
        q, proj = torch.randn(T, H, D), torch.randn(T, 2 * H * D + 2 * Hkv * D)
        for p in (0, 5, 21, 45):
            for combine in ((None, (2, 4), (32, 8)) if T == 1 else (None, (2, 0))):
                k2, v2 = kc.clone(), vc.clone(); k2[:, p + T:] = float('nan'); v2[:, p + T:] = float('nan')
                part = tuple(t.fill_(float('nan')) for t in attn_partials(Hkv, L // 8, 16, D, q.device))
                y = fused_attn_rows(q, proj, torch.tensor([p]), k2, v2, dims, part, chunk=8, combine=combine)
                assert torch.isfinite(y).all() and rel_error(y, ref(q, proj, p, T)) < 1e-5, (T, p, combine, rel_error(y, ref(q, proj, p, T)))
    q, kc8, vc8 = torch.randn(16, 8, 32), torch.randn(2, 80, 32), torch.randn(2, 80, 32)
    for pos, W in ((0, None), (5, None), (37, None), (37, 16), (37, 21), (61, 19), (3, 30)):
        k = torch.arange(80)[None]
        see = (k < pos + 16) & ((k >= pos + torch.arange(16)[:, None] - W + 1) if W else True)
        a, b = block_attn(q, kc8, vc8, torch.tensor([pos]), W), gqa_attention(q, [(kc8, vc8)], see.expand(16, -1), 32 ** -0.5)
        assert rel_error(a, b) < 1e-4, (pos, W, rel_error(a, b))
    tq = tiny_qwen35(0, initializer_range=0.2)
    for W in (None, 20):
        dr = DFlashDrafter(DFlashConfig.for_target(tq, mask_token_id=255, block_size=16, num_hidden_layers=2,
                                                   target_layer_ids=(0, 2), sliding_window=W, initializer_range=0.2)).bind(tq)
        sd, dc = StaticDrafter(dr, 96), DraftCache()
        sd.start()
        feats, ids = torch.randn(1, 40, 128), torch.randint(0, 255, (1, 41))
        for lo, hi in [(0, 20), (20, 23), (24, 40)]:
            a, b = sd.propose(ids[:, :hi + 1], feats[:, lo:hi], 15)[0], dr.propose(ids[0, hi:hi + 1], feats[:, lo:hi], dc, 15)[0]
            assert torch.equal(a, b), (W, lo, hi, a, b)
    print('ok')
    ''', 900)

def test_round_kernels_interpreted():
    "The pipelined round's block and accept kernels equal the torch ops they replace, alone and in the loop (a fused engine against the torch engine)."
    _interpret('''
    import torch
    from effqwen.engine import Engine, EngineOptions, speculative_generate, round_kernels, fused_accept, fused_block
    from effqwen.model import tiny_llama, greedy_generate
    g = torch.Generator().manual_seed(0)
    for B in (16, 8, 5):
        for case in range(8):
            nt = torch.randint(0, 4, (B,), generator=g)
            tok = torch.cat([torch.randint(0, 4, (1,), generator=g), torch.where(torch.rand(B - 1, generator=g) < 0.8, nt[:B - 1], nt[:B - 1] + 1)])
            bud0 = torch.randint(-1, B + 2, (1,), generator=g)
            bud, keep, anc, rec = bud0.clone(), torch.zeros(1, dtype=torch.long), torch.zeros(1, dtype=torch.long), torch.zeros(2 * B, dtype=torch.long)
            fused_accept(tok, nt, bud, keep, anc, rec)
            n = torch.minimum((tok[1:] == nt[:B - 1]).long().cumprod(0).sum(0, keepdim=True) + 1, bud0.clamp(min=1))
            assert keep.item() == n.item() and bud.item() == (bud0 - n).item() and anc.item() == nt[n - 1].item(), (B, tok, nt, bud0, keep, anc)
            assert torch.equal(rec, torch.cat([n, tok[1:], nt])), rec
            d, a, t = torch.randint(0, 99, (B + 3,), generator=g), torch.tensor([7]), torch.zeros(B, dtype=torch.long)
            fused_block(a, d, t)
            assert torch.equal(t, torch.cat([a, d[:B - 1]]))
    class Oracle:
        layer_ids, takes_anchor, block_size, max_seq_len = [], True, 16, 4096
        def __init__(self, full, p): self.full, self.wrong = torch.cat([full[0], torch.zeros(32, dtype=torch.long)]), torch.rand(len(full[0]) + 32, generator=torch.Generator().manual_seed(1)) < p
        def start(self): self.pos = torch.zeros(1, dtype=torch.long)
        def _at(self, i): t = self.full[i]; return torch.where(self.wrong[i], (t + 1) % 256, t)
        def propose(self, ids, ctx, n, *a, **kw): self.pos.fill_(ids.shape[1] - 1); return self._at(self.pos + 1 + torch.arange(n)), None
        def propose_device(self, feats, n_new, anchor): self.pos += n_new; return self._at(self.pos + 1 + torch.arange(15))
    m = tiny_llama(0, initializer_range=0.2)
    ef, et = Engine(m, max_seq_len=48, options=EngineOptions(fused=True)), Engine(m, max_seq_len=48, options=EngineOptions(fused=False))
    assert round_kernels(ef) and not round_kernels(et)
    pr = torch.randint(0, 255, (1, 9), generator=g)
    ref = greedy_generate(m, pr, 12); full = torch.cat([pr, ref], 1)
    a, b = speculative_generate(ef, Oracle(full, 0.3), pr, 12), speculative_generate(et, Oracle(full, 0.3), pr, 12)
    assert a.pipelined and torch.equal(a.new_tokens, ref) and torch.equal(b.new_tokens, ref) and a.acceptance_lengths == b.acceptance_lengths
    print('ok')
    ''', 600)
