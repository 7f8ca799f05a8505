#!/usr/bin/env bash
# Trains and evaluates one model per TpuGraphs collection of a release tree:
# ingest -> train -> evaluate for tile:xla, layout:xla:random, layout:xla:default,
# layout:nlp:random and layout:nlp:default (docs/train.md, "Training every collection").
#
# Usage: tools/train-all-collections.sh RELEASE_DIR OUT_DIR [train flags...]
#   RELEASE_DIR  the release tree holding npz/tile/xla/... and npz/layout/{xla,nlp}/...
#                (a collection that is missing, or has no train/*.npz, is skipped: no model, a
#                note; one without valid/*.npz is trained without validation, with a note)
#   OUT_DIR      receives <name>.tpug (dataset), <name>.tpm (model), <name>.valid.json (metrics),
#                <name>.note (why a collection has no model or no validation) and notes.txt
#   train flags  passed to every `tpugraphs train`, e.g. --epochs 20 --hidden-dim 128; every
#                run starts from its recipe, tools/configs/{tile,layout}.textproto, which the
#                flags override
#                (global flags such as -j go into TPUGRAPHS_GLOBAL_FLAGS)
# Environment: TPUGRAPHS (binary, default: tpugraphs on PATH, else build/tpugraphs),
#   TPUGRAPHS_GLOBAL_FLAGS (e.g. "-j 2 -q"), EVAL_INDICES_DIR (directory with the official
#   {xla,nlp}_{random,default}.json lists; layout validation is then restricted to them),
#   SEEDS (e.g. "1 2 3": one model per seed, <name>.seed<S>.tpm, evaluated as an ensemble with
#   `evaluate --model A --model B ...`; default: one model, <name>.tpm, with train's seed),
#   LARGE_COLLECTION_GRAPHS (default 100: layout collections with at least this many training
#   graphs start from tools/configs/layout-large.textproto, one model with three message-passing
#   layers, instead of the ensemble of layout.textproto; docs/train.md, "Layout recipe").
# A dataset or model that already exists is reused (delete it to redo that step). The script may
# be killed at any moment (even kill -9 of its process group) and run again with the same command:
# finished datasets, models and ensemble members are reused, an interrupted training continues
# from its last checkpoint (train --auto-resume says so on stderr; checkpoints are written after
# an epoch, at most every --checkpoint-interval-seconds, 30 s by default), an interrupted ingest
# or evaluate is redone (their outputs appear complete or not at all), and the models and metrics
# equal an uninterrupted run's.
set -euo pipefail

if [ $# -lt 2 ]; then
  sed -n '2,30p' "$0" >&2
  exit 2
fi
release=$1
out=$2
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${TPUGRAPHS:-$(command -v tpugraphs || echo "$here/build/tpugraphs")}
read -r -a global <<<"${TPUGRAPHS_GLOBAL_FLAGS:-}"
mkdir -p "$out"
large=${LARGE_COLLECTION_GRAPHS:-100}
case "$large" in '' | *[!0-9]*) echo "LARGE_COLLECTION_GRAPHS must be a count" >&2; exit 2 ;; esac

# shellcheck source=tools/release-collections.sh
source "$here/tools/release-collections.sh"

# Counts the release files of one split directory.
count_npz() {
  if [ -d "$1" ]; then
    find "$1" -maxdepth 1 -name '*.npz' | wc -l
  else
    echo 0
  fi
}

# Records why a collection has no model or no validation: stderr, OUT/<name>.note, the summary.
note() {
  echo "== $collection: note: $1" >&2
  echo "$1" >>"$out/$name.note"
  notes+=("$collection: $1")
}

summary=()
notes=()
found=0
rm -f "$out/notes.txt"
for entry in "${release_collections[@]}"; do
  read -r name collection sub <<<"$entry"
  src="$release/$sub"
  rm -f "$out/$name.note"
  if [ ! -d "$src" ]; then
    note "$src not found: no model"
    continue
  fi
  found=1
  n_train_files=$(count_npz "$src/train")
  n_valid_files=$(count_npz "$src/valid")
  if [ "$n_train_files" -eq 0 ]; then
    note "no training graphs ($src/train/*.npz): no model"
    continue
  fi
  kind=${collection%%:*}
  data="$out/$name.tpug"
  if [ ! -f "$data" ]; then
    echo "== $collection: ingest $src" >&2
    "$bin" "${global[@]}" ingest "$src" --collection "$collection" -o "$data" >&2
  fi
  config=(--config "$here/tools/configs/$kind.textproto")
  if [ "$kind" = layout ]; then
    # The training graphs of the collection, counted by evaluate (the index baseline reads no
    # configuration values).
    n_train=$("$bin" "${global[@]}" -q evaluate --data "$data" --collection "$collection" \
      --split train --baseline index --json | sed -n 's/.*"graphs": \([0-9]*\).*/\1/p' | head -1)
    if [ "${n_train:-0}" -ge "$large" ]; then
      echo "== $collection: $n_train training graphs (>= $large): layout-large.textproto" >&2
      config=(--config "$here/tools/configs/layout-large.textproto")
    fi
  fi
  if [ "$n_valid_files" -eq 0 ]; then
    note "no validation graphs ($src/valid/*.npz): trained without validation (epochs compared by training loss), not evaluated"
  fi
  model_flags=()
  for seed in ${SEEDS:-default}; do
    if [ "$seed" = default ]; then
      model="$out/$name.tpm" seed_flags=() log="$out/$name.train.tsv"
    else
      model="$out/$name.seed$seed.tpm" seed_flags=(--seed "$seed") log="$out/$name.seed$seed.train.tsv"
    fi
    if [ ! -f "$model" ]; then
      # A checkpoint beside a missing model (or ensemble member): a kill interrupted this
      # training (train --auto-resume continues from it when the command is the same). A finished
      # member keeps its checkpoint until the ensemble file is written; it is reused, not resumed.
      for ckpt in "$model.ckpt" "$model".member-*.ckpt; do
        if [ -f "$ckpt" ] && [ ! -f "${ckpt%.ckpt}" ]; then
          echo "== $collection: resuming the interrupted training from $ckpt" >&2
        fi
      done
      echo "== $collection: train ${seed_flags[*]}" >&2
      "$bin" "${global[@]}" train "${config[@]}" --dataset "$data" --collection "$collection" \
        --output "$model" --auto-resume true "${seed_flags[@]}" "$@" >"$log"
    fi
    model_flags+=(--model "$model")
  done
  if [ "$n_valid_files" -eq 0 ]; then
    summary+=("$collection (no validation)")
    continue
  fi
  echo "== $collection: evaluate on the valid split" >&2
  eval_flags=()
  if [ "$kind" = layout ] && [ -n "${EVAL_INDICES_DIR:-}" ]; then
    rest=${collection#layout:}
    list="$EVAL_INDICES_DIR/${rest/:/_}.json"
    [ -f "$list" ] && eval_flags=(--eval-indices "$list")
  fi
  "$bin" "${global[@]}" evaluate --data "$data" "${model_flags[@]}" --split valid \
    --collection "$collection" "${eval_flags[@]}" --json >"$out/$name.valid.json.tmp"
  mv "$out/$name.valid.json.tmp" "$out/$name.valid.json"
  "$bin" "${global[@]}" evaluate --data "$data" "${model_flags[@]}" --split valid \
    --collection "$collection" "${eval_flags[@]}"
  summary+=("$collection $out/$name.valid.json")
done

if [ "$found" -eq 0 ]; then
  echo "no collection found under $release (expected npz/tile/xla, npz/layout/...)" >&2
  exit 1
fi
echo "== done: models and metrics in $out" >&2
for line in "${summary[@]}"; do echo "   trained: $line" >&2; done
if [ ${#notes[@]} -gt 0 ]; then
  printf '%s\n' "${notes[@]}" >"$out/notes.txt"
  echo "== notes (also in $out/notes.txt):" >&2
  for line in "${notes[@]}"; do echo "   $line" >&2; done
fi
