#!/usr/bin/env bash
# Assembles a Kaggle submission ("Fast or Slow? Predict AI Model Runtime") from the models that
# tools/train-all-collections.sh trained: predicts each collection's test split with its own
# model, merges the five CSVs and checks the IDs against the sample submission.
#
# Usage: tools/make-submission.sh OUT_DIR SUBMISSION.csv [SAMPLE_SUBMISSION.csv]
#   OUT_DIR     the directory with <name>.tpug and <name>.tpm of each collection
#   SAMPLE      Kaggle's sample_submission.csv; the merged file must have exactly its IDs
#               (missing or extra IDs are listed and nothing is written)
# Environment: TPUGRAPHS (binary), TPUGRAPHS_GLOBAL_FLAGS (e.g. "-j 2").
set -euo pipefail

if [ $# -lt 2 ]; then
  sed -n '2,11p' "$0" >&2
  exit 2
fi
out=$1
submission=$2
sample=${3:-}
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${TPUGRAPHS:-$(command -v tpugraphs || echo "$here/build/tpugraphs")}
read -r -a global <<<"${TPUGRAPHS_GLOBAL_FLAGS:-}"

parts=()
for entry in tile_xla:tile:xla layout_xla_random:layout:xla:random \
  layout_xla_default:layout:xla:default layout_nlp_random:layout:nlp:random \
  layout_nlp_default:layout:nlp:default; do
  name=${entry%%:*}
  collection=${entry#*:}
  data="$out/$name.tpug"
  model="$out/$name.tpm"
  if [ ! -f "$data" ] || [ ! -f "$model" ]; then
    echo "== $collection: no $data or $model, skipped" >&2
    continue
  fi
  echo "== $collection: predict the test split" >&2
  "$bin" "${global[@]}" predict --data "$data" --model "$model" --split test \
    --collection "$collection" --format kaggle -o "$out/$name.test.csv"
  parts+=("$out/$name.test.csv")
done
if [ ${#parts[@]} -eq 0 ]; then
  echo "no trained collection in $out" >&2
  exit 1
fi

check=()
[ -n "$sample" ] && check=(--check-ids "$sample")
"$bin" "${global[@]}" predict --merge "${parts[@]}" -o "$submission" "${check[@]}"
echo "== wrote $submission ($(($(wc -l <"$submission") - 1)) rows)" >&2
