#!/bin/sh
# bench/server.sh [RESULTS_DIR] [-- ARGS]: the replay server on localhost
# against Reverb (bench/server.py; ARGS go to it, e.g. --quick, --reps R,
# --secs S). Builds per-server (in BUILD, default build-bench: configured
# as bench/run.sh configures it when it is not yet; needs libzmq, which
# tools/deps.sh zmq installs) and per's package with pyzmq in a
# virtualenv (VENV, default /tmp/per-server-venv), and dm-reverb 0.14.0
# with the TensorFlow 2.15.0 it pins in another (REVERB_VENV, default
# /tmp/per-reverb-venv; about 600 MB of wheels). When Reverb does not
# install, the run leaves it out and says so. Writes RESULTS_DIR (default
# bench/results)/server.csv, server_runs.csv, server.txt (the machine and
# the program's output) and server.png (bench/plot_server.gp; installs
# gnuplot when missing). About 20 minutes at the defaults, 2 GB of RAM.
# Needs python3 with the venv module and headers (Debian: python3-venv,
# python3-dev) and network access to PyPI.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
res=$here/results
if [ $# -gt 0 ] && [ "$1" != "--" ]; then res=$1; shift; fi
[ "${1:-}" = "--" ] && shift
sh "$root/tools/deps.sh" zmq
build=${BUILD:-$root/build-bench}
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$root" --buildtype=release -Dtests=false
fi
# a build made before libzmq was installed learns of it by reconfiguring
meson compile -C "$build" server/per-server ||
  { meson setup --reconfigure "$build" "$root" &&
    meson compile -C "$build" server/per-server; }
command -v gnuplot >/dev/null 2>&1 || sh "$root/tools/deps.sh" gnuplot
venv=${VENV:-/tmp/per-server-venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q numpy pyzmq
"$venv/bin/pip" install -q --force-reinstall --no-deps "$root"
rvenv=${REVERB_VENV:-/tmp/per-reverb-venv}
reverb=
[ -x "$rvenv/bin/python" ] || python3 -m venv "$rvenv"
if "$rvenv/bin/pip" install -q dm-reverb==0.14.0 tensorflow==2.15.0 'numpy<2'; then
  reverb=$rvenv/bin/python
else
  echo "server: dm-reverb 0.14.0 did not install; Reverb is left out" >&2
fi
mkdir -p "$res"
res=$(cd "$res" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
  model=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)
  echo "CPU: $model, $(nproc) logical CPUs; RAM: $(free -g | awk '/^Mem:/ {print $2}') GiB; kernel: $(uname -sr); compiler: $(cc --version | head -n 1)"
  echo "libzmq $(pkg-config --modversion libzmq); $("$venv/bin/python" -c 'import sys, zmq; print("Python", sys.version.split()[0] + ", pyzmq", zmq.__version__)')"
  [ -z "$reverb" ] || echo "Reverb: $("$reverb" -c 'import importlib.metadata as m; print("dm-reverb", m.version("dm-reverb") + ", tensorflow", m.version("tensorflow"))')"
  echo "per: git $(git -C "$root" describe --always --dirty 2>/dev/null || echo '?')"
  echo "measured: $(date -u '+%Y-%m-%d %H:%M UTC'); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "command: bench/server.sh${*:+ -- $*}"
} >"$tmp/machine.txt"
cat "$tmp/machine.txt"
# outside the tree, so the installed package is the one imported; Reverb's
# and TensorFlow's start-up chatter (stderr) is left out of server.txt
st=0
(cd "$tmp" && "$venv/bin/python" "$here/server.py" --out "$res" \
  --per-server "$build/server/per-server" --reverb-python "$reverb" "$@") \
  >"$tmp/run.txt" 2>"$tmp/err.txt" || st=$?
cat "$tmp/run.txt"
if [ "$st" -ne 0 ]; then
  tail -n 40 "$tmp/err.txt" >&2
  exit "$st"
fi
cat "$tmp/machine.txt" "$tmp/run.txt" >"$res/server.txt"
gnuplot -e "dir='$res'" "$here/plot_server.gp"
echo "wrote $res/server.csv, server_runs.csv, server.txt, server.png"
