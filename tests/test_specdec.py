"""End-to-end checks of `effqwen.specdec` that are too slow for the notebook: speculative *sampling* on a tiny-vocabulary
hybrid Qwen3.5 target must produce sequences distributed exactly as the target's own sampling (compared with the exact
joint distribution of the first three tokens, computed by enumeration), and greedy losslessness over more prompts."""
import itertools, re
import pytest, torch
import transformers
from effqwen.dflash import DFlashConfig, DFlashDrafter, sampling_probs
from effqwen.model import tiny_qwen35, tiny_llama, greedy_generate
from effqwen.specdec import speculative_generate

transformers.logging.set_verbosity_error()
V = 8


def _exact_joint(target, prompt, temperature):
    "p(t1, t2, t3 | prompt) for every one of the V^3 continuations, by enumeration (one batched forward)."
    seqs = torch.tensor(list(itertools.product(range(V), repeat=3)))                     # (V^3, 3)
    ids = torch.cat([prompt.expand(len(seqs), -1), seqs], 1)
    with torch.no_grad(): logits = target(ids).logits[:, prompt.shape[1] - 1:-1]       # rows predicting t1, t2, t3
    p = sampling_probs(logits, temperature)
    return p.gather(-1, seqs[..., None])[..., 0].prod(-1)                                # (V^3,)


def _tv(counts, probs): return 0.5 * (counts / counts.sum() - probs).abs().sum().item()


def test_speculative_sampling_matches_target_distribution():
    target = tiny_qwen35(0, vocab_size=V, initializer_range=0.5)
    drafter = DFlashDrafter(DFlashConfig.for_target(target, mask_token_id=V - 1, block_size=4)).bind(target)
    prompt, T, M = torch.tensor([[1, 5, 2, 6, 3]]), 1.0, 1200
    exact = _exact_joint(target, prompt, T)
    g = torch.Generator().manual_seed(0)
    counts, accepted = torch.zeros(V ** 3), []
    for _ in range(M):
        r = speculative_generate(target, drafter, prompt, 3, temperature=T, generator=g)
        t = r.new_tokens[0].tolist()
        counts[t[0] * V * V + t[1] * V + t[2]] += 1
        accepted.append(r.acceptance_lengths[0])
    assert max(accepted) == 2, 'some drafts must be accepted, or the accept branch is untested'
    # marginals of t2 and t3 (V categories) and of the pair (t1, t2) (V^2 categories)
    c3, e3 = counts.view(V, V, V), exact.view(V, V, V)
    tv_t2, tv_t3 = _tv(c3.sum((0, 2)), e3.sum((0, 2))), _tv(c3.sum((0, 1)), e3.sum((0, 1)))
    tv_12 = _tv(c3.sum(2).flatten(), e3.sum(2).flatten())
    wrong = _exact_joint(target, prompt, 2.0).view(V, V, V)
    tv_wrong = _tv(c3.sum(2).flatten(), wrong.sum(2).flatten())
    print(f'TV t2 {tv_t2:.3f}, t3 {tv_t3:.3f}, (t1,t2) {tv_12:.3f}; vs T=2 {tv_wrong:.3f}; exact T1 vs T2 {0.5 * (e3.sum(2) - wrong.sum(2)).abs().sum():.3f}')
    assert tv_t2 < 0.06 and tv_t3 < 0.06 and tv_12 < 0.1, (tv_t2, tv_t3, tv_12)
    assert tv_wrong > 0.15     # the check can fail: the same counts are far from the target at another temperature


@pytest.mark.parametrize('make', [tiny_qwen35, tiny_llama])
def test_greedy_lossless_many_prompts(make):
    target = make(1, initializer_range=0.2)
    drafter = DFlashDrafter(DFlashConfig.for_target(target, mask_token_id=255, block_size=16)).bind(target)
    g = torch.Generator().manual_seed(1)
    for L in (1, 7, 31):
        prompt = torch.randint(0, 255, (1, L), generator=g)
        ref = greedy_generate(target, prompt, 33)
        assert torch.equal(speculative_generate(target, drafter, prompt, 33).new_tokens, ref)
        for n in (1, 17):                                      # short budgets: shortened / skipped blocks
            assert torch.equal(speculative_generate(target, drafter, prompt, n).new_tokens, ref[:, :n])


def test_bad_input_is_named():
    "Float or out-of-vocabulary ids and block sizes outside [1, the drafter's] are ValueErrors that name the argument and the fix."
    target = tiny_llama(0)
    drafter = DFlashDrafter(DFlashConfig.for_target(target, mask_token_id=255, block_size=8)).bind(target)
    pr = torch.tensor([[1, 2, 3]])
    cases = [(dict(input_ids=pr.float()), 'input_ids must be an integer tensor'),
             (dict(input_ids=torch.tensor([[1, 256]])), "outside the target's vocabulary [0, 256)"),
             (dict(block_size=0), 'block_size=0'), (dict(block_size=9), 'exceeds the block the drafter was trained with (8)'),
             (dict(stop_token_ids=[300]), 'stop_token_ids holds ids outside')]
    for kw, msg in cases:
        with pytest.raises(ValueError, match=re.escape(msg)):
            speculative_generate(target, drafter, kw.pop('input_ids', pr), 4, **kw)
    assert speculative_generate(target, drafter, pr, 4, block_size=8).new_tokens.shape == (1, 4)
