#!/usr/bin/env bash
# Raw-dump ingest throughput on the real dumps (tests/data/real/raw): protobuf parse alone,
# LoadRawDump on one file, and 32 copies loaded with 1 thread and with all cores.
# MB/s are of raw protobuf bytes ("bytes_per_second" in the output). Usage:
#   BUILD_DIR=build tools/bench-ingest.sh [extra google-benchmark flags]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
bash tools/build.sh --target bench_ingest_raw
echo "cores: $(nproc)" >&2
"$BUILD_DIR/tools/bench/bench_ingest_raw" --benchmark_min_time=1 "$@"
