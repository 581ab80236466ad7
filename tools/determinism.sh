#!/bin/sh
# tools/determinism.sh - the same seed gives the same bits on every build.
#
# Usage: sh tools/determinism.sh [workdir]
#
# Compiles tests/determinism/det.c (every layer of per.h from fixed seeds,
# one hash per category) in several ways with whatever compilers are
# installed, for PER_REAL=double and PER_REAL=float, runs each build in
# workdir (default: a fresh mktemp -d, removed afterwards) and compares its
# output line by line with the reference build's (gcc -O0 -std=c99, or cc
# when gcc is missing). The other builds optimize, target the host
# (-march=native), force fused multiply-adds (x86-64: -mfma
# -ffp-contract=fast; aarch64 always has FMA), compile as C++11, link
# another C library and libm (musl, through musl-gcc), or run the plain
# paths only (-DPER_REFERENCE); none turns contraction off, since per.h
# promises the same results without it. (tools/windows.sh compares a
# MinGW build run under Wine with this script's reference the same way.)
#
# A build whose compiler is missing is reported as skipped and not counted;
# the reference and at least one optimizing gcc build must run. A compile
# failure, a det that exits non-zero, or any differing category makes the
# script print the details and exit 1; otherwise it prints
# "determinism: N builds agree (double, float)" and exits 0.

set -u

root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/tests/determinism/det.c
if [ ! -f "$src" ]; then
  echo "determinism: $src not found" >&2
  exit 1
fi

cleanup=
if [ $# -ge 1 ] && [ -n "$1" ]; then
  work=$1
  mkdir -p "$work" || exit 1
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/per-determinism.XXXXXX") || exit 1
  cleanup=$work
fi
work=$(cd "$work" && pwd)
if [ -n "$cleanup" ]; then
  trap 'rm -rf "$cleanup"' EXIT
  trap 'exit 1' HUP INT TERM
fi

have() { command -v "$1" >/dev/null 2>&1; }

if have gcc; then
  gcc=gcc
elif have cc; then
  gcc=cc
else
  echo "determinism: FAIL: neither gcc nor cc found" >&2
  exit 1
fi

case $(uname -m 2>/dev/null) in
  x86_64 | amd64) x86_64=1 ;;
  *) x86_64= ;;
esac

# The host's own target flag: -march=native where the compiler takes it
# (gcc and clang on x86-64 and aarch64), else -mcpu=native (gcc on some
# other targets), else none.
native_flag() {
  for f in -march=native -mcpu=native; do
    if echo 'int main(void) { return 0; }' |
      "$1" $f -x c -o "$work/probe.out" - >/dev/null 2>&1; then
      echo "$f"
      return
    fi
  done
}

# Variants: "label|compiler|flags", one a line. The first is the reference.
variants="reference $gcc -O0 -std=c99|$gcc|-O0 -std=c99"
add() { variants="$variants
$1|$2|$3"; }

nat=$(native_flag "$gcc")
add "$gcc -O3 $nat" "$gcc" "-O3 $nat"
# The plain paths only (PER_REFERENCE): the fast paths' hashes must be
# theirs.
add "$gcc -O2 -DPER_REFERENCE" "$gcc" "-O2 -DPER_REFERENCE"
if [ -n "$x86_64" ]; then
  add "$gcc -O2 -mfma -ffp-contract=fast" "$gcc" "-O2 -mfma -ffp-contract=fast"
fi
if have clang; then
  nat=$(native_flag clang)
  add "clang -O2 $nat" clang "-O2 $nat"
  if [ -n "$x86_64" ]; then
    add "clang -O2 -mfma -ffp-contract=fast" clang "-O2 -mfma -ffp-contract=fast"
  fi
else
  add "clang -O2 -march=native" "" "no clang"
  [ -n "$x86_64" ] && add "clang -O2 -mfma -ffp-contract=fast" "" "no clang"
fi
if have g++; then
  nat=$(native_flag g++)
  add "g++ -O2 $nat -std=c++11" g++ "-O2 $nat -std=c++11 -x c++"
else
  add "g++ -O2 -march=native -std=c++11" "" "no g++"
fi
if have clang++; then
  nat=$(native_flag clang++)
  add "clang++ -O2 $nat -std=c++11" clang++ "-O2 $nat -std=c++11 -x c++"
else
  add "clang++ -O2 -march=native -std=c++11" "" "no clang++"
fi
# musl's libc and libm instead of glibc's: per.h calls no libm function
# whose last bit could differ (its pow is its own).
if have musl-gcc; then
  add "musl-gcc -O2" musl-gcc "-O2 -std=c99"
else
  add "musl-gcc -O2" "" "no musl-gcc (Debian: musl-tools)"
fi

echo "determinism: building $src in $work"

# compare REFFILE OUTFILE: prints "name ref_hash this_hash" for every
# category that differs or is missing on either side.
compare() {
  awk '
    NR == FNR { ref[$1] = $2; order[++n] = $1; next }
    { got[$1] = $2; if (!($1 in ref)) extra[++m] = $1 }
    END {
      for (i = 1; i <= n; ++i) {
        k = order[i]
        if (!(k in got)) print k, ref[k], "(missing)"
        else if (got[k] != ref[k]) print k, ref[k], got[k]
      }
      for (i = 1; i <= m; ++i) print extra[i], "(missing)", got[extra[i]]
    }' "$1" "$2"
}

# Every build compiled and run first, as many at a time as there are
# cores (each is one process), each in a directory of its own (det writes
# its checkpoints under fixed names); det_REAL_N.rc says how it went: "cc"
# when it did not compile, else det's exit status.
build_one() { # REAL N CC FLAGS
  exe=$work/det_$1_$2
  # shellcheck disable=SC2086 # flags are words on purpose
  if ! "$3" $4 "-DPER_REAL=$1" "-I$root" "$src" -o "$exe" -lm \
    </dev/null >"$exe.err" 2>&1; then
    echo cc >"$exe.rc"
    return
  fi
  mkdir -p "$exe.run"
  (cd "$exe.run" && "$exe") </dev/null >"$exe.out" 2>"$exe.err"
  echo $? >"$exe.rc"
}
jobs=$(nproc 2>/dev/null || echo 2)
running=0
for real in double float; do
  n=0
  while IFS='|' read -r label cc flags; do
    n=$((n + 1))
    [ -z "$cc" ] && continue
    build_one "$real" "$n" "$cc" "$flags" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
      wait
      running=0
    fi
  done <<EOF
$variants
EOF
done
wait

for real in double float; do
  printf '%s\n' "$variants" | {
    # The pipe's subshell reports its counts through a file: builds that
    # ran and agreed (the reference included), builds that failed or
    # differ, optimizing gcc builds that ran, whether the reference ran.
    builds=0 failed=0 gcc_opt_ran=0 ref_ran=0 n=0 ref=
    while IFS='|' read -r label cc flags; do
      n=$((n + 1))
      name="$label ($real)"
      if [ -z "$cc" ]; then
        echo "  $name: skipped ($flags)"
        continue
      fi
      exe=$work/det_${real}_$n
      out=$exe.out
      err=$exe.err
      rc=$(cat "$exe.rc" 2>/dev/null || echo cc)
      if [ "$rc" = cc ]; then
        echo "  $name: FAIL: does not compile:"
        sed 's/^/      /' "$err"
        failed=$((failed + 1))
        continue
      fi
      if [ "$rc" -ne 0 ]; then
        echo "  $name: FAIL: det exited with status $rc:"
        sed 's/^/      /' "$err"
        failed=$((failed + 1))
        continue
      fi
      if ! grep -q '^all [0-9a-f]\{16\}$' "$out"; then
        echo "  $name: FAIL: no 'all' line in the output:"
        sed 's/^/      /' "$out"
        failed=$((failed + 1))
        continue
      fi
      if [ $n -eq 1 ]; then
        ref=$out
        ref_ran=1
        builds=$((builds + 1))
        echo "  $name: ok (all $(sed -n 's/^all //p' "$out"))"
        continue
      fi
      if [ "$ref_ran" -ne 1 ]; then
        echo "  $name: not compared (the reference did not run)"
        failed=$((failed + 1))
        continue
      fi
      case $cc in "$gcc") gcc_opt_ran=$((gcc_opt_ran + 1)) ;; esac
      diffs=$(compare "$ref" "$out")
      if [ -n "$diffs" ]; then
        cats=$(printf '%s\n' "$diffs" | awk '$1 != "all" { printf "%s%s", s, $1; s = ", " }')
        echo "  $name: DIFFERS from the reference in: $cats"
        printf '%s\n' "$diffs" | while read -r k a b; do
          echo "      $k: reference $a, this build $b"
        done
        failed=$((failed + 1))
        continue
      fi
      builds=$((builds + 1))
      echo "  $name: ok"
    done
    echo "$builds $failed $gcc_opt_ran $ref_ran" >"$work/counts_$real"
  }
done

total=0    # builds that agree with the reference (the reference included)
bad=0      # builds that failed to compile or run, or differ
missing=0  # required builds (reference, an optimizing gcc) that did not run
for real in double float; do
  if [ ! -f "$work/counts_$real" ]; then
    echo "determinism: FAIL: no result for $real" >&2
    exit 1
  fi
  read -r b f g r <"$work/counts_$real"
  total=$((total + b))
  bad=$((bad + f))
  if [ "$r" -ne 1 ]; then
    echo "determinism: FAIL: the reference build ($real) did not run"
    missing=1
  elif [ "$g" -lt 1 ]; then
    echo "determinism: FAIL: no optimizing $gcc build ran ($real)"
    missing=1
  fi
done

if [ "$bad" -ne 0 ]; then
  echo "determinism: FAIL: $bad build(s) failed or differ from the reference" \
    "($total agree); the same seed must give the same bits on every build"
  exit 1
fi
if [ "$missing" -ne 0 ]; then
  exit 1
fi
echo "determinism: $total builds agree (double, float)"
exit 0
