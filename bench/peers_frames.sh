#!/bin/sh
# bench/peers_frames.sh [RESULTS_DIR] [-- ARGS]: pixel replay from Python,
# per.FrameBuffer against cpprb's next_of + stack_compress and, unless
# SB3=0, stable-baselines3's ReplayBuffer(optimize_memory_usage=True)
# (bench/peers_frames.py; ARGS go to it). Makes a virtualenv (VENV,
# default /tmp/per-frames-venv) and installs numpy, cpprb 11.0.0 and
# stable-baselines3 (with the torch it asks for: several GB of wheels)
# from PyPI, then this working tree's per package. A peer that fails to
# install is left out of the run, and the run says so.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
res=$here/results
if [ $# -gt 0 ] && [ "$1" != "--" ]; then res=$1; shift; fi
[ "${1:-}" = "--" ] && shift
venv=${VENV:-/tmp/per-frames-venv}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q numpy cpprb==11.0.0 ||
  echo "peers_frames: cpprb did not install; it is left out" >&2
if [ "${SB3:-1}" != 0 ]; then
  "$venv/bin/pip" install -q stable-baselines3 ||
    echo "peers_frames: stable-baselines3 did not install; it is left out" >&2
fi
"$venv/bin/pip" install -q --force-reinstall --no-deps "$root"
mkdir -p "$res"
# outside the tree, so the installed package is the one imported
cd "$res"
OMP_NUM_THREADS=1 "$venv/bin/python" "$here/peers_frames.py" "$res" "$@"
