#!/usr/bin/env bash
# Regenerates the bundled sample in data/sample/ with the built binary (byte for byte: the
# output depends only on the flags and seeds below, not on the thread count).
#
# Usage: tools/dev/make-sample.sh
#   (the binary tools/lib/tpugraphs-binary.sh finds: TPUGRAPHS, BUILD_DIR, PATH, build/)
#   data/sample/pb/tile/synth/{train,valid,test}/kernel_*.pb          30 tile kernels
#   data/sample/pb/layout/synth/random/{train,valid,test}/program_*.pb 12 layout programs
set -euo pipefail
cd "$(dirname "$0")/../.."
here=$(pwd)
# shellcheck source=tools/lib/tpugraphs-binary.sh
source "$here/tools/lib/tpugraphs-binary.sh"
BIN=$(tpugraphs_binary)
OUT=data/sample
rm -rf "$OUT/pb"
"$BIN" -q synth --task tile --graphs 30 --configs 100 --seed 1 --splits 0.7,0.15,0.15 \
  --output "$OUT" > /dev/null
"$BIN" -q synth --task layout --graphs 12 --min-nodes 300 --max-nodes 2500 --configs 150 \
  --seed 2 --splits 0.7,0.15,0.15 --output "$OUT" > /dev/null
du -sh "$OUT"
