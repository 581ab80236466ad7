#!/bin/sh
# bench/run.sh [options] [BUILD_DIR]: regenerate every benchmark figure,
# the plot and the table in bench/README.md, in one command.
#
#   bench/run.sh                   configure + build build-bench (release),
#                                  then run everything (about 7 minutes)
#   bench/run.sh /tmp/b            same with another build directory
#   meson compile -C BUILD bench   the same from an existing build
#
# Options:
#   --no-build        use BUILD_DIR as it is (do not configure or compile)
#   --out DIR         results directory (default bench/results)
#   --readme FILE     README to update (default bench/README.md; - = print)
#   --skip-hyperfine  no whole-program timings
#   --peer            also per's Python package against cpprb's and
#                     TorchRL's PrioritizedReplayBuffer (peers_python.sh:
#                     a virtualenv from PyPI; needs network)
#   --peers           also per.h against TorchRL's and cpprb's C++ sum
#                     trees in one program (peers.sh: fetches their
#                     headers from PyPI; needs network; peers_*.csv)
#   --quick           tiny sizes and short loops: checks the pipeline only
#                     (give it --out and --readme elsewhere)
#   --allow-dirty     measure a per.h with uncommitted changes (refused
#                     otherwise, except with --quick: published figures
#                     come from a committed per.h; machine.txt says which)
# BENCH_ARGS (environment) is appended to every in-process benchmark, e.g.
#   BENCH_ARGS="--reps 7 --min-time 0.3" bench/run.sh
#
# Steps: machine.txt, bench_tree (grid: N in {2^16, 10^6, 2^24}, B in {256,
# 1024, 4096}; sample, update, add) for double and float, a sweep of more N
# for the plot (sample and update at B = 1024), bench_samplers for double
# and float, bench_replay (double), the largest sizes again with huge pages
# (double), the curves of sampling without replacement (time vs N and vs
# k), bench_memory (latency, throughput and the floor at 2^24), hyperfine.sh,
# peers_python.sh (--peer), peers.sh (--peers), plot.gp, plot_samplers.gp,
# plot_peers.gp (when peers_double.csv is there), report.py. Run it on a quiet machine:
# the figures are medians, but another busy process on a 2-core machine
# still moves them (the load average is recorded in machine.txt).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
build="" out="$here/results" readme="$here/README.md"
do_build=1 hf=1 quick="" peer=0 peers=0 dirty_ok=0
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) do_build=0 ;;
    --out) out=$2; shift ;;
    --readme) readme=$2; shift ;;
    --skip-hyperfine) hf=0 ;;
    --peer) peer=1 ;;
    --peers) peers=1 ;;
    --quick) quick="--quick" ;;
    --allow-dirty) dirty_ok=1 ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) build=$1 ;;
  esac
  shift
done
[ -n "$build" ] || build="$src/build-bench"
if [ "$dirty_ok" -eq 0 ] && [ -z "$quick" ] &&
  git -C "$src" rev-parse --git-dir >/dev/null 2>&1 &&
  ! git -C "$src" diff --quiet HEAD -- per.h; then
  echo "run.sh: per.h has uncommitted changes; the figures must come from a" \
    "committed per.h (commit it first, or --allow-dirty)" >&2
  exit 2
fi
mkdir -p "$out"
args="$quick ${BENCH_ARGS:-}"

if [ "$do_build" -eq 1 ]; then
  if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$src" --buildtype=release -Dtests=false
  fi
  meson compile -C "$build" -j 2
fi
b="$build/bench"

# The machine, the build, and which per.h was measured.
{
  model=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)
  cpus=$(nproc)
  mem=$(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
  fam=$(lscpu | sed -n 's/^CPU family:[[:space:]]*//p' | head -n 1)
  mdl=$(lscpu | sed -n 's/^Model:[[:space:]]*//p' | head -n 1)
  hyp=$(lscpu | sed -n 's/^Hypervisor vendor:[[:space:]]*//p' | head -n 1)
  echo "CPU: $model (family $fam, model $mdl${hyp:+, $hyp guest}), $cpus logical CPUs ($(lscpu | sed -n 's/^Thread(s) per core:[[:space:]]*//p') thread(s) per core); caches: L1d $(lscpu | sed -n 's/^L1d cache:[[:space:]]*//p'), L2 $(lscpu | sed -n 's/^L2 cache:[[:space:]]*//p'), L3 $(lscpu | sed -n 's/^L3 cache:[[:space:]]*//p')"
  echo "memory: $mem; transparent huge pages: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo unknown)"
  echo "kernel: $(uname -sr); compiler: $(cc --version | head -n 1)"
  echo "flags (per.h and baselines alike): $("$b/bench_tree_double" --quick --op none ${BENCH_ARGS:-} | sed -n 's/^flags: //p')"
  echo "per.h: sha256 $(sha256sum "$src/per.h" | cut -c1-16), git $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$src" diff --quiet HEAD -- per.h 2>/dev/null || echo ' + uncommitted changes')"
  echo "measured: $(date -u '+%Y-%m-%d %H:%M UTC'); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "command: bench/run.sh${quick:+ --quick}${BENCH_ARGS:+ (BENCH_ARGS=$BENCH_ARGS)}"
} > "$out/machine.txt"
cat "$out/machine.txt"

for real in double float; do
  echo "== bench_tree ($real)"
  "$b/bench_tree_$real" $args --csv "$out/tree_$real.csv" | tee "$out/tree_$real.txt"
done
for real in double float; do
  echo "== bench_tree sweep for the plot ($real)"
  if [ -n "$quick" ]; then sweep="2^10,2^12"; else sweep="2^10,2^12,2^14,2^18,2^22,2^26"; fi
  "$b/bench_tree_$real" $args --op sample,update --b 1024 --n "$sweep" \
    --csv "$out/sweep_$real.csv" | tee "$out/sweep_$real.txt"
done
for real in double float; do
  echo "== bench_samplers ($real)"
  "$b/bench_samplers_$real" $args --csv "$out/samplers_$real.csv" | tee "$out/samplers_$real.txt"
done
echo "== sampling without replacement, curves for the plot (double)"
if [ -n "$quick" ]; then cn="1e3,1e4"; ck="1,16,256"; else
  cn="1e3,1e4,1e5,1e6,1e7,1e8"; ck="1,4,16,64,256,1024,4096,16384,64000"; fi
"$b/bench_samplers_double" $args --op cat --n "$cn" --b 1024 \
  --csv "$out/curve_cat_n.csv" | tee "$out/curve_cat_n.txt"
"$b/bench_samplers_double" $args --op cat,swap --n 64000 --swap-n 64000 \
  --b "$ck" --csv "$out/curve_k.csv" | tee "$out/curve_k.txt"
echo "== bench_memory (double): memory latency and throughput, the floor at 2^24"
"$b/bench_memory_double" $args --csv "$out/memory_double.csv" |
  tee "$out/memory_double.txt"
echo "== bench_replay (double): snapshots, saves, sequence steps"
mkdir -p "$build/bench-save"
"$b/bench_replay_double" $args --dir "$build/bench-save" \
  --csv "$out/replay_double.csv" | tee "$out/replay_double.txt"
echo "== huge pages (--huge: 2 MiB aligned, madvise(MADV_HUGEPAGE)), double"
if [ -n "$quick" ]; then hn=""; else hn="--n 2^24"; fi
"$b/bench_tree_double" $args --huge --op sample,update,addrun --b 1024 $hn \
  --csv "$out/huge_tree_double.csv" | tee "$out/huge_tree_double.txt"
"$b/bench_samplers_double" $args --huge --op cat,iid \
  --csv "$out/huge_samplers_double.csv" | tee "$out/huge_samplers_double.txt"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/machine.txt"

if [ "$hf" -eq 1 ]; then
  echo "== hyperfine"
  if [ -n "$quick" ]; then HF_RUNS=2 sh "$here/hyperfine.sh" "$build" "$out"
  else sh "$here/hyperfine.sh" "$build" "$out"; fi
fi

if [ "$peer" -eq 1 ]; then
  echo "== peer: per from Python against cpprb and TorchRL"
  sh "$here/peers_python.sh" "$out"
fi

if [ "$peers" -eq 1 ]; then
  echo "== peers: TorchRL and cpprb sum trees (bench_peers)"
  # shellcheck disable=SC2086 # one word an option
  sh "$here/peers.sh" "$out" -- $args
fi

echo "== plot"
if ! command -v gnuplot >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq gnuplot-nox >/dev/null
fi
gnuplot -e "dir='$out'" "$here/plot.gp"
gnuplot -e "dir='$out'" "$here/plot_samplers.gp"
echo "wrote $out/tree.png $out/samplers.png"
if [ -f "$out/peers_double.csv" ]; then
  gnuplot -e "dir='$out'" "$here/plot_peers.gp"
  echo "wrote $out/peers.png"
fi

echo "== report"
python3 "$here/report.py" "$out" "$readme"
