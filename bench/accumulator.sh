#!/bin/sh
# bench/accumulator.sh [RESULTS_DIR] [-- ARGS]: the trajectory accumulator
# on the three-timescale rollout, C and Python in one run. Builds bench_traj (in
# BUILD, default build-bench: configured as bench/run.sh configures it
# when it is not yet) and the Python package (tools/pyvenv.sh:
# build-py/venv, from this working tree), then runs, back to back,
# bench_traj (per_traj.h against plain arrays of structs, thread CPU
# time) and bench/accumulator.py (per.TrajectoryAccumulator against the
# NumPy loops, thread CPU time), which folds bench_traj's figures into
# its CSV. ARGS (--reps R, --min-time S; default 7 and 0.2) go to both.
# Writes RESULTS_DIR (default bench/results)/accumulator.csv,
# accumulator.txt (the machine, both programs' output) and accumulator.png
# (bench/plot_accumulator.gp; installs gnuplot with tools/deps.sh when
# missing).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
res=$here/results
if [ $# -gt 0 ] && [ "$1" != "--" ]; then res=$1; shift; fi
[ "${1:-}" = "--" ] && shift
build=${BUILD:-$root/build-bench}
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$root" --buildtype=release -Dtests=false
fi
meson compile -C "$build" bench/bench_traj
sh "$root/tools/pyvenv.sh"
py=$root/build-py/venv/bin/python
command -v gnuplot >/dev/null 2>&1 || sh "$root/tools/deps.sh" gnuplot
mkdir -p "$res"
res=$(cd "$res" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
  model=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)
  echo "CPU: $model, $(nproc) logical CPUs; kernel: $(uname -sr); compiler: $(cc --version | head -n 1)"
  echo "per_traj.h: sha256 $(sha256sum "$root/per_traj.h" | cut -c1-16); per: git $(git -C "$root" describe --always --dirty 2>/dev/null || echo '?')"
  echo "measured: $(date -u '+%Y-%m-%d %H:%M UTC'); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "command: bench/accumulator.sh${*:+ -- $*}"
} >"$tmp/machine.txt"
cat "$tmp/machine.txt"
# Each program's output is kept, then shown; a failed check stops the run.
st=0
"$build/bench/bench_traj" --reps 7 --cpu-clock --csv "$tmp/traj.csv" "$@" \
  >"$tmp/c.txt" || st=$?
cat "$tmp/c.txt"
[ "$st" -eq 0 ] || exit "$st"
# outside the tree, so the installed package is the one imported
(cd "$tmp" && "$py" "$here/accumulator.py" "$res/accumulator.csv" --reps 7 \
  --c-csv "$tmp/traj.csv" "$@") >"$tmp/py.txt" || st=$?
cat "$tmp/py.txt"
[ "$st" -eq 0 ] || exit "$st"
cat "$tmp/machine.txt" "$tmp/c.txt" "$tmp/py.txt" >"$res/accumulator.txt"
gnuplot -e "dir='$res'" "$here/plot_accumulator.gp"
echo "wrote $res/accumulator.csv, accumulator.txt, accumulator.png"
