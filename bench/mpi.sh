#!/bin/sh
# bench/mpi.sh BUILD_DIR [RESULTS_DIR] [-- ARGS]: per_mpi.h's global sample
# + update per batch on 1, 2 and 4 ranks (bench_mpi, ARGS go to it: by
# default N = 2^20 items per rank, B = 1024, 64-byte items), each against
# one per_buffer of the same total size in the same run. Writes mpi.csv
# and mpi_machine.txt to RESULTS_DIR (default bench/results) for
# bench/report.py. Needs a build with MPI (meson -Dmpi=enabled); runs as
# root where Open MPI is told it may (OMPI_ALLOW_RUN_AS_ROOT).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:?usage: bench/mpi.sh BUILD_DIR [RESULTS_DIR] [-- ARGS]}
shift
res=$here/results
if [ $# -gt 0 ] && [ "$1" != "--" ]; then res=$1; shift; fi
[ "${1:-}" = "--" ] && shift
exe=$build/bench/bench_mpi
[ -x "$exe" ] || { echo "mpi.sh: no $exe (configure with -Dmpi=enabled)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
mkdir -p "$res"
csv=$res/mpi.csv
echo "w,n,b,item,rounds,total_us,coll_us,local_us,single_us" > "$csv"
load=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
for w in 1 2 4; do
  mpirun --oversubscribe -np "$w" "$exe" --csv "$csv" "$@"
done
{
  cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //')
  echo "CPU: ${cpu:-unknown}, $(nproc) logical CPUs"
  echo "MPI: $(mpirun --version 2>/dev/null | head -n 1)"
  echo "per: git $(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)"
  echo "measured: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "load average before: $load"
  echo "arguments: ${*:-(defaults)}"
} > "$res/mpi_machine.txt"
echo "mpi.sh: wrote $csv"
