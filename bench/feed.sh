#!/bin/sh
# bench/feed.sh BUILD_DIR [RESULTS_DIR] [-- ARGS]: Ape-X's ingestion with
# K = 1, 2, 4 and 8 actors (bench_feed under mpirun -np K + 2, ARGS go to
# it): items stored per second and the learner's step, per_mpi_feed
# against lockstep per_mpi, in the same run. Writes feed.csv and
# feed_machine.txt to RESULTS_DIR (default bench/results). Needs a build
# with MPI (meson -Dmpi=enabled); more ranks than cores are allowed
# (--oversubscribe), so on a small machine the figures are per rank of
# a shared CPU: the machine file says how many there are.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:?usage: bench/feed.sh BUILD_DIR [RESULTS_DIR] [-- ARGS]}
shift
res=$here/results
if [ $# -gt 0 ] && [ "$1" != "--" ]; then res=$1; shift; fi
[ "${1:-}" = "--" ] && shift
exe=$build/bench/bench_feed
[ -x "$exe" ] || { echo "feed.sh: no $exe (configure with -Dmpi=enabled)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
mkdir -p "$res"
csv=$res/feed.csv
echo "k,work_us,send,mode,items_s,steps_s,step_us,waited" > "$csv"
: > "$res/feed.txt"
load=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
for k in 1 2 4 8; do
  mpirun --oversubscribe -np $((k + 2)) "$exe" --csv "$csv" "$@" |
    tee -a "$res/feed.txt"
done
{
  cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //')
  echo "CPU: ${cpu:-unknown}, $(nproc) logical CPUs"
  echo "MPI: $(mpirun --version 2>/dev/null | head -n 1)"
  echo "per: git $(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)"
  echo "measured: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "load average before: $load"
  echo "arguments: ${*:-(defaults)}"
} > "$res/feed_machine.txt"
echo "feed.sh: wrote $csv"
