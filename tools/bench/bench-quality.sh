#!/usr/bin/env bash
# Quality benchmark: how well the documented recipes rank configurations of programs they have
# never seen, on a fixed synthetic suite made by `tpugraphs synth`, next to the random baseline
# and the noise-free ceiling (docs/train.md, "Quality benchmark").
#
# Usage: tools/bench/bench-quality.sh [OUT_DIR]        (default: out/bench-quality)
# Environment:
#   SCALE=full|small   full (default): layout random and default searches with 60 training,
#                      10 validation and 20 test programs of 500-20000 nodes, 1000 configs each,
#                      and 300 tile kernels; small: 12/4/6 programs of 300-1500 nodes with 200
#                      configs and 60 kernels, to try the script in minutes
#   SCALE=medium       layout: 20/6/22 programs of 300-1500 nodes with 200 configs; tile: 150
#                      kernels (90/15/45): enough test programs to compare recipes in an hour
#   SCALE=nlp          layout shaped like the release's nlp collections: 20 training, 3
#                      validation and 8 test programs of 4,000-8,000 nodes with 20,000
#                      configurations each, trained with tools/configs/layout-large.textproto
#                      (the nlp recipe); hours per seed on 2 cores (tile as medium)
#   RECIPE             the layout recipe file's name in tools/configs (default: layout, or
#                      layout-large with SCALE=nlp)
#   SEEDS              training seeds (default "1"); several give one line per seed and their
#                      ensemble (evaluate --model A --model B ...)
#   COLLECTIONS        the suite entries to run (default "layout_random layout_default tile
#                      single"); "single" is the single-graph protocol: SINGLE_GRAPHS synthetic
#                      programs of about 400 nodes with 48,000 configurations each (default 2),
#                      30 % of each one's distinct configurations held out, each trained alone
#                      with the layout recipe, next to ridge regression on the same split (a
#                      second table; "best" is the written model's held-out Kendall (picked on
#                      configurations carved from the training ones; before the recipe carved
#                      them, the best epoch's), "last" the last epoch's validation figure)
#   EXTRA_TRAIN        N > 0: the layout collections get N more training programs (another synth
#                      seed, the same sizes; validation and test programs unchanged), to measure
#                      how test Kendall grows with the number of training programs; the models
#                      are named extraN.*
#   SYNTH_FLAGS        more flags for the layout collections' synth (e.g. --no-cross-node-terms
#                      true: docs/train.md, "Why no message passing on xla"); the data is made
#                      once per OUT_DIR, so give such a suite its own OUT_DIR
#   INGEST_FLAGS       more flags for every ingest of the suite's programs (e.g.
#                      --mark-absent-dimensions: docs/ingest.md); like SYNTH_FLAGS, give such a
#                      suite its own OUT_DIR (the same seeds make the same programs)
#   VARIANT, TRAIN_FLAGS  an ablation: TRAIN_FLAGS are appended to the recipe and the models are
#                      named and labelled after VARIANT (e.g. VARIANT=tf
#                      TRAIN_FLAGS=--layout-tensor-features); the data is shared
#   TPUGRAPHS          the binary (default: tpugraphs on PATH, else build/tpugraphs)
#   TPUGRAPHS_GLOBAL_FLAGS  e.g. "-j 2"
# Prints one TSV row per collection and model: test Kendall, OPA, top-1 and top-5 error (tile) or
# top-1 and top-10 slowdown (layout), the random
# baseline's and the noise-free ceiling (tau of noise-free cost vs measured runtime, mean over
# the test programs; tile: the top-1/top-5 error of ranking by noise-free cost), training time.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tools/lib/bench-machine.sh
source "$here/tools/lib/bench-machine.sh"
out=${1:-$here/out/bench-quality}
scale=${SCALE:-full}
seeds=${SEEDS:-1}
# shellcheck source=tools/lib/tpugraphs-binary.sh
source "$here/tools/lib/tpugraphs-binary.sh"
bin=$(tpugraphs_binary)
read -r -a global <<<"${TPUGRAPHS_GLOBAL_FLAGS:-}"
py=/usr/bin/python3
mkdir -p "$out"

case "$scale" in
  full) layout_size=(--min-nodes 500 --max-nodes 20000 --configs 1000)
        layout_args=(--graphs 90 "${layout_size[@]}" --splits 0.6667,0.1111,0.2222)
        tile_args=(--graphs 300 --configs 100 --splits 0.7,0.1,0.2) ;;
  small) layout_size=(--min-nodes 300 --max-nodes 1500 --configs 200)
         layout_args=(--graphs 22 "${layout_size[@]}" --splits 0.5455,0.1818,0.2727)
         tile_args=(--graphs 60 --configs 60 --splits 0.6,0.2,0.2) ;;
  medium) layout_size=(--min-nodes 300 --max-nodes 1500 --configs 200)
          layout_args=(--graphs 48 "${layout_size[@]}" --splits 0.4167,0.125,0.4583)
          tile_args=(--graphs 150 --configs 60 --splits 0.6,0.1,0.3) ;;
  nlp) layout_size=(--min-nodes 4000 --max-nodes 8000 --configs 20000)
       layout_args=(--graphs 31 "${layout_size[@]}" --splits 0.6452,0.0967,0.2581)
       tile_args=(--graphs 150 --configs 60 --splits 0.6,0.1,0.3) ;;
  *) echo "SCALE must be full, medium, small or nlp" >&2; exit 2 ;;
esac
layout_recipe=${RECIPE:-$([ "$scale" = nlp ] && echo layout-large || echo layout)}
[ -f "$here/tools/configs/$layout_recipe.textproto" ] ||
  { echo "RECIPE: no tools/configs/$layout_recipe.textproto" >&2; exit 2; }

# name  task  search  synth seed
suite=("layout_random layout random 101" "layout_default layout default 102" "tile tile - 103")

printf 'collection\tmodel\ttest_graphs\tkendall\topa\ttop1\ttop5_or_10\trandom_kendall\trandom_top5_or_10\tceiling_kendall\tceiling_top1\ttrain_seconds\n'
collections=${COLLECTIONS:-layout_random layout_default tile single}
variant=${VARIANT:-}
extra_train=${EXTRA_TRAIN:-0}
case "$extra_train" in '' | *[!0-9]*) echo "EXTRA_TRAIN must be a count" >&2; exit 2 ;; esac
read -r -a train_flags <<<"${TRAIN_FLAGS:-}"
read -r -a synth_flags <<<"${SYNTH_FLAGS:-}"
read -r -a ingest_flags <<<"${INGEST_FLAGS:-}"
base_tag=${variant:+$variant.}
bench_machine_header
# The numpy/scipy references (the noise-free ceilings) run with the OpenBLAS overrides unset.
bench_reference "$py" "$here/tools/lib/bench_machine.py" blas
for entry in "${suite[@]}"; do
  read -r name task search seed <<<"$entry"
  case " $collections " in *" $name "*) ;; *) continue ;; esac
  data="$out/$name.tpug"
  costs="$out/$name.costs.tsv"
  if [ ! -f "$data" ]; then
    echo "== $name: synth" >&2
    rm -rf "$out/$name.tree"
    if [ "$task" = layout ]; then
      "$bin" "${global[@]}" -q synth --task layout --search "$search" "${layout_args[@]}" \
        --seed "$seed" "${synth_flags[@]}" -o "$out/$name.tree" --noise-free-costs "$costs" \
        >"$out/$name.synth.tsv"
    else
      "$bin" "${global[@]}" -q synth --task tile "${tile_args[@]}" --seed "$seed" \
        -o "$out/$name.tree" --noise-free-costs "$costs" >"$out/$name.synth.tsv"
    fi
    "$bin" "${global[@]}" -q ingest "$out/$name.tree" "${ingest_flags[@]}" -o "$data" >&2
  fi
  # More training programs (EXTRA_TRAIN): drawn with another seed, the same sizes, all in the
  # training split, named extra_*; the validation and test programs stay the same.
  tag=$base_tag
  if [ "$task" = layout ] && [ "$extra_train" -gt 0 ]; then
    tag="extra$extra_train.$base_tag"
    data="$out/$name.extra$extra_train.tpug"
    if [ ! -f "$data" ]; then
      echo "== $name: synth $extra_train extra training programs" >&2
      rm -rf "$out/$name.extra$extra_train.tree"
      "$bin" "${global[@]}" -q synth --task layout --search "$search" --graphs "$extra_train" \
        "${layout_size[@]}" --seed "$((seed + 1000))" -o "$out/$name.extra$extra_train.tree" \
        >/dev/null
      for f in "$out/$name.extra$extra_train.tree"/pb/layout/*/*/train/program_*.pb; do
        mv "$f" "${f%/program_*}/extra_${f##*/program_}"
      done
      "$bin" "${global[@]}" -q ingest "$out/$name.tree" "$out/$name.extra$extra_train.tree" \
        "${ingest_flags[@]}" -o "$data" >&2
    fi
  fi
  # The noise-free ceiling over the test programs.
  ceiling=$(bench_reference "$py" - "$costs" "$task" <<'EOF'
import sys
import numpy as np
from scipy.stats import kendalltau
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if not l.startswith("#")][1:]
graphs = {}
for collection, graph, split, config, measured, clean in rows:
    if split == "test":
        graphs.setdefault(graph, []).append((float(measured), float(clean)))
taus, top1 = [], []
for g, v in graphs.items():
    m = np.array([a for a, _ in v]); c = np.array([b for _, b in v])
    taus.append(kendalltau(c, m).correlation)
    top1.append(m[np.argmin(c)] / m.min() - 1)
print(f"{np.mean(taus):.4f}\t{np.mean(top1):.4f}")
EOF
)
  random_json=$("$bin" "${global[@]}" -q evaluate --data "$data" --split test --baseline random --json)
  models=()
  for s in $seeds; do
    model="$out/$name.${tag}seed$s.tpm"
    config="$here/tools/configs/$task.textproto"
    [ "$task" = layout ] && config="$here/tools/configs/$layout_recipe.textproto"
    start=$(date +%s.%N)
    if [ ! -f "$model" ]; then
      echo "== $name: train seed $s ($config)" >&2
      # --auto-resume: killed, the same command continues each model from its checkpoint (its
      # train_seconds then counts the last run only).
      "$bin" "${global[@]}" train --config "$config" --dataset "$data" --seed "$s" \
        --output "$model" --auto-resume true "${train_flags[@]}" \
        >"$out/$name.${tag}seed$s.train.tsv" 2>>"$out/$name.${tag}seed$s.train.log"
      train_s=$("$py" -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" \
        "$start" "$(date +%s.%N)")
      echo "$train_s" >"$out/$name.${tag}seed$s.seconds"
    fi
    models+=("$model")
  done
  report() {  # label, evaluate --json of the model(s)
    "$py" - "$1" "$2" "$random_json" "$ceiling" "$3" "$name" <<'EOF'
import json, sys
label, model_json, random_json, ceiling, seconds, name = sys.argv[1:7]
def means(text):
    c = json.loads(text)["collections"][0]
    out = {"graphs": c["graphs"], "kendall": c["kendall_tau"], "opa": c["opa"]}
    for key in ("top_k_error", "top_k_slowdown"):
        for k, v in c.get(key, {}).items():
            out[f"top{k}"] = v
    return out
m, r = means(model_json), means(random_json)
g = lambda d, k: f"{d[k]:.4f}" if k in d else "-"
ck, c1 = ceiling.split("\t")
print("\t".join([name, label, str(m["graphs"]), g(m, "kendall"), g(m, "opa"), g(m, "top1"),
                 g(m, "top5") if "top5" in m else g(m, "top10"), g(r, "kendall"),
                 g(r, "top5") if "top5" in r else g(r, "top10"), ck, c1, seconds]))
EOF
  }
  for i in "${!models[@]}"; do
    s=$(echo $seeds | cut -d' ' -f$((i + 1)))
    j=$("$bin" "${global[@]}" -q evaluate --data "$data" --split test --model "${models[$i]}" --json)
    report "${tag}seed$s" "$j" "$(cat "$out/$name.${tag}seed$s.seconds" 2>/dev/null || echo -)"
  done
  if [ "${#models[@]}" -gt 1 ]; then
    flags=()
    for m in "${models[@]}"; do flags+=(--model "$m"); done
    j=$("$bin" "${global[@]}" -q evaluate --data "$data" --split test "${flags[@]}" --json)
    report "${tag}ensemble" "$j" "-"
  fi
done

# The single-graph protocol: one program, held-out configurations, the recipe against ridge.
case " $collections " in *" single "*) ;; *) bench_machine_footer; exit 0 ;; esac
printf '\ngraph\tmodel\tconfigs\theld_out_kendall_best\theld_out_kendall_last\tridge_kendall\tnoise_free_ceiling\ttrain_seconds\n'
single="$out/single"
tag=$base_tag
if [ ! -d "$single.tree" ]; then
  echo "== single: synth" >&2
  "$bin" "${global[@]}" -q synth --task layout --graphs "${SINGLE_GRAPHS:-2}" --nodes 400 \
    --configs 48000 --seed 104 -o "$single.tree" --noise-free-costs "$single.costs.tsv" \
    >"$single.synth.tsv"
fi
# The noise-free ceiling of every program, from one read of the costs file.
declare -A single_ceiling
while IFS=$'\t' read -r g c; do single_ceiling[$g]=$c; done < <(bench_reference "$py" - "$single.costs.tsv" <<'EOF'
import sys
import numpy as np
from scipy.stats import kendalltau
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if not l.startswith("#")][1:]
graphs = {}
for _, g, _, _, m, c in rows:
    graphs.setdefault(g, []).append((float(m), float(c)))
for g, v in graphs.items():
    v = np.array(v)
    print(f"{g}\t{kendalltau(v[:, 1], v[:, 0]).correlation:.4f}")
EOF
)
for pb in "$single.tree"/pb/layout/synth/random/train/*.pb; do
  g=$(basename "$pb" .pb)
  data="$single.$g.tpug"
  [ -f "$data" ] || "$bin" "${global[@]}" -q ingest "$pb" "${ingest_flags[@]}" -o "$data" >&2
  ceiling=${single_ceiling[$g]}
  for s in $seeds; do
    model="$single.$g.${tag}seed$s.tpm"
    if [ ! -f "$model" ]; then
      echo "== single $g: train seed $s" >&2
      start=$(date +%s.%N)
      "$bin" "${global[@]}" train --config "$here/tools/configs/layout.textproto" \
        --dataset "$data" --train-split "" --valid-split "" --holdout-config-fraction 0.3 \
        --seed "$s" --output "$model" "${train_flags[@]}" >"$model.train.tsv" \
        2>"$model.train.log"
      "$py" -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" \
        "$start" "$(date +%s.%N)" >"$model.seconds"
    fi
    "$py" - "$model" "$g" "${tag}seed$s" "$ceiling" <<'EOF'
import re, sys
model, g, label, ceiling = sys.argv[1:5]
out = dict(l.rstrip("\n").split("\t", 1) for l in open(model + ".train.tsv") if "\t" in l)
log = open(model + ".train.log").read()
last = re.findall(r"valid_kendall=([-0-9.e]+)", log)
configs = re.search(r"on 1 graphs \((\d+) configs\)", log)
# With a carved validation (the recipe's carve_valid_fraction) the held-out figure is the written
# model's (held_out_kendall); without, the best epoch's, chosen on the held-out configurations.
held = out.get("held_out_kendall", out.get("valid_kendall", "-"))
print("\t".join([g, label, configs.group(1) if configs else "-", held,
                 last[-1] if last else "-", out.get("reference_ridge_valid_kendall", "-"),
                 ceiling, open(model + ".seconds").read().strip()]))
EOF
  done
done
bench_machine_footer
