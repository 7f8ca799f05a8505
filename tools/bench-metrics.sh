#!/usr/bin/env bash
# Benchmark of the ranking metrics (tools/bench/bench_metrics.cc): Kendall tau-b at 1k/10k/100k
# configs (ours and the O(n^2) reference), the metrics of one 100k-config layout graph, and the
# evaluation of a layout collection of 20 graphs x 100k configs at 1 and 2 threads; then the same
# data through scipy.stats.kendalltau and the official evaluator's per-graph loop with Debian's
# /usr/bin/python3, with the values compared and the speed ratios printed.
#
# Usage: tools/bench-metrics.sh [extra Google Benchmark flags, e.g. --benchmark_repetitions=3]
# Environment: BUILD_DIR (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BUILD_DIR=$BUILD_DIR bash tools/build.sh --target bench_metrics
echo "== machine: $(nproc) hardware threads, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"$BUILD_DIR/tools/bench/bench_metrics" "$@"
