"""The README's "Apply the recipes to your own checkpoint" blocks, run as written on a tiny random Qwen3.5 (hybrid
Gated-DeltaNet) and a tiny random Llama (dense, SmolLM2's architecture), each saved as a bf16 checkpoint folder with
SmolLM2's tokenizer and loaded by the README's first block (`from_pretrained(path, dtype=torch.bfloat16)`). The first
block runs with its placeholders filled in (the folder, texts, prompts; no `.cuda()`), then tiny sizes replace `S`.
The test checks what each recipe promises: recipe A calibrates GPTQ on cached block inputs, writes a W4A16 checkpoint
whose reload computes exactly the evaluated INT4 model's logits, and a drafter, and its speculative output is the INT4
kernel model's own greedy output; recipe B leaves a model on the BCQ kernels at about the bit budget, computing what
its records dequantize to."""
import copy, re
from pathlib import Path
import pytest, torch

README = Path(__file__).resolve().parents[1]/'README.md'
TINY_S = dict(group=32, new=4, pack=32, qad_steps=2, qad_lr=1e-4, layers=1, steps1=3, steps2=2,
              planes=(2, 3), groups=(64,), bcq_bits=2.5, distill_steps=2)

def _blocks():
    text = README.read_text()
    sec = text.split('## Apply the recipes to your own checkpoint', 1)[1].split('\n## ', 1)[0]
    return re.findall(r'```python\n(.*?)```', sec, flags=re.S)

def _sub(src:str, old:str, new:str)->str:
    assert old in src, f'the README first block no longer has {old!r}: update this test with it'
    return src.replace(old, new)

def _first_block(path:Path)->str:
    "The README's first block with its placeholders filled in for a tiny CPU run."
    src = re.sub(r"path = '[^']*'", f'path = {str(path)!r}', _blocks()[0])
    src = _sub(src, '.cuda()', '')
    src = _sub(src, 'texts = [...]', 'texts = [" ".join(f"word{i} item {i % 7} of the list." for i in range(j, j + 200)) for j in range(8)]')
    src = _sub(src, ', 512, 128)', ', 64, 8)')
    src = _sub(src, 'calib[:8], calib[8:]', 'calib[:2], calib[2:]')
    src = _sub(src, "dict(id=[...], prompt=[...])", "dict(id=['a', 'b', 'c', 'd'], prompt=['Hi there.', 'What is 2 + 2?', 'Name a color.', 'Count to three.'])")
    return src

@pytest.fixture(scope='module', params=['tiny-qwen3.5', 'tiny-llama'])
def ckpt(request, tmp_path_factory):
    "A bf16 checkpoint folder (config, safetensors, tokenizer), as a user's own checkpoint would be."
    from effqwen.model import load_tokenizer, tiny_qwen35, tiny_llama
    tok = load_tokenizer('smollm2')
    mk = tiny_qwen35 if request.param == 'tiny-qwen3.5' else tiny_llama
    d = tmp_path_factory.mktemp(request.param)
    mk(0, torch.bfloat16, vocab_size=len(tok), eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id).save_pretrained(d)
    tok.save_pretrained(d)
    return d

@pytest.fixture
def ns(ckpt, tmp_path, monkeypatch):
    "The README's first block, run on the checkpoint; then tiny sizes."
    monkeypatch.chdir(tmp_path); monkeypatch.setenv('EFFQWEN_CACHE', str(tmp_path/'cache'))   # regenerated answers go here
    torch.manual_seed(0)
    ns = {}
    exec(_first_block(ckpt), ns)
    assert ns['model'].dtype == torch.bfloat16 and ns['calib'].shape == (8, 64)
    ns['S'] = dict(TINY_S)
    return ns

def test_readme_has_the_blocks():
    b = _blocks()
    assert len(b) == 3 and 'path =' in b[0] and 'speculative_generate' in b[1] and 'knapsack' in b[2]

def test_recipe_a(ns):
    from effqwen.kernels import W4A16Linear
    from effqwen.model import greedy_generate
    from effqwen.quant import load_compressed
    from effqwen.qad import dequantized_model
    exec(_blocks()[1], ns)
    int4, out, tok = ns['int4'], ns['out'], ns['tok']
    assert {r['calibration'] for r in ns['recs'].values()} == {'block-cache'}   # GPTQ re-ran single blocks, not the model
    assert (Path('out/w4a16')/'config.json').exists() and (Path('out/drafter')/'config.json').exists()
    assert sum(isinstance(m, W4A16Linear) for m in int4.modules()) == len(ns['recs']) > 0
    x = ns['calib'][:2]
    evaluated = dequantized_model(ns['student'])                           # int4 before it moved onto the kernels
    with torch.no_grad(): a, b = evaluated(x).logits, load_compressed('out/w4a16', dtype=torch.bfloat16)(x).logits
    assert a.dtype == torch.bfloat16 and torch.equal(a, b)                 # the checkpoint is the evaluated model
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
    with torch.no_grad(): a, b = student(x).logits.float(), ref(x).logits.float()
    assert ((a - b).abs().mean() / b.abs().mean()).item() < 2e-2              # bf16 scales on the kernels
