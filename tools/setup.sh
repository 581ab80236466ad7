#!/bin/sh
# tools/setup.sh DIR [meson options...]: configure DIR, or reconfigure it
# when it already exists.
dir=$1
shift
if [ -f "$dir/build.ninja" ]; then
  meson setup --reconfigure "$dir" "$@"
else
  meson setup "$dir" "$@"
fi
