"""Which training prompts copy an eval prompt (`effqwen.assets.eval_contaminated`: a share of its word n-grams)?

    python scripts/prompt_contamination.py [--prompts FILE ...]   # -> data/results/prompt_contamination.json

Scans 3,000 raw reasoning-gym `gsm_symbolic` questions (the generator rebuilds GSM8K problems as templates) for each
GSM8K eval item's best overlap, which shows where the threshold falls, and checks each prompts file given (a GPU
bundle's `prompts.json` or an extra file: `{"train": [{"prompt": ...}, ...]}`) row by row, with the eval items the
drafter evaluations use (the first n of the 100) beside the ones copied. Runs on the CPU in about a minute.
"""
import argparse, collections, hashlib, json, os, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

def main():
    ap = argparse.ArgumentParser(); ap.add_argument('--prompts', nargs='*', default=[]); ap.add_argument('--raw', type=int, default=3000)
    a = ap.parse_args()
    import reasoning_gym as rg
    from effqwen.assets import (gsm8k, word_ngrams, eval_overlap, CONTAMINATION_N, CONTAMINATION_SHARE)
    from effqwen.core import write_result
    ev = list(gsm8k()); pos = {r['id']: i for i, r in enumerate(ev)}
    raw = [x['question'] for x in rg.create_dataset('gsm_symbolic', size=a.raw, seed=0)]
    G = [word_ngrams(q) for q in raw]
    best = []
    for r in ev:                                   # each eval item's best overlap with any raw question
        E = word_ngrams(r['question']); best.append(max(len(g & E) / max(1, len(E)) for g in G))
    order = sorted(range(len(ev)), key=lambda i: -best[i])
    res = dict(n=CONTAMINATION_N, share=CONTAMINATION_SHARE,
               gsm_symbolic_raw=dict(questions=a.raw, seed=0, copies=sum(eval_overlap(q)[0] >= CONTAMINATION_SHARE for q in raw),
                                     eval_items_best_overlap=[dict(id=ev[i]['id'], index=i, overlap=best[i]) for i in order[:10]]),
               files={})
    for f in a.prompts:
        b = Path(f).read_bytes(); rows = json.loads(b)['train']
        hits = [(i, r.get('id'), *eval_overlap(r['prompt'])) for i, r in enumerate(rows)]
        bad = [h for h in hits if h[2] >= CONTAMINATION_SHARE]
        res['files'][Path(f).name] = dict(sha256=hashlib.sha256(b).hexdigest(), rows=len(rows), copies=len(bad),
                                          copies_rows=[dict(row=i, id=k, overlap=s, eval_id=e, eval_index=pos.get(e)) for i, k, s, e in bad],
                                          eval_items_copied=sorted({pos[e] for *_, e in bad if e in pos}))
        print(Path(f).name, len(rows), 'rows,', len(bad), 'copies of eval items', res['files'][Path(f).name]['eval_items_copied'])
    print('raw gsm_symbolic:', res['gsm_symbolic_raw']['copies'], 'of', a.raw, 'copy an eval item; best overlaps',
          [(x['index'], round(x['overlap'], 2)) for x in res['gsm_symbolic_raw']['eval_items_best_overlap'][:7]])
    print(write_result('prompt_contamination', res, 'cpu'))

if __name__ == '__main__': main()
