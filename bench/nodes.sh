#!/bin/sh
# bench/nodes.sh [RESULTS_DIR] [-- ARGS]: per.ReplayBuffer with float
# nodes against double nodes (bench/nodes.py: memory per item and the
# time of a training step, both node types in one run). Builds the
# Python package (tools/pyvenv.sh: build-py/venv, from this working
# tree). ARGS (--capacities, --reps, --min-time) go to bench/nodes.py.
# Writes RESULTS_DIR (default bench/results)/nodes.csv, nodes.txt (the
# machine and the table) and nodes.png (bench/plot_nodes.gp; installs
# gnuplot with tools/deps.sh when missing).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
res=$here/results
if [ $# -gt 0 ] && [ "$1" != "--" ]; then res=$1; shift; fi
[ "${1:-}" = "--" ] && shift
sh "$root/tools/pyvenv.sh"
py=$root/build-py/venv/bin/python
command -v gnuplot >/dev/null 2>&1 || sh "$root/tools/deps.sh" gnuplot
mkdir -p "$res"
res=$(cd "$res" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
  model=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)
  echo "CPU: $model, $(nproc) logical CPUs; kernel: $(uname -sr); python: $("$py" -c 'import sys; print(sys.version.split()[0])')"
  echo "per: git $(git -C "$root" describe --always --dirty 2>/dev/null || echo '?')"
  echo "measured: $(date -u '+%Y-%m-%d %H:%M UTC'); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "command: bench/nodes.sh${*:+ -- $*}"
} >"$tmp/machine.txt"
cat "$tmp/machine.txt"
# outside the tree, so the installed package is the one imported
st=0
(cd "$tmp" && "$py" "$here/nodes.py" "$res/nodes.csv" "$@") >"$tmp/py.txt" || st=$?
cat "$tmp/py.txt"
[ "$st" -eq 0 ] || exit "$st"
cat "$tmp/machine.txt" "$tmp/py.txt" >"$res/nodes.txt"
gnuplot -e "dir='$res'" "$here/plot_nodes.gp"
echo "wrote $res/nodes.csv, nodes.txt, nodes.png"
