"""Engine step costs against the static cache length (`max_seq_len`), SmolLM2-135M shape, random bf16 weights, batch 1:
verify-16 and decode-1 GPU time (CUDA graph replay, CUDA events, median of 20) after a 512- and a 150-token prompt, and
one greedy speculative round's wall time with a 2-layer DFlash drafter. Before the engine padded its caches to a
multiple of 64 rows, a cache of 4263 rows (what the gpu drafter eval asked for) made cuBLAS pick a slow kernel for the
verify attention; `--before` adds those numbers, measured by the same code on the unpadded engine, to the result.

    python scripts/verify_align.py --out $OUT [--before path/to/unpadded.json]   # -> $OUT/data/results/verify_align_h200.json
"""
import argparse, json, os, time
from pathlib import Path
import torch

def measure() -> dict:
    from transformers import LlamaConfig, LlamaForCausalLM
    from effqwen.engine import Engine, StaticDrafter, _gpu_ms, speculative_generate as eng_spec
    from effqwen.dflash import DFlashConfig, DFlashDrafter
    dev, taps, res = 'cuda', (1, 10, 18, 27), {}
    torch.manual_seed(0)
    m = LlamaForCausalLM(LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
        num_key_value_heads=3, max_position_embeddings=8192, tie_word_embeddings=True, rope_theta=1e5)).to(dev, torch.bfloat16).eval()
    def meas(tag, e, ctx):
        e.prefill(torch.randint(0, 1000, (1, ctx), device=dev)); v = _gpu_ms(lambda: e._step('verify'), 20)
        e.prefill(torch.randint(0, 1000, (1, ctx), device=dev)); d = _gpu_ms(lambda: e._step('decode'), 20)
        res[tag] = dict(verify_ms=v, decode_ms=d); print(tag, res[tag], flush=True)
    for L in (4160, 4263, 8192):
        e = Engine(m, max_seq_len=L, tap_layers=taps); meas(f'L{L} ctx512', e, 512); meas(f'L{L} ctx150', e, 150); del e
    e = Engine(m, max_seq_len=4263, tap_layers=taps)
    dr = DFlashDrafter(DFlashConfig.for_target(m, mask_token_id=16, num_hidden_layers=2, block_size=16, n_taps=4)).to(dev, torch.bfloat16).bind(m).eval()
    sd = StaticDrafter(dr, 4263); x = torch.randint(0, 1000, (1, 150), device=dev)
    e.generate(x, 32, [0]); eng_spec(e, sd, x, 64, [0])
    torch.cuda.synchronize(); t = time.perf_counter(); r = eng_spec(e, sd, x, 128, [0]); torch.cuda.synchronize()
    res['spec_round_ms_L4263'] = (time.perf_counter() - t) * 1e3 / r.rounds; res['spec_rounds'] = r.rounds
    return res

def main():
    ap = argparse.ArgumentParser(); ap.add_argument('--out', required=True); ap.add_argument('--before', default=None)
    a = ap.parse_args()
    from effqwen.core import write_result, get_profile
    doc = dict(shape='SmolLM2-135M (random weights, bf16)', after=measure())
    if a.before: doc['before_unpadded'] = json.loads(Path(a.before).read_text())
    os.environ['EFFQWEN_OUT'] = a.out
    print('wrote', write_result('verify_align_h200', doc, get_profile('gpu'), device='cuda'))

if __name__ == '__main__': main()
