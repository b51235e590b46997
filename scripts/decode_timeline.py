"""Where a decode token's wall time goes in the recorded step, by context: the kernels of N back-to-back decode steps
(`decode_n_tokens`, CUDA-graph replays under PDL, as `benchmark_latency` times decode) traced with torch.profiler, then
split along the chain. In a chain every kernel waits for the one before it, so a kernel's end minus the previous
kernel's end is what it adds to the token (`end_delta`): summed over the kernels that is the wall time from the first
end to the last. Kernel durations alone overlap under PDL (a kernel starts, and loads its weights, while the one
before it runs), so their sum is not the wall time. Keys: the kernel's name, and the name after its predecessor's (the
W4A16 kernel after the attention's combine is the output projection).

    EFFQWEN_OUT=$OUT PROMPTS=64,2048,8192 python scripts/decode_timeline.py     # CUDA only -> data/results/decode_timeline_h200.json
"""
import os, sys, time
from collections import defaultdict
import torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from profile_steps import gap_stats

def chain_stats(ks: list, n: int) -> dict:
    "From [(start, end, name)] kernel intervals (µs) of n steps: wall, busy, durations and end deltas per name, per step."
    ks = sorted(ks, key=lambda k: k[1])
    wall = (ks[-1][1] - min(k[0] for k in ks)) / n
    busy = gap_stats(ks, [], top=0)['busy_us']                        # the union of the kernel intervals
    dur, delta, pair = defaultdict(float), defaultdict(float), defaultdict(float)
    count = defaultdict(int)
    for i, (a, b, name) in enumerate(ks):
        dur[name] += (b - a) / n; count[name] += 1
        if i:
            d = (b - ks[i - 1][1]) / n
            delta[name] += d; pair[f'{name} after {ks[i - 1][2]}'] += d
    top = lambda d, k=25: {x: round(v, 2) for x, v in sorted(d.items(), key=lambda kv: -kv[1])[:k]}
    return dict(wall_us=wall, busy_us=busy / n, kernels_per_step=len(ks) / n, duration_us=top(dur), end_delta_us=top(delta),
                end_delta_by_predecessor_us=top(pair, 40), count_per_step={k: v / n for k, v in count.items()})

def main():
    from effqwen.engine import Engine, ArgmaxHead
    from effqwen.kernels import W4A16Linear
    from effqwen.model import load_target
    from effqwen.core import write_result
    if not torch.cuda.is_available(): sys.exit('decode_timeline.py needs a CUDA GPU')
    t0 = time.time()
    prompts = [int(p) for p in os.environ.get('PROMPTS', '2048,8192').split(',')]
    n = int(os.environ.get('STEPS', 8)); head = os.environ.get('HEAD', 'argmax')
    m = load_target('qwen3.5-4b', device='cuda', dtype='bfloat16')[0]
    torch.manual_seed(0)
    eng = Engine(m, max_seq_len=int(os.environ.get('MAX_SEQ_LEN', 8472)), convert=lambda l: W4A16Linear.from_float(l, group_size=128),
                 convert_head=ArgmaxHead.from_linear if head == 'argmax' else False)
    ids = torch.randint(0, 1000, (1, max(prompts)), device='cuda')
    from torch.profiler import profile, ProfilerActivity
    res = dict(shape='qwen3.5-4b', head=type(eng.head).__name__, steps=n, cache_len=eng.cache_len, contexts={})
    for P in prompts:
        eng.prefill(ids[:, :P]); eng.decode_n_tokens(8); torch.cuda.synchronize()
        t = time.perf_counter(); eng.decode_n_tokens(n); torch.cuda.synchronize(); untraced = (time.perf_counter() - t) / n * 1e6
        eng.prefill(ids[:, :P]); eng.decode_n_tokens(8); torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            eng.decode_n_tokens(n); torch.cuda.synchronize()
        ks = [(e.time_range.start, e.time_range.end, e.name[:90]) for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        if not ks: res['contexts'][str(P)] = dict(error='no kernel events in the trace'); continue
        res['contexts'][str(P)] = dict(untraced_us_per_token=untraced, **chain_stats(ks, n))
        c = res['contexts'][str(P)]
        print(P, 'wall', round(c['wall_us'], 1), 'untraced', round(untraced, 1), 'busy', round(c['busy_us'], 1), 'kernels', c['kernels_per_step'], flush=True)
        print('  end delta', list(c['end_delta_us'].items())[:10], flush=True)
    res['wall_s'] = time.time() - t0
    res['device'] = torch.cuda.get_device_name()
    print(write_result('decode_timeline_h200', res, 'gpu', device='cuda'))

if __name__ == '__main__': main()
