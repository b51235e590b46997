"""`scripts/profile_steps.py`'s idle-gap analysis and `scripts/decode_timeline.py`'s chain split (pure interval arithmetic, no GPU): overlapping kernels merge, gaps
shorter than the threshold are ignored, and each long gap names the kernels around it and the host ops that ran."""
import importlib.util, pathlib

_p = pathlib.Path(__file__).resolve().parents[1]/'scripts'/'profile_steps.py'
_spec = importlib.util.spec_from_file_location('profile_steps', _p); P = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(P)

def test_gap_stats():
    ks = [(0, 10, 'a'), (5, 20, 'b'), (50, 60, 'c'), (61, 70, 'd'), (200, 210, 'e')]   # a/b overlap; c-d gap of 1 us
    cpu = [(15, 55, 'aten::linear'), (100, 190, 'fla_chunk')]
    r = P.gap_stats(ks, cpu, min_us=5)
    assert (r['span_us'], r['busy_us'], r['idle_us']) == (210, 49, 161)
    assert r['gaps_over_min'] == 2 and r['idle_in_gaps_us'] == 160
    g = r['top'][0]
    assert (g['us'], g['after'], g['before']) == (130, 'd', 'e') and g['cpu'] == [dict(op='fla_chunk', us=90.0)]
    assert r['top'][1]['cpu'] == [dict(op='aten::linear', us=30.0)]

def test_tokens_part():
    "The A/Bs' token bookkeeping: where each setting's rounds first part from the first setting's first round."
    r = P.tokens_part({'base': [[1, 2, 3], [1, 2, 3]], 'same': [[1, 2, 3]], 'late': [[1, 2, 3], [1, 9, 3]], 'short': [[1, 2]]})
    assert r == {'base': None, 'same': None, 'late': [1, 1], 'short': [0, 2]}
    assert P.tokens_part({'a': [[4, 5]], 'b': [[5, 5]]}) == {'a': None, 'b': [0, 0]}
    assert P.tokens_part({}) == {}                                         # every setting failed before decoding

def test_decode_timeline_chain_stats():
    "`scripts/decode_timeline.py`'s split of a chain: end deltas sum to the span from the first end to the last, per step."
    p = pathlib.Path(__file__).resolve().parents[1]/'scripts'/'decode_timeline.py'
    spec = importlib.util.spec_from_file_location('decode_timeline', p); D = importlib.util.module_from_spec(spec); spec.loader.exec_module(D)
    ks = [(0, 5, 'a'), (3, 9, 'b'), (8, 10, 'c'), (12, 20, 'a'), (15, 22, 'b'), (21, 23, 'c')]   # 2 steps of a -> b -> c, b and c overlapping
    r = D.chain_stats(ks, 2)
    assert (r['wall_us'], r['busy_us'], r['kernels_per_step']) == (11.5, 10.5, 3.0)
    assert r['end_delta_us'] == {'a': 5.0, 'b': 3.0, 'c': 1.0} and sum(r['end_delta_us'].values()) == (23 - 5) / 2
    assert r['end_delta_by_predecessor_us'] == {'a after c': 5.0, 'b after a': 3.0, 'c after b': 1.0}
    assert r['duration_us'] == {'a': 6.5, 'b': 6.5, 'c': 2.0}
