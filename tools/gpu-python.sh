#!/bin/sh
# tools/gpu-python.sh [--quick | --all] [--build-only] [--only STEPS]
# [BUILD_DIR]: per.cuda from Python on a GPU (step 5 of tools/gpu-check.sh),
# on a machine with nvcc, Meson, ninja, Python with its headers, NumPy,
# pytest and PyTorch, and no PyPI: Meson builds the extensions per._per and
# per._cuda (gpu_arch native) into BUILD_DIR (default build-gpu-py), which
# get staged with the package's Python files into BUILD_DIR/pypkg/per, and
# with that on PYTHONPATH:
#   1. tests: python/tests/test_cuda.py on the GPU backend and
#      test_readme.py (PER_NEED_CUDA=1, PER_NEED_TORCH=1: a skip there is a
#      failure);
#   2. dqn: python/examples/gpu_dqn_cartpole.py, seeds 1, 2 and 3, until
#      solved (bench/results/gpu_python_dqn.txt);
#   3. peers: bench/peers_cuda.py: per.cuda against a graph-captured torch
#      cumsum + searchsorted, TorchRL and flashbax where installed
#      (bench/results/peers_cuda.md, .csv).
# --quick: the tests, one seed of the example with a budget of 100000
# steps, and the benchmark's --smoke. --all (tools/gpu-check.sh --all):
# the tests, seed 1 of the example with its own budget (600000 steps; not
# solving it is a failure) and the whole benchmark. --build-only: build
# and stage, nothing else. --only STEPS: those of tests, dqn and peers
# (comma-separated). Each step prints the seconds it took. Exits non-zero
# when a step fails.
set -eu
cd "$(dirname "$0")/.."
mode="" build=build-gpu-py steps="tests,dqn,peers" build_only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) mode=quick ;;
    --all) mode=all ;;
    --build-only) build_only=1 ;;
    --only)
      [ $# -ge 2 ] || { echo "gpu-python: --only needs STEPS" >&2; exit 2; }
      steps=$2
      shift
      ;;
    -*)
      echo "usage: tools/gpu-python.sh [--quick | --all] [--build-only]" \
        "[--only tests,dqn,peers] [BUILD_DIR]" >&2
      exit 2
      ;;
    *) build=$1 ;;
  esac
  shift
done
case "$build" in /*) ;; *) build=$(pwd)/$build ;; esac
PATH="$PATH:/usr/local/cuda/bin"
export PATH
py=${PYTHON:-python3}
out=bench/results
mkdir -p "$out"

# step NAME: whether --only names it
step() {
  case ",$steps," in *",$1,"*) return 0 ;; *) return 1 ;; esac
}
t_start=$(date +%s)
took() {
  echo "== $1: $(($(date +%s) - t_start)) s"
  t_start=$(date +%s)
}

echo "== build ($build: per._per, per._per32, per._cuda and per._cuda32, gpu_arch native)"
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" -Dpython=enabled -Dcuda=enabled -Dprograms=false \
    -Dtests=false -Dcxx=disabled -Dgpu_arch=native -Dbuildtype=release >/dev/null
fi
ninja -C "$build" >/dev/null
pkg=$build/pypkg/per
rm -rf "$build/pypkg"
mkdir -p "$pkg"
cp python/per/*.py python/per/*.pyi python/per/py.typed "$pkg/"
cp "$build"/python/_per.*.so "$build"/python/_per32.*.so \
  "$build"/python/_cuda.*.so "$build"/python/_cuda32.*.so "$pkg/"
took "build and stage"
[ -z "$build_only" ] || exit 0
PYTHONPATH=$build/pypkg
export PYTHONPATH
"$py" -c 'import per, per.cuda as pc; print("per", per.__version__, "from",
per.__file__, "| per.cuda:", pc.available(), pc.device_count(), "device(s)")'

status=0
if step tests; then
  echo "== per.cuda tests on the GPU"
  PER_NEED_CUDA=1 PER_NEED_TORCH=1 "$py" -m pytest -q -p no:cacheprovider \
    python/tests/test_cuda.py python/tests/test_cuda_f32.py \
    python/tests/test_readme.py || status=1
  took "per.cuda tests"
fi

if step dqn; then
  echo "== the PyTorch GPU DQN example: $out/gpu_python_dqn.txt"
  seeds="1 2 3" budget=600000
  if [ "$mode" = quick ]; then seeds=1 budget=100000; fi
  if [ "$mode" = all ]; then seeds=1; fi
  : >"$out/gpu_python_dqn.txt"
  for s in $seeds; do
    echo "-- seed $s" | tee -a "$out/gpu_python_dqn.txt"
    {
      PYTHONUNBUFFERED=1 "$py" python/examples/gpu_dqn_cartpole.py --seed "$s" \
        --steps "$budget" 2>&1 && rc=0 || rc=$?
      echo "exit status $rc (0 solved, 1 not solved)"
    } | tee -a "$out/gpu_python_dqn.txt"
  done
  # with --all, a seed that did not solve is a failure
  if [ "$mode" = all ] &&
    grep -q '^exit status [^0]' "$out/gpu_python_dqn.txt"; then
    status=1
  fi
  took "DQN example"
fi

if step peers; then
  echo "== per.cuda against its peers: $out/peers_cuda.md"
  if [ "$mode" = quick ]; then
    "$py" bench/peers_cuda.py --smoke || status=1
  elif "$py" bench/peers_cuda.py --csv "$out/peers_cuda.csv" \
    >"$out/peers_cuda.md"; then
    cat "$out/peers_cuda.md"
  else
    cat "$out/peers_cuda.md"
    echo "gpu-python: bench/peers_cuda.py failed" >&2
    status=1
  fi
  took "peers benchmark"
fi
exit $status
