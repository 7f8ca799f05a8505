#!/usr/bin/env bash
# tools/dev/fuzz.sh tells a slow input from a stalled machine: a timeout input that is slow again
# on replay fails the run; one that runs within the limit on every replay is kept as stall-<name>,
# the harness runs once more and the run passes. Uses stand-in harnesses that behave like
# libFuzzer (a corpus run writes timeout-<id> and exits 70; a replay of a file exits 70 if slow).
# Usage: fuzz_script_test.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
work=$(mktemp -d)
trap "rm -rf $work" EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
mkdir -p "$work/build/tests/fuzz"

# $1: harness name; $2: "stall" (the input is fast on replay) or "slow" (it stays slow).
make_harness() {
  cat >"$work/build/tests/fuzz/fuzz_$1" <<HARNESS
#!/usr/bin/env bash
prefix=""
for a in "\$@"; do case "\$a" in -artifact_prefix=*) prefix=\${a#-artifact_prefix=} ;; esac; done
if [ -f "\${@: -1}" ]; then  # a replay: the input is the last argument
  [ "$2" = slow ] && exit 70
  exit 0
fi
runs=\$(cat "$work/$1.runs" 2>/dev/null || echo 0)
echo \$((runs + 1)) >"$work/$1.runs"
if [ "\$runs" = 0 ]; then
  echo "ALARM: working on the last Unit for 2 seconds"
  echo "SUMMARY: libFuzzer: timeout"
  echo input >"\${prefix}timeout-\$runs"
  exit 70
fi
echo "#1000 DONE cov: 10 ft: 20 corp: 1/1b"
echo "stat::number_of_executed_units: 1000"
echo "stat::average_exec_per_sec:     200"
exit 0
HARNESS
  chmod +x "$work/build/tests/fuzz/fuzz_$1"
}

make_harness zip stall
make_harness npy slow
cd "$src"
# fuzz_run HARNESS NAME: fuzz.sh on the stand-in HARNESS for 1 s; output in $work/NAME.out/.err,
# exit code in $status.
fuzz_run() {
  status=0
  FUZZ_NO_BUILD=1 FUZZ_BUILD_DIR="$work/build" bash tools/dev/fuzz.sh 1 "$1" >"$work/$2.out" \
    2>"$work/$2.err" || status=$?
  cat "$work/$2.err" "$work/$2.out"
}

fuzz_run zip stall
[ "$status" = 0 ] || fail "a stall failed the run (exit $status)"
grep -q 'a stall of the machine' "$work/stall.err" || fail "the stall is not reported"
[ -f "$work/build/artifacts/zip/stall-timeout-0" ] || fail "the stalled input is not kept"
[ "$(cat "$work/zip.runs")" = 2 ] || fail "the harness did not run once more after the stall"
grep -Eq '^zip +1000 +200 .* 0$' "$work/stall.out" || fail "the row is not the second run's"

fuzz_run npy slow
[ "$status" = 1 ] || fail "a slow input did not fail the run (exit $status)"
grep -q 'npy FAILED' "$work/slow.err" || fail "the slow input is not reported"
[ -f "$work/build/artifacts/npy/timeout-0" ] || fail "the slow input was renamed"
[ "$(cat "$work/npy.runs")" = 1 ] || fail "a run with a slow input was repeated"
echo "fuzz_script_test: ok"
