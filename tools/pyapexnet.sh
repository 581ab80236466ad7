#!/bin/sh
# Ape-X DQN on CartPole-v1 from Python over per.net
# (python/examples/apex_server.py): a replay server and a learner in the
# main process, 3 actor processes (--actors K) sending their rollouts
# over ZeroMQ. Builds the package with gymnasium (and pyzmq, which
# tools/pyvenv.sh always installs) into build-py/venv and runs it; exit
# status 3 when it does not solve CartPole-v1. Arguments go to the
# example (--help); --smoke checks the pipeline in a few seconds.
set -e
cd "$(dirname "$0")/.."
sh tools/pyvenv.sh gymnasium
root=$(pwd)
cd build-py
exec "$root/build-py/venv/bin/python" "$root/python/examples/apex_server.py" "$@"
