#!/usr/bin/env bash
# A measurer for the closed loop of `tpugraphs tune` on real hardware (docs/tune.md, "Closing the
# loop"), a template to adapt:
#
#   tpugraphs tune --data prog.hlo --model layout.tpm --measure 10 --rounds 3 \
#     --measure-cmd 'RUN_HLO=my-runner tools/examples/measure-hlo.sh prog.hlo {}' \
#     --measurements prog.measured.tsv -o best.npz --emit-hlo best/
#
# Usage: measure-hlo.sh PROGRAM.hlo BATCH.npz
#   1. Applies every configuration of BATCH.npz (what the loop writes: the release encoding) to
#      the program: `tpugraphs tune --apply BATCH.npz --emit-hlo DIR` writes one HLO text module
#      per configuration, DIR/<graph>.<index>.hlo, with that configuration's layouts (and the
#      entry computation layout to match).
#   2. Runs each module with $RUN_HLO (called as `$RUN_HLO FILE.hlo`): once untimed (compiling,
#      warming up), then $REPEATS times (default 3), and takes the median.
#   3. Prints what the loop reads on stdout: a header, then one line per configuration,
#        index<TAB>runtime
#      every index of the batch exactly once, each runtime a finite number > 0 in one unit for
#      all lines (seconds here). Lines that do not start with an integer are ignored. Anything
#      else goes to stderr; a failure exits non-zero, and the loop keeps what it measured before.
#
# RUN_HLO is yours to give: the command that compiles and runs one HLO text module on the
# hardware being tuned for (for instance a wrapper around XLA's run_hlo_module, or a JAX script
# that loads the module). By default the script times the whole command with the shell's clock;
# with TIME_FROM=output, the last line RUN_HLO prints must be the runtime itself (a device timer
# is better than wall time, which includes launching the process).
# TPUGRAPHS: the tpugraphs binary (default: found as tools/lib/tpugraphs-binary.sh finds it).
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 PROGRAM.hlo BATCH.npz (with RUN_HLO set; see the comments)" >&2
  exit 2
fi
program=$1
batch=$2
if [ -z "${RUN_HLO:-}" ]; then
  echo "$0: set RUN_HLO to the command that runs one HLO text module on your hardware" >&2
  exit 2
fi
repeats=${REPEATS:-3}
here=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tools/lib/tpugraphs-binary.sh
source "$here/tools/lib/tpugraphs-binary.sh"
TPUG=$(tpugraphs_binary)
work=$(mktemp -d "${TMPDIR:-/tmp}/measure-hlo-XXXXXX")
trap 'rm -rf "$work"' EXIT

"$TPUG" -q tune --data "$program" --apply "$batch" --emit-hlo "$work/hlo" \
  -o "$work/applied.npz" > /dev/null

# One run of $1, its runtime on stdout.
run_once() {
  local start end out
  if [ "${TIME_FROM:-wall}" = output ]; then
    out=$($RUN_HLO "$1")
    printf '%s\n' "$out" | tail -n 1
  else
    start=$(date +%s%N)
    $RUN_HLO "$1" > /dev/null
    end=$(date +%s%N)
    awk -v ns=$((end - start)) 'BEGIN { printf "%.9f\n", ns / 1e9 }'
  fi
}

echo -e "index\truntime"
for hlo in "$work"/hlo/*.hlo; do
  index=${hlo%.hlo}
  index=${index##*.}
  $RUN_HLO "$hlo" > /dev/null  # compile and warm up, untimed
  for ((r = 0; r < repeats; r++)); do run_once "$hlo"; done |
    sort -g | awk -v i="$index" '{ t[NR] = $1 } END {
      m = (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2
      printf "%d\t%s\n", i, m }'
done
