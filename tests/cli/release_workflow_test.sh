#!/usr/bin/env bash
# The release workflow end to end: builds a tiny release tree (synth -> ingest -> export, the
# release's npz layout), runs tools/train-all-collections.sh and tools/make-submission.sh on it
# with the documented recipes shortened by flags, and checks what a user gets.
#
# The tree: tile:xla and layout:xla:random with train/valid/test, layout:xla:default without a
# valid split, layout:nlp:random with test files only, layout:nlp:default with train/valid/test.
# Expected: a model for each collection with training graphs, a note for layout:nlp:random (no
# model) and for layout:xla:default (no validation), the layout collections trained with
# layout-collection.textproto and the figures of those with a valid split marked as on programs
# trained on, exit 0; a submission with one row per test
# file of the trained collections, each row a permutation of that file's configuration indices
# (tile rows, in Kaggle's format, the 10 best: a permutation of the kernel's configurations padded
# with 0 when it has at most 10, else 10 distinct indices in range).
#
# One workflow per OUT_DIR: a second train-all-collections.sh or make-submission.sh on a busy
# OUT_DIR is refused naming the first's pid, the first unaffected; a killed run leaves no lock,
# previous checkpoint or temporary once run again to the end.
# Flags: train flags after `--` give the same outcome; a flag that neither the script nor train
# takes (or a bad value), before or after the paths, is refused with exit 2 and nothing written,
# and so is one that make-submission.sh or bench-release.sh does not take.
#
# Usage: release_workflow_test.sh TPUGRAPHS_BINARY SOURCE_DIR PYTHON_WITH_NUMPY
set -euo pipefail

bin=$1
src=$2
python=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/release-workflow.XXXXXX")
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# --- the tree ------------------------------------------------------------------------------
tree=$work/release
# synth SPLITS COLLECTION ARGS...: one synth run, ingested split by split, exported into $tree.
make_collection() {
  local splits=$1 collection=$2
  shift 2
  local raw=$work/raw-${collection//:/_}
  "$bin" -q -j 2 synth --splits "$splits" --error-rate 0 --output "$raw" "$@" >/dev/null
  local split dir
  for split in train valid test; do
    dir=$(find "$raw/pb" -type d -name "$split" | head -1)
    [ -n "$dir" ] || continue
    "$bin" -q -j 2 ingest "$dir" --collection "$collection" --split "$split" \
      -o "$raw/$split.tpug" >/dev/null
    "$bin" -q -j 2 export "$raw/$split.tpug" -o "$tree" >/dev/null
  done
}
layout=(--task layout --min-nodes 150 --max-nodes 300 --configs 24)
make_collection 0.5,0.25,0.25 tile:xla --task tile --graphs 8 --configs 12 --seed 1
make_collection 0.5,0.25,0.25 layout:xla:random "${layout[@]}" --graphs 4 --search random --seed 2
make_collection 0.75,0,0.25 layout:xla:default "${layout[@]}" --graphs 4 --search default --seed 3
make_collection 0,0,1 layout:nlp:random "${layout[@]}" --graphs 2 --search random --seed 4
make_collection 0.5,0.25,0.25 layout:nlp:default "${layout[@]}" --graphs 4 --search default --seed 5

count() { find "$tree/npz/$1/$2" -name '*.npz' 2>/dev/null | wc -l; }
if [ "$(count tile/xla train)" -lt 1 ] || [ "$(count tile/xla valid)" -lt 1 ]; then
  fail "the tile collection lacks a split"
fi
[ "$(count layout/xla/default valid)" -eq 0 ] || fail "xla:default should have no valid split"
[ "$(count layout/xla/default train)" -ge 1 ] || fail "xla:default should have training files"
[ "$(count layout/nlp/random train)" -eq 0 ] || fail "nlp:random should have test files only"
[ "$(count layout/nlp/random test)" -ge 1 ] || fail "nlp:random should have test files"

# --- train-all-collections.sh ---------------------------------------------------------------
out=$work/out
export TPUGRAPHS=$bin TPUGRAPHS_GLOBAL_FLAGS="-j 2 -q"
# The recipes, shortened: 2 epochs of 2 steps, 2 ensemble members, one configuration pass.
if ! bash "$src/tools/train-all-collections.sh" "$tree" "$out" --epochs 2 --steps-per-epoch 2 \
  --ensemble-members 2 --min-config-passes 0 >"$work/train.out" 2>"$work/train.err"; then
  cat "$work/train.err" >&2
  fail "train-all-collections.sh exited non-zero"
fi
for name in tile_xla layout_xla_random layout_xla_default layout_nlp_default; do
  [ -s "$out/$name.tpm" ] || { cat "$work/train.err" >&2; fail "no model for $name"; }
done
[ ! -e "$out/layout_nlp_random.tpm" ] || fail "a model for nlp:random, which has no training data"
grep -q "no training graphs" "$out/layout_nlp_random.note" ||
  fail "no note for nlp:random: $(cat "$out/layout_nlp_random.note" 2>&1)"
grep -q "no validation graphs" "$out/layout_xla_default.note" ||
  fail "no note for xla:default: $(cat "$out/layout_xla_default.note" 2>&1)"
for name in tile_xla layout_xla_random layout_nlp_default; do
  [ -s "$out/$name.valid.json" ] || fail "no validation metrics for $name"
done
[ ! -e "$out/tile_xla.note" ] || fail "unexpected note for tile_xla: $(cat "$out/tile_xla.note")"
# The small layout collections train with layout-collection.textproto, on their validation
# programs too: their validation figures are marked as such.
for c in layout:xla:random layout:xla:default layout:nlp:default; do
  grep -q "== $c: [0-9]* training graphs (< 100): layout-collection.textproto" "$work/train.err" ||
    { cat "$work/train.err" >&2; fail "$c did not train with layout-collection.textproto"; }
done
for name in layout_xla_random layout_nlp_default; do
  [ "$(cat "$out/$name.note")" = "its models were trained on the validation programs too (train_split of layout-collection.textproto): $name.valid.json ranks programs trained on, not held-out ones" ] ||
    fail "the note of $name: $(cat "$out/$name.note" 2>&1)"
  grep -q "trained: ${name//_/:} .*$name.valid.json (programs trained on)" "$work/train.err" ||
    { cat "$work/train.err" >&2; fail "the summary does not mark $name's figures as trained on"; }
done
grep -q "layout:nlp:random: no training graphs" "$work/train.err" ||
  fail "the run's summary does not name nlp:random"

# --- make-submission.sh ---------------------------------------------------------------------
sub=$work/submission.csv
if ! bash "$src/tools/make-submission.sh" "$out" "$sub" >"$work/sub.out" 2>"$work/sub.err"; then
  cat "$work/sub.err" >&2
  fail "make-submission.sh exited non-zero"
fi
grep -q "no model for 1 of 5 collections: layout:nlp:random" "$work/sub.err" ||
  { cat "$work/sub.err" >&2; fail "make-submission.sh does not name the missing collection"; }

# One row per test file of the trained collections, each a permutation of its configurations.
"$python" - "$tree" "$sub" <<'EOF' || fail "the submission does not match the test files"
import csv, glob, os, sys
import numpy as np
tree, sub = sys.argv[1], sys.argv[2]
expected = {}
for prefix, pattern in [("tile:xla", "npz/tile/xla/test/*.npz"),
                        ("layout:xla:random", "npz/layout/xla/random/test/*.npz"),
                        ("layout:xla:default", "npz/layout/xla/default/test/*.npz"),
                        ("layout:nlp:default", "npz/layout/nlp/default/test/*.npz")]:
    for f in glob.glob(os.path.join(tree, pattern)):
        name = os.path.basename(f)[:-4]
        expected[prefix + ":" + name] = len(np.load(f)["config_runtime"])
rows = list(csv.reader(open(sub)))
assert rows[0] == ["ID", "TopConfigs"], rows[0]
got = {}
for row in rows[1:]:
    assert row[0] not in got, "duplicate row " + row[0]
    got[row[0]] = [int(x) for x in row[1].split(";")]
assert set(got) == set(expected), (sorted(set(got) ^ set(expected)))
for key, n in expected.items():
    row = got[key]
    if key.startswith("tile:"):
        # Kaggle's tile rows: the 10 best, best first, padded with 0 when a kernel has fewer.
        assert len(row) == 10, (key, row)
        head = row[:min(n, 10)]
        assert len(set(head)) == len(head) and all(0 <= i < n for i in head), (key, n, row)
        if n <= 10:
            assert sorted(head) == list(range(n)) and row[n:] == [0] * (10 - n), (key, n, row)
    else:
        assert sorted(row) == list(range(n)), (key, n, row)
print("submission:", len(got), "rows")
EOF

# With a sample submission the IDs must match it exactly: one ID too many in the sample (the
# collection without a model) and the merged file is refused, nothing written.
sample=$work/sample.csv
{ cat "$sub"; echo "layout:nlp:random:missing_graph,0;1;2"; } >"$sample"
rm -f "$work/checked.csv"
if bash "$src/tools/make-submission.sh" "$out" "$work/checked.csv" "$sample" \
  >/dev/null 2>"$work/check.err"; then
  fail "make-submission.sh accepted a submission missing a sample ID"
fi
grep -q "layout:nlp:random:missing_graph" "$work/check.err" ||
  { cat "$work/check.err" >&2; fail "the missing ID is not listed"; }
[ ! -e "$work/checked.csv" ] || fail "a refused submission was written"
bash "$src/tools/make-submission.sh" "$out" "$work/checked.csv" "$sub" >/dev/null 2>&1 ||
  fail "make-submission.sh refused a submission matching its sample"
# --- killed and run again ------------------------------------------------------------------
# The same command run to the end (the reference), then killed (kill -9 of its whole process
# group) at three moments and run again: as soon as the first training checkpoint appears, and
# at two seeded fractions of the reference's wall time. Each must end with the reference's
# scores from every model, its validation metrics and its submission, byte for byte (paths
# aside), and the run after the first kill must say that it resumed a training.
export TPUGRAPHS_GLOBAL_FLAGS="-j 2"  # train's own log lines, to see that it resumed
# A checkpoint after every step (an interval of 1 us), so that kills land inside epochs too.
kill_flags=(--epochs 40 --steps-per-epoch 2 --ensemble-members 2 --min-config-passes 0
  --checkpoint-interval-seconds 0.000001)
all_collections() {  # OUT_DIR: the whole workflow, stderr to OUT_DIR.err
  bash "$src/tools/train-all-collections.sh" "$tree" "$1" "${kill_flags[@]}" >/dev/null \
    2>>"$1.err"
}
# Everything a run produced that must not depend on the kills: each model's scores on the test
# split, the validation metrics and the submission (lines naming this run's paths left out).
outcome() {
  local dir=$1 m
  for m in "$dir"/*.tpm; do
    "$bin" -q predict --data "${m%.tpm}.tpug" --split test --model "$m" --format scores \
      --output "$dir/scores.tmp" >/dev/null
    echo "== $(basename "$m")"
    grep -v '^#' "$dir/scores.tmp"
  done
  for m in "$dir"/*.valid.json; do
    echo "== $(basename "$m")"
    grep -v '"scorer"' "$m"
  done
  bash "$src/tools/make-submission.sh" "$dir" "$dir/submission.csv" >/dev/null 2>&1
  echo "== submission"
  cat "$dir/submission.csv"
}
start=$(date +%s%N)
all_collections "$work/ref" || { cat "$work/ref.err" >&2; fail "the reference run failed"; }
ref_ms=$((($(date +%s%N) - start) / 1000000))
outcome "$work/ref" >"$work/ref.outcome"
RANDOM=33  # the seeded moments
for moment in first-checkpoint fraction fraction; do
  o=$work/killed-$moment-$RANDOM
  setsid bash "$src/tools/train-all-collections.sh" "$tree" "$o" "${kill_flags[@]}" \
    >/dev/null 2>"$o.err" &
  pid=$!
  if [ "$moment" = first-checkpoint ]; then
    for _ in $(seq 3000); do
      compgen -G "$o/*.ckpt" >/dev/null && break
      sleep 0.01
    done
    compgen -G "$o/*.ckpt" >/dev/null || fail "no checkpoint appeared in $o"
  else
    sleep "$(awk -v ms="$ref_ms" -v r="$RANDOM" 'BEGIN {printf "%.3f", ms * (0.15 + 0.7 * r / 32768) / 1000}')"
  fi
  kill -9 -- "-$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  echo "== run again after the kill" >>"$o.err"
  all_collections "$o" || { cat "$o.err" >&2; fail "the run after a kill ($moment) failed"; }
  outcome "$o" >"$o.outcome"
  if ! cmp -s "$work/ref.outcome" "$o.outcome"; then
    diff "$work/ref.outcome" "$o.outcome" | head -20 >&2
    fail "killed at $moment and run again: the outcome differs from the uninterrupted run's"
  fi
  # Nothing of the killed run is left: no lock, previous checkpoint or temporary.
  left=$(find "$o" -name '*.lock' -o -name '*.prev' -o -name '*.tmp*' | grep -v 'scores.tmp$' || true)
  [ -z "$left" ] || fail "killed at $moment and run again: left behind: $left"
  if [ "$moment" = first-checkpoint ]; then
    # The script's line, and train's own (not quiet here) that it took the checkpoint.
    again=$(sed -n '/== run again after the kill/,$p' "$o.err")
    grep -q "resuming the interrupted training from" <<<"$again" &&
      grep -q -- "--auto-resume: .* resuming the interrupted run" <<<"$again" ||
      { cat "$o.err" >&2; fail "the run after the kill did not resume the interrupted training"; }
    echo "killed at the first checkpoint: the run again resumed it" >&2
  fi
done

# --- side by side and across machines ---------------------------------------------------------
# JOBS=3: ingests, ensemble members and evaluations as separate processes side by side. SHARD:
# two "machines" sharing the output directory train their halves of the units, then the plain
# command writes the ensembles and evaluates. Both must end with the sequential outcome.
JOBS=3 all_collections "$work/jobs" || { cat "$work/jobs.err" >&2; fail "JOBS=3 failed"; }
grep -q -- "--ensemble-member-alone true" "$work/jobs.err" ||
  { cat "$work/jobs.err" >&2; fail "JOBS=3 did not train the members as separate processes"; }
outcome "$work/jobs" >"$work/jobs.outcome"
cmp -s "$work/ref.outcome" "$work/jobs.outcome" ||
  { diff "$work/ref.outcome" "$work/jobs.outcome" | head -20 >&2; fail "JOBS=3: the outcome differs from the sequential run's"; }
for shard in 0/2 1/2; do
  SHARD=$shard all_collections "$work/shards" || { cat "$work/shards.err" >&2; fail "SHARD=$shard failed"; }
done
compgen -G "$work/shards/*.tpm" >/dev/null &&
  fail "the shards wrote a model file: only the command without SHARD writes the ensembles"
all_collections "$work/shards" || { cat "$work/shards.err" >&2; fail "the run after the shards failed"; }
if sed -n '/shard 1\/2: trained its units/,$p' "$work/shards.err" |
  grep -q 'ensemble member [0-9]*/[0-9]*: training'; then
  cat "$work/shards.err" >&2
  fail "the run after the shards trained again instead of reusing their members"
fi
outcome "$work/shards" >"$work/shards.outcome"
cmp -s "$work/ref.outcome" "$work/shards.outcome" ||
  { diff "$work/ref.outcome" "$work/shards.outcome" | head -20 >&2; fail "SHARD: the outcome differs from the sequential run's"; }
echo "side by side (JOBS=3) and in two shards: the sequential outcome" >&2

# --- flags -------------------------------------------------------------------------------------
# Train flags after `--` (and the script's own anywhere): the reference's outcome.
bash "$src/tools/train-all-collections.sh" "$tree" "$work/dashes" "${kill_flags[@]:0:4}" -- \
  "${kill_flags[@]:4}" >/dev/null 2>"$work/dashes.err" ||
  { cat "$work/dashes.err" >&2; fail "train flags after -- failed"; }
outcome "$work/dashes" >"$work/dashes.outcome"
cmp -s "$work/ref.outcome" "$work/dashes.outcome" ||
  { diff "$work/ref.outcome" "$work/dashes.outcome" | head -20 >&2; fail "train flags after --: the outcome differs"; }
# A temporary of a process that is gone (a kill -9 in an ingest whose dataset is not written
# again) is removed by the next run, which reuses everything else.
( exit 0 ) &
gone=$!
wait "$gone"
echo partial >"$work/dashes/tile_xla.tpug.tmp-$gone-0"
bash "$src/tools/train-all-collections.sh" "$tree" "$work/dashes" "${kill_flags[@]}" >/dev/null 2>&1 ||
  fail "the finished workflow run again failed"
[ ! -e "$work/dashes/tile_xla.tpug.tmp-$gone-0" ] || fail "a dead process's temporary was left in OUT_DIR"
bash "$src/tools/train-all-collections.sh" "$tree" --help "$work/none" >"$work/help.txt" 2>&1 ||
  fail "train-all-collections.sh --help after a path failed"
grep -q "before or after" "$work/help.txt" || fail "train-all-collections.sh --help after a path printed no usage"
# A flag that neither the script nor train takes, or a bad value, is refused at once: exit 2,
# a message naming it, nothing written.
refuse() {  # WHAT TEXT COMMAND...
  local what=$1 text=$2 rc=0
  shift 2
  "$@" >/dev/null 2>"$work/refuse.err" || rc=$?
  [ "$rc" -eq 2 ] || { cat "$work/refuse.err" >&2; fail "$what: exit $rc, not 2"; }
  grep -qF -- "$text" "$work/refuse.err" || { cat "$work/refuse.err" >&2; fail "$what: no '$text' in the message"; }
  [ ! -e "$work/none" ] || fail "$what: wrote $(find "$work/none")"
  [ ! -e "$work/none.csv" ] || fail "$what: wrote $work/none.csv"
}
ta=$src/tools/train-all-collections.sh
refuse "an unknown train flag" --no-such-flag bash "$ta" "$tree" "$work/none" --epochs 2 --no-such-flag 1
refuse "an unknown train flag after --" --no-such-flag bash "$ta" "$tree" "$work/none" -- --no-such-flag 1
refuse "a bad train flag value" --epochs bash "$ta" "$tree" "$work/none" --epochs two
refuse "an unknown flag before the paths" --no-such-flag bash "$ta" --no-such-flag 1 "$tree" "$work/none"
refuse "--hours not a number" "want a number of hours" bash "$ta" "$tree" "$work/none" --hours soon
refuse "--plan without --hours" "--plan needs --hours" bash "$ta" "$tree" "$work/none" --plan
refuse "make-submission.sh: an unknown flag" --no-such-flag \
  bash "$src/tools/make-submission.sh" "$out" "$work/none.csv" --no-such-flag
refuse "bench-release.sh: an unknown flag" --no-such-flag \
  bash "$src/tools/bench-release.sh" 0.001 "$work/none" --no-such-flag
refuse "bench-release.sh --project: an unknown flag" --no-such-flag \
  bash "$src/tools/bench-release.sh" "$work/none" --project --no-such-flag
refuse "bench-release.sh --project: a bad --hours" "want a number of hours" \
  bash "$src/tools/bench-release.sh" "$work/none" --hours 0 --project
echo "flags: after --, in any order, and the refusals" >&2

# --- one workflow per OUT_DIR ------------------------------------------------------------------
# A second train-all-collections.sh or make-submission.sh on an OUT_DIR a running workflow holds
# is refused at once (exit 1, naming its pid) and the first goes on to the reference's outcome.
setsid bash "$ta" "$tree" "$work/busy" "${kill_flags[@]}" >/dev/null 2>"$work/busy.err" &
first=$!
for _ in $(seq 3000); do [ -s "$work/busy/workflow.lock" ] && break; sleep 0.01; done
rc=0
bash "$ta" "$tree" "$work/busy" "${kill_flags[@]}" >/dev/null 2>"$work/busy2.err" || rc=$?
rc_sub=0
bash "$src/tools/make-submission.sh" "$work/busy" "$work/busy.csv" >/dev/null 2>"$work/busy3.err" || rc_sub=$?
kill -0 "$first" 2>/dev/null || fail "the first workflow ended before the second started: nothing was tested"
wait "$first" || { cat "$work/busy.err" >&2; fail "the first workflow failed beside a refused second"; }
[ "$rc" -eq 1 ] && grep -q "in use by another workflow (pid $first," "$work/busy2.err" ||
  { cat "$work/busy2.err" >&2; fail "a second train-all-collections.sh on a busy OUT_DIR was not refused (exit $rc)"; }
[ "$rc_sub" -eq 1 ] && grep -q "in use by another workflow (pid $first," "$work/busy3.err" ||
  { cat "$work/busy3.err" >&2; fail "make-submission.sh on a busy OUT_DIR was not refused (exit $rc_sub)"; }
[ ! -e "$work/busy.csv" ] || fail "the refused make-submission.sh wrote its submission"
outcome "$work/busy" >"$work/busy.outcome"
cmp -s "$work/ref.outcome" "$work/busy.outcome" ||
  { diff "$work/ref.outcome" "$work/busy.outcome" | head -20 >&2; fail "the first workflow's outcome differs after a refused second"; }
[ ! -e "$work/busy/workflow.lock" ] || fail "the workflow left its lock"
echo "one workflow per OUT_DIR: the second refused, the first unaffected" >&2

echo "release workflow: ok"
