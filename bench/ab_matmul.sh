#!/bin/sh
# A/B of two bench_matmul_cpu binaries (e.g. two builds), alternated ROUNDS
# times on one shape; prints each one's median over rounds and the median,
# min and max of the per-round time ratios B/A (< 1: B is faster).
#   bench/ab_matmul.sh A_BINARY B_BINARY ROUNDS TYPE N K M [REPS]
set -eu
a=$1 b=$2 rounds=$3
shift 3
i=0
while [ "$i" -lt "$rounds" ]; do
  ta=$("$a" "$@" | sed 's/.*median \([0-9.]*\) ms.*/\1/')
  tb=$("$b" "$@" | sed 's/.*median \([0-9.]*\) ms.*/\1/')
  echo "$ta $tb"
  i=$((i + 1))
done | python3 -c '
import statistics, sys
rows = [tuple(map(float, l.split())) for l in sys.stdin]
r = [b / a for a, b in rows]
print("%s: A %.3f ms, B %.3f ms (medians of %d rounds); B/A time median %.3f, min %.3f, max %.3f"
      % (" ".join(sys.argv[1:]), statistics.median(a for a, _ in rows),
         statistics.median(b for _, b in rows), len(rows), statistics.median(r), min(r), max(r)))
' "$@"
