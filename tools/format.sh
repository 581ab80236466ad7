#!/bin/sh
# tools/format.sh [--check]: format every C, C++ and CUDA file git tracks
# with .clang-format (clang-format 14, Debian's), then line up the later
# lines of multi-line trailing comments (tools/format_comments.py), in
# place; with --check, change nothing and exit 1 naming what is off.
set -e
cd "$(dirname "$0")/.."
sh tools/deps.sh clang-format
files=$(git ls-files '*.c' '*.h' '*.cpp' '*.cu')
if [ "${1:-}" = "--check" ]; then
  bad=""
  for f in $files; do
    clang-format --style=file "$f" | cmp -s - "$f" || bad="$bad $f"
  done
  # shellcheck disable=SC2086 # one word a file
  python3 tools/format_comments.py --check $files || bad="$bad (comments)"
  if [ -n "$bad" ]; then
    echo "format: not formatted (run sh tools/format.sh):$bad"
    exit 1
  fi
  echo "format: $(echo $files | wc -w) files formatted"
else
  # shellcheck disable=SC2086
  clang-format --style=file -i $files
  # shellcheck disable=SC2086
  python3 tools/format_comments.py $files
fi
