#!/bin/sh
# bench/versions.sh REV [RESULTS_DIR] [-- ARGS]: this checkout's per.h
# against per.h as it was at git revision REV (bench_versions.c: the
# buffer's training step and update from TD errors, both per.h in one
# process, interleaved; ARGS go to it, e.g. --n 1000000 --b 256 --reps 15).
# Both sides are built here with the benchmarks' flags (-O3 -march=native
# -ffp-contract=off -DNDEBUG; CC, default cc) and the same PER_REAL (double,
# or PER_REAL=float in the environment). Writes versions_REAL.csv,
# versions_REAL.txt and versions_machine.txt to RESULTS_DIR (default
# bench/results). Needs git and the revision in this clone.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
rev=${1:?usage: bench/versions.sh REV [RESULTS_DIR] [-- ARGS]}
shift
res=$here/results
if [ $# -gt 0 ] && [ "$1" != "--" ]; then res=$1; shift; fi
[ "${1:-}" = "--" ] && shift
cc=${CC:-cc}
real=${PER_REAL:-double}
sha=$(git -C "$root" rev-parse --short "$rev^{commit}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/other" "$res"
git -C "$root" show "$sha:per.h" > "$work/other/per.h"
flags="-std=c99 -O3 -ffp-contract=off -DNDEBUG -DPER_REAL=$real"
if $cc -march=native -E -x c /dev/null > /dev/null 2>&1; then
  flags="$flags -march=native"
fi
# The other side finds its per.h first; this side and the driver, the
# checkout's. A per.h before 0.4 calls the C library's pow: -lm.
$cc $flags -I"$work/other" -I"$root" -DVS_SIDE=vs_other \
  -c "$here/versions_side.c" -o "$work/other.o"
$cc $flags -I"$root" -DVS_SIDE=vs_this -c "$here/versions_side.c" \
  -o "$work/this.o"
$cc $flags -I"$root" -DBENCH_CFLAGS="\"$flags\"" -c "$here/bench_versions.c" \
  -o "$work/main.o"
$cc "$work/main.o" "$work/this.o" "$work/other.o" -o "$work/bench_versions" -lm
load=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
"$work/bench_versions" --csv "$res/versions_$real.csv" "$@" |
  tee "$res/versions_$real.txt"
{
  cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //')
  echo "CPU: ${cpu:-unknown}, $(nproc) logical CPUs"
  echo "compiler: $($cc --version | head -n 1)"
  echo "this: git $(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown); other: git $sha"
  echo "measured: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "load average before: $load"
  echo "arguments: ${*:-(defaults)}"
} > "$res/versions_machine.txt"
echo "versions.sh: wrote $res/versions_$real.csv"
