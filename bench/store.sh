#!/bin/sh
# bench/store.sh [RESULTS_DIR] [-- ARGS]: the trajectory store
# (per_store.h) on this machine's disk. Builds bench_store (in BUILD,
# default build-bench: configured as bench/run.sh configures it when it
# is not yet) and runs it with its stores in STORE_DIR (default
# build-bench/bench-store.tmp: the disk measured; removed after), then
# plots. ARGS go to bench_store (--gib G, default 1: the stores; --large-gib
# G, default 10: the larger checkpoint; about 15 minutes and 3 x G +
# 2 x large G of free disk at the defaults). Writes RESULTS_DIR (default
# bench/results)/store.csv, store.txt (the machine, the disk's file
# system, the program's output) and store.png (bench/plot_store.gp;
# installs gnuplot with tools/deps.sh when missing). Then, unless
# PEERS=0, the Python peers (bench/store_peers.py): per.TrajectoryStore
# against TorchRL's LazyMemmapStorage + PrioritizedSampler and flashbax's
# Vault, in a virtualenv (VENV, default /tmp/per-store-venv) with numpy,
# torchrl 0.14.1 (and the torch it asks for: several GB of wheels),
# flashbax and jax[cpu] from PyPI, then this working tree's per package;
# a peer that fails to install is left out, and the run says so. Its
# replays are --gib's size (1024 MiB a GiB; 8 MiB with --quick) in
# STORE_DIR, PEERS_ARGS added to its arguments (e.g. PEERS_ARGS="--reps
# 9"); it writes RESULTS_DIR/store_peers.csv, store_peers.txt and
# store_peers.png (bench/plot_store_peers.gp): minutes (flashbax writes
# tens of MB/s), about 5 GB of free disk and 6 GB of RAM a GiB of --gib.
# Needs python3 with the venv module and headers, and network access to
# PyPI.
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
# a build made before bench_store existed learns of it by reconfiguring
meson compile -C "$build" bench/bench_store ||
  { meson setup --reconfigure "$build" "$root" &&
    meson compile -C "$build" bench/bench_store; }
command -v gnuplot >/dev/null 2>&1 || sh "$root/tools/deps.sh" gnuplot
store=${STORE_DIR:-$build/bench-store.tmp}
mkdir -p "$res"
res=$(cd "$res" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
  model=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)
  echo "CPU: $model, $(nproc) logical CPUs; RAM: $(free -g | awk '/^Mem:/ {print $2}') GiB; kernel: $(uname -sr); compiler: $(cc --version | head -n 1)"
  mkdir -p "$(dirname "$store")"
  echo "disk: $(df -hT "$(dirname "$store")" | awk 'NR == 2 {print $1 ", " $2 ", " $3 " (" $5 " free)"}')"
  echo "per_store.h: sha256 $(sha256sum "$root/per_store.h" | cut -c1-16); per: git $(git -C "$root" describe --always --dirty 2>/dev/null || echo '?')"
  echo "measured: $(date -u '+%Y-%m-%d %H:%M UTC'); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "command: bench/store.sh${*:+ -- $*}"
} >"$tmp/machine.txt"
cat "$tmp/machine.txt"
st=0
"$build/bench/bench_store" --dir "$store" --csv "$res/store.csv" "$@" \
  >"$tmp/c.txt" || st=$?
cat "$tmp/c.txt"
[ "$st" -eq 0 ] || exit "$st"
cat "$tmp/machine.txt" "$tmp/c.txt" >"$res/store.txt"
gnuplot -e "dir='$res'" "$here/plot_store.gp"
echo "wrote $res/store.csv, store.txt, store.png"

[ "${PEERS:-1}" = 0 ] && exit 0
# the Python peers, the same sizes: --gib G as --mib, --quick as --quick
peer_args=
while [ $# -gt 0 ]; do
  case $1 in
    --quick) peer_args="$peer_args --quick" ;;
    --gib) if [ $# -gt 1 ]; then
             peer_args="$peer_args --mib $(awk "BEGIN { print $2 * 1024 }")"
             shift
           fi ;;
  esac
  shift
done
venv=${VENV:-/tmp/per-store-venv}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q numpy
"$venv/bin/pip" install -q torchrl==0.14.1 ||
  echo "store: torchrl did not install; it is left out" >&2
"$venv/bin/pip" install -q flashbax 'jax[cpu]' ||
  echo "store: flashbax or jax[cpu] did not install; flashbax is left out" >&2
"$venv/bin/pip" install -q --force-reinstall --no-deps "$root"
PER_GIT=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
export PER_GIT
# outside the tree, so the installed package is the one imported
# shellcheck disable=SC2086 # peer_args and PEERS_ARGS are word lists
(cd "$res" && "$venv/bin/python" "$here/store_peers.py" \
  "$res/store_peers.csv" --dir "$store" $peer_args ${PEERS_ARGS:-})
gnuplot -e "dir='$res'" "$here/plot_store_peers.gp"
echo "wrote $res/store_peers.csv, store_peers.txt, store_peers.png"
