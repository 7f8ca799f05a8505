#!/usr/bin/env bash
# Writes a synthetic release tree with the shape of the TpuGraphs release ("Fast or Slow?" Kaggle
# files) at scale S: the number of train/valid/test graphs of every collection times S (rounded,
# at least 1 where the release has any), and per graph a node count and a configuration count
# drawn from the release's published distributions (graph sizes and configuration counts are NOT
# scaled). The tree is the release's npz layout (npz/tile/xla/<split>/, npz/layout/<source>/
# <search>/<split>/), made by `tpugraphs synth --release-shaped`, so every stage downstream
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
# The figures, the draws and the file names are those of `tpugraphs synth --release-shaped S`
# (include/tpugraphs/synth/release_shaped.h, docs/synth.md "Release-shaped trees"; the figures
# come from ../shared/docs/release-shape.md): its draws use the project's seeded Rng, so the same
# S and SEED give a byte-identical tree on any machine. This script passes S, SEED, MAX_CONFIGS
# (--cap-configs) and MAX_NODES (--cap-nodes) to it and prints the graphs per collection and
# split to stderr.
set -euo pipefail

if [ $# -ne 2 ]; then
  sed -n '2,16p' "$0" >&2
  exit 2
fi
scale=$1
out=$2
case "$scale" in '' | *[!0-9.]* | *.*.* | .) echo "S must be a positive number, got '$scale'" >&2; exit 2 ;; esac
case "$scale" in *[1-9]*) ;; *) echo "S must be a positive number, got '$scale'" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=tools/lib/tpugraphs-binary.sh
source "$here/tools/lib/tpugraphs-binary.sh"
bin=$(tpugraphs_binary)
read -r -a global <<<"${TPUGRAPHS_GLOBAL_FLAGS:-}"

echo "== release-shaped tree at S=$scale (seed ${SEED:-1})" >&2
"$bin" "${global[@]}" -q synth --release-shaped "$scale" --seed "${SEED:-1}" \
  --cap-configs "${MAX_CONFIGS:-0}" --cap-nodes "${MAX_NODES:-0}" --output "$out" </dev/null |
  while IFS=$'\t' read -r collection split graphs; do
    [ "$collection" = collection ] || echo "== $collection $split: $graphs graphs" >&2
  done
echo "== wrote $out/npz ($(du -sh "$out/npz" | cut -f1)); shape in $out/shape.tsv" >&2
