#!/usr/bin/env bash
# Builds brisk and runs its main job: `tools/main.sh [brisk arguments]`.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
[ -f build/build.ninja ] || meson setup build
ninja -C build >/dev/null
if [ $# -eq 0 ]; then set -- version; fi
exec build/tools/brisk "$@"
