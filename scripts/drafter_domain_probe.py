"""Where does the gpu stage-2 drafter lose acceptance? A CPU replay (float32) of greedy speculative decoding
(`drafter_opt.replay_acceptance`, the loop without its timing) on the INT4 target's own greedy continuations of

- the eval prompts (the bundle's GSM8K and HumanEval prompts, the first N of each), and
- prompts of the training distribution that no drafter trained on: the extra prompts past the ones a run used
  (`prompts_extra.json` rows from --unseen-from on), grouped by kind (reasoning-gym, stdlib code, essays, wiki),

beside the target's own confidence on those continuations (mean top-1 probability, share of tokens whose top-1 − top-2
probability margin is under 0.2). If the eval prompts' τ is low where the target is as sure of its tokens as on the
unseen training-like prompts, the drafter has not learned that kind of text: a data gap, not a hard target.

Inputs: the bundle assembled on this machine (`DEV=cpu python scripts/gpu_drafter.py assemble --work W`, parts linked
under W/parts/p*), a trained drafter folder brought back from the GPU (`gpu_session.sh` SOLO packs stage 2 in float32),
and the extra prompts. About 7 minutes on 2 cores at N = 6, 192 new tokens.

    python scripts/drafter_domain_probe.py --work /tmp/bw --drafter .devsite/drafters_s19/drafters_back/stage2
    python scripts/drafter_domain_probe.py render
    python scripts/drafter_domain_probe.py same --drafter ...   # is it the drafter tables A5 / A6 measured? (per-round replay)
    python scripts/drafter_domain_probe.py loop --drafter ... -n 2 --new 96 --result data/results/drafter_replay_engine_check.json
                                                                # is the replay the engine's loop, round for round?
    python scripts/drafter_domain_probe.py vocab --drafter ... --long 2 --result data/results/drafter_vocab_probe.json
                                                                # what does the draft vocabulary cost in τ?
"""
import argparse, collections, hashlib, json, os, sys, time
from pathlib import Path
os.environ.setdefault('DEV', 'cpu')
import torch

def _load(a):
    "(gpu_drafter module, INT4 target in float32, tokenizer, drafter bound to it, bundle prompts, drafter sha256)."
    sys.path.insert(0, str(Path(__file__).parent))
    import gpu_drafter as G
    from effqwen.dflash import load_drafter
    ddir = Path(a.drafter)
    _, int4, tok = G.load_models(Path(a.work), dtype=torch.float32, with_bf16=False)
    d = load_drafter(ddir, int4).float().eval()
    pr = json.loads((Path(a.work)/'bundle'/'prompts.json').read_text())
    return G, int4, tok, d, pr, hashlib.sha256((ddir/'model.safetensors').read_bytes()).hexdigest()

def _sets(a, tok, pr, kinds=None) -> dict:
    "The first -n GSM8K and HumanEval prompts, and the first -n unseen extra prompts of each kind (or of `kinds`)."
    from effqwen.model import chat_prompt
    sets = {b: [torch.tensor(x)[None] for x in pr['bench'][b][:a.n]] for b in ('gsm8k', 'humaneval')}
    by, rows = collections.defaultdict(list), json.loads(Path(a.extra).read_text())['train']
    if a.unseen_tar:                                       # the extra rows neither target answered in that run (pool row = bundle's count + i)
        seen, nb = _answered(a.unseen_tar), len(pr['train'])
        rows = [r for i, r in enumerate(rows) if str(nb + i) not in seen]
    else: rows = rows[a.unseen_from:]
    for r in rows: by[r['id'].split('/')[1]].append(r)   # extra/<kind>/...
    kinds = kinds if kinds is not None else (a.kinds.split(',') if a.kinds else None)
    for k in sorted(by if kinds is None else kinds):
        sets[f'unseen {k}'] = [tok(chat_prompt(tok, r['prompt']), return_tensors='pt', add_special_tokens=False).input_ids for r in by[k][:a.n]]
    return sets

def _answered(tar: str) -> set:
    "The pool rows (str) a run's answers tar holds an answer to, for either target."
    import tarfile
    with tarfile.open(tar) as tf:
        return set().union(*(json.load(tf.extractfile(m)).keys() for m in tf.getnames() if m in ('regen_bf16.json', 'regen_int4.json')))

def _continuation(int4, d, tok, x, new):
    "The target's greedy continuation of prompt x (prompt + new tokens), its features at the drafter's taps, and its top-2 probabilities there."
    from effqwen.dflash import extract_context_feature
    from effqwen.model import greedy_generate
    full = torch.cat([x, greedy_generate(int4, x, new, tok.eos_token_id)], 1)
    with torch.no_grad():
        o = int4(full, output_hidden_states=True)
        f = extract_context_feature(o.hidden_states, list(d.target_layer_ids))
        top = o.logits[0, x.shape[1] - 1:-1].float().softmax(-1).topk(2, -1).values   # at each generated token
    return full, f, top

def _replay(int4, d, tok, x, new, whole_block=True):
    "Acceptance lengths of drafter d replayed on the target's greedy continuation of prompt x, and the target's top-2 probabilities there."
    from effqwen.drafter_opt import replay_acceptance
    full, f, top = _continuation(int4, d, tok, x, new)
    return replay_acceptance(d, full, f, x.shape[1], stop_token_ids=[tok.eos_token_id], whole_block=whole_block), top

def verify_widths(a):
    """τ when the engine verifies fewer rows than the drafter's block: GSM8K and HumanEval replayed at each of --widths
    (the drafter drafts its whole block and the first width − 1 drafts are verified, `replay_acceptance(whole_block=True)`,
    as `Engine(block_size=width)` with the `StaticDrafter` runs it), from one target forward per prompt."""
    from effqwen.core import write_result, get_profile
    from effqwen.drafter_opt import replay_acceptance
    G, int4, tok, d, pr, sha = _load(a)
    ws, rows = [int(w) for w in a.widths.split(',')], []
    for name, xs in _sets(a, tok, pr, kinds=()).items():                 # the eval sets only
        L, t = {w: [] for w in ws}, time.time()
        for x in xs:
            full, f, _ = _continuation(int4, d, tok, x, a.new)
            for w in ws: L[w] += replay_acceptance(d, full, f, x.shape[1], block_size=w, stop_token_ids=[tok.eos_token_id], whole_block=True)
        rows.append(dict(set=name, prompts=len(xs), tokens=sum(L[ws[0]]), s=time.time() - t,
                         **{f'tau_{w}': sum(L[w]) / len(L[w]) for w in ws}, **{f'rounds_{w}': len(L[w]) for w in ws}))
        print(rows[-1], flush=True)
    doc = dict(rows=rows, widths=ws, drafter=dict(path=a.drafter, sha256=sha), new_tokens=a.new, precision='float32 (target and drafter)',
               command=' '.join(sys.argv))
    print(write_result(Path(a.result).stem, doc, get_profile('gpu'), device='cpu'))

def loop_check(a):
    """Is the replay the engine's loop? On the first -n GSM8K and HumanEval prompts (float32, the INT4 target's greedy
    continuation), the acceptance lengths of every round of the engine's speculative decoding (`Engine` +
    `StaticDrafter`, fused and plain step, the default pipelined loop) against `replay_acceptance` drafting a shorter
    last block (`whole_block=False`: the reference loop until session 23) and drafting the whole block on every round (`whole_block=True`)."""
    from effqwen.core import write_result, get_profile
    from effqwen.drafter_opt import replay_acceptance
    from effqwen.engine import Engine, StaticDrafter, speculative_generate as eng_spec
    G, int4, tok, d, pr, sha = _load(a)
    stops, rows = [tok.eos_token_id], []
    for name, xs in _sets(a, tok, pr, kinds=()).items():
        for i, x in enumerate(xs):
            eng = Engine(int4, max_seq_len=x.shape[1] + a.new + 64, tap_layers=tuple(d.target_layer_ids))
            full, f = G.continuation(eng, int4, x, a.new, stops, d.target_layer_ids)
            rep = {wb: replay_acceptance(d, full, f, x.shape[1], stop_token_ids=stops, whole_block=wb) for wb in (False, True)}
            r = dict(set=name, prompt=i, rounds_replay=len(rep[False]), rounds_replay_whole_block=len(rep[True]))
            for fz in (True, False):
                L = eng_spec(eng, StaticDrafter(d, eng.max_seq_len, fused=fz), x, a.new, stops).acceptance_lengths
                k = 'fused' if fz else 'plain'
                r[f'{k}_rounds'], r[f'{k}_equals_replay'], r[f'{k}_equals_replay_whole_block'] = len(L), L == rep[False], L == rep[True]
                r[f'{k}_first_different_round'] = next((j for j, (u, v) in enumerate(zip(L, rep[False])) if u != v), None)
            rows.append(r); print(r, flush=True)
    doc = dict(rows=rows, drafter=dict(path=a.drafter, sha256=sha), new_tokens=a.new, precision='float32 (target and drafter), CPU',
               command=' '.join(sys.argv))
    print(write_result(Path(a.result).stem, doc, get_profile('gpu'), device='cpu'))

def vocab_probe(a):
    """What does the drafter's draft vocabulary (FR-Spec: the head cut to the most frequent training tokens) cost in τ?
    On the first -n GSM8K and HumanEval prompts and the first --long long prompts: the share of the target's greedy
    tokens outside the draft vocabulary (a round can never accept one), and τ replayed (`whole_block=True`, the
    engine's loop) with the draft vocabulary and with the full one (the same weights: the head is the target's, frozen;
    the drafter's hidden state was trained against the draft rows only)."""
    import copy
    from effqwen.core import write_result, get_profile
    from effqwen.drafter_opt import replay_acceptance
    G, int4, tok, d, pr, sha = _load(a)
    if getattr(d, 'd2t', None) is None: raise ValueError(f'{a.drafter}: the drafter has no draft vocabulary (d2t): nothing to compare')
    vocab = set(d.d2t.tolist()); full_d = copy.deepcopy(d).set_draft_vocab(None); stops = [tok.eos_token_id]
    sets = _sets(a, tok, pr, kinds=())
    if a.long: sets['long'] = [torch.tensor(x)[None] for x in pr['bench']['long'][:a.long]]
    rows = []
    for name, xs in sets.items():
        L, Lf, oov, n, words, t = [], [], 0, 0, collections.Counter(), time.time()
        for x in xs:
            full, f, _ = _continuation(int4, d, tok, x, a.new)
            y = full[0, x.shape[1]:].tolist(); n += len(y)
            miss = [v for v in y if v not in vocab]; oov += len(miss); words.update(tok.decode([v]) for v in miss)
            L += replay_acceptance(d, full, f, x.shape[1], stop_token_ids=stops, whole_block=True)
            Lf += replay_acceptance(full_d, full, f, x.shape[1], stop_token_ids=stops, whole_block=True)
        rows.append(dict(set=name, prompts=len(xs), tokens=n, oov=oov / n, tau_draft_vocab=sum(L) / len(L), tau_full_vocab=sum(Lf) / len(Lf),
                         rounds_draft_vocab=len(L), rounds_full_vocab=len(Lf), oov_top=words.most_common(8), s=time.time() - t))
        print(rows[-1], flush=True)
    doc = dict(rows=rows, drafter=dict(path=a.drafter, sha256=sha, draft_vocab=len(vocab), vocab=d.cfg.vocab_size), new_tokens=a.new,
               precision='float32 (target and drafter), CPU', command=' '.join(sys.argv))
    print(write_result(Path(a.result).stem, doc, get_profile('gpu'), device='cpu'))

def replay_set(int4, d, tok, name, xs, new):
    "τ of drafter d replayed on the target's greedy continuations of prompts xs, and the target's confidence on them."
    L, P1, M, t = [], [], [], time.time()
    for x in xs:
        lens, top = _replay(int4, d, tok, x, new)
        L += lens; P1 += top[:, 0].tolist(); M += (top[:, 0] - top[:, 1]).tolist()
    h = collections.Counter(L)
    r = dict(set=name, prompts=len(xs), tau=sum(L) / len(L), rounds=len(L), tokens=sum(L),
             target_top1_p=sum(P1) / len(P1), target_margin_lt_0_2=sum(m < 0.2 for m in M) / len(M),
             hist={k: h[k] for k in sorted(h)}, s=time.time() - t)
    print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}, flush=True)
    return r

def finetune(a):
    """Does step-by-step reasoning text close the gap? Fine-tune the drafter briefly on the INT4 target's own answers
    to --ft-prompts of the reasoning prompts (`device_bundle.py --reason`, rows past the kept ones), here on the CPU
    (float32), then replay GSM8K, HumanEval and unseen code / reasoning-gym prompts again (their τ before: `probe`)."""
    from effqwen.core import write_result, get_profile, set_determinism
    from effqwen.dflash import train_drafter
    from effqwen.drafter_opt import drafter_size, pack_features
    from effqwen.model import chat_prompt
    from effqwen.regen import generate_texts, pack
    G, int4, tok, d, pr, sha = _load(a)
    rows = [r for r in json.loads(Path(a.reason).read_text())['train'] if '/reason/' in r['id']]
    train_p, t0 = [chat_prompt(tok, r['prompt']) for r in rows[:a.ft_prompts]], time.time()
    cache = Path(a.answers_cache) if a.answers_cache else None          # the answers, kept for a rerun with other settings
    got = json.loads(cache.read_text()) if cache and cache.exists() else {}
    if [got.get(q) for q in train_p].count(None):
        resp = generate_texts(int4, tok, train_p, a.new, 0.0, batch_size=16, desc='answers'); got = dict(zip(train_p, resp))
        if cache: cache.write_text(json.dumps(got))
    resp, t_regen = [got[q] for q in train_p], time.time() - t0
    texts = [q + r + tok.eos_token for q, r in zip(train_p, resp)]
    if a.mix:                                                          # INT4 answers to the bundle's own prompts (stage 2's data)
        pb = G.load_prompts(Path(a.work)); old = G.load_answers(Path(a.work), 'int4', pb)
        idx = sorted(int(i) for i in old)[:a.mix]
        mp = [chat_prompt(tok, pb['train'][i]['prompt']) for i in idx]
        train_p, texts = train_p + mp, texts + [q + old[str(i)] + tok.eos_token for q, i in zip(mp, idx)]
    pk = pack(dict(prompt=train_p, text=texts), tok, 512)
    lm = pk['response_mask'].bool() & pk['attention_mask'].bool()
    feats = pack_features(int4, pk['input_ids'], list(d.target_layer_ids), progress=False)
    S = drafter_size(get_profile('gpu')); set_determinism(0)
    lr = a.ft_lr or S.lr2
    h = train_drafter(d, None, pk['input_ids'], lm, steps=a.ft_steps, batch_size=4, lr=lr, n_anchors=32, features=feats, seed=0)
    d.eval()
    after = [replay_set(int4, d, tok, name, xs, a.new) for name, xs in _sets(a, tok, pr, kinds=('code', 'rg')).items()]
    before = json.loads(Path('data/results/drafter_domain_probe.json').read_text())
    doc = dict(rows=after, before={r['set']: r['tau'] for r in before['rows']}, finetune=dict(
                   conversations=len(train_p), chunks=len(pk['input_ids']), response_tokens=int(lm.sum()), steps=a.ft_steps, batch=4,
                   anchors=32, chunk=512, lr=lr, mixed_bundle_int4_answers=a.mix, answers_s=t_regen, train_s=h.seconds, loss_first_last=[h.losses[0], sum(h.losses[-10:]) / 10],
                   prompts=f"{Path(a.reason).name} rows with '/reason/' ids, the first {len(train_p)}"),
               drafter=dict(path=a.drafter, sha256=sha), new_tokens=a.new, precision='float32 (target and drafter)', command=' '.join(sys.argv))
    print(write_result(a.ft_result, doc, get_profile('gpu'), device='cpu'))

def probe(a):
    from effqwen.core import write_result, get_profile
    G, int4, tok, d, pr, sha = _load(a)
    rows = [replay_set(int4, d, tok, name, xs, a.new) for name, xs in _sets(a, tok, pr).items()]
    tr = json.loads(Path('data/results/drafter_training_gpu.json').read_text())['provenance']
    by = a.trained_by or f"drafter_training_gpu.json at git {tr['git_sha']} ({tr['date'][:10]})"   # (the committed A4 run's, unless named)
    doc = dict(rows=rows, drafter=dict(path=a.drafter, sha256=sha, trained_by=by, stage=a.which),
               **(dict(unseen_tar=dict(file=a.unseen_tar, sha256=hashlib.sha256(Path(a.unseen_tar).read_bytes()).hexdigest())) if a.unseen_tar else {}),
               new_tokens=a.new, unseen_from=a.unseen_from, extra=dict(file=Path(a.extra).name, sha256=hashlib.sha256(Path(a.extra).read_bytes()).hexdigest()),
               precision='float32 (target and drafter)', command=' '.join(sys.argv))
    print(write_result(Path(a.result).stem, doc, get_profile('gpu'), device='cpu'))

def same_drafter(a):
    """Is this drafter the one `drafter_opt_gpu.json` (tables A5 / A6) measured? Replay it on the first --check prompts of
    GSM8K the way A5 did (the INT4 target's float32 greedy continuation, 256 new tokens) and compare the acceptance
    length of every round with the unquantized row's recorded ones (`a5_lengths`)."""
    from effqwen.core import write_result, get_profile
    G, int4, tok, d, pr, sha = _load(a)
    opt = json.loads(Path('data/results/drafter_opt_gpu.json').read_text())
    ref, L = opt['a5_lengths']['unquantized']['gsm8k'], []
    wb = opt.get('replay_whole_block', False)                      # replayed as that run replayed (before session 23: a shorter last block)
    for x in pr['bench']['gsm8k'][:a.check]: L += _replay(int4, d, tok, torch.tensor(x)[None], opt['eval']['new_tokens'], wb)[0]
    diff = next((i for i, (u, v) in enumerate(zip(L, ref)) if u != v), None)
    doc = dict(prompts=a.check, rounds=len(L), equal=L == ref[:len(L)], first_different_round=diff, drafter=dict(path=a.drafter, sha256=sha),
               against=f"drafter_opt_gpu.json a5_lengths.unquantized.gsm8k (git {opt['provenance']['git_sha'][:12]})", command=' '.join(sys.argv),
               # the A4 run committed beside: render-opt credits the check to that run only (a later A4 run trains another drafter)
               a4_run={k: json.loads(Path('data/results/drafter_training_gpu.json').read_text())['provenance'][k] for k in ('git_sha', 'date')})
    print(doc)
    print(write_result('drafter_same_check', doc, get_profile('gpu'), device='cpu'))

def _compare(rows) -> str:
    "The eval sets beside the unseen sets the target is less sure of that still reach a higher τ (a data gap, if any)."
    ev = [r for r in rows if not r['set'].startswith('unseen')]
    hi = [r for r in rows if r['set'].startswith('unseen') and r['target_top1_p'] <= min(e['target_top1_p'] for e in ev)
          and r['tau'] > max(e['tau'] for e in ev)]
    if not hi: return ''
    f = lambda rs: ', '.join(f"{r['set']} {r['tau']:.2f} (p {r['target_top1_p']:.3f})" for r in rs)
    return (f"Eval prompts: τ {f(ev)}. On {', '.join(r['set'] for r in hi)} the target is less sure of its own tokens, yet τ is "
            f"higher: {f(hi)}. So the eval prompts' lower τ is not the target's uncertainty: the drafter has not learned their kind of text.")

def render(path: Path):
    from effqwen.core import render_table, write_table, provenance_line
    doc = json.loads(path.read_text())
    if 'widths' in doc:                                                # a `verify` result
        ws = doc['widths']
        cols = [('set', 'prompts', '{}'), ('prompts', 'n', '{}')] + [(f'tau_{w}', f'τ, verify {w}', '{:.2f}') for w in ws] + [
            (f'rounds_{w}', f'rounds, verify {w}', '{}') for w in ws]
        md = (f"### τ when the engine verifies fewer rows than the drafter's block (SmolLM2 INT4 target, CPU replay)\n\n"
              + render_table(doc['rows'], cols) + '\n'
              + f"Greedy speculative decoding replayed (`replay_acceptance(whole_block=True)`, float32 target and drafter) on the target's own "
              f"greedy continuation ({doc['new_tokens']} new tokens) of each prompt: the drafter drafts its whole block of "
              "16 and the first (verify − 1) drafts are checked, as an `Engine(block_size=verify)` with the `StaticDrafter` runs it "
              f"(16_engine checks the replay against that engine). Drafter sha256 {doc['drafter']['sha256'][:12]} (`{doc['drafter']['path']}`). "
              "A round at verify 8 keeps at most 8 tokens; whether it pays depends on the verify step's cost at 8 rows, measured on the GPU.\n\n"
              + provenance_line(doc) + '\n')
        print(write_table(path.stem, md, doc['provenance']['profile'])); print(md); return
    cols = [('set', 'prompts', '{}'), ('prompts', 'n', '{}'), ('tau', 'τ (replay)', '{:.2f}'), ('rounds', 'rounds', '{}'),
            ('target_top1_p', 'target top-1 p', '{:.3f}'), ('target_margin_lt_0_2', 'target margin < 0.2', '{:.3f}')]
    unseen = (f"'unseen' = `{doc['extra']['file']}` prompts that neither target answered in `{doc['unseen_tar']['file']}` (sha256 "
              f"{doc['unseen_tar']['sha256'][:12]}; no stage of that run trained on them), by kind. " if doc.get('unseen_tar') else
              f"'unseen' = `{doc['extra']['file']}` prompts from row {doc['unseen_from']} on (no drafter trained on them), by kind. ")
    stage = doc['drafter'].get('stage', 'stage-2')
    md = (f"### Where the gpu {stage} drafter loses acceptance: eval prompts vs unseen training-like prompts (SmolLM2 INT4 target)\n\n"
          + render_table(doc['rows'], cols) + '\n'
          + f"τ: greedy speculative decoding replayed (`replay_acceptance`, float32 target and drafter, CPU) on the target's own greedy continuation "
          f"({doc['new_tokens']} new tokens) of each prompt; drafter {doc['drafter']['trained_by']}, sha256 {doc['drafter']['sha256'][:12]}. "
          + unseen
          + "target top-1 p: the target's mean probability of its own greedy token; margin: share of generated tokens whose top-1 − top-2 "
          "probability gap is under 0.2. " + _compare(doc['rows']) + '\n\n' + provenance_line(doc) + '\n')
    print(write_table(path.stem, md, doc['provenance']['profile'])); print(md)   # the table is named after its result

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('stage', nargs='?', default='probe', choices=['probe', 'render', 'same', 'finetune', 'verify', 'loop', 'vocab'])
    ap.add_argument('--widths', default='16,8', help='verify: rows verified per round, replayed for each')
    ap.add_argument('--reason', default='.devsite/extra_reason/prompts_extra.json', help='finetune: the reasoning prompts (device_bundle.py --reason)')
    ap.add_argument('--ft-prompts', type=int, default=96, help='finetune: reasoning prompts answered and trained on')
    ap.add_argument('--ft-steps', type=int, default=120, help='finetune: optimizer steps')
    ap.add_argument('--ft-lr', type=float, default=None, help='finetune: lr (default: the gpu DrafterSize lr2)')
    ap.add_argument('--mix', type=int, default=0, help='finetune: also this many INT4 answers to the bundle prompts (stage 2 data)')
    ap.add_argument('--answers-cache', default='', help='finetune: json of the reasoning answers (written once, read after)')
    ap.add_argument('--ft-result', default='drafter_reason_finetune_probe', help='finetune: result name')
    ap.add_argument('--check', type=int, default=4, help='same: GSM8K prompts replayed')
    ap.add_argument('--long', type=int, default=0, help='vocab: long prompts too (the first N)')
    ap.add_argument('--work', default='/tmp/bw')
    ap.add_argument('--drafter', default='.devsite/drafters_s19/drafters_back/stage2')
    ap.add_argument('--trained-by', default='', help='probe: the run that trained --drafter (default: the committed A4 run, drafter_training_gpu.json)')
    ap.add_argument('--extra', default='.devsite/extra/prompts_extra.json')
    ap.add_argument('--unseen-from', type=int, default=8192, help='first extra row no run trained on (session 19 used rows 0..4095)')
    ap.add_argument('--unseen-tar', default='', help='probe: unseen = the extra rows neither target answered in this answers tar (a run that answered a shuffled pool)')
    ap.add_argument('--kinds', default='', help='probe: only these unseen kinds (comma-separated; default: every kind)')
    ap.add_argument('--which', default='stage-2', help='probe: which stage --drafter is (the table\'s title)')
    ap.add_argument('-n', type=int, default=6, help='prompts per set')
    ap.add_argument('--new', type=int, default=192, help='new tokens per prompt')
    ap.add_argument('--result', default='data/results/drafter_domain_probe.json', help='probe: writes data/results/<its name>; render: reads it (the table takes its name)')
    a = ap.parse_args()
    torch.set_num_threads(int(os.environ.get('OMP_NUM_THREADS', 2)))
    {'probe': probe, 'same': same_drafter, 'finetune': finetune, 'verify': verify_widths, 'loop': loop_check, 'vocab': vocab_probe}.get(a.stage, lambda a: render(Path(a.result)))(a)

if __name__ == '__main__': main()
