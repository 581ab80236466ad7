#!/bin/sh
# Build the Python package as it is published and test what was built:
# `python -m build` makes the sdist (meson dist: the files of the last
# commit) and then the wheel from that sdist, so a file the sdist misses
# fails here; the wheel goes into a fresh virtual environment and the
# Python tests run against it, from outside the repository, so `import
# per` is the installed wheel and never python/per (CI's stage 'wheel').
#   sh tools/wheel.sh [PYTEST ARGS]
# Writes build-wheel/: tools (a venv with build), dist (the sdist and
# the wheel), venv (the fresh venv the wheel is tested in), build.log.
# Warnings are errors, as in tools/pyvenv.sh. PYTHON picks
# the interpreter (default python3). Needs git, a C compiler, Python >=
# 3.9 with its headers and venv module (installed from Debian when
# missing) and PyPI (build; meson-python, meson and ninja in build's
# isolated environment; numpy, pytest and pyzmq). PER_GPU_ARCH (a gpu_arch
# value), when set, is per._cuda's GPU code (CI: one pass per arch).
set -e
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
if ! command -v "$py" >/dev/null 2>&1; then
  sh tools/deps.sh python3 python3-dev python3-venv
fi
"$py" - <<'PY' || sh tools/deps.sh python3-dev python3-venv
import os, sys, sysconfig, venv, ensurepip
inc = sysconfig.get_paths()["include"]
sys.exit(0 if os.path.exists(os.path.join(inc, "Python.h")) else 1)
PY
command -v git >/dev/null 2>&1 || sh tools/deps.sh git
root=$(pwd)
out=$root/build-wheel
pip="-m pip install -q --disable-pip-version-check"
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "wheel: uncommitted changes are not in the sdist (it holds the last commit)"
fi

# build, in a venv of its own (it makes an isolated one per build)
if [ ! -x "$out/tools/bin/python" ]; then
  rm -rf "$out/tools"
  "$py" -m venv "$out/tools"
fi
# shellcheck disable=SC2086 # $pip is words
"$out/tools/bin/python" $pip build
rm -rf "$out/dist"
"$out/tools/bin/python" -m build --outdir "$out/dist" \
  --config-setting=setup-args=-Dwerror=true \
  ${PER_GPU_ARCH:+--config-setting=setup-args=-Dgpu_arch=$PER_GPU_ARCH} \
  . >"$out/build.log" 2>&1 ||
  {
    tail -n 40 "$out/build.log"
    echo "wheel: python -m build failed (log: $out/build.log)"
    exit 1
  }
sdist=$(ls "$out"/dist/per_replay-*.tar.gz)
wheel=$(ls "$out"/dist/per_replay-*.whl)
echo "wheel: built $(basename "$sdist") and, from it, $(basename "$wheel")"

# What the two archives hold: the sdist the sources the wheel needs, the
# wheel the package only (per/ and its metadata).
"$py" - "$sdist" "$wheel" <<'PY'
import shutil, sys, tarfile, zipfile
sdist, wheel = sys.argv[1:]
top = tarfile.open(sdist).getnames()[0].split("/")[0]
names = {n.split("/", 1)[1] for n in tarfile.open(sdist).getnames() if "/" in n}
need = {"pyproject.toml", "meson.build", "per.h", "python/meson.build",
        "python/per/_per.c", "python/per/__init__.py", "python/per/_per.pyi",
        "python/per/_per32.pyi",
        "python/per/config.py", "python/per/pyper_config.h",
        "python/per/py.typed", "python/per/mpi.py", "python/per/_mpi.c",
        "python/per/_mpi.pyi", "python/per/_cuda.pyi",
        "python/per/shard.h", "per_mpi.h", "per_frames.h", "per_traj.h",
        "per_store.h", "per_net.h", "python/per/net.py",
        "python/per/server.py",
        "README.md", "LICENSE", "PKG-INFO",
        "python/per/_cuda.cpp", "python/per/cuda.py", "python/per/seeds.py",
        "per_cuda.h",
        "per_cuda.cu", "tests/cuda/cuda_host_shim.h"}
missing = sorted(need - names)
files = zipfile.ZipFile(wheel).namelist()
stray = [n for n in files if not n.startswith(("per/", "per_replay-"))]
pkg = {n for n in files if n.startswith("per/")}
want = {"per/__init__.py", "per/config.py", "per/_per.pyi", "per/_per32.pyi",
        "per/py.typed",
        "per/mpi.py", "per/_mpi.pyi", "per/cuda.py", "per/_cuda.pyi",
        "per/seeds.py", "per/net.py", "per/server.py"}
# the extensions: per._per and per._per32 (double and float nodes)
# always, per._mpi where an MPI was found, per._cuda and per._cuda32
# where nvcc was (never per._cuda_host: tests only)
ext = (["_per", "_per32"] + (["_mpi"] if shutil.which("mpicc") else []) +
       (["_cuda", "_cuda32"] if shutil.which("nvcc") else []))
if any(n.startswith("per/_cuda_host") for n in files):
    sys.exit("wheel: per._cuda_host (the tests' CPU emulation) is in the wheel")
if missing or stray or not want <= pkg or not all(
        any(n.startswith(f"per/{e}.") and not n.endswith(".pyi") for n in pkg)
        for e in ext):
    sys.exit(f"wheel: sdist {top} lacks {missing}; wheel has stray {stray}, "
             f"package files {sorted(pkg)}")
print(f"wheel: sdist {len(names)} files, wheel {len(files)} files ({' '.join(sorted(pkg))})")
PY

# A fresh venv every run: only the wheel and what it depends on.
rm -rf "$out/venv"
"$py" -m venv "$out/venv"
# shellcheck disable=SC2086
"$out/venv/bin/python" $pip "$wheel" pytest pyzmq
cd "$out"
"$out/venv/bin/python" - "$out/venv" <<'PY'
import os, sys
from importlib.metadata import version
import per
venv = os.path.realpath(sys.argv[1])
where = os.path.realpath(per.__file__)
assert where.startswith(venv + os.sep), f"per imported from {where}, not {venv}"
assert version("per-replay") == per.__version__, (version("per-replay"), per.__version__)
print("wheel: per-replay", per.__version__, "from", where)
# per.cuda: built where nvcc was; without a GPU it imports, says so, and
# a buffer is a per.Error naming the CUDA error, not a crash
import shutil
import numpy as np
import per.cuda as pc
if shutil.which("nvcc"):
    assert pc.available(), pc.unavailable_reason()
    n = pc.device_count()
    print("wheel: per.cuda built;", n, "CUDA device(s) here")
    if n == 0:
        try:
            pc.ReplayBuffer(8, {"x": np.float32}, device=0)
        except per.Error as e:
            print("wheel: per.cuda without a GPU:", e)
        else:
            sys.exit("wheel: per.cuda.ReplayBuffer without a GPU did not fail")
else:
    assert not pc.available() and "nvcc" in pc.unavailable_reason()
    print("wheel: no nvcc here, per.cuda says:", pc.unavailable_reason()[:60], "...")
PY
# the per-server command the wheel installs (per.server, over per.net)
"$out/venv/bin/per-server" --version | grep -q "wire format 1" ||
  { echo "wheel: per-server --version failed" >&2; exit 1; }
echo "wheel: $("$out/venv/bin/per-server" --version)"
"$out/venv/bin/python" -m pytest -q -p no:cacheprovider "$root/python/tests" "$@"
