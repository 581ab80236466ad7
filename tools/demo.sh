#!/bin/sh
# The README's demo command: install what building per needs, build, and
# train a DQN with prioritized replay on CartPole-v1
# (examples/dqn_cartpole.c). Ends with "solved at step N ..." or
# "not solved in N steps ...". Arguments go to dqn_cartpole (--help).
set -e
cd "$(dirname "$0")/.."
sh tools/deps.sh
sh tools/setup.sh build >/dev/null
meson compile -C build dqn_cartpole >/dev/null
./build/examples/dqn_cartpole "$@"
