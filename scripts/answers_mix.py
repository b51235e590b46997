"""What a drafter run's answers are made of: per prompt kind (the bundle's training prompts and the extra file's, by the
kind in their ids), how many BF16- and INT4-target answers there are and what share of the answer text each kind holds.
Stage 1 trains on the BF16 answers and stage 2 on the INT4 ones, so a kind's share is roughly its share of that stage's
training blocks (anchors fall on response tokens; characters stand in for tokens here).

    python scripts/answers_mix.py --tar .devsite/regen_s33/regen_data.tar.xz --bundle-prompts <assembled work>/bundle/prompts.json \
        --extra <EXTRA_PROMPTS, e.g. xz -dc .devsite/extra_grow/send/prompts_extra.json.xz> [--result drafter_answers_mix_s33]
Rows below the bundle's count are the bundle's training prompts, the rest the extra file's (as `gpu_drafter.py` builds the pool).
"""
import argparse, collections, hashlib, json, sys, tarfile
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

def kind(row_id: str) -> str:
    "extra/<kind>/... -> <kind>; a bundle prompt's <kind>/... -> bundle_<kind>."
    p = row_id.split('/')
    return p[1] if p[0] == 'extra' else f'bundle_{p[0]}'

def mix(answers: dict, rows: list) -> dict:
    "{kind: dict(answers, answer_chars, share)} over answers {row index (str): text}, largest share first."
    n, ch = collections.Counter(), collections.Counter()
    for key, text in answers.items():
        i = int(key)
        if not 0 <= i < len(rows): raise ValueError(f'answer row {i} is outside the {len(rows):,}-prompt pool: pass the run\'s --extra file')
        k = kind(rows[i]['id']); n[k] += 1; ch[k] += len(text)
    tot = sum(ch.values()) or 1
    return {k: dict(answers=n[k], answer_chars=c, share=c / tot) for k, c in ch.most_common()}

def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--tar', required=True); ap.add_argument('--bundle-prompts', required=True); ap.add_argument('--extra', required=True)
    ap.add_argument('--result', default=None, help='write data/results/<name>.json (cpu profile stamp)')
    a = ap.parse_args()
    rows = json.loads(Path(a.bundle_prompts).read_text())['train'] + json.loads(Path(a.extra).read_text())['train']
    out = {}
    with tarfile.open(a.tar) as tf:
        for t in ('bf16', 'int4'):
            try: ans = json.load(tf.extractfile(f'regen_{t}.json'))
            except KeyError: continue
            out[t] = mix(ans, rows)
            print(f'{t}: {len(ans):,} answers')
            for k, v in out[t].items(): print(f"  {k:14s} {v['answers']:6d} answers  {v['share']:6.1%} of the answer text")
    if a.result:
        from effqwen.core import write_result
        sha = lambda f: hashlib.sha256(Path(f).read_bytes()).hexdigest()
        print(write_result(a.result, dict(mix=out, inputs=dict(tar=dict(file=Path(a.tar).name, sha256=sha(a.tar)), bundle_prompts=sha(a.bundle_prompts),
                                                              extra=dict(file=Path(a.extra).name, sha256=sha(a.extra)), rows=len(rows)),
                                          note='answer characters per prompt kind (rows < the bundle\'s count: bundle_<kind>; others: the extra file\'s kind)'),
                           'cpu', device='cpu'))

if __name__ == '__main__':
    main()
