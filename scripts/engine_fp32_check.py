"""Issue 8's identity gate at the Qwen3.5-4B shape, in float32: the engine's greedy tokens against HF transformers'
greedy tokens on the same random weights (TF32 off). The latency run compares in bf16, where random weights put many
logits within bf16 rounding of each other (A1: 24/32 equal); float32 takes that rounding out. Both sides run without
flash-linear-attention unless it is importable (HF then uses its torch Gated-DeltaNet reference). GPU only.

    PYTHONPATH=. python3 scripts/engine_fp32_check.py [--shape qwen3.5-4b] [--prompt 64] [--new 32] [--out DIR]
    -> DIR/data/results/engine_fp32_match_<gpu>.json (write_result; DIR default: the repository)
"""
import argparse, importlib.util, os, time, traceback
import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--shape', default='qwen3.5-4b'); ap.add_argument('--prompt', type=int, default=64)
    ap.add_argument('--new', type=int, default=32); ap.add_argument('--out', default=None)
    a = ap.parse_args()
    if not torch.cuda.is_available(): raise SystemExit('needs a CUDA GPU')
    if a.out: os.environ['EFFQWEN_OUT'] = a.out
    torch.backends.cuda.matmul.allow_tf32 = False; torch.backends.cudnn.allow_tf32 = False
    from effqwen.core import write_result
    from effqwen.model import load_target, greedy_generate
    from effqwen.engine import Engine, teacher_forced_gaps, _prefix_match
    t0 = time.time()
    m, _ = load_target(a.shape, device='cuda', dtype='float32', seed=0)
    ids = torch.randint(0, m.config.vocab_size, (1, a.prompt), generator=torch.Generator().manual_seed(0)).cuda()
    with torch.no_grad():
        ref = greedy_generate(m, ids, a.new)
        top2 = m(torch.cat([ids, ref], 1), logits_to_keep=a.new + 1).logits[0, :a.new].float().topk(2, -1).values
    res = dict(shape=a.shape, dtype='float32', tf32=False, prompt_tokens=a.prompt, new_tokens=a.new,
               fla=importlib.util.find_spec('fla') is not None, hf_top2_margin_min=float((top2[:, 0] - top2[:, 1]).min()), engines={})
    for fused in (True, False):
        k = 'fused' if fused else 'torch'
        try:
            t = time.time(); eng = Engine(m, max_seq_len=a.prompt + a.new + 16, fused=fused)
            with torch.no_grad(): out = eng.generate(ids, a.new)
            gaps = teacher_forced_gaps(m, ids, out)
            res['engines'][k] = dict(fused=eng.fused, match=_prefix_match(out, ref), identical=bool(torch.equal(out.cpu(), ref.cpu())),
                                     teacher_forced_not_argmax=sum(g > 0 for g in gaps), teacher_forced_max_gap=max(gaps), s=round(time.time() - t, 1))
            del eng; torch.cuda.empty_cache()
        except Exception as e:
            res['engines'][k] = dict(error=f'{type(e).__name__}: {e}'[:400]); traceback.print_exc()
        print(k, res['engines'][k], flush=True)
    res['seconds'] = round(time.time() - t0, 1)
    name = 'engine_fp32_match_' + torch.cuda.get_device_name().split()[-1].lower()
    print(write_result(name, res, 'gpu'))


if __name__ == '__main__':
    main()
