#!/usr/bin/env bash
# A user's own collection, tried as a user would: small programs made by `tpugraphs synth`
# (40 programs of 500-3,000 nodes with 300 configurations each, split 0.7 / 0.15 / 0.15 by
# default), the recipe for collections (tools/configs/layout-collection.textproto, trained on the
# training and validation programs) as `train --config` gives it, and its test Kendall on the unseen test programs (`evaluate --split test`), with the training's wall
# and CPU time. Several data seeds make several collections, so that enough test programs are
# judged (docs/train.md, "Quality on unseen programs").
#
# Usage: tools/bench/bench-user-collection.sh [options] [-- TRAIN_FLAGS...]
#   --data-seeds 1,2,3,4   synth seeds: one collection each (default 1,2,3,4: 24 test programs)
#   --seeds 1              training seeds (default 1)
#   --graphs N --min-nodes N --max-nodes N --configs N   the collection (defaults 40, 500, 3000,
#                          300)
#   --recipe NAME          the recipe file in tools/configs (default layout-collection)
#   --work DIR             keep the collections, models and logs here (default: a temporary
#                          directory, removed at the end); a collection already made is reused
#   TRAIN_FLAGS            appended to the recipe (e.g. -- --layout-rank-aware true)
# Environment: TPUGRAPHS (the binary), TPUGRAPHS_GLOBAL_FLAGS (e.g. "-j 2").
# Output (stdout): one TSV line per (data seed, seed): data_seed, seed, test_graphs,
# test_kendall, train_wall_s, train_cpu_s; then "mean" lines: the Kendall weighted by test
# programs over every line, its standard deviation over the lines, the mean wall and CPU time.
# The machine and its load are printed first (stderr); logs go to stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tools/lib/bench-machine.sh
source "$here/tools/lib/bench-machine.sh"
# shellcheck source=tools/lib/tpugraphs-binary.sh
source "$here/tools/lib/tpugraphs-binary.sh"
py=/usr/bin/python3
[ -x "$py" ] || py=python3

data_seeds=1,2,3,4 seeds=1 graphs=40 min_nodes=500 max_nodes=3000 configs=300 recipe=layout-collection
work=""
usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --data-seeds) data_seeds=${2:?--data-seeds needs a value}; shift 2 ;;
    --seeds) seeds=${2:?--seeds needs a value}; shift 2 ;;
    --graphs) graphs=${2:?--graphs needs a value}; shift 2 ;;
    --min-nodes) min_nodes=${2:?--min-nodes needs a value}; shift 2 ;;
    --max-nodes) max_nodes=${2:?--max-nodes needs a value}; shift 2 ;;
    --configs) configs=${2:?--configs needs a value}; shift 2 ;;
    --recipe) recipe=${2:?--recipe needs a value}; shift 2 ;;
    --work) work=${2:?--work needs a value}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; break ;;
    *) echo "bench-user-collection: unknown option '$1' (--help lists them)" >&2; exit 2 ;;
  esac
done
train_flags=("$@")
for list in "$data_seeds" "$seeds"; do
  [[ "$list" =~ ^[0-9]+(,[0-9]+)*$ ]] ||
    { echo "bench-user-collection: seeds are comma-separated integers, not '$list'" >&2; exit 2; }
done
for n in "$graphs" "$min_nodes" "$max_nodes" "$configs"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] ||
    { echo "bench-user-collection: sizes are positive integers, not '$n'" >&2; exit 2; }
done
config="$here/tools/configs/$recipe.textproto"
[ -f "$config" ] || { echo "bench-user-collection: no recipe $config" >&2; exit 2; }
bin=$(tpugraphs_binary)
read -r -a global <<<"${TPUGRAPHS_GLOBAL_FLAGS:-}"
if [ -z "$work" ]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/bench-user-collection.XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"
bench_machine_header >&2

lines="$work/lines.tsv"
: >"$lines"
echo -e "data_seed\tseed\ttest_graphs\ttest_kendall\ttrain_wall_s\ttrain_cpu_s"
IFS=, read -r -a dseeds <<<"$data_seeds"
IFS=, read -r -a tseeds <<<"$seeds"
for d in "${dseeds[@]}"; do
  dir="$work/collection-$d"
  if [ ! -f "$dir/data.tpug" ]; then
    rm -rf "$dir" && mkdir -p "$dir"
    "$bin" "${global[@]}" -q synth --graphs "$graphs" --min-nodes "$min_nodes" \
      --max-nodes "$max_nodes" --configs "$configs" --splits 0.7,0.15,0.15 --seed "$d" \
      -o "$dir/raw" >"$dir/synth.log" 2>&1 ||
      { cat "$dir/synth.log" >&2; echo "bench-user-collection: synth failed" >&2; exit 1; }
    "$bin" "${global[@]}" -q ingest "$dir/raw" -o "$dir/data.tpug" >"$dir/ingest.log" 2>&1 ||
      { cat "$dir/ingest.log" >&2; echo "bench-user-collection: ingest failed" >&2; exit 1; }
  fi
  for s in "${tseeds[@]}"; do
    model="$dir/seed$s.tpm"
    echo "bench-user-collection: collection $d, seed $s: train ${train_flags[*]}" >&2
    start=$(date +%s.%N)
    cpu_file="$dir/seed$s.cpu"
    /usr/bin/time -f "%U %S" -o "$cpu_file" "$bin" "${global[@]}" -q train --config "$config" \
      --dataset "$dir/data.tpug" --seed "$s" --output "$model" "${train_flags[@]}" \
      >"$dir/seed$s.out" 2>"$dir/seed$s.log" ||
      { tail -5 "$dir/seed$s.log" >&2; echo "bench-user-collection: train failed" >&2; exit 1; }
    wall=$("$py" -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" \
      "$start" "$(date +%s.%N)")
    cpu=$(awk '{printf "%.1f", $1 + $2}' "$cpu_file")
    "$bin" "${global[@]}" -q evaluate --data "$dir/data.tpug" --model "$model" --split test \
      --json >"$dir/seed$s.eval.json" 2>"$dir/seed$s.eval.log" ||
      { cat "$dir/seed$s.eval.log" >&2; echo "bench-user-collection: evaluate failed" >&2; exit 1; }
    "$py" - "$dir/seed$s.eval.json" "$d" "$s" "$wall" "$cpu" <<'PY' | tee -a "$lines"
import json, sys
e = json.load(open(sys.argv[1]))
c = e["collections"][0]
print("%s\t%s\t%d\t%.4f\t%s\t%s" % (sys.argv[2], sys.argv[3], c["graphs"], c["kendall_tau"],
                                    sys.argv[4], sys.argv[5]))
PY
  done
done
"$py" - "$lines" <<'PY'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines() if l]
graphs = [int(r[2]) for r in rows]
tau = [float(r[3]) for r in rows]
mean = sum(g * t for g, t in zip(graphs, tau)) / sum(graphs)
sd = statistics.stdev(tau) if len(tau) > 1 else 0.0
print("mean\tlines=%d\ttest_graphs=%d\ttest_kendall=%.4f\tsd=%.4f\ttrain_wall_s=%.1f\ttrain_cpu_s=%.1f"
      % (len(rows), sum(graphs), mean, sd, statistics.mean(float(r[4]) for r in rows),
         statistics.mean(float(r[5]) for r in rows)))
PY
bench_machine_footer >&2
