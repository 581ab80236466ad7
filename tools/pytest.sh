#!/bin/sh
# Build the Python package from this checkout into build-py/venv
# (tools/pyvenv.sh) and run its tests with pytest (part of the README's
# test command, tools/test.sh).
#   sh tools/pytest.sh [PYTEST ARGS]
# PYTHON picks the interpreter (default python3).
set -e
cd "$(dirname "$0")/.."
sh tools/pyvenv.sh
venv=$(pwd)/build-py/venv
# From outside the repository, so that `import per` is the installed
# package and not the python/per sources next to the tests.
root=$(pwd)
cd build-py
"$venv/bin/python" -c 'import per, sys; print("per", per.__version__, "from", per.__file__)'
"$venv/bin/python" -m pytest -q -p no:cacheprovider "$root/python/tests" "$@"
