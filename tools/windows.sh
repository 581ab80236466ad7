#!/bin/sh
# Checkpoints on Windows: build tests/windows/save_replace.c with MinGW-w64
# (-Wall -Wextra -Wpedantic -Werror) and run it under Wine. Installs
# gcc-mingw-w64-x86-64-win32 and wine64 with apt-get when missing.
set -e
cd "$(dirname "$0")/.."
command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || sh tools/deps.sh gcc-mingw-w64-x86-64-win32
command -v wine >/dev/null 2>&1 || sh tools/deps.sh wine64 wine
out=${1:-build-windows}
mkdir -p "$out"
out=$(cd "$out" && pwd)
x86_64-w64-mingw32-gcc -std=c99 -O2 -Wall -Wextra -Wpedantic -Werror -I. \
  tests/windows/save_replace.c -o "$out/save_replace.exe"
# Wine's first start creates its prefix; keep it inside the build folder.
export WINEPREFIX="$out/wineprefix" WINEDEBUG=-all
cd "$out" && wine ./save_replace.exe
