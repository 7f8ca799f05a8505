#!/usr/bin/env bash
# Builds and runs the GNN cost-model benchmarks (tools/bench/bench_model.cc) and prints a table:
# time per config and configs/s for forward and forward+backward against nodes and configs, for
# layout, tile late join and tile early join, plus the Eigen float GEMM rate measured in the same
# run and the model's dense GFLOP/s as a fraction of it. Rates use CPU time (the machine may be
# shared); the JSON keeps wall times too.
#
# Usage: tools/bench/bench-model.sh [--native] [--filter REGEX] [--out FILE.json]
#   --native   configure a separate build (${BUILD_DIR}-native) with -DTPUGRAPHS_NATIVE=ON
#              (the default of new build dirs; useful when ${BUILD_DIR} was configured portable)
#   --filter   Google Benchmark filter (default: all)
#   --out      where to keep the raw JSON (default: a temporary file)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
# shellcheck source=tools/lib/bench-machine.sh
source tools/lib/bench-machine.sh
filter="."
out=""
native=0
while [ $# -gt 0 ]; do
  case "$1" in
    --native) native=1 ;;
    --filter) filter="$2"; shift ;;
    --out) out="$2"; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "bench-model.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
if [ "$native" = 1 ]; then
  BUILD_DIR="${BUILD_DIR}-native"
  if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DTPUGRAPHS_NATIVE=ON >&2
  fi
fi
BUILD_DIR="$BUILD_DIR" bash tools/build.sh --target bench_model
json=${out:-$(mktemp --suffix=.json)}
echo "running bench_model; raw results: $json" >&2
bench_machine_header
"$BUILD_DIR/tools/bench/bench_model" --benchmark_filter="$filter" \
  --benchmark_out="$json" --benchmark_out_format=json >&2
/usr/bin/python3 tools/bench/bench-model-report.py "$json"
bench_machine_footer
