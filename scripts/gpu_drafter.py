"""The `gpu`-profile drafter experiment on one GPU: table A4 at gpu scale and the true end-to-end speculative speedup
on SmolLM2 (issue 8's second A2 table), in three stages that keep their state under `--work` between device calls.

The GPU machine has no network and none of the offline data packages, so `scripts/device_bundle.py` renders the
inputs here (GGUF, the QAD INT4 target's codes/scales/norms, prompts) into a tar split in parts that each fit one
device call; this script checks every part and member against the bundle manifest (sha256) before using it.

    python scripts/gpu_drafter.py assemble --work /tmp/xfer   # after the parts are in /tmp/xfer/parts/p*/part
    python scripts/gpu_drafter.py regen    --work /tmp/xfer   # BF16 and INT4 answers to the training prompts (resumable)
    python scripts/gpu_drafter.py keys     --work /tmp/xfer   # prompt keys for answers saved without them (see load_answers)
    python scripts/gpu_drafter.py train    --work /tmp/xfer   # features, three drafters (regenerates what `regen` did not)
    python scripts/gpu_drafter.py eval     --work /tmp/xfer   # tau + speed on the engine, losslessness; JSON -> $OUT
    python scripts/gpu_drafter.py opt      --work /tmp/xfer   # A5 / A6 on the stage-2 drafter (PTQ, SWA); JSON -> $OUT
    python scripts/gpu_drafter.py e2e      --work /tmp/xfer --drafter-dir DIR   # fused vs plain drafter step, end to end
    python scripts/gpu_drafter.py render-e2e                                     # its table (render: A4 and A2-true; render-opt: A5 / A6)
    python scripts/gpu_drafter.py capacity --capacity-train T2 T5 --e2e E2 E5 --note ...   # the CAPACITY=1 chain's files -> one result; render-capacity

Everything is the library's code (effqwen.regen / dflash / drafter_opt / engine); the script only wires it to the
bundle and to a time budget (the device allows 10 minutes per command): training steps are the profile's, capped by
`--train-budget` seconds measured on the first steps, and the steps actually run are recorded.
"""
import argparse, copy, hashlib, io, json, os, tarfile, time
from pathlib import Path
import torch

DEV = os.environ.get('DEV', 'cuda')          # DEV=cpu TINY=1: a dry run of every stage on a CPU with tiny sizes
TINY = bool(os.environ.get('TINY'))
HELD = os.environ.get('DRAFTER_HELD', 'random')   # which 5% of each regeneration's chunks train holds out: random | tail
if HELD not in ('random', 'tail'): raise ValueError(f'DRAFTER_HELD={HELD!r}: use random (default) or tail')

def sha(b: bytes) -> str: return hashlib.sha256(b).hexdigest()

def first_diff(a: torch.Tensor, b: torch.Tensor) -> int:
    "Index of the first differing token of two 1-D token tensors (their common length if one is a prefix of the other)."
    n = min(len(a), len(b)); d = (a[:n].cpu() != b[:n].cpu()).nonzero()
    return int(d[0]) if len(d) else n

OVERRIDES = ('regen_prompts', 'int4_prompts', 'steps1', 'steps2', 'pack_len', 'pack_aligned', 'batch', 'anchors', 'draft_vocab')   # env DRAFTER_<NAME>: a bigger run than the gpu DrafterSize (recorded in `sizes`)
# (pack_len: the training chunk length; the drafter trained on 1024-token chunks lost tau on the ~3.7K-token long prompts with full
#  attention where a 256-token window kept it, table drafter_a6_gpu: DRAFTER_PACK_LEN=4096 DRAFTER_BATCH=4 keeps the tokens per step;
#  pack_aligned=1: no conversation straddles two chunks, a longer one keeps its last pack_len tokens (for long prompts: EXTRA_PROMPTS
#  from device_bundle.py --long);
#  draft_vocab: the drafter's head rows, FR-Spec's frequency-ranked draft vocabulary: 16,384 leaves 1.5-1.8% of the target's GSM8K /
#  HumanEval tokens outside it, data/results/drafter_vocab_probe.json; a stage-2 refit with another size re-picks it from the INT4 data)

def sizes():
    from dataclasses import replace
    from effqwen.core import get_profile
    from effqwen.drafter_opt import drafter_size
    p = get_profile('gpu'); S = drafter_size('ci' if TINY else p)
    ov = {k: int(v) for k in OVERRIDES if (v := os.environ.get(f'DRAFTER_{k.upper()}'))}
    return p, replace(S, **ov)

def load_prompts(work: Path) -> dict:
    """The bundle's prompts; with env EXTRA_PROMPTS (device_bundle.py --extra: json + .sha256 beside it, checked) its
    training prompts are appended after the bundle's own, so answers already regenerated keep their indices."""
    pr = json.loads((work/'bundle'/'prompts.json').read_text())
    if x := os.environ.get('EXTRA_PROMPTS'):
        b = Path(x).read_bytes(); want = Path(x).with_suffix('.sha256').read_text().split()[0]
        if sha(b) != want: raise ValueError(f'EXTRA_PROMPTS {x}: sha256 mismatch with its .sha256 file: re-send it')
        have = {r['prompt'] for r in pr['train']}
        extra = [r for r in json.loads(b)['train'] if r['prompt'] not in have]
        pr['n_bundle_train'], pr['train'] = len(pr['train']), pr['train'] + extra
        log(f'{len(extra)} extra training prompts from {x}: {len(pr["train"])} in all')
    return pr

def log(*a): print(f'[{time.strftime("%H:%M:%S")}]', *a, flush=True)

# ---------------------------------------------------------------------------------------------------------- assemble
def unpack_bundle(work: Path, manifest: dict, parts: str = 'parts', out: str = 'bundle', resend: str = '.devsite/bundle') -> Path:
    "Join the parts in work/parts/p*/part, check each part, the tar and every member against the manifest (sha256), extract to work/out."
    blob = b''
    for i, part in enumerate(manifest['parts'], 1):
        b = (work/parts/f'p{i}'/'part').read_bytes()
        if sha(b) != part['sha256']: raise ValueError(f'bundle part {i} sha256 mismatch: re-send {resend}/p{i}')
        blob += b
    if sha(blob) != manifest['tar_sha256']: raise ValueError('bundle tar sha256 mismatch')
    out = work/out; out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(blob)) as tf:
        for m in tf.getmembers():
            data = tf.extractfile(m).read()
            if sha(data) != manifest['members'][m.name]: raise ValueError(f'bundle member {m.name} sha256 mismatch')
            (out/m.name).write_bytes(data)
    return out

def assemble(work: Path, manifest: dict):
    out = unpack_bundle(work, manifest)
    from effqwen.assets import convert_gguf
    convert_gguf(out/'smollm2.gguf', work/'smollm2')
    log('assembled and converted:', sorted(p.name for p in (work/'smollm2').iterdir()))

# ----------------------------------------------------------------------------------------------------------- models
def load_models(work: Path, dtype=None, with_bf16: bool = True):
    "(BF16 target or None, INT4 target = the QAD codes x scales with QAD's norms, tokenizer), on the GPU; one load from disk."
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from safetensors.torch import load_file
    dtype = dtype or (torch.bfloat16 if DEV == 'cuda' else torch.float32)
    bf16 = AutoModelForCausalLM.from_pretrained(str(work/'smollm2'), dtype=dtype).to(DEV).eval()
    tok = AutoTokenizer.from_pretrained(str(work/'smollm2'))
    int4 = copy.deepcopy(bf16) if with_bf16 else bf16
    n_lin, n_norm = apply_w4a16(int4, load_file(str(work/'bundle'/'qad_int4.safetensors')))
    log(f'INT4 target: {n_lin} linears from QAD codes x scales, {n_norm} norms')
    return (bf16 if with_bf16 else None), int4, tok

@torch.no_grad()
def apply_w4a16(model, q: dict) -> tuple[int, int]:
    """Set `model`'s linears to codes x scales of a W4A16 pack-quantized state dict `q` (weight_packed / weight_scale) and
    its norms to q's; returns (linears, norms) set. The model keeps its dtype."""
    from effqwen.kernels import w4a16_dequantize
    mods = dict(model.named_modules()); n_lin = n_norm = 0
    for k in [k for k in q if k.endswith('.weight_packed')]:
        name = k[:-len('.weight_packed')]
        w = w4a16_dequantize(q[k], q[name + '.weight_scale'], dtype=torch.float32)
        lin = mods[name]
        if tuple(w.shape) != tuple(lin.weight.shape): raise ValueError(f'{name}: INT4 weight {tuple(w.shape)} vs model {tuple(lin.weight.shape)}')
        lin.weight.copy_(w.to(lin.weight)); n_lin += 1
    for k, v in q.items():
        if k.endswith('norm.weight'):
            nm = mods[k[:-len('.weight')]].weight; nm.copy_(v.to(nm)); n_norm += 1
    return n_lin, n_norm


# ------------------------------------------------------------------------------------------------------------ regen
def regen_path(work: Path, name: str) -> Path: return work/f'regen_{name}.json'

def prompt_key(prompt: str) -> str: return sha(prompt.encode())[:16]

def load_answers(work: Path, name: str, pr: dict) -> dict:
    """The saved answers {index: text} of one target, each checked against the prompt now at its index: answers are
    keyed by index, and an EXTRA_PROMPTS file other than the one they answered puts other prompts at those indices.
    `regen_<name>_keys.json` holds each answer's prompt key (sha256 prefix); answers whose prompt changed are dropped
    (and regenerated by `regen`). Answers without keys are taken only at the bundle's own indices."""
    path = regen_path(work, name)
    if not path.exists(): return {}
    done, kp = json.loads(path.read_text()), work/f'regen_{name}_keys.json'
    n_bundle = pr.get('n_bundle_train', len(pr['train']))
    if kp.exists():
        keys = json.loads(kp.read_text())
        ok = {i: a for i, a in done.items() if int(i) < len(pr['train']) and keys.get(i) == prompt_key(pr['train'][int(i)]['prompt'])}
        if len(ok) < len(done): log(f'{name}: {len(done) - len(ok)} saved answers belong to other prompts (another EXTRA_PROMPTS file): dropped')
        return ok
    past = sorted(int(i) for i in done if int(i) >= n_bundle)
    if past: raise ValueError(f'{path.name}: {len(past)} answers past the bundle\'s {n_bundle} prompts and no {kp.name} to check them against '
                              f'EXTRA_PROMPTS: restore them with their keys file (scripts/gpu_drafter.py keys) or regenerate them')
    return done

def write_keys(work: Path):
    """Prompt keys for answers saved without them (before `load_answers` checked keys), taking them to answer the
    prompts now at their indices: run once with the EXTRA_PROMPTS file those answers were generated for."""
    pr = load_prompts(work)
    for name in ('bf16', 'int4'):
        if not regen_path(work, name).exists(): continue
        done = json.loads(regen_path(work, name).read_text())
        if (bad := [i for i in done if int(i) >= len(pr['train'])]): raise ValueError(f'regen_{name}.json: answers at {len(bad)} indices past the {len(pr["train"])} prompts: set EXTRA_PROMPTS to the file they answered')
        save_answers(work, name, pr, done); log(f'{name}: keys for {len(done)} answers')

def save_answers(work: Path, name: str, pr: dict, done: dict):
    "Write the answers and their prompt keys (each atomically)."
    for f, obj in ((regen_path(work, name), done), (work/f'regen_{name}_keys.json', {i: prompt_key(pr['train'][int(i)]['prompt']) for i in done})):
        tmp = f.with_suffix('.tmp'); tmp.write_text(json.dumps(obj)); tmp.replace(f)

REGEN_TOKENS = int(os.environ.get('REGEN_TOKENS', str(1 << 20)))   # a regen batch's prompt + answer tokens at most (long prompts: fewer rows)

def token_batches(todo: list, ntok: dict, batch: int, cap: int, new: int) -> list:
    """`todo` (prompt indices in order) cut into consecutive batches of at most `batch` prompts whose padded size,
    rows × (longest prompt's tokens `ntok[i]` + `new`), stays within `cap` (a prompt alone may exceed it)."""
    if batch < 1 or cap < 1: raise ValueError(f'batch={batch}, REGEN_TOKENS={cap}: both must be >= 1')
    out, cur, top = [], [], 0
    for i in todo:
        t = max(top, ntok[i])
        if cur and (len(cur) == batch or (len(cur) + 1) * (t + new) > cap): out.append(cur); cur, t = [], ntok[i]
        cur.append(i); top = t
    return out + ([cur] if cur else [])

def regen_order(todo: list, length: dict, window: int) -> list:
    """The order `regen` answers `todo` in: windows of `window` prompts as they come (shuffled: the same mix in each),
    each window longest first, so batches hold prompts of similar length (less padding) and a deadline that stops the
    last window drops its shortest prompts, not its longest. (Shortest first, session 30's run answered none of its
    1,354 long prompts: the deadline fell in the window that held them.)"""
    if window < 1: raise ValueError(f'window={window}: must be >= 1')
    return [i for w in range(0, len(todo), window) for i in sorted(todo[w:w + window], key=lambda i: -length[i])]

def regen_runs(work: Path, name: str) -> list:
    "The regen calls that answered `name`'s prompts so far (`record_regen_run`), oldest first; [] for answers saved before session 32."
    f = work/f'regen_{name}_runs.json'
    return json.loads(f.read_text()) if f.exists() else []

def record_regen_run(work: Path, name: str, answered: int, seconds: float):
    """Append one regen call to regen_<name>_runs.json (atomically; it travels in regen_data.tar.xz with the answers): when,
    at which git sha, how many answers it added in how many seconds, and which decoding loop and attention made them
    (EFFQWEN_REGEN_STATIC / EFFQWEN_REGEN_GQA), since a data set may mix the answers of several leases."""
    from effqwen.core import git_sha
    runs = regen_runs(work, name) + [dict(date=time.strftime('%Y-%m-%dT%H:%M:%S%z'), git_sha=git_sha(), answered=answered, seconds=round(seconds, 1),
                                         static=os.environ.get('EFFQWEN_REGEN_STATIC', '0') == '1', gqa=os.environ.get('EFFQWEN_REGEN_GQA', '0') == '1')]
    f = work/f'regen_{name}_runs.json'; tmp = f.with_suffix('.tmp'); tmp.write_text(json.dumps(runs, indent=1)); tmp.replace(f)

def regen(work: Path, deadline_s: float, batch: int, only: tuple[str, ...] = ('bf16', 'int4')):
    """Greedy answers of the BF16 and the INT4 target (bf16, the dtype speculative decoding serves) to the bundle's
    training prompts, in batches of similar prompt length; each finished batch is saved (atomically) under `work`, so
    a command cut short by its deadline keeps what it generated and the next `regen` call continues. `only` picks the
    targets (one process per GPU: `--only bf16` on one, `--only int4` on the other)."""
    t_start = time.time()
    if not only or any(n not in ('bf16', 'int4') for n in only): raise ValueError(f'--only {only}: pick from bf16, int4')
    from effqwen.regen import generate_texts
    from effqwen.model import chat_prompt
    p, S = sizes()
    bf16, int4, tok = load_models(work)
    pr = load_prompts(work)
    templ = [chat_prompt(tok, x['prompt']) for x in pr['train']][:S.regen_prompts]
    jobs = tuple(j for j in (('bf16', bf16, S.regen_prompts), ('int4', int4, S.int4_prompts)) if j[0] in only)
    plan = {}                                                     # what is left to answer, before any target's clock starts:
    for name, _, n in jobs:                                       # (tokenizing 33K prompts one at a time took session 32's
        done = load_answers(work, name, pr)                       # BF16 share of a 75 s deadline before its first batch)
        todo = [i for i in range(min(n, len(templ))) if str(i) not in done]   # prompts come shuffled (drafter_prompts)
        todo = regen_order(todo, {i: len(templ[i]) for i in todo}, 4 * batch)
        ntok = dict(zip(todo, map(len, tok([templ[i] for i in todo], add_special_tokens=False).input_ids))) if todo else {}
        plan[name] = (done, todo, ntok)
    t_prep = time.time() - t_start
    log(f'regen: models and prompts ready in {t_prep:.0f} s; to answer: ' + ', '.join(f'{k} {len(v[1])}' for k, v in plan.items()))
    for name, model, n in jobs:                                   # each target gets its share of the time left (by prompt count)
        done, todo, ntok = plan[name]; n_before = len(done)
        t = time.time(); per = None
        until = time.time() + (deadline_s - t_prep) * n / sum(j[2] for j in jobs) if name != jobs[-1][0] else t_start + deadline_s
        for idx in token_batches(todo, ntok, batch, REGEN_TOKENS, S.regen_max_new):
            left = until - time.time()
            if left < (1.1 * per if per else 0) + 10: log(f'{name}: deadline, {len(done)}/{n} done'); break
            tb = time.time()
            resp = generate_texts(model, tok, [templ[i] for i in idx], S.regen_max_new, 0.0, batch_size=len(idx), seed=p.seed, desc=f'regen {name}')
            done |= {str(i): r for i, r in zip(idx, resp)}
            save_answers(work, name, pr, done)
            per = max(per or 0, time.time() - tb)
            log(f'{name}: {len(done)}/{n} conversations, batch {time.time() - tb:.1f} s')
        tf = work/f'regen_{name}_s.txt'                           # generation seconds, summed over regen calls
        tf.write_text(str((float(tf.read_text()) if tf.exists() else 0.0) + time.time() - t))
        record_regen_run(work, name, len(done) - n_before, time.time() - t)

# ------------------------------------------------------------------------------------------------------------ train
DRAFTERS = ('stage1', 'stage2', 'direct')
DATA_OF = dict(stage1='bf16', stage2='int4', direct='int4')     # whose answers each drafter trains on

FEATURE_GB = float(os.environ.get('DRAFTER_FEATURE_GB', '48'))   # precomputed target features kept on the GPU, both data sets
# the precomputed features' storage dtype: bfloat16 halves their memory (the engine's bf16 target hands the deployed drafter
# bf16 features too); the drafters still train in float32 (DFlashDrafter.forward casts the features to its own dtype)
FEATURE_DTYPE = os.environ.get('DRAFTER_FEATURE_DTYPE', 'float32')
if FEATURE_DTYPE not in ('float32', 'bfloat16'): raise ValueError(f'DRAFTER_FEATURE_DTYPE={FEATURE_DTYPE!r}: use float32 (default) or bfloat16')
# a saved drafter stage 1 continues from (its weights and draft vocabulary; a fresh optimizer and schedule), so that
# training spread over several GPU leases adds up; recorded in the result as `init`
INIT_STAGE1 = os.environ.get('DRAFTER_INIT_STAGE1')
# past FEATURE_GB on the GPU, up to this many GiB of a data set's precomputed features are held in host memory (each step
# copies its batch's over: 4 x 4,096-token chunks are 76 MB in bf16), before a data set goes online
FEATURE_HOST_GB = float(os.environ.get('DRAFTER_FEATURE_HOST_GB', '0'))
# the dtype of the target copy that computes the drafter's features (precomputed, online and held out): float32 (default:
# the training targets' own precision) or bfloat16, what the serving engine hands the drafter; a float32 target's sdpa
# attention over 4,096-token chunks ran at about 41K tokens a second in session 31 (`features_s`), scripts/feature_speed.py
FEATURE_TARGET = os.environ.get('DRAFTER_FEATURE_TARGET', 'float32')
if FEATURE_TARGET not in ('float32', 'bfloat16'): raise ValueError(f'DRAFTER_FEATURE_TARGET={FEATURE_TARGET!r}: use float32 (default) or bfloat16')
# the precision of the drafter's flex_attention in training (effqwen.dflash.FLEX_DTYPE): float32 inputs get 16x16 tiles in its
# backward (session 33's step profile: backward 11x the forward); bfloat16 casts q / k / v only, the drafter stays float32
ATTN_DTYPE = os.environ.get('DRAFTER_ATTN_DTYPE', 'float32')
if ATTN_DTYPE not in ('float32', 'bfloat16'): raise ValueError(f'DRAFTER_ATTN_DTYPE={ATTN_DTYPE!r}: use float32 (default) or bfloat16')
# drafters that end on the weights of their held-out curve's lowest loss (`train_drafter(keep_best=True)`, early stopping),
# e.g. DRAFTER_KEEP_BEST=stage2: session 31's stage 2 overfit its ~6K INT4 answers (drafter_e2e_resume_gpu.json's held_curve)
KEEP_BEST = tuple(k for k in os.environ.get('DRAFTER_KEEP_BEST', '').split(',') if k)
if any(k not in ('stage1', 'stage2', 'direct') for k in KEEP_BEST): raise ValueError(f'DRAFTER_KEEP_BEST={KEEP_BEST}: name drafters among stage1, stage2, direct')

def feature_gb(chunks: int, seq: int, width: int, itemsize: int) -> float:
    "GiB of the target's features for `chunks` chunks of `seq` tokens, `width` (taps x hidden) values of `itemsize` bytes each."
    return chunks * seq * width * itemsize / 2**30

def chunk_plan(work: Path) -> dict:
    """What `train` would hold for the answers saved under `work` (CPU is enough: no model runs): per target, the
    conversations answered, the chunks they pack into at the run's DrafterSize (DRAFTER_PACK_LEN / _PACK_ALIGNED) and the
    GiB of their float32 features, against FEATURE_GB. For planning a run's memory before the GPU lease."""
    from transformers import AutoTokenizer
    from effqwen.regen import pack
    from effqwen.model import chat_prompt
    _, S = sizes()
    tok = AutoTokenizer.from_pretrained(str(work/'smollm2')); cfg = json.loads((work/'smollm2'/'config.json').read_text())
    pr = load_prompts(work)
    templ = [chat_prompt(tok, x['prompt']) for x in pr['train']][:S.regen_prompts]
    out = {}
    for name, n in (('bf16', S.regen_prompts), ('int4', S.int4_prompts)):
        done = {i: a for i, a in load_answers(work, name, pr).items() if int(i) < n}
        idx = sorted(int(i) for i in done)
        pk = pack(dict(prompt=[templ[i] for i in idx], text=[templ[i] + done[str(i)] + tok.eos_token for i in idx]), tok, S.pack_len, aligned=bool(S.pack_aligned))
        lm = pk['response_mask'].bool() & pk['attention_mask'].bool(); chunks = int(lm[:, :-1].any(1).sum())
        out[name] = dict(conversations=len(idx), asked=n, chunks=chunks, features_gib=round(feature_gb(chunks, S.pack_len, S.taps * cfg['hidden_size'], 2 if FEATURE_DTYPE == 'bfloat16' else 4), 1))
    log('chunk plan', out, f'FEATURE_GB {FEATURE_GB:g}, features in {FEATURE_DTYPE}')
    return out

def train(work: Path, budget_s: float, deadline_s: float, lr: float|None = None, lr2: float|None = None, fp32: bool = True,
          drafters: tuple[str, ...] = DRAFTERS, layers: int|None = None):
    """budget_s: training seconds wanted; deadline_s: the whole command's seconds (the device's 10-minute limit), so the
    training budget shrinks by whatever loading and regeneration took.

    `drafters` picks which of the three this process trains, so that two GPUs share the work: `--drafters stage1` on
    one and `--drafters direct,stage2` on the other (stage 2 starts from the saved stage-1 drafter and waits for it).
    The profile's step counts are scaled (by one factor) to fit the budget on the steps this process trains: all three
    in a row (2·steps1 + steps2), or its share when the drafters are split (stage1: steps1; direct,stage2: steps1 +
    steps2). Writes
    work/train_<drafters>.json (`load_train` merges the parts)."""
    t_start = time.time()
    if not drafters or any(k not in DRAFTERS for k in drafters): raise ValueError(f'--drafters {drafters}: pick from {DRAFTERS}')
    from effqwen.core import set_determinism
    from effqwen.regen import generate_texts, pack
    from effqwen.model import chat_prompt
    from effqwen.dflash import DFlashConfig, DFlashDrafter, train_drafter, held_loss, save_drafter, load_drafter
    from effqwen.drafter_opt import pack_features, mask_token_for, clone_drafter, frequent_tokens
    p, S = sizes()
    from dataclasses import replace
    S = replace(S, lr=lr or S.lr, lr2=lr2 or S.lr2, layers=layers or S.layers)   # overrides are recorded in the result's `sizes`
    if fp32: torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    bf16, int4, tok = load_models(work, dtype=torch.float32 if fp32 else None)   # fp32: targets, features and drafters all float32
    pr = load_prompts(work)
    templ = [chat_prompt(tok, x['prompt']) for x in pr['train']][:S.regen_prompts]
    info, data, feat_gb = {}, {}, 0.0
    fdt = torch.bfloat16 if FEATURE_DTYPE == 'bfloat16' else None
    feats_of = lambda model, x, dev=None: pack_features(model, x, list(cfg.target_layer_ids), batch_size=16, progress=False, dtype=fdt, device=dev)
    host_gb = 0.0
    cfg = DFlashConfig.for_target(bf16, mask_token_id=mask_token_for(tok), num_hidden_layers=S.layers, block_size=S.block, n_taps=S.taps)
    # the targets that compute features: the training targets, or bf16 copies of them (DRAFTER_FEATURE_TARGET)
    ftarget = dict(bf16=bf16, int4=int4) if FEATURE_TARGET == 'float32' or not fp32 else \
              {k: copy.deepcopy(m).to(torch.bfloat16) for k, m in (('bf16', bf16), ('int4', int4))}
    for name, model, n in (('bf16', bf16, S.regen_prompts), ('int4', int4, S.int4_prompts)):
        if name not in {DATA_OF[k] for k in drafters}: continue
        t = time.time()
        if done := {i: a for i, a in load_answers(work, name, pr).items() if int(i) < n}:   # answers from `regen` (bf16 targets), in prompt order
            idx = sorted(int(i) for i in done)
            conv = dict(prompt=[templ[i] for i in idx], text=[templ[i] + done[str(i)] + tok.eos_token for i in idx])
            t_regen = float((work/f'regen_{name}_s.txt').read_text()); source = 'regen stage (the target run in bf16 precision), batches of similar length'
        else:
            resp = generate_texts(model, tok, templ[:n], S.regen_max_new, 0.0, batch_size=256, seed=p.seed, desc=f'regen {name}')
            conv = dict(prompt=templ[:n], text=[a + b + tok.eos_token for a, b in zip(templ[:n], resp)])
            t_regen = time.time() - t; source = 'train stage (float32 target)'
        t = time.time()
        pk = pack(conv, tok, S.pack_len, aligned=bool(S.pack_aligned))
        lm = pk['response_mask'].bool() & pk['attention_mask'].bool()
        has = lm[:, :-1].any(1)                                   # chunks with at least one anchor position
        pk = {k: v[has] for k, v in pk.items()}; lm = lm[has]
        ids = pk['input_ids'].to(DEV); lm = lm.to(DEV); nh = max(1, len(ids) // 20)    # 5% of chunks held out:
        # a seeded random 5% (env DRAFTER_HELD=tail: the last 5%, as runs before session 22 did; with EXTRA_PROMPTS the tail
        # answers only the extra file's last prompts)
        if HELD == 'tail': ho = torch.arange(len(ids) - nh, len(ids), device=DEV)
        else: ho = torch.randperm(len(ids), generator=torch.Generator().manual_seed(p.seed))[:nh].sort().values.to(DEV)
        tr = torch.ones(len(ids), dtype=torch.bool, device=DEV); tr[ho] = False
        # the target's features of every training chunk, kept on the GPU while both data sets' fit in FEATURE_GB; past it
        # (4,096-token chunks take 38 MB each in float32) each training step computes its own batch's (`train_drafter`
        # with the target: one target forward a step)
        fgb = feature_gb(int(tr.sum()), ids.shape[1], len(cfg.target_layer_ids) * cfg.hidden_size, 2 if fdt is not None or not fp32 else 4)
        where = 'gpu' if feat_gb + fgb <= FEATURE_GB else 'host' if host_gb + fgb <= FEATURE_HOST_GB else 'online'
        if where == 'gpu': feat_gb += fgb
        if where == 'host': host_gb += fgb
        online = where == 'online'
        fm = ftarget[name]; t_f = time.time()
        data[name] = dict(ids=ids[tr], loss_mask=lm[tr], feats=None if online else feats_of(fm, ids[tr], 'cpu' if where == 'host' else None),
                          held=(ids[ho], feats_of(fm, ids[ho]), lm[ho]),
                          model=fm)
        if DEV == 'cuda': torch.cuda.synchronize()
        t_f = time.time() - t_f
        plen = [len(x) for x in tok(conv['prompt'], add_special_tokens=False).input_ids]   # whether long prompts made it into the data
        info[name] = dict(conversations=len(conv['prompt']), asked=n, prompt_pool=S.prompt_pool, source=source, chunks=len(pk['input_ids']), tokens=int(pk['attention_mask'].sum()),
                          prompt_tokens_max=max(plen, default=0), prompts_over_2048_tokens=sum(x > 2048 for x in plen),
                          response_tokens=int(lm.sum()), regen_s=t_regen, regen_runs=regen_runs(work, name), features_s=time.time() - t, held_out=f'{HELD} {nh} chunks',
                          features=('online (each step computes its batch\'s)' if online else f'precomputed ({FEATURE_DTYPE if fp32 else "bfloat16"}, {"host memory" if where == "host" else "GPU"})')
                                   + f', from the {str(next(fm.parameters()).dtype).replace("torch.", "")} target',
                          features_compute_s=round(t_f, 1),
                          features_gb=round(fgb, 2))
        if x := os.environ.get('EXTRA_PROMPTS'):                  # prompts past the bundle's own: device_bundle.py --extra
            info[name]['extra_prompts'] = dict(file=Path(x).name, sha256=Path(x).with_suffix('.sha256').read_text().split()[0],
                                               used=max(0, len(conv['prompt']) - pr['n_bundle_train']))
        log(name, info[name])
    target = dict(bf16=bf16, int4=int4)
    dv = S.draft_vocab
    def fresh(d, target):
        set_determinism(p.seed); m = DFlashDrafter(cfg).to(DEV).bind(target)
        if dv: m.set_draft_vocab(frequent_tokens(d['ids'][d['loss_mask']].cpu(), dv, cfg.vocab_size, always=[tok.eos_token_id]))
        return m
    init = None
    if INIT_STAGE1 and 'stage1' in drafters:                       # stage 1 continues from a saved drafter (an earlier lease's)
        m0 = load_drafter(INIT_STAGE1, bf16).to(DEV).float()
        if m0.cfg.to_json() != dict(cfg.to_json(), draft_vocab_size=m0.cfg.draft_vocab_size):
            raise ValueError(f'DRAFTER_INIT_STAGE1={INIT_STAGE1}: its config differs from this run\'s drafter (layers, taps, block, window): train it from scratch instead')
        init = dict(path=INIT_STAGE1, sha256=sha((Path(INIT_STAGE1)/'model.safetensors').read_bytes()),
                    trained_by=(json.loads((Path(INIT_STAGE1)/'trained_by.json').read_text()) if (Path(INIT_STAGE1)/'trained_by.json').exists() else None))
        log('stage1 continues from', init)
    def run(m, d, steps, lr, seed, curve=False, best=False):   # curve: the held-out loss 20 times along the run (its first 64 chunks)
        with torch.autocast(DEV, dtype=torch.bfloat16, enabled=DEV == 'cuda' and not fp32):
            return train_drafter(m, d['model'] if d['feats'] is None else None, d['ids'], d['loss_mask'], steps=steps, batch_size=S.batch, lr=lr, n_anchors=S.anchors,
                                 seed=seed, features=d['feats'], **(dict(held=tuple(t[:64] for t in d['held']), eval_every=max(1, steps // 20), keep_best=best) if curve else {}))
    # time a few steps on a throwaway drafter, then fit the profile's step counts into the budget (same ratio)
    # on the GPU both attention paths are timed (flex_attention's block-sparse mask vs the dense bool mask) and the faster trains
    import effqwen.dflash as DF
    DF.FLEX_DTYPE = torch.bfloat16 if ATTN_DTYPE == 'bfloat16' else None   # (the dense path's SDPA keeps the drafter's dtype)
    d0, step_by = data[DATA_OF[drafters[0]]], {}
    sync = (lambda: torch.cuda.synchronize()) if DEV == 'cuda' else (lambda: None)
    for flex in ((True, False) if DEV == 'cuda' else (False,)):
        DF.FLEX_TRAIN = flex
        try:
            run(fresh(d0, bf16), d0, 5, S.lr, 99); sync()           # warm-up (flex: compiles)
            t = time.time(); run(fresh(d0, bf16), d0, 10, S.lr, 99); sync()
            step_by['flex' if flex else 'dense'] = (time.time() - t) / 10
        except Exception as e:                                    # train on the path that ran
            path = 'flex' if flex else 'dense'
            step_by[f'{path}_error'] = repr(e)[:500]; log(f'the {path} attention path failed its timing, the other trains:', repr(e)[:300])
    attn = min((k for k in ('flex', 'dense') if k in step_by), key=step_by.get)
    DF.FLEX_TRAIN, step_s = attn == 'flex', step_by[attn]
    log('step s by attention path', step_by, '->', attn)
    # each drafter's held-out curve costs 21 `held_loss` calls on its first 64 held-out chunks beyond the timed steps (session 33,
    # dense mask: about 5 s a call, 102 s of stage 1's 480 s): time one (its first call compiles) and take them off the budget
    m_h = fresh(d0, bf16); h0 = tuple(t[:64] for t in d0['held'])
    held_loss(m_h, *h0, n_anchors=S.anchors, batch_size=S.batch); sync(); t = time.time()
    held_loss(m_h, *h0, n_anchors=S.anchors, batch_size=S.batch); sync(); held_s = time.time() - t; del m_h
    want = sum(S.steps2 if k == 'stage2' else S.steps1 for k in drafters)   # the steps this process trains
    budget_s = min(budget_s, deadline_s - (time.time() - t_start) - 40)     # 40 s: held-out accuracy + saving
    curves_s = 21 * held_s * len(drafters)
    log(f'held-out curve: {held_s:.2f} s a call, {curves_s:.0f} s for the {len(drafters)} curves')
    budget_s -= curves_s
    if budget_s < 30: raise RuntimeError(f'only {budget_s:.0f} s left for training: regenerate fewer conversations')
    scale = min(1.0, budget_s / (want * step_s))
    steps1, steps2 = max(1, int(S.steps1 * scale)), max(1, int(S.steps2 * scale))
    log(f'step {step_s * 1e3:.0f} ms: steps1 {steps1} (profile {S.steps1}), steps2 {steps2} (profile {S.steps2})')
    hist, dr = {}, {}
    order = [k for k in ('stage1', 'direct', 'stage2') if k in drafters]  # stage 2 last: it may wait for another process's stage 1
    for k in order:
        d = data[DATA_OF[k]]
        if k == 'stage2':
            if 'stage1' in dr: s1 = dr['stage1']
            else:                                                 # trained by the other process: wait for its saved drafter
                f = work/'drafters'/'stage1'/'model.safetensors'
                while not f.exists():
                    if time.time() - t_start > deadline_s - 60: raise RuntimeError('stage 1 drafter did not appear in time')
                    time.sleep(2)
                time.sleep(2); s1 = load_drafter(work/'drafters'/'stage1', bf16).to(DEV).float()
                log('stage2 starts from the other process\'s stage 1')
            dr[k] = clone_drafter(s1).bind(int4)
            if dv and getattr(s1, 'd2t', None) is not None and len(s1.d2t) != dv:   # DRAFTER_DRAFT_VOCAB on a stage-2 refit: stage 2's own
                dr[k].set_draft_vocab(frequent_tokens(d['ids'][d['loss_mask']].cpu(), dv, cfg.vocab_size, always=[tok.eos_token_id]))
                log(f'stage2: draft vocabulary {len(s1.d2t)} -> {dv} rows (the INT4 data\'s most frequent tokens)')
            hist[k] = run(dr[k], d, steps2, S.lr2, p.seed + 1, curve=True, best=k in KEEP_BEST)
        else:
            dr[k] = clone_drafter(m0).bind(bf16) if k == 'stage1' and init else fresh(d, target[DATA_OF[k]])
            hist[k] = run(dr[k], d, steps1, S.lr, p.seed, curve=True, best=k in KEEP_BEST)
        log(k, hist[k].seconds, sum(hist[k].accs[-20:]) / 20, *([f"kept step {hist[k].best_step} of {len(hist[k].losses)} (lowest held-out loss)"] if hist[k].best_step else []))
        tmp = save_drafter(dr[k], work/'drafters'/f'{k}.partial')   # saved at once (whole, then renamed): stage 2 may be waiting for it
        import shutil; shutil.rmtree(work/'drafters'/k, ignore_errors=True); tmp.rename(work/'drafters'/k)
    st = dict(data=info, step_ms=step_s * 1e3, attention=attn, attention_dtype=ATTN_DTYPE if attn == 'flex' else 'float32', step_ms_by_attention={k: v * 1e3 if isinstance(v, float) else v for k, v in step_by.items()},
              steps={k: steps2 if k == 'stage2' else steps1 for k in dr},
              profile_steps=dict(stage1=S.steps1, stage2=S.steps2), budget_s=budget_s, precision='fp32' if fp32 else 'bf16 autocast', drafter=cfg.to_json(),
              sizes={k: v for k, v in S.__dict__.items()}, processes=1,
              losses={k: h.losses for k, h in hist.items()}, accs={k: h.accs for k, h in hist.items()},
              held_curve={k: h.held_curve for k, h in hist.items()},   # [(step, held-out loss, held-out acc)]
              train_s={k: h.seconds for k, h in hist.items()}, block_accuracy={},
              **(dict(best_step={k: h.best_step for k, h in hist.items() if h.best_step is not None}) if KEEP_BEST else {}), **(dict(init=dict(stage1=init)) if init else {}))
    from effqwen.core import atomic_write
    rec = work/f"train_{'_'.join(order)}.json"
    atomic_write(rec, json.dumps(st))     # the training record first: a failure in the accuracy pass below must not lose it
    from effqwen.dflash import block_accuracy, walk_tau
    if DEV == 'cuda': torch.cuda.empty_cache()
    for k, m in dr.items():
        d = data[DATA_OF[k]]; n = len(d['held'][0])
        try:
            with torch.autocast(DEV, dtype=torch.bfloat16, enabled=DEV == 'cuda' and not fp32):
                a = {split: vars(block_accuracy(m, *xs, n_anchors=S.anchors)) for split, xs in
                     (('train', (d['ids'][:n], d['feats'][:n] if d['feats'] is not None else feats_of(d['model'], d['ids'][:n]), d['loss_mask'][:n])), ('held_out', d['held']))}
                w = walk_tau(m, *(t[:64] for t in d['held']))     # the decoding loop replayed on held-out text (anchor-mean tau overstates it)
                a['held_out']['walk_tau'] = w.tau; a['held_out']['walk_rounds'] = w.rounds
        except Exception as e:                                  # recorded, and the other drafters are still measured
            st.setdefault('block_accuracy_error', {})[k] = f'{type(e).__name__}: {e}'[:500]; log(k, 'accuracy pass failed:', repr(e)[:300]); continue
        st['block_accuracy'][k] = a
        log(k, {sp: ([round(x, 3) for x in v['acc'][:4]], round(v['tau'], 2), round(v.get('walk_tau', 0), 2)) for sp, v in a.items()})
    atomic_write(rec, json.dumps(st))
    log('train done')

def load_train(work: Path) -> dict:
    "The training record: train.json of a one-process run, or the train_*.json parts of a split one merged (per-drafter fields joined)."
    parts = [json.loads(f.read_text()) for f in sorted(work.glob('train_*.json'))]
    if not parts and (work/'train.json').exists(): return json.loads((work/'train.json').read_text())
    if not parts: raise ValueError(f'{work} holds no train.json or train_*.json: run the train stage first')
    st = dict(parts[0])
    for k in ('data', 'steps', 'losses', 'accs', 'train_s', 'block_accuracy', 'held_curve'): st[k] = {kk: vv for q in parts for kk, vv in q.get(k, {}).items()}
    st['step_ms'], st['budget_s'], st['processes'] = max(q['step_ms'] for q in parts), max(q['budget_s'] for q in parts), len(parts)
    missing = [k for k in ('stage1', 'stage2') if k not in st['steps']]   # (direct is optional: SOLO_DRAFTERS=stage1,stage2)
    if missing: raise ValueError(f'train parts lack {missing}: run train --drafters for them')
    return st

# ----------------------------------------------------------------------------------------------------- losslessness
@torch.no_grad()
def divergence(model, x, ref, spec):
    "Where speculative and AR greedy outputs first differ, and the target's top-1 - top-2 logit margin there (one HF forward)."
    a, b = ref[0].cpu(), spec[0].cpu(); i = first_diff(a, b)
    lg = model(torch.cat([x, ref[:, :i]], 1)).logits[0, -1].float()
    top = lg.topk(2).values
    return dict(index=i, margin=float(top[0] - top[1]), ar_token=int(a[i]) if i < len(a) else None, spec_token=int(b[i]) if i < len(b) else None)

def lossless_check(e, sd, model, tok, questions, dtype: str, stops, n_new: int = 128):
    "Speculative (stage-2 drafter) vs the engine's own greedy output on each question; divergences with their margins."
    from effqwen.engine import speculative_generate as eng_spec
    from effqwen.model import chat_prompt
    ll = dict(dtype=dtype, n=0, identical=0, new_tokens=0, divergence=[]); L = []
    for q in questions:
        x = tok(chat_prompt(tok, q), return_tensors='pt', add_special_tokens=False).input_ids.to(DEV)
        ref = e.generate(x, n_new, stops); r = eng_spec(e, sd, x, n_new, stops)
        same = torch.equal(r.new_tokens.cpu(), ref.cpu())
        ll['n'] += 1; ll['identical'] += int(same); ll['new_tokens'] += ref.shape[1]; L += r.acceptance_lengths
        if not same: ll['divergence'].append(divergence(model, x, ref, r.new_tokens))
    ll['tau'] = sum(L) / max(1, len(L)); log('lossless', dtype, {k: v for k, v in ll.items() if k != 'divergence'})
    return ll

def lossless32(work: Path, out: Path, n_lossless: int):
    """The losslessness check on a float32 copy of the INT4 target and the stage-2 drafter, TF32 off (verify-16 and
    decode-1 then round alike but for ~1e-6). Needs only the trained drafters, so it can run on a second GPU beside
    `eval`; it writes work/lossless_fp32.json and `merge` adds it to the eval's result."""
    from effqwen.dflash import load_drafter
    from effqwen.engine import Engine, StaticDrafter
    p, S = sizes()
    pr = load_prompts(work)
    if DEV == 'cuda': torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    _, int4_32, tok = load_models(work, dtype=torch.float32, with_bf16=False)
    d32 = load_drafter(work/'drafters'/'stage2', int4_32).to(DEV).float().eval()
    qs = pr['lossless'][:n_lossless]; stops = [tok.eos_token_id]
    maxlen = max(len(tok(q).input_ids) for q in qs) + 64 + 128 + 2 * S.block
    eng32 = Engine(int4_32, max_seq_len=maxlen, tap_layers=tuple(d32.target_layer_ids)); sd32 = StaticDrafter(d32, maxlen)
    ll32 = lossless_check(eng32, sd32, int4_32, tok, qs, 'float32', stops)
    tmp = work/'lossless_fp32.tmp'; tmp.write_text(json.dumps(ll32)); tmp.replace(work/'lossless_fp32.json')
    if (work/'eval_full.json').exists(): merge(work, out)

def merge(work: Path, out: Path):
    "Write the result: the eval (work/eval_full.json) plus the float32 losslessness check (work/lossless_fp32.json) if it ran."
    from effqwen.core import write_result
    p, S = sizes()
    base = json.loads((work/'eval_full.json').read_text())
    f = work/'lossless_fp32.json'
    if f.exists(): base['lossless_fp32'] = json.loads(f.read_text())
    os.environ['EFFQWEN_OUT'] = str(out)          # -> $OUT/data/results/drafter_training_gpu.json, stamped with provenance
    log('wrote', write_result('drafter_training_gpu' if not TINY else 'drafter_training_gpu_dryrun', base, p, device=DEV))

# ------------------------------------------------------------------------------------------------------------- eval
def timed_runs(eng, sds: dict, bench: dict, n_new: int, stops):
    """Per benchmark prompt, the engine's own greedy decoding, then greedy speculative decoding with each proposer in
    `sds`, each timed by wall clock between syncs; yields (benchmark, prompt, AR tokens, AR s, AR prefill s, key,
    result, speculative s). The AR prefill is timed on its own just before (the same recorded graph `generate` replays
    first), so the AR decode time is AR s - AR prefill s; the speculative result carries its own `prefill_s` / `decode_s`."""
    from effqwen.engine import speculative_generate as eng_spec
    sync = (lambda: torch.cuda.synchronize()) if DEV == 'cuda' else (lambda: None)
    for b, xs in bench.items():
        for x in xs:
            sync(); t = time.perf_counter(); eng.prefill(x); sync(); pre = time.perf_counter() - t
            sync(); t = time.perf_counter(); ref = eng.generate(x, n_new, stops); sync(); ar = time.perf_counter() - t
            for k, sd in sds.items():
                sync(); t = time.perf_counter(); r = eng_spec(eng, sd, x, n_new, stops); sync(); sp = time.perf_counter() - t
                yield b, x, ref, ar, pre, k, r, sp

def tally(o: dict, ref, ar: float, pre: float, r, sp: float) -> bool:
    """Add one prompt's AR and speculative runs to a benchmark's record `o`; returns whether the outputs are identical.
    Each run is counted with its own output: in bf16 the speculative output can leave the AR one (verify-16 and decode-1
    round differently, and greedy follows near-ties), and then the two runs stop after different numbers of tokens."""
    same = torch.equal(r.new_tokens.cpu(), ref.cpu())
    o['n'] += 1; o['lengths'] += r.acceptance_lengths; o['lossless'] += int(same); o['ar_s'] += ar; o['spec_s'] += sp
    o['new_tokens'] += ref.shape[1]                                  # the AR output's tokens
    o['spec_tokens'] = o.get('spec_tokens', 0) + r.new_tokens.shape[1]
    o['ar_prefill_s'] = o.get('ar_prefill_s', 0.0) + pre
    for part in ('prefill_s', 'draft_s', 'verify_s', 'decode_s'): o[part] = o.get(part, 0.0) + getattr(r, part)   # where a round's time goes
    o['rounds'] = o.get('rounds', 0) + r.rounds
    if getattr(r, 'round_s', None):                                  # the first round (the anchor's draft and verify, after the prompt)
        o['round0_draft_s'] = o.get('round0_draft_s', 0.0) + r.round_s[0][0]; o['round0_verify_s'] = o.get('round0_verify_s', 0.0) + r.round_s[0][1]
    o['unmarked_s'] = o.get('unmarked_s', 0.0) + r.decode_s - r.draft_s - r.verify_s   # decode time outside the rounds' CUDA events
    o['pipelined_runs'] = o.get('pipelined_runs', 0) + int(getattr(r, 'pipelined', False))   # rounds queued on the device (engine.PIPELINED)
    o['round_graph_runs'] = o.get('round_graph_runs', 0) + int(getattr(r, 'round_graph', False))   # rounds after the first as one graph
    # per prompt, DFlash's time per output token (benchmark.py): decode time (prefill excluded) / the run's own tokens
    o.setdefault('tpot_ar', []).append((ar - pre) / max(1, ref.shape[1]))
    o.setdefault('tpot_spec', []).append(r.decode_s / max(1, r.new_tokens.shape[1]))
    return same

def speedups(o: dict) -> dict:
    """A benchmark's speedups of speculative over AR decoding:
    tpot: DFlash's definition, mean AR time per output token / mean speculative one (decode only, each run's own tokens);
    tps: output tokens per second, prefill included, each run's own tokens;
    wall: wall time of AR / speculative over the same prompts and token budget (outputs of different lengths included).
    Records written before `tally` kept each run's own tokens have no tpot; their tps counts the speculative tokens
    from the acceptance lengths (each round's committed tokens, the stop token's round cut at it)."""
    st = o.get('spec_tokens', sum(o['lengths']))
    if not o['n']: return dict(tpot=None, tps=None, wall=None, spec_tokens=st)   # a benchmark with no prompts (a dry run's N_LONG=0)
    tp = (sum(o['tpot_ar']) / sum(o['tpot_spec'])) if o.get('tpot_spec') else None
    return dict(tpot=tp, tps=(st / o['spec_s']) / (o['new_tokens'] / o['ar_s']), wall=o['ar_s'] / max(1e-9, o['spec_s']),
                spec_tokens=st)

def finish(res: dict):
    "tau and the speedups of every benchmark record of every proposer in `res` ({key: {benchmark: record}})."
    for v in res.values():
        for o in v.values():
            o['tau'] = sum(o['lengths']) / max(1, len(o['lengths'])); sp = speedups(o)
            o['speedup'], o['speedup_tps'], o['speedup_tpot'] = sp['wall'], sp['tps'], sp['tpot']

def evaluate(work: Path, out: Path, n_lossless: int, ar_check: int, fp32: bool = True):
    from effqwen.dflash import load_drafter
    from effqwen.engine import Engine, StaticDrafter, speculative_generate as eng_spec
    from effqwen.model import greedy_generate, chat_prompt
    from effqwen.specdec import speculative_generate as hf_spec
    p, S = sizes()
    _, int4, tok = load_models(work, with_bf16=False)                # eval runs on the INT4 target only
    pr = load_prompts(work)
    st = load_train(work)
    bench = {b: [torch.tensor(x)[None].to(DEV) for x in xs[:int(os.environ.get('N_EVAL', S.eval_prompts)) if b != 'long' else int(os.environ.get('N_LONG', S.eval_long))]] for b, xs in pr['bench'].items()}
    names = [k for k in ('direct', 'stage1', 'stage2') if (work/'drafters'/k/'model.safetensors').exists()]   # (a run may skip direct: SOLO_DRAFTERS)
    if 'stage2' not in names: raise ValueError(f"{work/'drafters'} holds no stage2 drafter (found {names}): run the train stage first")
    dr = {k: load_drafter(work/'drafters'/k, int4).to(DEV).to(next(int4.parameters()).dtype).eval() for k in names}
    taps = tuple(dr['stage2'].target_layer_ids)
    maxlen = max(x.shape[1] for xs in bench.values() for x in xs) + S.eval_new + 64
    eng = Engine(int4, max_seq_len=maxlen, tap_layers=taps)
    compiled = bool(os.environ.get('DRAFTER_COMPILE'))             # DRAFTER_COMPILE=1: the drafter step torch.compiled before its graph
    try: sds = {k: StaticDrafter(d, maxlen, compile=compiled) for k, d in dr.items()}
    except Exception as e:                                        # a compile failure must not cost the run: all eager
        if not compiled: raise
        log('compiled drafter step failed, eager steps instead:', repr(e)[:300]); compiled = False
        sds = {k: StaticDrafter(d, maxlen) for k, d in dr.items()}
    stops = [tok.eos_token_id]
    # warm-up (graphs are recorded; first launches compile Triton kernels)
    w = bench['gsm8k'][0]; eng.generate(w, 32, stops); [eng_spec(eng, sd, w, 32, stops) for sd in sds.values()]
    # every prompt's prefill once before the timed loop: the engine records one prefill graph per prompt-size bucket at the
    # bucket's first prompt (`Engine.prefill_padded`), which must not land inside the AR run timed first
    for xs in bench.values():
        for x in xs: eng.prefill(x)
    # GPU time of each recorded step (CUDA events, median of 20), to set against a round's wall time in the loop
    from effqwen.engine import _gpu_ms
    sd, x = sds['stage2'], bench['gsm8k'][0]
    eng.prefill(x); sd.start(); sd.propose(torch.cat([x.cpu(), eng.tok[:1].cpu()[None]], 1), eng._prefill_feats[None], S.block - 1)
    step_ms = dict(verify=_gpu_ms(lambda: eng._step('verify'), 20))
    eng.n_keep.fill_(1); step_ms['commit'] = _gpu_ms(lambda: eng._step('commit'), 20)
    sd.n_new.zero_(); step_ms['draft'] = _gpu_ms(sd.graph.replay if sd.graph is not None else sd._fn, 20)
    eng.prefill(x); step_ms['decode'] = _gpu_ms(lambda: eng._step('decode'), 20)
    log('step ms', {k: round(v, 3) for k, v in step_ms.items()})
    res = {k: {b: dict(lengths=[], lossless=0, n=0, ar_s=0.0, spec_s=0.0, new_tokens=0) for b in bench} for k in names}
    for b, x, ref, ar, pre, k, r, sp in timed_runs(eng, {k: sds[k] for k in names}, bench, S.eval_new, stops):
        if not tally(res[k][b], ref, ar, pre, r, sp): res[k][b].setdefault('divergence', []).append(divergence(int4, x, ref, r.new_tokens))
    for b in bench: log(b, {k: round(sum(res[k][b]['lengths']) / max(1, len(res[k][b]['lengths'])), 2) for k in names})
    finish(res)
    def save(**extra):                            # written after each phase: a run cut short by the device's limit keeps what it measured
        doc = dict(train=st, eval=res, step_ms=step_ms, drafter_compiled=compiled, eval_prompts={b: len(v) for b, v in bench.items()},
                   long_prompt_tokens=[x.shape[1] for x in bench.get('long', [])], eval_new=S.eval_new,
                   hf_loop_tau_stage2=sum(hf_tau) / max(1, len(hf_tau)), hf_loop_prompts=ar_check,
                   engine_ar_vs_hf_greedy_agree_tokens=ar_vs_hf, **({'lossless_extra': None} | extra),
                   peak_mem_gb=torch.cuda.max_memory_allocated() / 2**30 if DEV == 'cuda' else None, device=torch.cuda.get_device_name() if DEV == 'cuda' else 'cpu (dry run)')
        tmp = work/'eval_full.tmp'; tmp.write_text(json.dumps(doc, default=float)); tmp.replace(work/'eval_full.json')  # what `merge` writes out
        merge(work, out)
    hf_tau, ar_vs_hf = [], []
    save()                                        # the eval is kept even if the cross-checks below run out of time
    # cross-checks: the HF-loop speculative decoding gives the same tau (same drafter, same target), and the
    # engine's AR greedy equals HF greedy on the INT4 target (bf16: up to near-ties)
    for x in bench['gsm8k'][:ar_check]:
        r = hf_spec(int4, dr['stage2'], x, S.eval_new, stop_token_ids=stops); hf_tau += r.acceptance_lengths
        ref_hf = greedy_generate(int4, x, S.eval_new, tok.eos_token_id); ref_e = eng.generate(x, S.eval_new, stops)
        ar_vs_hf.append(first_diff(ref_hf[0], ref_e[0]))
    save()
    # losslessness on the GSM8K test questions (100, partly the eval prompts), stage-2 drafter, 128 new tokens each:
    # first on the bf16 engine that served the eval (non-identical outputs record where they diverge and the target's
    # top-2 margin there), then on a float32 copy with TF32 off, where verify-16 and decode-1 round alike but for ~1e-6
    lossless = lambda e, sd, model, dtype: lossless_check(e, sd, model, tok, pr['lossless'][:n_lossless], dtype, stops)
    ll = lossless(eng, sds['stage2'], int4, 'bfloat16')
    save(lossless_extra=ll)
    if fp32: lossless32(work, out, n_lossless)
    merge(work, out)
    log('eval done (tau, decode speedup)', {k: {b: (round(o['tau'], 2), o['speedup_tpot'] and round(o['speedup_tpot'], 2)) for b, o in v.items()} for k, v in res.items()})

# ----------------------------------------------------------------------------------------- e2e: the drafter step's A/B
def w4a16_target(model, q: dict):
    """A copy of `model` (its linears already codes x scales, `apply_w4a16`) whose linears are `W4A16Linear` modules
    holding the W4A16 pack-quantized codes and scales of `q`: the same weights, multiplied by the INT4 kernels."""
    from effqwen.kernels import W4A16Linear
    m = copy.deepcopy(model); dt = next(m.parameters()).dtype; n = 0
    for k in [k for k in q if k.endswith('.weight_packed')]:
        name = k[:-len('.weight_packed')]; lin = m.get_submodule(name); sc = q[name + '.weight_scale']
        w4 = W4A16Linear(lin.in_features, lin.out_features, lin.bias is not None, lin.in_features // sc.shape[1], dt, DEV)
        w4.load_state_dict({'weight_packed': q[k], 'weight_scale': sc.to(dt), **({'bias': lin.bias.detach()} if lin.bias is not None else {})})
        m.set_submodule(name, w4); n += 1
    log(f'W4A16 target: {n} linears on the INT4 kernels')
    return m

def e2e(work: Path, out: Path, drafter_dir: Path, n_bench: int, n_long: int, windows: tuple[int, ...] = (), verify: tuple[int, ...] = ()):
    """True end-to-end speculative speedup on SmolLM2 of one trained drafter (a stage-2 drafter a `SOLO` chain packed,
    `drafters.tar.part*`), in one run: on the engine over the INT4 target as bf16 weights (codes x scales, cuBLAS: the
    A4 eval's target), per prompt the AR greedy, then speculative decoding with `StaticDrafter`'s fused step and with
    its plain one (pipelined loop); then (env E2E_W4, default on) on the engine over the same codes on the W4A16
    kernels (`W4A16Linear`), AR and the fused step. Wall and per-run times, τ, outputs equal to AR, the GPU ms of each
    recorded step and a kernel trace of each. Needs the bundle (assemble) and the drafter only: no training record.
    `windows` (env E2E_WINDOWS, e.g. 1024,256): also the fused step of the same drafter with that sliding window (A6's
    recipe: attention to the W context positions before each block), on the bf16 engine (runs `fused_swa<W>`);
    env E2E_PLAIN=0 leaves the plain step out. `verify` (env E2E_VERIFY, e.g. 8): also the fused steps on an engine over
    the same target that verifies that many rows (the drafter drafts its whole block; runs `v<w>_fused...`). Env
    E2E_PDL_VERIFY=1: also the fused steps on the same engine with its verify graph recorded under programmatic dependent
    launch (`effqwen.engine.PDL_STEPS` + verify; runs `pdlv_fused...`; the decode graph is already). Env E2E_ROUND_AB=1:
    also the fused steps on the same engine with each pipelined round issued op by op (no `effqwen.engine.ROUND_GRAPH`,
    no `ROUND_KERNELS`: the loop before session 34; runs `ops_fused...`). Writes
    $OUT/data/results/drafter_e2e_step_ab_gpu.json, with windows or verify widths drafter_e2e_swa_gpu.json."""
    from effqwen.dflash import load_drafter
    from effqwen.drafter_opt import clone_drafter
    from effqwen.engine import Engine, StaticDrafter, _gpu_ms, speculative_generate as eng_spec
    import effqwen.engine as E
    from effqwen.core import write_result
    from safetensors.torch import load_file
    from profile_steps import profile
    p, S = sizes()
    _, int4, tok = load_models(work, with_bf16=False)
    pr = load_prompts(work)
    bench = {b: [torch.tensor(x)[None].to(DEV) for x in xs[:n_long if b == 'long' else n_bench]] for b, xs in pr['bench'].items()}
    bench = {b: xs for b, xs in bench.items() if xs}
    d = load_drafter(drafter_dir, int4).to(DEV).to(next(int4.parameters()).dtype).eval()
    maxlen = max(x.shape[1] for xs in bench.values() for x in xs) + S.eval_new + 64
    taps = tuple(d.target_layer_ids)
    engines = {'': Engine(int4, max_seq_len=maxlen, tap_layers=taps)}
    if os.environ.get('E2E_W4', '1') == '1':
        engines['w4a16_'] = Engine(w4a16_target(int4, load_file(str(work/'bundle'/'qad_int4.safetensors'))), max_seq_len=maxlen, tap_layers=taps)
    for w in verify:                                   # the same target verifying fewer rows than the drafter's block
        engines[f'v{w}_'] = Engine(int4, max_seq_len=maxlen, tap_layers=taps, block_size=w)
    if os.environ.get('E2E_PDL_VERIFY') == '1' and 'verify' not in E.PDL_STEPS:   # the same engine with its verify graph
        own = E.PDL_STEPS                              # recorded under programmatic dependent launch too (PDL_STEPS is read
        try: E.PDL_STEPS = own + ('verify',); engines['pdlv_'] = Engine(int4, max_seq_len=maxlen, tap_layers=taps)   # at capture)
        finally: E.PDL_STEPS = own
    if os.environ.get('E2E_ROUND_AB') == '1':           # the same engine issuing each pipelined round op by op, as before
        engines['ops_'] = Engine(int4, max_seq_len=maxlen, tap_layers=taps)   # `ROUND_GRAPH` / `ROUND_KERNELS` (session 34)
        engines['ops_'].round_graph = engines['ops_'].round_kernels = False
    compiled = DEV == 'cuda'
    sds = {f"{'fused' if fz else 'plain'}": StaticDrafter(d, maxlen, compile=compiled, fused=fz)
           for fz in ((True, False) if os.environ.get('E2E_PLAIN', '1') == '1' else (True,))}
    for W in windows:                                   # the recipe's sliding-window drafter (A6): the same weights, keys within W
        dw = clone_drafter(d); dw.set_sliding_window(W); sds[f'fused_swa{W}'] = StaticDrafter(dw, maxlen, compile=compiled, fused=True)
    # the W4A16 engine: the fused step (full attention) only; a shorter verify: the fused steps (full and windowed)
    runs = {e: {k: sd for k, sd in sds.items() if not e or k == 'fused' or (e.startswith(('v', 'pdlv_', 'ops_')) and k.startswith('fused'))} for e in engines}
    stops, x = [tok.eos_token_id], bench['gsm8k'][0]
    step_ms, kprof, ts = {}, {}, {}
    for e, eng in engines.items():
        for y in [xs[0] for xs in bench.values()]:      # warm-up: a prompt of each benchmark (the compiled prompt projection sees several lengths)
            eng.generate(y, 32, stops); [eng_spec(eng, sd, y, 32, stops) for sd in runs[e].values()]
        for xs in bench.values():
            for y in xs: eng.prefill(y)                  # each prompt-size bucket records its prefill graph before the timing
    # verify and decode after the same GSM8K prompt (until this commit verify was timed after the last long prompt, decode
    # after a GSM8K one), in 3 rounds that alternate the engines: a drift of the GPU's clocks cannot favour the engine timed first
    for r in range(3):
        for e, eng in engines.items():
            eng.prefill(x); ts.setdefault(f'{e}verify', []).append(_gpu_ms(lambda: eng._step('verify'), 20))
            eng.prefill(x); ts.setdefault(f'{e}decode', []).append(_gpu_ms(lambda: eng._step('decode'), 20))
    step_ms |= {k: sorted(v)[len(v) // 2] for k, v in ts.items()}
    for e, eng in engines.items():
        # where a SmolLM2 step's GPU time goes: kernels of one eager decode / verify-16 step (traced outside the graphs,
        # so kernel times, not the graphs' launch gaps; scripts/profile_steps.py's grouping)
        eng.prefill(x)
        with torch.no_grad():                                      # (a compiled step called with grad on is traced again, for autograd)
            kprof[f'{e}decode'] = profile(lambda: eng._run(1, 'decode')); kprof[f'{e}verify'] = profile(lambda: eng._run(eng.block_size, 'verify'))
    eng = engines['']
    xl = bench['long'][0] if 'long' in bench else None
    for k, sd in sds.items():
        # the step after a GSM8K prompt; with windows, also after the first long prompt, where a window skips keys
        for pre, y in [('', x)] + ([('long_', xl)] if windows and xl is not None else []):
            eng.prefill(y); sd.start(); sd.propose(torch.cat([y.cpu(), eng.tok[:1].cpu()[None]], 1), eng._prefill_feats[None], S.block - 1)
            sd.n_new.zero_(); step_ms[f'draft_{pre}{k}'] = _gpu_ms(sd.graph.replay if sd.graph is not None else sd._fn, 20)
        if '_swa' not in k:
            with torch.no_grad(): kprof[f'draft_{k}'] = profile(sd._fn)
    log('step ms', {k: round(v, 3) for k, v in step_ms.items()})
    log('kernels per step', {k: (int(round(v['kernels'])), round(v['total_us'])) for k, v in kprof.items()})
    res = {}
    for e, eng in engines.items():
        res |= {e + k: {b: dict(lengths=[], lossless=0, n=0, ar_s=0.0, spec_s=0.0, new_tokens=0) for b in bench} for k in runs[e]}
        for b, y, ref, ar, pre, k, r, sp in timed_runs(eng, runs[e], bench, S.eval_new, stops): tally(res[e + k][b], ref, ar, pre, r, sp)
    finish(res)
    for v in res.values():
        sp = [speedups(o) for o in v.values()]
        v['all'] = dict(tau=sum(sum(o['lengths']) for o in v.values()) / max(1, sum(len(o['lengths']) for o in v.values())),
                        speedup_mean=sum(x['wall'] for x in sp) / len(sp), speedup_tps_mean=sum(x['tps'] for x in sp) / len(sp),
                        speedup_tpot_mean=sum(x['tpot'] for x in sp) / len(sp), lossless=sum(o['lossless'] for o in v.values()),
                        n=sum(o['n'] for o in v.values()))
    log('e2e (tau, decode speedup)', {k: {b: (round(o['tau'], 2), round(o.get('speedup_tpot', o.get('speedup_tpot_mean', 0)), 2)) for b, o in v.items()} for k, v in res.items()})
    doc = dict(eval=res, step_ms=step_ms, step_ms_rounds=ts, step_context_tokens=int(x.shape[1]), kernel_profile=kprof, drafter=str(drafter_dir), drafter_compiled=compiled, eval_new=S.eval_new,
               drafter_sha256=sha((drafter_dir/'model.safetensors').read_bytes()),   # which trained drafter (as sha256sum prints it for the weights file)
               targets={e or 'bf16': 'W4A16Linear (INT4 kernels)' if e == 'w4a16_' else 'bf16 nn.Linear holding codes x scales (cuBLAS)'
                        + (f', verifying {e[1:-1]} rows' if e.startswith('v') else '')
                        + (', verify graph under programmatic dependent launch' if e == 'pdlv_' else '')
                        + (', each pipelined round issued op by op (no round graph, no round kernels)' if e == 'ops_' else '') for e in engines},
               round_graph={e or 'bf16': bool(getattr(eng, 'round_graph', E.ROUND_GRAPH)) for e, eng in engines.items()},
               round_kernels={e or 'bf16': bool(E.round_kernels(eng)) for e, eng in engines.items()},
               pdl_steps=list(E.PDL_STEPS),
               eval_prompts={b: len(v) for b, v in bench.items()}, device=torch.cuda.get_device_name() if DEV == 'cuda' else 'cpu (dry run)',
               windows=list(windows), verify=list(verify), long_prompt_tokens=xl.shape[1] if xl is not None else None)
    os.environ['EFFQWEN_OUT'] = str(out)
    name = 'drafter_e2e_swa_gpu' if windows or verify else 'drafter_e2e_step_ab_gpu'   # the window / verify A/B is its own result (table)
    log('wrote', write_result(name if not TINY else name.replace('_gpu', '_dryrun'), doc, p, device=DEV))

# ------------------------------------------------------------------------------------------------------ A5 / A6
@torch.no_grad()
def continuation(eng, int4, x, n_new, stops, taps):
    "The INT4 target's greedy continuation of prompt x (engine, float32) and the target features of prompt + continuation."
    from effqwen.dflash import extract_context_feature
    ref = eng.generate(x, n_new, stops)
    full = torch.cat([x, ref.to(x.device)], 1)
    return full, extract_context_feature(int4(full, output_hidden_states=True).hidden_states, list(taps))

def opt(work: Path, out: Path, n_bench: int, n_long: int):
    """Tables A5 and A6 at the gpu profile (issue 5), on the trained stage-2 drafter: RTN / AWQ / GPTQ INT4 copies
    calibrated on INT4-regenerated conversations, then sliding windows on the long prompts. τ is replayed
    (`replay_acceptance`) on the INT4 target's greedy continuation of each prompt, float32 throughout (TF32 off), so
    the replay is the decoding loop; one real engine run per benchmark checks that. Step costs: the bf16 drafter on the
    engine's static drafter (CUDA graph), full attention vs each window, after a long prompt."""
    from effqwen.dflash import load_drafter
    from effqwen.drafter_opt import (conversation_tensors, drafter_calibration, drafter_group_size, quantize_drafter, layer_hessians,
                                     replay_acceptance, attention_cost)
    from effqwen.quant import IntQuantizer, rtn_quantize, hessian_error
    from effqwen.engine import Engine, StaticDrafter, _gpu_ms, speculative_generate as eng_spec
    from effqwen.model import chat_prompt
    from effqwen.core import write_result
    t0 = time.time(); p, S = sizes(); timings = {}
    if DEV == 'cuda': torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    _, int4, tok = load_models(work, dtype=torch.float32, with_bf16=False)
    base = load_drafter(work/'drafters'/'stage2', int4).to(DEV).float().eval()
    pr = load_prompts(work)
    stops = [tok.eos_token_id]
    # calibration: the first calib_convs INT4-regenerated conversations at natural length, 16 strided anchors each
    done = load_answers(work, 'int4', pr)
    templ = [chat_prompt(tok, x['prompt']) for x in pr['train']]
    idx = sorted(int(i) for i in done)[:S.calib_convs]
    conv = dict(prompt=[templ[i] for i in idx], text=[templ[i] + done[str(i)] + tok.eos_token for i in idx])
    t = time.time()
    calib = drafter_calibration(int4, [(a.to(DEV), m.to(DEV)) for a, m in conversation_tensors(conv, tok)], base.target_layer_ids, n_anchors=16)
    group = drafter_group_size(base, 128)
    drafters, timings['calibration'] = {'unquantized': base}, time.time() - t
    for m in ('rtn', 'awq', 'gptq'):
        t = time.time(); drafters[m], _ = quantize_drafter(base, m, calib, bits=4, group_size=group, n_grid=S.awq_n_grid); timings[f'ptq_{m}'] = time.time() - t
    herr = {}
    for n, g in layer_hessians(base, calib).items():
        W, Wg = g.weight.detach().float(), drafters['gptq'].get_submodule(n).weight.detach().float()
        herr[n] = dict(gptq=hessian_error(W, Wg, g.H), rtn=hessian_error(W, rtn_quantize(W, IntQuantizer(4, group))[0], g.H))
    log('GPTQ < RTN (Hessian-weighted error) on', sum(v['gptq'] < v['rtn'] for v in herr.values()), 'of', len(herr), 'layers')
    # continuations: gsm8k / humaneval (n_bench each) and long (n_long), INT4 target, float32 engine
    bench = {b: [torch.tensor(x)[None].to(DEV) for x in xs[:n_long if b == 'long' else n_bench]] for b, xs in pr['bench'].items()}
    maxlen = max(x.shape[1] for xs in bench.values() for x in xs) + S.eval_new + 2 * S.block + 64
    eng = Engine(int4, max_seq_len=maxlen, tap_layers=tuple(base.target_layer_ids))
    t = time.time(); conts = {b: [continuation(eng, int4, x, S.eval_new, stops, base.target_layer_ids) for x in xs] for b, xs in bench.items()}
    timings['continuations'] = time.time() - t
    tau = lambda L: sum(L) / max(1, len(L))
    # whole_block: the engine's StaticDrafter drafts its whole block on every round, the last ones too (fewer tokens left
    # than the block), so the replay does; drafting fewer masks there changes the tail rounds (drafter_domain_probe.py loop)
    t = time.time(); lens = {m: {b: [] for b in bench} for m in drafters}
    for b, xs in bench.items():
        for x, (full, f) in zip(xs, conts[b]):
            for m, d in drafters.items(): lens[m][b] += replay_acceptance(d, full, f, x.shape[1], stop_token_ids=stops, whole_block=True)
    timings['a5_replay'] = time.time() - t
    check = {}                                                    # the replay is the loop: one real engine run per benchmark
    sd0 = StaticDrafter(base, maxlen)
    for b, xs in bench.items():
        r = eng_spec(eng, sd0, xs[0], S.eval_new, stops)
        check[b] = r.acceptance_lengths == replay_acceptance(base, *conts[b][0], xs[0].shape[1], stop_token_ids=stops, whole_block=True)
    log('replay == engine loop:', check)
    ref_all = tau([l for L in lens['unquantized'].values() for l in L])
    a5 = [dict(drafter={'unquantized': 'unquantized (FP32)', 'rtn': 'RTN', 'awq': 'AWQ', 'gptq': 'GPTQ'}[m], weights='–' if m == 'unquantized' else f'INT4 sym g{group}',
               **{f'tau_{b}': tau(L) for b, L in lens[m].items()}, tau_all=tau([l for L in lens[m].values() for l in L]),
               dtau=100 * (tau([l for L in lens[m].values() for l in L]) / ref_all - 1), quant_s=timings.get(f'ptq_{m}')) for m in drafters]
    log('A5', [(r['drafter'], round(r['tau_all'], 3), round(r['dtau'], 2)) for r in a5])
    # A6: windows on the long prompts, unquantized and GPTQ; step cost of the bf16 drafter on the static drafter
    a = base.layers[0].self_attn; a6 = []
    int4_b = copy.deepcopy(int4).to(torch.bfloat16)               # the bf16 drafter's embedding and head
    ctx = round(sum(x.shape[1] + S.eval_new / 2 for x in bench['long']) / max(1, len(bench['long'])))
    x = bench['long'][0]; eng.prefill(x); ids0, f0 = torch.cat([x.cpu(), eng.tok[:1].cpu()[None]], 1), eng._prefill_feats[None]
    for dname in ('unquantized', 'gptq'):
        d = drafters[dname]
        for W in (None, *S.windows):
            d.set_sliding_window(W)
            L = [l for xx, (full, f) in zip(bench['long'], conts['long']) for l in replay_acceptance(d, full, f, xx.shape[1], stop_token_ids=stops, whole_block=True)]
            step = None
            if dname == 'unquantized':                            # the serving dtype: bf16 copy on the engine's static drafter
                db = copy.deepcopy(d).to(torch.bfloat16).bind(int4_b); sdw = StaticDrafter(db, maxlen); sdw.start()
                sdw.propose(ids0, f0.to(torch.bfloat16), S.block - 1); sdw.n_new.zero_()
                step = _gpu_ms(sdw.graph.replay if sdw.graph is not None else sdw._fn, 20); del sdw, db
            c = attention_cost(ctx, S.block, W, a.nh, a.d, len(d.layers))
            a6.append(dict(window='full' if W is None else W, drafter='unquantized' if dname == 'unquantized' else f'GPTQ W4 g{group}', tau=tau(L),
                           keys=c['keys_computed'], attn_mflops=c['flops'] / 1e6, step_ms=step))
        d.set_sliding_window(None)
    for r in a6: r['dtau'] = 100 * (r['tau'] / next(x['tau'] for x in a6 if x['drafter'] == r['drafter'] and x['window'] == 'full') - 1)
    log('A6', [(r['drafter'], r['window'], round(r['tau'], 3), r['step_ms']) for r in a6])
    doc = dict(a5=a5, a5_lengths=lens, a6=a6, group=group, hessian_error=herr, replay_equals_engine_loop=check, replay_whole_block=True,
               calibration=dict(conversations=len(calib), tokens=sum(c.ids.shape[1] for c in calib), blocks=sum(c.anchors.numel() for c in calib)),
               eval=dict(prompts={b: len(v) for b, v in bench.items()}, long_tokens=[x.shape[1] for x in bench['long']], new_tokens=S.eval_new, mean_long_ctx=ctx),
               drafter=load_train(work)['drafter'], timings_s=timings, wall_s=time.time() - t0,
               device=torch.cuda.get_device_name() if DEV == 'cuda' else 'cpu (dry run)')
    os.environ['EFFQWEN_OUT'] = str(out)
    log('wrote', write_result('drafter_opt_gpu' if not TINY else 'drafter_opt_gpu_dryrun', doc, p, device=DEV))

def render_opt(path: Path):
    "Tables A5 and A6 at the gpu profile from the committed result."
    from effqwen.core import render_table, write_table, provenance_line
    doc = json.loads(path.read_text()); ev = doc['eval']; benches = list(ev['prompts'])
    cols5 = ([('drafter', 'drafter', '{}'), ('weights', 'weights', '{}')] + [(f'tau_{b}', f'τ {b}', '{:.2f}') for b in benches]
             + [('tau_all', 'τ all', '{:.3f}'), ('dtau', 'Δτ vs unquantized', '{:+.1f}%'), ('quant_s', 'quantize s', '{:.1f}')])
    herr = doc['hessian_error']; ratio = sum(v['gptq'] / v['rtn'] for v in herr.values()) / len(herr)
    chk = doc['replay_equals_engine_loop']; wb = doc.get('replay_whole_block', False)
    lc = path.with_name('drafter_replay_engine_check.json')       # the engine's loop vs both replays, on the CPU
    lc = json.loads(lc.read_text()) if lc.exists() else None
    why = ('' if wb or all(chk.values()) or not lc else
           f" (this replay drafted a shorter block on a last round with fewer tokens left, as the reference loop `effqwen.specdec` did until "
           f"session 23; the engine drafts its "
           f"whole block on every round: on {len(lc['rows'])} GSM8K / HumanEval prompts the engine's loop equals the whole-block replay round for "
           f"round on {sum(r['fused_equals_replay_whole_block'] for r in lc['rows'])} and this replay on "
           f"{sum(r['fused_equals_replay'] for r in lc['rows'])}, the first difference within the last "
           f"{max(r['fused_rounds'] - r['fused_first_different_round'] for r in lc['rows'] if r['fused_first_different_round'] is not None)} rounds "
           f"(`drafter_replay_engine_check.json`, CPU float32); `opt` and `replay_acceptance` now replay the whole block)")
    cap5 = (f"Stage-2 drafter ({doc['drafter']['num_hidden_layers']} layers), measured at git `{doc['provenance']['git_sha'][:12]}`, against the QAD INT4 SmolLM2 target; τ replayed on the "
            f"target's greedy continuation (float32, TF32 off) of {', '.join(f'{b} {n}' for b, n in ev['prompts'].items())} prompts × {ev['new_tokens']} "
            f"tokens{', drafting the whole block every round as the engine does' if wb else ''}; the replay equals a real engine run on the first prompt of each benchmark: "
            f"{', '.join(f'{b} ' + ('yes' if v else 'no') for b, v in chk.items())}{why}. Calibration: "
            f"{doc['calibration']['conversations']} INT4-regenerated conversations at natural length ({doc['calibration']['tokens']:,} tokens, "
            f"{doc['calibration']['blocks']} blocks). GPTQ/RTN Hessian-weighted error, mean over {len(herr)} linears: {ratio:.3f} "
            f"(GPTQ lower on {sum(v['gptq'] < v['rtn'] for v in herr.values())}/{len(herr)}).")
    cols6 = [('window', 'window', '{}'), ('drafter', 'drafter', '{}'), ('tau', 'τ long', '{:.3f}'), ('dtau', 'Δτ vs full', '{:+.1f}%'),
             ('keys', 'keys computed / query', '{:.0f}'), ('attn_mflops', 'attention MFLOP / round', '{:.1f}'), ('step_ms', 'bf16 drafter step ms', '{:.3f}')]
    rows6 = doc['a6']
    cap6 = (f"Long prompts ({min(ev['long_tokens'])}–{max(ev['long_tokens'])} tokens, {ev['prompts'].get('long')} prompts × {ev['new_tokens']} new tokens), "
            f"windows below the context (all active). Keys and FLOPs at the mean context {ev['mean_long_ctx']} tokens (analytic, `attention_cost`). "
            "Step: GPU time of one recorded drafter step (CUDA graph; CUDA events, median of 20) of the bf16 copy of the unquantized drafter after the "
            "first long prompt; the W4 drafter runs fake-quantized weights (no W4 kernel in the static drafter), so only its τ is reported.")
    tp = path.with_name('drafter_training_gpu.json')                # the run that trained this drafter: its chunk length
    sp = path.with_name('drafter_same_check.json')                  # or a later run whose drafter replays as this one did
    sc = json.loads(sp.read_text()) if sp.exists() else None
    tr = json.loads(tp.read_text()) if tp.exists() else None
    # the check counts for the committed A4 run only if it replayed that run's drafter: it names the A4 run it was made beside
    same = bool(sc and sc['equal'] and doc['provenance']['git_sha'][:12] in sc['against'] and tr
                and sc.get('a4_run', {}).get('date') == tr['provenance']['date'])
    if same:
        cap5 += (f" The committed A4 run trained the same drafter: replayed on the first {sc['prompts']} GSM8K prompts, its stage-2 drafter "
                 f"accepts the same length in each of {sc['rounds']} rounds as the one measured here (`drafter_same_check.json`).")
    elif tr and tr['provenance']['git_sha'] != doc['provenance']['git_sha']:
        cap5 += (f" This is not the committed A4 run's drafter (git `{tr['provenance']['git_sha'][:12]}`): A5 / A6 were measured on an earlier run's "
                 "(`drafter_training_gpu_session_runs.json`) and not rerun since.")
    # the training run of this drafter: the committed A4 run, or the archived one of the same commit
    arch = path.with_name('drafter_training_gpu_session_runs.json')
    runs = ([dict(sizes=tr['train']['sizes'], provenance=tr['provenance'], file='drafter_training_gpu.json')] if tr else []) + (
        [dict(r, file=arch.name) for r in json.loads(arch.read_text())['runs']] if arch.exists() else [])
    own = next((r for r in runs if r['provenance']['git_sha'] == doc['provenance']['git_sha']), None) or (runs[0] if same else None)
    if own:
        cap6 += (f" The drafter trained on {own['sizes']['pack_len']}-token chunks (`{own['file']}`), shorter than these "
                 "prompts: with full attention it reads keys farther back than any training position.")
    prof = doc['provenance']['profile']
    md5 = f"### A5 (gpu profile): drafter PTQ, {doc['provenance']['device']}\n\n" + render_table(doc['a5'], cols5) + '\n' + cap5 + '\n\n' + provenance_line(doc) + '\n'
    md6 = f"### A6 (gpu profile): drafter sliding-window attention on long inputs, {doc['provenance']['device']}\n\n" + render_table(rows6, cols6) + '\n' + cap6 + '\n\n' + provenance_line(doc) + '\n'
    print(write_table('drafter_a5_gpu', md5, prof), write_table('drafter_a6_gpu', md6, prof)); print(md5); print(md6)

# ----------------------------------------------------------------------------------------------------------- render
def _margins(ll: dict) -> str:
    "min / median / max of the target's top-2 logit margins where speculative and AR outputs first differ."
    m = sorted(x['margin'] for x in ll['divergence'])
    return f"min {m[0]:.3f}, median {m[len(m) // 2]:.3f}, max {m[-1]:.3f}"

def _round_costs(doc: dict) -> str:
    "Where a speculative round's time goes: GPU time of each recorded step vs the loop's wall time per round (stage 2)."
    sm, o = doc.get('step_ms'), doc['eval']['stage2']
    if not sm or not all('rounds' in v for v in o.values()): return ''
    R = sum(v['rounds'] for v in o.values())
    dr, vr = (sum(v[k] for v in o.values()) / R * 1e3 for k in ('draft_s', 'verify_s'))
    return (f"Step costs (GPU time, CUDA events): decode {sm['decode']:.2f} ms, verify-16 {sm['verify']:.2f} ms, commit {sm['commit']:.2f} ms, "
            f"drafter step {sm['draft']:.2f} ms{' (torch.compiled)' if doc.get('drafter_compiled') else ''}; "
            + (f"in the pipelined loop (rounds queued on the device, `engine.PIPELINED`) a stage-2 round took {dr + vr:.2f} ms between CUDA events "
               f"(draft {dr:.2f} ms, verify + accept + commit {vr:.2f} ms)." if all(v.get('pipelined_runs') == v['n'] for v in o.values()) else
               f"in the loop a stage-2 round took {dr + vr:.2f} ms of wall time (draft {dr:.2f} ms incl. the host copy of the proposal, verify + accept + commit {vr:.2f} ms)."))

def _asked_steps(tr: dict) -> str:
    "The steps asked for, and the gpu DrafterSize's when env overrides (DRAFTER_STEPS1/2) asked for others."
    from effqwen.core import get_profile
    from effqwen.drafter_opt import drafter_size
    S, ps = drafter_size(get_profile('gpu')), tr['profile_steps']
    asked = f"asked {ps['stage1']}/{ps['stage2']}"
    return asked if (S.steps1, S.steps2) == (ps['stage1'], ps['stage2']) else f"{asked}: DRAFTER_STEPS1/2 over the gpu profile's {S.steps1}/{S.steps2}"

def speed_table(ev: dict, labels: dict, benches: list) -> tuple:
    """Rows, columns and caption of a true end-to-end speed table: one row per proposer in `labels` ({key: label}) of
    the eval record `ev`. The per-benchmark columns are DFlash's decode speedup (`speedups`' tpot) where every record has
    it, else the output-tokens-per-second speedup (records written before per-prompt times were kept)."""
    benches = [b for b in benches if all(ev[k][b]['n'] for k in labels)]   # (a dry run's empty benchmarks left out)
    sp = {k: {b: speedups(ev[k][b]) for b in benches} for k in labels}
    main = 'tpot' if all(x['tpot'] is not None for v in sp.values() for x in v.values()) else 'tps'
    mean = lambda k, m: sum(sp[k][b][m] for b in benches) / len(benches)
    rows = []
    for k, lab in labels.items():
        o = ev[k]
        ar_tok, sp_tok = sum(o[b]['new_tokens'] for b in benches), sum(sp[k][b]['spec_tokens'] for b in benches)
        ar_s, sp_s = sum(o[b]['ar_s'] for b in benches), sum(o[b]['spec_s'] for b in benches)
        rows.append(dict(drafter=lab, **{f'x_{b}': sp[k][b][main] for b in benches}, mean3=mean(k, main),
                         tps3=mean(k, 'tps'), wall3=mean(k, 'wall'), tok_ratio=sp_tok / max(1, ar_tok),
                         tok_s_ar=ar_tok / ar_s, tok_s_spec=sp_tok / sp_s,
                         pre_ar=sum(o[b].get('ar_prefill_s', 0) for b in benches) / sum(o[b]['n'] for b in benches) * 1e3,
                         pre_spec=sum(o[b].get('prefill_s', 0) for b in benches) / sum(o[b]['n'] for b in benches) * 1e3,
                         same=f"{sum(o[b]['lossless'] for b in benches)}/{sum(o[b]['n'] for b in benches)}"))
    cols = ([('drafter', 'drafter', '{}')] + [(f'x_{b}', f'speedup {b}', '{:.2f}x') for b in benches] + [('mean3', f'mean of {len(benches)}', '{:.2f}x')]
            + ([('tps3', f'tok/s speedup, mean of {len(benches)}', '{:.2f}x')] if main == 'tpot' else [])
            + [('wall3', f'wall speedup, mean of {len(benches)}', '{:.2f}x'), ('tok_ratio', 'spec / AR output tokens', '{:.2f}'),
               ('tok_s_ar', 'AR tok/s', '{:.0f}'), ('tok_s_spec', 'spec tok/s', '{:.0f}')]
            + ([('pre_ar', 'prefill ms AR', '{:.2f}'), ('pre_spec', 'prefill ms spec', '{:.2f}')] if main == 'tpot' else [])
            + [('same', 'outputs identical', '{}')])
    cap = (("Speedup = DFlash's decode speedup (its benchmark.py): the mean over a benchmark's prompts of the AR time per output token "
            "over the mean of the speculative one, each run's decode time (prefill excluded) over its own output tokens. "
            "tok/s speedup: output tokens per second, prefill included, each run's own tokens. Prefill ms: per prompt; the speculative "
            "run's includes the drafter's projection of the prompt's context rows (`StaticDrafter.prefill_context`, queued behind the "
            "target's prefill), so the decode-only ratio does not see that cost and the tok/s ratio does. ") if main == 'tpot' else
           ("Speedup = output tokens per second of greedy speculative decoding / of the engine's own greedy decoding, prefill included, "
            "each run counted with its own output tokens (this record kept no per-prompt decode times, so DFlash's decode-only ratio is not available). "))
    cap += ("Wall speedup: AR wall time / speculative wall time over the same prompts and token budget, whatever each run's output length. "
            "Both decoders stop at the end-of-sequence token or the budget; in bf16 a speculative output can leave the AR one "
            "(verify-16 and decode-1 round differently, and greedy follows near-ties: the float32 check of A4 shows the loop itself is lossless), "
            "and then the two runs stop after different numbers of tokens, which the wall ratio counts as speed. "
            "CUDA graphs for both, per benchmark as in A4; measured, not projected.")
    return rows, cols, cap

def render(path: Path):
    "Tables from the committed result: A4 at the gpu profile, and the true end-to-end speculative speedup on SmolLM2."
    from effqwen.core import render_table, write_table, provenance_line
    doc = json.loads(path.read_text()); tr, ev = doc['train'], doc['eval']
    LABEL = {'direct': 'direct on INT4', 'stage1': 'stage 1 (BF16)', 'stage2': 'stage 2 (BF16 → INT4)'}
    benches = list(doc['eval_prompts'])
    rows, present = [], [k for k in ('direct', 'stage1', 'stage2') if k in ev]   # (a run without direct: SOLO_DRAFTERS)
    for k in present:
        allL = [l for o in ev[k].values() for l in o['lengths']]
        ba = tr['block_accuracy'].get(k)                             # (absent where the accuracy pass failed: block_accuracy_error)
        rows.append(dict(drafter=LABEL[k], steps=tr['steps'][k], **{f'tau_{b}': ev[k][b]['tau'] for b in benches},
                         tau_all=sum(allL) / max(1, len(allL)), acc1_train=ba['train']['acc'][0] if ba else None, acc1_held=ba['held_out']['acc'][0] if ba else None,
                         walk_held=ba['held_out'].get('walk_tau') if ba else None,
                         lossless=f"{sum(o['lossless'] for o in ev[k].values())}/{sum(o['n'] for o in ev[k].values())}"))
    d, ll = tr['data'], doc.get('lossless_extra')
    cap = (f"τ: tokens committed per target forward (block {tr['drafter']['block_size']}) of greedy speculative decoding on the engine, "
           f"INT4 target = the QAD g32 codes × scales from 21_qad (cpu run) on SmolLM2, bf16. Eval prompts: "
           + ', '.join(f'{b} {n}' for b, n in doc['eval_prompts'].items())
           + (f" (long {min(doc['long_prompt_tokens'])}–{max(doc['long_prompt_tokens'])} tokens)" if doc['long_prompt_tokens'] else '')
           + f", {doc['eval_new']} new tokens. Drafter: {tr['drafter']['num_hidden_layers']} layers, taps {tr['drafter']['target_layer_ids']}; "
           f"steps capped by a {tr['budget_s']:.0f} s training budget ({_asked_steps(tr)}), "
           f"{tr['step_ms']:.0f} ms/step. Data: BF16 regen {d['bf16']['conversations']} conversations ({d['bf16']['response_tokens']:,} response tokens), "
           f"INT4 regen {d['int4']['conversations']} ({d['int4']['response_tokens']:,})"
           + (f", prompts from `{'drafter_prompts' if d['bf16']['prompt_pool'] == 'mixed' else 'train_prompts'}` ({d['bf16']['source']})" if 'prompt_pool' in d['bf16'] else '')
           + f". pos-1 acc: teacher-forced first-position accuracy on "
           f"training vs held-out chunks ("
           + ("a seeded random 5% of each regeneration's chunks" if d['bf16'].get('held_out', 'tail').startswith('random') else
              "the last 5% of each regeneration's chunks, in prompt order"
              + (f"; stage 1's held-out chunks answer the last prompts of the extra file `{x['file']}` (sha256 {x['sha256'][:12]}), so its held-out "
                 "figures compare across runs only with the same file" if (x := d['bf16'].get('extra_prompts')) and x.get('used') else ''))
           + "; stage 2's held-out INT4 answers are to prompts whose BF16 answers stage 1 trained on). "
           + (("Held-out loss along training (loss on the first 64 held-out chunks at 5%, 50% and 100% of the steps): " + '; '.join(
               f"{LABEL[k]} " + ' → '.join(f"{c[max(0, round(f * len(c)) - 1)][1]:.3f}" for f in (0.05, 0.5, 1.0))
               + f" (lowest {min(x[1] for x in c):.3f} at step {min(c, key=lambda x: x[1])[0]})"
               for k, c in tr['held_curve'].items() if c) + '. ') if any(tr.get('held_curve', {}).values()) else '')
           + (f"Extra losslessness check (stage 2, GSM8K prompts × 128 tokens, identical to the engine's own greedy output): bf16 {ll['identical']}/{ll['n']}"
              + (f" (first divergences at target top-2 logit margins {_margins(ll)})" if ll.get('divergence') else '')
              + (f"; float32, TF32 off: {doc['lossless_fp32']['identical']}/{doc['lossless_fp32']['n']}" + (f" (margins {_margins(doc['lossless_fp32'])})" if doc['lossless_fp32'].get('divergence') else '')
                 if doc.get('lossless_fp32') else '') + '. '
              if ll and ll['n'] else 'Extra 100-prompt losslessness check: not run in this run. ')
           + (f"HF-loop τ on {doc['hf_loop_prompts']} prompts: {doc['hf_loop_tau_stage2']:.2f}. " if doc['hf_loop_prompts'] else '')
           + f"Drafters trained in {tr.get('precision', 'bf16 autocast').replace('fp32', 'float32 (TF32 matmuls)')}, lr {tr['sizes']['lr']:g} (stage 2: {tr['sizes']['lr2']:g}). "
           + "Lossless = the speculative output equals the engine's own greedy output token for token (bf16 target on the GPU)."
           + (f" Run: {doc['provenance']['note']}" if doc['provenance'].get('note') else ''))
    cols = ([('drafter', 'drafter', '{}'), ('steps', 'steps', '{}')] + [(f'tau_{b}', f'τ {b}', '{:.2f}') for b in benches]
            + [('tau_all', 'τ all', '{:.2f}'), ('acc1_train', 'pos-1 acc train', '{:.3f}'), ('acc1_held', 'pos-1 acc held-out', '{:.3f}')]
            + ([('walk_held', 'walk τ held-out', '{:.2f}')] if all(r['walk_held'] is not None for r in rows) else []) + [('lossless', 'lossless', '{}')])
    md = f"### A4 (gpu profile): drafter training on SmolLM2, {doc['provenance']['device']}\n\n" + render_table(rows, cols) + '\n' + cap + '\n\n' + provenance_line(doc) + '\n'
    rows2, cols2, cap2 = speed_table(ev, {k: LABEL[k] for k in present}, benches)
    md2 = (f"### A2 (true end-to-end): speculative vs autoregressive decoding on the engine, SmolLM2 INT4 (QAD) target, {doc['provenance']['device']}\n\n"
           + render_table(rows2, cols2) + '\n' + cap2 + ' '
           + _round_costs(doc) + '\n\n' + provenance_line(doc) + '\n')
    prof = doc['provenance']['profile']
    print(write_table('drafter_a4_gpu', md, prof), write_table('latency_a2_true_smollm2', md2, prof))
    print(md); print(md2)
    import matplotlib; matplotlib.use('Agg')
    from effqwen.core import save_figure
    from effqwen.drafter_opt import tau_distribution_figure
    fig = tau_distribution_figure({k: ev[k] for k in present}, tr['drafter']['block_size'], {k: LABEL[k] for k in present}, doc['eval_prompts'],
                                  f"SmolLM2: tokens committed per round on the INT4 target, gpu profile "
                                  f"({doc['provenance']['device']}, {doc['provenance']['date'][:10]}, git {doc['provenance']['git_sha'][:8]})")
    print(save_figure(fig, 'drafter_tau_gpu', prof))

def _frag_why() -> str:
    "Why SmolLM2's QAD linears (g32, hidden 576) take no fragment kernel: `fragment_supported` on such a layer."
    from effqwen.kernels import W4A16Linear
    from effqwen.gluon import fragment_supported
    return fragment_supported(W4A16Linear(576, 1536, group_size=32, device='cpu'))

def _w4_kernels(doc: dict) -> str:
    "The W4A16 kernels the trace of the W4A16 engine's decode and verify steps shows."
    kp = doc['kernel_profile']
    name = lambda k: next(t['name'] for t in kp[k]['top'] if 'w4a16' in t['name'])
    return f"`{name('w4a16_decode')}` at 1 row and `{name('w4a16_verify')}` at 16"

def _round_split(ev: dict) -> str:
    "Where the fused step's speculative decode time went per prompt (bf16 engine): rounds, the first round, time outside the rounds."
    o = ev.get('fused', {})
    if not o or not all('round0_draft_s' in v for b, v in o.items() if b != 'all'): return ''
    bs = [b for b in o if b != 'all']
    f = lambda b: (o[b]['rounds'] - o[b]['n'], (o[b]['draft_s'] - o[b]['round0_draft_s']) * 1e3, (o[b]['verify_s'] - o[b]['round0_verify_s']) * 1e3)
    rg = all(o[b].get('round_graph_runs') == o[b]['n'] for b in bs)         # later rounds one graph each: their time is all in the second part
    later = (lambda b: f"later {(f(b)[1] + f(b)[2]) / f(b)[0]:.3f} ms (one graph)") if rg else (lambda b: f"later {f(b)[1] / f(b)[0]:.3f} + {f(b)[2] / f(b)[0]:.3f} ms")
    return (" Per prompt, fused step on the bf16 engine (CUDA events; a later round = "
            + ("one recorded graph of draft, verify, accept and commit (`ROUND_GRAPH`)" if rg else "draft + verify/accept/commit")
            + "; the first round also takes the prompt's context rows where they were not projected during the prefill; outside = the loop's set-up and the one queued "
            "round that turns out not to be needed): " + '; '.join(
        f"{b} {o[b]['rounds'] / o[b]['n']:.0f} rounds, {later(b)}, "
        f"first {o[b]['round0_draft_s'] / o[b]['n'] * 1e3:.2f} + {o[b]['round0_verify_s'] / o[b]['n'] * 1e3:.2f} ms, "
        f"outside {o[b]['unmarked_s'] / o[b]['n'] * 1e3:.2f} ms" for b in bs) + '.')

def _train_line(tr: dict|None) -> str:
    "A caption's sentence on the training record a `record-e2e` result carries (none: '')."
    if not tr: return ''
    init = (tr.get('init') or {}).get('stage1')
    steps = ', '.join(f"{k} {n:,}" + (f" (after {init['trained_by']['steps']:,} steps in earlier leases, the last in session {init['trained_by']['session']})"
                                      if k == 'stage1' and init and init.get('trained_by') else '') for k, n in tr['steps'].items())
    data = '; '.join(f"{k}: {v['conversations']:,} answers, {v['chunks']:,} chunks of {tr['sizes']['pack_len']:,} tokens, {v.get('prompts_over_2048_tokens', 0):,} prompts over 2,048 tokens"
                     for k, v in tr['data'].items())
    walk = ', '.join(f"{k} {v['held_out']['walk_tau']:.2f}" for k, v in tr.get('block_accuracy', {}).items() if 'walk_tau' in v.get('held_out', {}))
    attn = ' (attention in bf16, `DRAFTER_ATTN_DTYPE`)' if tr.get('attention_dtype') == 'bfloat16' else ''
    return (f" Training (the record in the result's `train`): steps {steps}, {tr['step_ms']:.0f} ms a step{attn}; data {data}"
            + (f"; τ of the decoding loop replayed on held-out chunks of the training data (`walk_tau`): {walk}" if walk else '') + '.')

def render_e2e(path: Path):
    "Table of the drafter step's end-to-end A/B (`e2e`): the fused and the plain StaticDrafter step on the same drafter."
    from effqwen.core import render_table, write_table, provenance_line
    doc = json.loads(path.read_text()); ev, sm = doc['eval'], doc['step_ms']
    benches = [b for b in doc['eval_prompts'] if doc['eval_prompts'][b]]
    eng_of = lambda k: k.split('_')[0] + '_' if k.startswith(('w4a16_', 'v', 'pdlv_', 'ops_')) else ''   # the engine: '', 'w4a16_', 'v8_', 'pdlv_', 'ops_'
    step_of = lambda k: k.removeprefix(eng_of(k)).split('_swa')[0]
    labels = {k: ('W4A16 kernels' if eng_of(k) == 'w4a16_' else 'bf16 codes × scales') + f", {step_of(k)} step"
                 + (f", sliding window {k.split('_swa')[1]}" if '_swa' in k else '')
                 + (f", verify {eng_of(k)[1:-1]}" if eng_of(k).startswith('v') else '')
                 + (', verify under PDL' if eng_of(k) == 'pdlv_' else '')
                 + (', rounds op by op' if eng_of(k) == 'ops_' else '') for k in ev}
    rows, cols, cap = speed_table(ev, labels, benches)
    for r, k in zip(rows, labels):
        e = eng_of(k); r['step'] = sm[f"draft_{k.removeprefix(e)}"]; r['tau'] = ev[k]['all']['tau']
        r['decode'], r['verify'] = sm[f'{e}decode'], sm[f'{e}verify']
    cols = cols[:1] + [('decode', 'decode ms', '{:.3f}'), ('verify', 'verify ms (16 rows unless named)', '{:.3f}'), ('step', 'drafter step ms', '{:.3f}'), ('tau', 'τ', '{:.2f}')] + cols[1:]
    what = ("the fused `StaticDrafter` step with full attention vs sliding windows (A6's recipe: each block attends to the "
            "W context positions before it)" + (f", verify 16 vs {' / '.join(map(str, doc['verify']))} rows" if doc.get('verify') else '')
            if doc.get('windows') else f"verify 16 vs {' / '.join(map(str, doc['verify']))} rows" if doc.get('verify') else
            "the fused vs the plain `StaticDrafter` step, bf16 codes × scales vs the W4A16 kernels")
    md = (f"### A2 (true end-to-end) on SmolLM2, INT4 (QAD) target: {what}, {doc['provenance']['device']}\n\n"
          + render_table(rows, cols) + '\n' + cap
          + " τ per benchmark (" + '/'.join(benches) + "): " + '; '.join(f"{labels[k].split(', ', 1)[1]}{' (W4A16 kernels)' if eng_of(k) == 'w4a16_' else ''} "
                                                                 + '/'.join(f"{ev[k][b]['tau']:.2f}" for b in benches) for k in ev) + '.'
          + f" One stage-2 drafter (`{Path(doc['drafter']).name}`{', torch.compiled, CUDA graph' if doc.get('drafter_compiled') else ''}{', weights sha256 ' + doc['drafter_sha256'][:12] if doc.get('drafter_sha256') else ''}), per prompt AR then each step; "
          + ', '.join(f'{b} {n}' for b, n in doc['eval_prompts'].items()) + f" prompts, {doc['eval_new']} new tokens. "
          + "Targets: " + '; '.join(f"{k.rstrip('_')}: {v}" for k, v in doc.get('targets', {'bf16': 'bf16 nn.Linear holding codes x scales (cuBLAS)'}).items())
          + (f" (its linears run {_w4_kernels(doc)}; no Gluon fragment kernel: {_frag_why()})" if 'w4a16_decode' in doc.get('kernel_profile', {}) else '')
          + ". Step costs: GPU time of the recorded graph, median of 20"
          + (f" replays; decode and verify after the same {doc['step_context_tokens']}-token GSM8K prompt, median of 3 rounds alternating the engines"
             if doc.get('step_context_tokens') else " replays; this run timed verify after the last long prompt and decode after a GSM8K prompt, one engine after the other")
          + (f"; the drafter step after the first long prompt ({doc['long_prompt_tokens']} tokens): "
             + ', '.join(f"{labels[k].split(', ', 1)[1]} {v:.3f} ms" for k, v in ((k, sm[f'draft_long_{k}']) for k in ev if f'draft_long_{k}' in sm))
             if any(k.startswith('draft_long_') for k in sm) else '') + '.' + _round_split(ev)
          + (' Kernels per step, traced eagerly (kernel time, no launch gaps): ' + '; '.join(
              f"{k.replace('_', ' ')} {v['kernels']:.0f} kernels, {v['total_us']:.0f} µs (" + ', '.join(f"{g} {x['us']:.0f}" for g, x in list(v['groups'].items())[:3]) + ')'
              for k, v in doc['kernel_profile'].items()) + '.' if doc.get('kernel_profile') else '')
          + _train_line(doc.get('train'))
          + (f" Run: {doc['provenance']['note']}" if doc['provenance'].get('note') else '')
          + '\n\n' + provenance_line(doc) + '\n')
    table = 'latency_a2_true_smollm2_' + path.stem.removeprefix('drafter_e2e_').removesuffix('_gpu')   # step_ab | swa
    print(write_table(table, md, doc['provenance']['profile'])); print(md)

def refit(train_f: Path, e2e_fs: list, note: str, out: Path = Path('data/results/drafter_stage2_refit_gpu.json')):
    """A stage-2 drafter trained again on its own (`train --drafters stage2`, from the committed run's stage 1) and its
    true end-to-end A/B against the committed stage 2 (`e2e` on each, back to back on one lease): one result, the
    training record (`train_stage2.json` as the device wrote it) and each e2e file whole (the committed stage 2's first)."""
    from effqwen.core import atomic_write
    if not note: raise ValueError('refit: --note is empty: say which commands and data made the run')
    tr = json.loads(Path(train_f).read_text())
    if 'stage2' not in tr.get('steps', {}): raise ValueError(f'refit: {train_f} is no stage-2 training record (steps: {tr.get("steps")})')
    runs = [json.loads(Path(f).read_text()) for f in e2e_fs]
    if not runs: raise ValueError('refit: name the e2e files of the A/B (--e2e F [F ...])')
    prov = dict(runs[-1]['provenance'], note=note)
    doc = dict(provenance=prov, train=tr, e2e=runs)
    atomic_write(out, json.dumps(doc, indent=1) + '\n'); log(f'{out}: written ({len(runs)} e2e runs)')

def render_refit(path: Path):
    "Table drafter_a4_refit_gpu: τ and the true end-to-end speedup of each drafter of the refit's A/B, by attention."
    from effqwen.core import render_table, write_table, provenance_line
    doc = json.loads(path.read_text()); tr = doc['train']
    a4 = json.loads(Path('data/results/drafter_training_gpu.json').read_text())
    rows = []
    for i, run in enumerate(doc['e2e']):                           # `refit --e2e`: the committed stage 2's run first, then the refit's
        ev, who = run['eval'], ('stage 2 of the committed A4 run' if i == 0 else 'stage 2 refit')
        benches = [b for b in run['eval_prompts'] if run['eval_prompts'][b]]
        for k in ev:
            sp = {b: speedups(ev[k][b])['tpot'] for b in benches}
            rows.append(dict(drafter=f"{who} (sha256 {run['drafter_sha256'][:12]})", attn=k.replace('fused', 'full').replace('full_swa', 'window '),
                             **{f'tau_{b}': ev[k][b]['tau'] for b in benches}, tau_all=ev[k]['all']['tau'],
                             **{f'x_{b}': sp[b] for b in benches}, mean3=sum(sp.values()) / len(sp), date=run['provenance']['date'][11:19]))
    cols = ([('drafter', 'drafter', '{}'), ('attn', 'attention', '{}')] + [(f'tau_{b}', f'τ {b}', '{:.2f}') for b in benches]
            + [('tau_all', 'τ all', '{:.2f}')] + [(f'x_{b}', f'speedup {b}', '{:.2f}x') for b in benches] + [('mean3', 'mean of 3', '{:.2f}x'), ('date', 'run (UTC)', '{}')])
    d = tr['data']['int4']; hc = tr.get('held_curve', {}).get('stage2')
    cap = (f"Stage 2 trained again from the committed run's stage 1 (its bf16 copy, as `gpu_session.sh` packs it) on {d['conversations']:,} INT4-target "
           f"conversations ({d['response_tokens']:,} response tokens; the committed stage 2 had "
           f"{a4['train']['data']['int4']['conversations']:,}), with the {d['extra_prompts']['used']:,} extra prompts' answers "
           f"(reasoning-gym step-by-step included); {tr['steps']['stage2']:,} steps"
           + (f" of the profile's {tr['profile_steps']['stage2']:,} (the command's deadline)" if tr['steps']['stage2'] < tr['profile_steps']['stage2'] else '')
           + f", lr {tr['sizes']['lr2']}, {tr['precision']}, {tr['step_ms']:.0f} ms per step ({tr['attention']}). "
           f"Held-out chunks ({d['held_out']}): block τ {tr['block_accuracy']['stage2']['held_out']['tau']:.2f}, walk τ "
           f"{tr['block_accuracy']['stage2']['held_out']['walk_tau']:.2f}"
           + (f"; held-out loss {hc[0][1]:.3f} at step {hc[0][0]}, "
              f"{hc[len(hc) // 2][1]:.3f} at step {hc[len(hc) // 2][0]}, {hc[-1][1]:.3f} at step {hc[-1][0]}" if hc and len(hc) > 2 else '')
           + ". Speedup = DFlash's decode speedup on SmolLM2 (the INT4 target as bf16 codes × scales, fused drafter step, CUDA graphs; "
           "table latency_a2_true_smollm2_swa's method), "
           + ', '.join(f'{b} {n}' for b, n in doc['e2e'][-1]['eval_prompts'].items()) + f" prompts, {doc['e2e'][-1]['eval_new']} new tokens; "
           "the runs are back to back on one lease (the run column). Not the A4 table's run: its stage 1 and direct drafters are not retrained here."
           + f" Run: {doc['provenance']['note']}\n\n" + provenance_line(doc) + '\n')
    md = "### A4 (refit): stage 2 on the INT4 target's answers to the reasoning prompts too, against the committed stage 2\n\n" + render_table(rows, cols) + '\n' + cap
    print(write_table('drafter_a4_refit_gpu', md, doc['provenance']['profile'])); print(md)

def capacity(train_fs: list, e2e_fs: list, note: str, out: Path = Path('data/results/drafter_capacity_gpu.json')):
    """The drafter-capacity test (`CAPACITY=1 scripts/gpu_session.sh start`): stage-1 drafters of several depths trained
    side by side on the same BF16 answers, then each end to end. One result: per depth, the training record
    (`train_cap<L>.json` as the device wrote it) and its e2e run (`e2e_cap<L>.json`), in the order given."""
    from effqwen.core import atomic_write
    if not note: raise ValueError('capacity: --note is empty: say which commands and data made the run')
    if len(train_fs) != len(e2e_fs) or not train_fs: raise ValueError('capacity: name one training record (--capacity-train) per e2e file (--e2e), in the same order')
    runs = []
    for tf, ef in zip(train_fs, e2e_fs):
        tr, ee = json.loads(Path(tf).read_text()), json.loads(Path(ef).read_text())
        layers = tr['drafter']['num_hidden_layers']
        if list(tr.get('steps', {})) != ['stage1']: raise ValueError(f'capacity: {tf} is no stage-1 training record (steps: {tr.get("steps")})')
        if ee.get('drafter', '').rstrip('/').split('/')[-3:-2] != [f'cap{layers}']:
            raise ValueError(f"capacity: {ef} ran drafter {ee.get('drafter')!r}, not the {layers}-layer one of {tf}")
        runs.append(dict(layers=layers, train=tr, e2e=ee))
    if len({json.dumps(r['train']['data']['bf16'].get('tokens')) for r in runs}) != 1: raise ValueError('capacity: the drafters trained on different data')
    doc = dict(provenance=dict(runs[-1]['e2e']['provenance'], note=note), runs=runs)
    atomic_write(out, json.dumps(doc) + '\n'); log(f'{out}: written ({len(runs)} depths)')   # (one line: per-step curves; every tracked byte rides each device call)

def render_capacity(path: Path = Path('data/results/drafter_capacity_gpu.json')):
    "Table drafter_capacity_gpu: per drafter depth, teacher-forced accuracy on training and held-out chunks, held-out τ, and τ end to end."
    from effqwen.core import render_table, write_table, provenance_line
    doc = json.loads(path.read_text()); rows = []
    for r in doc['runs']:
        tr, ev = r['train'], r['e2e']['eval']['fused']; ba = tr['block_accuracy']['stage1']; hc = tr['held_curve']['stage1']
        best = min(hc, key=lambda x: x[1])
        rows.append(dict(layers=r['layers'], steps=tr['steps']['stage1'], step_ms=tr['step_ms'],
                         acc_tr=' / '.join(f'{a:.2f}' for a in ba['train']['acc'][:4]), acc_ho=' / '.join(f'{a:.2f}' for a in ba['held_out']['acc'][:4]),
                         tau_tr=ba['train']['tau'], tau_ho=ba['held_out']['tau'], walk=ba['held_out']['walk_tau'],
                         loss=f"{best[1]:.2f} @ {best[0]} → {hc[-1][1]:.2f}", tau_g=ev['gsm8k']['tau'], tau_h=ev['humaneval']['tau'], tau_all=ev['all']['tau'],
                         draft_ms=r['e2e']['step_ms']['draft_fused'], x=ev['all']['speedup_tpot_mean']))
    cols = [('layers', 'drafter layers', '{}'), ('steps', 'steps', '{:,}'), ('step_ms', 'ms / step', '{:.0f}'),
            ('acc_tr', 'acc pos 1-4, train', '{}'), ('acc_ho', 'acc pos 1-4, held-out', '{}'), ('tau_tr', 'block τ train', '{:.2f}'),
            ('tau_ho', 'block τ held-out', '{:.2f}'), ('walk', 'walk τ held-out', '{:.2f}'), ('loss', 'held-out loss: best @ step → last', '{}'),
            ('tau_g', 'τ gsm8k', '{:.2f}'), ('tau_h', 'τ humaneval', '{:.2f}'), ('tau_all', 'τ all', '{:.2f}'),
            ('draft_ms', 'drafter step ms', '{:.3f}'), ('x', 'decode speedup', '{:.2f}x')]
    r0 = doc['runs'][0]; d = r0['train']['data']['bf16']; e = r0['e2e']
    cap = (f"Stage-1 drafters (trained against the BF16 target) that differ only in depth, trained side by side on one H200 (so the ms per step "
           f"are contended) on the same {d['conversations']:,} BF16-target conversations ({d['response_tokens']:,} response tokens, "
           f"{d['chunks']:,} chunks of {r0['train']['sizes']['pack_len']}; held out: {d['held_out']}), {r0['train']['precision']}, lr {r0['train']['sizes']['lr']}, "
           f"batch {r0['train']['sizes']['batch']} × {r0['train']['sizes']['anchors']} anchors. acc pos k: teacher-forced accuracy of block position k; "
           "block τ: the anchor-mean τ those accuracies imply; walk τ: the decoding loop replayed on held-out text. τ end to end: greedy speculative "
           f"decoding on the engine over the INT4 target (bf16 codes × scales, fused drafter step, CUDA graphs), "
           + ', '.join(f'{b} {n}' for b, n in e['eval_prompts'].items()) + f" prompts, {e['eval_new']} new tokens; decode speedup = DFlash's "
           "(mean time per output token, prefill excluded) over the engine's AR decode. Not the A4 run (20,480 conversations, 7,000 steps). "
           f"Run: {doc['provenance']['note']}\n\n" + provenance_line(doc) + '\n')
    md = "### Drafter capacity: does a deeper DFlash drafter accept more on SmolLM2? (gpu profile data, stage 1)\n\n" + render_table(rows, cols) + '\n' + cap
    print(write_table('drafter_capacity_gpu', md, doc['provenance']['profile'])); print(md)

ARCHIVES = {   # result -> its session-runs file, and what of each run the archive keeps
    'drafter_training_gpu': ("Earlier gpu-profile runs of drafter_training_gpu.json, newest first, in summary (per-round acceptance lengths, "
                             "losses and divergences dropped); each run's whole file is in the git history "
                             "(`git log -- data/results/drafter_training_gpu.json`)."),
    'drafter_e2e_step_ab_gpu': "Earlier runs of scripts/gpu_drafter.py e2e, newest first, whole.",
    'drafter_e2e_swa_gpu': "Earlier runs of E2E_WINDOWS=... scripts/gpu_drafter.py e2e, newest first, whole.",
}

def result_of(new: Path, results: Path = Path('data/results')) -> Path:
    "The committed result a returned file replaces: the longest `ARCHIVES` name its file name starts with."
    k = max((k for k in ARCHIVES if new.stem.startswith(k)), key=len, default=None)
    if k is None: raise ValueError(f'archive: {new.name} names none of {sorted(ARCHIVES)}: rename it after the result it replaces')
    return results/f'{k}.json'

def _summary(name: str, doc: dict) -> dict:
    "What the archive keeps of one run: the e2e record whole; of a training record the sizes, accuracies and engine results."
    if name != 'drafter_training_gpu': return doc
    t, drop = doc['train'], ('lengths', 'divergence', 'pipelined_runs', 'per_prompt')
    run = dict(provenance=doc['provenance'], **{k: t[k] for k in ('steps', 'train_s', 'data', 'sizes', 'block_accuracy')})
    run['eval'] = {k: {b: {kk: vv for kk, vv in o.items() if kk not in drop} for b, o in v.items()} for k, v in doc['eval'].items()}
    run.update({k: doc[k] for k in ('step_ms', 'drafter_compiled') if k in doc})
    run.update({k: {kk: vv for kk, vv in doc[k].items() if kk != 'divergence'} for k in ('lossless_fp32', 'lossless_extra') if k in doc})
    return run

def archive(result: Path, new: Path, note: str):
    """Replace `result` by a new run's file `new` (as it came back from the device), first moving the committed run into
    `<result stem>_session_runs.json` (newest first, `_summary`), with `note` (the command that made the new run) in
    the new run's provenance. Both files are written atomically; the new file's payload is not touched otherwise."""
    from effqwen.core import atomic_write
    name = result.stem
    if name not in ARCHIVES: raise ValueError(f'archive: {result} has no session-runs file; pick one of {sorted(ARCHIVES)}')
    old, doc = (json.loads(result.read_text()) if result.exists() else None), json.loads(new.read_text())
    if old and old['provenance'] == doc['provenance']: raise ValueError(f'archive: {new} is the committed run already')
    if not note: raise ValueError('archive: --note is empty: say which command and data made the new run')
    doc['provenance']['note'] = note
    if old:                                                         # (the first run of a result has nothing to archive)
        runs_f = result.with_name(f'{name}_session_runs.json')
        runs = json.loads(runs_f.read_text()) if runs_f.exists() else dict(note=ARCHIVES[name], runs=[])
        runs['runs'] = sorted([_summary(name, old)] + runs['runs'], key=lambda r: r['provenance']['date'], reverse=True); runs['note'] = ARCHIVES[name]
        atomic_write(runs_f, json.dumps(runs, indent=1) + '\n')
    atomic_write(result, json.dumps(doc, indent=1) + '\n')
    log(f'{result}: {new} installed' + (f'; the run at {old["provenance"]["git_sha"]} archived ({len(runs["runs"])} runs)' if old else ''))

def regen_check(tar: Path, extra: Path, bf16_asked: int, int4_asked: int, bundle_rows: int = 12288) -> dict:
    """Which prompts a run's saved answers (a poll's regen_data.tar.xz) hold, against the extra-prompts file: rows at or
    past `bundle_rows` are the extra file's, and a long prompt's id starts with extra/long."""
    import tarfile
    with tarfile.open(tar, 'r:xz') as t:
        ans = {n: json.load(t.extractfile(f'regen_{n}.json')) for n in ('bf16', 'int4')}
    rows = json.loads(extra.read_text())['train']
    long_rows = {bundle_rows + j for j, r in enumerate(rows) if str(r.get('id', '')).startswith('extra/long')}
    out = {}
    for n, asked in (('bf16', bf16_asked), ('int4', int4_asked)):
        lr = {r for r in long_rows if r < asked}; missing = [r for r in range(asked) if str(r) not in ans[n]]
        out |= {f'{n}_answers': sum(int(k) < asked for k in ans[n]), f'{n}_asked': asked, f'{n}_long_prompts_asked': len(lr),
                f'{n}_long_prompts_answered': sum(str(r) in ans[n] for r in lr), f'{n}_missing_rows_all_long': all(r in lr for r in missing)}
    out['how'] = (f'{tar.name} (sha256 {sha(tar.read_bytes())[:12]}) against {extra.name} (sha256 {sha(extra.read_bytes())[:12]}): rows >= {bundle_rows:,} '
                  'are the extra file\'s, a long prompt\'s id starts with extra/long')
    return out

def record_e2e(e2e_file: Path, out: Path, note: str, train_rec: Path|None = None, tar: Path|None = None, extra: Path|None = None,
               tar_home: str = ''):
    """A drafter run's result from what its `SOLO=1 E2E=1` chain brought back: the e2e file (as it came back) with the run's
    training record (`train`), the saved answers' sha256 and `regen_check`, and the run's command in `provenance.note`."""
    from effqwen.core import atomic_write
    if not note: raise ValueError('record-e2e: --note is empty: say which command and data made the run')
    if out.exists(): raise ValueError(f'record-e2e: {out} exists: pick a new result name (or archive the run into it)')
    doc = json.loads(e2e_file.read_text()); doc['provenance']['note'] = note
    if train_rec: doc['train'] = json.loads(train_rec.read_text())
    if tar:
        doc['regen_answers'] = dict(file=f'{tar.name}' + (f' (kept outside git in {tar_home})' if tar_home else ''), sha256=sha(tar.read_bytes()))
        if extra:
            t = doc.get('train', {}).get('data', {})
            doc['regen_check'] = regen_check(tar, extra, t.get('bf16', {}).get('asked', 16384), t.get('int4', {}).get('asked', 8192))
    atomic_write(out, json.dumps(doc, indent=1) + '\n'); log('wrote', out)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('stage', choices=['assemble', 'regen', 'keys', 'chunks', 'train', 'eval', 'lossless32', 'merge', 'opt', 'e2e', 'render', 'render-opt', 'render-e2e', 'archive', 'refit', 'render-refit', 'capacity', 'render-capacity', 'record-e2e'])
    ap.add_argument('--new', default=None, help='archive: the new run\'s file as it came back, named after the result it replaces (that one moves to its _session_runs.json)')
    ap.add_argument('--note', default='', help='archive: the command and data that made the new run (kept in its provenance)')
    ap.add_argument('--drafter-dir', default=None, help='e2e: the trained drafter (config.json + model.safetensors; default: <work>/drafters/stage2)')
    ap.add_argument('--opt-result', default='data/results/drafter_opt_gpu.json')
    ap.add_argument('--e2e-result', default=None, help='render-e2e: one e2e result (default: drafter_e2e_step_ab_gpu.json and drafter_e2e_swa_gpu.json)')
    ap.add_argument('--e2e', nargs='*', default=None, help='refit: the e2e files of the A/B (committed stage 2, then the refit), as they came back; --new: its train_stage2.json')
    ap.add_argument('--capacity-train', nargs='*', default=None, help='capacity: the train_cap<L>.json files as they came back (with --e2e: their e2e_cap<L>.json, same order)')
    ap.add_argument('--only', default='bf16,int4', help='regen: which targets answer (one process per GPU: bf16 on one, int4 on the other)')
    ap.add_argument('--drafters', default=','.join(DRAFTERS), help='train: which drafters this process trains (two GPUs: stage1 | direct,stage2)')
    ap.add_argument('--no-fp32', action='store_true', help='eval: leave the float32 losslessness check to a `lossless32` call')
    ap.add_argument('--batch', type=int, default=512, help='regen: conversations per generate call')
    ap.add_argument('--result', default='data/results/drafter_training_gpu.json')
    ap.add_argument('--work', default='/tmp/xfer')
    ap.add_argument('--manifest', default='.devsite/bundle/manifest.json')
    ap.add_argument('--train-budget', type=float, default=330.0)
    ap.add_argument('--deadline', type=float, default=560.0)
    ap.add_argument('--lr', type=float, default=None, help='stage-1 / direct lr (default: the gpu DrafterSize)')
    ap.add_argument('--lr2', type=float, default=None, help='stage-2 lr (default: the gpu DrafterSize)')
    ap.add_argument('--layers', type=int, default=None, help='train: drafter layers (default: the gpu DrafterSize; both processes of a split run must agree)')
    ap.add_argument('--bf16-autocast', action='store_true', help='train under bf16 autocast (stalled on the H200: pos-1 accuracy 0.02-0.10 on the drafters\' own training chunks, '
                    'data/results/drafter_gpu_bf16_autocast_train.json; default: float32 with TF32 matmuls, which fits)')
    ap.add_argument('--lossless', type=int, default=100)
    ap.add_argument('--train-record', default=None, help='record-e2e: the run\'s train_*.json as it came back')
    ap.add_argument('--regen-tar', default=None, help='record-e2e: the run\'s regen_data.tar.xz (its answers), for regen_check')
    ap.add_argument('--extra', default=None, help='record-e2e: the EXTRA_PROMPTS file the run used (which rows are long prompts)')
    ap.add_argument('--out', default=None, help='record-e2e: the new result, data/results/drafter_e2e_<name>_gpu.json')
    ap.add_argument('--ar-check', type=int, default=4)
    a = ap.parse_args()
    work = Path(a.work); work.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    if a.stage == 'assemble': assemble(work, json.loads(Path(a.manifest).read_text()))
    elif a.stage == 'regen': regen(work, a.deadline, a.batch, tuple(a.only.split(',')))
    elif a.stage == 'keys': write_keys(work)
    elif a.stage == 'chunks': chunk_plan(work)
    elif a.stage == 'train': train(work, a.train_budget, a.deadline, a.lr, a.lr2, not a.bf16_autocast, tuple(a.drafters.split(',')), a.layers)
    elif a.stage == 'merge': merge(work, Path(os.environ.get('OUT', '/tmp/out')))
    elif a.stage == 'eval': evaluate(work, Path(os.environ.get('OUT', '/tmp/out')), a.lossless, a.ar_check, not a.no_fp32)
    elif a.stage == 'lossless32': lossless32(work, Path(os.environ.get('OUT', '/tmp/out')), a.lossless)
    elif a.stage == 'opt': opt(work, Path(os.environ.get('OUT', '/tmp/out')), int(os.environ.get('N_EVAL', 16)), int(os.environ.get('N_LONG', 8)))
    elif a.stage == 'e2e': e2e(work, Path(os.environ.get('OUT', '/tmp/out')), Path(a.drafter_dir or work/'drafters'/'stage2'),
                               int(os.environ.get('N_EVAL', 24)), int(os.environ.get('N_LONG', 8)),
                               tuple(int(w) for w in os.environ.get('E2E_WINDOWS', '').split(',') if w),
                               tuple(int(w) for w in os.environ.get('E2E_VERIFY', '').split(',') if w))
    elif a.stage == 'archive':
        if not a.new: raise ValueError('archive: --new <the new run\'s json> is required')
        archive(result_of(Path(a.new)), Path(a.new), a.note)
    elif a.stage == 'refit': refit(Path(a.new), a.e2e or [], a.note)
    elif a.stage == 'record-e2e':
        if not (a.e2e_result and a.out): raise ValueError('record-e2e: pass --e2e-result <the e2e file as it came back> and --out <the new result>')
        tar = Path(a.regen_tar) if a.regen_tar else None
        record_e2e(Path(a.e2e_result), Path(a.out), a.note, Path(a.train_record) if a.train_record else None, tar,
                   Path(a.extra) if a.extra else None, str(tar.parent) if tar else '')
    elif a.stage == 'capacity': capacity(a.capacity_train or [], a.e2e or [], a.note)
    elif a.stage == 'render-capacity': render_capacity()
    elif a.stage == 'render-refit': render_refit(Path('data/results/drafter_stage2_refit_gpu.json'))
    elif a.stage == 'render-opt': render_opt(Path(a.opt_result))
    elif a.stage == 'render-e2e':   # both e2e results (the step A/B and the window A/B) unless --e2e-result names one
        for f in ([Path(a.e2e_result)] if a.e2e_result else [f for f in (Path('data/results/drafter_e2e_step_ab_gpu.json'), Path('data/results/drafter_e2e_swa_gpu.json')) if f.exists()]):
            render_e2e(f)
    else: render(Path(a.result))

if __name__ == '__main__': main()
