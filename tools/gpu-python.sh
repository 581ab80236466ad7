#!/bin/sh
# tools/gpu-python.sh [--quick] [BUILD_DIR]: per.cuda from Python on a GPU
# (step 5 of tools/gpu-check.sh), on a machine with nvcc, Meson, ninja,
# Python with its headers, NumPy, pytest and PyTorch, and no PyPI: Meson
# builds the extensions per._per and per._cuda (gpu_arch native) into
# BUILD_DIR (default build-gpu-py), which get staged with the package's
# Python files into BUILD_DIR/pypkg/per, and with that on PYTHONPATH:
#   1. python/tests/test_cuda.py on the GPU backend and test_readme.py
#      (PER_NEED_CUDA=1, PER_NEED_TORCH=1: a skip there is a failure);
#   2. python/examples/gpu_dqn_cartpole.py, seeds 1, 2 and 3, until solved
#      (bench/results/gpu_python_dqn.txt);
#   3. bench/peers_cuda.py: per.cuda against a graph-captured torch cumsum +
#      searchsorted, TorchRL and flashbax where installed
#      (bench/results/peers_cuda.md, .csv).
# --quick: the tests, one seed of the example with a budget of 100000
# steps, and the benchmark's --smoke. Exits non-zero when a step fails.
set -eu
cd "$(dirname "$0")/.."
quick="" build=build-gpu-py
for a in "$@"; do
  case "$a" in
    --quick) quick=1 ;;
    -*) echo "usage: tools/gpu-python.sh [--quick] [BUILD_DIR]" >&2; exit 2 ;;
    *) build=$a ;;
  esac
done
case "$build" in /*) ;; *) build=$(pwd)/$build ;; esac
PATH="$PATH:/usr/local/cuda/bin"
export PATH
py=${PYTHON:-python3}
out=bench/results
mkdir -p "$out"

echo "== build ($build: per._per and per._cuda, gpu_arch native)"
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" -Dpython=enabled -Dcuda=enabled -Dprograms=false \
    -Dtests=false -Dcxx=disabled -Dgpu_arch=native -Dbuildtype=release >/dev/null
fi
ninja -C "$build" >/dev/null
pkg=$build/pypkg/per
rm -rf "$build/pypkg"
mkdir -p "$pkg"
cp python/per/*.py python/per/*.pyi python/per/py.typed "$pkg/"
cp "$build"/python/_per.*.so "$build"/python/_cuda.*.so "$pkg/"
PYTHONPATH=$build/pypkg
export PYTHONPATH
"$py" -c 'import per, per.cuda as pc; print("per", per.__version__, "from",
per.__file__, "| per.cuda:", pc.available(), pc.device_count(), "device(s)")'

status=0
echo "== per.cuda tests on the GPU"
PER_NEED_CUDA=1 PER_NEED_TORCH=1 "$py" -m pytest -q -p no:cacheprovider \
  python/tests/test_cuda.py python/tests/test_readme.py || status=1

echo "== the PyTorch GPU DQN example: $out/gpu_python_dqn.txt"
seeds="1 2 3" steps=600000
if [ -n "$quick" ]; then seeds=1 steps=100000; fi
: >"$out/gpu_python_dqn.txt"
for s in $seeds; do
  echo "-- seed $s" | tee -a "$out/gpu_python_dqn.txt"
  {
    PYTHONUNBUFFERED=1 "$py" python/examples/gpu_dqn_cartpole.py --seed "$s" \
      --steps "$steps" 2>&1 && rc=0 || rc=$?
    echo "exit status $rc (0 solved, 1 not solved)"
  } | tee -a "$out/gpu_python_dqn.txt"
done

echo "== per.cuda against its peers: $out/peers_cuda.md"
if [ -n "$quick" ]; then
  "$py" bench/peers_cuda.py --smoke || status=1
elif "$py" bench/peers_cuda.py --csv "$out/peers_cuda.csv" >"$out/peers_cuda.md"; then
  cat "$out/peers_cuda.md"
else
  cat "$out/peers_cuda.md"
  echo "gpu-python: bench/peers_cuda.py failed" >&2
  status=1
fi
exit $status
