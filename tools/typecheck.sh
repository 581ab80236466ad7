#!/bin/sh
# Type-check the Python package: mypy --strict over python/per, its .py
# files and the extensions' stubs (_per.pyi, _mpi.pyi, _cuda.pyi), as
# Python 3.11 sees them, with NumPy's own annotations. Exits non-zero on
# any error. Nothing is built: mypy reads the sources and the stubs, and
# per.cuda's PyTorch and CuPy are only ever looked up at run time.
#   sh tools/typecheck.sh [MYPY ARGS]
# Writes build-typecheck/: venv (mypy and NumPy at the versions below,
# installed from PyPI on the first run and when they change) and cache
# (mypy's). PYTHON picks the interpreter (default python3; NumPy below
# needs Python >= 3.11).
set -e
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
mypy_version=2.4.1
numpy_version=2.4.6
out=$(pwd)/build-typecheck
venv=$out/venv
stamp=$venv/typecheck-versions.txt
want="mypy==$mypy_version numpy==$numpy_version"
if ! command -v "$py" >/dev/null 2>&1; then
  sh tools/deps.sh python3 python3-venv
fi
if [ ! -x "$venv/bin/python" ]; then
  rm -rf "$venv"
  "$py" -m venv "$venv" || {
    sh tools/deps.sh python3-venv
    rm -rf "$venv"
    "$py" -m venv "$venv"
  }
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  rm -f "$stamp"
  # shellcheck disable=SC2086 # $want is words
  "$venv/bin/python" -m pip install -q --disable-pip-version-check $want
  echo "$want" >"$stamp"
fi
"$venv/bin/python" -m mypy --strict --python-version 3.11 \
  --cache-dir "$out/cache" "$@" python/per
