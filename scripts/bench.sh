#!/usr/bin/env bash
# gflink's performance figures, each a ratio measured within one run (the
# variants alternate round by round; the median of per-round ratios is
# reported), because absolute times on shared machines drift by ±30%.
#
#   R1  word count throughput of the engine (p=1, checkpointing off) ÷ a
#       hand-written Go loop counting the same input        (target ≥ 0.5)
#   R3  throughput with EXACTLY_ONCE checkpoints every 1 s to the
#       filesystem ÷ checkpointing off                       (target ≥ 0.93)
#   R8  word count throughput through the exactly-once file sink ÷ through
#       an at-least-once file sink writing the same bytes, EXACTLY_ONCE
#       checkpoints every 1 s (10 M words)                   (target ≥ 0.9)
#   SAVEPOINT_MS     median wall time of `gflink savepoint <id> <dir>` on a
#                    running word count with small state     (target < 100)
#   RUN_DETACHED_MS  median wall time of `gflink run -d` until the job is
#                    RUNNING                                  (target < 300)
#
# Input: 20,000,000 words, 100,000 distinct, in a file (page cache).
# Usage: scripts/bench.sh            (about two minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
export GFLINK_HOME="$tmp/home"
cleanup() {
  # Cancel whatever is still running, then remove the scratch directory.
  for f in "$GFLINK_HOME"/jobs/*.json; do
    [ -e "$f" ] || continue
    id=$(basename "$f" .json)
    "$tmp/gflink" cancel "$id" >/dev/null 2>&1 || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
now_ms() { date +%s%3N; }

go build -o "$tmp/gflink" .
g="$tmp/gflink"

# gflink run -d: until the job is RUNNING (the command returns then).
for i in $(seq 1 11); do
  t0=$(now_ms)
  id=$("$g" run -d -o json wordcount --generate unbounded --rate 1000 --distinct 100 | sed 's/.*"jobId":"\([0-9a-f]*\)".*/\1/')
  t1=$(now_ms)
  echo $((t1 - t0)) >> "$tmp/run.ms"
  "$g" cancel "$id" >/dev/null
done
run_ms=$(median < "$tmp/run.ms")

# gflink savepoint on one running word count with small state.
id=$("$g" run -d -o json wordcount --generate unbounded --rate 1000 --distinct 100 | sed 's/.*"jobId":"\([0-9a-f]*\)".*/\1/')
for i in $(seq 1 21); do
  t0=$(now_ms)
  "$g" savepoint "$id" "$tmp/sp" >/dev/null
  t1=$(now_ms)
  echo $((t1 - t0)) >> "$tmp/sp.ms"
done
"$g" cancel "$id" >/dev/null
sp_ms=$(median < "$tmp/sp.ms")

out=$(go test -run '^$' -bench 'BenchmarkWordCountRatios$|BenchmarkSinkRatio$' -benchtime 1x -count 1 -timeout 30m ./engine/jobs/ 2>&1) || {
  echo "$out" >&2
  exit 1
}
echo "$out" | grep -E '^\s+bench_test.go:[0-9]+: round' | sed 's/^\s*bench_test.go:[0-9]*: /# /'
metric() { echo "$out" | grep -E '^Benchmark' | awk -v m="$1" '{for (i = 2; i <= NF; i++) if ($i == m) print $(i-1)}'; }
r1=$(metric R1)
r3=$(metric R3)
r8=$(metric R8)
printf 'R1=%.2f\n' "$r1"
printf 'R3=%.2f\n' "$r3"
printf 'R8=%.2f\n' "$r8"
echo "SAVEPOINT_MS=$sp_ms"
echo "RUN_DETACHED_MS=$run_ms"
awk -v r1="$r1" -v r3="$r3" -v r8="$r8" -v sp="$sp_ms" -v run="$run_ms" \
  'BEGIN { exit !(r1 >= 0.5 && r3 >= 0.93 && r8 >= 0.9 && sp < 100 && run < 300) }' || {
  echo "a figure misses its target (R1 >= 0.5, R3 >= 0.93, R8 >= 0.9, SAVEPOINT_MS < 100, RUN_DETACHED_MS < 300)" >&2
  exit 1
}
