#!/bin/sh
# tools/pyasan.sh [PYTEST ARGS]: per._per and per._per32
# (python/per/_per.c, double and float nodes) built with
# AddressSanitizer and UndefinedBehaviorSanitizer, and the Python tests of
# the parts whose C does the most by hand (TrajectoryAccumulator's add and
# its memory, per.Trajectory, the replay buffer, the trajectory store,
# the float classes and the calls between the two extensions) run
# against them (CI's sanitizers stage). The interpreter is the one of build-py/venv
# (tools/pyvenv.sh, run when it is missing), with the sanitizers' runtimes
# preloaded; the package is a copy of python/per in build-pyasan with the
# instrumented extension in it. Leak checking is off: the interpreter
# keeps its own objects to the end. CC picks the compiler (default gcc).
set -e
cd "$(dirname "$0")/.."
root=$(pwd)
venv=$root/build-py/venv
[ -x "$venv/bin/python" ] || sh tools/pyvenv.sh
py=$venv/bin/python
cc=${CC:-gcc}
out=$root/build-pyasan
rm -rf "$out"
mkdir -p "$out"
cp -R python/per "$out/per"
inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
ext=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
# -O0: the compile is most of the run (7 s against 11 at -O1); the
# warnings that need optimisation are the wheel's build's
for mod in _per _per32; do
  def=
  [ "$mod" = _per32 ] && def=-DPYPER_F32
  # shellcheck disable=SC2086 # CC may be words, def one or none
  $cc -std=c99 -shared -fPIC -O0 -g1 -fno-omit-frame-pointer \
    -fsanitize=address,undefined -fno-sanitize-recover=all \
    -Wall -Wextra -Wpedantic -Werror -I. -Ipython/per -I"$inc" $def \
    python/per/_per.c -o "$out/per/$mod$ext" -lm &
  pids="${pids:-} $!"
done
for p in $pids; do wait "$p"; done  # set -e: a failed compile stops here
# shellcheck disable=SC2086
preload="$($cc -print-file-name=libasan.so) $($cc -print-file-name=libubsan.so)"
cd "$out"
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  LD_PRELOAD="$preload" PYTHONPATH="$out" "$py" - <<'PY'
import os
import per
for mod in (per._per, per._per32):
    where = os.path.realpath(mod.__file__)
    assert os.sep + "build-pyasan" + os.sep in where, \
        f"{mod.__name__} from {where}, not the instrumented one"
    print(f"pyasan: {mod.__name__} from", where)
PY
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  LD_PRELOAD="$preload" PYTHONPATH="$out" "$py" -m pytest -q \
  -p no:cacheprovider "$root/python/tests/test_accumulator.py" \
  "$root/python/tests/test_trajectory.py" "$root/python/tests/test_store.py" \
  "$root/python/tests/test_buffer.py" "$root/python/tests/test_nodes.py" \
  "$root/python/tests/test_frames.py" "$@"
