#!/usr/bin/env bash
# CRC-32 throughput (tools/bench/bench_crc32.cc): tpugraphs' Crc32 (zip.h), zlib's crc32_z and,
# when the build has libdeflate, libdeflate_crc32, on buffers of 4 KiB to 16 MiB. Compare the
# bytes_per_second column (docs/npz.md, "CRC-32").
#
# Usage: tools/bench/bench-crc32.sh [extra Google Benchmark flags, e.g. --benchmark_repetitions=3]
# Environment: BUILD_DIR (default build).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
# shellcheck source=tools/lib/bench-machine.sh
source tools/lib/bench-machine.sh
BUILD_DIR=$BUILD_DIR bash tools/build.sh --target bench_crc32
bench_machine_header
"$BUILD_DIR/tools/bench/bench_crc32" "$@"
bench_machine_footer
