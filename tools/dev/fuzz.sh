#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz (clang, ASan + UBSan, into ${FUZZ_BUILD_DIR:-
# build-fuzz}), makes their seed corpora and runs each harness for SECONDS (default 60) with a
# memory cap, then prints one row per harness: executions, exec/s, coverage (cov/ft), corpus size
# and findings. Exits 1 if any harness found something (its input is under
# <build>/artifacts/<harness>/).
# Usage: tools/dev/fuzz.sh [SECONDS] [HARNESS...]       (docs/fuzzing.md)
#   FUZZ_RUNS=N   stop each harness after N executions instead (SECONDS still bounds it)
#   FUZZ_JOBS=N   build parallelism (default: nproc)
#   FUZZ_NO_BUILD=1  use the harnesses already built (no install, no build, no seed making)
#   FUZZ_SEED_BINARY=PATH  the tpugraphs binary that writes the generated seeds (default: the
#                 native build's build/tpugraphs when there, else one built with the harnesses)
#   REPLAYS=N     replays of a timeout input before it counts (default 3): one that is never slow
#                 again was a stall of the machine; it is kept as stall-<name> and the harness
#                 runs once more
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
[ $# -gt 0 ] && shift
all=(zip npy npz raw_dump dataset model_file predictions submission eval_indices train_config
  hlo_text hlo_rewrite)
harnesses=("$@")
[ ${#harnesses[@]} -eq 0 ] && harnesses=("${all[@]}")
build=${FUZZ_BUILD_DIR:-build-fuzz}

if [ -z "${FUZZ_NO_BUILD:-}" ]; then
  bash tools/install-deps.sh
  # The seeds are written by a tpugraphs binary: FUZZ_SEED_BINARY, else the native build's
  # (build/tpugraphs) when there is one, else this build's own, compiled for it (about 150 CPU
  # seconds of clang ASan + UBSan on 2 cores).
  seed_bin=${FUZZ_SEED_BINARY:-}
  [ -z "$seed_bin" ] && [ -x build/tpugraphs ] && seed_bin=build/tpugraphs
  targets=(--target fuzzers)
  [ -z "$seed_bin" ] && { seed_bin="$build/tpugraphs"; targets+=(tpugraphs); }
  BUILD_DIR="$build" CMAKE_ARGS="-DCMAKE_CXX_COMPILER=clang++ -DTPUGRAPHS_BUILD_FUZZERS=ON
    -DTPUGRAPHS_BUILD_TESTS=OFF -DTPUGRAPHS_BUILD_BENCHMARKS=OFF -DTPUGRAPHS_SANITIZE_ADDRESS=ON
    -DTPUGRAPHS_SANITIZE_UNDEFINED=ON -DTPUGRAPHS_WERROR=OFF -DTPUGRAPHS_MPI=OFF" \
    bash tools/build.sh -j"${FUZZ_JOBS:-$(nproc)}" "${targets[@]}"
  # Seeds: generated ones (made once per build directory), then the checked-in seeds and
  # regression inputs.
  if [ ! -d "$build/seeds" ]; then
    ASAN_OPTIONS=detect_leaks=0 TPUGRAPHS=$seed_bin bash tools/dev/make-fuzz-corpus.sh "$build/seeds"
  fi
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
runs=()
[ -n "${FUZZ_RUNS:-}" ] && runs=(-runs="$FUZZ_RUNS")
fuzz_flags=(-rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=1)

# A timeout or slow-unit input is a finding only if it is slow again: the harnesses are
# deterministic, so a slow input stays slow, while a stalled machine (a noisy VM, the page cache
# writing back a build) makes a fast one look slow once. Each such input of this run is replayed
# REPLAYS times (default 3); one that never exceeds the limit again is renamed stall-<name> and
# not counted. Prints the number of inputs that remain findings.
confirm_slow() {
  local bin=$1 artifacts=$2 stamp=$3 f kept=0 i slow
  while IFS= read -r f; do
    slow=0
    for ((i = 0; i < ${REPLAYS:-3}; ++i)); do
      "$bin" "${fuzz_flags[@]}" "$f" >/dev/null 2>&1 || { slow=1; break; }
    done
    if [ "$slow" = 1 ]; then
      kept=$((kept + 1))
    else
      echo "fuzz: $(basename "$f") ran within the limit on ${REPLAYS:-3} replays: a stall of the" \
        "machine, not of the input (kept as stall-$(basename "$f"))" >&2
      mv "$f" "$(dirname "$f")/stall-$(basename "$f")"
    fi
  done < <(find "$artifacts" -type f -newer "$stamp" \( -name 'timeout-*' -o -name 'slow-unit-*' \))
  echo "$kept"
}

failed=0
rows=()
for h in "${harnesses[@]}"; do
  bin="$build/tests/fuzz/fuzz_$h"
  [ -x "$bin" ] || { echo "fuzz: no harness $bin" >&2; exit 2; }
  corpus="$build/corpus/$h"
  artifacts="$build/artifacts/$h"
  log="$build/logs/$h.log"
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  seeds=()
  for d in "$build/seeds/$h" "tests/fuzz/corpus/$h" "tests/fuzz/regressions/$h" \
    ${FUZZ_EXTRA_SEEDS:+"$FUZZ_EXTRA_SEEDS/$h"}; do
    [ -d "$d" ] && seeds+=("$d")
  done
  # A run stopped by a timeout that does not reproduce is run once more, whole.
  for attempt in 1 2; do
    echo "fuzz: $h for ${seconds}s${FUZZ_RUNS:+ or $FUZZ_RUNS runs} (log $log)" >&2
    stamp="$build/logs/$h.start"
    touch "$stamp"
    status=0
    "$bin" "$corpus" "${seeds[@]}" -max_total_time="$seconds" "${runs[@]}" "${fuzz_flags[@]}" \
      -report_slow_units=1 -print_final_stats=1 -artifact_prefix="$artifacts/" >"$log" 2>&1 ||
      status=$?
    # Only this run's artifacts count (older ones stay for reference).
    others=$(find "$artifacts" -type f -newer "$stamp" \( -name 'crash-*' -o -name 'leak-*' \
      -o -name 'oom-*' \) | wc -l)
    slow=$(find "$artifacts" -type f -newer "$stamp" \( -name 'timeout-*' -o -name 'slow-unit-*' \) |
      wc -l)
    [ "$slow" -gt 0 ] && slow=$(confirm_slow "$bin" "$artifacts" "$stamp")
    findings=$((others + slow))
    # libFuzzer exits 70 (its -timeout_exitcode) on a timeout: a stall is not a failure.
    if [ "$status" = 70 ] && [ "$findings" -eq 0 ] && [ "$attempt" = 1 ]; then
      echo "fuzz: $h stopped at a stall; running it again" >&2
      continue
    fi
    break
  done
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
  cov=$({ grep -Eo 'cov: [0-9]+ ft: [0-9]+' "$log" || true; } | tail -1 | awk '{print $2 "/" $4}')
  if [ "$status" = 70 ] && [ "$findings" -eq 0 ]; then
    echo "fuzz: $h stopped at a stall again; no input of it is slow on replay" >&2
  elif [ "$status" -ne 0 ] || [ "$findings" -ne 0 ]; then
    failed=1
    echo "fuzz: $h FAILED (exit $status), see $log and $artifacts/" >&2
    grep -E '^==[0-9]+==ERROR|runtime error|SUMMARY' "$log" | head -5 >&2 || true
  fi
  rows+=("$(printf '%-13s %12s %8s %12s %8s %8s %9s' "$h" "${execs:-?}" "${rate:-?}" \
    "${cov:-?}" "$(find "$corpus" -type f | wc -l)" "${rss:-?}" "$findings")")
done
# A harness that libFuzzer ends with _exit leaves its scratch directory (tests/fuzz/fuzz_util.cc:
# tpugraphs-fuzz-<pid> in $TMPDIR, /dev/shm or /tmp); those of processes gone are removed.
for d in "${TMPDIR:-/tmp}"/tpugraphs-fuzz-* /dev/shm/tpugraphs-fuzz-* /tmp/tpugraphs-fuzz-*; do
  [ -d "$d" ] && ! kill -0 "${d##*-}" 2>/dev/null && rm -rf "$d"
done
printf '%-13s %12s %8s %12s %8s %8s %9s\n' harness executions exec/s cov/ft corpus rss_mb findings
printf '%s\n' "${rows[@]}"
exit "$failed"
