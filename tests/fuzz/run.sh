#!/usr/bin/env bash
# Fuzzes brisk's parsers with libFuzzer: tests/fuzz/run.sh SECONDS [TARGET...]
#
# Sets up build-fuzz (clang, -Dfuzz=enabled, ASan + UBSan, the whole library
# instrumented for coverage), builds the targets listed in
# tests/fuzz/meson.build and their seed corpora, then runs each target (all
# by default; TARGET is a name like "gguf") for SECONDS. The corpus grows in
# build-fuzz/fuzz-corpus/TARGET across runs; a crashing input is saved as
# build-fuzz/fuzz-artifacts/TARGET-crash-*. Exits non-zero on any crash,
# leak, sanitizer report or timeout. BRISK_FUZZ_RUNS=N also stops each
# target after N executions (tests/fuzz/campaign.sh uses it); a crash
# reproducer worth keeping goes into tests/fuzz/corpus/TARGET/, which
# `meson test --suite fuzz` replays.
set -euo pipefail

if [ $# -lt 1 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
  echo "usage: $0 SECONDS [TARGET...]" >&2
  exit 2
fi
seconds=$1
shift
cd "$(dirname "$0")/../.."
build=${BRISK_FUZZ_BUILD:-build-fuzz}

if [ ! -f "$build/build.ninja" ]; then
  CC=clang CXX=clang++ meson setup "$build" \
    -Dfuzz=enabled -Dcuda=disabled -Dbuildtype=debugoptimized \
    -Db_sanitize=address,undefined -Db_lundef=false \
    -Dc_args=-fsanitize=fuzzer-no-link -Dcpp_args=-fsanitize=fuzzer-no-link
fi

# The target names, as meson knows them (fuzz_NAME executables), after
# meson has seen any change to the build files.
ninja -C "$build" build.ninja > /dev/null
all=$(meson introspect --targets "$build" | python3 -c '
import json, sys
for t in json.load(sys.stdin):
    if t["type"] == "executable" and t["name"].startswith("fuzz_"):
        print(t["name"][len("fuzz_"):])')
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  read -r -a targets <<< "$(echo $all)"
fi
for t in "${targets[@]}"; do
  if ! grep -qx "$t" <<< "$all"; then
    echo "unknown fuzz target '$t' (known: $(echo $all))" >&2
    exit 2
  fi
done

ninja_targets=()
for t in "${targets[@]}"; do
  ninja_targets+=("tests/fuzz/fuzz_$t")
  [ -f "tests/fuzz/seeds_$t.c" ] && ninja_targets+=("tests/fuzz/seeds_$t")
done
ninja -C "$build" -j"${BRISK_FUZZ_JOBS:-2}" "${ninja_targets[@]}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
mkdir -p "$build/fuzz-artifacts"
failed=()
for t in "${targets[@]}"; do
  corpus="$build/fuzz-corpus/$t"
  mkdir -p "$corpus"
  seeds=()
  [ -d "$build/tests/fuzz/seeds_$t" ] && seeds=("$build/tests/fuzz/seeds_$t")
  echo "== fuzzing $t for ${seconds}s (corpus $corpus)"
  runs=()
  [ -n "${BRISK_FUZZ_RUNS:-}" ] && runs=(-runs="$BRISK_FUZZ_RUNS")
  saved=()
  [ -d "tests/fuzz/corpus/$t" ] && saved=("tests/fuzz/corpus/$t")
  if ! "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" "${runs[@]}" -timeout=10 \
      -rss_limit_mb=2048 -max_len=16384 \
      -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/$t-" "$corpus" "${seeds[@]}" \
      "${saved[@]}"; then
    echo "== fuzz_$t FAILED; reproduce with: $build/tests/fuzz/fuzz_$t $build/fuzz-artifacts/$t-*" >&2
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "== fuzzing failed: ${failed[*]}" >&2
  exit 1
fi
echo "== fuzzing passed: ${targets[*]}"
