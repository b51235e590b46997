"""Issue 4's losslessness gate for a hybrid target: greedy speculative decoding on a tiny random Qwen3.5 (Gated-DeltaNet
and full-attention layers) gives the target's own greedy output on >= 100 prompts, with proposers that make the loop
roll back at every offset of the block, so every rejection restores the Gated-DeltaNet recurrent and conv states of
each linear-attention layer. Both rollback modes of `effqwen.specdec.rollback` run: 'mixers' (restore the per-layer
states) and 'forward' (snapshot + re-run the accepted tokens). CPU, float32; a few minutes on 2 cores.

    OMP_NUM_THREADS=1 python scripts/lossless_hybrid.py [--prompts 128] [--new 48]   # -> data/results/lossless_hybrid_tiny.json
"""
import argparse, collections, time
import torch
from effqwen.core import write_result, set_determinism
from effqwen.model import tiny_qwen35, greedy_generate
from effqwen.dflash import DFlashConfig, DFlashDrafter
from effqwen.specdec import speculative_generate, Oracle


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--prompts', type=int, default=128); ap.add_argument('--new', type=int, default=48)
    ap.add_argument('--block', type=int, default=16); ap.add_argument('--name', default='lossless_hybrid_tiny')
    a = ap.parse_args()
    if a.prompts < 1 or a.new < 1: raise ValueError(f'--prompts {a.prompts} --new {a.new}: both must be >= 1')
    set_determinism(0)
    tq = tiny_qwen35(0, initializer_range=0.2)
    V = tq.config.vocab_size
    dr = DFlashDrafter(DFlashConfig.for_target(tq, mask_token_id=V - 1, block_size=a.block)).bind(tq)
    g = torch.Generator().manual_seed(0)
    stats = collections.defaultdict(lambda: dict(prompts=0, equal=0, rounds=0, partial=0, hist=collections.Counter()))
    t0 = time.time()
    for i in range(a.prompts):
        L = int(torch.randint(1, 65, (1,), generator=g))
        pr = torch.randint(0, V - 1, (1, L), generator=g)
        ref = greedy_generate(tq, pr, a.new); full = torch.cat([pr, ref], 1)
        props = {'untrained DFlash': dr, 'reference, p_wrong 0.2': Oracle(full, a.block, 0.2, i, V),
                 'reference, p_wrong 0.5': Oracle(full, a.block, 0.5, i, V)}
        for name, p in props.items():
            for mode in ('mixers', 'forward'):
                r = speculative_generate(tq, p, pr, a.new, block_size=a.block, rollback_mode=mode)
                s = stats[f'{name} / {mode}']
                s['prompts'] += 1; s['equal'] += int(torch.equal(r.new_tokens, ref)); s['rounds'] += len(r.acceptance_lengths)
                s['partial'] += sum(1 for x in r.acceptance_lengths if x < a.block)
                s['hist'].update(r.acceptance_lengths)
        if (i + 1) % 16 == 0: print(f'{i + 1}/{a.prompts} prompts, {time.time() - t0:.0f} s', flush=True)
    rows = {k: dict(v, hist={str(n): c for n, c in sorted(v['hist'].items())}, tau=sum(n * c for n, c in v['hist'].items()) / max(1, v['rounds']))
            for k, v in stats.items()}
    for k, v in rows.items(): print(f"{k:36s} equal {v['equal']}/{v['prompts']}, rounds {v['rounds']}, rolled back {v['partial']}, tau {v['tau']:.2f}")
    doc = dict(target=dict(name='tiny-qwen3.5', layer_types=list(tq.config.layer_types), vocab=V, dtype='float32', weights='random, seed 0, initializer_range 0.2'),
               prompts=a.prompts, prompt_tokens='uniform 1..64', new_tokens=a.new, block_size=a.block, rows=rows,
               all_equal=all(v['equal'] == v['prompts'] for v in rows.values()), seconds=round(time.time() - t0, 1),
               note="equal: prompts whose speculative greedy output is token-identical to greedy_generate's; rolled back: rounds "
                    "that kept fewer than the block's tokens, so the target's Gated-DeltaNet and attention state was rolled back "
                    "(acceptance lengths count the committed tokens, the bonus token included)")
    print(write_result(a.name, doc, 'cpu'))
    if not doc['all_equal']: raise SystemExit('NOT lossless: see the rows above')


if __name__ == '__main__':
    main()
