#!/bin/sh
# bench/hyperfine.sh [BUILD_DIR [OUT_DIR]]: whole-program timings with
# hyperfine, exported as JSON and Markdown into OUT_DIR (default
# bench/results):
#   hyperfine_demo.*    examples/per_demo (1M stratified draws and the tour)
#   hyperfine_dqn.*     examples/dqn_cartpole, 10,000 training steps (batch
#                       64, one sample + update per step): prioritized
#                       replay vs uniform replay (--uniform), same seed
#   hyperfine_sample.*  bench_tree at fixed work: 1000 stratified batches of
#                       1024 from a 2^24 tree, per.h (double, float) vs the
#                       classic tree, set-up (filling the tree) included
#   hyperfine_update.*  the same for 2000 batch updates of 1024
# BUILD_DIR (default build) must hold the compiled per_demo and bench
# programs. Installs hyperfine (Debian package) when it is missing, with
# apt-get as root or through sudo. HF_RUNS (default 5) sets the runs per
# command.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
out=${2:-$here/results}
runs=${HF_RUNS:-5}
mkdir -p "$out"

if ! command -v hyperfine >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  echo "installing hyperfine"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq hyperfine >/dev/null
fi

demo=$build/examples/per_demo
dqn=$build/examples/dqn_cartpole
bt=$build/bench/bench_tree
for f in "$demo" "$dqn" "${bt}_double" "${bt}_float"; do
  [ -x "$f" ] || { echo "missing $f (build first: meson compile -C $build)" >&2; exit 1; }
done

hyperfine --warmup 2 --runs $((runs * 4)) -N \
  --export-json "$out/hyperfine_demo.json" \
  --export-markdown "$out/hyperfine_demo.md" \
  -n per_demo "$demo"

hyperfine --warmup 1 --runs "$runs" -N \
  --export-json "$out/hyperfine_dqn.json" \
  --export-markdown "$out/hyperfine_dqn.md" \
  -n "dqn_cartpole, prioritized" "$dqn --steps 10000 --quiet --seed 1" \
  -n "dqn_cartpole, uniform" "$dqn --steps 10000 --quiet --seed 1 --uniform"

fixed="--n 2^24 --b 1024 --reps 1"
hyperfine --warmup 1 --runs "$runs" -N \
  --export-json "$out/hyperfine_sample.json" \
  --export-markdown "$out/hyperfine_sample.md" \
  -n "per.h double" "${bt}_double --impl per --op sample $fixed --iters 1000" \
  -n "per.h float" "${bt}_float --impl per --op sample $fixed --iters 1000" \
  -n "classic float32" "${bt}_double --impl base --op sample $fixed --iters 1000"

hyperfine --warmup 1 --runs "$runs" -N \
  --export-json "$out/hyperfine_update.json" \
  --export-markdown "$out/hyperfine_update.md" \
  -n "per.h double" "${bt}_double --impl per --op update $fixed --iters 2000" \
  -n "per.h float" "${bt}_float --impl per --op update $fixed --iters 2000" \
  -n "classic float32" "${bt}_double --impl base --op update $fixed --iters 2000"
