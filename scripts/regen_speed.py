"""How fast the drafter's training answers can be regenerated on a GPU: `model.generate` (a growing DynamicCache) against
`effqwen.regen.static_greedy` (static KV cache, decode step replayed from a CUDA graph), each also with its decode steps
on `effqwen.regen.gqa_decode_attention` (`_gqa`: key/value heads read once, not repeated per query head), on the same
batch of SmolLM2 chat prompts (greedy, bf16), in one run. The drafter is short of data (drafter_capacity_gpu.json), so answers per GPU
second decide how much it can train on.

    PYTHONPATH=. OUT=$OUT python3 scripts/regen_speed.py [BATCH] [MAX_NEW]   # -> data/results/regen_speed_<gpu>.json
    WORK=/tmp/xfer ...   # on the device, after `gpu_drafter.py assemble --work $WORK`: the bundle's converted SmolLM2 and its
                         # training prompts (the SmolLM2 and prompt data packages are not installed there)
    DEV=cpu python3 scripts/regen_speed.py 4 16                               # a dry run on a CPU (no result written)
    LONG=<prompts_extra.json> ...   # the extra file's long-context prompts (ids extra/long/...) instead: the batch the regen
                                    # stage is slowest on (-> data/results/regen_speed_<gpu>_long.json)
    python3 scripts/regen_speed.py render                                    # -> data/tables/regen_speed.md

Answers / s counts each row's tokens up to and including its eos. Token agreement: bf16 rounding differs between the
paths (other attention lengths and kernels), so rows may part at a near-tie; the result gives, for each path against
`generate`, the share of rows with the same answer and the mean share of each answer's tokens before the first difference.
"""
import json, os, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import torch

def _first(hit):
    "Per row, the index of the first True, or the row's width where there is none."
    return torch.where(hit.any(1), hit.int().argmax(1), hit.shape[1])

def _lengths(ids, eos): return (_first(ids == eos) + 1).clamp(max=ids.shape[1])   # answer tokens, its eos included

def run(batch: int, max_new: int):
    from effqwen.core import write_result
    from effqwen.model import load_target, chat_prompt
    from effqwen.assets import train_prompts
    from effqwen.regen import static_greedy
    dev = os.environ.get('DEV', 'cuda'); cuda = dev == 'cuda'
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    work, long = os.environ.get('WORK'), os.environ.get('LONG')
    if work:   # on the device: the bundle's model and prompts (`gpu_drafter.py assemble`; no data packages there)
        from transformers import AutoModelForCausalLM, AutoTokenizer
        model = AutoModelForCausalLM.from_pretrained(f'{work}/smollm2', dtype=torch.bfloat16 if cuda else torch.float32).to(dev).eval()
        tok = AutoTokenizer.from_pretrained(f'{work}/smollm2')
    else: model, tok = load_target('smollm2', device=dev, dtype='bfloat16' if cuda else 'float32')
    if long:   # the long-context prompts of an extra file (device_bundle.py --long)
        prompts = [r['prompt'] for r in json.loads(Path(long).read_text())['train'] if str(r.get('id', '')).startswith('extra/long')][:batch]
        if not prompts: raise ValueError(f'LONG={long}: no extra/long prompts in that file (device_bundle.py --long writes them)')
    elif work: prompts = [x['prompt'] for x in json.loads(Path(f'{work}/bundle/prompts.json').read_text())['train'][:batch]]
    else: prompts = list(train_prompts(batch)['prompt'])
    qs = [chat_prompt(tok, p) for p in prompts]
    tok.padding_side = 'left'
    enc = tok(qs, return_tensors='pt', padding=True, add_special_tokens=False).to(dev)
    eos, pad = tok.eos_token_id, tok.pad_token_id
    def hf():
        return model.generate(**enc, max_new_tokens=max_new, do_sample=False, eos_token_id=eos, pad_token_id=pad,
                              temperature=None, top_p=None, top_k=None)[:, enc.input_ids.shape[1]:]
    from effqwen.regen import gqa_attention
    def gqa(fn):
        def run():
            with gqa_attention(model): return fn()
        return run
    sg = lambda graphs=None: (lambda: static_greedy(model, enc.input_ids, enc.attention_mask, max_new, eos, pad, graphs=graphs))
    runs = {'generate': hf, 'static_greedy': sg(), 'generate_gqa': gqa(hf), 'static_greedy_gqa': gqa(sg()),
            'static_greedy_gqa_eager': gqa(sg(False))}
    res, outs = {}, {}
    for name, fn in runs.items():
        fn(); sync()                               # warm-up (kernels, the graph's first recording)
        t = time.time(); o = fn(); sync(); s = time.time() - t
        n = int(_lengths(o, eos).sum()); outs[name] = o
        res[name] = dict(seconds=s, answer_tokens=n, tokens_per_s=n / s, steps=o.shape[1], peak_gb=torch.cuda.max_memory_allocated() / 2**30 if cuda else None)
        print(name, res[name], flush=True)
    def agree(a, b):
        "rows with the same answer on both paths, and the mean share of each answer before they part"
        w = min(a.shape[1], b.shape[1]); a, b = a[:, :w], b[:, :w]
        return dict(same_rows=float((a == b).all(1).float().mean()),
                    mean_prefix_share=float((_first(a != b).float() / _lengths(a, eos).clamp(min=1).float()).clamp(max=1).mean()))
    agreement = {k: agree(outs['generate'], o) for k, o in outs.items() if k != 'generate'}
    agreement['gqa_graph_equals_eager'] = bool(torch.equal(outs['static_greedy_gqa'], outs['static_greedy_gqa_eager']))
    print(agreement, flush=True)
    # which bf16 path stays closer to the float32 model's greedy answers (its rounding, not the kernels', is the reference):
    # agreement with bf16 `generate` alone cannot tell a less precise path from a differently rounded one
    import copy
    m32 = copy.deepcopy(model).float()
    ref = m32.generate(**enc, max_new_tokens=max_new, do_sample=False, eos_token_id=eos, pad_token_id=pad, temperature=None, top_p=None,
                       top_k=None)[:, enc.input_ids.shape[1]:]
    del m32
    agreement_fp32 = {k: agree(ref, o) for k, o in outs.items()}
    print('against float32 generate:', agreement_fp32, flush=True)
    if not cuda: print('dry run on the CPU: no result written'); return
    if os.environ.get('OUT'): os.environ['EFFQWEN_OUT'] = os.environ['OUT']   # the result under $OUT (effqwen.core.out_root)
    gpu = torch.cuda.get_device_name().split()[-1].lower()
    p = write_result(f"regen_speed_{gpu}{'_long' if long else ''}", dict(batch=len(prompts), max_new_tokens=max_new, prompt_tokens=int(enc.attention_mask.sum()),
                                                padded_prompt_len=enc.input_ids.shape[1], runs=res, agreement=agreement, agreement_fp32=agreement_fp32,
                                                prompts=(f'the long-context prompts of {Path(long).name}' if long else
                                                         'the bundle\'s training prompts' if work else 'effqwen.assets.train_prompts'),
                                                speedup={k: res['generate']['seconds'] / r['seconds'] for k, r in res.items() if k != 'generate'},
                                                note='SmolLM2-135M-Instruct bf16, greedy; one warm-up then one timed call per path; '
                                                     'answer tokens up to each row\'s eos; agreement: each path against generate; agreement_fp32: against the float32 model\'s generate; '
                                                     '_gqa: decode steps on effqwen.regen.gqa_decode_attention'), 'gpu', device='cuda')
    print(p)

def render():
    from effqwen.core import write_table, provenance_line
    docs = sorted(Path('data/results').glob('regen_speed_*.json'))
    if not docs: raise SystemExit('no data/results/regen_speed_*.json: run this script on a GPU first')
    lines = ['### Regenerating answers: `generate` vs the static-cache CUDA-graph loop, each with and without grouped decode attention (`_gqa`)', '',
             '| GPU | batch × new tokens | path | s | answer tokens / s | speedup | same answers | answer share before parting from float32 | peak GB |', '|---|---|---|---|---|---|---|---|---|']
    for f in docs:
        d = json.loads(f.read_text()); g = d['runs']['generate']['seconds']; ag = d['agreement']
        for k, r in d['runs'].items():
            same = '' if k == 'generate' else f"{ag[k]['same_rows']:.0%}" if k in ag else f"{ag['same_rows']:.0%}" if k == 'static_greedy' else ''
            f32 = f"{d['agreement_fp32'][k]['mean_prefix_share']:.0%}" if 'agreement_fp32' in d else ''
            lines.append(f"| {d['provenance']['device']} | {d['batch']} × {d['max_new_tokens']} | {k} | {r['seconds']:.2f} | {r['tokens_per_s']:,.0f} | "
                         f"{g / r['seconds']:.2f}× | {same} | {f32} | {r['peak_gb']:.1f} |")
        eq = ag.get('gqa_graph_equals_eager', ag.get('graph_equals_eager'))
        lines += ['', f"Prompts: {d.get('prompts', '?')}, padded to {d['padded_prompt_len']:,} tokens. " + d['note'] + f"; graph replay equals the eager loop: {eq}. "
                  "Same answers: the share of rows whose answer equals `generate`'s." + ('' if 'agreement_fp32' in d else
                  ' This run predates the float32 reference (no agreement with the float32 model measured).'), '', provenance_line(d)]
    print(write_table('regen_speed', '\n'.join(lines) + '\n', 'gpu'))

if __name__ == '__main__':
    if sys.argv[1:2] == ['render']: render()
    else: run(int(sys.argv[1]) if len(sys.argv) > 1 else 512, int(sys.argv[2]) if len(sys.argv) > 2 else 256)
