#!/bin/sh
# Build the Python package from this checkout with pip (meson-python) into
# a virtual environment, build-py/venv, with numpy and pytest and the
# packages named as arguments (for tools/pytest.sh and tools/pydemo.sh).
# Needs Python >= 3.9 with its headers and venv module (installed from
# Debian when missing) and PyPI (pip fetches meson-python, meson, ninja,
# numpy, pytest and the arguments).
#   sh tools/pyvenv.sh [PACKAGE ...]
# PYTHON picks the interpreter (default python3).
set -e
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
if ! command -v "$py" >/dev/null 2>&1; then
  sh tools/deps.sh python3 python3-dev python3-venv
fi
"$py" - <<'PY' || sh tools/deps.sh python3-dev python3-venv
import os, sys, sysconfig, venv, ensurepip
inc = sysconfig.get_paths()["include"]
sys.exit(0 if os.path.exists(os.path.join(inc, "Python.h")) else 1)
PY
venv=$(pwd)/build-py/venv
if [ ! -x "$venv/bin/python" ]; then
  rm -rf "$venv"
  "$py" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check numpy pytest "$@"
# A venv made before the package was named per-replay lists the same
# files under the old name "per", whose uninstall would delete them.
if "$venv/bin/python" -m pip show -q per >/dev/null 2>&1; then
  "$venv/bin/python" -m pip uninstall -q -y per
fi
# The wheel is built from the working tree as it is (no cached build),
# without nvcc unless PER_PY_CUDA=enabled (per._cuda compiles per_cuda.cu
# for every GPU architecture, minutes that only tools/wheel.sh and a GPU
# need to spend), and with per._cuda_host (per.cuda's tests without a
# GPU) when PER_PY_CUDA_HOST=true (tools/pytest.sh, CI's torch stage).
"$venv/bin/python" -m pip install -q --disable-pip-version-check \
  --force-reinstall --no-deps --config-settings=setup-args=-Dwerror=true \
  --config-settings=setup-args=-Dpython_cuda_host="${PER_PY_CUDA_HOST:-false}" \
  --config-settings=setup-args=-Dcuda="${PER_PY_CUDA:-disabled}" .
