#!/usr/bin/env bash
# A full disk at every write site: each output is written onto a small tmpfs that this test
# mounts itself and fills (a filler file leaving a little space, so that the write fails
# midway), and each must then
#   - exit 1 (the workflow scripts: non-zero),
#   - say on stderr which file and that there is no space left on the device,
#   - leave nothing at the destination: no partial file, no *.tmp-* (or *.tmp) leftovers,
#   - leave every earlier output on the disk byte-identical (a previous version of the same
#     output too: each site is also run once more with its complete output in place), and
#   - once the filler is deleted, write the complete output when run again (byte-identical to a
#     run on an empty disk).
# The sites: ingest -o, export -o DIR, train --output, the train checkpoint, predict -o (scores
# and kaggle), predict --merge -o, report -o, tune -o DIR, tune --measurements FILE, synth -o
# DIR, a command's stdout redirected to the disk (evaluate --json > FILE),
# tools/train-all-collections.sh and tools/make-submission.sh writing into a full OUT/, and
# `tools/release frontier run --results FILE`.
#
# Mounting needs root (or CAP_SYS_ADMIN); without it the test says why and exits 77, which ctest
# reports as skipped.
#
# Usage: full_disk_test.sh TPUGRAPHS_BINARY SOURCE_DIR PYTHON_WITH_NUMPY
set -euo pipefail

bin=$1
src=$2
python=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/full-disk.XXXXXX")
disk=$work/disk
mkdir "$disk"
cleanup() {
  if mountpoint -q "$disk"; then umount "$disk" 2>/dev/null || umount -l "$disk" || true; fi
  [ -n "${KEEP_WORK:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
if ! mount -t tmpfs -o size=24m,mode=0755 tmpfs "$disk" 2>"$work/mount.err"; then
  echo "SKIPPED: cannot mount a size-limited tmpfs at $disk to fill it ($(id -un), uid $(id -u)):" \
    "$(cat "$work/mount.err"); this test needs root or CAP_SYS_ADMIN"
  exit 77
fi
export TMPDIR=$work  # tune's measuring work directory, off the small disk
start=$SECONDS

# --- the full disk ---------------------------------------------------------------------------
page=$(stat -f -c %S "$disk")
avail() { echo $(($(stat -f -c %a "$disk") * page)); }
# fill BYTES: the filler leaves BYTES (whole pages) free on the disk.
fill() {
  rm -f "$disk/filler"
  local n=$(($(avail) - $1))
  if [ "$n" -gt 0 ]; then fallocate -l "$n" "$disk/filler"; fi
  [ "$(avail)" -le "$1" ] || fail "the filler left $(avail) bytes free, not $1"
}
unfill() { rm -f "$disk/filler"; }
# Half of SIZE bytes in whole pages: the space a write of SIZE bytes runs out of midway.
half() { echo $(($1 / 2 / page * page)); }
size_of() { du -sb --apparent-size "$1" | cut -f1; }
# Every file on the disk but the filler, with its checksum.
snapshot() { (cd "$disk" && find . -type f ! -name filler -print0 | sort -z | xargs -0 -r sha256sum); }
# Temporaries, and lock files (a run holds one while it runs and removes it at its end).
leftovers() { find "$disk" -name '*.tmp-*' -o -name '*.tmp' -o -name '*.lock' | sort; }

# expect_full NAME DEST CMD...: CMD, run on the full disk, fails as it should (see the top).
expect_full() {
  local name=$1 dest=$2
  shift 2
  local before rc=0
  before=$(snapshot)
  "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
  [ "$rc" -eq 1 ] || { cat "$work/$name.err" >&2; fail "$name: exit $rc on a full disk, not 1"; }
  grep -q "No space left on device" "$work/$name.err" ||
    { cat "$work/$name.err" >&2; fail "$name: the message does not say the disk is full"; }
  grep -qF "$dest" "$work/$name.err" ||
    { cat "$work/$name.err" >&2; fail "$name: the message does not name $dest"; }
  ! grep -q '\.tmp-' "$work/$name.err" ||
    { cat "$work/$name.err" >&2; fail "$name: the message names a temporary, not the output"; }
  [ -z "$(leftovers)" ] || fail "$name: leftovers on the full disk: $(leftovers)"
  [ "$(snapshot)" = "$before" ] ||
    fail "$name: earlier outputs changed: $(diff <(echo "$before") <(snapshot) || true)"
}

# Whether two outputs are the same: byte for byte (same_bytes), or for a model file or a
# checkpoint, whose epochs' wall-clock times differ between runs (docs/model-file.md), the same
# scores (same_model, same_checkpoint). `same` names the one for the next site.
same_bytes() { diff -r "$1" "$2" >/dev/null; }
scores_of() {
  "$bin" -q -j 2 predict --data "$work/data.tpug" --model "$1" --format scores -o "$2"
}
same_model() {
  scores_of "$1" "$work/a.scores" && scores_of "$2" "$work/b.scores" &&
    diff <(grep -v '^# scorer:' "$work/a.scores") <(grep -v '^# scorer:' "$work/b.scores") >/dev/null
}
same_checkpoint() {  # the model each checkpoint finishes to
  local c
  for c in a b; do
    cp "$([ $c = a ] && echo "$1" || echo "$2")" "$work/$c.ckpt"
    "$bin" -q -j 2 train --resume "$work/$c.ckpt" --output "$work/$c.tpm" >/dev/null || return 1
  done
  same_model "$work/a.tpm" "$work/b.tpm"
}
same=same_bytes

# site NAME DEST CMD...: the command writing DEST (a file or a directory on the disk) first runs
# on a disk with room (its output is the reference), then on a disk filled to half its output
# (DEST absent), then again with room, and once more full with its complete output in place.
site() {
  local name=$1 dest=$2
  shift 2
  unfill
  "$@" >/dev/null 2>"$work/$name.err" || { cat "$work/$name.err" >&2; fail "$name: failed on a disk with room"; }
  [ -e "$dest" ] || fail "$name: wrote no $dest"
  rm -rf "$work/ref.$name"
  cp -a "$dest" "$work/ref.$name"
  local size
  size=$(size_of "$dest")
  rm -rf "$dest"
  fill "$(half "$size")"
  expect_full "$name" "$dest" "$@"
  [ ! -e "$dest" ] || fail "$name: $dest exists after the failed write"
  unfill
  "$@" >/dev/null 2>"$work/$name.err" || { cat "$work/$name.err" >&2; fail "$name: the run after freeing space failed"; }
  "$same" "$work/ref.$name" "$dest" || fail "$name: the run after freeing space wrote another $dest"
  # The previous complete output stays as it is when its replacement does not fit (the
  # snapshot of expect_full holds it).
  fill "$(half "$size")"
  expect_full "$name.again" "$dest" "$@"
  unfill
  same=same_bytes
  echo "ok: $name ($size bytes)"
}

# --- inputs, off the small disk --------------------------------------------------------------
layout=(--task layout --min-nodes 150 --max-nodes 300)
"$bin" -q -j 2 synth "${layout[@]}" --graphs 4 --configs 24 --splits 0.5,0.25,0.25 --seed 2 \
  --error-rate 0 -o "$work/raw" >/dev/null
"$bin" -q -j 2 ingest "$work/raw" -o "$work/data.tpug" >/dev/null
# Many configurations: rankings and submissions of tens of KB.
"$bin" -q -j 2 synth "${layout[@]}" --graphs 2 --configs 1500 --splits 0,0,1 --seed 3 \
  --error-rate 0 -o "$work/bigraw" >/dev/null
"$bin" -q -j 2 ingest "$work/bigraw" -o "$work/big.tpug" >/dev/null
short=(--epochs 2 --steps-per-epoch 2)
"$bin" -q -j 2 train --dataset "$work/data.tpug" --output "$work/model.tpm" "${short[@]}" >/dev/null
"$bin" -q -j 2 predict --data "$work/big.tpug" --model "$work/model.tpm" --format kaggle \
  -o "$work/big.csv"

# The earliest output on the disk, which every failure below must leave alone.
head -c 100000 /dev/urandom >"$disk/earlier.bin"

# --- the commands ----------------------------------------------------------------------------
T=("$bin" -q -j 2)
site ingest "$disk/data.tpug" "${T[@]}" ingest "$work/raw" -o "$disk/data.tpug"
site export "$disk/export" "${T[@]}" export "$work/data.tpug" -o "$disk/export"
site synth "$disk/synth" "${T[@]}" synth "${layout[@]}" --graphs 3 --configs 24 --seed 4 -o "$disk/synth"
mkdir -p "$work/ckpt"
same=same_model
site train "$disk/model.tpm" "${T[@]}" train --dataset "$work/data.tpug" "${short[@]}" \
  --output "$disk/model.tpm" --checkpoint "$work/ckpt/model.ckpt"
same=same_checkpoint
site checkpoint "$disk/model.ckpt" "${T[@]}" train --dataset "$work/data.tpug" "${short[@]}" \
  --output "$work/ckpt/model.tpm" --checkpoint "$disk/model.ckpt" --checkpoint-interval-seconds 0.001
site predict-scores "$disk/scores.tsv" "${T[@]}" predict --data "$work/big.tpug" \
  --model "$work/model.tpm" --format scores -o "$disk/scores.tsv"
site predict-kaggle "$disk/big.csv" "${T[@]}" predict --data "$work/big.tpug" \
  --model "$work/model.tpm" --format kaggle -o "$disk/big.csv"
site predict-merge "$disk/submission.csv" "${T[@]}" predict --merge "$work/big.csv" \
  -o "$disk/submission.csv"
site report "$disk/report.html" "${T[@]}" report --model "$work/model.tpm" \
  --data "$work/data.tpug" -o "$disk/report.html"
site tune "$disk/tuned" "${T[@]}" tune --data "$work/data.tpug" --model "$work/model.tpm" \
  --budget 300 -o "$disk/tuned"

# A command's stdout redirected to a file of the full disk: exit 1, the partial file is the
# shell's.
fill 0
rc=0
"${T[@]}" evaluate --data "$work/big.tpug" --model "$work/model.tpm" --json --per-graph \
  >"$disk/eval.json" 2>"$work/stdout.err" || rc=$?
[ "$rc" -eq 1 ] || fail "evaluate --json > a full disk: exit $rc, not 1"
grep -q "standard output.*No space left on device" "$work/stdout.err" ||
  { cat "$work/stdout.err" >&2; fail "evaluate --json > a full disk: no message"; }
rm -f "$disk/eval.json"
unfill
echo "ok: stdout"

# tune --measurements: the log of a 1-round loop; then 3 rounds on a full disk (the append
# fails midway through the page the file ends in), which must leave the log as it was.
prog=$(find "$work/raw" -name '*.pb' | sort | head -1)
loop=("${T[@]}" tune --data "$prog" --model "$work/model.tpm" --measure 24 --budget 200
  --measure-cmd "$bin -q synth --score {} --from $prog" --measurements "$disk/measured.tsv")
"${loop[@]}" --rounds 3 -o "$work/loop-ref.npz" >/dev/null 2>"$work/loop.err" ||
  { cat "$work/loop.err" >&2; fail "the tune loop failed"; }
cp "$disk/measured.tsv" "$work/measured-ref.tsv"
rm "$disk/measured.tsv"
"${loop[@]}" --rounds 1 -o "$work/loop1.npz" >/dev/null 2>"$work/loop.err" ||
  { cat "$work/loop.err" >&2; fail "the 1-round tune loop failed"; }
[ $(($(size_of "$disk/measured.tsv") % page)) -ne 0 ] || fail "the measurements end on a page"
fill 0
expect_full measurements "$disk/measured.tsv" "${loop[@]}" --rounds 3 -o "$work/loop.npz"
[ ! -e "$work/loop.npz" ] || fail "measurements: tune wrote its output after the failed append"
unfill
"${loop[@]}" --rounds 3 -o "$work/loop.npz" >/dev/null 2>"$work/loop.err" ||
  { cat "$work/loop.err" >&2; fail "measurements: the run after freeing space failed"; }
cmp "$work/measured-ref.tsv" "$disk/measured.tsv" ||
  fail "measurements: the log differs from an uninterrupted run's"
cmp "$work/loop-ref.npz" "$work/loop.npz" ||
  fail "measurements: the output differs from an uninterrupted run's"
echo "ok: measurements"
echo "== the commands: $((SECONDS - start)) s"

# --- the workflow: OUT/ of tools/train-all-collections.sh and tools/make-submission.sh ---------
# A release tree of one collection (layout:xla:random; the four others are missing: notes).
tree=$work/release
# 3000 configurations: the test graph's submission row takes several pages.
"${T[@]}" synth "${layout[@]}" --graphs 4 --configs 3000 --splits 0.5,0.25,0.25 --search random \
  --seed 5 --error-rate 0 -o "$work/xla-raw" >/dev/null
for split in train valid test; do
  dir=$(find "$work/xla-raw/pb" -type d -name "$split" | head -1)
  "${T[@]}" ingest "$dir" --collection layout:xla:random --split "$split" \
    -o "$work/xla-$split.tpug" >/dev/null
  "${T[@]}" export "$work/xla-$split.tpug" -o "$tree" >/dev/null
done
export TPUGRAPHS=$bin TPUGRAPHS_GLOBAL_FLAGS="-j 2 -q"
recipe=(--epochs 2 --steps-per-epoch 2 --ensemble-members 2 --min-config-passes 0)
train_all() { bash "$src/tools/train-all-collections.sh" "$tree" "$1" "${recipe[@]}"; }
submit() { bash "$src/tools/make-submission.sh" "$1" "$2"; }
ref=$work/ref-out
train_all "$ref" >/dev/null 2>"$work/ref-train.err" ||
  { cat "$work/ref-train.err" >&2; fail "train-all-collections.sh failed on a disk with room"; }
submit "$ref" "$ref/submission.csv" 2>"$work/ref-sub.err" ||
  { cat "$work/ref-sub.err" >&2; fail "make-submission.sh failed on a disk with room"; }
[ -s "$ref/submission.csv" ] || fail "make-submission.sh wrote no submission"
metrics() { sed "s#$1/##g" "$1/layout_xla_random.valid.json"; }

failures=()
# expect_script NAME OUT CMD...: the script fails on the full disk (non-zero), names a file of OUT
# and says there is no space, and leaves no temporaries and earlier outputs as they were.
expect_script() {
  local name=$1 out=$2
  shift 2
  local before rc=0
  before=$(snapshot)
  "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
  [ "$rc" -ne 0 ] || { cat "$work/$name.err" >&2; fail "$name: exit 0 on a full disk"; }
  if ! grep -q "$out[^ ]*: .*No space left on device" "$work/$name.err"; then
    failures+=("$name: no message naming a file of $out and the full disk: $(tail -3 "$work/$name.err")")
    echo "FAIL: ${failures[-1]}" >&2
  fi
  # Recorded, removed and checked on: the checks after it still run (the test fails at its end).
  if [ -n "$(leftovers)" ]; then
    failures+=("$name: leftovers on the full disk: $(leftovers | tr '\n' ' ')")
    echo "FAIL: ${failures[-1]}" >&2
    leftovers | xargs rm -rf
  fi
  # Earlier files are kept or, where the script rewrites them (notes), complete.
  local line now
  now=$(snapshot)
  while read -r line; do
    grep -qxF "$line" <<<"$now" || case "$line" in
      *.note | *notes.txt) ;;
      *) fail "$name: earlier output changed or gone: $line" ;;
    esac
  done <<<"$before"
}

# 1. OUT empty, room for the dataset, not for the training's checkpoint and models.
out=$disk/out
mkdir "$out"
data_size=$(size_of "$ref/layout_xla_random.tpug")
fill $(((data_size / page + 2) * page + 65536))
expect_script workflow "$out" train_all "$out"
unfill
train_all "$out" >/dev/null 2>"$work/workflow.err" ||
  { cat "$work/workflow.err" >&2; fail "workflow: the run after freeing space failed"; }
[ "$(metrics "$out")" = "$(metrics "$ref")" ] ||
  fail "workflow: the metrics after the full disk differ from an uninterrupted run's"
echo "ok: train-all-collections.sh, training"

# 2. The models there, the evaluation's metrics redirected into OUT on a full disk.
rm "$out"/*.valid.json "$out"/*.valid.txt
fill 0
expect_script workflow-evaluate "$out" train_all "$out"
unfill
train_all "$out" >/dev/null 2>"$work/workflow.err" ||
  { cat "$work/workflow.err" >&2; fail "workflow-evaluate: the run after freeing space failed"; }
[ "$(metrics "$out")" = "$(metrics "$ref")" ] || fail "workflow-evaluate: other metrics"
echo "ok: train-all-collections.sh, evaluation"

# 3. make-submission.sh: no room for a collection's predictions; then room for those but not
# for the submission.
fill 0
expect_script submission "$out" submit "$out" "$out/submission.csv"
[ ! -e "$out/submission.csv" ] || fail "submission: a submission on the full disk"
unfill
rm -f "$out/layout_xla_random.test.csv"
t_size=$(size_of "$ref/layout_xla_random.test.csv")
# (a page more for the workflow's lock file)
fill $((((t_size + page - 1) / page + 1) * page + $(half "$(size_of "$ref/submission.csv")")))
expect_script submission-merge "$out/submission.csv" submit "$out" "$out/submission.csv"
[ ! -e "$out/submission.csv" ] || fail "submission-merge: a submission on the full disk"
cmp -s "$out/layout_xla_random.test.csv" "$ref/layout_xla_random.test.csv" ||
  fail "submission-merge: the collection's predictions are not complete"
unfill
submit "$out" "$out/submission.csv" 2>"$work/sub.err" ||
  { cat "$work/sub.err" >&2; fail "submission: the run after freeing space failed"; }
cmp -s "$out/submission.csv" "$ref/submission.csv" || fail "submission: another submission"
echo "ok: make-submission.sh"

# --- the frontier's results: tools/release frontier run --results FILE -----------------------
export FRONTIER_FIXTURE_SCALE=tiny
printf 'variant\tfixture\trecipe\tflags\n%s\t%s\t%s\t%s\n' xla.tiny xla layout \
  "--epochs 2 --steps-per-epoch 2 --min-config-passes 0 --ensemble-members 1" >"$work/variants.tsv"
results=$disk/frontier/results.jsonl
mkdir -p "$disk/frontier"
# An earlier line that ends 100 bytes before the end of a page: the new line is cut there.
pad=$((page - 100 - $(printf '{"pad": "", "seed": 1, "variant": "earlier"}\n' | wc -c)))
printf '{"pad": "%s", "seed": 1, "variant": "earlier"}\n' \
  "$(head -c "$pad" /dev/zero | tr '\0' x)" >"$results"
frontier=("$python" "$src/tools/release" frontier run --binary "$bin" --variants
  "$work/variants.tsv" --results "$results" --work "$work/frontier" --threads 2 --seeds 1)
fill 0
before=$(snapshot)
rc=0
"${frontier[@]}" >/dev/null 2>"$work/frontier.err" || rc=$?
[ "$rc" -eq 1 ] || { cat "$work/frontier.err" >&2; fail "frontier: exit $rc on a full disk, not 1"; }
{ grep -qF "$results: cannot append" "$work/frontier.err" &&
  grep -q "No space left on device" "$work/frontier.err"; } ||
  { cat "$work/frontier.err" >&2; fail "frontier: no message naming $results and the full disk"; }
[ "$(snapshot)" = "$before" ] || fail "frontier: the results file changed"
[ -z "$(leftovers)" ] || fail "frontier: leftovers on the full disk: $(leftovers)"
unfill
"${frontier[@]}" >/dev/null 2>"$work/frontier.err" ||
  { cat "$work/frontier.err" >&2; fail "frontier: the run after freeing space failed"; }
"$python" - "$results" <<'EOF' || fail "frontier: the results file is not the earlier line and the run's"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert [(r["variant"], r["seed"]) for r in lines] == [("earlier", 1), ("xla.tiny", 1)], lines
assert -1 <= lines[1]["kendall"] <= 1, lines[1]
EOF
echo "ok: frontier"
echo "== all: $((SECONDS - start)) s"
if [ ${#failures[@]} -gt 0 ]; then
  printf 'FAIL: %s\n' "${failures[@]}" >&2
  exit 1
fi
