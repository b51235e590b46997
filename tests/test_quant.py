"Library-level checks of effqwen.quant: the exported module alone (no notebook globals), on CPU-sized tensors."
import copy, os
import pytest, torch
from torch import nn
from effqwen.quant import (GPTQ, IntQuantizer, GroupQuantizer, rtn_quantize, hessian_error, fake_quant, quantize_sym,
                           dequantize_sym, quantize_linears, awq_smooth, InputScaledLinear, matches)
from effqwen.core import rel_error

torch.set_num_threads(int(os.environ.get('OMP_NUM_THREADS', 1)))


def _inputs(n, d, seed):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(d, d, generator=g) / d**0.5 + torch.eye(d)
    return (torch.randn(n, d, generator=g) @ A) * torch.logspace(-1, 1, d)[torch.randperm(d, generator=g)]


@pytest.mark.parametrize('seed', range(3))
@pytest.mark.parametrize('act_order', [False, True])
@pytest.mark.parametrize('group', [32, 64])
def test_gptq_beats_rtn(seed, act_order, group):
    torch.manual_seed(seed)
    W, X = torch.randn(32, 128), _inputs(512, 128, seed)
    g = GPTQ(W); g.add_batch(X)
    q = IntQuantizer(4, group)
    Wq, params = g.quantize(q, blocksize=48, act_order=act_order)       # blocksize rounds to a multiple of the group
    assert len(params) == 128 // group
    assert hessian_error(W, Wq, g.H) < hessian_error(W, rtn_quantize(W, q)[0], g.H)
    ex = q.export(Wq, params)
    torch.testing.assert_close(dequantize_sym(ex['codes'], ex['scales'], group), Wq, rtol=0, atol=1e-6)


def test_bad_group_and_bits():
    with pytest.raises(ValueError, match='does not divide in_features=576'): quantize_sym(torch.randn(4, 576), 4, 128)
    with pytest.raises(ValueError, match='bits=1'): IntQuantizer(1, 32)
    g = GPTQ(torch.randn(4, 64)); g.add_batch(torch.randn(16, 64))
    with pytest.raises(ValueError, match='does not divide'): g.quantize(IntQuantizer(4, 128))


class _Signs:
    "A 1-bit sign quantizer with a per-row scale: the protocol works for non-integer grids (BCQ-like)."
    group_size = 32
    def fit(self, w): return w.abs().mean(1, keepdim=True)
    def quantize(self, w, a): return a * torch.where(w >= 0, 1.0, -1.0)


def test_protocol_with_custom_quantizer():
    assert isinstance(_Signs(), GroupQuantizer)
    W, X = torch.randn(16, 64), _inputs(256, 64, 0)
    g = GPTQ(W); g.add_batch(X)
    Wq, params = g.quantize(_Signs())
    A = Wq.abs().reshape(16, 2, 32)
    assert torch.equal(A, A[..., :1].expand_as(A))                                      # one magnitude per (row, group)
    assert hessian_error(W, Wq, g.H) < hessian_error(W, rtn_quantize(W, _Signs())[0], g.H)


class _Block(nn.Module):
    def __init__(s, d): super().__init__(); s.norm = nn.LayerNorm(d); s.up = nn.Linear(d, 2 * d); s.down = nn.Linear(2 * d, d)
    def forward(s, h): return h + s.down(torch.relu(s.up(s.norm(h))))


class _Toy(nn.Module):
    def __init__(s, d=32, n=2):
        super().__init__(); s.layers = nn.ModuleList(_Block(d) for _ in range(n)); s.fc = nn.Linear(2 * d, d); s.head = nn.Linear(d, 16)
    def forward(s, x):
        h = s.fc(x)
        for l in s.layers: h = l(h)
        return s.head(h)


def test_quantize_linears_and_awq_from_library():
    torch.manual_seed(0)
    model = _Toy()
    xs = [torch.randn(4, 32, 64) for _ in range(2)]
    ref = torch.cat([model(x) for x in xs]).detach()
    m = copy.deepcopy(model)
    info = awq_smooth(m, lambda: [m(x) for x in xs], lambda n, l: IntQuantizer(4, 32),
                      [(None, ['fc'])] + [(f'layers.{i}.norm', [f'layers.{i}.up']) for i in range(2)], n_grid=4, progress=False)
    assert isinstance(m.fc, InputScaledLinear) and info['layers.0.up']['how'] == 'fold'
    with torch.no_grad(): torch.testing.assert_close(torch.cat([m(x) for x in xs]), ref, rtol=1e-4, atol=1e-4)
    recs = quantize_linears(m, [lambda x=x: m(x) for x in xs], lambda n, l: IntQuantizer(4, 32), ignore=['re:head$'], progress=False)
    assert 'head' not in recs and set(recs) >= {'fc', 'layers.1.down'}
    assert all(r['hessian_error'] >= 0 and r['tokens'] == 256 for r in recs.values())
    with torch.no_grad(): assert rel_error(torch.cat([m(x) for x in xs]), ref) < 0.2


def test_matches():
    lin = nn.Linear(2, 2)
    assert matches('model.layers.0.linear_attn.in_proj_a', lin, ['re:.*in_proj_a$'])
    assert not matches('model.layers.0.linear_attn.in_proj_qkv', lin, ['re:.*in_proj_a$', 'lm_head'])
    assert matches('x', lin, 'Linear')
