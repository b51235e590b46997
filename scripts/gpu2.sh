#!/usr/bin/env bash
# The gpu drafter stages on a machine with two GPUs (nvidia-h200-x2), one process per GPU; logs go to $OUT.
# Run from the repository root on the device, after `gpu_drafter.py assemble` (README "GPU runs"):
#
#   scripts/gpu2.sh regen [deadline_s]          BF16 answers on GPU 0, INT4 answers on GPU 1 (resumable)
#   scripts/gpu2.sh train [deadline_s] [args]   stage 1 on GPU 0, direct then stage 2 on GPU 1 (args: e.g. --layers 4)
#   scripts/gpu2.sh train-bg [budget_s] [args]  the same as detached processes that outlive the command (a training run
#                                               longer than one command), then `scripts/gpu2.sh wait [max_s]` polls for it
#   scripts/gpu2.sh eval                        eval (--no-fp32) on GPU 0 beside lossless32 on GPU 1, then merge
#   scripts/gpu2.sh opt                         tables A5 / A6 (drafter PTQ, SWA) on GPU 0
#
# Each pair is waited for with the shell's `wait` on the two PIDs (a `pgrep -f` loop matches its own command line).
set -u
: "${OUT:?set OUT}"; W=${WORK:-/tmp/xfer}; mkdir -p "$OUT"
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
G="python3 scripts/gpu_drafter.py"
stage=${1:?stage}; shift || true
both() {  # both LOG_A "CMD A" LOG_B "CMD B": run A on GPU 0 and B on GPU 1, wait for both, return the worse status
  CUDA_VISIBLE_DEVICES=0 bash -c "$2" > "$OUT/$1" 2>&1 & a=$!
  CUDA_VISIBLE_DEVICES=1 bash -c "$4" > "$OUT/$3" 2>&1 & b=$!
  wait $a; ra=$?; wait $b; rb=$?
  for f in "$OUT/$1" "$OUT/$3"; do tr '\r' '\n' < "$f" | grep -E '^\[|Error' | cut -c1-400 | tail -8; done
  return $(( ra > rb ? ra : rb ))
}
case $stage in
  regen) d=${1:-540}
    both regen_bf16.log "$G regen --work $W --only bf16 --batch 1024 --deadline $d" \
         regen_int4.log "$G regen --work $W --only int4 --batch 1024 --deadline $d" ;;
  train) d=${1:-550}; shift || true
    both train_a.log "$G train --work $W --drafters stage1 --deadline $d --train-budget 100000 $*" \
         train_b.log "$G train --work $W --drafters direct,stage2 --deadline $d --train-budget 100000 $*"
    cp "$W"/train_*.json "$OUT"/ 2>/dev/null ;;
  train-bg) b=${1:-900}; shift || true; d=$((b + 150))
    rm -f "$W"/train_*.json
    CUDA_VISIBLE_DEVICES=0 setsid nohup $G train --work $W --drafters stage1 --deadline $d --train-budget $b "$@" > "$W/train_a.log" 2>&1 < /dev/null &
    CUDA_VISIBLE_DEVICES=1 setsid nohup $G train --work $W --drafters direct,stage2 --deadline $d --train-budget $b "$@" > "$W/train_b.log" 2>&1 < /dev/null &
    sleep 5; echo "started; logs in $W/train_{a,b}.log" ;;
  wait) m=${1:-560}; t0=$SECONDS
    while [ $((SECONDS - t0)) -lt "$m" ] && ! { [ -f "$W/train_stage1.json" ] && [ -f "$W/train_direct_stage2.json" ]; }; do sleep 5; done
    for f in "$W/train_a.log" "$W/train_b.log"; do tr '\r' '\n' < "$f" | grep -E '^\[|Error' | cut -c1-400 | tail -6; cp "$f" "$OUT"/; done
    cp "$W"/train_*.json "$OUT"/ 2>/dev/null; ls "$W"/train_*.json ;;
  eval)
    both eval.log "N_EVAL=${N_EVAL:-24} N_LONG=${N_LONG:-8} timeout 570 $G eval --work $W --no-fp32 --lossless ${LOSSLESS:-100}" \
         lossless32.log "timeout 570 $G lossless32 --work $W --lossless ${LOSSLESS:-100}"
    $G merge --work $W >> "$OUT/eval.log" 2>&1 ;;
  opt)
    CUDA_VISIBLE_DEVICES=0 N_EVAL=${N_EVAL:-16} N_LONG=${N_LONG:-8} timeout 570 $G opt --work $W > "$OUT/opt.log" 2>&1
    tr '\r' '\n' < "$OUT/opt.log" | grep -E '^\[|Error' | cut -c1-400 | tail -10 ;;
  *) echo "unknown stage $stage"; exit 2 ;;
esac
