#!/usr/bin/env bash
# Here (CPU), everything a drafter GPU session (scripts/gpu_session.sh without ENGINE_ONLY) needs, in order:
#   1. the QAD INT4 target the bundle carries: 21_qad at the cpu profile, group 32 (about 65 min on 2 cores; skipped
#      when its compressed-tensors checkpoint is already in data/cache). Its results go to _runs/qad_bundle/, not data/.
#   2. the bundle (.devsite/bundle: GGUF, QAD codes/scales, prompts, split in parts of <= 58 MB with a sha256 manifest)
#   3. EXTRA more training prompts (.devsite/extra, default 12288; EXTRA=0 skips)
#   4. the wheels the device lacks (.whl: flash-linear-attention, fla-core, fastcore, gguf)
# Ignored paths are not kept between sessions: start this first thing (in the background) in a session that will
# lease a GPU for the drafter. Usage: scripts/prepare_drafter_bundle.sh [> _runs/prepare.log 2>&1 &]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
mkdir -p _runs
grep -qx '/.devsite/' .git/info/exclude 2>/dev/null || echo '/.devsite/' >> .git/info/exclude
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
QD=$($PY -c "from effqwen.core import get_profile; from effqwen.qad import qad_target_dir; d = qad_target_dir(get_profile('cpu'), 32); print(d.with_name(d.name + '-w4a16'))")
t0=$SECONDS
if [ ! -f "$QD/model.safetensors" ]; then
  echo "[$(date +%T)] QAD target missing ($QD): running 21_qad (cpu profile, group 32)"
  EFFQWEN_OUT="$PWD/_runs/qad_bundle" $PY -c "from pathlib import Path; from effqwen.cli import run_notebook
run_notebook(Path('nbs/21_qad.ipynb'), Path('_runs/21_qad_bundle.ipynb').resolve(), 'cpu', cwd=Path('nbs').resolve(), groups=[32])"
  echo "[$(date +%T)] 21_qad done in $((SECONDS - t0)) s"
fi
$PY scripts/device_bundle.py --out .devsite/bundle
if [ "${EXTRA:-12288}" != 0 ]; then   # (xz: the device call carries the compressed file; the session's c1 command unpacks it)
  $PY scripts/device_bundle.py --extra "${EXTRA:-12288}" --out .devsite/extra && xz -kf .devsite/extra/prompts_extra.json; fi
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
  flash-linear-attention==0.6.0 fla-core==0.6.0 fastcore==1.14.5 gguf==0.19.0
echo "[$(date +%T)] ready in $((SECONDS - t0)) s: .devsite/bundle, .devsite/extra, .whl"
