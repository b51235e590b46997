"""Probe: why does the cpu-profile DFlash drafter stay near unigram accuracy (tau ~1.1 in table A4)?

Trains fresh 1-layer drafters (the cpu DrafterSize: 3 taps, batch 4 x 16 anchors, 512-token chunks, lr 6e-3) on the
cpu profile's BF16-regenerated conversations (the same cached data as 22_drafter_training; the last 10% of chunks held
out) under a few variants, and reports teacher-forced block accuracy on training vs held-out chunks next to two
count-based ceilings of the same data (unigram and bigram next-token accuracy on the held-out responses):
  base       the recipe as in 22 (random init)
  std        target features divided by their per-dimension RMS (SmolLM2's tapped states have outlier dimensions
             37x the median magnitude: does fc waste its steps on them?)
  init       drafter layer, its norms and the final norm copied from the target's last decoder layer
Usage: OMP_NUM_THREADS=1 python scripts/drafter_cpu_probe.py [base:120 std:120 init:120 base:480 ...]
Writes data/results/drafter_probe.json (profile cpu)."""
import os, sys, time, torch
from collections import Counter, defaultdict
torch.set_num_threads(int(os.environ.get('OMP_NUM_THREADS', '1')))
from effqwen.core import get_profile, set_determinism, write_result
from effqwen.model import load_target
from effqwen.regen import pack
from effqwen.dflash import DFlashConfig, DFlashDrafter, train_drafter, block_accuracy
from effqwen.drafter_opt import drafter_size, pack_features, mask_token_for, drafter_conversations, frequent_tokens

runs_wanted = sys.argv[1:] or ['base:120', 'std:120', 'init:120', 'base:480']
p = get_profile('cpu'); S = drafter_size(p)
bf16, tok = load_target(p)
pk = pack(drafter_conversations(bf16, tok, p, 'bf16', f'{p.model}-bf16'), tok, S.pack_len)
lm = pk['response_mask'].bool() & pk['attention_mask'].bool()
cfg = DFlashConfig.for_target(bf16, mask_token_id=mask_token_for(tok), num_hidden_layers=S.layers, block_size=S.block, n_taps=S.taps)
feats = pack_features(bf16, pk['input_ids'], list(cfg.target_layer_ids), progress=False)
ids = pk['input_ids']; nh = max(1, len(ids) // 10); H = cfg.hidden_size
tr, ho, lmt, lmh = ids[:-nh], ids[-nh:], lm[:-nh], lm[-nh:]

taps = {}
for t, f in zip(cfg.target_layer_ids, feats.float().split(H, -1)):
    dim = f.abs().mean((0, 1))
    taps[t] = dict(top_dim_mean_abs=dim.topk(4).values.tolist(), median_dim_mean_abs=dim.median().item())

big, uni = defaultdict(Counter), Counter()              # count-based ceilings from the training responses
for r, m in zip(tr, lmt):
    for i in range(len(r) - 1):
        if m[i + 1]: big[int(r[i])][int(r[i + 1])] += 1; uni[int(r[i + 1])] += 1
top = uni.most_common(1)[0][0]; hb = hu = n = 0
for r, m in zip(ho, lmh):
    for i in range(len(r) - 1):
        if m[i + 1] and m[i]:
            a, b = int(r[i]), int(r[i + 1]); n += 1; hu += b == top
            hb += (big[a].most_common(1)[0][0] if a in big else top) == b
ceilings = dict(unigram_acc=hu / n, bigram_acc=hb / n, n=n)
print('ceilings', ceilings, flush=True)

def init_from_target(d):
    L = bf16.model.layers[-1]
    with torch.no_grad():
        for x in ('q_proj', 'k_proj', 'v_proj', 'o_proj'): getattr(d.layers[0].self_attn, x).weight.copy_(getattr(L.self_attn, x).weight)
        for x in ('gate_proj', 'up_proj', 'down_proj'): getattr(d.layers[0].mlp, x).weight.copy_(getattr(L.mlp, x).weight)
        d.layers[0].input_layernorm.weight.copy_(L.input_layernorm.weight)
        d.layers[0].post_attention_layernorm.weight.copy_(L.post_attention_layernorm.weight)
        d.norm.weight.copy_(bf16.model.norm.weight)

runs = []
for spec in runs_wanted:
    variant, steps = spec.split(':'); steps = int(steps)
    if variant not in ('base', 'std', 'init'): raise ValueError(f'variant {variant!r}: use base, std or init')
    set_determinism(0); d = DFlashDrafter(cfg).bind(bf16)
    d.set_draft_vocab(frequent_tokens(tr[lmt], S.draft_vocab, cfg.vocab_size, always=[tok.eos_token_id]))
    if variant == 'init': init_from_target(d)
    f = feats
    if variant == 'std': f = (feats.float() / feats[:-nh].float().pow(2).mean((0, 1)).sqrt().clamp_min(1e-3)).to(feats.dtype)
    t = time.time()
    r = train_drafter(d, None, tr, lmt, steps=steps, batch_size=S.batch, lr=S.lr, n_anchors=S.anchors, seed=0, features=f[:-nh])
    a_tr = block_accuracy(d, tr[:nh], f[:nh], lmt[:nh], n_anchors=S.anchors)
    a_ho = block_accuracy(d, ho, f[-nh:], lmh, n_anchors=S.anchors)
    runs.append(dict(variant=variant, steps=steps, lr=S.lr, blocks_seen=steps * S.batch * S.anchors, final_loss=sum(r.losses[-5:]) / 5,
                     acc_train=a_tr.acc, acc_held=a_ho.acc, tf_tau_train=a_tr.tau, tf_tau_held=a_ho.tau, seconds=time.time() - t))
    print(f"{spec}: loss {runs[-1]['final_loss']:.2f}, pos-1 acc train {a_tr.acc[0]:.3f} / held-out {a_ho.acc[0]:.3f}, "
          f"held-out tf-tau {a_ho.tau:.2f} ({runs[-1]['seconds']:.0f}s)", flush=True)

write_result('drafter_probe', dict(model=p.model, data=dict(chunks=len(ids), held_chunks=nh, train_response_tokens=int(lmt.sum()),
             held_response_tokens=int(lmh.sum()), pack_len=S.pack_len), taps=taps, ceilings=ceilings, runs=runs,
             threads=torch.get_num_threads()), p)
