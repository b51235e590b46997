"""The README's "Apply the recipes to your own checkpoint" blocks, run as written on a tiny random Qwen3.5 (hybrid
Gated-DeltaNet) and a tiny random Llama (dense, SmolLM2's architecture), with SmolLM2's tokenizer. The first block (the user's inputs: a checkpoint path, CUDA) is replaced by
the stand-in below, with tiny sizes in `S`. The test checks what each recipe promises: recipe A writes a W4A16
checkpoint and a drafter, and its speculative output is the INT4 kernel model's own greedy output; recipe B leaves a
model on the BCQ kernels at about the bit budget, computing what its records dequantize to."""
import copy, re
from pathlib import Path
import pytest, torch

README = Path(__file__).resolve().parents[1]/'README.md'

def _blocks():
    text = README.read_text()
    sec = text.split('## Apply the recipes to your own checkpoint', 1)[1].split('\n## ', 1)[0]
    return re.findall(r'```python\n(.*?)```', sec, flags=re.S)

@pytest.fixture(params=['tiny-qwen3.5', 'tiny-llama'])
def ns(request, tmp_path, monkeypatch):
    "The stand-in for the README's first block: a tiny hybrid Qwen3.5, or a tiny dense Llama (SmolLM2's architecture)."
    from datasets import Dataset
    from effqwen.model import load_target, load_tokenizer, tiny_llama, chat_prompt
    torch.manual_seed(0)
    if request.param == 'tiny-qwen3.5': model, tok = load_target('tiny-qwen3.5')
    else:
        tok = load_tokenizer('smollm2')
        model = tiny_llama(vocab_size=len(tok), eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    monkeypatch.chdir(tmp_path); monkeypatch.setenv('EFFQWEN_CACHE', str(tmp_path/'cache'))   # regenerated answers go here
    calib = torch.randint(0, len(tok), (4, 64))
    prompts = Dataset.from_dict(dict(id=['a', 'b', 'c', 'd'], prompt=['Hi there.', 'What is 2 + 2?', 'Name a color.', 'Count to three.']))
    prompt_ids = tok(chat_prompt(tok, 'Say something.'), return_tensors='pt').input_ids
    S = dict(group=32, new=8, pack=64, qad_steps=2, qad_lr=1e-4, layers=1, steps1=3, steps2=2,
             planes=(2, 3), groups=(64,), bcq_bits=2.5, distill_steps=2)
    return dict(torch=torch, model=model, tok=tok, calib=calib, held_out=calib[:2], train_windows=calib[2:], prompts=prompts,
                prompt_ids=prompt_ids, S=S)

def test_readme_has_the_blocks():
    b = _blocks()
    assert len(b) == 3 and 'path =' in b[0] and 'speculative_generate' in b[1] and 'knapsack' in b[2]

def test_recipe_a(ns):
    from effqwen.kernels import W4A16Linear
    from effqwen.model import greedy_generate
    exec(_blocks()[1], ns)
    int4, out, tok = ns['int4'], ns['out'], ns['tok']
    assert (Path('out/w4a16')/'config.json').exists() and (Path('out/drafter')/'config.json').exists()
    assert sum(isinstance(m, W4A16Linear) for m in int4.modules()) == len(ns['recs']) > 0
    ref = greedy_generate(int4, ns['prompt_ids'], ns['S']['new'], tok.eos_token_id)
    assert torch.equal(out.new_tokens, ref), (out.new_tokens, ref)        # lossless: the target's own greedy tokens
    assert out.tau >= 1 and ns['stage2'].cfg.sliding_window == ns['S']['pack']

def test_recipe_b(ns):
    from effqwen.kernels import BCQLinear
    from effqwen.bcq_model import load_records, average_bits
    exec(_blocks()[2], ns)
    student, recs = ns['student'], ns['recs']
    assert sum(isinstance(m, BCQLinear) for m in student.modules()) == len(recs) > 0
    assert abs(average_bits(recs) - ns['S']['bcq_bits']) < 0.5, average_bits(recs)
    ref = copy.deepcopy(ns['model']); load_records(ref, recs)              # the records, dequantized into plain linears
    x = ns['calib'][:1]
    with torch.no_grad(): a, b = student(x).logits, ref(x).logits
    assert ((a - b).abs().mean() / b.abs().mean()).item() < 2e-2              # bf16 scales on the kernels
