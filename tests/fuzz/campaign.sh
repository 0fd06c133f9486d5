#!/usr/bin/env bash
# The long fuzzing campaign, outside CI: tests/fuzz/campaign.sh [HOURS_CAP] [TARGET...]
#
# Runs every fuzz target (or the ones named) through tests/fuzz/run.sh until
# it has executed 10^7 inputs, or for at most HOURS_CAP hours (default 2)
# for the slow ones, keeping the corpus in build-fuzz/fuzz-corpus/TARGET
# (so campaigns add up). Writes build-fuzz/campaign/summary.md: per target
# the executions, the time taken, executions per second, the corpus size
# (files and bytes), coverage (libFuzzer's cov and ft counters) and peak
# RSS, ready to paste into docs/security.md. Exits non-zero if any target
# found a crash, leak, sanitizer report or timeout (its log says which).
set -euo pipefail
cd "$(dirname "$0")/../.."
cap_h=${1:-2}
[ $# -gt 0 ] && shift
build=${BRISK_FUZZ_BUILD:-build-fuzz}
out="$build/campaign"
mkdir -p "$out"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  # Every name in the fuzz_targets list of tests/fuzz/meson.build.
  read -r -a targets <<< "$(sed -n "/^fuzz_targets = \[/,/^\]/p" tests/fuzz/meson.build |
    grep -o "'[a-z0-9_]*'" | tr -d "'" | tr '\n' ' ')"
fi
seconds=$(python3 -c "print(int(float('$cap_h') * 3600))")
summary="$out/summary.md"
{
  echo "| target | executions | seconds | exec/s | corpus files | corpus KiB | cov | ft | peak RSS MiB | result |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
} > "$summary"
status=0
for t in "${targets[@]}"; do
  log="$out/$t.log"
  start=$(date +%s)
  result=ok
  BRISK_FUZZ_RUNS=10000000 tests/fuzz/run.sh "$seconds" "$t" > "$log" 2>&1 || { result=FAILED; status=1; }
  took=$(( $(date +%s) - start ))
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo 0)
  rss=$(grep -o 'stat::peak_rss_mb: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo 0)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo 0)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo 0)
  corpus="$build/fuzz-corpus/$t"
  files=$(find "$corpus" -type f | wc -l)
  kib=$(du -sk "$corpus" | cut -f1)
  rate=$(( took > 0 ? execs / took : execs ))
  echo "| $t | $execs | $took | $rate | $files | $kib | $cov | $ft | $rss | $result |" >> "$summary"
  echo "== $t: $execs executions in ${took}s, $result (log $log)"
done
cat "$summary"
exit $status
