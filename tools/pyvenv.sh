#!/bin/sh
# Build the Python package from this checkout with pip (meson-python) into
# a virtual environment, build-py/venv, with numpy, pytest, optree
# (TrajectoryAccumulator's pytrees; the wheel's tests run without it),
# pyzmq (per.net) and the packages named as arguments (for
# tools/pytest.sh and tools/pydemo.sh).
# Needs Python >= 3.9 with its headers and venv module (installed from
# Debian when missing) and PyPI (pip fetches meson-python, meson, ninja,
# numpy, pytest, optree, pyzmq and the arguments).
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
"$venv/bin/python" -m pip install -q --disable-pip-version-check numpy pytest optree \
  pyzmq "$@"
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
# It is not built again when the venv's per-replay was built from the same
# files (every file git tracks or would track, by content) with the same
# cuda option and python_cuda_host as asked or true: a build with
# per._cuda_host serves a caller that does not need it. The stamp
# build-py/venv/per-build.txt says what was built.
host=${PER_PY_CUDA_HOST:-false}
cuda=${PER_PY_CUDA:-disabled}
stamp=$venv/per-build.txt
# the sources' hash; nothing outside a git checkout (then always built)
tree=$("$py" - <<'PY'
import hashlib, os, subprocess
try:
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"],
                         capture_output=True, check=True).stdout
except (OSError, subprocess.CalledProcessError):
    raise SystemExit(0)
h = hashlib.sha256()
for name in sorted(set(out.split(b"\0")) - {b""}):
    h.update(name + b"\0")
    if os.path.isfile(name):
        with open(name, "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
print(h.hexdigest())
PY
)
if [ -n "$tree" ] && [ -f "$stamp" ] &&
  "$venv/bin/python" -m pip show -q per-replay >/dev/null 2>&1; then
  read -r s_tree s_cuda s_host <"$stamp" || true
  if [ "$s_tree" = "$tree" ] && [ "$s_cuda" = "$cuda" ] &&
    { [ "$s_host" = "$host" ] || [ "$s_host" = true ]; }; then
    exit 0
  fi
fi
rm -f "$stamp"
"$venv/bin/python" -m pip install -q --disable-pip-version-check \
  --force-reinstall --no-deps --config-settings=setup-args=-Dwerror=true \
  --config-settings=setup-args=-Dpython_cuda_host="$host" \
  --config-settings=setup-args=-Dcuda="$cuda" .
[ -z "$tree" ] || echo "$tree $cuda $host" >"$stamp"
