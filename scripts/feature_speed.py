"""How fast the drafter's training features come out of the SmolLM2 target, float32 (what `gpu_drafter.py train` has
used: its targets are float32) against bfloat16 (what the serving engine computes), on the same 4,096-token chunks of
real text, and how far the bf16 features are from the float32 ones. Session 31's training record shows 157 s of
`features_s` for 6.4M tokens (about 41K tokens a second, packing included), which bounds how much data a lease can
precompute and makes online features (one target forward a training step) cost more than the step itself.

    WORK=/tmp/xfer PYTHONPATH=/tmp/site:. OUT=$OUT python3 scripts/feature_speed.py [CHUNKS]   # -> data/results/feature_speed_<gpu>.json
    DEV=cpu WORK=... python3 scripts/feature_speed.py 2                                          # a dry run (no result written)
"""
import copy, json, os, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import torch

def main(n_chunks: int = 64, seq: int = 4096, batch: int = 16):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from effqwen.core import write_result
    from effqwen.dflash import build_target_layer_ids
    from effqwen.drafter_opt import pack_features
    dev = os.environ.get('DEV', 'cuda'); cuda = dev == 'cuda'; work = os.environ.get('WORK', '/tmp/xfer')
    if not cuda: seq, batch = 256, 2
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True   # as `train` sets for its float32 targets
    tok = AutoTokenizer.from_pretrained(f'{work}/smollm2')
    texts = [x['prompt'] for x in json.loads(Path(f'{work}/bundle/prompts.json').read_text())['train']]
    ids = []
    for t in texts:                                            # the training prompts' tokens, cut into chunks
        ids += tok(t, add_special_tokens=False).input_ids + [tok.eos_token_id]
        if len(ids) >= n_chunks * seq: break
    if len(ids) < n_chunks * seq: raise ValueError(f'the bundle prompts give {len(ids)} tokens, fewer than {n_chunks} x {seq}')
    x = torch.tensor(ids[:n_chunks * seq]).view(n_chunks, seq).to(dev)
    m32 = AutoModelForCausalLM.from_pretrained(f'{work}/smollm2', dtype=torch.float32).to(dev).eval()
    layers = build_target_layer_ids(m32.config.num_hidden_layers, 4)
    runs, feats = {}, {}
    for name, model in (('float32', m32), ('bfloat16', copy.deepcopy(m32).to(torch.bfloat16))):   # (as train's bf16 feature target)
        pack_features(model, x[:batch], layers, batch_size=batch, progress=False); sync()       # warm-up
        if cuda: torch.cuda.reset_peak_memory_stats()
        t = time.time(); f = pack_features(model, x, layers, batch_size=batch, progress=False, dtype=torch.bfloat16); sync(); s = time.time() - t
        feats[name] = f
        runs[name] = dict(seconds=s, tokens_per_s=x.numel() / s, peak_gb=torch.cuda.max_memory_allocated() / 2**30 if cuda else None,
                          attention=model.config._attn_implementation)
        print(name, runs[name], flush=True)
    a, b = feats['float32'].float(), feats['bfloat16'].float()
    H = m32.config.hidden_size
    rel = [float((b[..., k*H:(k+1)*H] - a[..., k*H:(k+1)*H]).norm() / a[..., k*H:(k+1)*H].norm()) for k in range(len(layers))]
    cos = [float(torch.nn.functional.cosine_similarity(b[..., k*H:(k+1)*H], a[..., k*H:(k+1)*H], dim=-1).mean()) for k in range(len(layers))]
    print('bf16 vs float32 features, relative error per tap', rel, 'mean cosine', cos, flush=True)
    if not cuda: print('dry run on the CPU: no result written'); return
    if os.environ.get('OUT'): os.environ['EFFQWEN_OUT'] = os.environ['OUT']
    gpu = torch.cuda.get_device_name().split()[-1].lower()
    print(write_result(f'feature_speed_{gpu}', dict(chunks=n_chunks, seq=seq, batch=batch, taps=layers, runs=runs,
                                                    speedup=runs['float32']['seconds'] / runs['bfloat16']['seconds'],
                                                    bf16_vs_fp32=dict(relative_error=rel, mean_cosine=cos),
                                                    note='SmolLM2-135M-Instruct, effqwen.drafter_opt.pack_features (features stored in bf16), '
                                                         'TF32 on; the bundle training prompts\' tokens cut into chunks; one warm-up batch, then one timed pass'),
                       'gpu', device='cuda'))

if __name__ == '__main__':
    main(*(int(a) for a in sys.argv[1:2]))
