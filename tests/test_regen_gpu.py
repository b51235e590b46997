"""GPU checks of `effqwen.regen.static_greedy` (skipped without CUDA): the decode step replayed from a CUDA graph gives
the eager loop's tokens (bfloat16), and in float32 `model.generate`'s greedy tokens, with left-padded prompts of
different lengths and rows that end (eos) at different steps."""
import pytest, torch
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')

from effqwen.model import tiny_llama
from effqwen.regen import static_greedy, gqa_attention

def _batch(lengths=(3, 17, 9, 30), vocab=256):
    g = torch.Generator().manual_seed(0)
    P = max(lengths)
    ids = torch.zeros(len(lengths), P, dtype=torch.long); mask = torch.zeros_like(ids)
    for i, L in enumerate(lengths):
        ids[i, P - L:] = torch.randint(3, vocab, (L,), generator=g); mask[i, P - L:] = 1
    return ids.cuda(), mask.cuda()

@pytest.mark.parametrize('eos', [5, 55])   # 55: emitted early by some rows of these weights on a CPU, so rows likely stop at different steps
def test_static_greedy_equals_generate_fp32(eos):
    m = tiny_llama(0, torch.float32, initializer_range=0.2).cuda()
    ids, mask = _batch()
    ref = m.generate(input_ids=ids, attention_mask=mask, max_new_tokens=40, do_sample=False, eos_token_id=eos, pad_token_id=0,
                     temperature=None, top_p=None, top_k=None)[:, ids.shape[1]:]
    out = static_greedy(m, ids, mask, 40, eos, 0, graphs=True, check_every=4)
    assert torch.equal(out[:, :ref.shape[1]], ref) and (out[:, ref.shape[1]:] == 0).all()

def test_static_greedy_graph_equals_eager_bf16():
    m = tiny_llama(0, torch.bfloat16, initializer_range=0.2).cuda()
    ids, mask = _batch()
    a = static_greedy(m, ids, mask, 48, 55, 0, graphs=True)
    b = static_greedy(m, ids, mask, 48, 55, 0, graphs=False)
    assert torch.equal(a, b)


@pytest.mark.parametrize('static', [True, False])
def test_gqa_attention_equals_sdpa_fp32(static):
    "The grouped decode attention (no repeated key/value heads) gives sdpa's greedy tokens, in either decoding loop."
    m = tiny_llama(0, torch.float32, initializer_range=0.2).cuda()
    ids, mask = _batch()
    run = (lambda: static_greedy(m, ids, mask, 40, 55, 0, check_every=4)) if static else \
          (lambda: m.generate(input_ids=ids, attention_mask=mask, max_new_tokens=40, do_sample=False, eos_token_id=55, pad_token_id=0,
                              temperature=None, top_p=None, top_k=None))
    ref = run()
    with gqa_attention(m): out = run()
    assert torch.equal(out, ref)

def test_gqa_static_graph_equals_eager_bf16():
    m = tiny_llama(0, torch.bfloat16, initializer_range=0.2).cuda()
    ids, mask = _batch()
    with gqa_attention(m):
        a = static_greedy(m, ids, mask, 48, 55, 0, graphs=True)
        b = static_greedy(m, ids, mask, 48, 55, 0, graphs=False)
    assert torch.equal(a, b)
