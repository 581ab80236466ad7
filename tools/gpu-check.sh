#!/bin/sh
# tools/gpu-check.sh [--quick] [BUILD_DIR]: everything that needs a GPU,
# in one command, on a machine with an NVIDIA GPU and nvcc.
#
#   1. configure and build BUILD_DIR (default build-gpu) with CUDA required;
#   2. bench/results/gpu_machine.txt: the GPU, driver, nvcc and per.h's
#      sha256 and commit;
#   3. meson test --suite gpu (the GPU test for both node types and the
#      GPU example): a skip counts as a failure here, since this command
#      exists to run them;
#   4. the GPU benchmark for both node types: bench/results/gpu_double.csv,
#      gpu_float.csv (and .txt), and bench/results/gpu.md, a Markdown table
#      (bench/gpu_report.py);
#   5. per.cuda from Python (tools/gpu-python.sh): its tests on the GPU,
#      the PyTorch DQN example, its peer benchmark.
# --quick: the benchmark's two smallest rows only (checks the pipeline).
# Exits non-zero when any step fails; the results of the steps that ran
# stay in bench/results.
set -eu
cd "$(dirname "$0")/.."
quick="" build=build-gpu
for a in "$@"; do
  case "$a" in
    --quick) quick=--quick ;;
    -*) echo "usage: tools/gpu-check.sh [--quick] [BUILD_DIR]" >&2; exit 2 ;;
    *) build=$a ;;
  esac
done
PATH="$PATH:/usr/local/cuda/bin"
export PATH
out=bench/results
mkdir -p "$out"

sh tools/deps.sh
echo "== build ($build, -Dcuda=enabled)"
sh tools/setup.sh "$build" -Dcuda=enabled -Dbuildtype=release >/dev/null
ninja -C "$build"

echo "== machine: $out/gpu_machine.txt"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "per.h sha256: $(sha256sum per.h | cut -d' ' -f1)"
  echo "per_cuda.cu sha256: $(sha256sum per_cuda.cu | cut -d' ' -f1)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo none)$(
    git diff --quiet HEAD -- per.h per_cuda.h per_cuda.cu 2>/dev/null ||
    echo ' + uncommitted changes to per.h / per_cuda')"
  echo "nvcc: $(nvcc --version | tail -n 1)"
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
      --format=csv,noheader | sed 's/^/gpu: /'
  else
    echo "gpu: nvidia-smi not available"
  fi
} >"$out/gpu_machine.txt"
cat "$out/gpu_machine.txt"

echo "== GPU tests (meson test --suite gpu)"
status=0
meson test -C "$build" --suite gpu --print-errorlogs || status=1
if grep -q '"result": "SKIP"' "$build/meson-logs/testlog.json" 2>/dev/null; then
  echo "gpu-check: a GPU test was skipped: no usable CUDA device" >&2
  status=1
fi

echo "== GPU benchmark"
for real in double float; do
  if "$build/bench/cuda/bench_cuda_$real" $quick --csv "$out/gpu_$real.csv" \
    >"$out/gpu_$real.txt"; then
    cat "$out/gpu_$real.txt"
  else
    rc=$?
    cat "$out/gpu_$real.txt"
    echo "gpu-check: bench_cuda_$real failed (exit $rc)" >&2
    status=1
  fi
done
if [ -s "$out/gpu_double.csv" ]; then
  python3 bench/gpu_report.py "$out" >"$out/gpu.md"
  echo "== $out/gpu.md"
  cat "$out/gpu.md"
fi

echo "== per.cuda from Python (tools/gpu-python.sh)"
sh tools/gpu-python.sh $quick || status=1
exit $status
