#!/usr/bin/env bash
# Data-parallel training on this machine: configs/s of `tpugraphs train` over a fixed number of
# steps on a synthetic layout collection, as
#   2 ranks x 1 thread   (mpirun -np 2, -j 1)
#   1 rank  x 2 threads  (-j 2)
#   1 rank  x 1 thread   (-j 1)
# and the time each step spends inside collectives (the trainer's "training loop:" line: the
# wall time inside distributed::Communicator's sums and gathers) next to the time each step waits for
# the slower rank (a barrier before them, measured with -v only); then the gradient sum
# (distributed::Communicator::OrderedSum) timed alone by tools/bench/mpi_ordered_sum.
# All three write the same model file (tests/mpi/); only the speed differs.
#
# Usage: tools/bench/bench-mpi.sh [EPOCHS]
#   (default 8 epochs of 4 steps, 4 graphs x 16 configs each)
# Env: BUILD_DIR (default build), GRAPHS (16), MIN_NODES (500), MAX_NODES (2000).
# Prints one line per setup and the load average before each run; needs an MPI build
# (TPUGRAPHS_MPI=ON) and mpirun. Results depend on what else runs on the machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
# shellcheck source=tools/lib/bench-machine.sh
source tools/lib/bench-machine.sh
here=$(pwd)
# shellcheck source=tools/lib/tpugraphs-binary.sh
source "$here/tools/lib/tpugraphs-binary.sh"
bin=$(tpugraphs_binary)   # the build being measured
epochs=${1:-8}
graphs=${GRAPHS:-16}
[ -x "$bin" ] || { echo "bench-mpi: $bin not built (bash tools/build.sh --target tpugraphs)" >&2; exit 1; }
if ! "$bin" --version | grep -q "MPI: [A-Z]"; then
  echo "bench-mpi: $bin was built without MPI (TPUGRAPHS_MPI=OFF)" >&2
  exit 1
fi
command -v mpirun >/dev/null || { echo "bench-mpi: mpirun not found (tools/install-deps.sh)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" -q synth --graphs "$graphs" --min-nodes "${MIN_NODES:-500}" --max-nodes "${MAX_NODES:-2000}" \
  --configs 64 --seed 3 -o "$work/raw" >/dev/null
"$bin" -q ingest "$work/raw" -o "$work/d.tpug" >/dev/null

# Fixed steps: no validation, no early stop; 16 graphs / 4 per step = 4 steps per epoch.
train_args=(train --dataset "$work/d.tpug" --valid-split "" --epochs "$epochs" --patience 0
  --batch-graphs 4 --configs-per-graph 16 --seed 1 --output "$work/m.tpm")

run() {  # run NAME LAUNCHER... -- ARGS...
  local name=$1
  shift
  local load
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  local log="$work/$name.log"
  "$@" >"$log.out" 2>"$log"
  local line
  line=$(grep -o 'training loop: .*' "$log" | tail -1)
  local steps configs secs rate comm ms
  steps=$(sed -E 's/training loop: ([0-9]+) steps.*/\1/' <<<"$line")
  configs=$(sed -E 's/.* steps, ([0-9]+) configs.*/\1/' <<<"$line")
  secs=$(sed -E 's/.* configs in ([0-9.]+) s.*/\1/' <<<"$line")
  rate=$(sed -E 's/.*\(([0-9.]+) configs\/s\).*/\1/' <<<"$line")
  comm=$(sed -E 's/.*, ([0-9.]+) s in collectives.*/\1/' <<<"$line")
  ms=$(sed -E 's/.*\(([0-9.]+) ms per step\).*/\1/' <<<"$line")
  local wait=-
  if grep -q 'waiting for the slowest' <<<"$line"; then
    wait=$(sed -E 's/.*, ([0-9.]+) ms per step waiting.*/\1/' <<<"$line")
  fi
  printf '%-22s %6s %8s %9s %10s %12s %12s %12s   %s\n' "$name" "$steps" "$configs" "$secs" \
    "$rate" "$comm" "$ms" "$wait" "$load"
}

bench_machine_header
printf '# %s, %d synthetic layout graphs (%s-%s nodes), 4 graphs x 16 configs per step, %d epochs\n' \
  "$("$bin" --version)" "$graphs" "${MIN_NODES:-500}" "${MAX_NODES:-2000}" "$epochs"
printf '%-22s %6s %8s %9s %10s %12s %12s %12s   %s\n' setup steps configs loop_s configs/s \
  comm_s comm_ms/step wait_ms/step "load (1/5/15 min) before"
run "2 ranks x 1 thread" mpirun -np 2 --oversubscribe --allow-run-as-root "$bin" -v -j 1 "${train_args[@]}"
run "1 rank x 2 threads" "$bin" -v -j 2 "${train_args[@]}"
run "1 rank x 1 thread" "$bin" -v -j 1 "${train_args[@]}"

# The gradient sum alone, with the same sizes (4 graphs of the default layout model on 2 ranks).
sum_bin="$BUILD_DIR/tools/bench/mpi_ordered_sum"
if [ -x "$sum_bin" ]; then
  printf '# load before: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
  mpirun -np 2 --oversubscribe --allow-run-as-root "$sum_bin" 69669 4 200
else
  echo "# $sum_bin not built (bash tools/build.sh --target mpi_ordered_sum)"
fi
bench_machine_footer
