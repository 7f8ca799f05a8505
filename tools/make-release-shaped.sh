#!/usr/bin/env bash
# Writes a synthetic release tree with the shape of the TpuGraphs release ("Fast or Slow?" Kaggle
# files) at scale S: the number of train/valid/test graphs of every collection times S (rounded,
# at least 1 where the release has any), and per graph a node count and a configuration count
# drawn from the release's published distributions (graph sizes and configuration counts are NOT
# scaled). The tree is the release's npz layout (npz/tile/xla/<split>/, npz/layout/<source>/
# <search>/<split>/), made by `tpugraphs synth`, `ingest` and `export`, so every stage downstream
# (ingest, train-all-collections.sh, make-submission.sh) runs as on the release.
#
# Usage: tools/make-release-shaped.sh S OUT_DIR
#   S        scale of the graph counts, e.g. 0.05 (a 20th of the release), 1 (the release)
#   OUT_DIR  receives the tree under OUT_DIR/npz and shape.tsv (one line per graph: collection,
#            split, name, requested nodes, requested configs); scratch goes to OUT_DIR/.work
# Environment: TPUGRAPHS (binary), TPUGRAPHS_GLOBAL_FLAGS (e.g. "-j 2"), SEED (default 1),
#   MAX_CONFIGS (cap on the configurations of one graph or kernel, default none: for quick runs),
#   MAX_NODES (cap on the nodes of one layout graph, default none: for quick runs).
#
# Figures (docs/ beside the release; sources: the TpuGraphs paper, arXiv 2308.13490, Table 1; the
# per-file node and configuration counts printed in github thanhhau097/google_fast_or_slow
# data/eda.ipynb and github yamaguchi-milkcocholate/fast-or-slow-predic-ai-model-runtime
# group.ipynb, which agree file for file; split counts from github Bobksl/Predict-AI-Model-Runtime
# notebooks/01_eda.ipynb and a final submission's rows, github mattdeak/kaggle-fast-or-slow):
#
#   files per split (exact)   train  valid  test
#     tile:xla                5,709    676   844
#     layout:xla:random          69      7     8
#     layout:xla:default         61      7     8   (train a subset of xla:random train; valid and
#     layout:nlp:random         207     20    17    test the same graphs in both searches: here
#     layout:nlp:default        198     20    17    graph i of a source has one seed and size)
#
#   layout nodes per graph, mean / median / min / max (exact):
#     xla train 12,745 / 10,449 / 372 / 43,615 (xla:default train 12,911 / 10,092: the subset)
#     xla valid 12,797 / 12,067 / 3,163 / 21,664      xla test 23,561 / 24,077 / 490 / 43,615
#     nlp train  5,758 /  3,296 / 876 / 21,919
#     nlp valid  5,610 /  4,456 / 1,316 / 21,918      nlp test  4,513 /  3,036 / 1,096 / 21,918
#   layout configurations per graph (rows of config_runtime), mean / median / min / max (exact):
#     xla:random  train 14,579 /  8,368 /     20 / 100,040   valid  8,544 /  5,704 /    481 / 19,040
#     xla:default train 17,159 / 10,528 /  1,159 / 100,040   valid  9,432 /  6,120 /  1,965 / 19,232
#     nlp:random  train 65,012 / 67,000 / 11,098 / 100,040   valid 68,731 / 69,680 / 10,750 / 100,040
#     nlp:default train 64,505 / 67,832 / 11,296 / 100,040   valid 70,069 / 73,760 / 11,168 / 100,040
#     every test graph: 1,000
#   configurable nodes: 20 to 3,143 per graph (nlp test graphs: mean 188, median 120; a
#     5,673-node xla graph 166, a 40,332-node one 2,251): about 3 % of the nodes, which is what
#     synth makes (docs/synth.md: "about 3 % of the instructions are configurable"), so no
#     separate draw.
#   tile: 1,842 configurations per kernel on average (paper: 12.9 M samples over 6,988 kernels),
#     from about 8 to 6.9k; 40 nodes per kernel on average. The median is not published: ESTIMATE
#     1,100 (the middle of the published examples 266, 831, 1,370, 1,893). Synth's tile kernels
#     have the sizes its generator gives them (no node-count option) and at most the distinct
#     tile sizes a kernel admits, so a kernel may get fewer configurations than drawn;
#     shape.tsv holds what was asked, the stats of the ingested tree what was made.
#
# Draws: a figure with mean >= median is drawn log-normal with that median and mean
# (mu = ln median, sigma^2 = 2 ln(mean / median)); one with mean < median (a left-skewed figure,
# bunched at the 100,040-row cap) is drawn normal with that mean and ESTIMATED standard deviation
# (max - min) / 4; both clipped to [min, max]. The draws are seeded (SEED): the same S and SEED
# give the same tree.
set -euo pipefail

if [ $# -ne 2 ]; then
  sed -n '2,16p' "$0" >&2
  exit 2
fi
scale=$1
out=$2
case "$scale" in '' | *[!0-9.]* | *.*.*) echo "S must be a positive number, got '$scale'" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=tools/lib/tpugraphs-binary.sh
source "$here/tools/lib/tpugraphs-binary.sh"
bin=$(tpugraphs_binary)
read -r -a global <<<"${TPUGRAPHS_GLOBAL_FLAGS:-}"
seed=${SEED:-1}
max_configs=${MAX_CONFIGS:-0}
max_nodes=${MAX_NODES:-0}
work=$out/.work
rm -rf "$work"
mkdir -p "$work" "$out"
shape=$out/shape.tsv
printf 'collection\tsplit\tname\tnodes\tconfigs\n' >"$shape"

# count N: round(S * N), at least 1 when N > 0.
count() { awk -v s="$scale" -v n="$1" 'BEGIN { c = int(s * n + 0.5); if (n > 0 && c < 1) c = 1; print c }'; }

# draw K SEED MEAN MEDIAN MIN MAX: K integers, one per line, from the distribution above.
# The uniform numbers come from the Park-Miller generator (x <- 16807 x mod 2^31 - 1; every
# product is below 2^46, exact in awk's doubles), not from awk's rand(), whose sequence differs
# between awks (gawk, mawk, busybox): the same S and SEED give the same tree with any of them.
draw() {
  awk -v k="$1" -v seed="$2" -v mean="$3" -v med="$4" -v lo="$5" -v hi="$6" '
  function uniform() { x = (16807 * x) % 2147483647; return x / 2147483647 }
  BEGIN {
    x = (seed % 2147483646) + 1
    for (i = 0; i < 8; i++) uniform()  # move away from small seeds
    for (i = 0; i < k; i++) {
      # Box-Muller normal deviate.
      u1 = uniform(); if (u1 < 1e-12) u1 = 1e-12
      z = sqrt(-2 * log(u1)) * cos(6.283185307179586 * uniform())
      if (mean >= med) v = exp(log(med) + sqrt(2 * log(mean / med)) * z)
      else v = mean + (hi - lo) / 4 * z
      v = int(v + 0.5)
      if (v < lo) v = lo
      if (v > hi) v = hi
      print v
    }
  }'
}

# ingest_export DIR COLLECTION SPLIT: the pb files of DIR into the release tree.
ingest_export() {
  local dir=$1 collection=$2 split=$3
  local data=$work/${collection//:/_}.$split.tpug
  "$bin" "${global[@]}" -q ingest "$dir" --collection "$collection" --split "$split" \
    -o "$data" >/dev/null </dev/null
  "$bin" "${global[@]}" -q export "$data" -o "$out" >/dev/null </dev/null
  rm -f "$data"
}

echo "== tile:xla at S=$scale" >&2
tile_seed=$((seed * 1000))
for split_counts in "train 5709 1" "valid 676 2" "test 844 3"; do
  read -r split n split_index <<<"$split_counts"
  k=$(count "$n")
  # Kernels in batches of up to 8, each batch one synth run with one drawn configuration count.
  dir=$work/tile/$split
  mkdir -p "$dir"
  batch=0
  left=$k
  mapfile -t configs < <(draw $(((k + 7) / 8)) $((tile_seed + split_index)) 1842 1100 8 6900)
  while [ "$left" -gt 0 ]; do
    g=$((left < 8 ? left : 8))
    c=${configs[$batch]}
    if [ "$max_configs" -gt 0 ] && [ "$c" -gt "$max_configs" ]; then c=$max_configs; fi
    raw=$work/raw
    rm -rf "$raw"
    "$bin" "${global[@]}" -q synth --task tile --graphs "$g" --configs "$c" --error-rate 0 \
      --seed $((tile_seed + 100 * split_index + batch)) --output "$raw" >/dev/null </dev/null
    for f in "$raw"/pb/tile/synth/train/*.pb; do
      stem=$(basename "$f" .pb)
      mv "$f" "$dir/${split}_b${batch}_$stem.pb"
      printf 'tile:xla\t%s\t%s\t-\t%s\n' "$split" "${split}_b${batch}_$stem" "$c" >>"$shape"
    done
    left=$((left - g))
    batch=$((batch + 1))
  done
  ingest_export "$dir" tile:xla "$split"
  echo "   $split: $k kernels" >&2
done

# layout_source SOURCE: both searches of one source.
#   per split: release counts (random, default), node figures; per search and split: configs.
layout_source() {
  local source=$1 source_index=$2
  local split_index=0
  local split n_random n_default nodes_fig cfg_random cfg_default
  while read -r split n_random n_default nodes_fig cfg_random cfg_default; do
    [ -n "$split" ] || continue
    split_index=$((split_index + 1))
    local k_random k_default k
    k_random=$(count "$n_random")
    k_default=$(count "$n_default")
    k=$((k_random > k_default ? k_random : k_default))
    local sseed=$((seed * 1000 + source_index * 10 + split_index))
    # shellcheck disable=SC2086
    mapfile -t nodes < <(draw "$k" "$sseed" ${nodes_fig//,/ })
    local search count_s cfg_fig
    for search in random default; do
      local search_offset=100
      if [ "$search" = random ]; then
        count_s=$k_random cfg_fig=$cfg_random
      else
        count_s=$k_default cfg_fig=$cfg_default search_offset=200
      fi
      local collection=layout:$source:$search
      local dir=$work/layout/$source/$search/$split
      mkdir -p "$dir"
      local configs=()
      if [ "$cfg_fig" = 1000 ]; then
        for ((i = 0; i < count_s; i++)); do configs+=(1000); done
      else
        # shellcheck disable=SC2086
        mapfile -t configs < <(draw "$count_s" $((sseed + search_offset)) ${cfg_fig//,/ })
      fi
      for ((i = 0; i < count_s; i++)); do
        local nn=${nodes[$i]} cc=${configs[$i]}
        if [ "$max_nodes" -gt 0 ] && [ "$nn" -gt "$max_nodes" ]; then nn=$max_nodes; fi
        if [ "$max_configs" -gt 0 ] && [ "$cc" -gt "$max_configs" ]; then cc=$max_configs; fi
        local raw=$work/raw name
        name=$(printf '%s_%s_%03d' "$source" "$split" "$i")
        rm -rf "$raw"
        # Graph i of a source and split: the same program in both searches (same seed and size).
        "$bin" "${global[@]}" -q synth --task layout --graphs 1 --nodes "$nn" --configs "$cc" \
          --search "$search" --error-rate 0 --seed $((sseed * 1000 + i)) --output "$raw" >/dev/null </dev/null
        mv "$raw"/pb/layout/synth/"$search"/train/program_00000.pb "$dir/$name.pb"
        printf '%s\t%s\t%s\t%s\t%s\n' "$collection" "$split" "$name" "$nn" "$cc" >>"$shape"
      done
      if [ "$count_s" -gt 0 ]; then ingest_export "$dir" "$collection" "$split"; fi
      echo "== $collection $split: $count_s graphs" >&2
    done
  done
}

# split  random  default  nodes(mean,median,min,max)  configs random  configs default
layout_source xla 1 <<'EOF'
train 69 61 12745,10449,372,43615 14579,8368,20,100040 17159,10528,1159,100040
valid 7 7 12797,12067,3163,21664 8544,5704,481,19040 9432,6120,1965,19232
test 8 8 23561,24077,490,43615 1000 1000
EOF
layout_source nlp 2 <<'EOF'
train 207 198 5758,3296,876,21919 65012,67000,11098,100040 64505,67832,11296,100040
valid 20 20 5610,4456,1316,21918 68731,69680,10750,100040 70069,73760,11168,100040
test 17 17 4513,3036,1096,21918 1000 1000
EOF

rm -rf "$work"
echo "== wrote $out/npz ($(du -sh "$out/npz" | cut -f1)); shape in $shape" >&2
