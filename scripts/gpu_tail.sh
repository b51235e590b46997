#!/usr/bin/env bash
# One nvidia-h200 command (session 16): the fused argmax's GPU test, the GDN step sweep (its fastest setting is taken when
# 3% faster than the default), the engine's verify/commit-vs-HF test, then latency_run.py. A failed test turns that path off.
set -u; export PYTHONPATH=/tmp/site:. OMP_NUM_THREADS=8 EFFQWEN_GDN_VERIFY=chunk EFFQWEN_PDL_STEPS=decode,verify EFFQWEN_FRAGMENT=1
L=$OUT/logs; mkdir -p $L
timeout 90 python3 -m pytest -q tests/test_kernels_gpu.py -k fused_argmax > $L/argmax.log 2>&1 || { echo "ARGMAX TEST FAILED: off"; export EFFQWEN_FUSED_ARGMAX=0; }
timeout 120 python3 scripts/attn_decode_sweep.py gdn --out $OUT > $L/gdn.log 2>&1
eval "$(python3 - "$OUT/data/results/gdn_decode_sweep_h200.json" <<'P'
import json, sys
try: g = json.load(open(sys.argv[1]))['gdn']
except Exception: sys.exit()
c, b, d = g['configs'], g.get('best'), g['default']
if b and b != d and c[b]['chain'] < 0.97 * c[d]['chain']:
    bv, w = b[2:].split(' w'); print(f'export EFFQWEN_GDN_BV={bv} EFFQWEN_GDN_WARPS={w}')
P
)"; echo "gdn: ${EFFQWEN_GDN_BV:-default} ${EFFQWEN_GDN_WARPS:-default}; fused argmax: ${EFFQWEN_FUSED_ARGMAX:-default}"
timeout 150 python3 -m pytest -q -x tests/test_engine_gpu.py -k "verify_commit_equal_hf" > $L/engine.log 2>&1 || { echo "ENGINE TEST FAILED: fused argmax off"; export EFFQWEN_FUSED_ARGMAX=0; }
for f in $L/argmax.log $L/engine.log; do tail -n 2 $f; done; grep -v Warn $L/gdn.log | tail -14
timeout ${LAT_S:-330} python3 scripts/latency_run.py $(( ${LAT_S:-330} - 20 )) > $L/lat.log 2>&1; grep -E "decode|greedy|W4 vs" $L/lat.log | head -30
