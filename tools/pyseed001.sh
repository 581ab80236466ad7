#!/bin/sh
# Seed 001's training script on per: python/examples/train_cartpole_per.py,
# DQN on Gymnasium's CartPole-v1 with per.seeds.GPUReplayPER in PyTorch,
# in build-py/venv (tools/pyvenv.sh builds the package and installs torch
# and gymnasium from PyPI: torch's wheels with their CUDA libraries are
# several GB). The replay runs on per.cuda where PyTorch sees a GPU and
# per was built with CUDA (PER_PY_CUDA=enabled), else on per.cuda.host,
# the CPU emulation of per's kernels, built here unless
# PER_PY_CUDA_HOST=false. Ends with "solved at step N ..." (exit 0) or
# "not solved in N steps ..." (exit 1); exit 2 when the replay's device
# is not there. Arguments go to the example (--help); --smoke checks the
# pipeline in seconds.
#
#   sh tools/pyseed001.sh --plot CSV PNG     (paths from the repository root)
# draws a run's --csv (step, episode, return) instead: each episode's
# return and the mean of the last 100 against environment steps, with
# gnuplot (installed with tools/deps.sh when missing). The curve in
# python/examples/results/train_cartpole_per.{csv,png}:
#   sh tools/pyseed001.sh --seed 1 --csv ../python/examples/results/train_cartpole_per.csv
#   sh tools/pyseed001.sh --plot python/examples/results/train_cartpole_per.csv \
#     python/examples/results/train_cartpole_per.png
# (the example runs in build-py: --csv is relative to it).
set -e
cd "$(dirname "$0")/.."
if [ "$1" = --plot ]; then
  [ $# -eq 3 ] || { echo "usage: sh tools/pyseed001.sh --plot CSV PNG" >&2; exit 2; }
  command -v gnuplot >/dev/null 2>&1 || sh tools/deps.sh gnuplot-nox
  mean=$(mktemp)
  trap 'rm -f "$mean"' EXIT
  # step, mean return of the last 100 episodes (fewer at the start)
  awk -F, 'NR > 1 { n++; i = n % 100; if (n > 100) s -= r[i]
                    r[i] = $3; s += $3; print $1 "," s / (n < 100 ? n : 100) }' \
    "$2" >"$mean"
  gnuplot <<GP
set terminal pngcairo size 1000,560 font "sans,11" noenhanced
set output "$3"
set datafile separator ","
set title "DQN on CartPole-v1 with per.seeds.GPUReplayPER, $(basename "$2"): the training episodes\\n(epsilon-greedy); the run stops when 100 greedy episodes average 475, checked every --every steps"
set xlabel "environment steps"
set ylabel "episode return"
set yrange [0:520]
set grid lc rgb "#dddddd"
set key at graph 0.02, 0.88 left top box opaque
plot "$2" every ::1 using 1:3 with points pt 7 ps 0.35 lc rgb "#9ecae1" title "episode return", \
     "$mean" using 1:2 with lines lw 2 lc rgb "#08519c" title "mean of the last 100", \
     475 with lines dt 2 lc rgb "#d62728" title "475: solved when 100 greedy episodes average it"
GP
  echo "wrote $3"
  exit 0
fi
PER_PY_CUDA_HOST=${PER_PY_CUDA_HOST:-true} sh tools/pyvenv.sh torch gymnasium
root=$(pwd)
cd build-py
OMP_NUM_THREADS=1 "$root/build-py/venv/bin/python" \
  "$root/python/examples/train_cartpole_per.py" "$@"
