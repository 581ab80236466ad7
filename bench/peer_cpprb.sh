#!/bin/sh
# bench/peer_cpprb.sh [RESULTS_DIR]: the optional peer comparison. Makes a
# virtualenv (VENV, default /tmp/per-bench-venv), installs cpprb and numpy
# from PyPI into it, and runs peer_cpprb.py: cpprb's PrioritizedReplayBuffer
# sample + update_priorities at N in {2^16, 10^6, 2^24}, B = 1024, printed
# beside per.h's buffer cycle from RESULTS_DIR/tree_double.csv (run
# bench/run.sh first). Needs python3 with the venv module (Debian:
# python3-venv) and network access to PyPI.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
res=${1:-$here/results}
venv=${VENV:-/tmp/per-bench-venv}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q cpprb numpy
"$venv/bin/python" -c 'import cpprb' # fails loudly when the install did not work
"$venv/bin/python" "$here/peer_cpprb.py" "$res" | tee "$res/peer_cpprb.txt"
