#!/usr/bin/env bash
# The quality-per-hour frontier (docs/train.md, "Quality per hour"): test Kendall of every recipe
# variant of tools/configs/frontier-variants.tsv on its fixture's unseen test programs, 3 seeds
# each, appended one JSON line per (variant, seed) to docs/frontier/results.jsonl.
#
# Usage: tools/bench/bench-frontier.sh run [--fixture nlp|xla|tile] [--variant NAME]...
#            [--seeds 1,2,3] [--minutes M] [--work DIR] [--results FILE]
#        tools/bench/bench-frontier.sh single [--variant NAME]... [--seeds 1,2,3] [--npz FILE]
#            [--torch SCRIPT]
#        tools/bench/bench-frontier.sh table [--projection FILE] [--svg FILE] [--results FILE]
#        tools/bench/bench-frontier.sh summary [--results FILE]
#   run      trains and evaluates the (variant, seed) pairs the results file lacks, seed by seed
#            over the variants; hours on 2 cores per nlp seed. --minutes M stops after M minutes
#            (exit 3): the same command continues, an interrupted training from its checkpoint.
#            Killed at any moment, nothing is lost but the training since its last checkpoint
#            (30 s); a signal to the script stops its training first, and a second run of a
#            (variant, seed) whose training is still going is refused. The work directory
#            (default out/frontier) keeps the fixtures, the models, a copy of the binary taken
#            at the first run (a rebuild changes nothing under a run that goes on) and each
#            training's log.
#   single   one graph's held-out configurations (30 %): the variants of fixture single on the
#            release's U-Net file, and the plain PyTorch GNN (../shared/tools/
#            plain_torch_layout_gnn.py when there, else tools/reference/plain_gnn_reference.py)
#            in the same run, with OpenBLAS at its best; wall and CPU time per seed and the load
#            before each run, since time is the figure here: run it alone on an idle machine.
#   table    the markdown table (per variant: seeds, test Kendall per seed, mean, the difference
#            to the recipe and, with --projection, the projected hours of the full release's
#            collections of its fixture, from tools/bench-release.sh --project --frontier
#            --json) and, with --svg, the plot of Kendall against hours.
#   summary  per variant the seeds and their mean Kendall, as JSON (what --hours plans with).
# Training is seeded and deterministic: a run's figures do not depend on the machine's load, so
# the runs may share the machine with other work. The hours come from the projection, measured
# on an idle machine.
# Environment: TPUGRAPHS (binary), TPUGRAPHS_GLOBAL_FLAGS is not read: --threads sets -j.
# The work is `tools/release frontier` (tools/release/frontier.py), which checks the flags.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
case "${1:-}" in
  run | single | table | summary) exec /usr/bin/python3 "$here/tools/release" frontier "$@" ;;
  *)
    awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" >&2
    exit 2 ;;
esac
