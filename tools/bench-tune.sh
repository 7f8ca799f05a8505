#!/usr/bin/env bash
# How good are the configurations `tpugraphs tune` chooses? Ground truth from synth's noise-free
# cost model (docs/tune.md, "Benchmark").
#
#  1. A training collection (layout: random and default search; tile kernels) and a separate
#     collection of unseen programs, made by `synth` with other seeds.
#  2. Layout models trained with tools/configs/layout.textproto on the training programs (one
#     per search style, as the recipe is used per collection), a tile model with
#     tools/configs/tile.textproto. BENCH_TUNE_RECIPE=layout-collection trains the layout models
#     with that recipe instead (on the training and validation programs), and
#     BENCH_TUNE_TRAIN_FLAGS adds train flags to them (docs/tune.md, "The recipe for tune").
#  3. For every unseen program, the noise-free cost of: the default configuration; the best of
#     the program's own configurations (what measuring them all gives); tune's top-1; the best of
#     tune --measure 10; random search with 10 true-cost measurements (the default + 9 uniform
#     draws); the oracle (the same search and budget with the true cost as the scorer). Speedups
#     over the default per program, their medians and the targets' ratios.
#     The closed loop (tune --measure-cmd with synth --score as the measurer, 3 rounds of 10):
#     the best measured after each round, against, in the same run: random search with as many
#     and with 10x as many true-cost measurements, the frozen model's best of 30 (tune --measure
#     30, all measured), and an evolutionary search on measurements alone (the loop without a
#     model). Share of the oracle's gain per program and method; medians; the trace of one
#     program; best-so-far against measurements as a report (--tune-trace) in PLOT.
#  4. Configurations scored per second against graph size (1k, 3k, 10k, 22k nodes), and the
#     loop's seconds per round (fine-tuning + search) on a 3,000-node program.
#
# Usage: tools/bench-tune.sh [WORKDIR]
#   the binary measured: tools/lib/tpugraphs-binary.sh's (TPUGRAPHS, else BUILD_DIR's, default
#   build/tpugraphs)
#   BENCH_TUNE_SIZE=full (default) or tiny (seconds; what the test runs)
#   BENCH_TUNE_BUDGET: tune's --budget (default: tune's default, 2000; tiny: 60)
#   BENCH_TUNE_FLAGS: more flags for tune's model runs (top-1, --measure 10), e.g.
#   "--uncertainty 1" or "--max-distance 8"; the oracle and random runs do not get them
#   BENCH_TUNE_RECIPE: the layout models' recipe in tools/configs (default layout)
#   BENCH_TUNE_TRAIN_FLAGS: more train flags for the layout models, e.g. "--mse-weight 0.1"
#   BENCH_TUNE_PARTS: "quality speed" (default) or one of them; speed times the loop and must
#   run on an idle machine, quality's figures do not depend on the load
#   PLOT: the HTML report of best-so-far against measurements (default: WORKDIR/tune-loop.html)
#   WORKDIR default: a fresh directory under /tmp, removed at exit unless KEEP=1. A WORKDIR
#   that already holds the collections and models (KEEP=1 of an earlier run) reuses them, and
#   the rows of programs already measured.
set -euo pipefail
BUILD_DIR=${BUILD_DIR:-build}
WORK=${1:-$(mktemp -d /tmp/tpugraphs-bench-tune-XXXXXX)}
SIZE=${BENCH_TUNE_SIZE:-full}
SRC=$(cd "$(dirname "$0")/.." && pwd)
read -r -a TUNE_FLAGS <<< "${BENCH_TUNE_FLAGS:-}"
PY=/usr/bin/python3
# shellcheck source=tools/lib/bench-machine.sh
source "$SRC/tools/lib/bench-machine.sh"
here=$SRC
# shellcheck source=tools/lib/tpugraphs-binary.sh
source "$here/tools/lib/tpugraphs-binary.sh"
TPUG=$(tpugraphs_binary)   # the build being measured
if [ "${KEEP:-0}" != 1 ]; then trap 'rm -rf "$WORK"' EXIT; fi
mkdir -p "$WORK"
case "$SIZE" in
  full)
    TRAIN_PROGRAMS=20; UNSEEN=20; MIN_NODES=500; MAX_NODES=5000; TRAIN_CONFIGS=100
    UNSEEN_CONFIGS=300; TILE_TRAIN=120; TILE_UNSEEN=100; TILE_CONFIGS=100
    BUDGET=${BENCH_TUNE_BUDGET:-2000}; SPEED_SIZES="1000 3000 10000 22000"; TRAIN_FLAGS=()
    LOOP_NODES=3000; ROUNDS=3; PER_ROUND=10
    ;;
  tiny)
    TRAIN_PROGRAMS=3; UNSEEN=2; MIN_NODES=150; MAX_NODES=300; TRAIN_CONFIGS=20
    UNSEEN_CONFIGS=20; TILE_TRAIN=8; TILE_UNSEEN=3; TILE_CONFIGS=15
    BUDGET=${BENCH_TUNE_BUDGET:-60}; SPEED_SIZES="300"
    TRAIN_FLAGS=(--epochs 2 --ensemble-members 2)
    LOOP_NODES=300; ROUNDS=3; PER_ROUND=4
    ;;
  *) echo "BENCH_TUNE_SIZE must be full or tiny" >&2; exit 2 ;;
esac
LAYOUT_RECIPE="$SRC/tools/configs/${BENCH_TUNE_RECIPE:-layout}.textproto"
[ -f "$LAYOUT_RECIPE" ] || { echo "BENCH_TUNE_RECIPE: no $LAYOUT_RECIPE" >&2; exit 2; }
# layout.textproto on the training programs alone, its carved configurations validated on;
# another recipe with its own splits.
LAYOUT_SPLITS=()
[ "${BENCH_TUNE_RECIPE:-layout}" = layout ] && LAYOUT_SPLITS=(--train-split train --valid-split "")
read -r -a LAYOUT_FLAGS <<< "${BENCH_TUNE_TRAIN_FLAGS:-}"
echo "cores: $(nproc); size: $SIZE; tune budget: $BUDGET; tune flags: ${BENCH_TUNE_FLAGS:-none}; layout recipe: ${BENCH_TUNE_RECIPE:-layout} ${BENCH_TUNE_TRAIN_FLAGS:-}"
bench_machine_header

# 1. Collections (kept when WORKDIR already has them: a rerun reuses collections and models).
if [ ! -f "$WORK/collections.done" ]; then
for search in random default; do
  "$TPUG" -q synth --task layout --search "$search" --graphs "$TRAIN_PROGRAMS" \
    --min-nodes "$MIN_NODES" --max-nodes "$MAX_NODES" --configs "$TRAIN_CONFIGS" --seed 11 \
    --output "$WORK/train" > /dev/null
  "$TPUG" -q synth --task layout --search "$search" --graphs "$UNSEEN" \
    --min-nodes "$MIN_NODES" --max-nodes "$MAX_NODES" --configs "$UNSEEN_CONFIGS" --seed 12 \
    --output "$WORK/unseen" --noise-free-costs "$WORK/costs-layout-$search.tsv" > /dev/null
done
"$TPUG" -q synth --task tile --graphs "$TILE_TRAIN" --configs "$TILE_CONFIGS" --seed 13 \
  --splits 0.85,0.15,0 --output "$WORK/train" > /dev/null
"$TPUG" -q synth --task tile --graphs "$TILE_UNSEEN" --configs "$TILE_CONFIGS" --seed 14 \
  --output "$WORK/unseen" --noise-free-costs "$WORK/costs-tile.tsv" > /dev/null
for search in random default; do
  "$TPUG" -q ingest "$WORK/train/pb/layout/synth/$search" --collection "layout:synth:$search" \
    -o "$WORK/train-layout-$search.tpug" > /dev/null
done
touch "$WORK/collections.done"
fi
"$TPUG" -q ingest "$WORK/train/pb/tile" --collection tile:synth -o "$WORK/train-tile.tpug" \
  > /dev/null

# 2. Models, trained with the recipe files as they are (tests/train/recipe_files_test.cc checks
# that every file in tools/configs parses and validates).
TILE_RECIPE="$SRC/tools/configs/tile.textproto"
for search in random default; do  # one model per collection, as the recipe is used
  if [ -f "$WORK/layout-$search.tpm" ]; then continue; fi
  start=$(date +%s)
  "$TPUG" -q train --config "$LAYOUT_RECIPE" --dataset "$WORK/train-layout-$search.tpug" \
    "${LAYOUT_SPLITS[@]}" "${TRAIN_FLAGS[@]}" "${LAYOUT_FLAGS[@]}" \
    --output "$WORK/layout-$search.tpm" > /dev/null
  echo "layout model ($search search, $TRAIN_PROGRAMS programs): $(( $(date +%s) - start )) s"
done
if [ ! -f "$WORK/tile.tpm" ]; then
start=$(date +%s)
"$TPUG" -q train --config "$TILE_RECIPE" --dataset "$WORK/train-tile.tpug" \
  --train-split train --valid-split valid "${TRAIN_FLAGS[@]}" --output "$WORK/tile.tpm" > /dev/null
echo "tile model ($TILE_TRAIN kernels): $(( $(date +%s) - start )) s"
fi

# 3. Per unseen program.
PARTS=${BENCH_TUNE_PARTS:-quality speed}
PLOT=${PLOT:-$WORK/tune-loop.html}
score_min() {  # noise-free ns of the configurations of $1 for program $2: the minimum
  "$TPUG" -q synth --score "$1" --from "$2" | awk 'NR > 1 { if (m == "" || $2 < m) m = $2 } END { print m }'
}
json_field() { "$PY" -c "import json,sys; print(json.loads(sys.stdin.readline())['$1'])"; }
# The best measured after each round of a loop's --json, tab-separated; then the batch Kendalls.
loop_bests() {
  "$PY" -c "
import json, sys
j = json.loads(sys.stdin.readline())
r = j['rounds']
b = [x['best_runtime'] for x in r] + [r[-1]['best_runtime']] * ($ROUNDS - len(r))
k = [x['batch_kendall'] for x in r] + [None] * ($ROUNDS - len(r))
print('\t'.join(str(x) for x in b), '\t'.join('nan' if x is None else str(x) for x in k), sep='\t')"
}
rows="$WORK/rows.tsv"
loop_cols=""; evo_cols=""; kendall_cols=""; rand_cols=""
for r in $(seq 1 "$ROUNDS"); do
  loop_cols+="\tloop$r"; evo_cols+="\tevo$r"; kendall_cols+="\tkendall$r"
  rand_cols+="\trandom$((r * PER_ROUND))\trandom$((10 * r * PER_ROUND))"
done
header="task\tsearch\tprogram\tnodes\tdefault\tdataset_best\ttop1\tmeasure10\trandom10\toracle"
header+="\tfrozen$((ROUNDS * PER_ROUND))$loop_cols$evo_cols$rand_cols$kendall_cols\tloop_seconds"
if [ ! -f "$rows" ]; then echo -e "$header" > "$rows"; fi
tune_program() {  # task search program.pb model costs.tsv
  local task=$1 search=$2 pb=$3 model=$4 costs=$5 name d
  name=$(basename "$pb" .pb)
  if grep -q -P "^$task\t$search\t$name\t" "$rows"; then return; fi  # measured by an earlier run
  d="$WORK/t/$task-$search-$name"
  mkdir -p "$d"
  "$TPUG" -q tune --model "$model" --data "$pb" --budget "$BUDGET" --top 1 -o "$d/top1.npz" \
    ${TUNE_FLAGS[@]+"${TUNE_FLAGS[@]}"} --json > "$d/top1.json"
  "$TPUG" -q tune --model "$model" --data "$pb" --budget "$BUDGET" --measure 10 \
    ${TUNE_FLAGS[@]+"${TUNE_FLAGS[@]}"} -o "$d/m10.npz" > /dev/null
  local top1 m10 rnd orc nodes frozen loop evo rands="" n start loop_s
  top1=$(score_min "$d/top1.npz" "$pb")
  m10=$(score_min "$d/m10.npz" "$pb")
  rnd=$("$TPUG" -q tune --oracle synthetic --from "$pb" --strategy random --budget 10 --top 1 \
    -o "$d/random.npz" --json | json_field best_score)
  orc=$("$TPUG" -q tune --oracle synthetic --from "$pb" --budget "$BUDGET" --top 1 \
    -o "$d/oracle.npz" --json | json_field best_score)
  nodes=$(json_field nodes < "$d/top1.json")
  # The frozen model's one-shot set of as many configurations as the loop measures in all.
  "$TPUG" -q tune --model "$model" --data "$pb" --budget "$BUDGET" \
    --measure $((ROUNDS * PER_ROUND)) ${TUNE_FLAGS[@]+"${TUNE_FLAGS[@]}"} -o "$d/frozen.npz" \
    > /dev/null
  frozen=$(score_min "$d/frozen.npz" "$pb")
  # The closed loop, and the same loop without a model (evolution on measurements alone).
  local measurer="'$TPUG' -q synth --score {} --from '$pb'"
  start=$(date +%s.%N)
  "$TPUG" -q tune --model "$model" --data "$pb" --budget "$BUDGET" --measure "$PER_ROUND" \
    --rounds "$ROUNDS" --measure-cmd "$measurer" ${TUNE_FLAGS[@]+"${TUNE_FLAGS[@]}"} \
    -o "$d/loop.npz" --json > "$d/loop.json"
  loop_s=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
  "$TPUG" -q tune --data "$pb" --budget "$BUDGET" --measure "$PER_ROUND" --rounds "$ROUNDS" \
    --measure-cmd "$measurer" -o "$d/evo.npz" --json > "$d/evo.json"
  read -r -a loop < <(loop_bests < "$d/loop.json")
  read -r -a evo < <(loop_bests < "$d/evo.json")
  # Random search (the default and uniform draws) with as many true-cost measurements as the
  # loop after each round, and with 10x as many.
  for r in $(seq 1 "$ROUNDS"); do
    for n in $((r * PER_ROUND)) $((10 * r * PER_ROUND)); do
      rands+="\t$("$TPUG" -q tune --oracle synthetic --from "$pb" --strategy random --budget "$n" \
        --top 1 -o "$d/random-$n.npz" --json | json_field best_score)"
    done
  done
  # The program's own configurations: noise-free costs synth recorded (config 0 = default).
  read -r def best < <(awk -F'\t' -v g="$name" '$2 == g { if ($4 == 0) d = $6;
      if (b == "" || $6 < b) b = $6 } END { print d, b }' "$costs")
  local loops evos kendalls
  loops=$(printf '\t%s' "${loop[@]:0:$ROUNDS}")
  evos=$(printf '\t%s' "${evo[@]:0:$ROUNDS}")
  kendalls=$(printf '\t%s' "${loop[@]:$ROUNDS:$ROUNDS}")
  echo -e "$task\t$search\t$name\t$nodes\t$def\t$best\t$top1\t$m10\t$rnd\t$orc\t$frozen$loops$evos$rands$kendalls\t$loop_s" >> "$rows"
}
if [[ " $PARTS " == *" quality "* ]]; then
for search in random default; do
  for pb in "$WORK"/unseen/pb/layout/synth/"$search"/train/*.pb; do
    tune_program layout "$search" "$pb" "$WORK/layout-$search.tpm" \
      "$WORK/costs-layout-$search.tsv"
  done
done
for pb in "$WORK"/unseen/pb/tile/synth/train/*.pb; do
  tune_program tile - "$pb" "$WORK/tile.tpm" "$WORK/costs-tile.tsv"
done

"$PY" - "$rows" "$ROUNDS" "$PER_ROUND" "$WORK" <<'PYEOF'
import csv, math, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
R, K, work = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
cols = ["dataset_best", "top1", "measure10", "random10", "oracle"]
def f(x): return float(x)
def med(xs):
    xs = [x for x in xs if not math.isnan(x)]
    return statistics.median(xs) if xs else float("nan")
for task in ["layout", "tile"]:
    rs = [r for r in rows if r["task"] == task]
    if not rs:
        continue
    print(f"\n{task}: speedup over the default (default / cost), per program")
    print("search\tprogram\tnodes\t" + "\t".join(cols) + "\ttop1/oracle gain\tm10/oracle gain")
    ratios_top1, ratios_m10, speed = [], [], {c: [] for c in cols}
    worse_top1 = worse_m10 = beats_dataset = 0
    for r in rs:
        d = f(r["default"])
        s = {c: d / f(r[c]) for c in ["dataset_best", "top1", "measure10", "random10", "oracle"]}
        for c in cols: speed[c].append(s[c])
        og = s["oracle"] - 1
        rt = (s["top1"] - 1) / og if og > 1e-9 else float("nan")
        rm = (s["measure10"] - 1) / og if og > 1e-9 else float("nan")
        if og > 1e-9:
            ratios_top1.append(rt); ratios_m10.append(rm)
        # 1 ns and 1e-8 of slack: synth records a tile run's noise-free cost as the measured
        # value with the noise divided back out, rounded (within 1 ns of what synth --score
        # computes), and the oracle's score of a program of 1.5e9 ns may differ from the recorded
        # cost of the default in its last bits (4 ns seen).
        worse_top1 += f(r["top1"]) > d * (1 + 1e-8) + 1
        worse_m10 += f(r["measure10"]) > d * (1 + 1e-8) + 1
        beats_dataset += f(r["measure10"]) < f(r["dataset_best"])
        print(f"{r['search']}\t{r['program']}\t{r['nodes']}\t" +
              "\t".join(f"{s[c]:.4f}" for c in cols) + f"\t{rt:.3f}\t{rm:.3f}")
    n = len(rs)
    print("median\t\t\t" + "\t".join(f"{statistics.median(speed[c]):.4f}" for c in cols))
    if ratios_top1:
        print(f"median top-1 gain / oracle gain: {statistics.median(ratios_top1):.3f} (target >= 0.80)")
        print(f"median measure-10 gain / oracle gain: {statistics.median(ratios_m10):.3f} (target >= 0.95)")
    print(f"top-1 worse than the default: {worse_top1}/{n} (target <= 10 %)")
    print(f"measure-10 worse than the default: {worse_m10}/{n} (target 0)")
    print(f"measure-10 beats the best dataset configuration: {beats_dataset}/{n} (target: most)")

# The closed loop against its baselines: share of the oracle's gain, (default / cost - 1) /
# (default / oracle - 1), per program (programs where the oracle gains nothing are left out of
# the shares), by measurements spent.
frozen = f"frozen{R * K}"
methods = [(f"loop{r}", f"loop, {r} round(s)", r * K) for r in range(1, R + 1)]
methods += [(f"evo{r}", f"evolution on measurements, {r} gen.", r * K) for r in range(1, R + 1)]
methods += [(f"random{r * K}", f"random, {r * K} measured", r * K) for r in range(1, R + 1)]
methods += [(f"random{10 * r * K}", f"random, {10 * r * K} measured", 10 * r * K)
            for r in range(1, R + 1)]
methods += [(frozen, f"frozen model, best of {R * K}", R * K)]
header = "graph\tround\tmeasured\tnew\tbest_runtime\tdefault_runtime\tspeedup\tbatch_kendall\tseconds\toutput"
groups = [("layout", "random"), ("layout", "default"), ("tile", "-")]
for task, search in groups:
    rs = [r for r in rows if r["task"] == task and r["search"] == search]
    if not rs:
        continue
    label = f"{task}" + (f", {search} search" if search != "-" else "")
    trace = [header]
    print(f"\n{label}: the closed loop ({R} rounds of {K}) and its baselines, {len(rs)} programs")
    print("method\tmeasurements\tmedian share of the oracle's gain\tmedian speedup\tworse than the default")
    share = {}
    for key, name, m in methods:
        sh, sp, worse = [], [], 0
        for r in rs:
            d, o, c = f(r["default"]), f(r["oracle"]), f(r[key])
            og = d / o - 1
            sp.append(d / c)
            worse += c > d * (1 + 1e-8) + 1
            sh.append((d / c - 1) / og if og > 1e-9 else float("nan"))
        share[key] = sh
        print(f"{name}\t{m}\t{med(sh):.3f}\t{med(sp):.4f}\t{worse}/{len(rs)}")
        series = name.split(",")[0] if key.startswith(("loop", "evo")) else name.rsplit(",", 1)[0]
        if key.startswith("random") and int(key[6:]) > R * K:
            series = "random x10"
        elif key.startswith("random"):
            series = "random"
        spd = med(sp)
        trace.append(f"{series}\t{len(trace)}\t{m}\t0\t{1 / spd:.6f}\t1\t{spd:.6f}\tnan\t0\t-")
    loop_last = share[f"loop{R}"]
    rx10 = share[f"random{10 * R * K}"]
    beats = sum(1 for a, b in zip(loop_last, rx10) if not math.isnan(a) and a > b + 1e-12)
    ties = sum(1 for a, b in zip(loop_last, rx10) if not math.isnan(a) and abs(a - b) <= 1e-12)
    print(f"loop after {R} rounds against random with {10 * R * K}: better on {beats}, tied on "
          f"{ties} of {sum(1 for a in loop_last if not math.isnan(a))} programs")
    if task == "layout":
        print(f"targets: median share after 1 round {med(share['loop1']):.3f} (>= 0.95), after "
              f"{R} rounds {med(share[f'loop{R}']):.3f} (>= 0.97)")
    else:
        same = sum(1 for r in rs if f(r["loop1"]) <= f(r["oracle"]) + 1)
        print(f"tile: the best of the first {K} measured equals (or beats) the oracle's on "
              f"{same}/{len(rs)} kernels (target >= 95 %)")
    kd = [[f(r[f"kendall{i}"]) for r in rs] for i in range(1, R + 1)]
    print("loop's Kendall on each new batch before learning from it, median per round: " +
          ", ".join(f"round {i + 1} {med(k):.3f}" for i, k in enumerate(kd)))
    secs = [f(r["loop_seconds"]) for r in rs]
    print(f"loop wall seconds per program (fine-tuning, searches, measuring; load not controlled): "
          f"median {med(secs):.1f}, max {max(secs):.1f}")
    # Best so far (median speedup over the default) against measurements, per method.
    name = f"{task}-{search}" if search != "-" else task
    open(f"{work}/best-so-far-{name}.tsv", "w").write("\n".join(trace) + "\n")
PYEOF
# The learning curve of one program: the loop's trace as tune prints it.
first=$(ls "$WORK"/t | grep '^layout-random-' | head -n 1 || true)
if [ -n "$first" ]; then
  echo
  echo "learning curve of ${first#layout-random-} (layout, random search):"
  "$PY" -c "
import json, sys
j = json.loads(open(sys.argv[1]).readline())
print('round\tmeasured\tbest_runtime\tspeedup\tbatch_kendall\tmodel_seconds')
for r in j['rounds']:
    print(f\"{r['round']}\t{r['measured']}\t{r['best_runtime']}\t{r['speedup']}\t{r['batch_kendall']}\t{r['model_seconds']:.2f}\")
" "$WORK/t/$first/loop.json"
fi
traces=()
for t in "$WORK"/best-so-far-*.tsv; do traces+=(--tune-trace "$t"); done
"$TPUG" -q report "${traces[@]}" --title "tune: best so far against measurements (medians)" \
  -o "$PLOT" && echo "plot: $PLOT"
fi

# 4. Speed against graph size, and the loop's seconds per round.
if [[ " $PARTS " == *" speed "* ]]; then
echo
echo -e "nodes\tconfigurable\tconfigs_scored\tseconds\tconfigs_per_second"
for n in $SPEED_SIZES; do
  "$TPUG" -q synth --task layout --nodes "$n" --graphs 1 --configs 20 --seed 15 \
    --output "$WORK/speed-$n.pb" > /dev/null
  "$TPUG" -q tune --model "$WORK/layout-random.tpm" --data "$WORK/speed-$n.pb" --budget "$BUDGET" \
    --top 1 -o "$WORK/speed-$n.npz" --json |
    "$PY" -c "import json,sys; j=json.loads(sys.stdin.readline()); print(f\"{j['nodes']}\t{j['configurable_nodes']}\t{j['configs_scored']}\t{j['seconds']:.2f}\t{j['configs_per_second']:.1f}\")"
done
"$TPUG" -q synth --task layout --nodes "$LOOP_NODES" --graphs 1 --configs 20 --seed 16 \
  --output "$WORK/loop-$LOOP_NODES.pb" > /dev/null
echo
echo "the loop on a $LOOP_NODES-node program ($ROUNDS rounds of $PER_ROUND, budget $BUDGET, $(nproc) cores):"
"$TPUG" -q tune --model "$WORK/layout-random.tpm" --data "$WORK/loop-$LOOP_NODES.pb" \
  --budget "$BUDGET" --measure "$PER_ROUND" --rounds "$ROUNDS" \
  --measure-cmd "'$TPUG' -q synth --score {} --from '$WORK/loop-$LOOP_NODES.pb'" \
  -o "$WORK/loop-$LOOP_NODES.npz" --json |
  "$PY" -c "
import json, sys
j = json.loads(sys.stdin.readline())
print(f\"nodes {j['nodes']}, configurable {j['configurable_nodes']}\")
print('round\tmodel_seconds (fine-tuning + search)\tmeasure_seconds')
for r in j['rounds']:
    print(f\"{r['round']}\t{r['model_seconds']:.2f}\t{r['measure_seconds']:.2f}\")
print(f\"worst round: {max(r['model_seconds'] for r in j['rounds']):.2f} s (target <= 30 s)\")"
fi
bench_machine_footer
