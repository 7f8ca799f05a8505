#!/usr/bin/env bash
# Generation speed and peak memory of `tpugraphs synth` for a 100k-node layout program with 10k
# configurations (random and default search), plus the Google Benchmark figures of the
# generator and the cost model.
#
# Usage: tools/bench/bench-synth.sh [NODES] [CONFIGS] [WORKDIR]
#   BUILD_DIR (default build) holds bench_synth; the binary is tools/lib/tpugraphs-binary.sh's
#   (TPUGRAPHS, else BUILD_DIR's). Defaults: 100000 nodes, 10000 configs, a fresh directory under /tmp (removed at exit).
set -euo pipefail
BUILD_DIR=${BUILD_DIR:-build}
NODES=${1:-100000}
CONFIGS=${2:-10000}
WORK=${3:-$(mktemp -d /tmp/tpugraphs-bench-synth-XXXXXX)}
trap 'rm -rf "$WORK"' EXIT
here=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tools/lib/bench-machine.sh
source "$here/tools/lib/bench-machine.sh"
# shellcheck source=tools/lib/tpugraphs-binary.sh
source "$here/tools/lib/tpugraphs-binary.sh"
TPUG=$(tpugraphs_binary)   # the build being measured
echo "cores: $(nproc)"
bench_machine_header
for search in random default; do
  /usr/bin/time -v "$TPUG" -q synth --nodes "$NODES" --graphs 1 --configs "$CONFIGS" \
    --search "$search" --seed 1 --output "$WORK/$search" > "$WORK/table.txt" 2> "$WORK/time.txt"
  rss=$(grep 'Maximum resident set size' "$WORK/time.txt" | awk '{print $6}')
  wall=$(grep 'Elapsed (wall clock)' "$WORK/time.txt" | awk '{print $8}')
  cpu=$(grep 'Percent of CPU' "$WORK/time.txt" | awk '{print $7}')
  file=$(find "$WORK/$search" -name '*.pb')
  size=$(stat -c %s "$file")
  row=$(tail -1 "$WORK/table.txt")
  echo "synth layout --search $search: $NODES nodes x $CONFIGS configs: wall $wall (CPU $cpu)," \
    "peak RSS $((rss / 1024)) MiB, file $((size / 1000000)) MB"
  echo "  $(head -1 "$WORK/table.txt" | cut -f1-10)"
  echo "  $(echo "$row" | cut -f1-10)"
  rm -rf "${WORK:?}/$search"
done
"$BUILD_DIR/tools/bench/bench_synth" --benchmark_min_time=0.2
bench_machine_footer
