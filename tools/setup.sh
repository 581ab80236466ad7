#!/bin/sh
# tools/setup.sh DIR [meson options...]: configure DIR, or reconfigure it
# when it already exists. PER_GPU_ARCH (a gpu_arch value, e.g. sm_90),
# when set, is passed as -Dgpu_arch before the options (CI builds one
# arch; see .ci/run).
dir=$1
shift
if [ -f "$dir/build.ninja" ]; then
  meson setup --reconfigure "$dir" ${PER_GPU_ARCH:+"-Dgpu_arch=$PER_GPU_ARCH"} "$@"
else
  meson setup "$dir" ${PER_GPU_ARCH:+"-Dgpu_arch=$PER_GPU_ARCH"} "$@"
fi
