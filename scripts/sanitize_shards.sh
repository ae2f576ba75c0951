#!/usr/bin/env bash
# compute-sanitizer over GPU tests in parallel shards (one pytest process per shard, all on the one GPU):
# a racecheck of a whole test file is ~10 s per test in one process, mostly host-side instrumentation.
#   bash scripts/sanitize_shards.sh racecheck 6 400 tests/hopper/test_hopper_attention_gpu.py
# args: tool, shards, seconds per shard, test paths (or @FILE of test ids). KERNELS=<substring> checks only the
# kernels whose names contain it (--kernel-name kns=...): the tests' torch reference kernels then run uninstrumented,
# which is most of a large test's time under racecheck. Logs: $OUT/<tool>-<shard>.log; the summary
# ($OUT/<tool>-summary.log) counts passed/failed tests and the sanitizer's error summaries per shard.
set -o pipefail
tool=$1; shards=$2; limit=$3; shift 3
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
export TYLO_CACHE_DIR=${TYLO_CACHE_DIR:-/tmp/tylo-validate-cache}
ids=$(mktemp)
if [[ $1 == @* ]]; then     # @FILE: the test ids listed in FILE
  grep '::' "${1#@}" > "$ids"
else
  python -m pytest "$@" -m gpu -q -p no:cacheprovider --collect-only 2>/dev/null | grep '::' > "$ids"
fi
echo "$tool: $(wc -l < "$ids") tests in $shards shards, ${limit} s each${KERNELS:+, kernels named *$KERNELS* only}"
for ((i = 0; i < shards; i++)); do
  awk -v n="$shards" -v i="$i" '(NR - 1) % n == i' "$ids" > "$ids.$i"
  timeout "$limit" compute-sanitizer --tool "$tool" ${KERNELS:+--kernel-name "kns=$KERNELS"} --error-exitcode 99 --print-limit 20 \
    python -m pytest -m gpu -v -p no:cacheprovider -rfE $(cat "$ids.$i") > "$OUT/$tool-$i.log" 2>&1 &
done
wait
{
  for ((i = 0; i < shards; i++)); do
    log="$OUT/$tool-$i.log"
    echo "shard $i: $(grep -c ' PASSED' "$log") passed, $(grep -c ' FAILED' "$log") failed of $(wc -l < "$ids.$i")"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Hazard|Error|FAILED" "$log" | sort | uniq -c | head -20
  done
} | tee "$OUT/$tool-summary.log"
