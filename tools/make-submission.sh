#!/usr/bin/env bash
# Assembles a Kaggle submission ("Fast or Slow? Predict AI Model Runtime") from the models that
# tools/train-all-collections.sh trained: predicts each collection's test split with its own
# model, merges the five CSVs and checks the IDs against the sample submission.
#
# Usage: tools/make-submission.sh OUT_DIR SUBMISSION.csv [SAMPLE_SUBMISSION.csv]
#   OUT_DIR     the directory with <name>.tpug and <name>.tpm of each collection
#   SAMPLE      Kaggle's sample_submission.csv; the merged file must have exactly its IDs
#               (missing or extra IDs are listed and nothing is written)
# A collection without a model (train-all-collections.sh wrote <name>.note instead) is named on
# stderr with the reason and left out; without SAMPLE the file holds the other collections' rows.
# It takes no flag but --help: any other is refused (exit 2) before anything is written. Not
# while another workflow runs on OUT_DIR: refused at once, naming its pid (exit 1).
# Environment: TPUGRAPHS (binary), TPUGRAPHS_GLOBAL_FLAGS (e.g. "-j 2").
set -euo pipefail

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; }  # the header above
for a in "$@"; do
  case "$a" in
    -h | --help) usage; exit 0 ;;
    -*) echo "make-submission.sh: unknown flag '$a' (it takes OUT_DIR SUBMISSION.csv [SAMPLE])" >&2; exit 2 ;;
  esac
done
[ $# -ge 2 ] && [ $# -le 3 ] || { usage >&2; exit 2; }
out=$1
submission=$2
sample=${3:-}
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=tools/lib/tpugraphs-binary.sh
source "$here/tools/lib/tpugraphs-binary.sh"
bin=$(tpugraphs_binary)
read -r -a global <<<"${TPUGRAPHS_GLOBAL_FLAGS:-}"
# Not while another workflow writes OUT_DIR (tools/lib/workflow-lock.sh).
# shellcheck source=tools/lib/workflow-lock.sh
source "$here/tools/lib/workflow-lock.sh"
[ ! -d "$out" ] || workflow_lock "$out" make-submission.sh

parts=()
missing=()
# shellcheck source=tools/release-collections.sh
source "$here/tools/release-collections.sh"
for entry in "${release_collections[@]}"; do
  read -r name collection _ <<<"$entry"
  data="$out/$name.tpug"
  model="$out/$name.tpm"
  if [ ! -f "$data" ] || [ ! -f "$model" ]; then
    why="no $model"
    [ -f "$data" ] || why="no $data"
    if [ -f "$out/$name.note" ]; then why=$(tr '\n' ' ' <"$out/$name.note" | sed 's/ *$//'); fi
    echo "== $collection: not in the submission: $why" >&2
    missing+=("$collection")
    continue
  fi
  echo "== $collection: predict the test split" >&2
  # Its messages are held in memory, not in a file of OUT_DIR: on a full disk such a file would
  # lose the message that says so.
  rc=0
  { err=$("$bin" "${global[@]}" predict --data "$data" --model "$model" --split test \
    --collection "$collection" --format kaggle -o "$out/$name.test.csv" 2>&1 >&3 3>&-); } 3>&1 ||
    rc=$?
  if [ "$rc" -ne 0 ]; then
    if [ "$rc" -eq 3 ]; then  # no graph of the dataset matches the selection
      echo "== $collection: not in the submission: no test graphs in $data" >&2
      missing+=("$collection")
      continue
    fi
    [ -z "$err" ] || printf '%s\n' "$err" >&2
    exit 1
  fi
  [ -z "$err" ] || printf '%s\n' "$err" >&2
  parts+=("$out/$name.test.csv")
done
if [ ${#parts[@]} -eq 0 ]; then
  echo "no trained collection in $out (missing: ${missing[*]})" >&2
  exit 1
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "== no model for ${#missing[@]} of 5 collections: ${missing[*]}" >&2
fi

check=()
[ -n "$sample" ] && check=(--check-ids "$sample")
"$bin" "${global[@]}" predict --merge "${parts[@]}" -o "$submission" "${check[@]}"
[ ! -d "$out" ] || remove_stale_temporaries "$out"
echo "== wrote $submission ($(($(wc -l <"$submission") - 1)) rows)" >&2
