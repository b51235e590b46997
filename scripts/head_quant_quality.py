"""What quantizing the LM head too costs in quality (SmolLM2, cpu profile): KLD to the float model and PPL on the
held-out eval windows of table A3, with the head (a separate copy: the token embedding stays full precision) on the
symmetric INT4 grid with bf16 scales — RTN g32 / g64 and GPTQ g64 (calibrated on the profile's training windows) —
or on the symmetric INT8 grid with one bf16 scale per row (the engine's W8A16 head, `effqwen.kernels.W8A16Linear`),
alone and on top of the body quantized RTN g32, which also re-measures A3's RTN g32 row as a check.

Why: decode reads the whole head every token. At Qwen3.5-4B's 248,320 × 2560 head that is 1.27 GB in bf16, against
1.7 GB for every other linear in INT4 (table A2's decode breakdown), and the engine can run it on the W4A16 kernels
(`Engine(..., convert_head=True)`). Quantization recipes (llm-compressor's, AWQ's, GPTQ's) leave the head in 16 bits
by default; this measures what the other choice costs here. SmolLM2's head is its embedding transposed (tied) and
has 49,152 rows, so the number speaks for this model, not for Qwen3.5's.

    python scripts/head_quant_quality.py     # -> data/results/w4_head_quality.json, data/tables/w4_head_quality.md
"""
import copy, json, time
import torch, torch.nn as nn
from effqwen.core import get_profile, set_determinism, set_threads, write_result, render_table, write_table, provenance_line
from effqwen.model import load_target
from effqwen.assets import text_corpus
from effqwen.eval import eval_windows, token_windows, kld_ppl
from effqwen.quant import QWEN35_IGNORE, quantizable_linears, fake_quant, GPTQ, IntQuantizer

def untied_head(model):
    "A copy of `model` whose LM head owns its weight (quantizing it leaves the embedding alone)."
    m = copy.deepcopy(model)
    m.lm_head.weight = nn.Parameter(m.lm_head.weight.detach().clone(), requires_grad=False)
    assert m.lm_head.weight.data_ptr() != m.get_input_embeddings().weight.data_ptr()
    return m

@torch.no_grad()
def head_inputs(model, calib, batch: int):
    "The LM head's inputs (final-norm hidden states) on the calibration windows, one tensor per batch."
    xs = []
    h = model.lm_head.register_forward_pre_hook(lambda mod, a: xs.append(a[0].detach().float()))
    try:
        for i in range(0, len(calib), batch): model(calib[i:i + batch])
    finally: h.remove()
    return xs

def main():
    t0 = time.time()
    p = get_profile('cpu'); set_determinism(p.seed); set_threads()
    ref, tok = load_target(p)
    ref.eval()
    windows = eval_windows(tok, p)
    calib = token_windows(tok, text_corpus('train')['text'], p.calib_seq_len, p.calib_samples)
    q = lambda g: IntQuantizer(bits=4, group_size=g, sym=True, scale_dtype=torch.bfloat16)
    W = ref.lm_head.weight.detach().float()
    gptq = GPTQ(ref.lm_head)
    for x in head_inputs(ref, calib, p.eval_batch): gptq.add_batch(x)
    heads = {'INT8 RTN per channel': fake_quant(W, 8, W.shape[1], sym=True, scale_dtype=torch.bfloat16),   # the engine's W8A16 head
             'RTN g32': fake_quant(W, 4, 32, sym=True, scale_dtype=torch.bfloat16),
             'RTN g64': fake_quant(W, 4, 64, sym=True, scale_dtype=torch.bfloat16),
             'GPTQ g64': gptq.quantize(q(64))[0]}
    body = quantizable_linears(ref, QWEN35_IGNORE)                                 # every linear but the head (and the embedding)
    rows = []
    def measure(name, m, **kw):
        r = kld_ppl(m, windows, ref=ref, batch_size=p.eval_batch)
        rows.append(dict(config=name, kld=r['kld'], ppl=r['ppl'], tokens=r['tokens'], **kw)); print(rows[-1], flush=True)
    rows.append(dict(config='float (reference)', kld=0.0, ppl=kld_ppl(ref, windows, batch_size=p.eval_batch)['ppl'], head=None, body=None))
    for hn, Wq in heads.items():
        m = untied_head(ref); m.lm_head.weight.data.copy_(Wq.to(m.lm_head.weight.dtype))
        measure(f'head {hn}', m, head=hn, body=None,
                head_rel_error=((Wq - W).norm() / W.norm()).item())
    mb = untied_head(ref)
    mods = dict(mb.named_modules())
    for n in body: mods[n].weight.data.copy_(fake_quant(mods[n].weight.detach().float(), 4, 32, sym=True, scale_dtype=torch.bfloat16).to(mods[n].weight.dtype))
    measure('body RTN g32', mb, head=None, body='RTN g32')
    for hn in ('INT8 RTN per channel', 'RTN g64', 'GPTQ g64'):
        m = copy.deepcopy(mb); m.lm_head.weight.data.copy_(heads[hn].to(m.lm_head.weight.dtype))
        measure(f'body RTN g32 + head {hn}', m, head=hn, body='RTN g32')
    a3 = json.load(open('data/results/qad.json'))
    context = [dict(method=r['method'], group=r['group'], kld=r['kld'], ppl=r['ppl']) for r in a3['rows']]
    res = dict(model=str(p.model), head_shape=list(W.shape), eval_windows=list(windows.shape), calib_windows=list(calib.shape),
               rows=rows, a3_rows=context, a3_provenance=a3['provenance'], n_body_linears=len(body), wall_s=time.time() - t0)
    path = write_result('w4_head_quality', res, p)
    print('wrote', path)
    render()   # (from the written file: it carries the provenance)

def render(doc=None):
    doc = doc or json.load(open('data/results/w4_head_quality.json'))
    md = (f"### Quantizing the LM head too: {doc['model']} ({doc['head_shape'][0]:,} × {doc['head_shape'][1]} head, tied to the embedding)\n\n"
          + render_table(doc['rows'], [('config', 'quantized weights', '{}'), ('kld', 'KLD to float', '{:.4f}'), ('ppl', 'PPL', '{:.2f}')]) + '\n'
          + f"KLD (mean per token) and PPL on the {doc['eval_windows'][0]} held-out windows of {doc['eval_windows'][1]} tokens of table A3. "
            "Head: a separate copy of the tied weight on the symmetric INT4 grid with bf16 scales, or INT8 with one bf16 scale per row (the embedding stays float); "
            f"GPTQ calibrated on {doc['calib_windows'][0]} training windows of {doc['calib_windows'][1]} tokens. Body: the "
            f"{doc['n_body_linears']} linears table A3 quantizes, RTN g32. Table A3's rows for the body (same windows, its own run): "
            + ', '.join(f"{r['method']}{'' if r['group'] is None else ' g' + str(r['group'])} {r['kld']:.4f}" for r in doc['a3_rows'])
            + ' (the body-only row here rounds its scales to bf16, as the W4A16 checkpoint stores them).\n\n'
          + provenance_line(doc) + '\n')
    print(write_table('w4_head_quality', md, doc['provenance']['profile'])); print(md)

if __name__ == '__main__':
    import sys
    render() if '--render' in sys.argv else main()
