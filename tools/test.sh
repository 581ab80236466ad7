#!/bin/sh
# Build per and run every test (the README's test command): the C suites
# through Meson, then the Python package's pytest suite (tools/pytest.sh).
set -e
cd "$(dirname "$0")/.."
sh tools/deps.sh
sh tools/setup.sh build -Dwerror=true -Dcxx=enabled >/dev/null
meson test -C build --print-errorlogs "$@"
python3 tools/summary.py build
sh tools/pytest.sh
