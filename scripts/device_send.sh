#!/usr/bin/env bash
# A drafter GPU run's inputs onto the device machine, one `run` call per step, issued back to back (an idle machine is
# given back after 30 s). A call carries at most 64 MiB with the working tree, so each ~58 MB bundle part goes alone
# (session 32: the tree reached 9.1 MB and 58 MB + tree passed 64 MiB; BUNDLE=.devsite/bundle44 sends the same tar in four
# 44 MB parts, the last with the finish step's files in the same call; see below):
#   scripts/device_send.sh part 1                      carry [".devsite/bundle/p1"]
#   scripts/device_send.sh part 2                      carry [".devsite/bundle/p2"]
#   scripts/device_send.sh part 3                      carry [".devsite/bundle/p3", ".devsite/bundle/manifest.json"]
#        (57.4 MB + the 8.7 MB working tree: nothing more fits)
#   scripts/device_send.sh finish [EXTRA_SEND_DIR [ANSWERS_DIR]]   carry [EXTRA_SEND_DIR, ANSWERS_DIR, ".whl"]
#        (EXTRA_SEND_DIR: prompts_extra.json.xz + prompts_extra.sha256, e.g. .devsite/extra_long/send, unpacked and checked;
#        ANSWERS_DIR: an earlier run's regen_data.tar.xz with its SHA256 file, e.g. .devsite/regen_s30, copied and checked),
#        then the wheels into /tmp/site and `gpu_drafter.py assemble` (each part, the tar and every member against the manifest)
# Everything lands under WORK (default /tmp/xfer): parts/pN/part, manifest.json, answers/, extra/prompts_extra.json.
# Then, in the same call or the next: REGEN_TAR=$WORK/answers/regen_data.tar.xz EXTRA_PROMPTS=$WORK/extra/prompts_extra.json
# ... scripts/gpu_session.sh start (README "GPU runs"). Session 30 sent its run this way (about 5 s a call after the start).
# BUNDLE=.devsite/bundle44: another cut of the same bundle (device_bundle.py --resplit; carry $BUNDLE/pN, and the manifest with the last part)
set -eu
W=${WORK:-/tmp/xfer}; mkdir -p "$W"; B=${BUNDLE:-.devsite/bundle}
case ${1:?part N | finish [EXTRA_SEND_DIR [ANSWERS_DIR]]} in
  part) n=${2:?part number}; src=$B/p$n/part
    [ -f "$src" ] || { echo "no $src here: carry $B/p$n in this call"; exit 1; }
    mkdir -p "$W/parts/p$n" && cp "$src" "$W/parts/p$n/part" && sha256sum "$W/parts/p$n/part"
    if [ -f "$B/manifest.json" ]; then cp "$B/manifest.json" "$W/manifest.json"; fi
    ls -la "$W"/parts/* ;;
  finish)
    if [ -n "${2:-}" ]; then
      mkdir -p "$W/extra" && cp "$2"/prompts_extra.json.xz "$2"/prompts_extra.sha256 "$W/extra/" && xz -df "$W/extra/prompts_extra.json.xz"
      [ "$(sha256sum "$W/extra/prompts_extra.json" | cut -c1-64)" = "$(cut -c1-64 "$W/extra/prompts_extra.sha256")" ] \
        || { echo "extra prompts: sha256 mismatch with prompts_extra.sha256: send $2 again"; exit 1; }
      echo "extra prompts: sha256 ok"; fi
    if [ -n "${3:-}" ]; then
      mkdir -p "$W/answers" && cp "$3"/regen_data.tar.xz "$3"/SHA256 "$W/answers/" && (cd "$W/answers" && sha256sum -c SHA256); fi
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
    [ -f "$W/manifest.json" ] || { echo "no $W/manifest.json: send the last part with $B/manifest.json first"; exit 1; }
    PYTHONPATH=/tmp/site:. python3 scripts/gpu_drafter.py assemble --work "$W" --manifest "$W/manifest.json" ;;
  *) echo "unknown step $1: part N | finish [EXTRA_SEND_DIR [ANSWERS_DIR]]"; exit 2 ;;
esac
