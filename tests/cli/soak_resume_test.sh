#!/usr/bin/env bash
# tools/dev/soak-resume.sh on a tiny release-shaped tree: 5 seeded kills (ingest, training, a
# checkpoint write, evaluation, the submission; SIGKILL, SIGTERM or SIGINT of the whole process
# group), each followed by the same command again, then the run to the end. The report must say
# 5 kills, 0 differences from the uninterrupted run (test scores, validation metrics,
# submission), 0 leftovers and 0 missing files, 0 faults, and exit 0; its JSON must parse and
# say the same. Also: --help, and an unknown flag or a bad value refused with exit 2.
#
# Usage: soak_resume_test.sh TPUGRAPHS_BINARY SOURCE_DIR PYTHON
set -euo pipefail

bin=$1
src=$2
python=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/soak-resume.XXXXXX")
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
soak=$src/tools/dev/soak-resume.sh
export TPUGRAPHS=$bin

# --- flags ----------------------------------------------------------------------------------------
bash "$soak" --help >"$work/help.txt" || fail "--help exited non-zero"
grep -q "^Usage: tools/dev/soak-resume.sh \[--kills N\]" "$work/help.txt" ||
  { cat "$work/help.txt" >&2; fail "--help prints no usage"; }
for bad in "--no-such-flag" "--kills two" "--seed" "--scale 0" "--scale -1"; do
  rc=0
  # shellcheck disable=SC2086  # the flags split on purpose
  bash "$soak" $bad --work "$work/none" >/dev/null 2>"$work/bad.err" || rc=$?
  [ "$rc" -eq 2 ] || { cat "$work/bad.err" >&2; fail "'$bad': exit $rc, not 2"; }
  [ ! -e "$work/none" ] || fail "'$bad': wrote $work/none"
done

# --- the soak on a tiny tree ----------------------------------------------------------------------
# A tree of 26 graphs of at most 400 nodes and 40 configurations, recipes of 10 epochs of 8 steps
# and a checkpoint every 50 ms: the reference takes a few seconds on 2 cores.
rc=0
SOAK_MAX_NODES=400 SOAK_MAX_CONFIGS=40 \
  SOAK_TRAIN_FLAGS="--epochs 10 --steps-per-epoch 8 --ensemble-members 2 --min-config-passes 0 --checkpoint-interval-seconds 0.05" \
  bash "$soak" --kills 5 --seed 1 --scale 0.002 --work "$work/soak" >"$work/report.txt" \
  2>"$work/soak.err" || rc=$?
cat "$work/report.txt" >&2
[ "$rc" -eq 0 ] || { cat "$work/soak.err" >&2; fail "soak-resume.sh exited $rc"; }
want() {  # PATTERN: a line of the report
  grep -Eq "$1" "$work/report.txt" || fail "the report has no line matching '$1'"
}
want '^soak: 5 kills \(seed 1;'
want '^kills by signal: .*SIG'
want '^kills by stage: '
[ "$(grep -Ec '^  kill +[0-9]+: SIG(KILL|TERM|INT) ' "$work/report.txt")" -eq 5 ] ||
  fail "the report does not list 5 kills"
want '^differences: 0 '
want '^leftovers: 0 '
want '^missing: 0 '
want '^faults: 0$'
want '^time lost per kill: median [0-9.]+ s, worst [0-9.]+ s; total -?[0-9.]+ s'
want '^reference wall time: [0-9.]+ s$'
grep -Eq '^== machine: ' "$work/soak.err" || fail "no machine header on stderr"
"$python" - "$work/soak/soak.json" <<'EOF' || fail "soak.json"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["kills"] == 5 and d["kills_requested"] == 5 and d["seed"] == 1, d
assert len(d["kill_list"]) == 5, d["kill_list"]
assert sum(d["kills_by_signal"].values()) == 5 and sum(d["kills_by_stage"].values()) == 5, d
assert all(k["signal"] in ("SIGKILL", "SIGTERM", "SIGINT") for k in d["kill_list"]), d
# The plan: one kill per stage, in the workflow's order (a kill whose run ended first moves to
# the submission).
planned = [k["planned"] for k in d["kill_list"]]
assert planned[0] in ("ingest", "submission") and set(planned) <= {
    "ingest", "train", "checkpoint", "evaluate", "submission"}, planned
assert len(set(k["stage"] for k in d["kill_list"])) >= 2, d["kill_list"]
assert d["differences"] == [] and d["leftovers"] == [] and d["missing"] == [], d
assert d["faults"] == [] and d["ok"] is True, d
# Compared: each of the 5 models' test scores and validation metrics, and the submission.
assert d["outcomes_compared"] == 11, d
assert d["reference_wall_s"] > 0 and d["resume_startup_s"] > 0, d
t = d["time_lost_per_kill_s"]
assert 0 < t["median"] <= t["worst"], t
assert d["machine"]["cores"] >= 1, d["machine"]
EOF
echo "soak resume: ok"
