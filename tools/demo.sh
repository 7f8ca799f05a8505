#!/usr/bin/env bash
# Sets up a fresh machine, builds tpugraphs and runs the main job on the bundled synthetic sample
# (data/sample): ingest -> stats -> train -> evaluate, for one tile and one layout collection,
# each model scored against the random baseline, then writes one HTML report of both models
# (learning curves, ranking plots) and prints its path. Takes a few minutes on 2 cores.
# Outputs go to ${OUT:-out/demo}.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
bash tools/build.sh --target tpugraphs
# The Python package for /usr/bin/python3 (docs/python.md): `import tpugraphs` works after this.
bash tools/install-python.sh
here=$(pwd)
# shellcheck source=tools/lib/tpugraphs-binary.sh
source "$here/tools/lib/tpugraphs-binary.sh"
BUILD_DIR=${BUILD_DIR:-build}
BIN=$(tpugraphs_binary)   # the binary just built
OUT="${OUT:-out/demo}"
mkdir -p "$OUT"

echo "== ingest the bundled sample (raw XLA tuning dumps written by tpugraphs synth)" >&2
"$BIN" ingest data/sample --output "$OUT/sample.tpug"

echo "== stats" >&2
"$BIN" stats "$OUT/sample.tpug"

models=()
for collection in tile:synth layout:synth:random; do
  model="$OUT/$(echo "$collection" | tr ':' '_').model"
  echo "== train $collection" >&2
  "$BIN" train --dataset "$OUT/sample.tpug" --collection "$collection" --output "$model" \
    --seed 1
  models+=(--model "$model")
  echo "== evaluate $collection on the test split (model, then random baseline)" >&2
  "$BIN" evaluate --data "$OUT/sample.tpug" --collection "$collection" --split test \
    --model "$model"
  "$BIN" evaluate --data "$OUT/sample.tpug" --collection "$collection" --split test \
    --baseline random
done

echo "== report: learning curves and test-split ranking plots of both models" >&2
"$BIN" report "${models[@]}" --data "$OUT/sample.tpug" --split test \
  --title "tpugraphs demo: sample models" -o "$OUT/report.html"   # prints the path
echo "open it in a browser, or render it to PNG: tools/dev/render-report.sh $OUT/report.html" >&2
