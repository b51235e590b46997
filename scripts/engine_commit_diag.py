"""GPU: PYTHONPATH=. python3 scripts/engine_commit_diag.py — commit(n) vs the engine's own prefill vs HF (tiny Qwen3.5, fp32)."""
# GPU: is commit(n)'s error vs HF a rollback bug or the reference's TF32? Compare commit(n) with the engine's own
# prefill of the same prefix, and both with HF.
import torch
from effqwen.core import rel_error
from effqwen.model import tiny_qwen35
from effqwen.engine import Engine
torch.manual_seed(0)
m = tiny_qwen35(0, torch.float32, initializer_range=0.2).cuda()
eng = Engine(m, max_seq_len=160)
g = torch.Generator().manual_seed(0)
prs = [torch.randint(0, 255, (1, L), generator=g).cuda() for L in (5, 23, 70)]
pr, blk = prs[1], torch.randint(0, 255, (16,), device='cuda')
nxt = torch.tensor([5], device='cuda')
with torch.no_grad():
    for n in (1, 7, 16):
        eng.prefill(pr); eng.verify(blk); eng.commit(n); eng.tok[:1] = nxt
        a = eng.decode_one_token().clone()
        eng.prefill(torch.cat([pr[0], blk[:n]])[None]); eng.tok[:1] = nxt
        b = eng.decode_one_token().clone()
        want = m(torch.cat([pr[0], blk[:n], nxt])[None]).logits[0, -1]
        print(f'n={n}: commit vs own prefill {rel_error(a, b):.2e}; commit vs HF {rel_error(a, want):.2e}; prefill vs HF {rel_error(b, want):.2e}', flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    for n in (16,):
        want = m(torch.cat([pr[0], blk[:n], nxt])[None]).logits[0, -1]
        want2 = m(torch.cat([pr[0], blk[:n], nxt])[None].cpu().cuda()).logits[0, -1]
        print('HF run-to-run', rel_error(want, want2))
