#!/bin/sh
# bench/peers.sh [RESULTS_DIR] [-- ARGS]: per.h against the real peers,
# inside our own benchmark (bench_peers.cpp): TorchRL's and cpprb's C++
# sum trees beside per.h and the textbook tree, timed in one process,
# interleaved, on the same inputs.
#
#   sh bench/peers.sh                        the full grid into bench/results
#   sh bench/peers.sh /tmp/p -- --quick      smoke check: tiny sizes
#   sh bench/peers.sh /tmp/p -- --op sample --n 2^16 --b 1024 --reps 7
#   sh bench/peers.sh --jobs 8               8 programs at once, one per
#                                            node type and op (update, set,
#                                            sample, step), CSVs merged
#
# A per.h with uncommitted changes is refused (--allow-dirty measures it
# anyway; --quick runs are never refused). RESULTS_DIR/peers_machine.txt
# records the CPU, the compiler and per.h's sha256 and commit.
#
# ARGS go to both programs (--help lists them). Writes RESULTS_DIR/
# peers_double.{csv,txt} and peers_float.{csv,txt}; bench/report.py
# --peers-only RESULTS_DIR prints them as a table.
#
# The peers are fetched at bench time from their published packages on
# PyPI (needs network the first time) and never committed here:
#   torchrl 0.10.0  wheel torchrl-0.10.0-cp311-cp311-manylinux_2_28_x86_64.whl:
#                   torchrl/csrc/segment_tree.h and its LICENSE (MIT)
#   cpprb 11.0.0    sdist cpprb-11.0.0.tar.gz: cpprb/SegmentTree.hh,
#                   cpprb/ReplayBuffer.hh and LICENSE (MIT)
# Each file's sha256 is pinned; a download that does not match is refused.
# Both are MIT licensed and used unmodified, except that TorchRL's header
# loses its torch/pybind11 glue (bench/peers_prep.py deletes those
# includes, overloads and registration functions; the trees' code is kept
# byte for byte).
#
# Environment: PEERS_DIR (default /tmp/per-peers) caches the downloads
# (reused while their sha256 matches) and the extracted headers;
# PEERS_BUILD (default $PEERS_DIR/build) gets the binaries; CXX (default
# c++). Build flags: those of the Meson benchmarks (bench/meson.build:
# -ffp-contract=off -O3 -march=native -DNDEBUG) with -std=c++17, warnings
# as errors for bench_peers.cpp (the peers' headers come in with -isystem,
# so their own warnings do not count), once per PER_REAL: double and float,
# the peers instantiated with the same type.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
res="$here/results"
dirty_ok=0 jobs=1
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; break ;;
    --allow-dirty) dirty_ok=1 ;;
    --jobs) jobs=$2; shift ;;
    -h|--help) sed -n '/^set -eu/q;2,$p' "$0"; exit 0 ;;
    -*) echo "peers.sh: unknown option $1 (program options go after --)" >&2
        exit 2 ;;
    *) res=$1 ;;
  esac
  shift
done
case "$jobs" in
  '' | *[!0-9]* | 0) echo "peers.sh: --jobs takes a count of at least 1" >&2
                     exit 2 ;;
esac
# Published figures come from a committed per.h (as bench/run.sh).
quick=0
for a in "$@"; do [ "$a" = "--quick" ] && quick=1; done
if [ "$dirty_ok" -eq 0 ] && [ "$quick" -eq 0 ] &&
  git -C "$src" rev-parse --git-dir >/dev/null 2>&1 &&
  ! git -C "$src" diff --quiet HEAD -- per.h; then
  echo "peers.sh: per.h has uncommitted changes; the figures must come from" \
    "a committed per.h (commit it first, or --allow-dirty)" >&2
  exit 2
fi
peers=${PEERS_DIR:-/tmp/per-peers}
build=${PEERS_BUILD:-$peers/build}
cxx=${CXX:-c++}
mkdir -p "$res" "$peers/dl" "$build"

die() { echo "peers.sh: $*" >&2; exit 1; }

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# fetch PROJECT FILE SHA256: $peers/dl/FILE, from PyPI's simple index
# unless a copy with that sha256 is already there.
fetch() {
  project=$1 file=$2 sum=$3 dst="$peers/dl/$2"
  if [ -f "$dst" ] && [ "$(sha_of "$dst")" = "$sum" ]; then
    echo "peers.sh: $file (cached, sha256 ok)"
    return 0
  fi
  command -v curl >/dev/null 2>&1 || die "curl is needed to fetch $file"
  index=$(curl -sSf -m 60 \
    -H 'Accept: application/vnd.pypi.simple.v1+json' \
    "https://pypi.org/simple/$project/") ||
    die "cannot reach https://pypi.org/simple/$project/ (network needed to fetch the peers; or put $file with sha256 $sum in $peers/dl)"
  url=$(printf '%s' "$index" | python3 -c '
import json, sys
name, want = sys.argv[1], sys.argv[2]
for f in json.load(sys.stdin)["files"]:
    if f["filename"] == name:
        got = f.get("hashes", {}).get("sha256")
        if got and got != want:
            sys.exit(f"index says sha256 {got} for {name}, expected {want}")
        print(f["url"])
        break
else:
    sys.exit(f"{name} is not in the index")
' "$file" "$sum") || die "no usable URL for $file"
  echo "peers.sh: fetching $url"
  curl -sSfL -m 300 -o "$dst.part" "$url" || die "download of $file failed"
  got=$(sha_of "$dst.part")
  if [ "$got" != "$sum" ]; then
    rm -f "$dst.part"
    die "$file has sha256 $got, expected $sum: refused"
  fi
  mv "$dst.part" "$dst"
}

tr_whl=torchrl-0.10.0-cp311-cp311-manylinux_2_28_x86_64.whl
tr_sum=9526f2fb83b2e89b270013ded71cc1e674bad42fa4feec531213aaaa3dcbf8b2
cp_tgz=cpprb-11.0.0.tar.gz
cp_sum=67ebfc61729610337619fcb8e809bc2863fc16f05e3432e21bf890a40cf5a0e3
fetch torchrl "$tr_whl" "$tr_sum"
fetch cpprb "$cp_tgz" "$cp_sum"

# The headers: $peers/include/{torchrl,cpprb}/, each with its LICENSE.
inc="$peers/include"
rm -rf "$inc"
mkdir -p "$inc/torchrl" "$inc/cpprb"
python3 - "$peers/dl/$tr_whl" "$peers/dl/$cp_tgz" "$inc" <<'EOF'
import os, sys, tarfile, zipfile
whl, tgz, inc = sys.argv[1:4]

def put(data, path):
    with open(path, "wb") as f:
        f.write(data)

with zipfile.ZipFile(whl) as z:
    put(z.read("torchrl/csrc/segment_tree.h"),
        os.path.join(inc, "torchrl", "segment_tree.orig.h"))
    put(z.read("torchrl-0.10.0.dist-info/licenses/LICENSE"),
        os.path.join(inc, "torchrl", "LICENSE"))
with tarfile.open(tgz, "r:gz") as t:
    for member, name in (("cpprb-11.0.0/cpprb/SegmentTree.hh", "SegmentTree.hh"),
                         ("cpprb-11.0.0/cpprb/ReplayBuffer.hh", "ReplayBuffer.hh"),
                         ("cpprb-11.0.0/LICENSE", "LICENSE")):
        f = t.extractfile(member)
        if f is None:
            sys.exit(f"{member} is not a file in {tgz}")
        put(f.read(), os.path.join(inc, "cpprb", name))
EOF
python3 "$here/peers_prep.py" "$inc/torchrl/segment_tree.orig.h" \
  "$inc/torchrl/segment_tree.h"
for p in torchrl cpprb; do
  grep -q "MIT License" "$inc/$p/LICENSE" || die "$p's LICENSE is not MIT"
  echo "peers.sh: $p: $(head -n 3 "$inc/$p/LICENSE" | tr -s '\n' ' ')"
done

# The Meson benchmarks' flags (bench/meson.build), where the compiler has
# them.
supported() {
  echo 'int main(void) { return 0; }' |
    "$cxx" -x c++ "$1" -Werror -o /dev/null - 2>/dev/null
}
flags=""
supported -ffp-contract=off && flags="-ffp-contract=off "
flags="${flags}-O3"
supported -march=native && flags="$flags -march=native"
# PER_NO_HUGE_PAGES: the peers' arrays sit on 4 KiB pages, and so do
# per.h's (bench/meson.build says why).
flags="$flags -DNDEBUG -DPER_NO_HUGE_PAGES"
for real in double float; do
  echo "peers.sh: building bench_peers_$real ($cxx -std=c++17 $flags)"
  # shellcheck disable=SC2086 # one word a flag
  "$cxx" -std=c++17 $flags -Wall -Wextra -Wpedantic -Werror \
    "-DBENCH_CFLAGS=\"-std=c++17 $flags\"" "-DPER_REAL=$real" \
    -I"$src" -I"$here" -isystem "$inc" \
    -o "$build/bench_peers_$real" "$here/bench_peers.cpp" -lm
done

# The machine, the compiler and which per.h was measured.
{
  model=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)
  avx512=no
  grep -q avx512f /proc/cpuinfo 2>/dev/null && avx512=yes
  echo "CPU: ${model:-unknown}, $(nproc) logical CPUs, AVX-512: $avx512"
  echo "compiler: $("$cxx" --version | head -n 1); flags: -std=c++17 $flags"
  echo "per.h: sha256 $(sha256sum "$src/per.h" | cut -c1-16), git $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$src" diff --quiet HEAD -- per.h 2>/dev/null || echo ' + uncommitted changes')"
  echo "peers: torchrl 0.10.0 ($tr_whl), cpprb 11.0.0 ($cp_tgz)"
  echo "measured: $(date -u '+%Y-%m-%d %H:%M UTC'); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "arguments: $*$([ "$jobs" -gt 1 ] && echo " (--jobs $jobs: programs at once)")"
} > "$res/peers_machine.txt"
cat "$res/peers_machine.txt"

status=0
if [ "$jobs" -gt 1 ]; then
  # One job per (node type, op), each a script writing its own CSV and
  # console output; merged in op order (one CSV header) once all ended.
  parts="$build/parts"
  rm -rf "$parts"
  mkdir -p "$parts"
  quote() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
  ops="update set sample step"
  for real in double float; do
    for op in $ops; do
      {
        printf '%s --op %s' "$(quote "$build/bench_peers_$real")" "$op"
        for a in "$@"; do printf ' %s' "$(quote "$a")"; done
        printf ' --csv %s >%s 2>&1\n' "$(quote "$parts/$real.$op.csv")" \
          "$(quote "$parts/$real.$op.txt")"
      } >"$parts/$real.$op.sh"
      echo "$parts/$real.$op.sh"
    done
  done | xargs -P "$jobs" -n 1 sh || status=1
  for real in double float; do
    echo "== bench_peers ($real)"
    first=1
    for op in $ops; do
      if [ "$first" -eq 1 ]; then cat "$parts/$real.$op.csv"; first=0
      else tail -n +2 "$parts/$real.$op.csv"; fi
    done >"$res/peers_$real.csv" || status=1
    for op in $ops; do cat "$parts/$real.$op.txt"; done |
      tee "$res/peers_$real.txt"
  done
  [ "$status" -eq 0 ] || echo "peers.sh: a bench_peers job failed" >&2
else
  for real in double float; do
    echo "== bench_peers ($real)"
    rc_file="$build/rc_$real"
    { rc=0
      "$build/bench_peers_$real" --csv "$res/peers_$real.csv" "$@" || rc=$?
      echo "$rc" > "$rc_file"; } | tee "$res/peers_$real.txt"
    rc=$(cat "$rc_file")
    if [ "$rc" -ne 0 ]; then
      echo "peers.sh: bench_peers_$real exited $rc" >&2
      status=1
    fi
  done
fi
[ "$status" -eq 0 ] &&
  echo "peers.sh: wrote $res/peers_{double,float}.{csv,txt}"
exit $status
