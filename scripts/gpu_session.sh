#!/usr/bin/env bash
# All of a session's GPU work on one nvidia-h200-x2 lease, as two detached chains that outlive the device's
# 10-minute commands (setsid), each on its own GPU; a later command polls them and brings the results back.
#
#   GPU 0: [tune_engine_shapes.py] -> profile_steps.py (incl. the prefill A/B that picks the prefill paths) ->
#          verify_cost.py -> latency_run.py (A1/A2 at the Qwen3.5-4B shape; waits for GPU 1's regen first) -> regen int4
#          -> train direct,stage2 -> eval --no-fp32 -> merge (after GPU 1's lossless32) [-> opt (A5/A6) with OPT=1]
#          [-> tests/test_engine_gpu.py with TESTS=1, timeout TESTS_S]
#   GPU 1: regen bf16 -> waits until latency_run's HF-eager stage is over (HF eager decoding is host-bound: a busy
#          neighbour slows it, data/results/latency_h200_contended.json) -> train stage1 -> lossless32 (after stage 2)
#   SOLO=1 REFIT=<dir with a run's stage1 + stage2>: regen -> train stage2 alone from that stage 1 -> packed -> e2e of the
#          run's stage 2 then of the refit (e2e_committed.json, e2e_refit.json, train_stage2.json: gpu_drafter.py refit)
#   SOLO=1 (one GPU, e.g. an nvidia-h200 lease): regen -> train stage1,direct,stage2 in one process -> the trained
#          drafters packed for $OUT (drafters.tar.part*: stage 2 float32, stage 1 bf16) -> eval (float32 losslessness
#          included; NO_EVAL=1 skips it; REGEN_ONLY=1 stops after regen) [-> opt with OPT=1] [-> e2e with E2E=1: drafter_e2e_swa_gpu.json]; no latency stages
#   CAPACITY=1 (one GPU): regen bf16 -> stage-1 drafters of each depth in CAP_LAYERS (default '2 5') trained side by side
#          on those answers -> e2e of each (train_cap<L>.json, e2e_cap<L>.json): the drafter-capacity test
#
# Run from the repository root on the device, after `gpu_drafter.py assemble --work $WORK` (README "GPU runs"):
#   scripts/gpu_session.sh start [extra train args]   launch both chains, return at once
#   scripts/gpu_session.sh poll [max_s]               wait for both chains (at most max_s), then copy the results
#                                                     (flat: *.json, regen_data.tar.xz) and the logs' tails to $OUT
# Env: WORK (default /tmp/xfer); NO_LATENCY=1 skips latency_run and verify_cost (a CPU dry run: DEV=cpu TINY=1);
# ENGINE_ONLY=1: the engine's stages alone (no bundle needed): GPU 0 profile_steps -> [verify_cost] -> latency_run while
# GPU 1 runs the smoke (PDL chain tests, then the engine's); NO_VERIFY_COST=1 skips verify_cost; the smoke or the
# profile's PDL A/B (slower, or other tokens) turns programmatic dependent launch off for the latency run (EFFQWEN_PDL=0);
# TUNE=1 first runs tune_engine_shapes.py on GPU 0 and points the latency run at its table (EFFQWEN_KERNEL_TUNE);
# REGEN_TAR=.devsite/regen/regen_data.tar.xz (carried, with the SHA256 file beside it) restores an earlier session's
# answers, so the regen stages have nothing left to generate (the prompts must be the same bundle's).
# A bigger drafter run: EXTRA_PROMPTS=.devsite/extra/prompts_extra.json DRAFTER_REGEN_PROMPTS=24576 DRAFTER_STEPS1=...
# (read by gpu_drafter.py, recorded in the result's `sizes`); TRAIN_DEADLINE (default 900 s) caps each train command;
# DRAFTER_COMPILE=1 compiles the drafters in eval. EFFQWEN_REGEN_STATIC=1: the regen stages decode on a static cache from
# a CUDA graph (`effqwen.regen.static_greedy`; check it first: tests/test_regen_gpu.py, scripts/regen_speed.py).
# Results are written under $WORK/out by the chains (a command's $OUT is emptied before the next command).
set -u
W=${WORK:-/tmp/xfer}; R=$W/out; mkdir -p "$R"
# tokenizers' own threads: `regen` and `train` tokenize tens of thousands of conversations in batched calls (2x faster on this
# build machine's 2 cores; the device has 16); the library turns them off in any process forked after (compile workers)
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=true
G=${G:-python3 scripts/gpu_drafter.py}
waitfor() {  # waitfor MAX_S TEST...: poll every 5 s until the test holds or MAX_S pass
  local m=$1 t0=$SECONDS; shift
  until "$@"; do [ $((SECONDS - t0)) -ge "$m" ] && return 1; sleep 5; done
}
regen_bf16_over() { [ -f "$W/regen_bf16.over" ]; }
hf_over() { [ -f "$W/lat.done" ] || grep -q 'engine_bf16 \.\.\.' "$W/latency.log" 2>/dev/null; }
stage2_over() { [ -f "$W/train_b.over" ]; }   # stage 2 saved, or its chain gave up
lossless_over() { [ -f "$W/chain1.done" ]; }
both_over() { [ -f "$W/chain0.done" ] && [ -f "$W/chain1.done" ]; }
mark() { echo "[$(date +%T)] $*" >> "$W/chains.log"; }
pack_drafters() {  # the trained drafters back to this side, in $OUT-sized files: stage 2 float32 (what eval / opt reuse), stage 1 bf16
  [ -f "$W/drafters/stage2/model.safetensors" ] || return 0
  python3 - "$W" ${PACK:-} <<'PY' && tar -cf - -C "$W" drafters_back | split -b 15m -d - "$R/drafters.tar.part" && mark "drafters packed: $(ls "$R" | grep -c drafters.tar.part) parts"
import sys, shutil, torch
from pathlib import Path
from safetensors.torch import load_file, save_file
w = Path(sys.argv[1]); out = w/'drafters_back'; shutil.rmtree(out, ignore_errors=True)
for k in sys.argv[2:] or ('stage2', 'stage1'):   # (with direct in bf16 too, over $OUT's 64 MiB); PACK=stage2: that one alone
    src = w/'drafters'/k
    if not (src/'model.safetensors').exists(): continue
    (out/k).mkdir(parents=True); shutil.copy(src/'config.json', out/k/'config.json')
    sd = load_file(str(src/'model.safetensors'))
    save_file(sd if k == 'stage2' else {n: t.to(torch.bfloat16) if t.is_floating_point() else t for n, t in sd.items()}, str(out/k/'model.safetensors'))
PY
}
smoke_over() { [ -f "$W/smoke.over" ]; }
smoke() {   # the PDL chain of the W4A16 kernels and the fused engine's verify / commit / speculative loop against HF
  mark "smoke"
  timeout 240 python3 -m pytest -q tests/test_kernels_gpu.py -k pdl > "$W/smoke_pdl.log" 2>&1 || { mark "PDL SMOKE FAILED (see smoke_pdl.log): EFFQWEN_PDL=0"; touch "$W/pdl.off"; }
  [ -f "$W/pdl.off" ] && export EFFQWEN_PDL=0
  timeout 300 python3 -m pytest -q -x tests/test_engine_gpu.py -k "verify_commit_equal_hf or speculative_with_static_drafter" > "$W/smoke.log" 2>&1 || mark "SMOKE FAILED (see smoke.log)"
  # the engine on the Gluon fragment kernels must give HF's W4A16 greedy tokens (up to ties) before the latency run may use them
  timeout 240 python3 -m pytest -q -x tests/test_engine_gpu.py -k "fragment and plain" > "$W/smoke_fragment.log" 2>&1 || { mark "FRAGMENT ENGINE TEST FAILED (see smoke_fragment.log): fragment kernels off"; touch "$W/fragment.off"; }
  # the SwiGLU in the gate+up kernel's epilogue: its kernel must equal the two kernels bit for bit and its engine HF's tokens
  timeout 240 python3 -m pytest -q -x tests/test_gluon.py tests/test_engine_gpu.py -k "swiglu_epilogue" > "$W/smoke_swiglu_epilogue.log" 2>&1 || { mark "SWIGLU EPILOGUE TESTS FAILED (see smoke_swiglu_epilogue.log): epilogue off"; touch "$W/swiglu_epilogue.off"; }
  touch "$W/smoke.over"
}
case ${1:?start|poll|chain0|chain1|solo|capacity} in
  start) shift
    if [ -n "${REGEN_TAR:-}" ]; then   # answers of an earlier session (poll's regen_data.tar.xz), checked against its sha256 file
      (cd "${REGEN_TAR%/*}" && sha256sum -c SHA256) || { echo "REGEN_TAR: sha256 mismatch, not used"; exit 1; }
      tar -xJf "$REGEN_TAR" -C "$W" && echo "regen answers restored from $REGEN_TAR (regen stages find them done)"; fi
    rm -f "$W"/chain?.done "$W"/lat.done "$W"/train_b.over "$W"/regen_bf16.over "$W"/train_*.json "$W"/smoke.over "$W"/pdl.off "$W"/fragment.off "$W"/swiglu_epilogue.off
    : > "$W/train_args"; [ $# -gt 0 ] && printf '%s\n' "$@" > "$W/train_args"
    if [ -n "${CAPACITY:-}" ]; then setsid nohup bash "$0" capacity > "$W/chain0.log" 2>&1 < /dev/null &
    elif [ -n "${SOLO:-}" ]; then setsid nohup bash "$0" solo > "$W/chain0.log" 2>&1 < /dev/null &
    else setsid nohup bash "$0" chain0 > "$W/chain0.log" 2>&1 < /dev/null & fi
    if [ -n "${SOLO:-}${CAPACITY:-}" ]; then :
    elif [ -n "${ENGINE_ONLY:-}" ]; then setsid nohup bash "$0" smoke1 > "$W/chain1.log" 2>&1 < /dev/null &
    else setsid nohup bash "$0" chain1 > "$W/chain1.log" 2>&1 < /dev/null & fi
    sleep 2; echo "started; chain logs in $W/chains.log" ;;
  solo) export CUDA_VISIBLE_DEVICES=0 OUT=$R; mapfile -t TA < "$W/train_args"   # SOLO=1: the drafter stages in a row on one GPU
    # both targets' regen in one process, logged where poll reads the bf16 regen's log
    mark "solo regen"; $G regen --work "$W" --batch "${REGEN_BATCH:-1024}" --deadline "${REGEN_DEADLINE:-900}" > "$W/regen_bf16.log" 2>&1; touch "$W/regen_bf16.over"
    # REGEN_ONLY=1: a lease of answers alone (poll brings back regen_data.tar.xz; a later lease trains on them via REGEN_TAR)
    if [ -n "${REGEN_ONLY:-}" ]; then mark "solo done (REGEN_ONLY)"; touch "$W/chain0.done" "$W/chain1.done"; exit 0; fi
    if [ -n "${REFIT:-}" ]; then   # REFIT=<dir holding a run's stage1 and stage2>: stage 2 trained again from that stage 1, then both end to end
      mkdir -p "$W/drafters" && rm -rf "$W/drafters/stage1" "$W/drafters/stage2" && cp -r "$REFIT/stage1" "$W/drafters/stage1"
      mark "solo refit: train stage2 from $REFIT/stage1"
      $G train --work "$W" --drafters stage2 --deadline "${TRAIN_DEADLINE:-400}" --train-budget 100000 "${TA[@]}" > "$W/train_b.log" 2>&1; touch "$W/train_b.over"
      cp "$W/train_stage2.json" "$R/" 2>/dev/null; PACK=stage2 pack_drafters   # (its stage 1 is the run's: $OUT takes 8 files)
      for k in committed refit; do   # the committed stage 2 first (gpu_drafter.py refit --e2e takes them in this order)
        d=$([ $k = committed ] && echo "$REFIT/stage2" || echo "$W/drafters/stage2"); mark "solo e2e $k"
        OUT=$W/e2e_$k E2E_W4=0 E2E_PLAIN=0 E2E_WINDOWS=${E2E_WINDOWS:-1024,256} $G e2e --work "$W" --drafter-dir "$d" > "$W/e2e.log" 2>&1
        cp "$W"/e2e_$k/data/results/drafter_e2e_swa*.json "$R/e2e_$k.json" 2>/dev/null   # (*: a CPU dry run's _dryrun name)
      done
      mark "solo done"; touch "$W/chain0.done" "$W/chain1.done"; exit 0; fi
    mark "solo train ${SOLO_DRAFTERS:-stage1,direct,stage2}"
    # SOLO_DRAFTERS=stage1,stage2: skip the direct-on-INT4 comparison drafter, so the two-stage pair gets its steps (eval and render follow)
    $G train --work "$W" --drafters "${SOLO_DRAFTERS:-stage1,direct,stage2}" --deadline "${TRAIN_DEADLINE:-1500}" --train-budget 100000 "${TA[@]}" > "$W/train_a.log" 2>&1; touch "$W/train_b.over"
    cp "$W"/train_*.json "$R/" 2>/dev/null   # the training record comes back with the next poll even if eval fails (session 30's did not)
    pack_drafters
    # NO_EVAL=1: no A4 eval (an archive run without the direct drafter, on a short lease): the e2e below still measures τ
    if [ -z "${NO_EVAL:-}" ]; then mark "solo eval"; N_EVAL=${N_EVAL:-24} N_LONG=${N_LONG:-8} $G eval --work "$W" --lossless "${LOSSLESS:-100}" > "$W/eval.log" 2>&1; fi
    if [ -n "${OPT:-}" ]; then mark "solo opt"; N_EVAL=${OPT_EVAL:-16} N_LONG=${OPT_LONG:-8} $G opt --work "$W" > "$W/opt.log" 2>&1; fi
    # E2E=1: the new stage 2's true end-to-end speedup in the recipe's serving configuration (fused step, window E2E_WINDOWS)
    if [ -n "${E2E:-}" ]; then mark "solo e2e"; E2E_W4=0 E2E_PLAIN=0 E2E_WINDOWS=${E2E_WINDOWS:-1024} $G e2e --work "$W" > "$W/e2e.log" 2>&1; fi
    mark "solo done"; touch "$W/chain0.done" "$W/chain1.done" ;;
  capacity) export CUDA_VISIBLE_DEVICES=0 OUT=$R   # CAPACITY=1: stage-1 drafters of each depth in CAP_LAYERS (default '2 5') on the
    # same BF16 answers (DRAFTER_REGEN_PROMPTS of them), trained side by side in one process each, then each end to end on the
    # INT4 target (gpu_drafter.py e2e: the fused step, bf16 engine; N_EVAL / N_LONG prompts): does a deeper drafter accept more?
    mark "capacity regen"; $G regen --work "$W" --only bf16 --batch "${REGEN_BATCH:-1024}" --deadline "${REGEN_DEADLINE:-600}" > "$W/regen_bf16.log" 2>&1; touch "$W/regen_bf16.over"
    for L in ${CAP_LAYERS:-2 5}; do
      d="$W/cap$L"; mkdir -p "$d"; ln -sfn "$W/bundle" "$d/bundle"; ln -sfn "$W/smollm2" "$d/smollm2"; cp "$W"/regen_bf16.json "$W"/regen_bf16_s.txt "$W"/regen_bf16_keys.json "$d"/
      mark "capacity train layers=$L"
      $G train --work "$d" --drafters stage1 --layers "$L" --deadline "${TRAIN_DEADLINE:-900}" --train-budget 100000 > "$W/train_cap$L.log" 2>&1 &
    done; wait
    for L in ${CAP_LAYERS:-2 5}; do
      cp "$W/cap$L/train_stage1.json" "$R/train_cap$L.json" 2>/dev/null || continue
      mark "capacity e2e layers=$L"
      OUT=$W/e2e_cap$L E2E_W4=0 E2E_PLAIN=0 $G e2e --work "$W" --drafter-dir "$W/cap$L/drafters/stage1" > "$W/e2e_cap$L.log" 2>&1
      for f in "$W"/e2e_cap$L/data/results/drafter_e2e_step_ab*.json; do [ -f "$f" ] && cp "$f" "$R/e2e_cap$L.json"; done
    done
    mark "capacity done"; touch "$W/chain0.done" "$W/chain1.done" ;;
  smoke1) export CUDA_VISIBLE_DEVICES=1   # ENGINE_ONLY: the smoke on GPU 1 beside GPU 0's profile
    smoke; mark "gpu1 done"; touch "$W/chain1.done" ;;
  chain0) export CUDA_VISIBLE_DEVICES=0 OUT=$R; mapfile -t TA < "$W/train_args"
    # a short smoke of the fused engine on the GPU first (verify + commit against HF): a kernel that only the
    # interpreter accepted would otherwise fail every later stage
    if [ -z "${NO_SMOKE:-}" ] && [ -z "${ENGINE_ONLY:-}" ]; then smoke; fi
    if [ -n "${TUNE:-}" ]; then   # TUNE=1: tune the engine's W4A16 shapes first; the latency run then uses that table
      mark "gpu0 tune_engine_shapes"; python3 scripts/tune_engine_shapes.py --out "$R" > "$W/tune.log" 2>&1
      export EFFQWEN_KERNEL_TUNE="$R/data/results/kernel_tune_h200.json"; fi
    if [ -z "${NO_LATENCY:-}" ]; then
      mark "gpu0 profile_steps"; python3 scripts/profile_steps.py --out "$R" > "$W/profile.log" 2>&1
      # the latency run's settings from the profile's A/Bs (a setting is taken only where every variant gave the same tokens):
      # the fastest prefill combination; PDL in the graphs it made faster (off if the smoke failed or no profile result);
      # the decode attention's positions per program; SwiGLU inside the down projection if its decode was faster
      [ -n "${ENGINE_ONLY:-}" ] && { waitfor 420 smoke_over || mark "smoke not over: PDL off"; smoke_over || touch "$W/pdl.off"; }
      eval "$(python3 - "$R/data/results/step_profile_h200.json" "$W" <<'PY' 2>> "$W/profile.log"
import json, os, sys
try: doc = json.load(open(sys.argv[1]))
except Exception: doc = {}
ab = doc.get('prefill_ab') or {}
if ab.get('same_next_token') and ab.get('ms'):
    k = min(ab['ms'], key=ab['ms'].get); v = dict(x.split('=') for x in k.split(','))
    print(f"export EFFQWEN_PREFILL_GVA={v['gva']} EFFQWEN_PREFILL_SDPA_GQA={v['sdpa_gqa']} EFFQWEN_PREFILL_DEQUANT_AHEAD={v.get('ahead', 0)} "
          f"EFFQWEN_PREFILL_DIRECT={v.get('direct', 0)} EFFQWEN_PREFILL_QK_NORM={v.get('qknorm', 0)}")
def faster(name, on, off, step='decode'):
    ab = doc.get(name) or {}; a, b = ab.get('ms', {}).get(on, {}), ab.get('ms', {}).get(off, {})
    return bool(ab.get('same_tokens')) and f'{step}_ms' in a and f'{step}_ms' in b and a[f'{step}_ms'] < b[f'{step}_ms']
steps = [s for s in ('decode', 'verify') if faster('pdl_ab', 'pdl=1', 'pdl=0', s)]
print(f"export EFFQWEN_PDL={int(bool(steps))} EFFQWEN_PDL_STEPS={','.join(steps) or 'none'}")
ch = doc.get('attn_chunk_ab') or {}
ms = {int(k): v['decode_ms'] for k, v in ch.get('ms', {}).items() if 'decode_ms' in v}
if ch.get('same_tokens') and ms: print(f"export EFFQWEN_ATTN_CHUNK={min(ms, key=ms.get)}")
if doc.get('swiglu_ab'): print(f"export EFFQWEN_DECODE_SWIGLU_MATVEC={int(faster('swiglu_ab', 'swiglu_mv=1', 'swiglu_mv=0'))}")
# the Gluon fragment kernels: a different summation order, so random-weight tokens may differ at ties; the smoke's engine-vs-HF
# test (ties allowed) is their check, and they are taken when their decode step was faster
fr = (doc.get('fragment_ab') or {}).get('ms', {})
if not os.path.exists(os.path.join(sys.argv[2], 'fragment.off')) and 'decode_ms' in fr.get('fragment=1', {}) and 'decode_ms' in fr.get('fragment=0', {}):
    print(f"export EFFQWEN_FRAGMENT={int(fr['fragment=1']['decode_ms'] < fr['fragment=0']['decode_ms'])}")
# the SwiGLU epilogue (on the fragment kernels): bit-identical by its smoke test, taken when the decode step was faster
if not os.path.exists(os.path.join(sys.argv[2], 'swiglu_epilogue.off')) and doc.get('swiglu_epilogue_ab'):
    print(f"export EFFQWEN_SWIGLU_EPILOGUE={int(faster('swiglu_epilogue_ab', 'swiglu_epilogue=1', 'swiglu_epilogue=0'))}")
PY
)"; [ -f "$W/pdl.off" ] && export EFFQWEN_PDL=0
      mark "prefill paths: GVA=${EFFQWEN_PREFILL_GVA:-default} SDPA_GQA=${EFFQWEN_PREFILL_SDPA_GQA:-default} AHEAD=${EFFQWEN_PREFILL_DEQUANT_AHEAD:-default} DIRECT=${EFFQWEN_PREFILL_DIRECT:-default} QK_NORM=${EFFQWEN_PREFILL_QK_NORM:-default}; pdl: ${EFFQWEN_PDL:-default} steps ${EFFQWEN_PDL_STEPS:-default}; attn chunk: ${EFFQWEN_ATTN_CHUNK:-default}; swiglu in the down projection: ${EFFQWEN_DECODE_SWIGLU_MATVEC:-default}; fragment kernels: ${EFFQWEN_FRAGMENT:-default}; swiglu epilogue: ${EFFQWEN_SWIGLU_EPILOGUE:-default}"
      if [ -z "${NO_VERIFY_COST:-}" ]; then mark "gpu0 verify_cost"; python3 scripts/verify_cost.py --out "$R" --deadline 150 > "$W/verify_cost.log" 2>&1; fi
      # the one-chunk GDN verify for the latency run if it was faster at the 4B shape and agreed with the torch verify
      eval "$(python3 - "$R/data/results/verify_cost_h200.json" <<'PY' 2>> "$W/verify_cost.log"
import json, sys
r = json.load(open(sys.argv[1]))['shapes']['Qwen3.5-4B']
c, f = r.get('fused_chunk_ctx4096'), r.get('fused_ctx4096')
if c and f and c['verify_ms'] < f['verify_ms'] and r.get('verify_argmax_agree_rows_chunk') == r.get('verify_argmax_agree_rows'):
    print('export EFFQWEN_GDN_VERIFY=chunk')
PY
)"; mark "gdn verify: ${EFFQWEN_GDN_VERIFY:-default}"
      [ -z "${ENGINE_ONLY:-}" ] && waitfor 420 regen_bf16_over; mark "gpu0 latency_run"
      python3 scripts/latency_run.py "${LAT_S:-400}" > "$W/latency.log" 2>&1; touch "$W/lat.done"
    else touch "$W/lat.done"; fi
    if [ -n "${ENGINE_ONLY:-}" ]; then mark "gpu0 done"; touch "$W/chain0.done"; exit 0; fi
    mark "gpu0 regen int4"; $G regen --work "$W" --only int4 --batch "${REGEN_BATCH:-1024}" --deadline 600 > "$W/regen_int4.log" 2>&1
    mark "gpu0 train direct,stage2"; $G train --work "$W" --drafters direct,stage2 --deadline "${TRAIN_DEADLINE:-900}" --train-budget 100000 "${TA[@]}" > "$W/train_b.log" 2>&1; touch "$W/train_b.over"
    mark "gpu0 eval"; N_EVAL=${N_EVAL:-24} N_LONG=${N_LONG:-8} $G eval --work "$W" --no-fp32 --lossless "${LOSSLESS:-100}" > "$W/eval.log" 2>&1
    waitfor 600 lossless_over; mark "gpu0 merge"; $G merge --work "$W" >> "$W/eval.log" 2>&1
    if [ -n "${OPT:-}" ]; then mark "gpu0 opt"; N_EVAL=${OPT_EVAL:-16} N_LONG=${OPT_LONG:-8} $G opt --work "$W" > "$W/opt.log" 2>&1; fi
    # the engine's GPU tests last: they compile many Triton kernels (host-heavy, minutes) and must not disturb a timing
    if [ -n "${TESTS:-}" ]; then mark "gpu0 engine tests"; timeout "${TESTS_S:-420}" python3 -m pytest -q -x tests/test_engine_gpu.py > "$W/tests.log" 2>&1; fi
    mark "gpu0 done"; touch "$W/chain0.done" ;;
  chain1) export CUDA_VISIBLE_DEVICES=1 OUT=$R; mapfile -t TA < "$W/train_args"
    mark "gpu1 regen bf16"
    $G regen --work "$W" --only bf16 --batch "${REGEN_BATCH:-1024}" --deadline 600 > "$W/regen_bf16.log" 2>&1; touch "$W/regen_bf16.over"
    waitfor 900 hf_over; mark "gpu1 train stage1"; $G train --work "$W" --drafters stage1 --deadline "${TRAIN_DEADLINE:-900}" --train-budget 100000 "${TA[@]}" > "$W/train_a.log" 2>&1
    waitfor 900 stage2_over; mark "gpu1 lossless32"
    $G lossless32 --work "$W" --lossless "${LOSSLESS:-100}" > "$W/lossless32.log" 2>&1
    mark "gpu1 done"; touch "$W/chain1.done" ;;
  poll) : "${OUT:?set OUT}"; waitfor "${2:-540}" both_over
    cat "$W/chains.log" 2>/dev/null
    for f in smoke_pdl smoke tune profile tests latency verify_cost regen_int4 regen_bf16 train_a train_b eval lossless32 opt e2e $(cd "$W" && ls train_cap*.log e2e_cap*.log 2>/dev/null | sed 's/\.log$//') chain0 chain1; do
      # (every deadline line first: a target's cut, e.g. the BF16 answers in a solo regen log that ends with INT4's lines)
      [ -f "$W/$f.log" ] && { echo "== $f"; grep -a ': deadline, ' "$W/$f.log" | cut -c1-300; tr '\r' '\n' < "$W/$f.log" | grep -E '^\[|Error|error|wrote|passed|failed|^prefill ' | cut -c1-300 | tail -6; }
    done > "$OUT/logs.txt"; cat "$OUT/logs.txt"
    T="$R/regen_data.tar.xz"   # (re)packed once GPU 1's regen is over, whenever the answers are newer than the last pack
    if [ -f "$W/regen_bf16.over" ] && [ -f "$W/regen_bf16_s.txt" ] && { [ ! -f "$T" ] || [ "$W/regen_bf16.json" -nt "$T" ] || [ "$W/regen_int4.json" -nt "$T" ]; }; then
      tar -cJf "$R/regen_data.tar.xz" -C "$W" $(cd "$W" && ls regen_bf16.json regen_int4.json regen_bf16_s.txt regen_int4_s.txt regen_*_keys.json regen_*_runs.json 2>/dev/null); fi   # (CAPACITY: the BF16 answers alone)
    find "$R" -maxdepth 3 \( -name '*.json' -o -name '*.tar.xz' -o -name 'drafters.tar.part*' \) ! -name partial.json -exec cp {} "$OUT"/ \;
    ls -la "$OUT" ;;
  *) echo "unknown stage $1"; exit 2 ;;
esac
