#!/bin/sh
# Build the libFuzzer targets of tests/fuzz with clang (ASan + UBSan) and run
# each for a bounded time. Usage: sh tools/fuzz.sh [seconds per target]
# (default 60) [target ...] (default: ckpt ops). Exits non-zero when a
# target finds a crash; the input is left as crash-* in build-fuzz/ -- copy
# it into tests/fuzz/corpus/<target>/ so that the regular tests replay it.
set -eu
cd "$(dirname "$0")/.."
secs=${1:-60}
[ $# -gt 0 ] && shift
targets=${*:-ckpt ops}

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
status=0
for t in $targets; do
  for real in double float; do
    exe=build-fuzz/fuzz_${t}_$real
    clang -g -O1 -std=c99 -Wall -Wextra -ffp-contract=off -DPER_REAL=$real \
      -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
      -I. -Itests "tests/fuzz/fuzz_$t.c" -o "$exe" -lm
    work=build-fuzz/corpus_${t}_$real
    mkdir -p "$work"
    echo "== fuzz_$t ($real): $secs s"
    if ! (cd build-fuzz && ASAN_OPTIONS=detect_leaks=1 \
          "./fuzz_${t}_$real" -max_total_time="$secs" -max_len=4096 \
          -print_final_stats=1 "corpus_${t}_$real" "../tests/fuzz/corpus/$t" \
          2>"fuzz_${t}_$real.log"); then
      echo "fuzz_$t ($real): FAILED, see build-fuzz/fuzz_${t}_$real.log and build-fuzz/crash-*"
      tail -n 30 "build-fuzz/fuzz_${t}_$real.log"
      status=1
    else
      grep -E 'stat::number_of_executed_units|stat::new_units_added' \
        "build-fuzz/fuzz_${t}_$real.log" | sed "s/^/  /"
    fi
  done
done
exit $status
