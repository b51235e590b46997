"""Where the gpu drafter's time goes, at the SmolLM2 gpu-profile shapes with random weights (no bundle needed):

1. one training step of `train_drafter` (batch 16 chunks × 1024 tokens, 128 anchors per chunk, 4 taps, 2 layers,
   draft vocabulary 16384, float32 with TF32), flex_attention's block mask vs the dense bool mask: step ms and the
   top CUDA kernels / CPU time per step (torch.profiler), to tell GPU-bound from host-bound;
2. one serving step of `engine.StaticDrafter` (bf16, CUDA graph, torch.compiled like the eval's): GPU ms per step
   and the kernels one step launches.

    python scripts/drafter_step_profile.py --out $OUT        # on the GPU, about 3 minutes
    DEV=cpu TINY=1 python scripts/drafter_step_profile.py    # a dry run of the code paths here
"""
import argparse, json, os, time
from pathlib import Path
import torch

DEV = os.environ.get('DEV', 'cuda'); TINY = bool(os.environ.get('TINY'))

def target():
    from transformers import LlamaConfig, LlamaForCausalLM
    c = LlamaConfig(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                    vocab_size=49152, tie_word_embeddings=True, max_position_embeddings=8192, rope_theta=100000.0, rms_norm_eps=1e-5)
    if TINY: c.num_hidden_layers, c.vocab_size = 8, 4096
    torch.manual_seed(0)
    return LlamaForCausalLM(c).to(DEV).eval()

def target_4b():
    "(stand-in target, reference drafter config, draft vocabulary rows) at the Qwen3.5-4B drafter's shape (TINY: small)."
    from transformers import LlamaConfig, LlamaForCausalLM
    from effqwen.engine import reference_drafter_config
    H, V = (256, 4096) if TINY else (2560, 248320)
    c = LlamaConfig(hidden_size=H, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                    vocab_size=V, tie_word_embeddings=True, max_position_embeddings=16384)
    torch.manual_seed(0)
    t = LlamaForCausalLM(c).to(DEV, torch.bfloat16).eval()
    cfg = reference_drafter_config(t)
    if TINY:
        from dataclasses import replace
        cfg = replace(cfg, num_attention_heads=4, num_key_value_heads=2, head_dim=64, intermediate_size=512)
    return t, cfg, round(V / 3)

def serve(tgt, cfg, nv, g, acts, sync):
    """GPU ms of one recorded serving step (bf16 drafter, draft vocabulary of nv rows) for the plain and the fused step,
    eager and torch.compiled, at a 300-token context; the kernels one step launches; whether both propose alike."""
    from effqwen.dflash import DFlashDrafter
    from effqwen.engine import StaticDrafter, _gpu_ms
    from torch.profiler import profile
    torch.manual_seed(0)
    tb = tgt.to(torch.bfloat16)
    d = DFlashDrafter(cfg).to(DEV).bind(tb); d.set_draft_vocab(torch.arange(nv)); d = d.to(torch.bfloat16).eval()
    maxlen = 512 if TINY else 4352
    V = tgt.config.vocab_size
    x = torch.randint(0, V, (1, 300), generator=g)
    f0 = torch.randn(1, 300, cfg.n_taps * cfg.hidden_size, generator=g).to(DEV, torch.bfloat16)
    f1 = torch.randn(1, 3, cfg.n_taps * cfg.hidden_size, generator=g).to(DEV, torch.bfloat16)
    out, toks = dict(hidden=cfg.hidden_size, layers=cfg.num_hidden_layers, vocab=V, draft_vocab=nv), {}
    runs = [('bf16', fz, comp) for fz in (False, True) for comp in ((False, True) if DEV == 'cuda' else (False,))]
    runs += [('w4a16', fz, DEV == 'cuda') for fz in (False, True)]   # W4A16 g128 linears (the fused step: Gluon fragment kernels on Hopper)
    name = lambda k, fz, c: f"{'' if k == 'bf16' else 'w4a16_'}{'fused' if fz else 'plain'}_{'compiled' if c else 'eager'}"
    for kind, fz, comp in runs:
        if kind == 'w4a16' and not any(k[0] == 'w4a16' for k in toks):
            from effqwen.kernels import W4A16Linear, replace_linears
            replace_linears(d, lambda l: W4A16Linear.from_float(l, group_size=128 if cfg.hidden_size % 128 == 0 else 64))
        sd = StaticDrafter(d, maxlen, compile=comp, fused=fz); sd.start()
        first = sd.propose(x, f0, 15)[0]
        toks[kind, fz, comp] = torch.cat([first, sd.propose(torch.cat([x, first[None, :3].cpu()], 1), f1, 15)[0]]).cpu()
        sd.n_new.fill_(3)
        step = _gpu_ms(sd.graph.replay if sd.graph is not None else torch.no_grad()(sd._fn), 50)
        with profile(activities=acts) as prof:
            with torch.no_grad(): sd._fn()
            sync()
        kern = [e for e in prof.key_averages() if DEV == 'cuda' and str(getattr(e, 'device_type', '')).endswith('CUDA')]
        key = name(kind, fz, comp)
        out[key] = dict(step_ms=step, kernels=sum(e.count for e in kern), kernel_us=sum(e.device_time_total for e in kern),
                        top=top(prof, 25))
        print('serve', cfg.hidden_size, key, f'{step:.3f} ms', out[key]['kernels'], 'kernels', flush=True)
        del sd
    # the two steps' drafts (two rounds of 15): bf16 rounding may part them at near-ties, so this counts, not asserts
    out['same_drafts_as_plain'] = {name(*key): int((t == toks[key[0], False, key[2]]).sum()) for key, t in toks.items()}   # same linears, same compile
    out['drafts'] = len(next(iter(toks.values())))
    return out

def top(prof, n=20):
    "The n ops / kernels with the most device time (CPU time where there is no device), per profiled run."
    key = 'device_time_total' if DEV == 'cuda' else 'cpu_time_total'
    ev = sorted(prof.key_averages(), key=lambda e: getattr(e, key), reverse=True)
    return [dict(name=e.key[:120], count=e.count, device_us=getattr(e, 'device_time_total', 0.0), cpu_us=e.cpu_time_total) for e in ev[:n]]

def main():
    ap = argparse.ArgumentParser(); ap.add_argument('--out', default=os.environ.get('OUT', '/tmp/out'))
    ap.add_argument('--serve-only', action='store_true', help='skip the training-step profile')
    ap.add_argument('--with-4b', action='store_true', help='also the serving step at the Qwen3.5-4B reference drafter shape')
    a = ap.parse_args()
    import effqwen.dflash as DF
    from effqwen.dflash import DFlashConfig, DFlashDrafter, train_drafter
    from effqwen.engine import StaticDrafter, _gpu_ms
    from torch.profiler import profile, ProfilerActivity
    t0 = time.time()
    res = {}
    if DEV == 'cuda': torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    tgt = target(); V = tgt.config.vocab_size
    B, S, N, nv = (2, 128, 8, 512) if TINY else (16, 1024, 128, 16384)
    cfg = DFlashConfig.for_target(tgt, mask_token_id=16, num_hidden_layers=2, block_size=16, n_taps=4)
    g = torch.Generator().manual_seed(0)
    n_chunks = 4 * B
    ids = torch.randint(0, V, (n_chunks, S), generator=g).to(DEV)
    lm = torch.zeros(n_chunks, S, dtype=torch.bool); lm[:, S // 4:] = True; lm = lm.to(DEV)
    feats = torch.randn(n_chunks, S, 4 * cfg.hidden_size, generator=g).to(DEV)
    sync = torch.cuda.synchronize if DEV == 'cuda' else (lambda: None)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEV == 'cuda' else [])
    res.update(shapes=dict(batch=B, chunk=S, anchors=N, draft_vocab=nv, layers=2, taps=4, hidden=cfg.hidden_size), train={})
    for flex in (() if a.serve_only else (True, False) if DEV == 'cuda' else (False,)):
        DF.FLEX_TRAIN = flex
        d = DFlashDrafter(cfg).to(DEV).bind(tgt); d.set_draft_vocab(torch.arange(nv))
        run = lambda steps: train_drafter(d, None, ids, lm, steps=steps, batch_size=B, n_anchors=N, features=feats)
        run(3); sync()                                                   # warm-up (flex compiles)
        t = time.time(); run(10); sync(); ms = (time.time() - t) / 10 * 1e3
        with profile(activities=acts) as prof: run(3); sync()
        key = 'flex' if flex else 'dense'
        res['train'][key] = dict(step_ms=ms, top=top(prof))
        print(key, f'{ms:.1f} ms/step', flush=True)
        for r in res['train'][key]['top'][:8]: print('  ', r, flush=True)
    # the serving step: bf16 drafter on the static buffers, torch.compiled, CUDA graph (as gpu_drafter eval), the fused
    # step (`StaticDrafter(fused=True)`, the default) against the plain one, at the SmolLM2 drafter's shape and (--with-4b)
    # at the Qwen3.5-4B reference drafter's (5 layers, hidden 2560, 248,320-token vocabulary; a 2-layer stand-in target
    # supplies the embedding and head: the step reads only those and the tap features)
    res['serve'] = serve(tgt, cfg, nv, g, acts, sync)
    if a.with_4b: res['serve_4b'] = serve(*target_4b(), g, acts, sync)
    res['wall_s'] = time.time() - t0
    res['device'] = torch.cuda.get_device_name() if DEV == 'cuda' else 'cpu (dry run)'
    from effqwen.core import write_result, get_profile
    os.environ['EFFQWEN_OUT'] = a.out
    name = 'drafter_step_profile' + ('_serve' if a.serve_only else '')
    print(write_result(f'{name}_h200' if DEV == 'cuda' and not TINY else f'{name}_dryrun', res, get_profile('gpu'), device=DEV))

if __name__ == '__main__': main()
