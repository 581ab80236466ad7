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
#   --jobs N          run N benchmark programs at once (default 1), for a
#                     machine with N idle cores or more: each op of a
#                     program becomes its own job, and their CSVs are
#                     merged. bench_memory and hyperfine still run alone
#                     (they measure the machine and wall time), and so
#                     does the samplers' threads op (two cores); the
#                     other jobs share the L3 and the DRAM, which the
#                     in-run ratios see on both sides
#   --no-report       measure only: no plots, no README update
#   --report-only     no measurement: the plots and the README from the
#                     results already in --out
# BENCH_ARGS (environment) is appended to every in-process benchmark, e.g.
#   BENCH_ARGS="--reps 7 --min-time 0.3" bench/run.sh
#
# Steps: machine.txt, bench_tree (grid: N in {2^16, 10^6, 2^24}, B in {256,
# 1024, 4096}; sample, update, add) for double and float, a sweep of more N
# for the plot (sample and update at B = 1024), bench_samplers for double
# and float, bench_replay (double), the largest sizes again with huge pages
# (double), the curves of sampling without replacement (time vs N and vs
# k), bench_memory (latency, throughput and the floor at 2^24; one leaf at
# a time against the bare exact walk and the delta walk), hyperfine.sh,
# peers_python.sh (--peer), peers.sh (--peers), plot.gp, plot_samplers.gp,
# plot_peers.gp (when peers_double.csv is there), report.py. Run it on a quiet machine:
# the figures are medians, but another busy process on a 2-core machine
# still moves them (the load average is recorded in machine.txt).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
build="" out="$here/results" readme="$here/README.md"
do_build=1 hf=1 quick="" peer=0 peers=0 dirty_ok=0 jobs=1 measure=1 report=1
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
    --jobs) jobs=$2; shift ;;
    --no-report) report=0 ;;
    --report-only) measure=0 do_build=0 ;;
    -h|--help) sed -n '/^set -eu/q;2,$p' "$0"; exit 0 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) build=$1 ;;
  esac
  shift
done
[ -n "$build" ] || build="$src/build-bench"
case "$jobs" in
  '' | *[!0-9]* | 0) echo "--jobs takes a count of at least 1" >&2; exit 2 ;;
esac
if [ "$measure" -eq 1 ] && [ "$dirty_ok" -eq 0 ] && [ -z "$quick" ] &&
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
  meson compile -C "$build" -j "$(( jobs > 2 ? jobs : 2 ))"
fi
b="$build/bench"

if [ "$measure" -eq 1 ]; then
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
  echo "command: bench/run.sh${quick:+ --quick}$([ "$jobs" -gt 1 ] && echo " --jobs $jobs")${BENCH_ARGS:+ (BENCH_ARGS=$BENCH_ARGS)}"
} > "$out/machine.txt"
cat "$out/machine.txt"

# Alone first: bench_memory measures the machine itself (latency and
# throughput, and the floor beside per.h at 2^24).
echo "== bench_memory (double): memory latency and throughput, the floor at 2^24"
# shellcheck disable=SC2086 # $args: one word an option
"$b/bench_memory_double" --op chase,gather,sample,update $args \
  --csv "$out/memory_double.csv" |
  tee "$out/memory_double.txt"

# The other benchmark runs, as jobs: one per program, or with --jobs one
# per op of each program. A job is a script in $steps that writes its
# CSV and its console output (parts with --jobs, merged below).
steps="$build/bench-jobs"
rm -rf "$steps"
mkdir -p "$steps"
: >"$steps/parts"
njob=0
quote() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
# bench NAME PROGRAM OPS [ARGS...]: PROGRAM --op OPS $args ARGS, into
# $out/NAME.csv and $out/NAME.txt.
bench() {
  name=$1 prog=$2 ops=$3
  shift 3
  if [ "$jobs" -gt 1 ]; then split=$(echo "$ops" | tr , ' '); else split=$ops; fi
  for op in $split; do
    njob=$((njob + 1))
    if [ "$jobs" -gt 1 ]; then
      dst="$steps/$name.$op" && echo "$name $op" >>"$steps/parts"
    else
      dst="$out/$name"
    fi
    {
      echo "echo '== $name ($op)'"
      printf '%s --op %s' "$(quote "$b/$prog")" "$(quote "$op")"
      # shellcheck disable=SC2086 # $args: one word an option
      for a in $args "$@"; do printf ' %s' "$(quote "$a")"; done
      printf ' --csv %s | tee %s\n' "$(quote "$dst.csv")" "$(quote "$dst.txt")"
    } >"$steps/$(printf %03d "$njob").sh"
  done
}

# Longest first, so that --jobs ends together.
for real in double float; do
  bench "tree_$real" "bench_tree_$real" sample,update,add,addrun,cycle
done
if [ -n "$quick" ]; then sweep="2^10,2^12"; else sweep="2^10,2^12,2^14,2^18,2^22,2^26"; fi
if [ -n "$quick" ]; then cn="1e3,1e4"; ck="1,16,256"; else
  cn="1e3,1e4,1e5,1e6,1e7,1e8"; ck="1,4,16,64,256,1024,4096,16384,64000"; fi
# The curves of sampling without replacement (double): time vs N, vs k.
bench curve_cat_n bench_samplers_double cat --n "$cn" --b 1024
bench curve_k bench_samplers_double cat,swap --n 64000 --swap-n 64000 --b "$ck"
for real in double float; do
  bench "sweep_$real" "bench_tree_$real" sample,update --b 1024 --n "$sweep"
  # threads runs on both cores: with --jobs it runs alone after the jobs
  if [ "$jobs" -gt 1 ]; then sops=swap,cat,iid; else sops=swap,cat,iid,threads; fi
  bench "samplers_$real" "bench_samplers_$real" "$sops"
done
# One leaf at a time: per_tree_set beside the bare exact walk, the delta
# walk and stores alone (bench_memory --op set), in cache and beyond it.
if [ -n "$quick" ]; then sn="1000,4096"; else sn="2^10,2^16,1e6,2^24"; fi
bench memory_set_double bench_memory_double set --n "$sn"
mkdir -p "$build/bench-save"
bench replay_double bench_replay_double snapshot,save,seq --dir "$build/bench-save"
# The largest sizes again with huge pages (2 MiB aligned, madvise).
if [ -n "$quick" ]; then hn=""; else hn="--n 2^24"; fi
# shellcheck disable=SC2086 # $hn: one word an option
bench huge_tree_double bench_tree_double sample,update,addrun --huge --b 1024 $hn
bench huge_samplers_double bench_samplers_double cat,iid --huge

if [ "$jobs" -gt 1 ]; then
  echo "== $njob jobs, $jobs at once"
  # One log per job, printed in order once all have ended.
  find "$steps" -name '*.sh' | sort |
    xargs -P "$jobs" -n 1 sh -c 'sh "$1" >"$1.log" 2>&1' sh || {
    cat "$steps"/*.log
    echo "run.sh: a benchmark job failed" >&2
    exit 1
  }
  cat "$steps"/*.log
  # Merge the parts in op order: one header per CSV.
  for name in $(cut -d' ' -f1 "$steps/parts" | uniq); do
    first=1
    for op in $(sed -n "s/^$name //p" "$steps/parts"); do
      if [ "$first" -eq 1 ]; then cat "$steps/$name.$op.csv"; first=0
      else tail -n +2 "$steps/$name.$op.csv"; fi
    done >"$out/$name.csv"
    for op in $(sed -n "s/^$name //p" "$steps/parts"); do
      cat "$steps/$name.$op.txt"
    done >"$out/$name.txt"
  done
  for real in double float; do
    echo "== samplers_$real (threads), alone: it uses two cores"
    # shellcheck disable=SC2086 # $args: one word an option
    "$b/bench_samplers_$real" --op threads $args \
      --csv "$steps/threads_$real.csv" | tee "$steps/threads_$real.txt"
    tail -n +2 "$steps/threads_$real.csv" >>"$out/samplers_$real.csv"
    cat "$steps/threads_$real.txt" >>"$out/samplers_$real.txt"
  done
else
  for f in $(find "$steps" -name '*.sh' | sort); do sh "$f"; done
fi
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
  pj=""
  [ "$jobs" -gt 1 ] && pj="--jobs $jobs"
  [ "$dirty_ok" -eq 1 ] && pj="$pj --allow-dirty"
  # shellcheck disable=SC2086 # one word an option
  sh "$here/peers.sh" $pj "$out" -- $args
fi
fi # measure

[ "$report" -eq 1 ] || exit 0
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
  # --quick measures the peers at B = 16 and 64 only (bench_peers.cpp)
  if [ -n "$quick" ]; then pbs="; bs='16 64'"; else pbs=""; fi
  gnuplot -e "dir='$out'$pbs" "$here/plot_peers.gp"
  echo "wrote $out/peers.png"
fi

echo "== report"
python3 "$here/report.py" "$out" "$readme"
