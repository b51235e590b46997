"""Where a batched greedy decode step of SmolLM2 spends its GPU time (torch.profiler, one HF decode step at a batch of
answers-in-progress): the regen stage runs far under the GPU's compute and bandwidth (regen_speed_h200.json: ~55 ms a step
at batch 512), so the kernels of one step say what to fix.

    WORK=/tmp/xfer PYTHONPATH=. OUT=$OUT python3 scripts/regen_profile.py [BATCH] [CTX]   # -> data/results/regen_profile_<gpu>.json
    MODE=static_gqa ...   # instead: `static_greedy` under `gqa_attention` (what the regen stage runs since session 32),
                          # 32 new tokens of each of BATCH rows: timed with its CUDA graph, profiled on the eager loop
"""
import os, sys, time, json
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import torch

def main(batch=512, ctx=400):
    from transformers import AutoModelForCausalLM
    from effqwen.core import write_result
    from train_step_profile import top_ops                                  # (this folder)
    work = os.environ.get('WORK', '/tmp/xfer'); dev = 'cuda'
    impl = os.environ.get('ATTN', 'sdpa')
    m = AutoModelForCausalLM.from_pretrained(f'{work}/smollm2', dtype=torch.bfloat16, attn_implementation=impl).to(dev).eval()
    print('attn', m.config._attn_implementation, 'dtype', next(m.parameters()).dtype, flush=True)
    ids = torch.randint(100, 40000, (batch, ctx), device=dev)
    am = torch.ones(batch, ctx, dtype=torch.long, device=dev); am[: batch // 2, : ctx // 4] = 0   # some left padding, as in regen
    with torch.no_grad():
        out = m(input_ids=ids, attention_mask=am, use_cache=True)
        pkv = out.past_key_values; nxt = out.logits[:, -1].argmax(-1)[:, None]
        am2 = torch.cat([am, torch.ones(batch, 1, dtype=am.dtype, device=dev)], 1)
        def step():
            return m(input_ids=nxt, attention_mask=am2, past_key_values=pkv, use_cache=True, position_ids=am2.sum(-1, keepdim=True) - 1)
        for _ in range(3): step()
        torch.cuda.synchronize(); t = time.time()
        for _ in range(5): step()
        torch.cuda.synchronize(); step_ms = (time.time() - t) / 5 * 1e3
        print(f'step (cache grows 5 tokens): {step_ms:.2f} ms', flush=True)
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            step(); torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by='cuda_time_total', row_limit=18, max_name_column_width=70), flush=True)
        res = dict(batch=batch, ctx=ctx, attention=m.config._attn_implementation, hf_step=dict(zip(('top_ops', 'gpu_self_ms'), top_ops(prof, True)), step_ms=step_ms))
        if os.environ.get('MODE') == 'static_gqa':
            from effqwen.regen import static_greedy, gqa_attention
            with gqa_attention(m):
                run = lambda: static_greedy(m, ids, am, 32, -1, 0, check_every=64)   # eos -1: every row runs all 32 steps
                run(); torch.cuda.synchronize(); t = time.time(); run(); torch.cuda.synchronize(); ms = (time.time() - t) * 1e3
                print(f'static_greedy + gqa, {batch} rows x 32 new tokens after {ctx}: {ms:.1f} ms ({ms / 32:.2f} ms a token incl. prefill)', flush=True)
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:   # eagerly: a graph's kernels may not be traced
                    static_greedy(m, ids, am, 32, -1, 0, graphs=False, check_every=64); torch.cuda.synchronize()
                print(prof.key_averages().table(sort_by='cuda_time_total', row_limit=18, max_name_column_width=70), flush=True)
                res['static_gqa'] = dict(zip(('top_ops', 'gpu_self_ms'), top_ops(prof, True)), graph_ms_32_tokens=ms, profiled='the eager loop')
    if os.environ.get('OUT'): os.environ['EFFQWEN_OUT'] = os.environ['OUT']
    gpu = torch.cuda.get_device_name().split()[-1].lower()
    print(write_result(f'regen_profile_{gpu}', dict(res, note='SmolLM2-135M-Instruct bf16, random tokens with a quarter of half the rows left-padded; '
                                                         'hf_step: one HF decode step on a DynamicCache (torch.profiler, self CUDA time per op)'),
                       'gpu', device='cuda'))

if __name__ == '__main__':
    main(*(int(a) for a in sys.argv[1:3]))
