#!/usr/bin/env bash
# tools/make-release-shaped.sh and tools/bench-release.sh at a tiny scale: the tree has the
# release's graph counts scaled (round(S x count), at least 1), graph sizes capped by
# MAX_NODES/MAX_CONFIGS and the train flags shortened by BENCH_TRAIN_FLAGS so that the whole
# workflow runs in seconds; checks the tree against shape.tsv and the benchmark's table, and that
# make-release-shaped.sh gives the same tree for the same SEED and another for another SEED.
#
# Usage: release_bench_test.sh TPUGRAPHS_BINARY SOURCE_DIR PYTHON_WITH_NUMPY
set -euo pipefail

bin=$1
src=$2
python=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/release-bench.XXXXXX")
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
export TPUGRAPHS=$bin TPUGRAPHS_GLOBAL_FLAGS="-j 2" MAX_NODES=300 MAX_CONFIGS=40
export BENCH_TRAIN_FLAGS="--epochs 1 --steps-per-epoch 2 --ensemble-members 1 --min-config-passes 0"

# --- make-release-shaped.sh alone: the same SEED gives a byte-identical tree, another SEED
# another; S = 0.001: tile 5709/676/844 -> 6/1/1 kernels, every layout collection and split 1.
shaped() { SEED=$1 bash "$src/tools/make-release-shaped.sh" 0.001 "$work/$2" 2>"$work/$2.err" ||
  { cat "$work/$2.err" >&2; fail "make-release-shaped.sh SEED=$1 failed"; }; }
shaped 7 s7a
shaped 7 s7b
shaped 8 s8
diff -r "$work/s7a" "$work/s7b" >/dev/null || fail "make-release-shaped.sh: the same SEED gave another tree"
(cd "$work/s7a" && find . -type f | sort) >"$work/s7a.files"
(cd "$work/s8" && find . -type f | sort) >"$work/s8.files"
cmp -s "$work/s7a.files" "$work/s8.files" || fail "make-release-shaped.sh: another SEED gave other files"
same=0
while read -r f; do cmp -s "$work/s7a/$f" "$work/s8/$f" && same=$((same + 1)); done <"$work/s7a.files"
# Only shape.tsv may agree (every request capped by MAX_NODES / MAX_CONFIGS).
[ "$same" -le 1 ] || fail "make-release-shaped.sh: SEED 7 and 8 share $same files"
[ "$(grep -c '^tile:xla	train	' "$work/s7a/shape.tsv")" -eq 6 ] || fail "S=0.001: not 6 tile train kernels"
[ "$(grep -c '^layout:' "$work/s7a/shape.tsv")" -eq 12 ] || fail "S=0.001: not 12 layout graphs"
[ "$(find "$work/s7a/npz" -name '*.npz' | wc -l)" -eq 20 ] || fail "S=0.001: not 20 .npz files"
bash "$src/tools/make-release-shaped.sh" 0 "$work/s0" 2>/dev/null && fail "S=0 was accepted"
rm -rf "$work"/s7a "$work"/s7b "$work"/s8

# S = 0.004: tile 5709/676/844 -> 23/3/3; xla 69,61/7/8 -> 1/1/1 (0.28 rounds to 0, at least 1);
# nlp 207,198/20/17 -> 1/1/1 (0.83, 0.79 round to 1).
# --- --project: the measured projection, on fixtures shrunk for a test ----------------------
PROJECT_FIXTURE_NODES=300 PROJECT_FIXTURE_CONFIGS=40 PROJECT_STEPS="2 20" \
  bash "$src/tools/bench-release.sh" --project --json "$work/p" >"$work/project.json" \
  2>"$work/project.err" || { cat "$work/project.err" >&2; fail "bench-release.sh --project failed"; }
grep -q "load average (1 min) at start" "$work/project.err" || fail "--project did not print the load"
# Each step count is timed twice (PROJECT_REPEATS) and the fastest kept.
grep -q "step [0-9.]* ms (20 steps [0-9.]* / [0-9.]* s, 2 steps [0-9.]* / [0-9.]* s" "$work/project.err" ||
  { cat "$work/project.err" >&2; fail "--project did not time each step count twice"; }
# The validation is measured on every one of its 3 epochs, although layout-large validates
# every 5th (a validation measured as a third of one once projected nlp's at a third).
validated=$(grep -c "epoch=[0-9]* train_loss=[^ ]* valid_kendall=" "$work/p/nlp/layout-large.valid.tpm.log" || true)
[ "$validated" -eq 3 ] || { cat "$work/p/nlp/layout-large.valid.tpm.log" >&2; fail "the validation run validated $validated epochs, not 3"; }
# The step rule against the trainer's own: train logs the steps per epoch min_config_passes
# sets; the projection's rule must give the same for that dataset.
"$bin" train --config "$src/tools/configs/layout-large.textproto" --dataset "$work/p/nlp/both.tpug" \
  --output "$work/p/rule.tpm" --epochs 2 --valid-split test --carve-valid-fraction 0 \
  --min-config-passes 40 2>"$work/rule.err" >/dev/null || { cat "$work/rule.err" >&2; fail "train for the step rule failed"; }
trainer_steps=$(sed -n 's/.* \([0-9]*\) steps per epoch instead of .*/\1/p' "$work/rule.err" | head -1)
[ -n "$trainer_steps" ] || { cat "$work/rule.err" >&2; fail "train did not log its steps per epoch"; }
"$python" - "$work/project.json" "$src" "$trainer_steps" <<'EOF'
import json, math, sys
sys.path.insert(0, sys.argv[2] + "/tools/release")
import projection as rp
p = json.load(open(sys.argv[1]))
names = [c["name"] for c in p["collections"]]
assert names == ["tile:xla", "layout:xla:random", "layout:xla:default", "layout:nlp:random",
                 "layout:nlp:default"], names
want = {"tile:xla": "tile.textproto", "layout:xla:random": "layout-collection.textproto",
        "layout:xla:default": "layout-collection.textproto",
        "layout:nlp:random": "layout-large.textproto",
        "layout:nlp:default": "layout-large.textproto"}
for c in p["collections"]:
    assert c["recipe"] == want[c["name"]], c
    for k in ("steps", "step_ms", "train_hours", "valid_hours", "peak_rss_mb"):
        assert k in c and c[k] >= 0, (k, c)
    assert c["step_ms"] > 0, c
    assert abs(c["train_hours"] - c["steps"] * c["step_ms"] / 3.6e6) <= 1e-3 + 1e-3 * c["train_hours"], c
# The release's step budgets by the recipes' rule, worked by hand (docs/train.md):
steps = {c["name"]: c["steps"] for c in p["collections"]}
assert steps["tile:xla"] == 200 * math.ceil(5709 / 4), steps
# layout-collection.textproto trains on the 69 training and 7 validation programs, and so
# validates on none.
assert steps["layout:xla:random"] == 8 * 300 * math.ceil(1.5 * (1005926 + 59809) / (64 * 300)), steps
by_name = {c["name"]: c for c in p["collections"]}
for name in ("layout:xla:random", "layout:xla:default"):
    assert by_name[name]["validations"] == 0 and by_name[name]["valid_hours"] == 0, by_name[name]
    assert by_name[name]["eval_hours"] > 0, by_name[name]  # the workflow still evaluates them
for name in ("layout:nlp:random", "layout:nlp:default"):
    assert by_name[name]["validations"] == 60, by_name[name]  # (its hours: noise at this size)
assert steps["layout:nlp:random"] == 300 * math.ceil(1.5 * 13457555 / (64 * 300)), steps
assert abs(p["total_hours"] - sum(c["hours"] for c in p["collections"])) < 0.02, p
assert p["peak_rss_mb"] == max(c["peak_rss_mb"] for c in p["collections"]), p
assert p["machine"]["cores"] >= 1 and "load_at_start" in p["machine"], p["machine"]
# The trainer's rule on the fixture (2 training graphs of 40 configurations, 2 epochs).
r = rp.recipe_fields(sys.argv[2] + "/tools/configs/layout-large.textproto")
r["epochs"], r["min_config_passes"] = 2, 40
_, per_epoch = rp.member_steps(r, 2, 80)
assert per_epoch == int(sys.argv[3]), (per_epoch, sys.argv[3])
# A variant's split flags change which graphs train and validate, not what a step costs: they
# are projected with the recipe's measurements, the MSE weight is measured.
budget, cost = rp.split_flags(["--mse-weight", "0.1", "--train-split", "train,valid",
                               "--carve-valid-fraction", "0"])
assert budget == {"train_split": "train,valid", "carve_valid_fraction": 0.0}, budget
assert cost == ["--mse-weight", "0.1"], cost
assert rp.trains_on_valid(rp.recipe_fields(sys.argv[2] + "/tools/configs/layout-collection.textproto"))
assert not rp.trains_on_valid(rp.recipe_fields(sys.argv[2] + "/tools/configs/layout.textproto"))
print("projection ok")
EOF

# PROJECTION_SET: the same measurements projected with other budget fields; steps follow the
# rule with the new fields, validation the epochs, and a field that changes a step's cost is
# refused.
PROJECTION_MEASUREMENTS=$work/p/measurements.json \
  PROJECTION_SET="layout-large.epochs=100 layout-large.min_config_passes=0.3 layout-collection.ensemble_members=2" \
  bash "$src/tools/bench-release.sh" --project --json "$work/p" >"$work/project-set.json" \
  2>"$work/project-set.err" || { cat "$work/project-set.err" >&2; fail "--project with PROJECTION_SET failed"; }
"$python" - "$work/project.json" "$work/project-set.json" "$src" <<'EOF' || fail "PROJECTION_SET is not applied"
import json, sys
sys.path.insert(0, sys.argv[3] + "/tools/release")
import projection as rp
base = {c["name"]: c for c in json.load(open(sys.argv[1]))["collections"]}
p = json.load(open(sys.argv[2]))
new = {c["name"]: c for c in p["collections"]}
assert p["measurements"].endswith("measurements.json"), p["measurements"]
assert len(p["overrides"]) == 3, p["overrides"]
large = rp.recipe_fields(sys.argv[3] + "/tools/configs/layout-large.textproto")
large_epochs = large["epochs"]
large.update(epochs=100, min_config_passes=0.3)
layout = rp.recipe_fields(sys.argv[3] + "/tools/configs/layout-collection.textproto")
for name in ("layout:nlp:random", "layout:nlp:default"):
    rel = rp.RELEASE[name]
    steps, _ = rp.member_steps(large, rel["train_graphs"], rel["train_rows"])
    assert new[name]["steps"] == steps, (name, new[name]["steps"], steps)
    assert new[name]["epochs"] == 100, new[name]
    # Validation: 100 epochs instead of the recipe's.
    want = base[name]["valid_hours"] * 100 / large_epochs
    assert abs(new[name]["valid_hours"] - want) <= 0.002 + 1e-3 * want, (name, new[name], want)
for name in ("layout:xla:random", "layout:xla:default"):
    rel = rp.RELEASE[name]
    steps, _ = rp.member_steps(layout, rel["train_graphs"] + rel["valid_graphs"],
                               rel["train_rows"] + rel["valid_rows"])
    assert new[name]["members"] == 2 and new[name]["steps"] == 2 * steps, (name, new[name])
    assert base[name]["steps"] == int(layout["ensemble_members"]) * steps, base[name]
assert new["tile:xla"]["hours"] == base["tile:xla"]["hours"], (new["tile:xla"], base["tile:xla"])
print("projection with overrides ok")
EOF
for bad in layout-large.num_layers=2 layout.epochs=0 layout-huge.epochs=3; do
  if PROJECTION_MEASUREMENTS=$work/p/measurements.json PROJECTION_SET=$bad \
    bash "$src/tools/bench-release.sh" --project "$work/p" >/dev/null 2>"$work/set-bad.err"; then
    fail "PROJECTION_SET=$bad was accepted"
  fi
  grep -q -- "--set '$bad'" "$work/set-bad.err" || { cat "$work/set-bad.err" >&2; fail "no message for PROJECTION_SET=$bad"; }
done

export PROJECTION_MEASUREMENTS=$work/p/measurements.json
if ! bash "$src/tools/bench-release.sh" 0.004 "$work/b" >"$work/bench.out" 2>"$work/bench.err"; then
  cat "$work/bench.err" >&2
  fail "bench-release.sh exited non-zero"
fi
tree=$work/b/tree
"$python" - "$tree" <<'EOF' || fail "the tree does not have the expected shape"
import csv, glob, os, sys
import numpy as np
tree = sys.argv[1]
want = {"tile:xla": (23, 3, 3)}
for c in ["layout:xla:random", "layout:xla:default", "layout:nlp:random", "layout:nlp:default"]:
    want[c] = (1, 1, 1)
shape = list(csv.DictReader(open(os.path.join(tree, "shape.tsv")), delimiter="\t"))
for c, counts in want.items():
    d = "npz/tile/xla" if c == "tile:xla" else "npz/layout/" + "/".join(c.split(":")[1:])
    for split, n in zip(["train", "valid", "test"], counts):
        files = sorted(glob.glob(os.path.join(tree, d, split, "*.npz")))
        assert len(files) == n, (c, split, len(files), n)
        rows = [r for r in shape if r["collection"] == c and r["split"] == split]
        assert len(rows) == n, (c, split, len(rows))
        for r in rows:
            configs = int(r["configs"])
            assert 8 <= configs <= 40, r  # the release's minimum for tile is 8; MAX_CONFIGS 40
            if c.startswith("layout"):
                assert 1 <= int(r["nodes"]) <= 300, r
                if split == "test":
                    assert configs == 40, r  # 1,000 per test graph, capped
                a = np.load(os.path.join(tree, d, split, r["name"] + ".npz"))
                assert a["config_runtime"].shape[0] == configs, (r, a["config_runtime"].shape)
                assert a["node_config_feat"].shape[1] >= 1, r
# Graph i of a source and split is the same program in both searches (as in the release).
for src in ["xla", "nlp"]:
    for split in ["train", "valid", "test"]:
        a = glob.glob(os.path.join(tree, "npz/layout", src, "random", split, "*.npz"))
        b = glob.glob(os.path.join(tree, "npz/layout", src, "default", split, "*.npz"))
        fa = np.load(a[0])["node_feat"]
        fb = np.load(b[0])["node_feat"]
        assert fa.shape == fb.shape and (fa == fb).all(), (src, split)
print("tree ok")
EOF

# The table: one row per stage and collection with figures, and the submission.
for c in tile:xla layout:xla:random layout:xla:default layout:nlp:random layout:nlp:default; do
  for stage in ingest train evaluate predict; do
    line=$(awk -v s="$stage" -v c="$c" '$1 == s && $2 == c' "$work/bench.out")
    [ -n "$line" ] || { cat "$work/bench.out" >&2; fail "no $stage row for $c"; }
    # procs wall cpu rss bytes: numbers, RSS above 1 MiB.
    echo "$line" | awk '{ if (!($3 >= 1 && $4 >= 0 && $5 >= 0 && $6 > 1 && $7 ~ /^[0-9]+$/)) exit 1 }' ||
      fail "bad figures: $line"
  done
done
grep -q "^make-tree " "$work/bench.out" || fail "no make-tree row"
grep -q "^submission: " "$work/bench.out" || fail "no submission line"
rows=$(($(wc -l <"$work/b/out/submission.csv") - 1))
[ "$rows" -eq $((3 + 4)) ] || fail "submission has $rows rows, want 7 (3 tile + 4 layout test files)"
# The run against its projection: one row per collection with both figures.
for c in tile:xla layout:xla:random layout:xla:default layout:nlp:random layout:nlp:default; do
  awk -v c="$c" '$1 == c && $2 > 0 && $3 > 0 && $4 > 0 { ok = 1 } END { exit !ok }' "$work/bench.out" ||
    { cat "$work/bench.out" >&2; fail "no measured-against-projected row for $c"; }
done

# The projection of the tree takes each split's node counts from shape.tsv (layout) and from
# the files (tile kernels); the comparison reads the epochs each training ran (1, from
# BENCH_TRAIN_FLAGS) and scales the projected train and validation hours to them.
"$python" - "$tree" "$work/b/projection.json" "$work/b/compare.json" <<'EOF' || fail "the comparison with the projection is wrong"
import csv, glob, json, os, sys
import numpy as np
tree, proj, comp = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
shape = list(csv.DictReader(open(os.path.join(tree, "shape.tsv")), delimiter="\t"))
proj = {c["name"]: c for c in proj["collections"]}
for name, c in proj.items():
    for split in ("train", "valid", "test"):
        if name == "tile:xla":
            files = glob.glob(os.path.join(tree, "npz/tile/xla", split, "*.npz"))
            sizes = [np.load(f)["node_feat"].shape[0] for f in files]
        else:
            sizes = [int(r["nodes"]) for r in shape if r["collection"] == name and r["split"] == split]
        want = sum(sizes) / len(sizes)
        assert abs(c["nodes_per_graph"][split] - want) < 0.1, (name, split, c["nodes_per_graph"], want)
rows = {r["name"]: r for r in comp["collections"]}
assert sorted(rows) == sorted(proj), (sorted(rows), sorted(proj))
for name, r in rows.items():
    c = proj[name]
    assert r["epochs_run"] == 1 and r["epochs"] == c["epochs"] > 1, r
    per_epoch = 3600 * (c["train_hours"] + c["valid_hours"]) / c["epochs"]
    want = 3600 * c["hours"] - per_epoch * (c["epochs"] - 1)
    assert abs(r["at_run_s"] - want) <= 0.1 + 1e-3 * want, (r, want)
    assert r["at_run_s"] < r["projected_s"], r
    assert abs(r["ratio_at_run"] - r["measured_s"] / r["at_run_s"]) < 1e-9 * r["ratio_at_run"], r
print("comparison ok")
EOF

# COLLECTIONS: the same tree, two of its collections only: the other three appear in no stage,
# no table row and no comparison row.
mkdir -p "$work/c"
ln -s "$work/b/tree" "$work/c/tree"
if ! COLLECTIONS="tile:xla layout:xla:default" bash "$src/tools/bench-release.sh" 0.004 "$work/c" \
  >"$work/subset.out" 2>"$work/subset.err"; then
  cat "$work/subset.err" >&2
  fail "bench-release.sh with COLLECTIONS exited non-zero"
fi
for c in tile:xla layout:xla:default; do
  grep -q "^train  *$c " "$work/subset.out" || { cat "$work/subset.out" >&2; fail "no train row for $c"; }
  awk -v c="$c" '$1 == c && $2 > 0 && $3 > 0 { ok = 1 } END { exit !ok }' "$work/subset.out" ||
    fail "no measured-against-projected row for $c with COLLECTIONS"
done
for c in layout:xla:random layout:nlp:random layout:nlp:default; do
  if grep -q " $c " "$work/subset.out" || grep -q "^$c " "$work/subset.out"; then
    cat "$work/subset.out" >&2
    fail "$c appears in a run restricted to tile:xla and layout:xla:default"
  fi
done
[ ! -e "$work/c/out/layout_xla_random.tpug" ] || fail "COLLECTIONS: an unselected collection was ingested"
rows=$(($(wc -l <"$work/c/out/submission.csv") - 1))
[ "$rows" -eq $((3 + 1)) ] || fail "subset submission has $rows rows, want 4 (3 tile + 1 layout)"
if COLLECTIONS="layout:xla:nope" bash "$src/tools/bench-release.sh" 0.004 "$work/c" \
  >/dev/null 2>"$work/bad.err"; then
  fail "an unknown collection in COLLECTIONS was accepted"
fi
grep -q "unknown collection 'layout:xla:nope'" "$work/bad.err" || { cat "$work/bad.err" >&2; fail "no message for an unknown collection"; }
echo "release bench: ok"
