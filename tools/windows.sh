#!/bin/sh
# per.h on Windows, with MinGW-w64 (-Wall -Wextra -Wpedantic -Werror) under
# Wine: checkpoints (tests/windows/save_replace.c), then determinism:
# tests/determinism/det.c for both node types must print the same hashes
# as the host's gcc -O0 build (tools/determinism.sh's reference), with
# Windows' C runtime and MinGW's libm. Installs gcc-mingw-w64-x86-64-win32
# and wine64 with apt-get when missing.
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
(cd "$out" && wine ./save_replace.exe)
for real in double float; do
  x86_64-w64-mingw32-gcc -std=c99 -O2 -Wall -Wextra -Wpedantic -Werror -I. \
    "-DPER_REAL=$real" tests/determinism/det.c -o "$out/det_$real.exe"
  cc -std=c99 -O0 -I. "-DPER_REAL=$real" tests/determinism/det.c \
    -o "$out/det_$real" -lm
  (cd "$out" && ./"det_$real" >"det_$real.host" &&
    wine ./"det_$real.exe" | tr -d '\r' >"det_$real.win")
  if ! cmp -s "$out/det_$real.host" "$out/det_$real.win"; then
    echo "windows: determinism ($real): MinGW under Wine differs from the host:"
    diff "$out/det_$real.host" "$out/det_$real.win" || true
    exit 1
  fi
  echo "windows: determinism ($real): the same bits as the host ($(sed -n 's/^all //p' "$out/det_$real.host"))"
done
