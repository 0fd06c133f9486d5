#!/usr/bin/env bash
# Builds brisk and runs its main job: `tools/main.sh [brisk arguments]`.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
[ -f build/build.ninja ] || meson setup build
ninja -C build >/dev/null
build/tools/brisk version >&2
# The main job: generate text. Without a model, brisk run fetches
# SmolLM2-135M-Instruct once through pip into ~/.cache/brisk.
if [ $# -eq 0 ]; then set -- run -p "The capital of France is" -n 64; fi
exec build/tools/brisk "$@"
