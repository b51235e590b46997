#!/usr/bin/env bash
# One nvidia-h200 command: the A1/A2 latency run (with the drafter step's fused / plain A/B), the serving-step profile
# at the SmolLM2 and the Qwen3.5-4B drafter shapes (fused vs plain), then the StaticDrafter GPU test. Wheels in .whl (carry it). LAT_T / PROF_T / TEST_T bound each
# stage's seconds; the device's 10-minute limit can cut the test, which runs last. Results and logs under $OUT.   Usage: EFFQWEN_GIT_SHA=<sha> bash scripts/gpu_drafter_step_ab.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:. OMP_NUM_THREADS=8 PYTHONUNBUFFERED=1 EFFQWEN_PDL_STEPS=decode,verify EFFQWEN_GDN_VERIFY=chunk EFFQWEN_FRAGMENT=1
nvidia-smi --query-gpu=name,memory.used --format=csv
OUT=$OUT timeout ${LAT_T:-380} python3 scripts/latency_run.py ${LAT_S:-300} > $OUT/latency.log 2>&1; echo "latency rc $?"; tail -25 $OUT/latency.log
timeout ${PROF_T:-150} python3 scripts/drafter_step_profile.py --serve-only --with-4b --out $OUT/p > $OUT/profile.log 2>&1; echo "profile rc $?"
grep -v USDT $OUT/profile.log | tail -20; cp $OUT/p/data/results/*.json $OUT/ 2>/dev/null; rm -rf $OUT/p
# last: the GPU test compiles the engine's kernels for minutes (90 s was not enough in session 20)
timeout ${TEST_T:-240} python3 -m pytest -x -q -s tests/test_engine_gpu.py -k static_drafter > $OUT/test.log 2>&1; echo "test rc $?"; tail -5 $OUT/test.log
ls -la $OUT
