#!/usr/bin/env bash
# Trains and evaluates one model per TpuGraphs collection of a release tree:
# ingest -> train -> evaluate for tile:xla, layout:xla:random, layout:xla:default,
# layout:nlp:random and layout:nlp:default (docs/train.md, "Training every collection").
#
# Usage: tools/train-all-collections.sh [--hours H [--plan [--write-plan]]] RELEASE_DIR OUT_DIR
#            [train flags...] [-- train flags...]
#   The script's own flags (--hours, --plan, --write-plan, --help) go anywhere, before or after
#   the paths; after the two paths, every other argument is a train flag (after `--`, every
#   argument is). The train flags are checked by `tpugraphs train --print-config` first: a flag
#   train does not take, or a bad value, is refused (exit 2) before anything is ingested or
#   written, and so is an unknown flag before the paths.
#   --hours H    (or HOURS=H) spend at most H projected hours on this machine: per collection
#                the frontier's variant with the best measured test Kendall such that the
#                projected hours of all fit H (docs/train.md, "Quality per hour"; `tools/release
#                plan`). The plan is printed before any work and written to OUT_DIR/plan.json,
#                which a run started again keeps (another H is refused while it is there). The
#                projection, of RELEASE_DIR's shape.tsv when it has one, is measured once per
#                machine (about 10 minutes on 2 cores) and kept in PROJECTION_CACHE. A budget
#                nothing fits is refused before any work: exit 2, with the smallest H that fits.
#   --plan       with --hours: print the plan and exit (nothing is written)
#   --write-plan with --plan: also write OUT_DIR/plan.json, the plan the runs then keep (needed
#                by machines sharing OUT_DIR with SHARD: with SHARD and --hours an OUT_DIR
#                without plan.json is refused)
#   Without --hours, every collection trains with its recipe (below).
#   RELEASE_DIR  the release tree holding npz/tile/xla/... and npz/layout/{xla,nlp}/...
#                (a collection that is missing, or has no train/*.npz, is skipped: no model, a
#                note; one without valid/*.npz is trained without validation, with a note)
#   OUT_DIR      receives <name>.tpug (dataset), <name>.tpm (model), <name>.valid.json (metrics),
#                <name>.note (why a collection has no model or no validation) and notes.txt
#   train flags  passed to every `tpugraphs train`, e.g. --epochs 20 --hidden-dim 128; every
#                run starts from its recipe (tools/configs/tile.textproto,
#                layout-collection.textproto or layout-large.textproto), which the flags override
#                (global flags such as -j go into TPUGRAPHS_GLOBAL_FLAGS)
# Environment: TPUGRAPHS (binary, default: tpugraphs on PATH, else build/tpugraphs),
#   TPUGRAPHS_GLOBAL_FLAGS (e.g. "-j 2 -q"), EVAL_INDICES_DIR (directory with the official
#   {xla,nlp}_{random,default}.json lists; layout validation is then restricted to them),
#   SEEDS (e.g. "1 2 3": one model per seed, <name>.seed<S>.tpm, evaluated as an ensemble with
#   `evaluate --model A --model B ...`; default: one model, <name>.tpm, with train's seed),
#   LARGE_COLLECTION_GRAPHS (default 100: layout collections with at least this many training
#   graphs start from tools/configs/layout-large.textproto, one model with three message-passing
#   layers; the others from tools/configs/layout-collection.textproto, the ensemble of
#   layout.textproto trained on the validation programs too, with the MSE term: their
#   <name>.valid.json then ranks programs trained on, as notes.txt says; docs/train.md,
#   "Layout recipe"),
#   JOBS (default 1: one process at a time): run up to this many `tpugraphs` processes side by
#   side: the ingests, then every training unit (a model, or each member of an ensemble as its
#   own process: train --ensemble-member M --ensemble-member-alone true), then each collection's
#   ensemble file and evaluate; each process gets -j max(1, cores / JOBS) unless
#   TPUGRAPHS_GLOBAL_FLAGS sets -j. The models, metrics and submission equal JOBS=1's.
#   SHARD=I/N (0 <= I < N): ingest, then train only the training units whose number modulo N
#   is I, and stop: N machines sharing OUT_DIR (a network file system) each run the same command
#   with their SHARD; the same command without SHARD then reuses every unit, writes the
#   ensembles and evaluates, with the outcome of a single run.
# One run per OUT_DIR: a second train-all-collections.sh or make-submission.sh on an OUT_DIR in
# use is refused at once (exit 1, naming the first's pid; OUT_DIR/workflow.lock, removed at the
# end; a killed run's lock never blocks the next run).
# A dataset or model that already exists is reused (delete it to redo that step). The script may
# be killed at any moment (even kill -9 of its process group) and run again with the same command:
# finished datasets, models and ensemble members are reused, an interrupted training continues
# from its last checkpoint (train --auto-resume says so on stderr; a checkpoint is written every
# --checkpoint-interval-seconds, 30 s by default, checked after every step, so inside epochs
# too), an interrupted ingest or evaluate is redone (their outputs appear complete or not at
# all), and the models and metrics equal an uninterrupted run's.
set -euo pipefail

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; }  # the header above
hours=${HOURS:-}
plan_only=
write_plan=
paths=()
train_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; train_args+=("$@"); break ;;
    --hours)
      [ $# -ge 2 ] || { echo "--hours needs a number of hours" >&2; exit 2; }
      hours=$2
      shift 2
      continue ;;
    --hours=*) hours=${1#--hours=} ;;
    --plan) plan_only=1 ;;
    --write-plan) write_plan=1 ;;
    -h | --help) usage; exit 0 ;;
    *)
      if [ ${#paths[@]} -ge 2 ]; then
        train_args+=("$1")
      elif [[ "$1" == -* ]]; then
        echo "train-all-collections.sh: unknown flag '$1' before RELEASE_DIR OUT_DIR (train flags go after the two paths; --help for the script's own)" >&2
        exit 2
      else
        paths+=("$1")
      fi ;;
  esac
  shift
done
if [ ${#paths[@]} -lt 2 ]; then
  usage >&2
  exit 2
fi
[ -n "$plan_only" ] && [ -z "$hours" ] && { echo "--plan needs --hours H (or HOURS=H)" >&2; exit 2; }
[ -n "$write_plan" ] && [ -z "$plan_only" ] && { echo "--write-plan goes with --plan" >&2; exit 2; }
release=${paths[0]}
out=${paths[1]}
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=tools/lib/tpugraphs-binary.sh
source "$here/tools/lib/tpugraphs-binary.sh"
bin=$(tpugraphs_binary)
read -r -a global <<<"${TPUGRAPHS_GLOBAL_FLAGS:-}"
# The train flags, checked by train itself before any work.
if [ ${#train_args[@]} -gt 0 ]; then
  err=$("$bin" "${global[@]}" train --config "$here/tools/configs/layout.textproto" \
    "${train_args[@]}" --print-config 2>&1 >/dev/null) ||
    { echo "train-all-collections.sh: train flags '${train_args[*]}' refused, nothing done: $err" >&2; exit 2; }
fi

# The plan for --hours: OUT/plan.json when a run made one (kept), else made now.
declare -A plan_recipe plan_flags
if [ -n "$hours" ]; then
  plan_cmd=(/usr/bin/python3 "$here/tools/release" plan --binary "$bin" --hours "$hours"
    --out "$out" --tree "$release")
  if [ -n "$plan_only" ]; then
    [ -n "$write_plan" ] && plan_cmd+=(--write)
    exec "${plan_cmd[@]}" --print
  fi
  plan_tsv=$("${plan_cmd[@]}")
  while IFS=$'\t' read -r c r f; do
    [ -n "$c" ] || continue
    plan_recipe[$c]=$r
    plan_flags[$c]=$f
  done <<<"$plan_tsv"
fi
mkdir -p "$out"
# One workflow per OUT_DIR (SHARD's machines share it by design and take no lock).
# shellcheck source=tools/lib/workflow-lock.sh
source "$here/tools/lib/workflow-lock.sh"
[ -n "${SHARD:-}" ] || workflow_lock "$out" train-all-collections.sh
large=${LARGE_COLLECTION_GRAPHS:-100}
case "$large" in '' | *[!0-9]*) echo "LARGE_COLLECTION_GRAPHS must be a count" >&2; exit 2 ;; esac
jobs=${JOBS:-1}
case "$jobs" in '' | *[!0-9]* | 0) echo "JOBS must be a count >= 1, got '$jobs'" >&2; exit 2 ;; esac
shard_i=-1 shard_n=1
if [ -n "${SHARD:-}" ]; then
  if [[ "$SHARD" =~ ^([0-9]+)/([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -lt "${BASH_REMATCH[2]}" ]; then
    shard_i=${BASH_REMATCH[1]} shard_n=${BASH_REMATCH[2]}
  else
    echo "SHARD must be I/N with 0 <= I < N, got '$SHARD'" >&2
    exit 2
  fi
fi
if [ "$jobs" -gt 1 ] && ! [[ " ${global[*]} " =~ \ (-j|--threads)[\ =] ]]; then
  # The cores shared between the processes side by side (results do not depend on -j).
  global+=(-j "$(($(nproc) / jobs > 0 ? $(nproc) / jobs : 1))")
fi

# Runs "$@" in the background once fewer than $jobs are running (JOBS=1: in the foreground).
# The background ones are collected by wait_all, which fails when any failed.
pids=()
spawn() {
  if [ "$jobs" -eq 1 ]; then
    "$@"
    return
  fi
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  "$@" &
  pids+=($!)
}
wait_all() {
  local pid failed=0
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  pids=()
  if [ "$failed" -ne 0 ]; then
    echo "== a process side by side failed (its message is above)" >&2
    exit 1
  fi
}

# The value of a flag in the train flags given, else of a field at the top of a recipe file.
flag_or_recipe() {  # FLAG FIELD RECIPE DEFAULT [PLAN_FLAGS]
  local prev= a v= more=()
  read -r -a more <<<"${5:-}"
  for a in "${more[@]}" "${train_args[@]}"; do
    [ "$prev" = "$1" ] && v=$a
    case "$a" in "$1"=*) v=${a#*=} ;; esac
    prev=$a
  done
  [ -z "$v" ] && v=$(sed -n "s/^$2: *\([0-9-]*\).*/\1/p" "$3" | tail -1)
  echo "${v:-$4}"
}

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

# Writes TEXT (a line) into FILE, appended (--append) or replacing it: complete or unchanged.
# A failure names FILE and the system's reason (e.g. "No space left on device").
write_text() {  # [--append] FILE TEXT
  local append= err
  [ "$1" = --append ] && { append=1; shift; }
  if err=$({ { [ -z "$append" ] || cat "$1" 2>/dev/null || true; } && printf '%s\n' "$2"; } 2>&1 >"$1.tmp") &&
    err=$(mv "$1.tmp" "$1" 2>&1); then
    return 0
  fi
  rm -f "$1.tmp"
  err=${err##*: }
  echo "train-all-collections.sh: $1: ${err:-write failed} (a full disk?)" >&2
  exit 1
}

# Records why a collection has no model or no validation: stderr, OUT/<name>.note, the summary.
note() {
  echo "== $collection: note: $1" >&2
  write_text --append "$out/$name.note" "$1"
  notes+=("$collection: $1")
}

summary=()
notes=()
found=0
rm -f "$out/notes.txt"
# 1. Which collections there are, and their datasets (ingested side by side with JOBS).
trainable=()  # the collections with training graphs
for entry in "${release_collections[@]}"; do
  read -r name collection sub <<<"$entry"
  src="$release/$sub"
  rm -f "$out/$name.note"
  if [ ! -d "$src" ]; then
    note "$src not found: no model"
    continue
  fi
  found=1
  if [ "$(count_npz "$src/train")" -eq 0 ]; then
    note "no training graphs ($src/train/*.npz): no model"
    continue
  fi
  trainable+=("$entry")
  data="$out/$name.tpug"
  if [ ! -f "$data" ]; then
    echo "== $collection: ingest $src" >&2
    spawn "$bin" "${global[@]}" ingest "$src" --collection "$collection" -o "$data" >&2
  fi
done
wait_all

# 2. Each collection's recipe and models; the training units: a model, or with JOBS > 1 or a
# SHARD each member of an ensemble alone.
declare -A recipe_of models_of collection_flags trained_on_valid
units=()
for entry in "${trainable[@]}"; do
  read -r name collection sub <<<"$entry"
  kind=${collection%%:*}
  data="$out/$name.tpug"
  recipe="$here/tools/configs/$kind.textproto"
  if [ "$kind" = layout ]; then
    # The training graphs of the collection, counted by evaluate (the index baseline reads no
    # configuration values).
    n_train=$("$bin" "${global[@]}" -q evaluate --data "$data" --collection "$collection" \
      --split train --baseline index --json | sed -n 's/.*"graphs": \([0-9]*\).*/\1/p' | head -1)
    if [ "${n_train:-0}" -ge "$large" ]; then
      echo "== $collection: $n_train training graphs (>= $large): layout-large.textproto" >&2
      recipe="$here/tools/configs/layout-large.textproto"
    else
      echo "== $collection: ${n_train:-0} training graphs (< $large): layout-collection.textproto" >&2
      recipe="$here/tools/configs/layout-collection.textproto"
    fi
  fi
  if [ -n "${plan_recipe[$collection]:-}" ]; then
    recipe="$here/tools/configs/${plan_recipe[$collection]}"
    echo "== $collection: the plan's ${plan_recipe[$collection]} ${plan_flags[$collection]}" >&2
  fi
  recipe_of[$name]=$recipe
  collection_flags[$name]=${plan_flags[$collection]:-}
  # Whether the models train on the validation programs (layout-collection.textproto does, and
  # so can a train flag): then the collection's validation figures are not held out.
  read -r -a more <<<"${plan_flags[$collection]:-}"
  if "$bin" "${global[@]}" train --config "$recipe" "${more[@]}" "${train_args[@]}" --print-config |
    grep -Eq '^train_split: "([a-z]*,)*valid(,[a-z]*)*"$'; then
    trained_on_valid[$name]=1
  fi
  members=$(flag_or_recipe --ensemble-members ensemble_members "$recipe" 1 "${plan_flags[$collection]:-}")
  models=()
  for seed in ${SEEDS:-default}; do
    if [ "$seed" = default ]; then
      model="$out/$name.tpm" seed_flags=()
    else
      model="$out/$name.seed$seed.tpm" seed_flags=(--seed "$seed")
    fi
    models+=("$model|${seed_flags[*]}")
    [ -f "$model" ] && continue
    if [ "$members" -gt 1 ] && { [ "$jobs" -gt 1 ] || [ "$shard_n" -gt 1 ]; }; then
      for ((m = 0; m < members; m++)); do
        units+=("$name|$collection|$model|${seed_flags[*]}|$m")
      done
    else
      units+=("$name|$collection|$model|${seed_flags[*]}|")
    fi
  done
  models_of[$name]=$(printf '%s\n' "${models[@]}")
done

# train NAME COLLECTION MODEL "SEED FLAGS" [MEMBER]: one training, of a model or (MEMBER given)
# of that ensemble member alone, resumed from its checkpoint when a kill interrupted it.
train() {
  local name=$1 collection=$2 model=$3 member=${5:-} seed_flags unit_flags=() ckpts ckpt
  read -r -a seed_flags <<<"$4"
  local log="${model%.tpm}.train.tsv"
  ckpts=("$model.ckpt" "$model".member-*.ckpt)
  if [ -n "$member" ]; then
    unit_flags=(--ensemble-member "$member" --ensemble-member-alone true)
    log="${model%.tpm}.member-$member.train.tsv"
    ckpts=("$model.member-$member.ckpt")
  fi
  # A checkpoint beside a missing model (or ensemble member): a kill interrupted this training
  # (train --auto-resume continues from it when the command is the same). A finished member
  # keeps its checkpoint until the ensemble file is written; it is reused, not resumed.
  for ckpt in "${ckpts[@]}"; do
    if [ -f "$ckpt" ] && [ ! -f "${ckpt%.ckpt}" ]; then
      echo "== $collection: resuming the interrupted training from $ckpt" >&2
    fi
  done
  # The plan's flags for this collection, less those the train flags given set themselves.
  local plan=() p=() i
  read -r -a p <<<"${collection_flags[$name]:-}"
  for ((i = 0; i + 1 < ${#p[@]}; i += 2)); do
    [[ " ${train_args[*]} " =~ \ ${p[$i]}[\ =] ]] || plan+=("${p[$i]}" "${p[$((i + 1))]}")
  done
  echo "== $collection: train ${plan[*]} ${seed_flags[*]} ${unit_flags[*]}" >&2
  "$bin" "${global[@]}" train --config "${recipe_of[$name]}" --dataset "$out/$name.tpug" \
    --collection "$collection" --output "$model" --auto-resume true "${plan[@]}" \
    "${seed_flags[@]}" "${train_args[@]}" "${unit_flags[@]}" >"$log"
}

# 3. The training units, side by side with JOBS; a SHARD takes its share and stops.
for ((u = 0; u < ${#units[@]}; u++)); do
  [ "$shard_n" -gt 1 ] && [ $((u % shard_n)) -ne "$shard_i" ] && continue
  IFS='|' read -r name collection model seed_flags member <<<"${units[$u]}"
  spawn train "$name" "$collection" "$model" "$seed_flags" "$member"
done
wait_all
if [ "$shard_n" -gt 1 ]; then
  echo "== shard $shard_i/$shard_n: trained its units; the same command without SHARD finishes" >&2
  exit 0
fi

# 4. Each collection's models (an ensemble's file from its members) and its evaluation.
evaluate_collection() {  # NAME COLLECTION
  local name=$1 collection=$2 kind=${2%%:*} line model seed_flags model_flags=() eval_flags=()
  while IFS='|' read -r model seed_flags; do
    [ -f "$model" ] || train "$name" "$collection" "$model" "$seed_flags"
    model_flags+=(--model "$model")
  done <<<"${models_of[$name]}"
  [ "$(count_npz "$release/$3/valid")" -eq 0 ] && return 0
  echo "== $collection: evaluate on the valid split" >&2
  if [ "$kind" = layout ] && [ -n "${EVAL_INDICES_DIR:-}" ]; then
    local rest=${collection#layout:}
    local list="$EVAL_INDICES_DIR/${rest/:/_}.json"
    [ -f "$list" ] && eval_flags=(--eval-indices "$list")
  fi
  local ext
  for ext in json txt; do
    local flags=() dest=$out/$name.valid.$ext
    [ "$ext" = json ] && flags=(--json)
    # Complete or absent (a failed write, a full disk: the partial file goes, the run stops).
    "$bin" "${global[@]}" evaluate --data "$out/$name.tpug" "${model_flags[@]}" --split valid \
      --collection "$collection" "${eval_flags[@]}" "${flags[@]}" >"$dest.tmp" &&
      mv "$dest.tmp" "$dest" || { rm -f "$dest.tmp"; exit 1; }
  done
}

for entry in "${trainable[@]}"; do
  read -r name collection sub <<<"$entry"
  spawn evaluate_collection "$name" "$collection" "$sub"
done
wait_all
for entry in "${trainable[@]}"; do
  read -r name collection sub <<<"$entry"
  if [ "$(count_npz "$release/$sub/valid")" -eq 0 ]; then
    note "no validation graphs ($release/$sub/valid/*.npz): trained without validation (epochs compared by training loss), not evaluated"
    summary+=("$collection (no validation)")
  else
    cat "$out/$name.valid.txt"
    if [ -n "${trained_on_valid[$name]:-}" ]; then
      note "its models were trained on the validation programs too (train_split of $(basename "${recipe_of[$name]}")): $name.valid.json ranks programs trained on, not held-out ones"
      summary+=("$collection $out/$name.valid.json (programs trained on)")
    else
      summary+=("$collection $out/$name.valid.json")
    fi
  fi
done

if [ "$found" -eq 0 ]; then
  echo "no collection found under $release (expected npz/tile/xla, npz/layout/...)" >&2
  exit 1
fi
remove_stale_locks "$out"
remove_stale_temporaries "$out"
echo "== done: models and metrics in $out" >&2
for line in "${summary[@]}"; do echo "   trained: $line" >&2; done
if [ ${#notes[@]} -gt 0 ]; then
  write_text "$out/notes.txt" "$(printf '%s\n' "${notes[@]}")"
  echo "== notes (also in $out/notes.txt):" >&2
  for line in "${notes[@]}"; do echo "   $line" >&2; done
fi
