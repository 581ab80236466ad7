#!/bin/sh
# bench/versions.sh REV [RESULTS_DIR] [-- ARGS]: this checkout's per.h
# against per.h as it was at git revision REV (bench_versions.c: the
# buffer's training step and update from TD errors, both per.h in one
# process, interleaved; ARGS go to it, e.g. --n 1000000 --b 256 --reps 15).
# Both sides are built here with the benchmarks' flags (-O3 -march=native
# -ffp-contract=off -DNDEBUG; CC, default cc) and the same PER_REAL (double,
# or PER_REAL=float in the environment). Where each side's code lands
# moves its figures by up to 20 % on one machine (the same per.h on both
# sides measured 0.87x one way round and 1.20x the other), so the program
# is linked twice, each side first once, and run twice: report.py takes
# the geometric mean of the two ratios. Writes versions_REAL_1.csv (this
# side linked first), versions_REAL_2.csv, their .txt and
# versions_machine.txt to RESULTS_DIR (default bench/results). Needs git
# and the revision in this clone.
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
$cc "$work/main.o" "$work/this.o" "$work/other.o" -o "$work/bv_1" -lm
$cc "$work/main.o" "$work/other.o" "$work/this.o" -o "$work/bv_2" -lm
load=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
for k in 1 2; do
  "$work/bv_$k" --csv "$res/versions_${real}_$k.csv" "$@" |
    tee "$res/versions_${real}_$k.txt"
done
{
  cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //')
  echo "CPU: ${cpu:-unknown}, $(nproc) logical CPUs"
  echo "compiler: $($cc --version | head -n 1)"
  echo "this: git $(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown); other: git $sha"
  echo "measured: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "load average before: $load"
  echo "arguments: ${*:-(defaults)}"
} > "$res/versions_machine.txt"
echo "versions.sh: wrote $res/versions_${real}_1.csv and _2.csv"
