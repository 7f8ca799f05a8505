#!/usr/bin/env bash
# Benchmark of the ranking metrics (tools/bench/bench_metrics.cc): Kendall tau-b at 1k/10k/100k
# configs (ours and the O(n^2) reference), the metrics of one 100k-config layout graph, and the
# evaluation of a layout collection of 20 graphs x 100k configs at 1 and 2 threads; then the same
# data through scipy.stats.kendalltau and the official evaluator's per-graph loop with Debian's
# /usr/bin/python3, with the values compared and the speed ratios printed.
#
# Usage: tools/bench/bench-metrics.sh [extra Google Benchmark flags, e.g. --benchmark_repetitions=3]
# Environment: BUILD_DIR (default build).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
# shellcheck source=tools/lib/bench-machine.sh
source tools/lib/bench-machine.sh
BUILD_DIR=$BUILD_DIR bash tools/build.sh --target bench_metrics
bench_machine_header
# The references (scipy, numpy) are /usr/bin/python3 children of bench_metrics: bench_reference
# unsets the OpenBLAS overrides for them. Ours uses no BLAS (Eigen), so it is not affected.
bench_reference /usr/bin/python3 tools/lib/bench_machine.py blas
bench_reference "$BUILD_DIR/tools/bench/bench_metrics" "$@"
bench_machine_footer
