#!/bin/sh
# The Python example: python/examples/dqn_cartpole.py, DQN with per's
# buffer on Gymnasium's CartPole-v1, in build-py/venv (tools/pyvenv.sh
# builds the package and installs gymnasium from PyPI). Ends with
# "solved at step N ..." (exit 0) or "not solved in N steps ..." (exit 1).
# Arguments go to the example (--help).
set -e
cd "$(dirname "$0")/.."
sh tools/pyvenv.sh gymnasium
root=$(pwd)
cd build-py
"$root/build-py/venv/bin/python" "$root/python/examples/dqn_cartpole.py" "$@"
