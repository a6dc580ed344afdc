#!/usr/bin/env bash
# gflink's performance figures, each a ratio measured within one run (the
# variants alternate round by round; the median of per-round ratios is
# reported), because absolute times on shared machines drift by ±30%.
#
#   R1  word count throughput of the engine (p=1, checkpointing off) ÷ a
#       hand-written Go loop counting the same input        (target ≥ 0.5)
#   R3  throughput with EXACTLY_ONCE checkpoints every 1 s to the
#       filesystem ÷ checkpointing off                       (target ≥ 0.93)
#
# Input: 20,000,000 words, 100,000 distinct, in a file (page cache).
# Usage: scripts/bench.sh            (about two minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."

out=$(go test -run '^$' -bench 'BenchmarkWordCountRatios$' -benchtime 1x -count 1 ./engine/jobs/ 2>&1) || {
  echo "$out" >&2
  exit 1
}
echo "$out" | grep -E '^\s+bench_test.go:[0-9]+: round' | sed 's/^\s*bench_test.go:[0-9]*: /# /'
line=$(echo "$out" | grep -E '^BenchmarkWordCountRatios')
metric() { echo "$line" | awk -v m="$1" '{for (i = 2; i <= NF; i++) if ($i == m) print $(i-1)}'; }
r1=$(metric R1)
r3=$(metric R3)
printf 'R1=%.2f\n' "$r1"
printf 'R3=%.2f\n' "$r3"
awk -v r1="$r1" -v r3="$r3" 'BEGIN { exit !(r1 >= 0.5 && r3 >= 0.93) }' || {
  echo "a ratio is below its target (R1 >= 0.5, R3 >= 0.93)" >&2
  exit 1
}
