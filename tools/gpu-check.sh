#!/bin/sh
# tools/gpu-check.sh [--quick | --all] [--out DIR] [--budget SECONDS]
# [BUILD_DIR]: everything that needs a GPU, in one command, on a machine
# with an NVIDIA GPU and nvcc. Three modes:
#
# (no flag) everything, unbounded:
#   1. configure and build BUILD_DIR (default build-gpu) with CUDA required;
#   2. bench/results/gpu_machine.txt: the GPU, driver, nvcc, the sha256
#      of per.h, per_cuda.h and per_cuda.cu, and the commit;
#   3. meson test --suite gpu (the GPU test for both node types and the
#      GPU examples): a skip counts as a failure here, since this command
#      exists to run them;
#   4. the GPU benchmark for both node types: bench/results/gpu_double.csv,
#      gpu_float.csv (and .txt), and bench/results/gpu.md, a Markdown table
#      (bench/gpu_report.py);
#   5. per.cuda from Python (tools/gpu-python.sh): its tests on the GPU,
#      the PyTorch DQN example (seeds 1 to 3), its peer benchmark.
#   It stops at the first step that cannot run (set -e); a failed test or
#   benchmark run is reported and the others still run.
#
# --quick: the same with the benchmark's two smallest rows only and
# tools/gpu-python.sh --quick (checks the pipeline).
#
# --all: one bounded run for a single device call (at most about 7
# minutes: --budget 390 seconds by default, the build included; about 5
# expected on an H200), every stage
# run whatever the others did, each bounded by `timeout` and by what is
# left of the budget; the report is bench/results/gpu.md, the whole output
# bench/results/gpu_check.log. Stages:
#   build       BUILD_DIR configured with gpu_arch native (PER_GPU_ARCH
#               overrides) and release, and only the GPU programs built
#               (ninja targets, in parallel); per.cuda's extensions build
#               beside it (tools/gpu-python.sh --build-only);
#   tests       meson test --suite gpu (a skip is a failure);
#   memcheck, racecheck, synccheck
#               compute-sanitizer on tests/cuda/gpu_probes_double --small
#               (update, litmus, graph, api, uniform, unique: racecheck
#               and synccheck see the draw's shared memory and barriers; the
#               GPU test itself would take 10 to 100 times as long under
#               a sanitizer): PASS when its summary says 0 errors
#               (racecheck: 0 hazards) and the probes pass;
#   pytests     per.cuda's tests on the GPU (tools/gpu-python.sh);
#               these five stages run at the same time (none is timed);
#   probes      tests/cuda/gpu_probes for double, then float: every probe
#               (a SKIP is a failure);
#   bench       the GPU benchmark's whole grid, double then float;
#   dqn         python/examples/gpu_dqn_cartpole.py, seed 1, to a solve
#               (tools/gpu-python.sh --all: its own step budget);
#   peers       bench/peers_cuda.py.
# A stage cut short by its bound is TIMEOUT, one that was not started
# because the budget was spent is SKIPPED; both count as failures. gpu.md
# is written again after every stage: a header (date in UTC, commit and
# whether per.h / per_cuda.* had uncommitted changes, or PER_COMMIT when
# set, for a copy of the tree whose .git is another's; the sha256 of those
# files, GPU, driver, nvcc), the stages with their verdicts and seconds,
# then a section per stage with its key lines (bench/gpu_report.py
# --check).
#
# --out DIR: when done (and with --all after every stage too, so that a
# run cut short still leaves its results), copy the results into DIR in
# three files, whatever their number (a device call returns at most 8):
# gpu.md, gpu_check.log, and gpu_results.tar.gz holding
# bench/results/gpu*.md, gpu*.csv, gpu*.txt, gpu_check.log and
# peers_cuda.md / .csv. For a device call:
#   sh tools/gpu-check.sh --all --out "$OUT"
#
# Exits non-zero when any step (stage) failed; the results of the steps
# that ran stay in bench/results.
set -eu
cd "$(dirname "$0")/.."
mode="" quick="" build=build-gpu outdir="" budget=390
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) mode=quick quick=--quick ;;
    --all) mode=all ;;
    --out | --budget)
      [ $# -ge 2 ] || { echo "gpu-check: $1 needs a value" >&2; exit 2; }
      if [ "$1" = --out ]; then outdir=$2; else budget=$2; fi
      shift
      ;;
    -*)
      echo "usage: tools/gpu-check.sh [--quick | --all] [--out DIR]" \
        "[--budget SECONDS] [BUILD_DIR]" >&2
      exit 2
      ;;
    *) build=$1 ;;
  esac
  shift
done
case "$outdir" in "" | /*) ;; *) outdir=$(pwd)/$outdir ;; esac
PATH="$PATH:/usr/local/cuda/bin"
export PATH
out=bench/results
mkdir -p "$out"

# copy_out DIR: the results into DIR (see --out above)
copy_out() {
  mkdir -p "$1"
  files=""
  for f in "$out"/gpu*.md "$out"/gpu*.csv "$out"/gpu*.txt \
    "$out"/gpu_check.log "$out"/peers_cuda.md "$out"/peers_cuda.csv; do
    [ ! -f "$f" ] || files="$files $f"
  done
  for f in "$out/gpu.md" "$out/gpu_check.log"; do
    [ ! -f "$f" ] || cp "$f" "$1/"
  done
  # shellcheck disable=SC2086 # one word a file
  [ -z "$files" ] || tar -czf "$1/gpu_results.tar.gz" $files
}

# machine_info: bench/results/gpu_machine.txt
machine_info() {
  {
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    for f in per.h per_cuda.h per_cuda.cu; do
      echo "$f sha256: $(sha256sum "$f" | cut -d' ' -f1)"
    done
    if [ -n "${PER_COMMIT:-}" ]; then # a copy whose .git is not its own
      echo "commit: $PER_COMMIT (PER_COMMIT; the sha256 lines are the files')"
    elif git rev-parse --short HEAD >/dev/null 2>&1; then
      echo "commit: $(git rev-parse --short HEAD)$(
        git diff --quiet HEAD -- per.h per_cuda.h per_cuda.cu ||
          echo ' + uncommitted changes to per.h / per_cuda')"
    else
      echo "commit: unknown (no git repository here; see the sha256 lines)"
    fi
    echo "nvcc: $(nvcc --version 2>/dev/null | tail -n 1)"
    if command -v nvidia-smi >/dev/null 2>&1; then
      nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
        --format=csv,noheader | sed 's/^/gpu: /'
    else
      echo "gpu: nvidia-smi not available"
    fi
  } >"$out/gpu_machine.txt"
}

if [ "$mode" = all ] && [ -z "${PER_GPU_CHECK_LOGGED:-}" ]; then
  # the run again, its output also into gpu_check.log
  PER_GPU_CHECK_LOGGED=1
  export PER_GPU_CHECK_LOGGED
  rcfile=$(mktemp)
  set -- --all --budget "$budget" "$build"
  [ -z "$outdir" ] || set -- "$@" --out "$outdir"
  {
    rc=0
    sh tools/gpu-check.sh "$@" || rc=$?
    echo "$rc" >"$rcfile"
  } 2>&1 | tee "$out/gpu_check.log"
  rc=$(cat "$rcfile")
  rm -f "$rcfile"
  [ -z "$outdir" ] || copy_out "$outdir"
  exit "$rc"
fi

if [ "$mode" != all ]; then
  sh tools/deps.sh
  echo "== build ($build, -Dcuda=enabled)"
  sh tools/setup.sh "$build" -Dcuda=enabled -Dbuildtype=release >/dev/null
  ninja -C "$build"

  echo "== machine: $out/gpu_machine.txt"
  machine_info
  cat "$out/gpu_machine.txt"

  echo "== GPU tests (meson test --suite gpu)"
  status=0
  meson test -C "$build" --suite gpu --print-errorlogs || status=1
  if grep -q '"result": "SKIP"' "$build/meson-logs/testlog.json" 2>/dev/null; then
    echo "gpu-check: a GPU test was skipped: no usable CUDA device" >&2
    status=1
  fi

  echo "== GPU benchmark"
  for real in double float; do
    if "$build/bench/cuda/bench_cuda_$real" $quick --csv "$out/gpu_$real.csv" \
      >"$out/gpu_$real.txt"; then
      cat "$out/gpu_$real.txt"
    else
      rc=$?
      cat "$out/gpu_$real.txt"
      echo "gpu-check: bench_cuda_$real failed (exit $rc)" >&2
      status=1
    fi
  done
  if [ -s "$out/gpu_double.csv" ]; then
    python3 bench/gpu_report.py "$out" >"$out/gpu.md"
    echo "== $out/gpu.md"
    cat "$out/gpu.md"
  fi

  echo "== per.cuda from Python (tools/gpu-python.sh)"
  sh tools/gpu-python.sh $quick || status=1
  [ -z "$outdir" ] || copy_out "$outdir"
  exit $status
fi

# ---- --all: bounded stages, each run whatever the others did ----
set +e
PYTHONUNBUFFERED=1
export PYTHONUNBUFFERED
t0=$(date +%s)
deadline=$((t0 + budget))
reserve=10 # seconds kept for the report at the end
logs=$build/gpu-check
pybuild=$build-py
rm -rf "$logs"
mkdir -p "$logs"
: >"$logs/stages.tsv"
echo "$t0" >"$logs/start"
# results of an earlier run that this one writes again: none left behind
rm -f "$out"/gpu.md "$out"/gpu_double.* "$out"/gpu_float.* \
  "$out"/gpu_python_dqn.txt "$out"/peers_cuda.md "$out"/peers_cuda.csv
printf '%s\n' build tests memcheck racecheck synccheck pytests \
  probes_double probes_float bench_double bench_float dqn peers >"$logs/plan"
status=0

# cap SECONDS: SECONDS, or less when the budget has less left
cap() {
  c_left=$((deadline - $(date +%s) - reserve))
  if [ "$1" -lt "$c_left" ]; then echo "$1"; else echo "$c_left"; fi
}

# verdict RC: PASS, TIMEOUT (timeout's 124, or 137 after its KILL) or FAIL
verdict() {
  case "$1" in
    0) echo PASS ;;
    124 | 137) echo TIMEOUT ;;
    *) echo FAIL ;;
  esac
}

# record NAME VERDICT SECONDS LOGS NOTE: a stage's line in stages.tsv (LOGS:
# its log files in $logs, comma-separated), then gpu.md written again and
# the results copied to --out
record() {
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >>"$logs/stages.tsv"
  [ "$2" = PASS ] || status=1
  echo "== stage $1: $2 ($3 s)${5:+: $5}"
  python3 bench/gpu_report.py --check "$logs" "$out" "$budget" \
    >"$out/gpu.md.tmp" && mv "$out/gpu.md.tmp" "$out/gpu.md"
  [ -z "$outdir" ] || copy_out "$outdir"
}

# run NAME SECONDS CMD...: CMD bounded by SECONDS (never past the budget),
# its output in $logs/NAME.log and "exit-status seconds" in $logs/NAME.rc;
# SKIPPED (rc 125) when the budget has less than 15 seconds left. Run it
# with & to run stages at once.
run() {
  r_name=$1
  r_t=$(cap "$2")
  shift 2
  if [ "$r_t" -lt 15 ]; then
    echo "125 0" >"$logs/$r_name.rc"
    echo "budget spent: not started" >"$logs/$r_name.log"
    return
  fi
  r_s=$(date +%s)
  timeout -k 10 "$r_t" "$@" >"$logs/$r_name.log" 2>&1
  echo "$? $(($(date +%s) - r_s))" >"$logs/$r_name.rc"
}

# rc NAME / secs NAME: what run left in $logs/NAME.rc
rc() { cut -d' ' -f1 "$logs/$1.rc"; }
secs() { cut -d' ' -f2 "$logs/$1.rc"; }

# show NAME: a stage's log into this output (so into gpu_check.log)
show() {
  echo "---- $1 ($logs/$1.log)"
  cat "$logs/$1.log"
}

# finish NAME [NOTE]: record a stage from its run's exit status
finish() {
  f_rc=$(rc "$1")
  f_v=$(verdict "$f_rc")
  [ "$f_rc" != 125 ] || f_v=SKIPPED
  show "$1"
  record "$1" "$f_v" "$(secs "$1")" "$1.log" "${2:-exit status $f_rc}"
}

echo "== gpu-check --all: budget $budget s, build $build, logs $logs"
machine_info
cat "$out/gpu_machine.txt"
arch=${PER_GPU_ARCH:-native}
# meson and ninja from Python's packages when their commands are not on
# PATH (an image with them pip-installed for another interpreter)
case "$build" in /*) shims=$build-shims ;; *) shims=$(pwd)/$build-shims ;; esac
for tool in meson ninja; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    module=$tool
    [ "$tool" = meson ] && module=mesonbuild.mesonmain
    if python3 -c "import $module" >/dev/null 2>&1; then
      mkdir -p "$shims"
      printf '#!/bin/sh\nexec python3 -m %s "$@"\n' "$module" >"$shims/$tool"
      chmod +x "$shims/$tool"
    fi
  fi
done
[ ! -d "$shims" ] || PATH="$shims:$PATH"
missing=""
for tool in meson ninja nvcc python3 timeout; do
  command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
# compute-sanitizer: on PATH, else where CUDA's installers put it
sanitizer=$(command -v compute-sanitizer)
for s in /usr/local/cuda/compute-sanitizer/compute-sanitizer \
  /usr/local/cuda-*/compute-sanitizer/compute-sanitizer \
  /opt/nvidia/*/compute-sanitizer/compute-sanitizer; do
  [ -n "$sanitizer" ] || [ ! -x "$s" ] || sanitizer=$s
done
[ -n "$sanitizer" ] || missing="$missing compute-sanitizer"
[ -z "$missing" ] || echo "gpu-check: not found:$missing"
echo "compute-sanitizer: ${sanitizer:-none}"

echo "== build ($build, gpu_arch $arch; per.cuda in $pybuild)"
targets="tests/cuda/test_cuda_gpu_double tests/cuda/test_cuda_gpu_float
tests/cuda/gpu_probes_double tests/cuda/gpu_probes_float
bench/cuda/bench_cuda_double bench/cuda/bench_cuda_float
examples/gpu/gpu_trainer examples/gpu/gpu_dqn"
run pybuild 300 sh tools/gpu-python.sh --build-only "$pybuild" &
pyjob=$!
# shellcheck disable=SC2016,SC2086 # sh -c's own $1; the targets are words
run build 240 sh -c 'b=$1 a=$2; shift 2; PER_GPU_ARCH= sh tools/setup.sh "$b" \
  -Dcuda=enabled -Dgpu_arch="$a" -Dbuildtype=release && ninja -C "$b" "$@"' \
  build "$build" "$arch" $targets
finish build

echo "== at once: tests, memcheck, racecheck, synccheck, pytests"
# meson's own timeouts (600 s for the GPU tests) scaled below the bound
run tests 200 meson test -C "$build" --suite gpu --no-rebuild \
  --print-errorlogs --timeout-multiplier 0.3 &
jobs_b=$!
for tool in memcheck racecheck synccheck; do
  run "$tool" 180 "${sanitizer:-compute-sanitizer}" --tool "$tool" \
    --error-exitcode 99 \
    "$build/tests/cuda/gpu_probes_double" --small \
    --only update,litmus,graph,api,uniform,unique &
  jobs_b="$jobs_b $!"
done
wait "$pyjob"
show pybuild
if [ "$(rc pybuild)" = 0 ]; then
  run pytests 200 sh tools/gpu-python.sh --all --only tests "$pybuild"
else
  echo "$(rc pybuild) $(secs pybuild)" >"$logs/pytests.rc"
  echo "per.cuda's build failed (pybuild.log)" >"$logs/pytests.log"
fi
# shellcheck disable=SC2086
wait $jobs_b
t_rc=$(rc tests)
if grep -q '"result": "SKIP"' "$build/meson-logs/testlog.json" 2>/dev/null; then
  t_rc=77 # a skip: no usable device, a failure here
fi
cp "$build/meson-logs/testlog.json" "$logs/testlog.json" 2>/dev/null
echo "$t_rc $(secs tests)" >"$logs/tests.rc"
if [ "$t_rc" = 77 ]; then
  finish tests "a test skipped: no usable CUDA device"
else
  finish tests
fi
# a sanitizer's summary: "ERROR SUMMARY: N errors" (racecheck's may be
# "RACECHECK SUMMARY: N hazards displayed (...)"); 0 of them to pass
summary='(ERROR|RACECHECK) SUMMARY'
for tool in memcheck racecheck synccheck; do
  s_rc=$(rc "$tool")
  if [ "$s_rc" = 0 ] && ! grep -qE "$summary: 0 (errors|hazards)" \
    "$logs/$tool.log"; then
    s_rc=98 # no clean summary seen
  fi
  echo "$s_rc $(secs "$tool")" >"$logs/$tool.rc"
  finish "$tool" "$(grep -m1 -oE "$summary: .*" "$logs/$tool.log" ||
    echo "no summary; exit status $s_rc")"
done
finish pytests

for real in double float; do
  echo "== probes ($real)"
  run "probes_$real" 150 "$build/tests/cuda/gpu_probes_$real"
  p_rc=$(rc "probes_$real")
  if [ "$p_rc" = 0 ] && grep -q '^SKIP ' "$logs/probes_$real.log"; then
    p_rc=77 # a probe the device could not run: a failure here
  fi
  echo "$p_rc $(secs "probes_$real")" >"$logs/probes_$real.rc"
  finish "probes_$real" "$(grep -c '^PASS ' "$logs/probes_$real.log") PASS, $(
    grep -c '^FAIL ' "$logs/probes_$real.log") FAIL, $(
    grep -c '^SKIP ' "$logs/probes_$real.log") SKIP$(
    grep -q '^WEAK' "$logs/probes_$real.log" && echo ', WEAK litmus'
  ); exit status $p_rc"
done

for real in double float; do
  echo "== benchmark ($real, the whole grid)"
  rm -f "$out/gpu_$real.csv"
  # shellcheck disable=SC2016 # sh -c's own $1 .. $3
  run "bench_$real" 120 sh -c '"$1" --csv "$2" >"$3"; r=$?; cat "$3"; exit $r' \
    bench "$build/bench/cuda/bench_cuda_$real" "$out/gpu_$real.csv" \
    "$out/gpu_$real.txt"
  finish "bench_$real"
done

echo "== per.cuda: the DQN example, then the peer benchmark"
run dqn 150 sh tools/gpu-python.sh --all --only dqn "$pybuild"
finish dqn "$(grep -m1 -E '^(solved|not solved)' "$logs/dqn.log" ||
  echo "exit status $(rc dqn)")"
run peers 150 sh tools/gpu-python.sh --all --only peers "$pybuild"
finish peers

echo "== gpu-check --all: $(($(date +%s) - t0)) s of $budget; $out/gpu.md"
cat "$out/gpu.md"
exit $status
