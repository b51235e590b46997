"""Probe: how fast does a fresh 1-layer DFlash drafter on SmolLM2 learn a trivial task (position 1 := the anchor token, or := the token before it)?
On CPU (1 thread, 100 steps x 4 chunks x 16 blocks, cached features of 40 cpu-profile chunks): copy accuracy 0.17 at lr 1e-3 (fp32 and bf16 autocast alike),
0.52 at lr 6e-3; a final-norm weight initialised at 0.05 instead of 1 is worse (0.11). Builds its data (cached regen conversations, features of the first 40 chunks) on first use under /tmp.
Usage: python scripts/drafter_lr_probe.py anchor|anchor_bf16|anchor_small|prev STEPS LR"""
# Can the drafter learn trivial tasks? pos-1 label := anchor token (block path) or := token at anchor-1 (context path)
import sys, torch, time, torch.nn.functional as F
torch.set_num_threads(1)
from effqwen.core import get_profile, set_determinism
from effqwen.model import load_target
from effqwen.drafter_opt import mask_token_for
from effqwen.dflash import DFlashConfig, DFlashDrafter, sample_anchors, packed_block_forward, cosine_with_warmup
task = sys.argv[1]; steps = int(sys.argv[2]); lr = float(sys.argv[3])
p = get_profile('cpu'); bf16, tok = load_target(p)
cfg = DFlashConfig.for_target(bf16, mask_token_id=mask_token_for(tok), num_hidden_layers=1, block_size=16, n_taps=3)
import os
if not os.path.exists('/tmp/dr_probe.pt'):
    from effqwen.regen import pack
    from effqwen.drafter_opt import drafter_size, drafter_conversations, pack_features
    pk = pack(drafter_conversations(bf16, tok, p, 'bf16', f'{p.model}-bf16'), tok, drafter_size(p).pack_len)
    lm0 = pk['response_mask'].bool() & pk['attention_mask'].bool()
    torch.save(dict(ids=pk['input_ids'][:40], lm=lm0[:40], feats=pack_features(bf16, pk['input_ids'][:40], list(cfg.target_layer_ids))), '/tmp/dr_probe.pt')
dd = torch.load('/tmp/dr_probe.pt'); ids, lm, feats = dd['ids'], dd['lm'], dd['feats']
BF = 'bf16' in task
if BF:
    bf16 = bf16.to(torch.bfloat16); feats = feats.to(torch.bfloat16)
if 'fix' in task:
    import effqwen.dflash as D
    orig = D.DFlashDrafter.forward
    def fwd(self, block_emb, block_pos, ctx=None, ctx_pos=None, mask=None, cache=None):
        return orig(self, block_emb.to(self.norm.weight.dtype), block_pos, None if ctx is None else ctx.to(self.norm.weight.dtype), ctx_pos, mask, cache)
    D.DFlashDrafter.forward = fwd
set_determinism(0); d = DFlashDrafter(cfg).bind(bf16)
if 'small' in task:
    with torch.no_grad(): d.norm.weight.fill_(0.05)
opt = torch.optim.AdamW([q for q in d.parameters() if q.requires_grad], lr=lr)
g = torch.Generator().manual_seed(0); t = time.time()
for s in range(steps):
    for gr in opt.param_groups: gr['lr'] = lr * cosine_with_warmup(s, steps)
    idx = torch.randint(0, 40, (4,), generator=g)
    a, keep = sample_anchors(lm[idx], 16, g)
    with torch.autocast('cpu', dtype=torch.bfloat16, enabled=BF):
      h = packed_block_forward(d, ids[idx], feats[idx], a).view(4, a.shape[1], 16, -1)[:, :, 1][keep]
    lab = torch.gather(ids[idx], 1, a if task.startswith('anchor') else (a - 1).clamp(min=0))[keep]
    with torch.autocast('cpu', dtype=torch.bfloat16, enabled=BF):
      logits = d.draft_logits(h)
    loss = F.cross_entropy(logits.float(), lab)
    opt.zero_grad(); loss.backward(); torch.nn.utils.clip_grad_norm_(d.parameters(), 1.0); opt.step()
    if s % 25 == 0 or s == steps - 1: print(task, s, round(loss.item(), 3), 'acc', round((logits.argmax(-1) == lab).float().mean().item(), 3), f'{time.time()-t:.0f}s', flush=True)
