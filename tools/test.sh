#!/usr/bin/env bash
# Builds brisk and runs the whole test suite: `tools/test.sh [BUILD_DIR]`.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
dir=${1:-build}
werror=()
[ -n "${CI:-}" ] && werror=(--werror)
[ -f "$dir/build.ninja" ] || meson setup "$dir" "${werror[@]}"
ninja -C "$dir"
meson test -C "$dir" --print-errorlogs
