"""Build the offline bundle that lets the `gpu`-profile drafter run (`scripts/gpu_drafter.py`) run on a GPU machine
that has no network and none of the data packages: the SmolLM2 GGUF (verified by sha256), the QAD INT4 target's
codes/scales/norms from `21_qad`, and the training / evaluation prompts rendered here from the offline sources.

The bundle is one tar file split into parts of at most `--part-mb` MB (a device call carries at most 64 MiB), each
listed with its sha256 in `manifest.json`.

    python scripts/device_bundle.py --out .devsite/bundle

More training prompts for a bigger drafter run, without re-sending the bundle: `--extra N` writes N prompts of the
same mixed pool (another seed) that the bundle's training prompts do not already hold, to <out>/prompts_extra.json
with its sha256 beside it (`gpu_drafter.py` appends them after the bundle's own when EXTRA_PROMPTS points there).

    python scripts/device_bundle.py --extra 12288 --out .devsite/extra

Prompts whose answers are reasoning in prose steps (`--reason N`): the bundle's reasoning-gym third asks for terse answers
("Only reply with the final value"), so the drafter saw few step-by-step solutions, the kind of text GSM8K answers are
(`scripts/drafter_domain_probe.py`). `--reason N` writes the first `--keep` rows of an earlier extra file (their
regenerated answers stay valid: answers are keyed by index) followed by N reasoning-gym word problems, each with a
step-by-step ask appended. `gsm_symbolic` is left out: its templates come from GSM8K test questions, the eval set.

    python scripts/device_bundle.py --reason 4096 --keep 4096 --extra-from .devsite/extra/prompts_extra.json --out .devsite/extra_reason

A yet bigger run (`--grow N`): every row of an earlier extra file (`--extra-from`, whose answers stay valid), then rows of
the mixed pool file `--pool` that no run used yet (from row `--pool-start`: the rows `--reason` did not keep), then
`--reason` more reasoning-gym word problems (seed + 3), N rows added in all.

    python scripts/device_bundle.py --grow 12288 --reason 4096 --extra-from .devsite/extra_reason/prompts_extra.json \
        --pool .devsite/extra/prompts_extra.json --pool-start 4096 --out .devsite/extra_grow

`--grow-keep K` keeps only the first K rows of `--extra-from` in place (the ones a run answered) and shuffles its
others in among the new rows, so a regeneration cut short answers a mix. Session 32's file (BF16 answers reach extra row
8,191): every row of extra_long, the 28,672 past row 8,191 shuffled with 8,192 new reasoning-gym word problems:

    python scripts/device_bundle.py --grow 8192 --reason 8192 --grow-keep 8192 --extra-from .devsite/extra_long/prompts_extra.json \
        --pool .devsite/extra/prompts_extra.json --pool-start 0 --out .devsite/extra_grow

Long prompts (`--long N`): the drafter trained on short conversations lost τ on the ~3.7K-token long benchmark (A4 /
A6: 1.7 with full attention, 1.9 with a 1024 window, 2.4-2.6 on GSM8K / HumanEval). `--long N` writes the first
`--long-keep` rows of `--extra-from` in place (rows an earlier run answered: answers are keyed by index), then its other
rows with N long-context prompts mixed in at random (seed + 4) among the first `--long-span` of them (0: all), so a
prefix of that span holds its share of them. The
long prompts are the long benchmark's kind (`assets.long_context_prompts`: essays with one wiki paragraph inserted and a
question about it) built from the train split's essays and articles, `--long-tokens` tokens each. Train on them with
DRAFTER_PACK_LEN=4096 DRAFTER_BATCH=4 DRAFTER_ANCHORS=512 DRAFTER_PACK_ALIGNED=1 (gpu_drafter.py: the
tokens and blocks of a 16 × 1024 step), so each answer shares a chunk with its whole prompt.

    python scripts/device_bundle.py --long 4096 --long-span 8192 --extra-from .devsite/extra32k/prompts_extra.json --out .devsite/extra_long
"""
import argparse, collections, hashlib, io, json, tarfile, time
from pathlib import Path
from safetensors.torch import save_file, load_file

def sha(b: bytes) -> str: return hashlib.sha256(b).hexdigest()

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--out', default='.devsite/bundle')
    ap.add_argument('--part-mb', type=float, default=58.0)
    ap.add_argument('--extra', type=int, default=0, help='write this many extra training prompts instead of the bundle')
    ap.add_argument('--reason', type=int, default=0, help='write --keep rows of --extra-from, then this many step-by-step reasoning prompts')
    ap.add_argument('--keep', type=int, default=4096, help='--reason: rows of --extra-from kept first (the ones an earlier run regenerated)')
    ap.add_argument('--extra-from', default='.devsite/extra/prompts_extra.json')
    ap.add_argument('--grow', type=int, default=0, help='write every row of --extra-from, then N new rows: --pool rows, then --reason reasoning prompts')
    ap.add_argument('--pool', default='.devsite/extra/prompts_extra.json', help='--grow: a mixed-pool extra file (--extra) to take unused rows from')
    ap.add_argument('--pool-start', type=int, default=4096, help='--grow: the first --pool row no run used')
    ap.add_argument('--grow-keep', type=int, default=None, help='--grow: keep only this many rows of --extra-from in place; shuffle its others in among the new rows')
    ap.add_argument('--long', type=int, default=0, help='write the rows of --extra-from with this many long-context prompts mixed in')
    ap.add_argument('--long-keep', type=int, default=0, help='--long: rows of --extra-from kept first, in place (answered by an earlier run)')
    ap.add_argument('--long-tokens', type=int, default=3584, help='--long: tokens per long prompt (answer + prompt within a 4096 chunk)')
    ap.add_argument('--long-span', type=int, default=0, help='--long: mix the long prompts into this many rows after the kept ones (0: all)')
    ap.add_argument('--resplit', default='', help='re-cut the bundle in this folder into parts of --part-mb MB under --out (same tar, new manifest)')
    a = ap.parse_args()
    if a.resplit: return resplit(Path(a.resplit), Path(a.out), a.part_mb)
    if a.extra and (a.reason or a.grow or a.long): raise ValueError('--extra and --reason / --grow / --long write different files: pass one of them')
    if a.long: return long_prompts(a.long, a.long_keep, a.long_tokens, Path(a.extra_from), Path(a.out), a.long_span)
    if a.grow: return grow_prompts(a.grow, a.reason, Path(a.extra_from), Path(a.pool), a.pool_start, Path(a.out), a.grow_keep)
    if a.extra: return extra_prompts(a.extra, Path(a.out))
    if a.reason: return reason_prompts(a.reason, a.keep, Path(a.extra_from), Path(a.out))
    from effqwen.core import get_profile
    from effqwen.assets import smollm2_gguf, SMOLLM2
    from effqwen.model import load_tokenizer
    from effqwen.qad import qad_target_dir
    from effqwen.drafter_opt import drafter_size, benchmark_prompts, drafter_train_prompts
    p = get_profile('gpu'); S = drafter_size(p)
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    members = {}
    gg = smollm2_gguf(verify=True)
    members['smollm2.gguf'] = gg.read_bytes()
    # QAD INT4 target (cpu profile run of 21_qad, group 32): everything but the embedding (= the GGUF's)
    qd = qad_target_dir(get_profile('cpu'), 32)
    qd = qd.with_name(qd.name + '-w4a16')                        # the compressed-tensors W4A16 checkpoint 21_qad writes
    sd = load_file(str(qd/'model.safetensors'))
    emb = sd.pop('model.embed_tokens.weight')
    if not any(k.endswith('weight_packed') for k in sd): raise ValueError(f'{qd} holds no packed INT4 weights: rerun 21_qad')
    tmp = out/'qad_int4.safetensors'; save_file({k: v.contiguous() for k, v in sd.items()}, str(tmp))
    members['qad_int4.safetensors'] = tmp.read_bytes(); tmp.unlink()
    members['qad_config.json'] = (qd/'config.json').read_bytes()
    tok = load_tokenizer('smollm2')
    tp = drafter_train_prompts(p)                               # the gpu DrafterSize's prompt pool
    bench = benchmark_prompts(tok, S.eval_prompts, S.eval_long, S.long_tokens, max_positions=8192, reserve=S.eval_new, seed=p.seed)
    from effqwen.assets import gsm8k
    prompts = dict(train=[dict(id=i, prompt=q) for i, q in zip(tp['id'], tp['prompt'])],
                   bench={b: [x[0].tolist() for x in xs] for b, xs in bench.items()},
                   lossless=list(gsm8k(None)['question']),      # all 100 GSM8K questions (the first are also eval prompts): losslessness check
                   embed_sha256=sha(emb.float().numpy().tobytes()), qad_source=str(qd.name))
    members['prompts.json'] = json.dumps(prompts).encode()
    print(json.dumps(write_bundle(members, out, a.part_mb, gguf=SMOLLM2['sha256']), indent=1))

def extra_prompts(n: int, out: Path):
    """n more prompts of the gpu drafter pool's three kinds, none of them among the bundle's training prompts: a third
    reasoning-gym questions drawn with the next seed, a third stdlib functions with the other ask (complete <-> explain)
    than the bundle gave them, a third text windows with (window, ask) pairs the bundle did not use. `drafter_prompts`
    itself cannot give more than ~12.5K (4175 documented stdlib functions), hence the kinds are composed here."""
    import random
    from effqwen.core import get_profile
    from effqwen.drafter_opt import (drafter_train_prompts, DRAFTER_MATH, _stdlib_functions, _text_windows, _math_prompts,
                                     _code_prompt, _text_prompts)
    p = get_profile('gpu'); seed = p.seed + 1
    tag = lambda rows: [dict(r, id=f"extra/{r['id']}") for r in rows]
    math = tag(_math_prompts(-(-2 * n // len(DRAFTER_MATH)), seed))        # plenty: small generators repeat questions
    code = tag(_code_prompt(i, h, w, ask) for i, h, w in _stdlib_functions(random.Random(seed), 10_000) for ask in ('complete', 'explain'))
    text = tag(_text_prompts(_text_windows()))
    seen, picked, k = set(drafter_train_prompts(p)['prompt']), {}, n // 3
    def take(rows, want):                                      # the first `want` prompts not seen yet (in the bundle or here)
        got = []
        for r in rows:
            if len(got) == want: break
            if r['prompt'] not in seen: seen.add(r['prompt']); got.append(r)
        return got
    for kind, rows, want in (('math', math, k), ('code', code, k), ('text', text, n - 2 * k)): picked[kind] = take(rows, want)
    picked['math'] += take(math, n - sum(map(len, picked.values())))   # a short kind is made up by more reasoning-gym questions
    rows = [r for v in picked.values() for r in v]
    random.Random(seed).shuffle(rows)
    if len(rows) < n: raise ValueError(f'only {len(rows)} new prompts ({ {kk: len(v) for kk, v in picked.items()} }): ask for at most that many')
    out.mkdir(parents=True, exist_ok=True)
    b = json.dumps(dict(train=rows, seed=seed, kinds={kk: len(v) for kk, v in picked.items()},
                        excluded='the bundle training prompts (drafter_train_prompts(gpu))')).encode()
    (out/'prompts_extra.json').write_bytes(b); (out/'prompts_extra.sha256').write_text(sha(b) + '\n')
    print(f'{len(rows)} extra prompts -> {out}/prompts_extra.json', {kk: len(v) for kk, v in picked.items()}, sha(b))

REASON_GENS = ('aiw', 'coin_flip', 'jugs', 'leg_counting', 'time_intervals', 'calendar_arithmetic', 'family_relationships',
               'simple_geometry', 'dice', 'knights_knaves', 'syllogism', 'simple_equations', 'basic_arithmetic', 'products',
               'chain_sum', 'decimal_arithmetic', 'fraction_simplification', 'gcd', 'lcm', 'prime_factorization',
               'polynomial_equations', 'number_sequence', 'count_primes', 'power_function')   # word problems and sums; not gsm_symbolic
REASON_ASKS = ('Solve this step by step, then state the final answer.', 'Explain your reasoning step by step before giving the answer.',
               'Work through the problem one step at a time and finish with the answer.')

def _read_extra(src: Path) -> tuple:
    "(bytes, rows) of an extra-prompts file, checked against the .sha256 file written beside it."
    b0 = src.read_bytes(); want = src.with_suffix('.sha256').read_text().split()[0]
    if sha(b0) != want: raise ValueError(f'{src}: sha256 differs from its .sha256 file: rewrite it (device_bundle.py --extra / --reason / --grow)')
    return b0, json.loads(b0)['train']

def _reason_rows(n: int, seed: int, seen: set, tag: str) -> tuple:
    "n reasoning-gym word problems (`REASON_GENS` round-robin, `REASON_ASKS` appended) not in `seen` (which grows); and the generators skipped."
    import reasoning_gym as rg
    per = -(-2 * n // len(REASON_GENS)); gens, skipped = [], {}
    for g in REASON_GENS:
        try: gens.append([(g, i, x['question']) for i, x in enumerate(rg.create_dataset(g, size=per, seed=seed))])
        except Exception as e: skipped[g] = repr(e)[:200]
    rows, k = [], 0
    for g, i, q in (t for grp in zip(*gens) for t in grp):
        if len(rows) == n: break
        pr = q.rstrip() + '\n\n' + REASON_ASKS[k % len(REASON_ASKS)]
        if pr in seen: continue
        seen.add(pr); rows.append(dict(id=f'extra/{tag}/{g}/{i}', prompt=pr)); k += 1
    if len(rows) < n: raise ValueError(f'only {len(rows)} new reasoning prompts for {n}: ask for fewer')
    return rows, skipped

def reason_prompts(n: int, keep: int, src: Path, out: Path):
    """`keep` rows of the extra file `src`, then n reasoning-gym word problems (generators `REASON_GENS`, round-robin, seed
    + 2) with one of `REASON_ASKS` appended, none among the bundle's or the kept prompts."""
    import random
    from effqwen.core import get_profile
    from effqwen.drafter_opt import drafter_train_prompts
    p = get_profile('gpu'); seed = p.seed + 2
    b0, kept = _read_extra(src); kept = kept[:keep]
    if len(kept) < keep: raise ValueError(f'--keep {keep}: {src} holds only {len(kept)} rows')
    seen = set(drafter_train_prompts(p)['prompt']) | {r['prompt'] for r in kept}
    rows, skipped = _reason_rows(n, seed, seen, 'reason')
    random.Random(seed).shuffle(rows)
    kinds = dict(collections.Counter(r['id'].split('/')[2] for r in rows))
    out.mkdir(parents=True, exist_ok=True)
    b = json.dumps(dict(train=kept + rows, seed=seed, kept=dict(file=src.name, sha256=sha(b0), rows=keep), kinds=dict(reason=len(rows)),
                        generators=kinds, skipped=skipped, asks=REASON_ASKS,
                        excluded='the bundle training prompts (drafter_train_prompts(gpu)) and the kept rows; gsm_symbolic (GSM8K test templates)')).encode()
    (out/'prompts_extra.json').write_bytes(b); (out/'prompts_extra.sha256').write_text(sha(b) + '\n')
    print(f'{keep} kept + {len(rows)} reasoning prompts -> {out}/prompts_extra.json', kinds, skipped or '', sha(b))

def grow_prompts(n: int, n_reason: int, src: Path, pool: Path, start: int, out: Path, keep: int|None = None):
    """Every row of the extra file `src` (their answers stay valid: answers are keyed by index), then n new rows: the
    unused rows of the mixed-pool file `pool` from `start` on (n − n_reason of them), then n_reason reasoning-gym word
    problems drawn with seed + 3; none among the bundle's prompts or any row before it. `keep`: only src's first `keep`
    rows stay in place (the ones a run answered); its later rows are shuffled in among the new ones, so a regeneration
    that stops early answers a mix of both (session 32: the rows after extra_long's answered 8,192 are 55% terse
    reasoning-gym asks)."""
    import random
    from effqwen.core import get_profile
    from effqwen.drafter_opt import drafter_train_prompts
    if not 0 <= n_reason <= n: raise ValueError(f'--reason {n_reason} must lie in [0, --grow {n}]')
    p = get_profile('gpu'); seed = p.seed + 3
    b0, kept = _read_extra(src); bp, prow = _read_extra(pool)
    if keep is not None and not 0 <= keep <= len(kept): raise ValueError(f'--grow-keep {keep}: {src} holds {len(kept)} rows')
    seen = set(drafter_train_prompts(p)['prompt']) | {r['prompt'] for r in kept}
    kept, moved = (kept, []) if keep is None else (kept[:keep], kept[keep:])
    new = []
    for r in prow[start:]:
        if len(new) == n - n_reason: break
        if r['prompt'] not in seen: seen.add(r['prompt']); new.append(r)
    if len(new) < n - n_reason: raise ValueError(f'--pool {pool}: only {len(new)} unused rows from {start} on, {n - n_reason} asked: raise --reason')
    reason, skipped = _reason_rows(n_reason, seed, seen, 'reason_grow')
    rows = moved + new + reason; random.Random(seed).shuffle(rows)
    out.mkdir(parents=True, exist_ok=True)
    b = json.dumps(dict(train=kept + rows, seed=seed, kept=dict(file=src.name, sha256=sha(b0), rows=len(kept), moved=len(moved)),
                        pool=dict(file=pool.name, sha256=sha(bp), start=start, rows=len(new)), kinds=dict(pool=len(new), reason=len(reason)),
                        skipped=skipped, asks=REASON_ASKS,
                        excluded='the bundle training prompts (drafter_train_prompts(gpu)) and the kept rows; gsm_symbolic (GSM8K test templates)')).encode()
    (out/'prompts_extra.json').write_bytes(b); (out/'prompts_extra.sha256').write_text(sha(b) + '\n')
    print(f'{len(kept)} kept + {len(moved)} moved + {len(new)} pool + {len(reason)} reasoning prompts -> {out}/prompts_extra.json', skipped or '', sha(b))

def long_prompts(n: int, keep: int, tokens: int, src: Path, out: Path, span: int = 0):
    """The first `keep` rows of the extra file `src` in place, then its other rows with n train-split long-context
    prompts (`long_context_prompts(split='train')`, `tokens` each, seed + 4) mixed in at random among the first `span` of
    them (0: all; a smaller span puts more long prompts into a run that answers only a prefix); none among the bundle's
    prompts or the file's rows."""
    import random
    from effqwen.core import get_profile
    from effqwen.assets import long_context_prompts
    from effqwen.model import load_tokenizer
    from effqwen.drafter_opt import drafter_train_prompts
    if n < 1 or not 0 <= keep: raise ValueError(f'--long {n} must be >= 1 and --long-keep {keep} >= 0')
    p = get_profile('gpu'); seed = p.seed + 4
    b0, rows = _read_extra(src)
    if keep > len(rows): raise ValueError(f'--long-keep {keep}: {src} holds only {len(rows)} rows')
    seen = set(drafter_train_prompts(p)['prompt']) | {r['prompt'] for r in rows}
    lc = long_context_prompts(load_tokenizer('smollm2'), n=n, tokens=tokens, seed=seed, split='train')
    new = [dict(id=f'extra/{i}', prompt=q) for i, q in zip(lc['id'], lc['prompt']) if q not in seen]
    if len(new) < n: raise ValueError(f'only {len(new)} new long prompts for {n}: ask for fewer')
    if span < 0: raise ValueError(f'--long-span {span} must be >= 0')
    span = span or len(rows) - keep
    rest = rows[keep:keep + span] + new; random.Random(seed).shuffle(rest); rest += rows[keep + span:]
    out.mkdir(parents=True, exist_ok=True)
    b = json.dumps(dict(train=rows[:keep] + rest, seed=seed, kept=dict(file=src.name, sha256=sha(b0), rows=keep, of=len(rows)),
                        kinds=dict(extra=len(rows), long=len(new)), long_tokens=tokens, long_span=span,
                        excluded='the bundle training prompts (drafter_train_prompts(gpu)) and the rows of --extra-from; '
                                 'long prompts from train-split essays and articles only (the long benchmark uses the eval split)')).encode()
    (out/'prompts_extra.json').write_bytes(b); (out/'prompts_extra.sha256').write_text(sha(b) + '\n')
    print(f'{keep} kept + {len(rest)} rows ({len(new)} long, {tokens} tokens) -> {out}/prompts_extra.json', sha(b))

def _write_parts(blob: bytes, out: Path, part_mb: float) -> list:
    "`blob` cut into out/p1/part, out/p2/part, ... of at most `part_mb` MB; each part's dir, bytes and sha256."
    step, parts = int(part_mb * 1e6), []
    for i in range(0, len(blob), step):
        d = out/f'p{len(parts) + 1}'; d.mkdir(parents=True, exist_ok=True); b = blob[i:i + step]
        (d/'part').write_bytes(b); parts.append(dict(dir=str(d), bytes=len(b), sha256=sha(b)))
    return parts

def write_bundle(members: dict, out: Path, part_mb: float = 58.0, **extra) -> dict:
    """Tar `members` ({name: bytes}), split the tar into out/p1/part, out/p2/part, ... of at most `part_mb` MB and write
    out/manifest.json (sha256 of the tar, of every member and every part, plus `extra`); returns the manifest."""
    tb = io.BytesIO()
    with tarfile.open(fileobj=tb, mode='w') as tf:
        for name, data in members.items():
            ti = tarfile.TarInfo(name); ti.size = len(data); ti.mtime = int(time.time()); tf.addfile(ti, io.BytesIO(data))
    blob = tb.getvalue()
    man = dict(tar_sha256=sha(blob), members={k: sha(v) for k, v in members.items()}, parts=_write_parts(blob, out, part_mb), **extra)
    (out/'manifest.json').write_text(json.dumps(man, indent=1))
    return man

def resplit(src: Path, out: Path, part_mb: float) -> dict:
    """The bundle in `src` (its parts and manifest) cut again into parts of at most `part_mb` MB under `out`: the same tar
    (checked against the manifest's sha256), each new part listed with its sha256. For when the working tree a device call
    carries beside a part has grown (session 32: 58 MB parts + the 9.1 MB tree passed 64 MiB)."""
    if out.resolve() == src.resolve(): raise ValueError(f'--out {out} is --resplit {src}: write the new parts elsewhere')
    man = json.loads((src/'manifest.json').read_text())
    blob = b''.join((src/f'p{i}'/'part').read_bytes() for i in range(1, len(man['parts']) + 1))
    if sha(blob) != man['tar_sha256']: raise ValueError(f'{src}: the parts do not join into the manifest\'s tar (sha256): rebuild the bundle')
    man = dict(man, parts=_write_parts(blob, out, part_mb)); (out/'manifest.json').write_text(json.dumps(man, indent=1))
    print(f"{len(man['parts'])} parts of at most {part_mb} MB -> {out}")
    return man

if __name__ == '__main__': main()
