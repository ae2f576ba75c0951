#!/usr/bin/env bash
# One GPU validation run (the H200 device machine): each named step writes $OUT/<step>.log and
# prints its tail. Steps: info native tests examples bench attention overhead gemm-issue gemm-llm
# gemm-ragged gemm-losers gemm-fp8 tune memcheck racecheck synccheck pack (tar $OUT into one file).
#   bash scripts/gpu_validate.sh info tests examples bench
set -o pipefail
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
export TYLO_CACHE_DIR=${TYLO_CACHE_DIR:-/tmp/tylo-validate-cache}
GPU_TESTS=${GPU_TESTS:-"tests/gpu tests/hopper tests/test_launch_errors.py"}

run_step() {
  local name=$1; shift
  echo "== $name: $*"
  local t0=$SECONDS
  "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "-- $name: rc=$rc in $((SECONDS - t0)) s"
  tail -n "${TAIL:-25}" "$OUT/$name.log"
}

sanitize() {   # compute-sanitizer --tool $1 over the GPU tests (pytest in one process)
  compute-sanitizer --tool "$1" --error-exitcode 99 --print-limit 20 \
    python -m pytest $GPU_TESTS -m gpu -q -p no:cacheprovider -x ${SANITIZE_K:+-k "$SANITIZE_K"}
}

for step in "$@"; do
  case $step in
    info) run_step info bash -c 'git log --oneline -1; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; which ptxas && ptxas --version | tail -1; python -c "import torch, triton; print(torch.__version__, triton.__version__)"' ;;
    native) run_step native bash -c 'python scripts/build_native.py && python -m tylo info | grep -i native' ;;
    attention) run_step attention python benchmarks/attention.py --rounds ${ROUNDS:-3} --json "$OUT/attention.json" \
             --plot-dir "$OUT" ;;
    overhead) run_step overhead python benchmarks/jit_overhead.py ;;
    tests) run_step tests python -m pytest tests -m gpu -q -p no:cacheprovider -rfEs ${TESTS_K:+-k "$TESTS_K"} ;;
    examples) run_step examples python examples/run_examples.py ;;
    bench) run_step bench python benchmarks/gemm.py --kernel hopper --layouts rr \
             --shapes 4096,8192,8192x8192x1024,16384x4096x4096,4096x16384x2048,1024x8192x16384,12288x12288x3072 \
             --plot "$OUT/gemm_hopper.png" ;;
    bench-layouts) run_step bench-layouts python benchmarks/gemm.py --kernel hopper --layouts rr,rc,cr,cc --shapes 4096 \
             --plot "$OUT/gemm_layouts.png" ;;
    bench-warp) run_step bench-warp python benchmarks/gemm.py --kernel warp-mma --shapes 4096,8192 --plot "$OUT/gemm_warp.png" ;;
    gemm-issue|gemm-llm|gemm-losers) run_step "$step" python benchmarks/gemm.py --kernel hopper --suite "${step#gemm-}" \
             --layouts rc --plot "$OUT/$step.png" ;;
    gemm-ragged) run_step gemm-ragged python benchmarks/gemm.py --kernel hopper --suite ragged --layouts rr,rc \
             --plot "$OUT/gemm-ragged.png" ;;
    gemm-fp8) run_step gemm-fp8 python benchmarks/gemm.py --kernel hopper --dtype fp8 --layouts rc \
             --shapes 16x8192x8192,256x4096x8192,4096 --plot "$OUT/gemm-fp8.png" ;;
    pack) tar czf /tmp/results.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/results.tgz "$OUT/" ;;   # one file back
    tune) run_step tune python benchmarks/tune_hopper_gemm.py --shapes ${TUNE_SHAPES:-4096} ;;
    probe-negative) run_step probe-negative python scripts/probe_tma_negative.py ;;
    memcheck|racecheck|synccheck) run_step "$step" sanitize "$step" ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
