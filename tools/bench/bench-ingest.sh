#!/usr/bin/env bash
# Raw-dump ingest throughput on the real dumps (tests/data/real/raw): protobuf parse alone,
# LoadRawDump on one file, and 32 copies loaded with 1 thread and with all cores.
# MB/s are of raw protobuf bytes per CPU second, i.e. per core ("bytes_per_second" in the
# output). Usage:
#   BUILD_DIR=build tools/bench/bench-ingest.sh [extra google-benchmark flags]
# Before/after in one run: BASE_BUILD_DIR names the build directory of another revision (e.g.
# `git archive main | tar -x -C /tmp/base && BUILD_DIR=build bash tools/build.sh --target
# bench_ingest_raw` in /tmp/base); its bench_ingest_raw runs on the same files, alternating
# with ours ROUNDS times (default 2), and the ratio of LoadRawDump throughputs is printed.
# The machine load (uptime) is printed with the figures.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
# shellcheck source=tools/lib/bench-machine.sh
source tools/lib/bench-machine.sh
bash tools/build.sh --target bench_ingest_raw
export TPUGRAPHS_REAL_DATA=${TPUGRAPHS_REAL_DATA:-$PWD/tests/data/real}
bench_machine_header
if [ -z "${BASE_BUILD_DIR:-}" ]; then
  "$BUILD_DIR/tools/bench/bench_ingest_raw" --benchmark_min_time=1 "$@"
  bench_machine_footer
  exit 0
fi
mbs() {  # MB/s of each BM_LoadRawDump/<dump> line of a run
  "$1/tools/bench/bench_ingest_raw" --benchmark_min_time=1 --benchmark_filter='BM_LoadRawDump/' \
    --benchmark_format=csv 2>/dev/null |
    awk -F, '/BM_LoadRawDump\// {gsub(/"/, "", $1); printf "%s %.1f\n", $1, $6 / 1e6}'
}
printf '%-22s %10s %10s %7s\n' benchmark "base MB/s" "ours MB/s" ratio
for round in $(seq "${ROUNDS:-2}"); do
  base=$(mbs "$BASE_BUILD_DIR")
  ours=$(mbs "$BUILD_DIR")
  join <(echo "$base") <(echo "$ours") |
    awk -v r="$round" '{printf "%-22s %10.1f %10.1f %7.2f  (round %s)\n", $1, $2, $3, $3 / $2, r}'
done
bench_machine_footer
