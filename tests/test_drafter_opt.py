"""Checks of the drafter optimisations too slow or too broad for the notebooks: speculative decoding stays lossless with
a windowed and with an INT4 drafter on dense and hybrid targets (windows shorter and longer than the sequence), the
exact replay of greedy acceptance matches the real loop, and a GPTQ drafter survives the compressed-tensors round trip."""
import tempfile
import pytest, torch
import transformers
from effqwen.dflash import DFlashConfig, DFlashDrafter, DraftCache, train_drafter, load_drafter, extract_context_feature
from effqwen.model import tiny_qwen35, tiny_llama, greedy_generate
from effqwen.specdec import speculative_generate
from effqwen.drafter_opt import (replay_acceptance, quantize_drafter, drafter_calibration, save_drafter_compressed,
                                 attention_cost)

transformers.logging.set_verbosity_error()


def _trained(make, seed=0, block=8, steps=40):
    target = make(seed, initializer_range=0.2)
    torch.manual_seed(seed)
    prompts = torch.randint(0, 255, (8, 6))
    with torch.no_grad(): seqs = target.generate(prompts, max_new_tokens=40, do_sample=False, pad_token_id=0)
    mask = torch.zeros_like(seqs, dtype=torch.bool); mask[:, 6:] = True
    d = DFlashDrafter(DFlashConfig.for_target(target, mask_token_id=255, block_size=block, num_hidden_layers=2,
                                              target_layer_ids=(0, 1) if make is tiny_llama else (0, 2))).bind(target)
    train_drafter(d, target, seqs, mask, steps=steps, batch_size=4, n_anchors=16, lr=3e-3)
    return target, d, prompts, seqs, mask


@pytest.mark.parametrize('make', [tiny_qwen35, tiny_llama])
def test_windowed_and_quantized_drafters_are_lossless(make):
    target, d, prompts, seqs, mask = _trained(make)
    calib = drafter_calibration(target, [(seqs[i:i + 1], mask[i:i + 1]) for i in range(4)], d.target_layer_ids)
    dq, _ = quantize_drafter(d, 'gptq', calib, bits=4, group_size=32)
    for i in (0, 5):
        pr = prompts[i:i + 1]
        ref = greedy_generate(target, pr, 36)
        for drafter in (d, dq):
            for W in (None, 4, 9, 1000):
                drafter.set_sliding_window(W)
                r = speculative_generate(target, drafter, pr, 36)
                assert torch.equal(r.new_tokens, ref), (make.__name__, i, W)
            drafter.set_sliding_window(None)


def test_window_changes_drafts_but_short_sequences_are_untouched():
    target, d, prompts, seqs, mask = _trained(tiny_qwen35)
    full = seqs[:1]
    with torch.no_grad(): f = extract_context_feature(target(full, output_hidden_states=True).hidden_states, d.target_layer_ids)
    L_full = replay_acceptance(d, full, f, 6)
    d.set_sliding_window(full.shape[1] + 8)                # longer than any sequence of the run: bit-identical drafts
    assert replay_acceptance(d, full, f, 6) == L_full
    d.set_sliding_window(2)                                # a tiny window: the drafter sees almost no context
    L_w = replay_acceptance(d, full, f, 6)
    d.set_sliding_window(None)
    assert sum(L_w) / len(L_w) < sum(L_full) / len(L_full)


@pytest.mark.parametrize('make', [tiny_qwen35, tiny_llama])
def test_replay_matches_real_loop(make):
    target, d, prompts, seqs, mask = _trained(make, seed=1)
    same = 0
    for i in range(8):
        pr = prompts[i:i + 1]
        r = speculative_generate(target, d, pr, 30)
        full = torch.cat([pr, r.new_tokens], 1)
        with torch.no_grad(): f = extract_context_feature(target(full, output_hidden_states=True).hidden_states, d.target_layer_ids)
        same += replay_acceptance(d, full, f, pr.shape[1]) == r.acceptance_lengths
    assert same >= 7, same                                 # float round-off may flip a near-tie, rarely


def test_gptq_drafter_compressed_roundtrip_generates_the_same():
    target, d, prompts, seqs, mask = _trained(tiny_qwen35, steps=10)
    calib = drafter_calibration(target, [(seqs[i:i + 1], mask[i:i + 1]) for i in range(4)], d.target_layer_ids)
    dq, recs = quantize_drafter(d, 'gptq', calib, bits=4, group_size=64)
    with tempfile.TemporaryDirectory() as t:
        save_drafter_compressed(dq, recs, t)
        back = load_drafter(t, target)
    pr = prompts[6:7]
    a, b = speculative_generate(target, dq, pr, 30), speculative_generate(target, back, pr, 30)
    assert a.acceptance_lengths == b.acceptance_lengths and torch.equal(a.new_tokens, b.new_tokens)


def test_attention_cost_window_is_flat_in_context():
    k = [attention_cost(n, 16, 1024)['keys_computed'] for n in (2048, 8192, 32768)]
    assert k == [1023 + 16] * 3
    assert attention_cost(32768, 16, None)['keys_computed'] == 32768 + 16


def test_inference_path_matches_training_forward():
    "The drafter's cached inference forward (as `propose` calls it) gives the packed training forward's block states."
    from effqwen.core import rel_error
    from effqwen.dflash import packed_block_forward, extract_context_feature, DraftCache
    torch.manual_seed(0)
    t = tiny_qwen35(0, initializer_range=0.2)
    d = DFlashDrafter(DFlashConfig.for_target(t, mask_token_id=255, block_size=8, num_hidden_layers=2, target_layer_ids=(0, 2))).bind(t)
    with torch.no_grad():
        for p in d.parameters():
            if p.requires_grad and p.ndim > 1: p.normal_(0, 0.05)        # away from the init, so a mismatch shows
    ids = torch.randint(0, 255, (1, 40))
    with torch.no_grad():
        f = extract_context_feature(t(ids, output_hidden_states=True).hidden_states, d.target_layer_ids)
        cache = DraftCache()
        for s in (5, 10, 25):                                              # rounds that grow the context cache
            ctx = f[:, cache.length:s]; start = cache.length + ctx.shape[1]
            blk = torch.cat([ids[:, s:s + 1], torch.full((1, 7), 255)], 1)
            hi = d(d.embed(blk), start + torch.arange(8)[None], ctx, cache.length + torch.arange(ctx.shape[1])[None], cache=cache)
            hp = packed_block_forward(d, ids, f, torch.tensor([[s]]))
            assert rel_error(hi, hp) < 1e-5, s
            if s == 10: assert rel_error(hi, packed_block_forward(d, ids, f, torch.tensor([[s + 1]]))) > 1e-2   # the check can fail


@pytest.mark.parametrize('make', [tiny_qwen35, tiny_llama])
def test_reference_loop_engine_loop_and_replay_agree_round_for_round(make):
    """The reference loop (effqwen.specdec), the engine's loop with its StaticDrafter and `replay_acceptance` all draft
    the drafter's whole block on every round, the last ones too (29 new tokens: the last round has fewer than a block
    left), so they keep the same tokens round for round; the shortened-last-block replay is another drafter input."""
    from effqwen.engine import Engine, StaticDrafter, speculative_generate as engine_generate
    target, d, prompts, seqs, mask = _trained(make, seed=1)
    eng = Engine(target, max_seq_len=64, tap_layers=tuple(d.target_layer_ids), block_size=d.cfg.block_size)
    sd, same, tail_differs = StaticDrafter(d, 64), 0, 0
    for i in range(8):
        pr = prompts[i:i + 1]
        r = speculative_generate(target, d, pr, 29)
        re = engine_generate(eng, sd, pr, 29)
        full = torch.cat([pr, r.new_tokens], 1)
        with torch.no_grad(): f = extract_context_feature(target(full, output_hidden_states=True).hidden_states, d.target_layer_ids)
        rep = replay_acceptance(d, full, f, pr.shape[1])
        assert torch.equal(re.new_tokens, r.new_tokens)             # both lossless
        same += r.acceptance_lengths == re.acceptance_lengths == rep
        tail_differs += replay_acceptance(d, full, f, pr.shape[1], whole_block=False) != rep
    assert same >= 7, same                                          # float round-off may flip a near-tie, rarely
    print('shortened-last-block replays that differ:', tail_differs)
