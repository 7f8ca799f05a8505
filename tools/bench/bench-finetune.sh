#!/usr/bin/env bash
# When does `train --init-from` (fine-tuning, docs/train.md) help? A layout model trained on one
# collection (synthetic programs tuned by random search) is adapted to another (the same kind of
# programs tuned by default search, whose configurations differ) from a few of its programs, and
# every model is evaluated on unseen programs of the new collection:
#   base       the random-search model as it is (no data of the new collection)
#   scratch    the layout recipe trained from scratch on the few programs
#   finetuned  the base model fine-tuned on the few programs (--init-from, --epochs E, the
#              recipe's learning rate / LR_DIVISOR)
#   full       the recipe on 20 programs of the new collection (what more data gives)
# scratch and finetuned run with 3 seeds; the table gives Kendall's tau (mean over the unseen
# programs) per model, their mean and spread, and the training time.
#
# Usage: tools/bench/bench-finetune.sh [WORKDIR]
#   the binary measured: tools/lib/tpugraphs-binary.sh's (TPUGRAPHS, else BUILD_DIR's, default
#   build/tpugraphs)
#   WORKDIR: a tools/bench-tune.sh work directory kept with KEEP=1 (its collections, its two
#   layout models); made here with BENCH_TUNE_PARTS=none when missing.
#   FEW (default 4): programs of the new collection to adapt on; EPOCHS (default 30);
#   LR_DIVISOR (default 10): the fine-tuning rate is the recipe's divided by this.
#   SIZE=tiny: what the test runs (seconds).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-$SRC/build}
WORK=${1:-}
FEW=${FEW:-4}
EPOCHS=${EPOCHS:-30}
SEEDS="1 2 3"
PY=/usr/bin/python3
here=$SRC
# shellcheck source=tools/lib/tpugraphs-binary.sh
source "$here/tools/lib/tpugraphs-binary.sh"
# shellcheck source=tools/lib/bench-machine.sh
source "$SRC/tools/lib/bench-machine.sh"
TPUG=$(tpugraphs_binary)
if [ -z "$WORK" ]; then
  WORK=$(mktemp -d /tmp/tpugraphs-bench-finetune-XXXXXX)
  trap 'rm -rf "$WORK"' EXIT
fi
if [ "${SIZE:-full}" = tiny ]; then
  FEW=2; EPOCHS=2; SEEDS="1 2"
  export BENCH_TUNE_SIZE=tiny
fi
if [ ! -f "$WORK/layout-random.tpm" ] || [ ! -f "$WORK/layout-default.tpm" ]; then
  KEEP=1 BENCH_TUNE_PARTS=none TPUGRAPHS=$TPUG bash "$SRC/tools/bench-tune.sh" "$WORK" > /dev/null
fi
echo "cores: $(nproc); programs to adapt on: $FEW; fine-tuning epochs: $EPOCHS, learning rate: the recipe's / ${LR_DIVISOR:-10}; seeds: $SEEDS"
bench_machine_header
LR_DIVISOR=${LR_DIVISOR:-10}
d="$WORK/finetune-few$FEW-lr$LR_DIVISOR"
mkdir -p "$d"
collection=layout:synth:default
mapfile -t programs < <(ls "$WORK"/train/pb/layout/synth/default/train/*.pb | head -n "$FEW")
"$TPUG" -q ingest "${programs[@]}" --collection "$collection" -o "$d/few.tpug" > /dev/null
"$TPUG" -q ingest "$WORK"/unseen/pb/layout/synth/default/train/*.pb --collection "$collection" \
  -o "$d/unseen.tpug" > /dev/null
recipe="$SRC/tools/configs/layout.textproto"
lr=$("$PY" -c "
import re
print(float(re.search(r'^learning_rate: *([0-9.e-]+)', open('$recipe').read(), re.M).group(1)) / $LR_DIVISOR)")
kendall() {  # model -> mean Kendall's tau on the unseen programs
  "$TPUG" -q evaluate --model "$1" --data "$d/unseen.tpug" --json |
    "$PY" -c "import json,sys; print(json.load(sys.stdin)['collections'][0]['kendall_tau'])"
}
train_timed() {  # output, then train flags; prints seconds
  local out=$1 start
  shift
  start=$(date +%s.%N)
  "$TPUG" -q train --dataset "$d/few.tpug" --collection "$collection" --train-split "" \
    --output "$out" "$@" > /dev/null
  awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.0f", e - s }'
}
rows="$d/rows.tsv"
echo -e "model\tseed\tkendall\tseconds" > "$rows"
echo -e "base\t-\t$(kendall "$WORK/layout-random.tpm")\t-" >> "$rows"
echo -e "full\t-\t$(kendall "$WORK/layout-default.tpm")\t-" >> "$rows"
for seed in $SEEDS; do
  s=$(train_timed "$d/scratch-$seed.tpm" --config "$recipe" --seed "$seed" \
      ${BENCH_TUNE_SIZE:+--epochs 2 --ensemble-members 2})
  echo -e "scratch\t$seed\t$(kendall "$d/scratch-$seed.tpm")\t$s" >> "$rows"
  s=$(train_timed "$d/finetuned-$seed.tpm" --config "$recipe" --seed "$seed" \
      --init-from "$WORK/layout-random.tpm" --epochs "$EPOCHS" --learning-rate "$lr" \
      ${BENCH_TUNE_SIZE:+--ensemble-members 2})
  echo -e "finetuned\t$seed\t$(kendall "$d/finetuned-$seed.tpm")\t$s" >> "$rows"
done
"$PY" - "$rows" <<'PYEOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
print("\n| model | Kendall per seed | mean | spread (max - min) | training seconds |")
print("|---|---|---:|---:|---:|")
for m in ["base", "scratch", "finetuned", "full"]:
    rs = [r for r in rows if r["model"] == m]
    k = [float(r["kendall"]) for r in rs]
    secs = [r["seconds"] for r in rs if r["seconds"] != "-"]
    print(f"| {m} | {', '.join(f'{x:.3f}' for x in k)} | {statistics.mean(k):.3f} | "
          f"{max(k) - min(k):.3f} | {', '.join(secs) if secs else '-'} |")
PYEOF
bench_machine_footer
