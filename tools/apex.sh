#!/bin/sh
# Ape-X DQN on CartPole-v1 over MPI (examples/apex_cartpole.c): a learner
# and 3 actors on 4 ranks, more ranks than cores allowed. Installs Open MPI
# and what building per needs, builds, runs; exit status 3 when it does
# not solve CartPole-v1. Arguments go to apex_cartpole (--help); with
# --async first, the same for examples/apex_async.c (a learner, a replay
# rank and 2 actors that never wait).
set -e
cd "$(dirname "$0")/.."
prog=apex_cartpole
if [ "${1:-}" = "--async" ]; then # examples/apex_async.c instead
  prog=apex_async
  shift
fi
sh tools/deps.sh mpi
sh tools/setup.sh build >/dev/null
meson compile -C build "$prog" >/dev/null
# as root (CI) Open MPI must be told; no ptrace copies in containers
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
exec mpirun --oversubscribe -np 4 "./build/examples/$prog" "$@"
