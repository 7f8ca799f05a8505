#!/usr/bin/env bash
# Planning for a budget of hours: tools/bench-release.sh --project --hours H and
# tools/train-all-collections.sh --hours H [--plan] on a tiny release-shaped tree, with a test
# frontier (a variants file of budget and cost variants, and per-seed results written here) and
# the projection measured on fixtures shrunk for a test. Checks:
#   * the plan is the best choice: every combination of the candidates is enumerated here, apart
#     from the planner, and the plan's Kendall sum is the largest that fits (ties: fewer hours);
#   * a budget under the cheapest plan is refused with exit 2 and the smallest budget that fits,
#     before any work (no dataset written);
#   * the measurements are cached per machine and reused (the second plan measures nothing);
#   * --plan prints the plan and writes nothing; a run writes OUT/plan.json and trains each
#     collection with its variant's recipe and flags;
#   * a run started again keeps its plan even when the frontier's figures changed meanwhile, and
#     another --hours is refused while the plan is there.
#
# Usage: release_plan_test.sh TPUGRAPHS_BINARY SOURCE_DIR PYTHON_WITH_NUMPY
set -euo pipefail

bin=$1
src=$2
python=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/release-plan.XXXXXX")
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
export TPUGRAPHS=$bin TPUGRAPHS_GLOBAL_FLAGS="-j 2" MAX_NODES=300 MAX_CONFIGS=40
export PROJECT_FIXTURE_NODES=300 PROJECT_FIXTURE_CONFIGS=40 PROJECT_STEPS="2 20"
export PROJECTION_CACHE=$work/cache
export FRONTIER_VARIANTS=$work/variants.tsv FRONTIER_RESULTS=$work/results.jsonl

# A frontier of budget variants (no measurement) and one cost variant (measured: xla.hops1).
printf 'variant\tfixture\trecipe\tflags\n' >"$FRONTIER_VARIANTS"
printf '%s\t%s\t%s\t%s\n' nlp nlp layout-large - \
  nlp.passes0.5 nlp layout-large "--min-config-passes 0.5" \
  nlp.valid200 nlp layout-large "--valid-max-configs 200" \
  xla xla layout - \
  xla.members2 xla layout "--ensemble-members 2" \
  xla.hops1 xla layout "--prune-hops 1" \
  xla.unmeasured xla layout "--ensemble-members 3" \
  tile tile tile - >>"$FRONTIER_VARIANTS"
write_results() {  # the Kendall of xla.members2; lines as bench-frontier.sh run writes them
  "$python" - "$src/tools/release" "$1" "$bin" <<'EOF'
import json, os, sys
sys.path.insert(0, sys.argv[1])
import frontier
flags = {v["variant"]: v for v in frontier.read_variants(os.environ["FRONTIER_VARIANTS"])}
with open(os.environ["FRONTIER_RESULTS"], "w") as f:
    for s in (1, 2, 3):
        for v, k in (("nlp", 0.50), ("nlp.passes0.5", 0.45), ("nlp.valid200", 0.49),
                     ("xla", 0.40), ("xla.members2", float(sys.argv[2])), ("xla.hops1", 0.39)):
            r = flags[v]
            f.write(json.dumps(dict(variant=v, fixture=r["fixture"], recipe=r["recipe"],
                                    config_digest=frontier.digest_of(sys.argv[3], r),
                                    flags=" ".join(r["flags"]), seed=s, kendall=k,
                                    test_graphs=20), sort_keys=True) + "\n")
EOF
}
write_results 0.38

bash "$src/tools/make-release-shaped.sh" 0.001 "$work/tree" 2>"$work/tree.err" ||
  { cat "$work/tree.err" >&2; fail "make-release-shaped.sh failed"; }

# --- bench-release.sh --project --hours: a budget every recipe fits ---------------------------
bash "$src/tools/bench-release.sh" --project --hours 100000 --json "$work/p" >"$work/big.json" \
  2>"$work/big.err" || { cat "$work/big.err" >&2; fail "--project --hours 100000 failed"; }
grep -q "== layout --prune-hops 1 on xla: steps" "$work/big.err" ||
  { cat "$work/big.err" >&2; fail "the cost variant xla.hops1 was not measured"; }
# Its step is scaled to the recipe's by timing the recipe again beside it (the VM's speed drifts
# between the two measurements).
grep -q "the recipe timed beside it: .* so this step is .*x the recipe's" "$work/big.err" ||
  { cat "$work/big.err" >&2; fail "the recipe was not timed beside the cost variant"; }
"$python" - "$PROJECTION_CACHE" <<'EOF' || fail "the cost variant's step is not the recipe's times their ratio"
import glob, json, sys
[path] = glob.glob(sys.argv[1] + "/*/measurements.json")
m = json.load(open(path))["recipes"]
recipe, variant = m["xla|layout"], m["xla|layout|--prune-hops 1"]
assert "raw_step_ms" not in recipe, recipe
want = variant["raw_step_ms"] / variant["recipe_beside_ms"] * recipe["step_ms"]
assert abs(variant["step_ms"] - want) <= 1e-9 * want, (variant, recipe)
print("scaled step ok")
EOF
# The check of the choice, apart from the planner: every combination enumerated.
check_plan() {  # JSON HOURS
  "$python" - "$1" "$2" <<'EOF'
import itertools, json, sys
p = json.load(open(sys.argv[1]))
budget = float(sys.argv[2])
assert p["budget_hours"] == budget, p["budget_hours"]
kendall = {"nlp": 0.50, "nlp.passes0.5": 0.45, "nlp.valid200": 0.49, "xla": 0.40,
           "xla.hops1": 0.39}
kendall["xla.members2"] = [json.loads(l)["kendall"] for l in open(sys.argv[1].rsplit("/", 1)[0] +
                           "/results.jsonl") if '"xla.members2"' in l][0]
rows = p["frontier"]
names = sorted({r["name"] for r in rows})
cands = {n: [r for r in rows if r["name"] == n and (r["variant"] in kendall or r["variant"] == "tile")]
         for n in names}
# The unmeasured variant is never a candidate; the tile recipe (unmeasured) always is.
assert all(r["variant"] != "xla.unmeasured" for c in cands.values() for r in c)
# Nor is a variant that costs more than its recipe without ranking better by more than 0.01.
for n in names:
    rec = [r for r in cands[n] if r["variant"] == r["fixture"]][0]
    cands[n] = [r for r in cands[n] if r is rec or r["hours"] <= rec["hours"] or
                kendall.get(r["variant"], 0.0) > kendall.get(rec["variant"], 0.0) + 0.01]
best = None
for combo in itertools.product(*(cands[n] for n in names)):
    h = sum(r["hours"] for r in combo)
    if h > budget + 1e-9:
        continue
    k = sum(kendall.get(r["variant"], 0.0) for r in combo)
    key = (-round(k, 6), round(h, 6))
    if best is None or key < best[0]:
        best = (key, {n: r["variant"] for n, r in zip(names, combo)})
chosen = {c["name"]: c["chosen"] for c in p["collections"]}
assert best is not None
# Equal keys may differ in the variant only where two have the same hours and Kendall.
got_k = sum(kendall.get(v, 0.0) for v in chosen.values())
got_h = sum(c["hours"] for c in p["collections"])
assert (-round(got_k, 6), round(got_h, 6)) == best[0], (chosen, best)
assert got_h <= budget + 1e-9, (got_h, budget)
for c in p["collections"]:
    assert c["kendall"] == kendall.get(c["chosen"]), c
    assert p["plan"][c["name"]]["variant"] == c["chosen"], p["plan"]
assert abs(p["total_hours"] - got_h) < 0.02, (p["total_hours"], got_h)
print(json.dumps({n: v for n, v in sorted(chosen.items())}))
print("%.6f" % got_k)
EOF
}
check_plan "$work/big.json" 100000 >"$work/big.plan" || fail "the plan for 100000 h is not the best"
grep -q '"layout:nlp:random": "nlp"' "$work/big.plan" || fail "a budget every recipe fits: not the recipes"

# Budgets between: the cheapest plan, the recipes' and points between them.
bounds() {  # PROJECTION_JSON: the cheapest plan's hours and the recipes' (candidates only)
  "$python" - "$1" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
names = {r["name"] for r in p["frontier"]}
ok = {"nlp", "nlp.passes0.5", "nlp.valid200", "xla", "xla.members2", "xla.hops1", "tile"}
low = sum(min(r["hours"] for r in p["frontier"] if r["name"] == n and r["variant"] in ok) for n in names)
high = sum(r["hours"] for r in p["frontier"] if r["variant"] in ("nlp", "xla", "tile"))
assert low < high, (low, high)
print("%.6f %.6f" % (low, high))
EOF
}
read -r cheapest recipes < <(bounds "$work/big.json")
for f in 0.3 0.6 0.9; do
  h=$("$python" -c "import sys; a, b, f = map(float, sys.argv[1:]); print('%.4f' % (a + f * (b - a) + 0.0001))" "$cheapest" "$recipes" "$f")
  bash "$src/tools/bench-release.sh" --hours "$h" --json "$work/p" --project >"$work/h$f.json" \
    2>"$work/h$f.err" || { cat "$work/h$f.err" >&2; fail "--project --hours $h failed"; }
  grep -q "== .* on .*: steps" "$work/h$f.err" && fail "--hours $h measured again instead of reusing the cache"
  # It reports the load of the run that measured, not today's.
  grep -Eq "^== nothing measured now \(load average [0-9.]+\); the kept figures were measured at a load of [0-9.]+ at the start$" "$work/h$f.err" ||
    { cat "$work/h$f.err" >&2; fail "--hours $h from the cache does not say what load the figures were measured at"; }
  "$python" -c "import json, sys; a, b = (json.load(open(f))['machine']['load_at_start'] for f in sys.argv[1:]); assert a == b, (a, b)" \
    "$work/big.json" "$work/h$f.json" || fail "--hours $h from the cache: load_at_start is not the measuring run's"
  check_plan "$work/h$f.json" "$h" >"$work/h$f.plan" || fail "the plan for $h h is not the best"
done
# A larger budget never plans a lower Kendall sum; the smallest of them plans a lower one than
# the recipes' budget (it cannot fit them all).
"$python" - "$work/h0.3.plan" "$work/h0.6.plan" "$work/h0.9.plan" "$work/big.plan" <<'EOF' ||
import sys
k = [float(open(f).read().split()[-1]) for f in sys.argv[1:]]
assert k[0] <= k[1] + 1e-9 <= k[2] + 2e-9 <= k[3] + 3e-9, k
assert k[0] < k[3] - 1e-9, k
EOF
  fail "the plans' Kendall does not grow with the budget"

# Too small: exit 2 with the smallest budget that fits.
small=$("$python" -c "import sys; print('%.4f' % (float(sys.argv[1]) * 0.9))" "$cheapest")
rc=0
bash "$src/tools/bench-release.sh" --project --hours "$small" --json "$work/p" >"$work/small.json" \
  2>"$work/small.err" || rc=$?
[ "$rc" -eq 2 ] || { cat "$work/small.err" >&2; fail "--hours $small (under the cheapest plan) gave exit $rc, not 2"; }
fits=$(sed -n 's/.*the smallest budget that fits is --hours \([0-9.]*\).*/\1/p' "$work/small.err")
[ -n "$fits" ] || { cat "$work/small.err" >&2; fail "the refusal does not say the smallest budget"; }
"$python" -c "import sys; a, b = map(float, sys.argv[1:]); assert b - 1e-6 <= a <= b + 0.0101, (a, b)" "$fits" "$cheapest" ||
  fail "the smallest budget said, $fits, is not the cheapest plan's $cheapest"
bash "$src/tools/bench-release.sh" --project --hours 0 "$work/p" 2>/dev/null && fail "--hours 0 was accepted"

# --- train-all-collections.sh --hours ----------------------------------------------------------
# It plans for the tree's own graphs (its shape.tsv): that projection's cheapest plan and recipes.
"$python" "$src/tools/release" project --binary "$bin" --work "$work/pt" \
  --cache "$PROJECTION_CACHE" --tree "$work/tree" --hours 100000 --json >"$work/tree.json" \
  2>"$work/tree-proj.err" || { cat "$work/tree-proj.err" >&2; fail "the tree's projection failed"; }
read -r cheapest recipes < <(bounds "$work/tree.json")
small=$("$python" -c "import sys; print('%.6f' % (float(sys.argv[1]) * 0.5))" "$cheapest")
# No variant of the test sets --epochs or --steps-per-epoch, so every variant a plan picks
# trains with its own flags (checked below).
short=(--epochs 1 --steps-per-epoch 2)
h=$("$python" -c "import sys; a, b = map(float, sys.argv[1:]); print('%.6f' % (a + 0.3 * (b - a) + 1e-6))" "$cheapest" "$recipes")
rc=0
bash "$src/tools/train-all-collections.sh" --hours "$small" "$work/tree" "$work/out-small" "${short[@]}" \
  >/dev/null 2>"$work/ta-small.err" || rc=$?
[ "$rc" -eq 2 ] || { cat "$work/ta-small.err" >&2; fail "train-all --hours $small gave exit $rc, not 2"; }
[ -z "$(ls "$work/out-small" 2>/dev/null)" ] || fail "train-all --hours $small did work before refusing: $(ls "$work/out-small")"
HOURS=$h bash "$src/tools/train-all-collections.sh" --plan "$work/tree" "$work/out" >"$work/plan.txt" \
  2>"$work/plan.err" || { cat "$work/plan.err" >&2; fail "train-all --plan failed"; }
grep -q "^plan for --hours $h" "$work/plan.txt" || { cat "$work/plan.txt"; fail "--plan printed no plan"; }
grep -q "test Kendall against the recipes" "$work/plan.txt" || fail "--plan does not say what the plan costs in Kendall"
[ ! -e "$work/out/plan.json" ] || fail "--plan wrote a plan file"
# The same with the script's flags after the paths: the same plan, and nothing written.
bash "$src/tools/train-all-collections.sh" "$work/tree" "$work/out" --plan --hours "$h" \
  >"$work/plan-after.txt" 2>"$work/plan-after.err" || { cat "$work/plan-after.err" >&2; fail "--plan after the paths failed"; }
cmp -s "$work/plan.txt" "$work/plan-after.txt" || fail "--plan after the paths printed another plan"
[ ! -e "$work/out" ] || fail "--plan after the paths wrote $(find "$work/out")"
bash "$src/tools/train-all-collections.sh" --hours "$h" "$work/tree" "$work/out" "${short[@]}" \
  >"$work/ta.out" 2>"$work/ta.err" || { tail -30 "$work/ta.err" >&2; fail "train-all --hours $h failed"; }
[ -f "$work/out/plan.json" ] || fail "no OUT/plan.json"
cp "$work/out/plan.json" "$work/plan.first.json"
# Each collection trained with its variant's flags (the tree's collections hold 1 graph each).
# A plan flag that the train flags given also set gives way to them.
"$python" - "$work/out/plan.json" "$work/ta.err" "${short[*]}" <<'EOF' || fail "a collection did not train with the plan's flags"
import json, sys
plan = json.load(open(sys.argv[1]))["plan"]
err = open(sys.argv[2]).read()
given = sys.argv[3].split()[0::2]
for c, p in plan.items():
    f = p["flags"].split()
    kept = " ".join(a + " " + b for a, b in zip(f[0::2], f[1::2]) if a not in given)
    want = "== %s: train %s" % (c, kept) if kept else "== %s: train" % c
    assert want in err, (c, p, want)
    assert "== %s: the plan's %s" % (c, p["recipe"]) in err, (c, p)
    n_kept = locals().get("n_kept", 0) + (1 if kept else 0)
assert n_kept > 0, ("no collection trained with a flag of the plan: the check proves nothing", plan)
print("flags ok")
EOF
[ -f "$work/out/layout_xla_random.tpm" ] || fail "no model for layout:xla:random"

# SHARD with --hours needs the plan made once (--plan --write-plan).
rc=0
SHARD=0/2 bash "$src/tools/train-all-collections.sh" --hours "$h" "$work/tree" "$work/out-shard" "${short[@]}" \
  >/dev/null 2>"$work/shard.err" || rc=$?
[ "$rc" -eq 2 ] && grep -q -- "--plan --write-plan" "$work/shard.err" || { cat "$work/shard.err" >&2; fail "SHARD without a plan file was not refused (exit $rc)"; }
bash "$src/tools/train-all-collections.sh" --hours "$h" --plan --write-plan "$work/tree" "$work/out-shard" >/dev/null 2>&1 ||
  fail "--plan --write-plan failed"
[ -f "$work/out-shard/plan.json" ] || fail "--write-plan wrote no plan"
SHARD=0/2 bash "$src/tools/train-all-collections.sh" --hours "$h" "$work/tree" "$work/out-shard" "${short[@]}" \
  >/dev/null 2>"$work/shard2.err" || { tail -20 "$work/shard2.err" >&2; fail "SHARD with the plan failed"; }
grep -q "kept" "$work/shard2.err" || fail "the shard did not keep the plan written"

# Started again after the frontier changed: the plan is kept, models reused.
write_results 0.99
# (--hours after the paths and the train flags this time: the same command.)
bash "$src/tools/train-all-collections.sh" "$work/tree" "$work/out" "${short[@]}" --hours "$h" \
  >/dev/null 2>"$work/ta2.err" || { tail -30 "$work/ta2.err" >&2; fail "train-all run again failed"; }
grep -q "the plan of .*plan.json (--hours $h), kept" "$work/ta2.err" || fail "the run started again did not keep its plan"
cmp -s "$work/plan.first.json" "$work/out/plan.json" || fail "the plan file changed"
grep -q ": train" "$work/ta2.err" && fail "the run started again trained again"
# A fresh plan with the new figures would differ (so keeping it is what was tested).
HOURS=$h bash "$src/tools/train-all-collections.sh" --plan "$work/tree" "$work/out-new" >"$work/plan2.txt" 2>/dev/null
cmp -s "$work/plan.txt" "$work/plan2.txt" && fail "the changed frontier gives the same plan: the test proves nothing"
rc=0
bash "$src/tools/train-all-collections.sh" --hours 100000 "$work/tree" "$work/out" "${short[@]}" \
  >/dev/null 2>"$work/ta3.err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "already holds the plan for --hours $h" "$work/ta3.err" ||
  { cat "$work/ta3.err" >&2; fail "another --hours beside a plan was not refused (exit $rc)"; }
# The planner's two rules on a frontier made up here: a variant that costs more than its recipe
# without ranking better by more than 0.01 is never chosen, whatever the budget; an unmeasured
# recipe wins the tie its stand-in score makes with the measured variant it stands in for.
"$python" - "$src/tools/release" <<'EOF' || fail "the planner's rules"
import sys
sys.path.insert(0, sys.argv[1])
import plan as rp
def row(v, name, h):
    return dict(variant=v, fixture=v.split(".")[0], name=name, hours=h, recipe="r", flags="")
rows = [row("nlp", "n", 10.0), row("nlp.wide", "n", 20.0), row("nlp.deep", "n", 30.0),
        row("nlp.cheap", "n", 5.0), row("xla", "x", 8.0), row("xla.members2", "x", 2.0)]
summary = [dict(variant=v, fixture=v.split(".")[0], mean=k, seeds=[1, 2, 3])
           for v, k in (("nlp", 0.60), ("nlp.wide", 0.605), ("nlp.deep", 0.62),
                        ("nlp.cheap", 0.55), ("xla.members2", 0.40))]
order = {r["variant"]: i for i, r in enumerate(rows)}
plan = lambda h: {n: c[0] for n, c in rp.plan(rows, summary, h, order).items()}
# nlp.wide (+0.005 for twice the hours) is never a candidate; nlp.deep (+0.02) is.
cands = rp.candidates(rows, summary, order)
assert [c[0] for c in cands["n"]] == ["nlp", "nlp.deep", "nlp.cheap"], cands["n"]
assert plan(1000) == {"n": "nlp.deep", "x": "xla"}, plan(1000)
assert plan(37) == {"n": "nlp.deep", "x": "xla.members2"}, plan(37)  # 1.02 over 1.00
# 28 h: nlp.wide with the xla recipe would fit and sum 1.005; the xla recipe (a stand-in 0.40)
# wins its tie with xla.members2 (0.40), though the latter saves 6 h.
assert plan(28) == {"n": "nlp", "x": "xla"}, plan(28)
assert plan(15) == {"n": "nlp", "x": "xla.members2"}, plan(15)
assert plan(10) == {"n": "nlp.cheap", "x": "xla.members2"}, plan(10)
# A variant measured on fewer than 3 seeds is no candidate, however well and cheaply it ranks;
# with its third seed it is.
lucky = lambda seeds: summary + [dict(variant="nlp.lucky", fixture="nlp", mean=0.70,
                                      seeds=seeds)]
rows.append(row("nlp.lucky", "n", 1.0))
order["nlp.lucky"] = len(order)
assert "nlp.lucky" not in [c[0] for c in rp.candidates(rows, lucky([1, 2]), order)["n"]]
assert rp.plan(rows, lucky([1, 2]), 1000, order)["n"][0] == "nlp.deep"
assert rp.plan(rows, lucky([1, 2, 3]), 1000, order)["n"][0] == "nlp.lucky"
# The plan names it, with what it would cost, until it has its third seed.
chosen = rp.plan(rows, lucky([1, 2]), 1000, order)
text = rp.describe(chosen, rows, lucky([1, 2]))
assert text[-1] == ("not chosen for fewer than 3 seeds: nlp.lucky (2 seeds, 0.700; "
                    "1.00 h where the plan takes 30.00 h)"), text
chosen = rp.plan(rows, lucky([1, 2, 3]), 1000, order)
assert not any("fewer than" in t for t in rp.describe(chosen, rows, lucky([1, 2, 3]))), text
# Nor one that would not change the plan: dearer and no better by more than 0.01.
dear = summary + [dict(variant="nlp.dear", fixture="nlp", mean=0.625, seeds=[1])]
rows.append(row("nlp.dear", "n", 40.0))
order["nlp.dear"] = len(order)
chosen = rp.plan(rows, dear, 1000, order)
assert not any("fewer than" in t for t in rp.describe(chosen, rows, dear)), chosen
# Nor one better by more than 0.01 that the budget has no room for in place of the plan's.
dear[-1]["mean"] = 0.70
chosen = rp.plan(rows, dear, 40, order)
assert chosen["n"][0] == "nlp.deep" and chosen["x"][0] == "xla", chosen  # 38 h
assert not any("fewer than" in t for t in rp.describe(chosen, rows, dear, 40)), chosen
# 48 h would have room for it (40 + 8), so that plan names it.
chosen = rp.plan(rows, dear, 48, order)
assert rp.describe(chosen, rows, dear, 48)[-1] == ("not chosen for fewer than 3 seeds: nlp.dear "
                                                   "(1 seed, 0.700; 40.00 h where the plan takes "
                                                   "30.00 h)"), chosen
# Nor does it raise the stand-in score of an unmeasured recipe (the xla recipe's is 0.40).
two = summary + [dict(variant="xla.lucky", fixture="xla", mean=0.90, seeds=[1, 2])]
rows.append(row("xla.lucky", "x", 1.0))
order["xla.lucky"] = len(order)
assert [c[3] for c in rp.candidates(rows, two, order)["x"] if c[0] == "xla"] == [0.40]
# The bar is the standard error of the difference of the means, at least 0.01: +0.03 over a
# recipe with seeds 0.60 / 0.62 / 0.64 (sd 0.02) is chosen when the variant's seeds agree
# (0.65 / 0.65 / 0.65: SE 0.012) and not when they spread (0.57 / 0.65 / 0.73: SE 0.048).
def rule(kv):
    rs = [row("nlp", "n", 10.0), row("nlp.v", "n", 20.0), row("xla", "x", 1.0)]
    sm = [dict(variant="nlp", fixture="nlp", mean=0.62, seeds=[1, 2, 3],
               kendall=[0.60, 0.62, 0.64]),
          dict(variant="nlp.v", fixture="nlp", mean=round(sum(kv) / 3, 6), seeds=[1, 2, 3],
               kendall=kv)]
    return rp.plan(rs, sm, 1000, {"nlp": 0, "nlp.v": 1, "xla": 2})["n"][0]
assert abs(rp.se_of_difference([0.63] * 3, [0.60, 0.62, 0.64]) - 0.0115470) < 1e-6
assert rule([0.65, 0.65, 0.65]) == "nlp.v"
assert rule([0.57, 0.65, 0.73]) == "nlp"
# Under 0.01, TOLERANCE stands.
assert rp.bar(dict(kendall=[0.7, 0.7, 0.7]), dict(kendall=[0.6, 0.6, 0.6])) == rp.TOLERANCE
# The columns stay aligned when a variant's name is longer than the column's default width.
longname = "nlp.a-variant-name-of-thirty-chars"
summary.append(dict(variant=longname, fixture="nlp", mean=0.99, seeds=[1, 2, 3]))
rows.append(row(longname, "n", 1.0))
order[longname] = len(order)
chosen = rp.plan(rows, summary, 1000, order)
assert chosen["n"][0] == longname, chosen
text = rp.describe(chosen, rows, summary, 1000)
table = [t for t in text if t.startswith(("collection", "n ", "x "))]
assert len(table) == 3, text
# Each row's hours end where the header's "hours" does (the columns are right-aligned).
hours_end = table[0].index(" hours") + len(" hours")
for t in table[1:]:
    name, variant, hours = t.split()[:3]
    start = t.index(variant) + len(variant)
    assert t.index(hours, start) + len(hours) == hours_end, (t, table[0])
print("planner rules ok")
EOF
echo "release plan ok"
