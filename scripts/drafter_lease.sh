#!/usr/bin/env bash
# One drafter training lease on one nvidia-h200, in the call that follows the bundle's parts 1..3 (device_send.sh) and
# the call that put the stage 1 to continue from at $INIT (default /tmp/init/stage1):
#   OUT=$OUT EFFQWEN_GIT_SHA=<sha> scripts/drafter_lease.sh EXTRA_SEND_DIR [ANSWERS_DIR]   carry [.devsite/bundle44/p4, .devsite/bundle44/manifest.json,
#                                                                  EXTRA_SEND_DIR, ANSWERS_DIR, .whl]
# 1. part 4 and `device_send.sh finish` (wheels, extra prompts, answers, assemble);
# 2. probes (session 33: 50 s with the float32 step alone; results under $OUT): scripts/feature_speed.py,
#    scripts/train_step_profile.py (the step with the drafter's attention in float32 and in bf16, and their gradients'
#    agreement) and (unless NO_REGEN_SPEED=1) scripts/regen_speed.py 256 192 (the regeneration paths against the float32 model);
# 3. the plans from the probes: a bf16 feature target at >= MIN_TOKS tokens a second (default 400,000) computes the
#    BF16 answers' features online each step (so every prompt of the pool can be answered and trained on); otherwise the
#    float32 target, fewer BF16 prompts (32,768) and their features in host memory. The attention trains in bf16
#    (DRAFTER_ATTN_DTYPE) when that step is >= 10% faster and its gradients agree (cosine >= 0.999); ATTN_DTYPE= overrides;
# 4. `gpu_session.sh start` of SOLO=1 E2E=1 NO_EVAL=1 stage1,stage2 with answers regenerated on the static loop with
#    grouped decode attention (regen_speed_h200.json), stage 1 continued from $INIT, stage 2 kept at its best held-out loss.
# Then poll back to back from the next calls (the machine is given back 30 s after a call ends, chains and all):
#   OUT=$OUT scripts/gpu_session.sh poll 540
# Env: REGEN_DEADLINE (default 420), TRAIN_DEADLINE (default 800), STEPS1 / STEPS2 (default 6000 / 4000, scaled to the
# deadline by `train`), INT4_PROMPTS (default 24576), EFFQWEN_GIT_SHA (pass it: the device's .git can be stale).
# From scratch (session 34: a new build machine kept nothing outside git): INIT=none and ANSWERS_DIR '-' (or left out)
# train stage 1 from random weights on answers all regenerated in this lease.
# A lease whose answers tar already holds the pool's answers (session 33's .devsite/regen_s33: 54,258 of 57,344 BF16,
# 21,348 of 24,576 INT4) needs little regeneration: REGEN_DEADLINE=180 INT4_PROMPTS=40960 TRAIN_DEADLINE=1050 adds INT4
# answers to the pool's shuffled rows (drafter_answers_mix_s33.json: word problems under 15% of its INT4 text) and gives
# the rest to training. By session 33's timings (held seconds): about 200 to the chain's start, regeneration its deadline
# + 20, training TRAIN_DEADLINE + 60 (held-out accuracy after the steps), packing and e2e 100: 1,610 of 1,800 at these values.
set -u
W=${WORK:-/tmp/xfer}; INIT=${INIT:-/tmp/init/stage1}; ANS=${2:-}; [ "$ANS" = - ] && ANS=
: "${OUT:?set OUT: OUT=\$OUT scripts/drafter_lease.sh ...}"; export OUT
[ "$INIT" = none ] || [ -d "$INIT" ] || { echo "no stage 1 at $INIT: send the newest .devsite/init_s*/stage1 first (README), or INIT=none to train it from scratch"; exit 1; }
BUNDLE=${BUNDLE:-.devsite/bundle44} scripts/device_send.sh part 4 > /dev/null || exit 1
scripts/device_send.sh finish "${1:?EXTRA_SEND_DIR}" "$ANS" 2>&1 | tail -1
[ -d "$W/smollm2" ] || { echo "assemble failed"; exit 1; }
export PYTHONPATH=/tmp/site:. OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}
WORK=$W timeout 120 python3 scripts/feature_speed.py 64 2>&1 | grep -E '^(float32|bfloat16|bf16)' | cut -c1-300
WORK=$W timeout 200 python3 scripts/train_step_profile.py 2>&1 | grep -E 'ms|against' | head -30 | cut -c1-200
# the regeneration paths against generate and against the float32 model (the chain regenerates on static + gqa)
[ -n "${NO_REGEN_SPEED:-}" ] || WORK=$W timeout 150 python3 scripts/regen_speed.py 256 192 2>&1 | grep -E '^(generate|static|against|\{)' | cut -c1-400
find "$OUT" -name '*.json' -path '*results*' -exec cp {} "$OUT"/ \;
TOKS=$(python3 -c "import json,glob; f=glob.glob('$OUT/feature_speed_*.json'); print(int(json.load(open(f[0]))['runs']['bfloat16']['tokens_per_s']) if f else 0)")
if [ "$TOKS" -ge "${MIN_TOKS:-400000}" ]; then
  export DRAFTER_FEATURE_TARGET=bfloat16 DRAFTER_REGEN_PROMPTS=${REGEN_PROMPTS:-57344} DRAFTER_FEATURE_GB=60 DRAFTER_FEATURE_HOST_GB=0
else
  export DRAFTER_REGEN_PROMPTS=32768 DRAFTER_FEATURE_GB=60 DRAFTER_FEATURE_HOST_GB=85
fi
echo "bf16 features at $TOKS tokens/s: DRAFTER_FEATURE_TARGET=${DRAFTER_FEATURE_TARGET:-float32} DRAFTER_REGEN_PROMPTS=$DRAFTER_REGEN_PROMPTS"
# the attention's precision from the step probe: bf16 q / k / v when the step is >= 10% faster and the gradients agree
ATTN=$(python3 -c "import json,glob; f=glob.glob('$OUT/drafter_train_step_attn_*.json'); d=json.load(open(f[0])) if f else None; print('bfloat16' if d and d['speedup'] >= 1.1 and d['agreement']['grad_cosine'] >= 0.999 and d['agreement']['loss_rel_diff'] < 1e-3 else 'float32')")
export DRAFTER_ATTN_DTYPE=${ATTN_DTYPE:-$ATTN}; echo "attention in training: DRAFTER_ATTN_DTYPE=$DRAFTER_ATTN_DTYPE (the probe's pick: $ATTN)"
export EFFQWEN_REGEN_STATIC=1 EFFQWEN_REGEN_GQA=1 SOLO=1 E2E=1 NO_EVAL=1 SOLO_DRAFTERS=stage1,stage2 \
  EXTRA_PROMPTS=$W/extra/prompts_extra.json DRAFTER_INT4_PROMPTS=${INT4_PROMPTS:-24576} \
  DRAFTER_PACK_LEN=4096 DRAFTER_BATCH=4 DRAFTER_ANCHORS=512 DRAFTER_PACK_ALIGNED=1 DRAFTER_STEPS1=${STEPS1:-6000} DRAFTER_STEPS2=${STEPS2:-4000} \
  DRAFTER_FEATURE_DTYPE=bfloat16 DRAFTER_KEEP_BEST=stage2 \
  REGEN_DEADLINE=${REGEN_DEADLINE:-420} TRAIN_DEADLINE=${TRAIN_DEADLINE:-800}
[ -z "$ANS" ] || export REGEN_TAR=$W/answers/regen_data.tar.xz           # an earlier lease's answers (none: every answer regenerated)
[ "$INIT" = none ] || export DRAFTER_INIT_STAGE1=$INIT                      # (none: stage 1 from random weights)
env | grep -E '^(DRAFTER_|REGEN_|TRAIN_|EFFQWEN_|E2E|SOLO|NO_EVAL|EXTRA_)' | sort | tr '\n' ' '; echo
if [ -n "${NO_START:-}" ]; then echo "NO_START: chain not started"; exit 0; fi   # (a CPU dry run: DEV=cpu NO_START=1)
WORK=$W scripts/gpu_session.sh start; date
