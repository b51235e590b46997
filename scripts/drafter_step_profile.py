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

def top(prof, n=20):
    "The n ops / kernels with the most device time (CPU time where there is no device), per profiled run."
    key = 'device_time_total' if DEV == 'cuda' else 'cpu_time_total'
    ev = sorted(prof.key_averages(), key=lambda e: getattr(e, key), reverse=True)
    return [dict(name=e.key[:120], count=e.count, device_us=getattr(e, 'device_time_total', 0.0), cpu_us=e.cpu_time_total) for e in ev[:n]]

def main():
    ap = argparse.ArgumentParser(); ap.add_argument('--out', default=os.environ.get('OUT', '/tmp/out')); a = ap.parse_args()
    import effqwen.dflash as DF
    from effqwen.dflash import DFlashConfig, DFlashDrafter, train_drafter
    from effqwen.engine import StaticDrafter, _gpu_ms
    from torch.profiler import profile, ProfilerActivity
    t0 = time.time()
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
    res = dict(shapes=dict(batch=B, chunk=S, anchors=N, draft_vocab=nv, layers=2, taps=4, hidden=cfg.hidden_size), train={})
    for flex in ((True, False) if DEV == 'cuda' else (False,)):
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
    # the serving step: bf16 drafter on the static buffers, torch.compiled, CUDA graph (as gpu_drafter eval)
    tb = tgt.to(torch.bfloat16)
    d = DFlashDrafter(cfg).to(DEV).bind(tb); d.set_draft_vocab(torch.arange(nv)); d = d.to(torch.bfloat16).eval()
    maxlen = 512 if TINY else 4352
    res['serve'] = {}
    for comp in ((False, True) if DEV == 'cuda' else (False,)):
        sd = StaticDrafter(d, maxlen, compile=comp); sd.start()
        x = torch.randint(0, V, (1, 300), generator=g)
        f0 = torch.randn(1, 300, 4 * cfg.hidden_size, generator=g).to(DEV, torch.bfloat16)
        sd.propose(x, f0, 15)
        sd.n_new.fill_(3)
        step = _gpu_ms(sd.graph.replay if sd.graph is not None else sd._fn, 50)
        with profile(activities=acts) as prof:
            with torch.no_grad(): sd._fn()
            sync()
        kern = [e for e in prof.key_averages() if DEV == 'cuda' and str(getattr(e, 'device_type', '')).endswith('CUDA')]   # the kernels
        key = 'compiled' if comp else 'eager'
        res['serve'][key] = dict(step_ms=step, kernels=sum(e.count for e in kern), kernel_us=sum(e.device_time_total for e in kern),
                                 top=top(prof, 25))
        print('serve', key, f'{step:.3f} ms', res['serve'][key]['kernels'], 'kernels', flush=True)
    res['wall_s'] = time.time() - t0
    res['device'] = torch.cuda.get_device_name() if DEV == 'cuda' else 'cpu (dry run)'
    from effqwen.core import write_result, get_profile
    os.environ['EFFQWEN_OUT'] = a.out
    print(write_result('drafter_step_profile_h200' if DEV == 'cuda' and not TINY else 'drafter_step_profile_dryrun', res, get_profile('gpu'), device=DEV))

if __name__ == '__main__': main()
