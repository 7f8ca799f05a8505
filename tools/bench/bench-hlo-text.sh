#!/usr/bin/env bash
# HLO text ingest throughput: a ~100k-instruction synthetic program printed as HLO text (current
# and older style), parsed alone, parsed + featurized, and loaded from a file with LoadRawDump.
# MB/s of text on one core ("bytes_per_second"). Usage:
#   BUILD_DIR=build tools/bench/bench-hlo-text.sh [extra google-benchmark flags]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
# shellcheck source=tools/lib/bench-machine.sh
source tools/lib/bench-machine.sh
bash tools/build.sh --target bench_hlo_text
bench_machine_header
"$BUILD_DIR/tools/bench/bench_hlo_text" --benchmark_min_time=1 "$@"
bench_machine_footer
