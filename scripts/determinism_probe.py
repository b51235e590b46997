"""Is the fused engine's greedy decode deterministic run to run? Random Qwen3.5-4B weights (W4A16 linears, as
`profile_steps.py` builds them), one prompt: ROUNDS times prefill + DECODE greedy tokens, per setting (PDL on / off:
`effqwen.kernels.PDL`, every graph recorded again). Per round: the tokens, and whether each layer's state after the
prefill (attention keys / values, Gated-DeltaNet recurrent and conv states) and after the decode equals the first
round's bit for bit, with the first layer that differs. profile_steps' A/B parts saw a setting part from its own
earlier rounds at 8192 tokens (tokens_part); this probe says whether the prefill or the decode steps vary, and with PDL
or without.

    EFFQWEN_OUT=$OUT PROMPT=8192 ROUNDS=5 python scripts/determinism_probe.py    # GPU; TINY=1 DEV=cpu for a dry run
"""
import os, time
import torch

DEV = os.environ.get('DEV', 'cuda')
TINY = os.environ.get('TINY', '0') == '1'

def states(eng) -> list:
    "Clones of every layer's state, in layer order: (name, tensor)."
    out = []
    for i, L in enumerate(eng.layers):
        if L.kind == 'linear_attention': out += [(f'{i}.S', L.S.clone()), (f'{i}.conv', L.conv_buf.clone())]
        else: out += [(f'{i}.k', L.kc.clone()), (f'{i}.v', L.vc.clone())]
    return out

def first_diff(a: list, b: list):
    "(name, max |a - b|) of the first state that differs, or None."
    for (n, x), (_, y) in zip(a, b):
        if not torch.equal(x, y):
            d = (x.float() - y.float()).abs().nan_to_num(float('inf')).max().item()
            return [n, d, int((x != y).sum())]
    return None

def run(eng, ids, rounds: int, decode: int) -> dict:
    ref_p = ref_d = ref_t = None
    out = []
    for r in range(rounds):
        eng.prefill(ids)
        sp = states(eng)                                               # (the clones run in stream order after it)
        toks = eng.decode_n_tokens(decode).tolist()
        sd = states(eng)
        if r == 0: ref_p, ref_d, ref_t = sp, sd, toks
        out.append(dict(tokens=toks, same_tokens=toks == ref_t, prefill_diff=first_diff(ref_p, sp), decode_diff=first_diff(ref_d, sd)))
        print(r, out[-1], flush=True)
    return dict(rounds=out, deterministic=all(o['same_tokens'] and o['prefill_diff'] is None and o['decode_diff'] is None for o in out))

def main():
    import effqwen.kernels as Kn
    from effqwen.engine import Engine
    from effqwen.kernels import W4A16Linear
    from effqwen.core import write_result
    t0 = time.time()
    P = int(os.environ.get('PROMPT', 8192)); rounds = int(os.environ.get('ROUNDS', 4)); decode = int(os.environ.get('DECODE', 16))
    if TINY:
        from effqwen.model import tiny_qwen35
        m, P, group = tiny_qwen35(0), min(P, 24), 32
    else:
        from effqwen.model import load_target
        m, group = load_target('qwen3.5-4b', device=DEV, dtype='bfloat16')[0], 128
    torch.manual_seed(0)
    eng = Engine(m, max_seq_len=int(os.environ.get('MAX_SEQ_LEN', P + 64)), convert=lambda l: W4A16Linear.from_float(l, group_size=group))
    ids = torch.randint(0, min(1000, m.config.vocab_size), (1, P), device=DEV)
    res = dict(shape='tiny-qwen3.5' if TINY else 'qwen3.5-4b', prompt=P, rounds=rounds, decode=decode, settings={})
    own = Kn.PDL
    for name, pdl in (('pdl=1', True), ('pdl=0', False)):
        if name == 'pdl=0' and not own: continue
        Kn.PDL = pdl
        if eng.use_graphs: eng._capture()
        print(name, flush=True)
        res['settings'][name] = run(eng, ids, rounds, decode)
    Kn.PDL = own
    res['wall_s'] = time.time() - t0
    res['device'] = torch.cuda.get_device_name() if DEV == 'cuda' else 'cpu (dry run)'
    print(write_result('determinism_probe_h200' if not TINY else 'determinism_probe_dryrun', res, 'gpu', device=DEV))

if __name__ == '__main__': main()
