#!/bin/sh
# The pixel example: python/examples/dqn_atari.py, DQN with per.FrameBuffer
# on an Arcade Learning Environment game (ale-py from PyPI, its ROMs
# included), in build-py/venv (tools/pyvenv.sh builds the package).
# Arguments go to the example (--help); CI runs it with --smoke, which
# exits 1 when a rebuilt stack is not one the environment showed.
set -e
cd "$(dirname "$0")/.."
sh tools/pyvenv.sh ale-py
root=$(pwd)
cd build-py
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
  "$root/build-py/venv/bin/python" "$root/python/examples/dqn_atari.py" "$@"
