"""What one CUDA graph per speculative round buys (`effqwen.engine.ROUND_GRAPH`), and the round's block and accept as two
Triton kernels (`ROUND_KERNELS`): the pipelined round issued op by op (the drafter's graph, ~20 small accept /
bookkeeping ops, the verify and commit graphs), with the two kernels, recorded as one graph, and both, on random weights (a round's cost does not depend on them; the drafter accepts almost nothing, so every
round keeps about one token and the round count is the budget's). Per shape: ms per round of each (CUDA events around
the rounds after the first, and decode wall time / rounds), the engine's AR decode ms per token, the steps' own graph
times, and whether both loops produced the same tokens and acceptance lengths.

Shapes: `smollm2` (SmolLM2-135M's sizes, bf16 engine, the 2-layer, 4-tap, block-16 drafter of the GPU runs with a 16,384-row draft
vocabulary: the e2e configuration) and, with WITH_4B=1, `qwen3.5-4b` (W4A16 g128 engine, the reference 5-layer drafter).

    PYTHONPATH=/tmp/site:. OUT=$OUT python3 scripts/round_graph_bench.py     # -> data/results/round_graph_<gpu>.json
    DEV=cpu python3 scripts/round_graph_bench.py                             # a dry run on a tiny model (no graphs, no result)
"""
import os, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import torch

def smollm2_shaped(dev, dtype, tiny=False):
    from effqwen.model import tiny_llama
    kw = {} if tiny else dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                               num_key_value_heads=3, max_position_embeddings=8192, rope_theta=100000.0)
    return tiny_llama(0, dtype, **kw).to(dev)

MODES = {'op_by_op': (False, False), 'kernels': (True, False), 'round_graph_ops': (False, True), 'round_graph': (True, True)}   # (ROUND_KERNELS, graph)

def bench(name, eng, sd, prompt, new, reps, log):
    import effqwen.engine as E
    from effqwen.engine import speculative_generate, _gpu_ms, round_graph_ok, round_kernels
    cuda = eng.device.type == 'cuda'
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    later = lambda r: [a + b for a, b in r.round_s[1:]]                       # rounds after the first (the graph's)
    out = dict(rounds={}, decode_ms_per_round={}, event_ms_per_round={}, same=True, round_graph_ok=round_graph_ok(eng, sd))
    own = E.ROUND_KERNELS
    modes = {k: v for k, v in MODES.items() if (out['round_graph_ok'] or not v[1]) and (round_kernels(eng) or not v[0])}
    def run(k):
        E.ROUND_KERNELS = modes[k][0]
        try: return speculative_generate(eng, sd, prompt, new, round_graph=modes[k][1])
        finally: E.ROUND_KERNELS = own
    for k in modes: run(k)                                                     # warm-up (records the round graphs once)
    eng.generate(prompt, new)
    ref, ar = None, []
    for i in range(reps):                                                      # alternating: a clock drift favours neither
        sync(); t = time.perf_counter(); eng.prefill(prompt); sync(); pre = time.perf_counter() - t
        sync(); t = time.perf_counter(); eng.generate(prompt, new); sync(); ar.append((time.perf_counter() - t - pre) / (new - 1) * 1e3)
        for k in modes:
            r = run(k)
            out['rounds'].setdefault(k, []).append(r.rounds)
            out['decode_ms_per_round'].setdefault(k, []).append(r.decode_s / r.rounds * 1e3)
            out['event_ms_per_round'].setdefault(k, []).append(sum(later(r)) / max(1, len(later(r))) * 1e3)
            got = (r.new_tokens.cpu().tolist(), r.acceptance_lengths)
            if ref is None: ref = got
            out['same'] &= got == ref
    med = lambda v: sorted(v)[len(v) // 2]
    out['median'] = {m: {k: med(v) for k, v in out[m].items()} for m in ('decode_ms_per_round', 'event_ms_per_round')}
    out['ar_decode_ms'] = med(ar)
    eng.prefill(prompt)
    out['step_ms'] = dict(verify=_gpu_ms(lambda: eng._step('verify'), 20), decode=_gpu_ms(lambda: eng._step('decode'), 20),
                          commit=_gpu_ms(lambda: eng._step('commit'), 20),
                          draft=_gpu_ms(sd.graph.replay if sd.graph is not None else sd._fn, 20))
    e = out['median']['event_ms_per_round']
    out['saved_ms_per_round'] = {k: e['op_by_op'] - v for k, v in e.items() if k != 'op_by_op'}
    out['modes'] = {k: dict(round_kernels=v[0], round_graph=v[1]) for k, v in modes.items()}
    log(name, {k: v for k, v in out.items() if k in ('median', 'ar_decode_ms', 'step_ms', 'same', 'saved_ms_per_round')})
    return out

@torch.no_grad()
def main():
    from effqwen.dflash import DFlashDrafter, DFlashConfig
    from effqwen.engine import Engine, StaticDrafter, reference_drafter_config
    dev = torch.device(os.environ.get('DEV', 'cuda')); cuda = dev.type == 'cuda'
    log = lambda *a: print(f'[{time.strftime("%H:%M:%S")}]', *a, flush=True)
    new, reps = (256, 5) if cuda else (24, 1)
    dt = torch.bfloat16 if cuda else torch.float32
    res, P = dict(new_tokens=new, reps=reps), 92                               # (the e2e's step timing: a 92-token GSM8K prompt)
    m = smollm2_shaped(dev, dt, tiny=not cuda)
    P = P if cuda else 12
    x = torch.randint(0, m.config.vocab_size, (1, P), generator=torch.Generator().manual_seed(0)).to(dev)
    cfg = DFlashConfig.for_target(m, mask_token_id=m.config.vocab_size - 1, block_size=16, num_hidden_layers=2 if cuda else 1,
                                  n_taps=4 if cuda else 1)                     # (the gpu DrafterSize: 2 layers, 4 taps)
    torch.manual_seed(0)
    dr = DFlashDrafter(cfg).to(dev, dt).eval().bind(m)
    if cuda: dr.set_draft_vocab(torch.arange(16384))                           # (the τ-measured drafters' draft vocabulary size)
    L = P + new + 64
    eng = Engine(m, max_seq_len=L, tap_layers=dr.target_layer_ids)
    res['smollm2'] = bench('smollm2', eng, StaticDrafter(dr, L, compile=cuda), x, new, reps, log)
    res['smollm2']['config'] = dict(target='random weights, SmolLM2-135M sizes (30 layers, hidden 576), bf16 engine (cuBLAS)',
                                    drafter='2 layers, 4 taps, block 16, draft vocabulary 16,384, torch.compiled, CUDA graph', prompt_tokens=P)
    del eng, dr, m
    if cuda and os.environ.get('WITH_4B') == '1':
        from effqwen.model import load_target
        from effqwen.kernels import W4A16Linear, replace_linears
        m, _ = load_target('qwen3.5-4b', device='cuda', dtype=torch.bfloat16)
        cfg = reference_drafter_config(m)
        torch.manual_seed(0)
        dr = DFlashDrafter(cfg).to(dev, dt).eval().bind(m)
        replace_linears(dr, lambda l: W4A16Linear.from_float(l, group_size=128)); dr.set_sliding_window(1024)
        x4 = torch.randint(0, m.config.vocab_size, (1, 64), generator=torch.Generator().manual_seed(0)).to(dev)
        L = 64 + 128 + 64
        eng = Engine(m, max_seq_len=L, tap_layers=dr.target_layer_ids, convert=lambda l: W4A16Linear.from_float(l, group_size=128))
        r = res['qwen3.5-4b'] = bench('qwen3.5-4b', eng, StaticDrafter(dr, L, compile=True), x4, 128, 3, log)
        r['config'] = dict(target='random weights, Qwen3.5-4B sizes, W4A16 g128 engine', drafter='reference 5 layers, W4A16 g128, window 1024, compiled, whole vocabulary (no draft vocabulary)', prompt_tokens=64)
    if not cuda: log('dry run on the CPU: no result written'); return
    from effqwen.core import write_result
    if os.environ.get('OUT'): os.environ['EFFQWEN_OUT'] = os.environ['OUT']
    gpu = torch.cuda.get_device_name().split()[-1].lower()
    res['note'] = ('scripts/round_graph_bench.py: per shape, the engine AR then the pipelined speculative loop op by op and with '
                   'each mode (op by op, the two round kernels, the round graph of the torch ops, the round graph with the kernels), alternating, reps times; event ms = CUDA events around each round after the first (median of '
                   'the reps of each run\'s mean); decode ms per round = the loop\'s decode wall time / its rounds')
    log(write_result(f'round_graph_{gpu}', res, 'gpu', device='cuda'))

if __name__ == '__main__':
    main()
