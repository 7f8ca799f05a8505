#!/usr/bin/env bash
# tools/bench/bench-frontier.sh on tiny fixtures (FRONTIER_FIXTURE_SCALE=tiny) with a variants
# file of short budgets: one JSON line per (variant, seed) with the test Kendall of the fixture's
# unseen programs; a second run does nothing; a run stopped by --minutes exits 3 and the same
# command finishes it from the checkpoint; a signal to the script stops its training, and a
# second run of a training still going is refused; a variant that differs in --ensemble-members alone
# reuses a finished run's members; a torn last line is skipped, not fatal; summary and
# table (markdown and SVG) are made from the lines, with the hours of a projection; single
# runs one graph's variants and the GNN, under --torch-variant's name; a line counts for every
# variant of the configuration it trained, whatever its name, and no longer counts once the
# variant's recipe or flags change (its run's files are then set aside).
#
# Usage: frontier_test.sh TPUGRAPHS_BINARY SOURCE_DIR PYTHON_WITH_NUMPY
set -euo pipefail

bin=$1
src=$2
python=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/frontier.XXXXXX")
# A training left running by a failed check below is stopped with the test.
trap 'pkill -f "$work/w/runs/xla.slow/" || true; [ -n "${KEEP_WORK:-}" ] || rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
export TPUGRAPHS=$bin FRONTIER_FIXTURE_SCALE=tiny
fr() { bash "$src/tools/bench/bench-frontier.sh" "$@"; }
short="--epochs 3 --steps-per-epoch 2 --min-config-passes 0"
printf 'variant\tfixture\trecipe\tflags\n' >"$work/variants.tsv"
printf '%s\t%s\t%s\t%s\n' nlp nlp layout-large "$short" nlp.hops2 nlp layout-large "$short --prune-hops 2" \
  xla xla layout "$short --ensemble-members 3" xla.members2 xla layout "$short --ensemble-members 2" \
  >>"$work/variants.tsv"
res=$work/results.jsonl
common=(--variants "$work/variants.tsv" --results "$res" --work "$work/w" --threads 2)

fr run "${common[@]}" --fixture nlp --seeds 1,2 >"$work/run1.out" 2>"$work/run1.err" ||
  { cat "$work/run1.err" >&2; fail "run failed"; }
[ "$(wc -l <"$res")" -eq 4 ] || { cat "$res"; fail "not 4 result lines for 2 variants x 2 seeds"; }
"$python" - "$res" <<'EOF' || fail "the result lines are wrong"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
got = sorted((r["variant"], r["seed"]) for r in lines)
assert got == [("nlp", 1), ("nlp", 2), ("nlp.hops2", 1), ("nlp.hops2", 2)], got
for r in lines:
    assert r["fixture"] == "nlp" and r["recipe"] == "layout-large", r
    assert r["test_graphs"] == 2, r  # the tiny fixture's 2 test programs, not its training ones
    assert -1 <= r["kendall"] <= 1 and 0 <= r["opa"] <= 1, r
    assert r["epochs_run"] == 3 and r["best_epoch"] in (1, 2, 3), r
    assert 0 < r["ceiling_kendall"] <= 1, r
    assert r["flags"].endswith("--prune-hops 2") == (r["variant"] == "nlp.hops2"), r
# Different seeds train different models.
k = {(r["variant"], r["seed"]): r["kendall"] for r in lines}
print("lines ok")
EOF
grep -q "fixture nlp: synth" "$work/run1.err" || fail "the fixture was not made"

# A -marked fixture: the nlp fixture's programs ingested with --mark-absent-dimensions (no second
# synth), the same ceiling; its model refuses the official features with a message.
printf 'variant\tfixture\trecipe\tflags\nnlp-marked\tnlp-marked\tlayout-large\t%s\n' "$short" \
  >"$work/marked.tsv"
fr run --variants "$work/marked.tsv" --results "$work/marked.jsonl" --work "$work/w" --threads 2 \
  --seeds 1 >/dev/null 2>"$work/marked.err" || { cat "$work/marked.err" >&2; fail "the marked run failed"; }
grep -q "fixture nlp-marked: ingest nlp's programs --mark-absent-dimensions" "$work/marked.err" ||
  { cat "$work/marked.err" >&2; fail "the marked fixture was not ingested from nlp's programs"; }
grep -q "fixture nlp-marked: synth" "$work/marked.err" && fail "the marked fixture made its own programs"
"$python" - "$res" "$work/marked.jsonl" <<'EOF' || fail "the marked line is wrong"
import json, sys
base = [json.loads(l) for l in open(sys.argv[1])]
marked = [json.loads(l) for l in open(sys.argv[2])]
assert [(r["variant"], r["fixture"], r["seed"]) for r in marked] == [("nlp-marked", "nlp-marked", 1)], marked
assert marked[0]["ceiling_kendall"] == base[0]["ceiling_kendall"], (marked, base[0])
assert marked[0]["test_graphs"] == 2, marked
EOF
rc=0
"$bin" -q evaluate --model "$work/w/runs/nlp-marked/seed1.tpm" --dataset "$work/w/fixtures/nlp/data.tpug" \
  >/dev/null 2>"$work/marked-eval.err" || rc=$?
[ "$rc" -eq 1 ] || fail "a marked model evaluated the official features (exit $rc)"
grep -q -- "--mark-absent-dimensions" "$work/marked-eval.err" ||
  { cat "$work/marked-eval.err" >&2; fail "the refusal does not name the option"; }
"$bin" -q evaluate --model "$work/w/runs/nlp-marked/seed1.tpm" \
  --dataset "$work/w/fixtures/nlp-marked/data.tpug" >/dev/null 2>&1 ||
  fail "the marked model does not evaluate its own fixture"
# A work directory whose binary predates the option: the error names the cause and the way out.
mkdir -p "$work/old/fixtures"
ln -s "$work/w/fixtures/nlp" "$work/old/fixtures/nlp"
cat >"$work/old/tpugraphs" <<OLD
#!/usr/bin/env bash
for a in "\$@"; do
  [ "\$a" = --mark-absent-dimensions ] && { echo "The following argument was not expected: \$a" >&2; exit 109; }
done
exec "$bin" "\$@"
OLD
chmod +x "$work/old/tpugraphs"
rc=0
fr run --variants "$work/marked.tsv" --results "$work/old.jsonl" --work "$work/old" --threads 2 \
  --seeds 1 >/dev/null 2>"$work/old.err" || rc=$?
[ "$rc" -eq 1 ] || { cat "$work/old.err" >&2; fail "an old work directory's binary: exit $rc, not 1"; }
grep -q "predates --mark-absent-dimensions, run with a new --work" "$work/old.err" ||
  { cat "$work/old.err" >&2; fail "the error does not say why or what to do"; }
grep -q "not expected: --mark-absent-dimensions" "$work/old.err" ||
  { cat "$work/old.err" >&2; fail "the error does not give the binary's own message"; }
[ ! -e "$work/old/fixtures/nlp-marked/data.tpug" ] || fail "a fixture was written after the failure"

# Again: nothing to do, nothing appended.
fr run "${common[@]}" --fixture nlp --seeds 1,2 >/dev/null 2>"$work/run2.err" || fail "second run failed"
grep -q "== 0 runs to do (4 done already)" "$work/run2.err" || { cat "$work/run2.err"; fail "the second run did not see the 4 runs done"; }
[ "$(wc -l <"$res")" -eq 4 ] || fail "the second run appended lines"

# Stopped by --minutes (exit 3), then finished by the same command from its checkpoint.
rc=0
fr run "${common[@]}" --variant xla --seeds 1 --minutes 0.0001 >/dev/null 2>"$work/run3.err" || rc=$?
[ "$rc" -eq 3 ] || { cat "$work/run3.err" >&2; fail "--minutes: exit $rc, not 3"; }
grep -q "xla seed 1 stopped" "$work/run3.err" || fail "--minutes did not say what it stopped"
[ "$(wc -l <"$res")" -eq 4 ] || fail "a stopped run appended a line"
fr run "${common[@]}" --variant xla --seeds 1 >/dev/null 2>"$work/run4.err" ||
  { cat "$work/run4.err" >&2; fail "the run after --minutes failed"; }
[ "$(wc -l <"$res")" -eq 5 ] || fail "the finished run did not append its line"
grep -q '"variant": "xla"' "$res" || fail "no xla line"

# A signal to the script stops its training too (nothing is left writing the run's files), and
# while a training of a run holds the run's lock, a second run of it is refused.
printf 'variant\tfixture\trecipe\tflags\nxla.slow\txla\tlayout\t--epochs 100000 --steps-per-epoch 2 --min-config-passes 0 --ensemble-members 1\n' \
  >"$work/slow.tsv"
slow=(--variants "$work/slow.tsv" --results "$work/slow.jsonl" --work "$work/w" --threads 1 --variant xla.slow --seeds 1)
bash "$src/tools/bench/bench-frontier.sh" run "${slow[@]}" >/dev/null 2>"$work/slow1.err" &
slow_pid=$!
for _ in $(seq 120); do
  grep -q "epoch=" "$work/w/runs/xla.slow/seed1.tpm.log" 2>/dev/null && break
  sleep 0.5
done
grep -q "epoch=" "$work/w/runs/xla.slow/seed1.tpm.log" || { cat "$work/slow1.err" >&2; fail "the slow run did not start"; }
rc=0
fr run "${slow[@]}" --minutes 0.05 >/dev/null 2>"$work/slow2.err" || rc=$?
[ "$rc" -eq 1 ] || { cat "$work/slow2.err" >&2; fail "a second run of a running training: exit $rc, not 1"; }
grep -q "a training of this run is still going (process [0-9]" "$work/slow2.err" ||
  { cat "$work/slow2.err" >&2; fail "the second run did not say why it was refused"; }
kill -TERM "$slow_pid"
rc=0
wait "$slow_pid" || rc=$?
[ "$rc" -eq 1 ] || { cat "$work/slow1.err" >&2; fail "the signalled run: exit $rc, not 1"; }
grep -q "stopped by signal 15" "$work/slow1.err" || { cat "$work/slow1.err" >&2; fail "no message for the signal"; }
pgrep -f "$work/w/runs/xla.slow/seed1.tpm" >/dev/null && fail "the training outlived its script"
# The lock is free again: the same command goes on (and stops at once with --minutes).
rc=0
fr run "${slow[@]}" --minutes 0.0001 >/dev/null 2>"$work/slow3.err" || rc=$?
[ "$rc" -eq 3 ] || { cat "$work/slow3.err" >&2; fail "the run after the signal: exit $rc, not 3"; }
[ ! -s "$work/slow.jsonl" ] || fail "a stopped slow run appended a line"

# A variant that differs in --ensemble-members alone reuses the finished run's members: nothing
# is trained, and its figure equals a fresh training's (another work directory, no lender).
fr run "${common[@]}" --variant xla.members2 --seeds 1 >/dev/null 2>"$work/run5.err" ||
  { cat "$work/run5.err" >&2; fail "xla.members2 failed"; }
grep -q "reusing the members of xla seed 1" "$work/run5.err" || { cat "$work/run5.err"; fail "no lender"; }
grep -q "reusing model 2 of the 3 in" "$work/w/runs/xla.members2/seed1.tpm.log" || fail "member 2 retrained"
grep -q "epoch=" "$work/w/runs/xla.members2/seed1.tpm.log" && fail "xla.members2 trained epochs"
[ ! -e "$work/w/runs/xla.members2/seed1.tpm.members-from" ] || fail "the lender's marker stayed"
fr run --variants "$work/variants.tsv" --results "$work/fresh.jsonl" --work "$work/w2" --threads 2 \
  --variant xla.members2 --seeds 1 >/dev/null 2>"$work/run6.err" || { cat "$work/run6.err" >&2; fail "fresh run failed"; }
grep -q "reusing" "$work/run6.err" && fail "the fresh run found a lender"
"$python" - "$res" "$work/fresh.jsonl" <<'EOF' || fail "the lent members' figure is not a fresh run's"
import json, sys
lent = [json.loads(l) for l in open(sys.argv[1]) if '"xla.members2"' in l][0]
fresh = [json.loads(l) for l in open(sys.argv[2])][0]
assert lent["members_from"] == "xla" and "members_from" not in fresh, (lent, fresh)
assert lent["kendall"] == fresh["kendall"] and lent["opa"] == fresh["opa"], (lent, fresh)
print("lent members ok")
EOF
# And grows: the recipe's ensemble (3 members) started where xla.members2 has finished trains
# member 2 alone, and its figure is the fresh 3-member run's.
fr run --variants "$work/variants.tsv" --results "$work/fresh.jsonl" --work "$work/w2" --threads 2 \
  --variant xla --seeds 1 >/dev/null 2>"$work/run6b.err" || { cat "$work/run6b.err" >&2; fail "grown run failed"; }
grep -q "reusing the members of xla.members2 seed 1" "$work/run6b.err" || { cat "$work/run6b.err"; fail "no lender to grow from"; }
grep -q "reusing model 1 of the 2 in" "$work/w2/runs/xla/seed1.tpm.log" || fail "member 1 retrained"
grep -q "ensemble member 3/3: reusing" "$work/w2/runs/xla/seed1.tpm.log" && fail "member 2 was not trained"
grep -q "epoch=" "$work/w2/runs/xla/seed1.tpm.log" || fail "the grown run trained no epoch"
"$python" - "$res" "$work/fresh.jsonl" <<'EOF' || fail "the grown ensemble's figure is not a fresh run's"
import json, sys
fresh = [json.loads(l) for l in open(sys.argv[1]) if '"variant": "xla"' in l][0]
grown = [json.loads(l) for l in open(sys.argv[2]) if '"variant": "xla"' in l][0]
assert grown["members_from"] == "xla.members2" and "members_from" not in fresh, (grown, fresh)
assert grown["kendall"] == fresh["kendall"] and grown["opa"] == fresh["opa"], (grown, fresh)
print("grown members ok")
EOF

# A torn last line (a kill while appending) is skipped with a message.
printf '{"variant": "nlp", "se' >>"$res"
fr summary --variants "$work/variants.tsv" --results "$res" >"$work/summary.json" 2>"$work/summary.err" ||
  fail "summary failed on a torn line"
grep -q "skipped, not a JSON line" "$work/summary.err" || fail "the torn line was not reported"
"$python" - "$work/summary.json" "$res" <<'EOF' || fail "summary is wrong"
import json, sys
s = {x["variant"]: x for x in json.load(open(sys.argv[1]))}
lines = [json.loads(l) for l in open(sys.argv[2]) if l.endswith("}\n")]
for v in ("nlp", "nlp.hops2"):
    k = [r["kendall"] for r in lines if r["variant"] == v]
    assert s[v]["seeds"] == [1, 2] and abs(s[v]["mean"] - sum(k) / 2) < 1e-4, (s[v], k)
assert s["xla"]["seeds"] == [1] and s["xla.members2"]["seeds"] == [1], s
print("summary ok")
EOF

# The table with a projection's hours, and the plot.
cat >"$work/projection.json" <<'EOF'
{"machine": {"cpu": "test", "cores": 2, "load_at_start": 0.1},
 "frontier": [
  {"variant": "nlp", "recipe": "layout-large.textproto", "name": "layout:nlp:random", "hours": 10.0, "train_hours": 8.0, "valid_hours": 1.5},
  {"variant": "nlp", "recipe": "layout-large.textproto", "name": "layout:nlp:default", "hours": 9.0, "train_hours": 7.0, "valid_hours": 1.5},
  {"variant": "nlp.hops2", "recipe": "layout-large.textproto", "name": "layout:nlp:random", "hours": 7.0, "train_hours": 5.0, "valid_hours": 1.5},
  {"variant": "nlp.hops2", "recipe": "layout-large.textproto", "name": "layout:nlp:default", "hours": 6.5, "train_hours": 4.5, "valid_hours": 1.5},
  {"variant": "xla", "recipe": "layout-collection.textproto", "name": "layout:xla:random", "hours": 2.0, "train_hours": 2.0, "valid_hours": 0.0}]}
EOF
fr table --variants "$work/variants.tsv" --results "$res" --projection "$work/projection.json" \
  --svg "$work/frontier.svg" >"$work/table.md" 2>"$work/table.err" || fail "table failed"
# The xla variant trains layout.textproto here: the row projected with another recipe gives it
# no hours, and says so.
grep -q '^| xla | xla | `--epochs 3 [^|]* | [0-9]* | [^|]* | [^|]* | [^|]* |  |  |  |  |' "$work/table.md" ||
  { cat "$work/table.md"; fail "the xla row has hours projected with another recipe"; }
grep -q "^xla: the projection's rows were projected with another recipe" "$work/table.err" ||
  { cat "$work/table.err" >&2; fail "the table does not say why xla has no hours"; }
grep -q '^| nlp | nlp | `--epochs 3' "$work/table.md" || { cat "$work/table.md"; fail "no nlp row"; }
# Every row with a ceiling shows the mean's share of it, and the seeds' standard deviation.
awk -F' [|] ' '/^[|] (nlp|xla)/ { n++; share = sprintf("%.0f %%", 100 * $6 / $12)
  if ($12 == "" || $13 " |" != share " |" && $13 != share " |") bad = bad $1 " " $13 " != " share "\n"
  if ($4 > 1 && $7 == "") bad = bad $1 ": no sd\n" }
  END { if (!n || bad != "") { printf "%s", bad; exit 1 } }' "$work/table.md" ||
  { cat "$work/table.md"; fail "a row's share of the ceiling or sd is wrong"; }
grep -q '^| nlp | .* | 19.00 | 15.00 | 3.00 |' "$work/table.md" || { cat "$work/table.md"; fail "the nlp row lacks its hours (19.00 = 10 + 9)"; }
grep -q '^| nlp.hops2 | .* | 13.50 | 9.50 | 3.00 |' "$work/table.md" || { cat "$work/table.md"; fail "the nlp.hops2 row lacks its hours"; }
grep -q "<svg" "$work/frontier.svg" && grep -q ">nlp.hops2<" "$work/frontier.svg" || fail "the plot lacks a point"
# --doc: the table replaces what stands between the markers, the rest of the document is kept.
printf 'before\n<!-- frontier table: begin -->\nold table\n<!-- frontier table: end -->\nafter\n' >"$work/doc.md"
fr table --variants "$work/variants.tsv" --results "$res" --projection "$work/projection.json" \
  --doc "$work/doc.md" 2>/dev/null || fail "table --doc failed"
grep -q "old table" "$work/doc.md" && fail "--doc kept the old table"
[ "$(head -1 "$work/doc.md")" = before ] && [ "$(tail -1 "$work/doc.md")" = after ] || fail "--doc changed the rest"
grep -q '^| nlp.hops2 | .* | 13.50 | 9.50 | 3.00 |' "$work/doc.md" || fail "--doc did not write the table"
printf 'no markers\n' >"$work/doc2.md"
fr table --variants "$work/variants.tsv" --results "$res" --doc "$work/doc2.md" 2>/dev/null && fail "--doc without markers was accepted"
# single: one graph's held-out configurations (the U-Net file), wall and CPU time per seed.
printf '%s\t%s\t%s\t%s\n' single single layout "--ensemble-members 1 --epochs 3 --carve-patience 0" \
  >>"$work/variants.tsv"
fr single --variants "$work/variants.tsv" --results "$res" --work "$work/single" --seeds 1,2 \
  --torch "" --threads 2 >"$work/single.out" 2>"$work/single.err" || { cat "$work/single.err" >&2; fail "single failed"; }
"$python" - "$res" <<'EOF' || fail "single's lines are wrong"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{") and l.endswith("}\n")]
single = [r for r in lines if r["variant"] == "single"]
assert sorted(r["seed"] for r in single) == [1, 2], single
for r in single:
    assert r["fixture"] == "single" and r["graph"] == "unet_3d.4x4.bf16.npz", r
    assert -1 <= r["kendall"] <= 1 and -1 <= r["ridge_kendall"] <= 1, r
    assert r["wall_s"] > 0 and r["cpu_s"] > 0 and r["load_at_start"] >= 0, r
print("single ok")
EOF
grep -q "load average (1 min) at start" "$work/single.err" || fail "single did not print the load"
# --torch SCRIPT --torch-variant NAME: the GNN's figure per seed under that name (a stand-in
# script here: what is tested is the harness), beside the variants done already; once only.
cat >"$work/stand_in_gnn.py" <<'EOF'
import sys
seed = int(sys.argv[sys.argv.index("--seed") + 1])
print("final_kendall\t%.3f" % (0.1 * seed))
EOF
for round in 1 2; do
  fr single --variants "$work/variants.tsv" --results "$res" --work "$work/single" --seeds 1,2 \
    --torch "$work/stand_in_gnn.py" --torch-variant torch.again --threads 2 >/dev/null \
    2>"$work/torch$round.err" || { cat "$work/torch$round.err" >&2; fail "single --torch-variant failed"; }
done
grep -q "plain PyTorch GNN: held-out Kendall 0.100 / 0.200" "$work/torch1.err" || fail "no GNN summary"
grep -q "plain PyTorch GNN" "$work/torch2.err" && fail "the GNN ran again"
"$python" - "$res" <<'EOF' || fail "--torch-variant's lines are wrong"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{") and l.endswith("}\n")]
gnn = sorted((r["seed"], r["kendall"], r["flags"]) for r in lines if r["variant"] == "torch.again")
assert gnn == [(1, 0.1, "stand_in_gnn.py"), (2, 0.2, "stand_in_gnn.py")], gnn
assert len([r for r in lines if r["variant"] == "single"]) == 2, "single ran again"
print("torch variant ok")
EOF
# A line belongs to the configuration it trained (the digest of what the recipe and the flags
# resolve to), not to a name: a variant of the same configuration under another name, with the
# recipe's own value written out as a flag, counts the lines and has nothing to run.
printf '%s\t%s\t%s\t%s\n' nlp.explicit nlp layout-large "$short --num-layers 3" >>"$work/variants.tsv"
fr summary --variants "$work/variants.tsv" --results "$res" >"$work/summary1.json" 2>/dev/null || fail "summary failed"
"$python" -c "import json,sys; s={x['variant']: x for x in json.load(open(sys.argv[1]))}; \
assert s['nlp.explicit']['seeds'] == [1, 2] and s['nlp.explicit']['measured_as'] == ['nlp'] \
and s['nlp.explicit']['mean'] == s['nlp']['mean'], s" "$work/summary1.json" ||
  fail "the lines of the same configuration did not count for the other name"
fr run "${common[@]}" --variant nlp.explicit --seeds 1,2 >/dev/null 2>"$work/run8.err" || fail "nlp.explicit failed"
grep -q "== 0 runs to do (2 done already)" "$work/run8.err" || { cat "$work/run8.err"; fail "nlp.explicit trained again"; }
# A variant whose flags changed since its lines were measured: its lines no longer count, and
# its next run sets the old files aside and trains afresh. A line whose digest is not the one of
# its variant's configuration today (the recipe changed) does not count either.
sed -i 's/--prune-hops 2$/--prune-hops 3/' "$work/variants.tsv"
fr summary --variants "$work/variants.tsv" --results "$res" >"$work/summary2.json" 2>"$work/summary2.err" ||
  fail "summary failed"
grep -q "nlp.hops2: 2 result line(s) of a configuration that no variant trains today" "$work/summary2.err" ||
  { cat "$work/summary2.err"; fail "the stale lines were not reported"; }
grep -q '"nlp.hops2"' "$work/summary2.json" && fail "the stale lines were counted"
fr run "${common[@]}" --variant nlp.hops2 --seeds 1 >/dev/null 2>"$work/run7.err" ||
  { cat "$work/run7.err" >&2; fail "the run of the changed variant failed"; }
grep -q "trained with another configuration" "$work/run7.err" || { cat "$work/run7.err"; fail "old files not set aside"; }
ls "$work"/w/runs/nlp.hops2/stale-*/seed1.tpm >/dev/null || fail "the old model is not in stale-*/"
"$python" - "$res" "$work/w/runs/nlp.hops2/seed1.tpm.key" <<'EOF2' || fail "the changed variant's line is wrong"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{") and l.endswith("}\n")]
new = [r for r in lines if r["variant"] == "nlp.hops2" and r["flags"].endswith("--prune-hops 3")]
assert len(new) == 1 and new[0]["seed"] == 1, new
key = open(sys.argv[2]).read().strip()
assert key == new[0]["config_digest"] and len(key) == 16, (key, new)
print("changed variant ok")
EOF2
"$python" - "$res" <<'EOF2' || fail "could not rewrite a digest"
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("{") and l.endswith("}\n")]
out = []
for l in lines:
    r = json.loads(l)
    if r["variant"] == "nlp" and r["seed"] == 2:
        r["config_digest"] = "0" * 16
    out.append(json.dumps(r, sort_keys=True) + "\n")
open(sys.argv[1], "w").write("".join(out))
EOF2
fr summary --variants "$work/variants.tsv" --results "$res" >"$work/summary3.json" 2>"$work/summary3.err" ||
  fail "summary failed"
grep -q "^nlp: 1 result line(s) of a configuration that no variant trains today" "$work/summary3.err" || { cat "$work/summary3.err"; fail "the other digest was not reported"; }
"$python" -c "import json,sys; s={x['variant']: x for x in json.load(open(sys.argv[1]))}; assert s['nlp']['seeds'] == [1], s['nlp']" \
  "$work/summary3.json" || fail "a line of another recipe digest was counted"
fr run "${common[@]}" --variant nope 2>/dev/null && fail "an unknown variant was accepted"
echo "frontier ok"
