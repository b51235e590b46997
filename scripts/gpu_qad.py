"""Table A3 (INT4 W4A16 PTQ vs QAD on SmolLM2) at the `gpu` profile on one GPU: AWQ g32 -> QAD with more data and
steps than the cpu run of `21_qad`, in one device command.

The GPU machine has no network, no data packages and no llm-compressor, so `bundle` renders here what the run needs
that the device lacks: the AWQ INT4 g32 checkpoint of 21_qad's cpu run (re-made with 21_qad's calibration and checked
against the scales and norms that 21_qad's QAD checkpoint froze), the profile's QAD training prompts, its held-out
eval windows (token ids) and its multiple-choice items, as a tar split in parts of <= 58 MB with a sha256 manifest
(`scripts/device_bundle.write_bundle`). The BF16 teacher is the drafter bundle's GGUF, converted to /tmp/xfer/smollm2
by `scripts/gpu_drafter.py assemble`.

    python scripts/gpu_qad.py bundle --out .devsite/qad_bundle                # here (CPU)
    python scripts/gpu_qad.py run --work /tmp/xfer --out $OUT --deadline 540  # GPU; parts in /tmp/xfer/qad_parts/p*/part
    python scripts/gpu_qad.py render --results data/results/qad_gpu.json      # here: table + figure

`run`: regenerate the training conversations with the teacher, put the student on the AWQ grid (frozen scales), check
the step-0 gate, train at every lr of the profile's sweep keeping the lowest validation KL (float32, TF32 matmuls),
repack onto the original grid and check it, evaluate BF16 / AWQ / QAD (KLD, PPL on the held-out windows; MC accuracy
with 95% CIs). The result JSON is rewritten (atomically) after every phase. Steps are the profile's unless the step
time measured on the device says they would not fit `--deadline` seconds; then they are scaled down (all lrs the
same) and that is recorded. `DEV=cpu TINY=1` dry-runs `run` on a CPU with tiny sizes.
"""
import time
T0 = time.time()                              # the deadline counts from here (imports included)
import argparse, copy, json, os, sys
os.environ.setdefault('TQDM_MININTERVAL', '30')   # progress bars (qad_train's) at most every 30 s: the device returns only a 12k-char tail
from pathlib import Path
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_drafter import DEV, TINY, sha, log, unpack_bundle, apply_w4a16   # noqa: E402  (shared bundle / INT4 helpers)

GROUP = 32
TASKS = ('boolq', 'piqa', 'hellaswag', 'mmlu')   # 21_qad's log-likelihood tasks (the generative ASDiv is left out there too)

def profile():
    "The gpu profile; under TINY a few prompts, steps, windows and items (the bundle is the same)."
    from effqwen.core import get_profile
    if not TINY: return get_profile('gpu')
    return get_profile('gpu', regen_prompts=12, regen_max_new=24, pack_len=128, qad_steps=4, qad_eval_every=2,
                       qad_micro_batch=2, eval_windows=2, eval_batch=2, mc_items=6, n_bootstrap=100,
                       qad_sweep=(2e-3,))   # a large lr, so that 4 steps move codes (repack checks on changed codes)

# ------------------------------------------------------------------------------------------------------------ bundle
def awq_checkpoint() -> tuple[Path, dict]:
    """The AWQ INT4 g32 checkpoint of 21_qad's cpu run (compressed-tensors W4A16), cached under data/cache/models.
    21_qad keeps only the QAD result, so AWQ is re-run with 21_qad's inputs (cpu profile: target, calibration windows,
    n_grid, ignore list) and checked: its scales and norms must equal those 21_qad's QAD checkpoint froze (QAD trains
    only the codes), and its held-out KLD must equal qad.json's AWQ g32 row."""
    from safetensors.torch import load_file
    from effqwen.core import get_profile, cache_dir, set_determinism, set_threads, read_result
    from effqwen.model import load_target
    from effqwen.assets import text_corpus
    from effqwen.eval import token_windows, eval_windows, kld_ppl
    from effqwen.quant import QWEN35_IGNORE, llmc_oneshot, llmc_records, save_compressed
    from effqwen.qad import qad_target_dir
    p = get_profile('cpu')
    d = cache_dir()/'models'/f'{p.name}-{p.model}-awq-g{GROUP}-w4a16'
    if (d/'awq_check.json').exists(): return d, json.loads((d/'awq_check.json').read_text())
    set_determinism(p.seed); set_threads()
    teacher, tok = load_target(p)
    calib = token_windows(tok, text_corpus('train')['text'], p.calib_seq_len, p.calib_samples)
    t = time.time(); m = copy.deepcopy(teacher)
    llmc_oneshot(m, calib, method='awq', group_size=GROUP, ignore=QWEN35_IGNORE, tokenizer=tok, n_grid=p.awq_n_grid)
    recs = llmc_records(m, write_back=True); awq_s = time.time() - t
    qd = qad_target_dir(p, GROUP); qd = qd.with_name(qd.name + '-w4a16')
    qsd = load_file(str(qd/'model.safetensors'))
    msd = m.state_dict()
    scales_equal = sorted(n + '.weight_scale' for n in recs) == sorted(k for k in qsd if k.endswith('.weight_scale')) and \
        all(torch.equal(r['scales'].float(), qsd[n + '.weight_scale'].float()) for n, r in recs.items())
    norms = [k for k in qsd if k.endswith('norm.weight')]
    norms_equal = all(torch.equal(msd[k].float(), qsd[k].float()) for k in norms)
    if not (scales_equal and norms_equal):
        raise RuntimeError(f'the re-made AWQ grid differs from the one 21_qad froze ({qd.name}): scales equal {scales_equal}, '
                           f'norms equal {norms_equal}; rerun 21_qad at the cpu profile first')
    kld = kld_ppl(m, eval_windows(tok, p), ref=teacher, batch_size=p.eval_batch)
    ref = next(r for r in read_result('qad', 'cpu')['rows'] if r['method'] == 'AWQ' and r['group'] == GROUP)
    if abs(kld['kld'] - ref['kld']) > 1e-4 * ref['kld']:
        raise RuntimeError(f"re-made AWQ g{GROUP}: held-out KLD {kld['kld']:.6f} vs qad.json's {ref['kld']:.6f}")
    save_compressed(m, recs, str(d), ignore=QWEN35_IGNORE, tokenizer=tok)
    check = dict(source=f'llmc_oneshot AWQ g{GROUP} with 21_qad cpu-profile inputs (calibration {tuple(calib.shape)}, n_grid {p.awq_n_grid})',
                 quantize_s=awq_s, scales_equal_qad_checkpoint=scales_equal, norms_equal_qad_checkpoint=norms_equal,
                 qad_checkpoint=qd.name, n_linears=len(recs), n_norms=len(norms),
                 kld_cpu_windows=kld['kld'], ppl_cpu_windows=kld['ppl'], qad_json_awq_kld=ref['kld'], qad_json_awq_ppl=ref['ppl'],
                 qad_json_git_sha=read_result('qad', 'cpu')['provenance']['git_sha'])
    (d/'awq_check.json').write_text(json.dumps(check, indent=1))
    return d, check

def bundle(out: Path, part_mb: float):
    from safetensors.torch import load_file, save_file
    from effqwen.core import git_sha
    from effqwen.assets import train_prompts, MC_TASKS, SMOLLM2
    from effqwen.model import load_tokenizer
    from effqwen.eval import eval_windows
    from device_bundle import write_bundle
    p = profile()
    d, check = awq_checkpoint()
    log('AWQ checkpoint', d.name, {k: v for k, v in check.items() if 'kld' in k or 'equal' in k})
    sd = load_file(str(d/'model.safetensors'))
    emb = sd.pop('model.embed_tokens.weight')                      # = the GGUF teacher's (checked on the device)
    if not any(k.endswith('.weight_packed') for k in sd): raise ValueError(f'{d} holds no packed INT4 weights')
    out.mkdir(parents=True, exist_ok=True)
    def st(tensors: dict) -> bytes:
        tmp = out/'.tmp.safetensors'; save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp))
        b = tmp.read_bytes(); tmp.unlink(); return b
    tok = load_tokenizer('smollm2')
    windows = eval_windows(tok, p)
    tp = train_prompts(p.regen_prompts, seed=p.seed)
    mc = {}
    for t in TASKS:
        ds = MC_TASKS[t](p.mc_items)
        mc[t] = dict(context=list(ds['context']), choices=list(ds['choices']), label=list(ds['label']))
    prompts = dict(train=[dict(id=i, prompt=q) for i, q in zip(tp['id'], tp['prompt'])], mc=mc)
    meta = dict(git_sha=git_sha(), date=time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()), awq=check, awq_dir=d.name,
                embed_sha256=sha(emb.float().numpy().tobytes()), gguf_sha256=SMOLLM2['sha256'],
                eval_windows=list(windows.shape), eval_source="effqwen.eval.eval_windows(tokenizer, get_profile('gpu'))",
                train_prompts=len(prompts['train']), mc_items={t: len(v['label']) for t, v in mc.items()},
                profile={k: getattr(p, k) for k in ('regen_prompts', 'regen_max_new', 'pack_len', 'qad_steps', 'qad_lr', 'qad_sweep',
                                                    'qad_micro_batch', 'qad_eval_every', 'eval_windows', 'eval_seq_len', 'mc_items')})
    members = {'awq_int4.safetensors': st(sd), 'eval_windows.safetensors': st({'windows': windows}),
               'prompts.json': json.dumps(prompts).encode(), 'meta.json': json.dumps(meta, indent=1).encode()}
    man = write_bundle(members, out, part_mb, awq=d.name)
    log('bundle:', {k: len(v) for k, v in members.items()}, 'parts:', [x['bytes'] for x in man['parts']])
    print(json.dumps(man, indent=1))

# --------------------------------------------------------------------------------------------------------------- run
class tf32:
    "TF32 matmuls on (training, regeneration) or off (evaluation, checks) inside the block."
    def __init__(self, on: bool): self.on = on
    def __enter__(self):
        self.old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = self.on
    def __exit__(self, *a): torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = self.old

def sync():
    if DEV == 'cuda': torch.cuda.synchronize()

def run(work: Path, out: Path, manifest: dict, deadline: float, git: str|None, min_steps: int, regen_batch: int, save_int4: bool):
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from effqwen.core import provenance, atomic_write, set_determinism, rel_error
    from effqwen.model import chat_prompt
    from effqwen.regen import generate_texts, pack
    from effqwen.eval import kld_ppl, mc_accuracy, bootstrap_mean_of_tasks
    from effqwen.qad import (QADConfig, FrozenGridLinear, KLDistill, to_frozen_grid, qad_train, val_kl, grid_codes)
    from effqwen.kernels import pack_int4, unpack_int4, w4a16_dequantize
    from effqwen.quant import dequantize_sym
    p = profile(); set_determinism(p.seed)
    def left(): return deadline - (time.time() - T0)
    b = unpack_bundle(work, manifest, parts='qad_parts', out='qad_bundle', resend='.devsite/qad_bundle')
    meta = json.loads((b/'meta.json').read_text())
    if git: os.environ['EFFQWEN_GIT_SHA'] = git
    prov = provenance('gpu' if not TINY else 'gpu (TINY dry run)', DEV)
    if prov['git_sha'] == 'unknown': prov['git_sha'], prov['git_sha_source'] = meta['git_sha'], 'bundle'
    doc = dict(provenance=prov, tiny=TINY, bundle=dict(tar_sha256=manifest['tar_sha256'], **{k: meta[k] for k in ('git_sha', 'date', 'awq', 'awq_dir', 'embed_sha256')}),
               profile={k: (list(v) if isinstance(v, tuple) else v) for k, v in p.__dict__.items()}, deadline_s=deadline, phases={})
    path = out/'qad_gpu.json'
    def save(phase: str):
        doc['phases'][phase] = round(time.time() - T0, 1); doc['wall_s'] = time.time() - T0
        if DEV == 'cuda': doc['peak_mem_gb'] = torch.cuda.max_memory_allocated() / 2**30
        atomic_write(path, json.dumps(doc, indent=1) + '\n'); log(f'{phase}: wrote {path} ({left():.0f} s left)')

    # models: the teacher (GGUF -> HF by gpu_drafter assemble) in float32, AWQ = teacher with AWQ's codes x scales and norms
    teacher = AutoModelForCausalLM.from_pretrained(str(work/'smollm2'), dtype=torch.float32).to(DEV).eval()
    tok = AutoTokenizer.from_pretrained(str(work/'smollm2'))
    if sha(teacher.model.embed_tokens.weight.detach().float().cpu().numpy().tobytes()) != meta['embed_sha256']:
        raise ValueError('the teacher\'s embedding is not the one the AWQ checkpoint was made with: wrong GGUF / conversion')
    q = load_file(str(b/'awq_int4.safetensors'))
    awq = copy.deepcopy(teacher); n_lin, n_norm = apply_w4a16(awq, q)
    grid = {k[:-len('.weight_scale')]: v.float().reshape(v.shape[0], -1).to(DEV) for k, v in q.items() if k.endswith('.weight_scale')}
    windows = load_file(str(b/'eval_windows.safetensors'))['windows'][:p.eval_windows]
    pr = json.loads((b/'prompts.json').read_text())
    mc = {t: {k: v[:p.mc_items] for k, v in ds.items()} for t, ds in pr['mc'].items()}
    log(f'AWQ: {n_lin} linears, {n_norm} norms; eval windows {tuple(windows.shape)}; MC items', {t: len(d['label']) for t, d in mc.items()})

    # held-out eval of one model: KLD / PPL on the windows, MC accuracy with bootstrap 95% CIs, in full float32
    mc_batch = 64 if DEV == 'cuda' else 8
    def evaluate(model, method: str, group, **extra) -> dict:
        t = time.time(); model.eval(); teacher.eval()                  # (val_kl leaves its models in train mode)
        with tf32(False):
            kp = kld_ppl(model, windows, ref=None if model is teacher else teacher, batch_size=p.eval_batch, desc=method)
            tasks, items = {}, {}
            for name, ds in mc.items():
                r = mc_accuracy(model, tok, ds, batch_size=mc_batch, n_bootstrap=p.n_bootstrap)
                tasks[name] = dict(acc=r['acc'], n=r['n']); items[name] = r['items']
        row = dict(method=method, group=group, kld=kp.get('kld', 0.0), ppl=kp['ppl'], tokens=kp['tokens'], tasks=tasks,
                   mean_acc=bootstrap_mean_of_tasks(items, p.n_bootstrap) if items else None, items=items, eval_s=time.time() - t, **extra)
        doc.setdefault('rows', []).append(row)
        log(method, {k: row[k] for k in ('kld', 'ppl', 'mean_acc', 'eval_s')}); return row

    # 1. training data: the teacher's greedy answers to the profile's training prompts, packed; 10% of chunks validate
    t = time.time()
    templ = [chat_prompt(tok, x['prompt']) for x in pr['train']][:p.regen_prompts]
    with tf32(True):
        resp = generate_texts(teacher, tok, templ, p.regen_max_new, p.regen_temperature, batch_size=regen_batch, seed=p.seed, desc='regen bf16')
    conv = dict(prompt=templ, text=[a + r + tok.eos_token for a, r in zip(templ, resp)])
    packed = pack(conv, tok, p.pack_len)
    n_val = max(1, len(packed['input_ids']) // 10)
    train = {k: v[n_val:] for k, v in packed.items()}; val = {k: v[:n_val] for k, v in packed.items()}
    if not len(train['input_ids']): raise RuntimeError(f'{len(conv["prompt"])} conversations make only {n_val} chunk(s): regenerate more')
    doc['data'] = dict(conversations=len(templ), regen_max_new=p.regen_max_new, regen_batch=regen_batch, regen_s=time.time() - t,
                       response_tokens=int((packed['response_mask'] * packed['attention_mask']).sum()), tokens=int(packed['attention_mask'].sum()),
                       pack_len=p.pack_len, train_chunks=len(train['input_ids']), val_chunks=n_val,
                       eval_windows=list(windows.shape), mc_items={t_: len(d['label']) for t_, d in mc.items()},
                       regen_precision='float32 teacher, TF32 matmuls, greedy')
    save('regen')

    # 2. gate: the student on AWQ's grid (frozen scales) starts at AWQ's codes and computes what AWQ computes
    student0 = to_frozen_grid(copy.deepcopy(awq), grid)
    fg = {n: m for n, m in student0.named_modules() if isinstance(m, FrozenGridLinear)}
    codes_equal = len(fg) == n_lin and all(torch.equal(m.codes().cpu(), unpack_int4(q[n + '.weight_packed'])) for n, m in fg.items())
    with tf32(False):
        g_s = kld_ppl(student0, windows[:2], ref=teacher, batch_size=p.eval_batch)['kld']
        g_a = kld_ppl(awq, windows[:2], ref=teacher, batch_size=p.eval_batch)['kld']
    mb = p.qad_micro_batch
    with tf32(True):
        sync(); t = time.time(); v0 = val_kl(KLDistill(student0, teacher), val, mb); sync(); val_s = time.time() - t
    doc['gate'] = dict(kld_student_step0=g_s, kld_awq=g_a, windows=2, codes_equal_awq=codes_equal, val_kl_awq=v0, val_s=val_s)
    if not codes_equal or abs(g_s - g_a) > 1e-4 * max(g_a, 1e-6) + 1e-7:
        save('gate failed'); raise AssertionError(f'step-0 gate: codes equal {codes_equal}, KLD student {g_s} vs AWQ {g_a}')
    del student0
    save('gate')

    # 3. BF16 and AWQ rows first: kept even if training runs out of time; AWQ's eval time is what QAD's will take
    evaluate(teacher, 'BF16', None); save('eval BF16')
    eval_s = evaluate(awq, 'AWQ', GROUP)['eval_s']; save('eval AWQ')

    # 4. step time on the device -> steps that fit (every lr runs the same number of steps)
    lrs = [p.qad_lr, *p.qad_sweep]
    def cfg_for(steps, lr, **kw): return QADConfig(**(dict(steps=steps, lr=lr, micro_batch=mb, grad_accum=p.qad_grad_accum,
                                                          eval_every=p.qad_eval_every, seed=p.seed, chunk=128) | kw))
    val1 = {k: v[:mb] for k, v in val.items()}
    def timed(steps):
        c = to_frozen_grid(copy.deepcopy(awq), grid); sync(); t = time.time()
        with tf32(True): qad_train(c, teacher, train, val1, cfg_for(steps, lrs[0], eval_every=10**9, seed=p.seed + 1, restore_best=False))
        sync(); return time.time() - t
    n1, n2 = (1, 3) if TINY else (3, 13)
    t1 = timed(n1); t2 = timed(n2)
    step_s = max((t2 - t1) / (n2 - n1), 0.5 * t2 / n2); run_over = max(0.0, t1 - n1 * step_s)   # (the max: timing noise)
    per_eval = val_s + 0.5                                          # a validation pass + keeping the best weights
    reserve = eval_s * 1.1 + 25                                     # QAD's eval (as AWQ's) + repack checks + saving
    def est(steps): return run_over + steps * step_s + (steps // p.qad_eval_every + 1) * per_eval
    def fit(budget): return max(1, min(p.qad_steps, int((budget - run_over - per_eval) / (step_s + per_eval / p.qad_eval_every))))
    budget = left() - reserve
    steps, dropped = fit(budget / len(lrs)), []
    while len(lrs) > 1 and steps < min(min_steps, p.qad_steps):     # too few steps for a sweep: drop its smallest lr first
        lo = min(x for x in lrs if x != p.qad_lr); lrs.remove(lo); dropped.append(lo); steps = fit(budget / len(lrs))
    doc['schedule'] = dict(step_s=step_s, run_overhead_s=run_over, val_s=val_s, eval_s=eval_s, train_budget_s=budget,
                           steps=steps, profile_steps=p.qad_steps, scaled=steps < p.qad_steps, lrs=lrs, lrs_dropped=dropped,
                           estimate_per_lr_s=est(steps), tokens_per_step=mb * p.pack_len * p.qad_grad_accum,
                           precision='float32, TF32 matmuls (bf16 autocast stalled drafter training here)')
    log('schedule', doc['schedule']); save('schedule')

    # 5. one QAD run per lr (the profile's lr and its sweep); the lowest validation KL is kept
    doc['sweep'] = {}; best = None
    for i, lr in enumerate(lrs):
        if i and left() - reserve < last * 1.05:
            doc['schedule'].setdefault('lrs_skipped', []).append(lr); log(f'lr {lr:g}: skipped, {left():.0f} s left'); continue
        cand = to_frozen_grid(copy.deepcopy(awq), grid); sync(); t = time.time()
        with tf32(True): h = qad_train(cand, teacher, train, val, cfg_for(steps, lr))
        sync(); last = time.time() - t
        doc['sweep'][f'{lr:g}'] = dict(val_step=h['val_step'], val_kl=h['val_kl'], train_kl=h['train_kl'], best_step=h['best_step'],
                                       best_val_kl=h['best_val_kl'], seconds=last, steps=steps)
        log(f"lr {lr:g}: validation KL {h['val_kl'][0]:.4f} -> best {h['best_val_kl']:.4f} at step {h['best_step']} ({last:.0f} s)")
        if best is None or h['best_val_kl'] < best[1]['best_val_kl']: best = (lr, h, cand)
        else: del cand
        save(f'qad lr {lr:g}')
    lr_best, hist, student = best
    doc['qad'] = dict(lr=lr_best, best_step=hist['best_step'], best_val_kl=hist['best_val_kl'], awq_val_kl=hist['val_kl'][0], steps=steps)

    # 6. repack onto the original grid: the packed codes x stored scales == Q_s(W) exactly (the student's codes on its frozen
    # scales); the STE forward's w + (Q_s(W) - w) may differ from Q_s(W) by float rounding (recorded); repacked model == student
    student.eval(); rep = {k: v for k, v in q.items() if not k.endswith(('.weight_packed', '.weight_scale'))}
    err, ste, changed, n_codes, scales_same = 0.0, 0.0, 0, 0, True
    with torch.no_grad():
        for n, (c, s) in grid_codes(student).items():
            pk = pack_int4(c.cpu()); sc = s.cpu().to(q[n + '.weight_scale'].dtype)
            scales_same &= torch.equal(sc, q[n + '.weight_scale'])
            m = student.get_submodule(n); qw = dequantize_sym(c.cpu(), s.cpu(), m.group_size)
            err = max(err, float((w4a16_dequantize(pk, sc) - qw).abs().max()))
            ste = max(ste, float((m.qweight().cpu() - qw).abs().max()))
            changed += int((c.cpu() != unpack_int4(q[n + '.weight_packed'])).sum()); n_codes += c.numel()
            rep[n + '.weight_packed'], rep[n + '.weight_scale'] = pk, sc
    qad = copy.deepcopy(teacher); apply_w4a16(qad, rep)
    with tf32(False), torch.no_grad(): l_rep, l_st = qad(windows[:1].to(DEV)).logits, student(windows[:1].to(DEV)).logits
    codes_sha = sha(b''.join(rep[k].numpy().tobytes() for k in sorted(rep) if k.endswith('.weight_packed')))
    doc['repack'] = dict(max_abs_scale_code_minus_qweight=err, max_abs_ste_forward_minus_qweight=ste, scales_unchanged=scales_same, logits_rel_error=rel_error(l_rep, l_st),
                         codes_changed_vs_awq=changed / n_codes, codes=n_codes, packed_codes_sha256=codes_sha)
    if err != 0 or not scales_same or doc['repack']['logits_rel_error'] >= 1e-4:
        save('repack failed'); raise AssertionError(f"repack: {doc['repack']}")
    if save_int4:
        from safetensors.torch import save_file
        save_file({k: v.contiguous() for k, v in rep.items()}, str(out/'qad_gpu_int4.safetensors'))
    del student, awq; save('repack')

    # 7. the QAD row (the repacked model: what an INT4 checkpoint decodes to)
    r = evaluate(qad, 'QAD (from AWQ)', GROUP, steps=steps, lr=lr_best, best_step=hist['best_step'])
    awq_kld = next(x['kld'] for x in doc['rows'] if x['method'] == 'AWQ')
    doc['qad_kld_change_vs_awq'] = r['kld'] / awq_kld - 1
    save('done')
    log(f"QAD vs AWQ: KLD {awq_kld:.4f} -> {r['kld']:.4f} ({doc['qad_kld_change_vs_awq']:+.1%})")

# ------------------------------------------------------------------------------------------------------------ render
def render(path: Path):
    import matplotlib; matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from effqwen.core import render_table, write_table, save_figure, provenance_line
    doc = json.loads(path.read_text())
    if doc.get('tiny'): os.environ.setdefault('EFFQWEN_OUT', str(Path('/tmp')/'effqwen-gpu-qad-dryrun'))   # a dry run never lands in data/
    prof, d, sc, qd = doc['provenance'], doc['data'], doc['schedule'], doc.get('qad')
    rows = doc['rows']; awq_kld = next(r['kld'] for r in rows if r['method'] == 'AWQ')
    tasks = list(rows[0]['tasks'])
    flat = [dict(r, **{t: tuple(r['tasks'][t]['acc']) for t in tasks}, mean_acc=tuple(r['mean_acc']) if r['mean_acc'] else None,
                 dkld=r['kld'] / awq_kld - 1 if r['method'].startswith('QAD') else None) for r in rows]
    cols = ([('method', 'method', '{}'), ('group', 'group', '{}'), ('kld', 'KLD', '{:.4f}'), ('dkld', 'KLD vs AWQ', '{:+.1%}'), ('ppl', 'PPL', '{:.2f}')]
            + [(t, f"{t} (n={rows[0]['tasks'][t]['n']})", '{:.3f}') for t in tasks] + [('mean_acc', 'mean acc [95% CI]', '{:.3f}')])
    sweep = doc['sweep']
    lr_txt = ', '.join(f"{lr} (best validation KL {v['best_val_kl']:.4f} at step {v['best_step']})" for lr, v in sweep.items())
    cap = (f"KLD: mean per-token KL(BF16 ‖ model) on {d['eval_windows'][0]}×{d['eval_windows'][1]} held-out tokens (the gpu profile's eval windows); "
           f"PPL on the same windows; accuracy by log-likelihood on {', '.join(f'{t} {n}' for t, n in d['mc_items'].items())} items with bootstrap 95% CIs "
           f"(mean: tasks averaged, items resampled within each). AWQ g{GROUP}: the cpu run's AWQ checkpoint of `21_qad` (re-made from its inputs; "
           f"scales and norms identical to the ones its QAD froze, held-out KLD on the cpu windows {doc['bundle']['awq']['kld_cpu_windows']:.4f} = qad.json's "
           f"{doc['bundle']['awq']['qad_json_awq_kld']:.4f}). QAD: codes trained on AWQ's frozen grid against the BF16 model's logits "
           f"(KL distillation) on {d['conversations']} regenerated conversations ({d['response_tokens']:,} response tokens, greedy, ≤ {d['regen_max_new']} new tokens), "
           f"packed into {d['train_chunks']} training + {d['val_chunks']} validation chunks of {d['pack_len']}; "
           + (f"{qd['steps']} steps" if qd else 'no QAD run') + f" of {sc['tokens_per_step']:,} tokens"
           + (f" (scaled down from the profile's {sc['profile_steps']} to fit one 10-minute device command at {sc['step_s'] * 1e3:.0f} ms/step)" if sc['scaled'] else f" (the profile's, {sc['step_s'] * 1e3:.0f} ms/step)")
           + f"; lr swept over {lr_txt}"
           + (f"; kept lr {qd['lr']:g}, best step {qd['best_step']} (validation chunks only, never these eval windows)" if qd else '')
           + (f"; lrs dropped for time: {', '.join(f'{x:g}' for x in sc['lrs_dropped'])}" if sc.get('lrs_dropped') else '')
           + (f"; lrs skipped for time: {', '.join(f'{x:g}' for x in sc['lrs_skipped'])}" if sc.get('lrs_skipped') else '')
           + f". Trained and evaluated in float32 (training: TF32 matmuls; evaluation: full float32). Gate: step-0 student KLD {doc['gate']['kld_student_step0']:.4f} "
           f"= AWQ {doc['gate']['kld_awq']:.4f} (2 windows). "
           + (f"Repack onto the original grid: max |scale·code − Q_s(W)| = {doc['repack']['max_abs_scale_code_minus_qweight']:g}, scales unchanged, "
              f"logits of the repacked model vs the fake-quant student rel. error {doc['repack']['logits_rel_error']:.1e}; "
              f"{doc['repack']['codes_changed_vs_awq']:.1%} of the INT4 codes differ from AWQ's. " if 'repack' in doc else '')
           + f"Device {prof['device']}, {prof['date'][:10]}.")
    md = (f"### A3 (gpu profile): INT4 W4A16 AWQ vs QAD — smollm2, g{GROUP}\n\n" + render_table(flat, cols) + '\n' + cap + '\n\n'
          + provenance_line(doc) + '\n')
    print(write_table('qad_a3_gpu', md, 'gpu')); print(md)
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    for lr, v in sweep.items():
        kept = qd and float(lr) == qd['lr']
        ax.plot(v['val_step'], v['val_kl'], 'o-' if kept else '.--', lw=2 if kept else 1, alpha=1 if kept else 0.7,
                label=f'lr {lr}' + (' (kept)' if kept else ''))
    ax.axhline(doc['gate']['val_kl_awq'], color='k', ls='--', label='AWQ PTQ (step 0)')
    if qd: ax.axvline(qd['best_step'], color='tab:green', ls=':', label='best checkpoint (kept lr)')
    ax.set_yscale('log'); ax.set_xlabel('step'); ax.set_ylabel('validation KL(BF16 ‖ student)')
    ax.set_title(f"smollm2 INT4 g{GROUP}, gpu profile ({prof['device']})"); ax.legend(frameon=False, fontsize=8)
    print(save_figure(fig, 'qad_val_kl_gpu', 'gpu'))

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('stage', choices=['bundle', 'run', 'render'])
    ap.add_argument('--out', default=None, help="bundle: folder of the parts (.devsite/qad_bundle); run: results folder ($OUT)")
    ap.add_argument('--part-mb', type=float, default=58.0)
    ap.add_argument('--work', default='/tmp/xfer')
    ap.add_argument('--manifest', default='.devsite/qad_bundle/manifest.json')
    ap.add_argument('--deadline', type=float, default=540.0, help='seconds the whole command may take (the device allows 600)')
    ap.add_argument('--git-sha', default=None, help='commit of the checkout that sent the run (default: git, else the bundle\'s)')
    ap.add_argument('--min-steps', type=int, default=200, help='below this many steps per lr, drop sweep lrs (smallest first)')
    ap.add_argument('--regen-batch', type=int, default=256)
    ap.add_argument('--save-int4', action='store_true', help='also write the repacked QAD codes/scales/norms to $OUT/qad_gpu_int4.safetensors')
    ap.add_argument('--results', default='data/results/qad_gpu.json')
    a = ap.parse_args()
    torch.manual_seed(0)
    if a.stage == 'bundle': bundle(Path(a.out or '.devsite/qad_bundle'), a.part_mb)
    elif a.stage == 'run':
        out = Path(a.out or os.environ.get('OUT', '/tmp/out')); out.mkdir(parents=True, exist_ok=True)
        run(Path(a.work), out, json.loads(Path(a.manifest).read_text()), a.deadline, a.git_sha, a.min_steps, a.regen_batch, a.save_int4)
    else: render(Path(a.results))

if __name__ == '__main__': main()
