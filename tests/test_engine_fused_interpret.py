"""The engine's fused path (the Triton kernels a GPU runs by default) against its torch path, on a CPU: Triton's
interpreter (`TRITON_INTERPRET=1`, read when `effqwen.engine` is imported, hence a subprocess) runs the same kernels
on tiny hybrid (Qwen3.5) and dense (Llama) models. Every mode must agree: prefill, decode, the verify-16 block, and
decoding on after `commit(n)` — so the verify step a speculative round costs can use the fused kernels too. (The
fused prefill L2-normalizes q/k in its conv kernel, `PREFILL_QK_NORM`; the torch path normalizes in the chunk rule.)"""
import os, subprocess, sys, textwrap
import pytest

pytest.importorskip('triton')

def _interpret(script: str, timeout: int):
    "Run `script` in a subprocess under Triton's interpreter (read when effqwen.engine is imported); it must print 'ok' last."
    env = dict(os.environ, TRITON_INTERPRET='1', OMP_NUM_THREADS=os.environ.get('OMP_NUM_THREADS', '2'))
    r = subprocess.run([sys.executable, '-c', script], env=env, capture_output=True, text=True, timeout=timeout,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert r.returncode == 0 and r.stdout.strip().endswith('ok'), r.stdout[-3000:] + r.stderr[-3000:]

SCRIPT = textwrap.dedent('''
    import torch
    import effqwen.engine as E
    from effqwen.engine import Engine
    from effqwen.core import rel_error
    from effqwen.model import tiny_qwen35, tiny_llama
    torch.manual_seed(0)
    # the step's argmax: ties across and inside column blocks go to the first index (torch's); the decode bookkeeping
    E.ARGMAX_BLOCK = 64
    x = torch.randint(-3, 3, (3, 300)).to(torch.bfloat16); x[1, 5] = x[1, 200] = 9; x[2, 130] = x[2, 131] = 9
    nt = torch.zeros(4, dtype=torch.long); E.fused_argmax(x, nt)
    assert torch.equal(nt[:3], x.argmax(-1)) and nt[1] == 5 and nt[2] == 130, (nt, x.argmax(-1))
    pos, tok, out = torch.tensor([6]), torch.zeros(2, dtype=torch.long), torch.zeros(10, dtype=torch.long)
    E.fused_argmax(x[2:], nt, None, pos, tok, out)
    assert pos.item() == 7 and tok[0] == 130 and out[7] == 130 and nt[0] == 130
    E.ARGMAX_BLOCK = 2048
    # the first norm with the embedding lookup inside (`EMBED_NORM`): the rows and norm of an embedding + norm; NaN rows for
    # ids outside the table (not a read outside it)
    tab, w = torch.randn(40, 72, dtype=torch.bfloat16), torch.randn(72)
    for ids in (torch.tensor([3, 39, 0, 3]), torch.tensor([5, 40, -1])):
        x, h = E.fused_embed_rms_norm(tab, ids, w, 1e-6, True)
        ok = (ids >= 0) & (ids < 40)
        xr, hr = E.fused_add_rms_norm(tab[ids.clamp(0, 39)], None, w, 1e-6, True)
        assert torch.equal(x[ok], xr[ok]) and torch.equal(h[ok], hr[ok]) and x[~ok].isnan().all() and h[~ok].isnan().all()
    # verify attention: the split-K kernels with one chunk, with chunks of 8 keys (the block straddles chunk
    # boundaries, rows see different numbers of chunks; the combine steps over them 2 at a time, each program a 4-dim slice
    # of the head), and the masked-matmul variant
    # Gated-DeltaNet verify: the token-by-token kernel ('fused') and the one-chunk WY kernel ('chunk')
    # commits: every kept length class (1, inside the block, all 16) where the commit path itself differs (the first
    # hybrid case; the chunk case, whose conv window comes from the output kernel); one length elsewhere (the attention
    # variants differ in the verify, not in the commit), which keeps this test's interpreter time down
    for name, m, chunk, attn, gdn, ns in (('qwen3.5', tiny_qwen35(0, initializer_range=0.2), 256, 'split', 'fused', (1, 5, 16)), ('llama', tiny_llama(0, initializer_range=0.2), 256, 'split', 'fused', (5,)),
                                          ('qwen3.5', tiny_qwen35(0, initializer_range=0.2), 8, 'split', 'fused', (5,)), ('llama', tiny_llama(0, initializer_range=0.2), 256, 'matmul', 'fused', (16,)),
                                          ('qwen3.5', tiny_qwen35(0, initializer_range=0.2), 256, 'split', 'chunk', (1, 16))):
        E.ATTN_CHUNK, E.VERIFY_ATTN, E.GDN_VERIFY = chunk, attn, gdn
        E.ATTN_COMBINE_BS = 2 if chunk == 8 else 16   # chunks of 8: the combine takes 2 chunks' partials a step, an odd last step masked
        E.ATTN_COMBINE_BD = 4 if chunk == 8 else 0   # and there 4 of the 16 head dims per combine program (4 programs per row and head)
        E.GDN_VERIFY_XCAT = gdn == 'chunk'   # commit's xcat from the output kernel (the chunk case) or from torch copies (the others)
        ef, et = Engine(m, max_seq_len=64, fused=True), Engine(m, max_seq_len=64, fused=False)
        assert ef.fused and not et.fused
        pr, blk = torch.randint(0, 255, (1, 11)), torch.randint(0, 255, (16,))
        worst = 0.0
        for n in ns:
            outs = []
            for e in (ef, et):
                lp = e.prefill(pr).clone(); ld = e.decode_one_token().clone()
                lv = e.verify(blk).clone(); tv = e.taps.clone() if e.tap_layers else None
                e.commit(n); e.tok[:1] = torch.tensor([7]); la = e.decode_one_token().clone()
                outs.append((lp, ld, lv, la))
            for a, b in zip(*outs): worst = max(worst, rel_error(a, b))
        print(name, chunk, attn, gdn, 'worst rel error fused vs torch', worst)
        assert worst < 1e-4, (name, chunk, attn, gdn, worst)
    print('ok')
''')

def test_fused_engine_matches_torch_under_interpreter():
    _interpret(SCRIPT, 900)

SCRIPT_SWIGLU = textwrap.dedent('''
    import torch
    import effqwen.engine as E
    from effqwen.engine import Engine
    from effqwen.core import rel_error
    from effqwen.kernels import W4A16Linear
    from effqwen.model import tiny_qwen35
    torch.manual_seed(0)
    m = tiny_qwen35(0, initializer_range=0.2)
    conv = lambda l: W4A16Linear.from_float(l, group_size=32)
    pr = torch.randint(0, 255, (1, 11))
    outs = {}
    for on in (False, True):
        E.DECODE_SWIGLU_MATVEC = on
        e = Engine(m, max_seq_len=64, fused=True, convert=conv)
        assert any(type(L.mlp_out) is W4A16Linear for L in e.layers)
        e.prefill(pr)
        outs[on] = torch.stack([e.decode_one_token().clone() for _ in range(2)])
    err = rel_error(outs[True], outs[False])
    print('swiglu in the down projection vs SwiGLU kernel + mat-vec: rel error', err)
    assert err < 1e-5, err
    print('ok')
''')

def test_decode_swiglu_in_matvec_under_interpreter():
    "The W4A16 engine's decode with SwiGLU inside the down projection's mat-vec (`DECODE_SWIGLU_MATVEC`) equals the two-kernel path."
    _interpret(SCRIPT_SWIGLU, 900)

SCRIPT_PADDED = textwrap.dedent('''
    import torch
    from effqwen.engine import Engine
    from effqwen.core import rel_error
    from effqwen.model import tiny_qwen35, tiny_llama
    torch.manual_seed(0)
    for name, m in (('qwen3.5', tiny_qwen35(0, initializer_range=0.2)), ('llama', tiny_llama(0, initializer_range=0.2))):
        e = Engine(m, max_seq_len=160, fused=True, tap_layers=(0, 1))
        for P in ((11, 70) if name == 'qwen3.5' else (70,)):  # buckets of 64 and 128 rows (the dense model: the larger bucket)
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
''')

def test_padded_prefill_matches_exact_under_interpreter():
    """The recorded GPU prefill pads the prompt to its size bucket (`prefill_padded`): the logits, the taps, every
    Gated-DeltaNet state / conv window and attention cache row of the prompt, and the decoding after it must equal
    the exact-length prefill's."""
    _interpret(SCRIPT_PADDED, 900)

SCRIPT_BLOCK = textwrap.dedent('''
    import torch
    import effqwen.engine as E
    from effqwen.engine import StaticDrafter, block_attn
    from effqwen.core import rel_error
    from effqwen.dflash import DFlashConfig, DFlashDrafter
    from effqwen.model import tiny_qwen35
    torch.manual_seed(0)
    # a drafter block's attention on the split-K kernels (every row sees the context and the whole block; a window
    # drops the keys below each row's window) against masked matmuls: blocks that straddle chunks of 8 keys, windows
    # that start inside a chunk, skip whole chunks, or reach back before the first key
    E.ATTN_CHUNK, E.ATTN_COMBINE_BS = 8, 2
    worst = 0.0
    cases = ((0, None), (5, None), (37, None), (37, 16), (37, 21), (61, 19), (3, 30))
    for dt in (torch.float32, torch.bfloat16):            # bf16: a straddling block and a window inside a chunk
        q = torch.randn(16, 8, 32).to(dt); kc, vc = torch.randn(2, 2, 80, 32).to(dt).unbind(0)
        for pos, W in (cases if dt == torch.float32 else ((37, None), (37, 21))):
            p = torch.tensor([pos])
            a, b = block_attn(q, kc, vc, p, W, kernel=True), block_attn(q, kc, vc, p, W, kernel=False)
            err = rel_error(a.float(), b.float()); worst = max(worst, err)
            assert err < (1e-4 if dt == torch.float32 else 2e-2), (dt, pos, W, err)
    print('block attention: worst rel error kernels vs matmuls', worst)
    E.ATTN_CHUNK, E.ATTN_COMBINE_BS = 256, 16
    # the fused StaticDrafter step with the kernels proposes what the plain step does
    tq = tiny_qwen35(0, initializer_range=0.2)
    for W in (None, 20):
        dr = DFlashDrafter(DFlashConfig.for_target(tq, mask_token_id=255, block_size=16, num_hidden_layers=2,
                                                   target_layer_ids=(0, 2), sliding_window=W, initializer_range=0.2)).bind(tq)
        sf, sp = StaticDrafter(dr, 96, fused=True), StaticDrafter(dr, 96, fused=False)
        feats, ids = torch.randn(1, 40, 128), torch.randint(0, 255, (1, 41))
        for lo, hi in [(0, 20), (20, 23), (23, 24), (24, 40)]:
            a, b = sf.propose(ids[:, :hi + 1], feats[:, lo:hi], 15)[0], sp.propose(ids[:, :hi + 1], feats[:, lo:hi], 15)[0]
            assert torch.equal(a, b), (W, lo, hi, a, b)
    print('ok')
''')

def test_drafter_block_attention_under_interpreter():
    """The fused `StaticDrafter` step attends with the engine's split-K kernels in their non-causal (and windowed) form
    (`block_attn`): equal to masked matmuls, and the step proposes the plain step's tokens."""
    _interpret(SCRIPT_BLOCK, 900)

SCRIPT_COMBINE = textwrap.dedent('''
    import torch
    import effqwen.engine as E
    torch.manual_seed(0)
    # the one-row combine's own shape (`ATTN_COMBINE_DECODE`: chunks per step, head dims per program) against the
    # whole-head combine over the same partials: the same up to the order of the chunk sums; the cache rows past the
    # context hold NaN (the split kernel must mask them) and the partials' padding rows (unused rows of BR) hold NaN too
    # (the split kernel stores the query rows only, the combine must read no other)
    H, Hkv, D, L = 4, 2, 32, 64
    dims = (H, Hkv, D, D, True, False, 1e-6, False)
    kc, vc = torch.randn(Hkv, L, D), torch.randn(Hkv, L, D)
    kc[:, 46:] = float('nan'); vc[:, 46:] = float('nan')
    q, proj, pos = torch.randn(1, H, D), torch.randn(1, 2 * H * D + 2 * Hkv * D), torch.tensor([45])
    NS = -(-L // 8)
    ys = []
    for cmb in (None, (2, 4), (32, 8)):
        E.ATTN_COMBINE_DECODE = cmb
        part = tuple(t.fill_(float('nan')) for t in E.attn_partials(Hkv, NS, 16, D, q.device))
        ys.append(E.fused_attn_rows(q, proj, pos, kc, vc, dims, part, 8))
    assert all(torch.isfinite(y).all() for y in ys)
    assert all((y - ys[0]).abs().max() < 1e-5 for y in ys[1:]), [(y - ys[0]).abs().max() for y in ys]
    E.ATTN_COMBINE_DECODE = (3, 4)
    try: E.fused_attn_rows(q, proj, pos, kc, vc, dims, None, 8); raise AssertionError('BS = 3 was accepted')
    except ValueError as e: assert 'power of two' in str(e)
    # chunks sized by the live context, 2 programs of 32 positions, 8 keys a step; each case against the static chunks (the
    # same output up to the order of the sums, the NaN rows past the context unread) and whether the second program wrote
    def dyn_case(flag, qx, projx, p, second_expected):
        T = qx.shape[0]
        k2, v2 = kc.clone(), vc.clone(); k2[:, p + T:] = float('nan'); v2[:, p + T:] = float('nan')
        ys = []
        for dyn in (False, True):
            setattr(E, flag, dyn)
            part = tuple(t.fill_(float('nan')) for t in E.attn_partials(Hkv, 2, 16, D, q.device))
            ys.append(E.fused_attn_rows(qx, projx, torch.tensor([p]), k2, v2, dims, part, 32))
            second = bool(torch.isfinite(part[0].view(Hkv, 2, 16)[:, 1, :T * H // Hkv]).all())
            assert second == (second_expected if dyn else p + T > 32), (flag, p, dyn, second)
        assert torch.isfinite(ys[1]).all() and (ys[1] - ys[0]).abs().max() < 1e-5, (flag, p, (ys[1] - ys[0]).abs().max())
    # decode (`ATTN_DYN_CHUNK`): a context of 1 key (one program), of 6 (one short step), of 22 (two programs of 16 and 6
    # where the static chunks have one of 22) and of 46 (24 + 22 against 32 + 14)
    E.ATTN_COMBINE_DECODE, E.ATTN_BL = None, 8
    for p, second in ((0, False), (5, False), (21, True), (45, True)): dyn_case('ATTN_DYN_CHUNK', q, proj, p, second)
    # verify's rows (`ATTN_DYN_VERIFY`): 3 causal rows at pos..pos+2, the chunk from the last row's context (pos 19: 22 keys,
    # two programs of 16 and 6, the first row's 20 keys over both), each row combining only the chunks it reaches
    q3, proj3 = torch.randn(3, H, D), torch.randn(3, 2 * H * D + 2 * Hkv * D)
    E.ATTN_DYN_CHUNK, E.ATTN_VERIFY_TILES = False, (8, 2)   # (verify rows take these tiles: 8 keys a step here too)
    for p, second in ((0, False), (19, True), (43, True)): dyn_case('ATTN_DYN_VERIFY', q3, proj3, p, second)
    print('ok')
''')

def test_decode_combine_shapes_under_interpreter():
    "The one-row combine's own shapes (`ATTN_COMBINE_DECODE`) give the whole-head combine's output, reading only the partials the split kernel wrote."
    _interpret(SCRIPT_COMBINE, 600)

SCRIPT_GDN_EARLY = textwrap.dedent('''
    import torch
    import effqwen.engine as E
    from effqwen.engine import Engine
    from effqwen.model import tiny_qwen35
    torch.manual_seed(0)
    m = tiny_qwen35(0, initializer_range=0.2)
    pr = torch.randint(0, 255, (1, 11))
    outs = {}
    for early in (False, True):
        E.GDN_STATE_EARLY = early
        e = Engine(m, max_seq_len=64, fused=True)
        e.prefill(pr)
        outs[early] = torch.stack([e.decode_one_token().clone() for _ in range(2)])
        states = [L.S.clone() for L in e.layers if L.kind == 'linear_attention']
        outs[early, 'S'] = torch.stack(states)
    assert torch.equal(outs[False], outs[True]) and torch.equal(outs[False, 'S'], outs[True, 'S'])
    print('ok')
''')

def test_gdn_state_loaded_early_under_interpreter():
    "The one-token Gated-DeltaNet kernel with its state loaded before the PDL wait (`GDN_STATE_EARLY`) decodes the same tokens and states."
    _interpret(SCRIPT_GDN_EARLY, 600)

ROUND = textwrap.dedent('''
    import torch
    import effqwen.engine as E
    from effqwen.engine import Engine, speculative_generate, round_kernels
    from effqwen.model import tiny_llama, greedy_generate
    g = torch.Generator().manual_seed(0)
    # the round's two kernels against the torch ops they replace: every accept length, budgets below / at / above it
    for B in (16, 8, 5):
        for case in range(8):
            nt = torch.randint(0, 4, (B,), generator=g)
            tok = torch.cat([torch.randint(0, 4, (1,), generator=g), torch.where(torch.rand(B - 1, generator=g) < 0.8, nt[:B - 1], nt[:B - 1] + 1)])
            bud0 = torch.randint(-1, B + 2, (1,), generator=g)
            bud, keep, anc, rec = bud0.clone(), torch.zeros(1, dtype=torch.long), torch.zeros(1, dtype=torch.long), torch.zeros(2 * B, dtype=torch.long)
            E.fused_accept(tok, nt, bud, keep, anc, rec)
            n = torch.minimum((tok[1:] == nt[:B - 1]).long().cumprod(0).sum(0, keepdim=True) + 1, bud0.clamp(min=1))
            assert keep.item() == n.item() and bud.item() == (bud0 - n).item() and anc.item() == nt[n - 1].item(), (B, tok, nt, bud0, keep, anc)
            assert torch.equal(rec, torch.cat([n, tok[1:], nt])), rec
            d, a, t = torch.randint(0, 99, (B + 3,), generator=g), torch.tensor([7]), torch.zeros(B, dtype=torch.long)
            E.fused_block(a, d, t)
            assert torch.equal(t, torch.cat([a, d[:B - 1]]))
    # the pipelined loop on a fused engine takes them (under the interpreter), with a proposer wrong at fixed positions
    class Oracle:
        layer_ids, takes_anchor, block_size, max_seq_len = [], True, 16, 4096
        def __init__(self, full, p): self.full, self.wrong = torch.cat([full[0], torch.zeros(32, dtype=torch.long)]), torch.rand(len(full[0]) + 32, generator=torch.Generator().manual_seed(1)) < p
        def start(self): self.pos = torch.zeros(1, dtype=torch.long)
        def _at(self, i): t = self.full[i]; return torch.where(self.wrong[i], (t + 1) % 256, t)
        def propose(self, ids, ctx, n, *a, **kw): self.pos.fill_(ids.shape[1] - 1); return self._at(self.pos + 1 + torch.arange(n)), None
        def propose_device(self, feats, n_new, anchor): self.pos += n_new; return self._at(self.pos + 1 + torch.arange(15))
    m = tiny_llama(0, initializer_range=0.2)
    eng = Engine(m, max_seq_len=48, fused=True)
    assert round_kernels(eng)
    pr = torch.randint(0, 255, (1, 9), generator=g)
    ref = greedy_generate(m, pr, 12); full = torch.cat([pr, ref], 1)
    for p in (0.3,):
        a = speculative_generate(eng, Oracle(full, p), pr, 12)
        E.ROUND_KERNELS = False
        b = speculative_generate(eng, Oracle(full, p), pr, 12)
        E.ROUND_KERNELS = True
        assert a.pipelined and torch.equal(a.new_tokens, ref) and torch.equal(b.new_tokens, ref) and a.acceptance_lengths == b.acceptance_lengths, p
    print('ok')
''')

def test_round_kernels_interpreted():
    "The pipelined round's block and accept kernels equal the torch ops they replace, alone and in the loop."
    _interpret(ROUND, timeout=600)
