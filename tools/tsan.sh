#!/usr/bin/env bash
# ThreadSanitizer run of the tests that exercise threads: the thread pool,
# the host parallel_for hook, multi-threaded kernels and forward passes, and
# every engine test (one thread submits and cancels while another steps), the
# memory cap's accounts, many handles from many threads (embed_stress), and
# brisk serve (connection threads submit, wait and cancel; one steps).
# Usage: tools/tsan.sh [BUILD_DIR]   (default build-tsan)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-tsan}
werror=()
[ -n "${CI:-}" ] && werror=(--werror)
[ -f "$dir/build.ninja" ] || meson setup "$dir" "${werror[@]}" -Db_sanitize=thread -Db_lundef=false
# Regenerate first if meson files changed, so that the list is current.
ninja -C "$dir" build.ninja >/dev/null
# Only the tests below are built: TSan builds are slow and the rest of the
# suite is single-threaded.
mapfile -t tests < <(meson test -C "$dir" --list --no-rebuild 2>/dev/null |
  sed -En 's#^brisk / (engine.*|embed_stress|core_threadpool|core_memcap|core_misc|backend_matmul|forward|parallel_comm|cli_serve)$#\1#p')
[ "${#tests[@]}" -gt 0 ] || { echo "tsan.sh: no tests matched" >&2; exit 1; }
targets=()
for t in "${tests[@]}"; do
  if [ "$t" = cli_serve ]; then targets+=(tools/brisk); else targets+=("tests/test_$t"); fi
done
ninja -C "$dir" "${targets[@]}"
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
meson test -C "$dir" --no-rebuild --print-errorlogs "${tests[@]}"
