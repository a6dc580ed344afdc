#!/usr/bin/env bash
# Word count's guarantee levels, measured: one fixed input, one injected
# failure, parallelism 2, in each configuration — no checkpointing,
# AT_LEAST_ONCE, EXACTLY_ONCE with the stdout sink, EXACTLY_ONCE end to end
# with the file sink (two-phase commit), and EXACTLY_ONCE with the
# idempotent upsert table — each compared with a failure-free run.
#
# Usage: scripts/guarantees.sh [-p N] [-lines N] [-distinct N] [-rate N]
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/gflink" .
go run ./scripts/guarantees -gflink "$tmp/gflink" "$@"
