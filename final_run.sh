#!/usr/bin/env bash
# session 6 final H200 batch (not committed)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TYLO_CACHE_DIR=/tmp/tc
OUT=${OUT:-gpu-out}; mkdir -p $OUT
python scripts/build_native.py > /dev/null 2>&1
t0=$SECONDS
timeout 100 python -m pytest -q -m gpu tests/hopper/test_gemm_small_gpu.py -k heuristic -p no:cacheprovider > $OUT/gemm_tests.log 2>&1; echo "gemm tests: $(tail -1 $OUT/gemm_tests.log) [$((SECONDS-t0)) s]"
timeout 120 python scripts/probe_gemm_alignment.py > $OUT/align.log 2>&1; echo "align probe rc=$? [$((SECONDS-t0)) s]"
while IFS='|' read s kw; do timeout 25 python benchmarks/gemm.py --kernel hopper --shapes $s --layouts rc --sweep 1 --extra "$kw" --no-triton --plot /tmp/ab.png 2>&1 | grep -E "sweep|measured"; done > $OUT/picks_ab.log <<'EOF'
1x4096x14336|consumers=1,tn=8,swap_ab=1,direct=1,split_k=2
16x14336x4096|consumers=1,tn=16,swap_ab=1,direct=1
16x28672x8192|consumers=1,tn=16,swap_ab=1,direct=1
64x28672x8192|consumers=1,tn=64
128x4096x4096|consumers=1,tn=128,split_k=2
128x14336x4096|consumers=1,tn=128
128x4096x14336|consumers=1,tn=128,split_k=2
256x4096x14336|consumers=2,tn=128,split_k=2
256x8192x28672|consumers=2,tn=128
512x28672x8192|consumers=2,tn=128
EOF
echo "picks A/B done [$((SECONDS-t0)) s]"
ROUNDS=2 TAIL=8 bash scripts/gpu_validate.sh attention gemm-issue gemm-llm gemm-ragged > $OUT/bench_summary.log 2>&1
echo "benchmarks done [$((SECONDS-t0)) s]"
grep -E "geometric|minimum|target" $OUT/*.log | cut -c1-200
bash scripts/gpu_validate.sh pack > /dev/null
