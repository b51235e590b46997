"""Run on the GPU machine: PYTHONPATH=. OUT=... python3 scripts/latency_run.py SECONDS (a deadline; partial results are kept).

The device's Python lacks three packages this needs: carry flash-linear-attention 0.6.0 and fla-core 0.6.0 (the fast
Gated-DeltaNet prefill) and fastcore (effqwen.quant imports it; without it the INT8 and argmax heads fail) as wheels in
.whl/ (the device README's pip download), and install them with --target /tmp/site first. Give the whole run, HF eager
and the drafter stage included, room: the run of record took 372 s (latency_h200.json total_s), and a 470 s deadline
was not enough on a busy host (latency_h200_partial_s39.json)."""
"A1/A2 latency at the Qwen3.5-4B shape on the GPU (the 26_latency measurement), saving partial results after every stage."
import json, os, shutil, pathlib, sys
import torch
from effqwen.core import get_profile, write_result
import effqwen.engine as E
from effqwen.engine import benchmark_latency
out = pathlib.Path(os.environ['OUT'])
# prefill paths picked by the A/B of scripts/profile_steps.py run just before (gpu_session.sh exports its choice)
for flag in ('PREFILL_GVA', 'PREFILL_SDPA_GQA', 'PREFILL_DEQUANT_AHEAD', 'PREFILL_DIRECT', 'PREFILL_QK_NORM'):
    if (v := os.environ.get(f'EFFQWEN_{flag}')) is not None: setattr(E, flag, v == '1')
if (v := os.environ.get('EFFQWEN_ATTN_CHUNK')): E.ATTN_CHUNK = int(v)   # decode attention positions per program (profile's A/B)
if (v := os.environ.get('EFFQWEN_ATTN_COMBINE_BD')): E.ATTN_COMBINE_BD = int(v)   # head dims per combine program (attn_decode_sweep's cbd A/B)
if (v := os.environ.get('EFFQWEN_ATTN_COMBINE_DECODE')): E.ATTN_COMBINE_DECODE = tuple(int(x) for x in v.split('x'))   # one-row combine BSxBD (attn_decode_sweep.py combine)
# the Gated-DeltaNet verify kernel picked from scripts/verify_cost.py's run ('fused' token by token, or 'chunk')
if (v := os.environ.get('EFFQWEN_GDN_VERIFY')) in ('fused', 'chunk'): E.GDN_VERIFY = v
ck = lambda d: (out/'partial.json').write_text(json.dumps(d, default=str, indent=1))
# the drafters whose tau the A2 projections use propose from an FR-Spec draft vocabulary (gpu DrafterSize.draft_vocab rows of
# SmolLM2's vocabulary): time the 4B-shape drafter with its head cut to the same fraction of Qwen3.5's vocabulary as well
from effqwen.model import QWEN35_SHAPES
tr = json.loads((pathlib.Path('data/results/drafter_training_gpu.json')).read_text())['train']
frac = tr['sizes']['draft_vocab'] / tr['drafter']['vocab_size'] if tr['sizes'].get('draft_vocab') else None
dv = round(frac * QWEN35_SHAPES['qwen3.5-4b']['vocab_size']) if frac else None
r = benchmark_latency(deadline_s=float(sys.argv[1]), checkpoint=ck, progress=lambda s: print(s, flush=True), draft_vocab=dv,
                      hf_decode_tokens=32,   # HF eager decoding is host-bound and noisy: 31 timed steps per run,
                      hf_decode_repeats=3,   # the median of 3 runs per setting
                      drafter_plain=os.environ.get('DRAFTER_PLAIN', '1') == '1',   # DRAFTER_PLAIN=0: no unfused-step A/B
                      # the W4A16 engine's verify at fewer rows than the drafter's block (A2's '+ verify 8' row; VERIFY_WIDTHS= for none)
                      verify_widths=tuple(int(w) for w in os.environ.get('VERIFY_WIDTHS', '8').split(',') if w))
r['draft_vocab'] = dict(rows=dv, fraction=frac, source=f"drafter_training_gpu.json: {tr['sizes'].get('draft_vocab')} of {tr['drafter']['vocab_size']}") if dv else None
import effqwen.kernels as K
r['kernel_table'] = {str(d): v for d, v in K._AUTOLOADED.items()}   # per CUDA device: (per-GPU tuning table, configs taken) or None
r['prefill_paths'] = dict(PREFILL_GVA=E.PREFILL_GVA, PREFILL_SDPA_GQA=E.PREFILL_SDPA_GQA, PREFILL_DEQUANT_AHEAD=E.PREFILL_DEQUANT_AHEAD, PREFILL_DIRECT=E.PREFILL_DIRECT, PREFILL_QK_NORM=E.PREFILL_QK_NORM)
r['gdn_verify'] = E.GDN_VERIFY
r['attn_split'] = dict(chunk=E.ATTN_CHUNK, dyn_chunk=E.ATTN_DYN_CHUNK, dyn_verify=E.ATTN_DYN_VERIFY, prefetch=E.ATTN_PREFETCH, keys_per_step=E.ATTN_BL, warps=E.ATTN_WARPS, stages=E.ATTN_STAGES, combine_chunks_per_step=E.ATTN_COMBINE_BS, combine_head_dims_per_program=E.ATTN_COMBINE_BD or None, combine_decode=E.ATTN_COMBINE_DECODE, verify_keys_stages=list(E.ATTN_VERIFY_TILES))
r['gdn_step'] = dict(value_columns_per_program=E.GDN_BV, warps=E.GDN_WARPS, state_early=E.GDN_STATE_EARLY, verify_value_columns=E.GDN_VERIFY_BV or E.GDN_BV, verify_warps=E.GDN_VERIFY_WARPS)   # the one-token Gated-DeltaNet kernel (EFFQWEN_GDN_BV / _WARPS)
r['fused_argmax'] = E.FUSED_ARGMAX   # the step's argmax + bookkeeping in two Triton kernels (EFFQWEN_FUSED_ARGMAX)
r['gdn_verify_xcat'] = E.GDN_VERIFY_XCAT   # commit's xcat from the verify output kernel (EFFQWEN_GDN_VERIFY_XCAT)
r['norm_split'] = E.NORM_SPLIT and list(E.NORM_SPLIT_STEPS)   # add + sums of squares (and h = residual · norm weight) in the output / down projections, the 1 / RMS in the next projection (EFFQWEN_NORM_SPLIT)
r['norm_epilogue'] = E.NORM_EPILOGUE   # add + RMSNorm in the output / down projections' epilogue (EFFQWEN_NORM_EPILOGUE)
r['swiglu_epilogue'] = E.SWIGLU_EPILOGUE   # silu(gate)·up in the gate+up fragment kernel's epilogue (EFFQWEN_SWIGLU_EPILOGUE, default on)
r['decode_swiglu_matvec'] = E.DECODE_SWIGLU_MATVEC   # (EFFQWEN_DECODE_SWIGLU_MATVEC, read when effqwen.engine is imported)
r['pdl_steps'] = list(E.PDL_STEPS) if K.PDL else []
r['prefill_graphs'] = E.PREFILL_GRAPHS   # prompts padded to a size bucket, prefill replayed from a graph per bucket (EFFQWEN_PREFILL_GRAPHS)
r['fragment_linears'] = E.fragment_default(torch.device('cuda'))   # the engine's W4A16 linears on the Gluon fragment kernels for 1..16 rows (EFFQWEN_FRAGMENT, default on Hopper)
import effqwen.gluon as G
r['frag_sub136_max_m'] = G.SUB136   # W4A16 fragment launches of at most this many rows dequantize to code − 8, no correction mma (EFFQWEN_FRAG_SUB136)
r['frag_sub136_plain_max_m'] = G.SUB136_PLAIN   # and plain products (no epilogue) of at most this many rows (EFFQWEN_FRAG_SUB136_PLAIN)
r['gdc_early'] = G.GDC_EARLY   # under PDL the fragment kernels let the next kernel launch before their wait (EFFQWEN_GDC_EARLY, default on)
r['embed_norm'] = E.EMBED_NORM   # decode / verify: the embedding rows gathered by the first norm kernel (EFFQWEN_EMBED_NORM, default on)
r['pdl'] = K.PDL   # programmatic dependent launch of the W4A16 kernels and the small kernels before them (EFFQWEN_PDL)
r['note'] = 'measured by scripts/latency_run.py (benchmark_latency, defaults: fused engine on CUDA, BF16 LM head); rendered by nbs/26_latency.ipynb'
p = write_result('latency_h200', r, get_profile('gpu'))
shutil.copy(p, out/'latency_h200.json'); print('wrote', p)
