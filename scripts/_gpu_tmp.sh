python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:. || exit
export EFFQWEN_GDN_VERIFY=chunk EFFQWEN_PDL_STEPS=decode,verify EFFQWEN_FRAGMENT=1 EFFQWEN_PREFILL_GVA=1 EFFQWEN_PREFILL_SDPA_GQA=1 EFFQWEN_PREFILL_DEQUANT_AHEAD=0 EFFQWEN_PREFILL_DIRECT=1 EFFQWEN_PREFILL_QK_NORM=1
timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/test_engine_gpu.py -k "fused_decode or greedy_equals_hf or fused_kernels_match or early_loads" 2>&1 | tail -5
ROUNDS=5 python3 scripts/profile_steps.py --only fused_decode_ab --prompt 8192 --out $OUT 2>&1 | grep -v Warning | tail -8
