#!/bin/sh
# bench/peers_python.sh [RESULTS_DIR] [-- ARGS]: per's Python package against
# cpprb's and TorchRL's PrioritizedReplayBuffer (bench/peers_python.py, ARGS
# go to it). Makes a virtualenv (VENV, default /tmp/per-bench-venv), installs
# numpy, cpprb 11.0.0 and, unless TORCHRL=0, torchrl 0.14.1 with the torch it
# asks for (several GB of wheels) from PyPI, then this working tree's per
# package (pip install ., meson-python). A peer that fails to install is left
# out of the run, and the run says so. Needs python3 with the venv module
# and headers (Debian: python3-venv, python3-dev) and network access to PyPI.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
res=$here/results
if [ $# -gt 0 ] && [ "$1" != "--" ]; then res=$1; shift; fi
[ "${1:-}" = "--" ] && shift
venv=${VENV:-/tmp/per-bench-venv}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q numpy cpprb==11.0.0 ||
  echo "peers_python: cpprb did not install; it is left out" >&2
if [ "${TORCHRL:-1}" != 0 ]; then
  "$venv/bin/pip" install -q torchrl==0.14.1 ||
    echo "peers_python: torchrl did not install; it is left out" >&2
fi
"$venv/bin/pip" install -q --force-reinstall --no-deps "$root"
mkdir -p "$res"
PER_GIT=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
export PER_GIT
# outside the tree, so the installed package is the one imported
cd "$res"
"$venv/bin/python" "$here/peers_python.py" "$res" "$@"
