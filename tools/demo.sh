#!/bin/sh
# Build per and run the demo (the README's demo command).
set -e
cd "$(dirname "$0")/.."
sh tools/deps.sh
sh tools/setup.sh build >/dev/null
meson compile -C build per_demo >/dev/null
./build/examples/per_demo "$@"
