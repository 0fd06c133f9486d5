#!/usr/bin/env bash
# Builds brisk and runs the whole test suite: `tools/test.sh [BUILD_DIR]`.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
dir=${1:-build}
werror=()
[ -n "${CI:-}" ] && werror=(--werror)
# In CI a CUDA toolkit on the machine must give the plugin (a toolkit that
# meson cannot use is an error, not a build without it).
cuda=()
[ -n "${CI:-}" ] && command -v nvcc >/dev/null && cuda=(-Dcuda=enabled)
[ -f "$dir/build.ninja" ] || meson setup "$dir" "${werror[@]}" "${cuda[@]}"
ninja -C "$dir"
meson test -C "$dir" --print-errorlogs
