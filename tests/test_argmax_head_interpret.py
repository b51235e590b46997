"""`effqwen.engine.ArgmaxHead` on a CPU under Triton's interpreter (`TRITON_INTERPRET=1`, read when effqwen is imported,
hence a subprocess): its two kernels (the W8A16 GEMV with its row-maxima epilogue; the pick kernel that lists and
rescores the candidates, whose last program per row reduces the partials) give the BF16 head's argmax, ties to the
first index as torch's: rows that tie exactly, blocks with more candidates than slots (then the whole block is
rescored), the decode bookkeeping, and back-to-back calls (counters left at zero, row maxima at -inf)."""
import os, subprocess, sys, textwrap
import pytest

pytest.importorskip('triton')

SCRIPT = textwrap.dedent('''
    import torch, torch.nn as nn, torch.nn.functional as F
    from effqwen.engine import ArgmaxHead
    torch.manual_seed(0)
    for dt in (torch.bfloat16, torch.float32):
        lin = nn.Linear(256, 3000, bias=False).to(dt)
        ah = ArgmaxHead(lin, block=512)                         # several pick programs per row on these small heads
        for T in (1, 5, 1):
            h = (torch.randn(T, 256) * 4).to(dt)
            nt = torch.full((8,), -1, dtype=torch.long)
            ah.argmax_into(h, nt)
            assert torch.equal(nt[:T], F.linear(h, lin.weight).argmax(-1)), (dt, T, nt[:T], F.linear(h, lin.weight).argmax(-1))
            assert not ah._scratch[-1].any(), ah._scratch[-1]   # every row's counter back at zero
            assert (ah._scratch[1] == float('-inf')).all()       # and every row's INT8 maximum back at -inf
    w = torch.randn(3000, 256).to(torch.bfloat16); h = torch.randn(1, 256).to(torch.bfloat16)
    w[2500] = w[100] = w[2999] = (h[0].float() * 0.5).to(torch.bfloat16)   # exact ties: the first index is the token
    lin = nn.Linear(256, 3000, bias=False).to(torch.bfloat16); lin.weight.data.copy_(w)
    nt = torch.zeros(1, dtype=torch.long); ArgmaxHead(lin, block=512).argmax_into(h, nt)
    assert nt.item() == 100 == F.linear(h, w).argmax(-1).item(), nt
    w = (torch.randn(1, 64) + 1e-3 * torch.randn(600, 64)).to(torch.bfloat16)   # 600 nearly equal rows, 2 slots a block
    lin = nn.Linear(64, 600, bias=False).to(torch.bfloat16); lin.weight.data.copy_(w)
    ah = ArgmaxHead(lin, block=512, slots=2); h = torch.randn(2, 64).to(torch.bfloat16)
    nt = torch.zeros(2, dtype=torch.long); ah.argmax_into(h, nt)
    assert torch.equal(nt, F.linear(h, w).argmax(-1)), (nt, F.linear(h, w).argmax(-1))
    pos, tok, out = torch.tensor([6]), torch.zeros(2, dtype=torch.long), torch.zeros(10, dtype=torch.long)
    ah.argmax_into(h[1:], nt, pos, tok, out)                   # the decode bookkeeping: pos += 1, tok[0] = out_ids[pos] = the token
    want = F.linear(h[1:], w).argmax(-1).item()
    assert pos.item() == 7 and tok[0] == want and out[7] == want and nt[0] == want
    print('argmax head ok')
''')

def test_argmax_head_under_interpreter():
    env = dict(os.environ, TRITON_INTERPRET='1', OMP_NUM_THREADS=os.environ.get('OMP_NUM_THREADS', '2'))
    r = subprocess.run([sys.executable, '-c', SCRIPT], env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0 and 'argmax head ok' in r.stdout, r.stdout[-3000:] + r.stderr[-6000:]
