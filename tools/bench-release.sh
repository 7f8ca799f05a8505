#!/usr/bin/env bash
# The release workflow at scale S, measured: writes a release-shaped tree with
# tools/make-release-shaped.sh S, then runs `tpugraphs ingest` per collection,
# tools/train-all-collections.sh (the documented recipes, no flags) and tools/make-submission.sh,
# and prints per stage and collection the wall time, CPU time (user + system), peak RSS and bytes
# on disk. Every `tpugraphs` process of the scripts runs under GNU time (/usr/bin/time, Debian
# package `time`); a stage's figures sum the times of its processes and take the largest RSS.
# Bytes on disk: ingest, the dataset (.tpug); train, the model; evaluate, the metrics; predict,
# the collection's CSV; make-tree, the release tree's npz/ (written only when WORK_DIR/tree is
# not there yet).
#
# Usage: tools/bench-release.sh S [WORK_DIR]
#        tools/bench-release.sh --project [--json] [--frontier] [--hours H] [WORK_DIR]
#   --project  instead of a run: measure on this machine, on small synthetic datasets whose
#             graphs have the release's mean sizes, a training step of each recipe the workflow
#             picks, a validation graph per epoch, evaluate's and ingest's cost per configuration
#             and the peak RSS, and project every collection of the full release (S = 1): steps,
#             train/valid/eval/ingest hours, peak RSS (tools/lib/release_projection.py; about
#             4 minutes on 2 cores). A table on stdout, or with --json one JSON object;
#             WORK_DIR default /tmp/bench-release-project (keeps measurements.json).
#   A run (S) ends with a second table: per collection its measured wall time against the
#   projection of the same tree (graph and configuration counts and node counts per split from
#   its shape.tsv and tile files), with the recipe's epochs and with the epochs the run took
#   (tools/lib/release_compare.py; WORK_DIR/compare.json).
#   S         scale of the graph counts (tools/make-release-shaped.sh), e.g. 0.05
#   WORK_DIR  default /tmp/bench-release-S; holds tree/ (reused when present: delete it to
#             redraw), out/ (datasets, models, submission; cleared first) and times.tsv (one line
#             per process: wall_s, user_s, sys_s, max_rss_kib, command, collection)
# Environment: TPUGRAPHS (binary), TPUGRAPHS_GLOBAL_FLAGS (e.g. "-j 2"; default: all cores),
#   BENCH_TRAIN_FLAGS (extra train flags, for tests only: the figures are then not the recipes'),
#   MAX_CONFIGS / MAX_NODES (passed to make-release-shaped.sh, for tests only),
#   COLLECTIONS (a run only, e.g. "tile:xla layout:xla:random"): run and compare only these
#   collections of the tree (the others are left out of every stage, the table and the
#   projection), so that a run too long for one sitting can be taken a collection at a time;
#   PROJECT_FIXTURE_NODES / PROJECT_FIXTURE_CONFIGS / PROJECT_STEPS ("20 120": the step counts
#   timed) shrink --project's measurements, for tests only; PROJECTION_MEASUREMENTS (the
#   measurements.json of a --project run): the closing comparison of a run with its projection
#   uses them instead of measuring again (4 minutes on 2 cores); with --project, the projection
#   is made from them at once. PROJECTION_SET (--project only, e.g. "layout-large.epochs=100
#   layout-large.min_config_passes=0.3"): project as if the recipes had these budget fields
#   (epochs, min_config_passes, ensemble_members, valid_every_epochs, valid_max_configs: they
#   change how many steps and validations a run takes, not their cost).
#        tools/bench-release.sh --project --frontier [--json] [WORK_DIR]
#   also projects every variant of tools/configs/frontier-variants.tsv on the collections of its
#   fixture (JSON: "frontier", one row per variant and collection); a variant whose flags change
#   a step's cost is measured (a minute or two each on 2 cores).
#        tools/bench-release.sh --project --hours H [--json] [WORK_DIR]
#   plans the full release for H hours: per collection the frontier variant with the best test
#   Kendall measured (tools/configs/frontier-results.jsonl, FRONTIER_RESULTS) whose projected
#   hours fit H in all (tools/lib/release_plan.py); prints the projection of the chosen recipes,
#   with "budget_hours", "plan" and per collection "chosen" and "kendall" in the JSON. Exits 2,
#   with the smallest H that fits, when not even the cheapest variants fit.
#   --frontier and --hours keep their measurements per machine in PROJECTION_CACHE (default
#   ~/.cache/tpugraphs/projection/KEY, KEY from the binary, the recipes, the CPU and its cores,
#   and the version of the measuring method)
#   and reuse them until one of these changes.
set -euo pipefail

if [ "${1:-}" = --project ]; then
  shift
  here=$(cd "$(dirname "$0")/.." && pwd)
  extra=()
  work=/tmp/bench-release-project
  cache=
  while [ $# -gt 0 ]; do
    case "$1" in
      --json) extra+=(--json) ;;
      --frontier) extra+=(--frontier "${FRONTIER_VARIANTS:-$here/tools/configs/frontier-variants.tsv}"); cache=1 ;;
      --hours)
        [ $# -ge 2 ] || { echo "--hours needs a number of hours" >&2; exit 2; }
        [[ "$2" =~ ^[0-9]+([.][0-9]+)?$ ]] && [ "$2" != 0 ] ||
          { echo "--hours: want a number of hours > 0, got '$2'" >&2; exit 2; }
        extra+=(--hours "$2"); cache=1; shift ;;
      -*) sed -n '2,56p' "$0" >&2; exit 2 ;;
      *) work=$1 ;;
    esac
    shift
  done
  # shellcheck source=tools/lib/tpugraphs-binary.sh
  source "$here/tools/lib/tpugraphs-binary.sh"
  bin=$(tpugraphs_binary)
  [ -n "${PROJECTION_MEASUREMENTS:-}" ] && extra+=(--measurements "$PROJECTION_MEASUREMENTS")
  [ -n "$cache" ] && extra+=(--cache "${PROJECTION_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tpugraphs/projection}")
  [ -n "${FRONTIER_RESULTS:-}" ] && extra+=(--results "$FRONTIER_RESULTS")
  [ -n "${FRONTIER_VARIANTS:-}" ] && extra+=(--frontier "$FRONTIER_VARIANTS")
  for s in ${PROJECTION_SET:-}; do extra+=(--set "$s"); done
  exec /usr/bin/python3 "$here/tools/lib/release_projection.py" --binary "$bin" \
    --work "$work" "${extra[@]}"
fi
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  sed -n '2,56p' "$0" >&2
  exit 2
fi
scale=$1
work=${2:-/tmp/bench-release-$scale}
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=tools/lib/bench-machine.sh
source "$here/tools/lib/bench-machine.sh"
# shellcheck source=tools/lib/tpugraphs-binary.sh
source "$here/tools/lib/tpugraphs-binary.sh"
bin=$(tpugraphs_binary)
[ -x /usr/bin/time ] || { echo "bench-release.sh needs GNU time (apt-get install time)" >&2; exit 1; }
mkdir -p "$work"
work=$(cd "$work" && pwd)
tree=$work/tree
whole_tree=$tree
out=$work/out
times=$work/times.tsv
read -r -a global <<<"${TPUGRAPHS_GLOBAL_FLAGS:-}"
read -r -a train_flags <<<"${BENCH_TRAIN_FLAGS:-}"

# Every tpugraphs process under GNU time: one line per process in $times.
wrapper=$work/tpugraphs-timed
cat >"$wrapper" <<EOF
#!/usr/bin/env bash
# tpugraphs under GNU time (written by tools/bench-release.sh).
command=-
collection=-
prev=
for a in "\$@"; do
  case "\$a" in
    ingest | train | evaluate | predict | export | synth | stats) [ "\$command" = - ] && command=\$a ;;
    --merge) command=merge ;;
  esac
  [ "\$prev" = --collection ] && collection=\$a
  prev=\$a
done
t=\$(mktemp)
rc=0
/usr/bin/time -o "\$t" -f '%e\t%U\t%S\t%M' "$bin" "\$@" || rc=\$?
printf '%s\t%s\t%s\n' "\$(tail -1 "\$t")" "\$command" "\$collection" >>"$times"
rm -f "\$t"
exit \$rc
EOF
chmod +x "$wrapper"
export TPUGRAPHS=$wrapper

bench_machine_header
: >"$times"
if [ ! -d "$tree/npz" ]; then
  echo "== make-release-shaped.sh $scale $tree" >&2
  bash "$here/tools/make-release-shaped.sh" "$scale" "$tree"
  sed -i 's/\tsynth\t-$/\tsynth\ttree/; s/\tingest\t\([^\t]*\)$/\tsynth-ingest\t\1/; s/\texport\t-$/\tsynth-export\ttree/' "$times"
fi
rm -rf "$out"
mkdir -p "$out"

# shellcheck source=tools/release-collections.sh
source "$here/tools/release-collections.sh"
# COLLECTIONS: a view of the tree holding only those collections (links to their directories)
# and their lines of shape.tsv; every stage below then runs on the view.
if [ -n "${COLLECTIONS:-}" ]; then
  view=$work/tree-view
  rm -rf "$view"
  mkdir -p "$view"
  head -1 "$tree/shape.tsv" >"$view/shape.tsv"
  for want in $COLLECTIONS; do
    found=
    for entry in "${release_collections[@]}"; do
      read -r name collection sub <<<"$entry"
      [ "$collection" = "$want" ] || continue
      found=1
      [ -d "$tree/$sub" ] || { echo "COLLECTIONS: $want is not in $tree" >&2; exit 2; }
      mkdir -p "$(dirname "$view/$sub")"
      ln -s "$tree/$sub" "$view/$sub"
      awk -F'\t' -v c="$want" 'NR > 1 && $1 == c' "$tree/shape.tsv" >>"$view/shape.tsv"
    done
    [ -n "$found" ] || {
      echo "COLLECTIONS: unknown collection '$want' (tile:xla, layout:{xla,nlp}:{random,default})" >&2
      exit 2
    }
  done
  echo "== only $COLLECTIONS" >&2
  tree=$view
fi
for entry in "${release_collections[@]}"; do
  read -r name collection sub <<<"$entry"
  [ -d "$tree/$sub" ] || continue
  echo "== ingest $collection" >&2
  "$wrapper" "${global[@]}" -q ingest "$tree/$sub" --collection "$collection" -o "$out/$name.tpug"
done
echo "== train-all-collections.sh" >&2
bash "$here/tools/train-all-collections.sh" "$tree" "$out" "${train_flags[@]}" >"$work/train-all.out" \
  2>"$work/train-all.err" || { tail -20 "$work/train-all.err" >&2; exit 1; }
echo "== make-submission.sh" >&2
bash "$here/tools/make-submission.sh" "$out" "$out/submission.csv" 2>"$work/submission.err" ||
  { tail -20 "$work/submission.err" >&2; exit 1; }

# The table: per stage and collection, then per stage.
bytes() { if [ -e "$1" ]; then du -sb "$1" | cut -f1; else echo 0; fi; }
echo
printf '%-12s %-20s %6s %10s %10s %11s %14s\n' stage collection procs wall_s cpu_s peak_rss_MiB bytes_on_disk
for entry in "${release_collections[@]}"; do
  read -r name collection sub <<<"$entry"
  for stage in ingest train evaluate predict; do
    case $stage in
      ingest) disk=$(bytes "$out/$name.tpug") ;;
      train) disk=$(($(bytes "$out/$name.tpm") + 0)) ;;
      evaluate) disk=$(bytes "$out/$name.valid.json") ;;
      predict) disk=$(bytes "$out/$name.test.csv") ;;
    esac
    awk -F'\t' -v s="$stage" -v c="$collection" -v d="$disk" '
      $5 == s && $6 == c { n++; w += $1; cpu += $2 + $3; if ($4 > r) r = $4 }
      END { if (n) printf "%-12s %-20s %6d %10.1f %10.1f %11.1f %14d\n", s, c, n, w, cpu, r / 1024, d }' "$times"
  done
done
awk -F'\t' -v d="$(bytes "$whole_tree/npz")" '$6 == "tree" || $5 ~ /^synth/ { n++; w += $1; cpu += $2 + $3; if ($4 > r) r = $4 }
  END { if (n) printf "%-12s %-20s %6d %10.1f %10.1f %11.1f %14d\n", "make-tree", "all", n, w, cpu, r / 1024, d }' "$times"
for stage in ingest train evaluate predict merge; do
  awk -F'\t' -v s="$stage" '$5 == s { n++; w += $1; cpu += $2 + $3; if ($4 > r) r = $4 }
    END { if (n) printf "%-12s %-20s %6d %10.1f %10.1f %11.1f\n", s, "all", n, w, cpu, r / 1024 }' "$times"
done
echo "submission: $(($(wc -l <"$out/submission.csv") - 1)) rows; notes: $(tr '\n' ';' 2>/dev/null <"$out/notes.txt")"
bench_machine_footer

# Measured against projected: the projection (tools/lib/release_projection.py) of this tree's
# graph and row counts, from the measurements of PROJECTION_MEASUREMENTS (a measurements.json
# that `--project WORK` left) or measured now; per collection the wall time of its processes
# (ingest, train, evaluate, predict) against the projected hours, and against the projection
# with the epochs each training ran (a recipe with patience stops early; compare.json has both).
proj=(--tree "$tree" --json)
[ -n "${PROJECTION_MEASUREMENTS:-}" ] && proj+=(--measurements "$PROJECTION_MEASUREMENTS")
echo "== projection of this tree" >&2
/usr/bin/python3 "$here/tools/lib/release_projection.py" --binary "$bin" --work "$work/project" \
  "${proj[@]}" >"$work/projection.json" 2>"$work/projection.err" ||
  { tail -20 "$work/projection.err" >&2; exit 1; }
echo
/usr/bin/python3 "$here/tools/lib/release_compare.py" "$times" "$work/projection.json" "$out" \
  "$work/compare.json"
