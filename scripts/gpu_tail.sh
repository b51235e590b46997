#!/usr/bin/env bash
# One nvidia-h200 command: the engine's newest paths are tested on the GPU, a path is taken for the latency run only
# when its tests pass (and, for the norm epilogue, its step A/B was faster with the same tokens), then latency_run.py.
#   1. the fused argmax's GPU test (failed: EFFQWEN_FUSED_ARGMAX=0);
#   2. GDN=1: the GDN decode-step and verify sweeps (`attn_decode_sweep.py gdn`; each fastest setting taken when 3% faster
#      than the default);
#   2b. SWEEP=1: the fragment kernel sweep (`gluon_stream_probe.py sweep`, WK 2/4/8 x WM 1/2 x DEPTH), then the engine's
#      A/B of its picks against the rule and the committed sweeps (`profile_steps.py --only frag_picks_ab`); the rest of the
#      command takes the A/B's fragment_picks_h200.json (EFFQWEN_FRAG_TUNE); commit both for later runs;
#   3. SPLIT=1 (off by default: measured no faster in session 18): the add + RMSNorm split over the linears around it
#      (NORM_SPLIT): its kernel test and engine-vs-HF test, then its A/B (`--only norm_split_ab`): EFFQWEN_NORM_SPLIT=1 when
#      both passed and decode was faster, same tokens;
#   3b. NORM=1 (off by default: measured slower in session 17): the same for the add + RMSNorm epilogue (NORM_EPILOGUE);
#   4. XCAT=1 (default): the fused verify/commit-vs-HF test with GDN_VERIFY_XCAT, then its A/B (`--only gdn_xcat_ab`):
#      EFFQWEN_GDN_VERIFY_XCAT=1 when the test passed and verify-16 was faster with the same tokens, else 0 (default on);
#   5. the engine's verify/commit-vs-HF test (failed: fused argmax off);
#   6. latency_run.py with LAT_S seconds (default 330); LAT=0 stops before it and prints the settings taken (the stages
#      above and the latency run together exceed one 10-minute command: run LAT=0 first, then the latency run alone with
#      those exports and XCAT=0).
# Session 16 ran it with the GDN sweep, before the norm and xcat stages were written (after its last GPU minutes).
#   python3 -m pip install ... --target /tmp/site .whl/*.whl; EFFQWEN_GIT_SHA=<sha> bash scripts/gpu_tail.sh   (carry .whl)
set -u; export PYTHONPATH=/tmp/site:. OMP_NUM_THREADS=8 EFFQWEN_GDN_VERIFY=chunk EFFQWEN_PDL_STEPS=decode,verify EFFQWEN_FRAGMENT=1
L=$OUT/logs; mkdir -p $L
take_faster() {  # take_faster PART LABEL STEP VAR: export VAR=1 when step_PART_h200.json's LABEL=1 was faster at STEP with the same tokens, else 0
  eval "$(python3 - "$OUT/data/results/step_$1_h200.json" "$@" <<'P'
import json, sys
f, part, label, step, var = sys.argv[1:]
try: r = json.load(open(f))[part]
except Exception: sys.exit()
a, b, k = r['ms'].get(f'{label}=1', {}), r['ms'].get(f'{label}=0', {}), f'{step}_ms'
if k in a and k in b: print(f'export {var}={int(bool(r.get("same_tokens")) and a[k] < b[k])}')   # else the module default
P
)"
}
timeout 90 python3 -m pytest -q tests/test_kernels_gpu.py -k fused_argmax > $L/argmax.log 2>&1 || { echo "ARGMAX TEST FAILED: off"; export EFFQWEN_FUSED_ARGMAX=0; }
if [ "${GDN:-0}" = 1 ]; then
  timeout 120 python3 scripts/attn_decode_sweep.py gdn --out $OUT > $L/gdn.log 2>&1
  eval "$(python3 - "$OUT/data/results/gdn_decode_sweep_h200.json" <<'P'
import json, sys
try: doc = json.load(open(sys.argv[1]))
except Exception: sys.exit()
for part, env in (('gdn', 'EFFQWEN_GDN'), ('gdn_verify', 'EFFQWEN_GDN_VERIFY')):   # decode step; verify (its own BV / warps)
    g = doc.get(part)
    if not g: continue
    c, b, d = g['configs'], g.get('best'), g['default']
    if b and b != d and c[b]['chain'] < 0.97 * c[d]['chain']:
        bv, w = b[2:].split(' w'); print(f'export {env}_BV={bv} {env}_WARPS={w}')
P
)"; grep -v Warn $L/gdn.log | tail -14; fi
if [ "${SWEEP:-0}" = 1 ]; then   # the fragment kernel's (WK, WM, DEPTH) at the engine's shapes; the engine then takes its picks
  timeout 300 python3 scripts/gluon_stream_probe.py sweep --out $OUT > $L/sweep.log 2>&1; grep -E '^\{' $L/sweep.log | cut -c1-160
  # the engine's A/B between the rule, the committed sweeps and this one; per M bucket the fastest step's picks
  FRAG_PICKS_AB=new=$OUT/data/results/kernel_stream_sweep_h200.json timeout 200 python3 scripts/profile_steps.py --only frag_picks_ab --out $OUT > $L/picks.log 2>&1 \
    && export EFFQWEN_FRAG_TUNE=$OUT/data/results/fragment_picks_h200.json; grep -E 'picks=|taken' $L/picks.log; fi
tested_ab() {  # tested_ab NAME KERNEL_TESTS ENGINE_TESTS LABEL VAR: the kernel's GPU tests, the engine-vs-HF test with it, then
  # its step A/B (profile_steps --only LABEL_ab): VAR=1 when both passed and decode was faster with the same tokens
  local n=$1 ok=1
  timeout 200 python3 -m pytest -q tests/test_gluon.py -k "$2" > $L/${n}_kernel.log 2>&1 || { echo "$n KERNEL TEST FAILED"; ok=0; }
  [ $ok = 1 ] && { timeout 200 python3 -m pytest -q -x tests/test_engine_gpu.py -k "$3" > $L/${n}_engine.log 2>&1 || { echo "$n ENGINE TEST FAILED"; ok=0; }; }
  if [ $ok = 1 ]; then
    timeout 200 python3 scripts/profile_steps.py --only $4_ab --out $OUT > $L/${n}_ab.log 2>&1
    take_faster $4_ab $4 decode $5; grep -E "$4=" $L/${n}_ab.log; fi
  for f in $L/${n}_kernel.log $L/${n}_engine.log; do [ -f $f ] && tail -n 2 $f; done
}
# the add + RMSNorm split over the linears around it (NORM_SPLIT); the add + RMSNorm epilogue (NORM_EPILOGUE, off: slower)
[ "${SPLIT:-0}" = 1 ] && tested_ab split add_ss_then_norm_in "fragment and norm_split" norm_split EFFQWEN_NORM_SPLIT
[ "${NORM:-0}" = 1 ] && tested_ab norm add_norm "fragment and norm_epilogue" norm_epilogue EFFQWEN_NORM_EPILOGUE
if [ "${XCAT:-1}" = 1 ]; then   # commit's xcat from the verify output kernel: the fused verify/commit test with it, then its A/B
  if EFFQWEN_GDN_VERIFY_XCAT=1 timeout 150 python3 -m pytest -q -x tests/test_engine_gpu.py -k "verify_commit_equal_hf" > $L/xcat_engine.log 2>&1; then
    timeout 200 python3 scripts/profile_steps.py --only gdn_xcat_ab --out $OUT > $L/xcat_ab.log 2>&1
    take_faster gdn_xcat_ab gdn_xcat verify EFFQWEN_GDN_VERIFY_XCAT; grep -E "gdn_xcat=" $L/xcat_ab.log
  else echo "GDN XCAT ENGINE TEST FAILED: off"; export EFFQWEN_GDN_VERIFY_XCAT=0; tail -n 3 $L/xcat_engine.log; fi
fi
echo "gdn: ${EFFQWEN_GDN_BV:-default} ${EFFQWEN_GDN_WARPS:-default}; fused argmax: ${EFFQWEN_FUSED_ARGMAX:-default}; norm epilogue: ${EFFQWEN_NORM_EPILOGUE:-default}; norm split: ${EFFQWEN_NORM_SPLIT:-default}; gdn xcat: ${EFFQWEN_GDN_VERIFY_XCAT:-default}"
timeout 150 python3 -m pytest -q -x tests/test_engine_gpu.py -k "verify_commit_equal_hf" > $L/engine.log 2>&1 || { echo "ENGINE TEST FAILED: fused argmax off"; export EFFQWEN_FUSED_ARGMAX=0; }
for f in $L/argmax.log $L/engine.log; do tail -n 2 $f; done
[ "${LAT:-1}" = 0 ] && { env | grep -E '^EFFQWEN_(FUSED_ARGMAX|GDN_BV|GDN_WARPS|GDN_VERIFY_BV|GDN_VERIFY_WARPS|NORM_EPILOGUE|NORM_SPLIT|GDN_VERIFY_XCAT)=' | sed 's/^/export /'; exit 0; }
timeout ${LAT_S:-330} python3 scripts/latency_run.py $(( ${LAT_S:-330} - 20 )) > $L/lat.log 2>&1; grep -E "decode|greedy|W4 vs" $L/lat.log | head -30
