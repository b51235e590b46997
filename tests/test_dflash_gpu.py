"""GPU checks of the drafter's training attention (skipped without CUDA): flex_attention's BlockMask gives the dense
mask's loss and gradients in float32, with gradients on (training) and off (`held_loss`, which now takes the flex path
too); with `FLEX_DTYPE = torch.bfloat16` (what `DRAFTER_ATTN_DTYPE=bfloat16` trains with) the loss and gradients stay
within bf16 rounding of float32's."""
import pytest, torch
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')

import effqwen.dflash as D
from effqwen.dflash import DFlashConfig, DFlashDrafter, dflash_loss, held_loss
from effqwen.model import tiny_llama

@pytest.fixture(autouse=True)
def _fp32_matmuls():   # exact float32 matmuls, so flex vs dense differ by summation order only; FLEX_DTYPE restored
    tf = torch.backends.cuda.matmul.allow_tf32; torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = tf; D.FLEX_DTYPE = None

def _setup(B=2, S=256, seed=0):
    t = tiny_llama(seed, torch.float32, initializer_range=0.2).cuda().eval()
    m = DFlashDrafter(DFlashConfig.for_target(t, mask_token_id=5, num_hidden_layers=2, target_layer_ids=(0, 1), block_size=16)).cuda().bind(t)
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(6, t.config.vocab_size, (B, S), generator=g).cuda()
    lm = torch.zeros(B, S, dtype=torch.bool, device='cuda'); lm[:, S // 4:] = True
    feats = torch.randn(B, S, len(m.cfg.target_layer_ids) * m.cfg.hidden_size, generator=g).cuda()
    return m, ids, feats, lm

def _loss_grads(m, ids, feats, lm, flex):
    m.zero_grad(set_to_none=True)
    r = dflash_loss(m, ids, feats, lm, 32, 7.0, torch.Generator().manual_seed(1), flex=flex); r.loss.backward()
    return r.loss.item(), torch.cat([p.grad.flatten() for p in m.parameters() if p.grad is not None]).double()

def test_flex_equals_dense_fp32():
    m, ids, feats, lm = _setup(); m.train()
    (lf, gf), (ld, gd) = _loss_grads(m, ids, feats, lm, True), _loss_grads(m, ids, feats, lm, False)
    assert abs(lf - ld) <= 1e-5 * abs(ld)
    assert (gf - gd).norm() <= 1e-4 * gd.norm()

def test_held_loss_flex_equals_dense():
    m, ids, feats, lm = _setup()
    a, b = held_loss(m, ids, feats, lm, n_anchors=32, batch_size=1), held_loss(m, ids, feats, lm, n_anchors=32, batch_size=1, flex=False)
    assert abs(a[0] - b[0]) <= 1e-5 * abs(b[0]) and abs(a[1] - b[1]) < 1e-6

def test_bf16_attention_close_to_fp32():
    m, ids, feats, lm = _setup(); m.train()
    l32, g32 = _loss_grads(m, ids, feats, lm, True)
    D.FLEX_DTYPE = torch.bfloat16
    l16, g16 = _loss_grads(m, ids, feats, lm, True)
    assert abs(l16 - l32) <= 1e-2 * abs(l32) and l16 != l32          # close, and the bf16 path did run
    assert torch.nn.functional.cosine_similarity(g16, g32, dim=0) > 0.999

def test_grad_accum_through_accelerate_equals_hand_accumulation():
    """`train_drafter(grad_accum=2)` on CUDA (accelerate, the loss module, flex attention with gradients) takes the step
    a hand-written accumulation of the same two micro-batches takes: their anchors from the step's drawn seed + m, each
    loss / 2, one clipped AdamW step at the first step's lr. (Adam's first step is about lr x sign(grad): other chunks or
    anchors move the weights elsewhere; the tolerance allows reduction-order noise in a few near-zero gradients.)"""
    from effqwen.dflash import train_drafter
    m, ids, feats, lm = _setup(B=4, S=128)
    w0 = [v.detach().clone() for v in m.state_dict().values()]
    ref = DFlashDrafter(m.cfg).cuda().bind(tiny_llama(0, torch.float32, initializer_range=0.2).cuda())
    ref.load_state_dict(m.state_dict()); ref.train()
    train_drafter(m, None, ids, lm, steps=1, batch_size=4, n_anchors=16, lr=1e-3, features=feats, grad_accum=2, seed=3)
    g = torch.Generator().manual_seed(3)
    idx = torch.randint(0, ids.shape[0], (4,), generator=g); s = int(torch.randint(0, 2**62, (1,), generator=g))
    params = [p for p in ref.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0)
    for k in range(2):
        sel = idx[2 * k:2 * k + 2].cuda()
        (dflash_loss(ref, ids[sel], feats[sel], lm[sel], 16, 7.0, torch.Generator().manual_seed(s + k)).loss / 2).backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0); opt.step()
    dm = torch.cat([(a - b).flatten() for a, b in zip(m.state_dict().values(), w0)])
    dr = torch.cat([(a - b).flatten() for a, b in zip(ref.state_dict().values(), w0)])
    assert dr.norm() > 0
    assert (dm - dr).norm() <= 1e-2 * dr.norm(), ((dm - dr).norm().item(), dr.norm().item())
    # the check can fail: the same step with the two micro-batches' anchor seeds swapped lands elsewhere
    ref.load_state_dict(dict(zip(m.state_dict().keys(), w0))); ref.zero_grad(set_to_none=True)
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0)
    for k in range(2):
        sel = idx[2 * k:2 * k + 2].cuda()
        (dflash_loss(ref, ids[sel], feats[sel], lm[sel], 16, 7.0, torch.Generator().manual_seed(s + 1 - k)).loss / 2).backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0); opt.step()
    dx = torch.cat([(a - b).flatten() for a, b in zip(ref.state_dict().values(), w0)])
    assert (dm - dx).norm() > 0.1 * dr.norm(), (dm - dx).norm().item()
