#!/bin/sh
# Build the libFuzzer targets of tests/fuzz with clang (ASan + UBSan) and run
# each for a bounded time. Usage: sh tools/fuzz.sh [seconds per target]
# (default 60) [target ...] (default: ckpt ops net), for both node types, two
# fuzzers at a time (one a core). Exits non-zero when a
# target finds a crash; the input is left as crash-* in build-fuzz/ -- copy
# it into tests/fuzz/corpus/<target>/ so that the regular tests replay it.
set -eu
cd "$(dirname "$0")/.."
secs=${1:-60}
[ $# -gt 0 ] && shift
targets=${*:-ckpt ops net}

# clang and its libFuzzer runtime (Debian: clang + libclang-rt-<ver>-dev)
if ! command -v clang >/dev/null 2>&1; then sh tools/deps.sh clang; fi
probe=$(mktemp -d)
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' \
  > "$probe/p.c"
if ! clang -fsanitize=fuzzer "$probe/p.c" -o "$probe/p" 2>/dev/null; then
  ver=$(clang --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n 1)
  sh tools/deps.sh "libclang-rt-$ver-dev"
fi
rm -rf "$probe"

mkdir -p build-fuzz
for t in $targets; do
  for real in double float; do
    clang -g -O1 -std=c99 -Wall -Wextra -ffp-contract=off -DPER_REAL=$real \
      -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
      -I. -Itests "tests/fuzz/fuzz_$t.c" -o "build-fuzz/fuzz_${t}_$real" -lm
  done
done

# fuzz NAME: run build-fuzz/NAME for $secs seconds on its corpus; its
# status says whether it found a crash.
fuzz() {
  work=corpus_$1
  t=${1%_*}
  t=${t#*_}
  mkdir -p "build-fuzz/$work"
  (cd build-fuzz && ASAN_OPTIONS=detect_leaks=1 \
    "./$1" -max_total_time="$secs" -max_len=4096 -print_final_stats=1 \
    "$work" "../tests/fuzz/corpus/$t" 2>"$1.log")
}

# report NAME PID: wait for fuzzer NAME and say what it found.
report() {
  if wait "$2"; then
    echo "  $1:"
    grep -E 'stat::number_of_executed_units|stat::new_units_added' \
      "build-fuzz/$1.log" | sed "s/^/    /"
  else
    echo "$1: FAILED, see build-fuzz/$1.log and build-fuzz/crash-*"
    tail -n 30 "build-fuzz/$1.log"
    status=1
  fi
}

# Two at a time (one a core): each pair runs together, then reports.
status=0
for t in $targets; do
  echo "== fuzz_$t (double, float): $secs s"
  fuzz "fuzz_${t}_double" &
  pd=$!
  fuzz "fuzz_${t}_float" &
  pf=$!
  report "fuzz_${t}_double" $pd
  report "fuzz_${t}_float" $pf
done
exit $status
