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
#   Flags go before or after the paths; one the script does not take is refused (exit 2) before
#   anything is written.
#   S         scale of the graph counts (tools/make-release-shaped.sh), e.g. 0.05
#   WORK_DIR  default /tmp/bench-release-S; holds tree/ (reused when present: delete it to
#             redraw), out/ (datasets, models, submission; cleared first) and times.tsv (one line
#             per process: wall_s, user_s, sys_s, max_rss_kib, command, collection)
#   A run ends with a second table: per collection its measured wall time against the
#   projection of the same tree (its shape.tsv), with the recipe's epochs and with the epochs
#   the run took (`tools/release compare`; WORK_DIR/compare.json).
#   --project  instead of a run, `tools/release project` (its --help has every flag and the
#             PROJECTION_* / FRONTIER_* settings it reads): measure on this machine, on small
#             synthetic datasets of the release's mean graph sizes, a training step of each
#             recipe, a validation graph per epoch, evaluate's and ingest's cost per
#             configuration and the peak RSS, and project every collection of the full release
#             (S = 1; about 4 minutes on 2 cores). A table, or with --json one JSON object;
#             WORK_DIR default /tmp/bench-release-project (keeps measurements.json).
#             --frontier also projects every variant of tools/configs/frontier-variants.tsv;
#             --hours H plans the release for H hours (docs/train.md, "Quality per hour"): exit
#             2, with the smallest H that fits, when nothing fits. Both keep their measurements
#             per machine in PROJECTION_CACHE (default ~/.cache/tpugraphs/projection).
# Environment: TPUGRAPHS (binary), TPUGRAPHS_GLOBAL_FLAGS (e.g. "-j 2"; default: all cores),
#   BENCH_TRAIN_FLAGS (extra train flags, for tests only: the figures are then not the recipes'),
#   MAX_CONFIGS / MAX_NODES (passed to make-release-shaped.sh, for tests only),
#   COLLECTIONS (a run only, e.g. "tile:xla layout:xla:random"): run and compare only these
#   collections of the tree (the others are left out of every stage, the table and the
#   projection), so that a run too long for one sitting can be taken a collection at a time;
#   PROJECTION_MEASUREMENTS (the measurements.json of a --project run): the closing comparison
#   uses them instead of measuring again (4 minutes on 2 cores).
set -euo pipefail

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; }  # the header above
here=$(cd "$(dirname "$0")/.." && pwd)
# --project anywhere: the rest, in any order, are the projection's flags (tools/release project
# checks them, refusing what it does not know, and reads the PROJECTION_* / FRONTIER_* settings).
for a in "$@"; do
  if [ "$a" = --project ]; then
    rest=()
    for b in "$@"; do [ "$b" = --project ] || rest+=("$b"); done
    exec /usr/bin/python3 "$here/tools/release" project "${rest[@]}"
  fi
done
for a in "$@"; do
  case "$a" in
    -h | --help) usage; exit 0 ;;
    -*) echo "bench-release.sh: unknown flag '$a' (a run takes S [WORK_DIR]; --help)" >&2; exit 2 ;;
  esac
done
[ $# -ge 1 ] && [ $# -le 2 ] || { usage >&2; exit 2; }
scale=$1
work=${2:-/tmp/bench-release-$scale}
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

# Measured against projected: the projection (tools/release project) of this tree's
# graph and row counts, from the measurements of PROJECTION_MEASUREMENTS (a measurements.json
# that `--project WORK` left) or measured now; per collection the wall time of its processes
# (ingest, train, evaluate, predict) against the projected hours, and against the projection
# with the epochs each training ran (a recipe with patience stops early; compare.json has both).
echo "== projection of this tree" >&2
PROJECTION_SET= /usr/bin/python3 "$here/tools/release" project --binary "$bin" --work "$work/project" \
  --tree "$tree" --json >"$work/projection.json" 2>"$work/projection.err" ||
  { tail -20 "$work/projection.err" >&2; exit 1; }
echo
/usr/bin/python3 "$here/tools/release" compare "$times" "$work/projection.json" "$out" \
  "$work/compare.json"
