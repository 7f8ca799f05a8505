#!/usr/bin/env bash
# The scripts under tools/ that no other test runs: every tools/**/*.sh passes `bash -n` and every
# tools/**/*.py byte-compiles (files found by listing, so new scripts are covered); then each
# script with a usage/--help path or a cheap mode is run that way and its exit code and a line
# of its output are checked:
#   bench/bench-gst.sh, bench-model.sh, bench-train.sh  --help: exit 0, their header
#   dev/render-report.sh, make-fuzz-corpus.sh        no arguments: usage on stderr, exit 2 / 1
#   bench/bench-npz.py, reference/plain_gnn_reference.py,
#   reference/torch_reference_step.py                --help: exit 0, argparse usage
#   bench/bench-model-report.py                      a small bench_model JSON: its tables
#   bench/bench-ingest-memory.sh                     10 configs x 5 nodes with the given binary
#   bench/bench-scaling.sh                           its step cases at 1% of their sizes and its
#                                                    commands, -j 1 and 2
#   bench/bench-user-collection.sh                   two collections of 10 tiny programs, a
#                                                    2-epoch recipe: its lines and mean
#                                                    and 2, 1 and 2 steps: the JSON's fields,
#                                                    and its refusals of bad flags
#   lib/bench-machine.sh, lib/bench_machine.py       the machine header every benchmark prints:
#                                                    CPU, extensions, cores, load; the WARNING
#                                                    above load 0.5 only; the JSON form; the
#                                                    reference environment without the OpenBLAS
#                                                    overrides; the BLAS report
#   lib/tpugraphs-binary.sh                          the binary the scripts run: $TPUGRAPHS,
#                                                    $BUILD_DIR, PATH, build/, in order; no
#                                                    script under tools/ finds it another way
#
# Only syntax-checked, with the reason:
#   bench/bench-crc32.sh, bench-hlo-text.sh, bench-ingest.sh, bench-metrics.sh, bench-synth.sh:
#     Google Benchmark binaries beside them (not part of the test build), no usage path
#   bench/bench-mpi.sh: an MPI build and mpirun
#   bench/bench-quality.sh, bench/real-dump-baselines.sh: training runs of minutes even at the small scale
#   dev/make-sample.sh: rewrites data/sample/ in the source tree
#   dev/perf-functions.py: needs a perf.data recording and perf; no usage path
#   demo.sh, test.sh, install-deps.sh: install packages and/or rebuild the project
#
# Usage: tools_scripts_test.sh TPUGRAPHS_BINARY SOURCE_DIR PYTHON_WITH_NUMPY
set -euo pipefail

bin=$1
src=$2
python=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/tools-scripts.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# --- syntax of every script -----------------------------------------------------------------
mapfile -t shells < <(find "$src/tools" -type f -name '*.sh' | sort)
mapfile -t pys < <(find "$src/tools" -type f -name '*.py' | sort)
[ "${#shells[@]}" -ge 20 ] || fail "only ${#shells[@]} shell scripts found under $src/tools"
[ "${#pys[@]}" -ge 8 ] || fail "only ${#pys[@]} Python scripts found under $src/tools"
for f in "${shells[@]}"; do
  bash -n "$f" || fail "bash -n $f"
done
"$python" - "$work/pyc" "${pys[@]}" <<'PY' || fail "py_compile of tools/**/*.py"
import os, py_compile, sys
out = sys.argv[1]
for i, path in enumerate(sys.argv[2:]):
    py_compile.compile(path, cfile=os.path.join(out, "%d.pyc" % i), doraise=True)
PY
[ "$(find "$work/pyc" -name '*.pyc' | wc -l)" -eq "${#pys[@]}" ] || fail "missing .pyc files"

# run EXPECTED_RC PATTERN CMD...: runs CMD (stdout and stderr together in $work/out), checks its
# exit code and that a line matches PATTERN (grep -E).
run() {
  local want=$1 pattern=$2 rc=0
  shift 2
  (cd "$work" && "$@") >"$work/out" 2>&1 || rc=$?
  [ "$rc" -eq "$want" ] || { cat "$work/out" >&2; fail "$* exited $rc, expected $want"; }
  grep -Eq "$pattern" "$work/out" || { cat "$work/out" >&2; fail "$*: no line matching '$pattern'"; }
}

# --- usage and --help paths -----------------------------------------------------------------
run 0 '^# Peak memory and step time of `tpugraphs train`' bash "$src/tools/bench/bench-gst.sh" --help
run 0 '^# Usage: tools/bench/bench-model.sh \[--native\]' bash "$src/tools/bench/bench-model.sh" --help
run 0 '^# Usage: tools/bench/bench-train.sh \[--steps N\]' bash "$src/tools/bench/bench-train.sh" --help
run 2 'unknown argument --no-such-flag' bash "$src/tools/bench/bench-train.sh" --no-such-flag
run 2 '^usage: .*render-report.sh report.html \[out.png\]' bash "$src/tools/dev/render-report.sh"
run 1 'usage: tools/dev/make-fuzz-corpus.sh OUT_DIR' bash "$src/tools/dev/make-fuzz-corpus.sh"
run 0 '^usage: bench-npz.py .*--bin BIN' "$python" "$src/tools/bench/bench-npz.py" --help
run 0 '^usage: plain_gnn_reference.py .*--steps STEPS' \
  "$python" "$src/tools/reference/plain_gnn_reference.py" --help
run 0 '^usage: torch_reference_step.py .*--configs CONFIGS' \
  "$python" "$src/tools/reference/torch_reference_step.py" --help

# --- the machine header (tools/lib/bench-machine.sh and bench_machine.py) --------------------
# A fake /proc/cpuinfo and /proc/loadavg: the header names the CPU, its extensions, the cores
# and the load, and warns at load 3.50 and not at 0.10; then the same with the real files.
printf 'processor\t: 0\nmodel name\t: Test CPU 9000\nflags\t\t: fpu sse4_2 avx avx2 fma avx512f amx_tile\n' \
  >"$work/cpuinfo"
echo "3.50 2.00 1.00 3/200 1234" >"$work/load-high"
echo "0.10 0.20 0.30 1/200 1234" >"$work/load-low"
lib_sh=$src/tools/lib/bench-machine.sh
lib_py=$src/tools/lib
machine_re='^== machine: Test CPU 9000; vector extensions: sse4_2 avx avx2 fma avx512f amx_tile; [0-9]+ cores$'
check_header() {  # LABEL LOAD_FILE: $work/out holds the header (and footer) of a fake load
  local label=$1 load=$2 want
  grep -Eq "$machine_re" "$work/out" || { cat "$work/out" >&2; fail "$label: no machine line"; }
  want=$(cut -d' ' -f1 "$load")
  grep -Eq "^== load average \(1 min\) at start: $want\$" "$work/out" ||
    { cat "$work/out" >&2; fail "$label: no load line"; }
  grep -Eq "^== load average \(1 min\) at end: $want " "$work/out" ||
    { cat "$work/out" >&2; fail "$label: no footer"; }
  if [ "$load" = "$work/load-high" ]; then
    grep -Eq '^WARNING: load average 3.50 > 0.5 at start: .*3-5x off; rerun on an idle machine$' \
      "$work/out" || { cat "$work/out" >&2; fail "$label: no WARNING at load 3.50"; }
  elif grep -q WARNING "$work/out"; then
    cat "$work/out" >&2
    fail "$label: a WARNING at load 0.10"
  fi
}
for load in "$work/load-high" "$work/load-low"; do
  BENCH_MACHINE_CPUINFO_FILE=$work/cpuinfo BENCH_MACHINE_LOADAVG_FILE=$load \
    bash -c 'set -euo pipefail; source "$1"; bench_machine_header; bench_machine_footer
             bench_machine_json >"$2"' _ "$lib_sh" "$work/machine.json" 2>"$work/out" >/dev/null ||
    fail "bench-machine.sh at $load"
  check_header "bench-machine.sh ($(basename "$load"))" "$load"
  "$python" - "$work/machine.json" "$(cut -d' ' -f1 "$load")" <<'PY' || fail "bench_machine_json"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["cpu"] == "Test CPU 9000", m
assert m["vector_extensions"] == ["sse4_2", "avx", "avx2", "fma", "avx512f", "amx_tile"], m
assert m["cores"] >= 1 and m["load_at_start"] == m["load_at_end"] == float(sys.argv[2]), m
PY
  BENCH_MACHINE_CPUINFO_FILE=$work/cpuinfo BENCH_MACHINE_LOADAVG_FILE=$load \
    "$python" - "$lib_py" "$(cut -d' ' -f1 "$load")" >/dev/null 2>"$work/out" <<'PY' ||
import sys
sys.path.insert(0, sys.argv[1])
import bench_machine
bench_machine.header()
bench_machine.footer()
m = bench_machine.machine_json()
assert m["cpu"] == "Test CPU 9000", m
assert m["vector_extensions"] == ["sse4_2", "avx", "avx2", "fma", "avx512f", "amx_tile"], m
assert m["cores"] >= 1 and m["load_at_start"] == m["load_at_end"] == float(sys.argv[2]), m
PY
    { cat "$work/out" >&2; fail "bench_machine.py at $load"; }
  check_header "bench_machine.py ($(basename "$load"))" "$load"
done
# The real machine: a CPU line with the cores, and a load.
bash -c 'source "$1"; bench_machine_header' _ "$lib_sh" 2>"$work/out" ||
  fail "bench_machine_header on this machine"
if ! grep -Eq '^== machine: .+; vector extensions: .+; [0-9]+ cores$' "$work/out" ||
  ! grep -Eq '^== load average \(1 min\) at start: [0-9.]+$' "$work/out"; then
  cat "$work/out" >&2
  fail "bench_machine_header on this machine"
fi
# A reference runs without the OpenBLAS overrides, and says which BLAS it loaded.
left=$(OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=1048576 \
  bash -c 'source "$1"; bench_reference env' _ "$lib_sh" | grep -c '^OPENBLAS_' || true)
[ "$left" = 0 ] || fail "bench_reference left $left OpenBLAS variables set"
OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=1048576 "$python" - "$lib_py" <<'PY' ||
import sys
sys.path.insert(0, sys.argv[1])
import bench_machine
env = bench_machine.reference_env()
assert "OPENBLAS_CORETYPE" not in env and "OPENBLAS_L2_SIZE" not in env, env
assert "PATH" in env
PY
  fail "bench_machine.reference_env kept the OpenBLAS overrides"
run 0 '^== reference BLAS: .+; OPENBLAS_CORETYPE unset, OPENBLAS_L2_SIZE unset$' \
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$python" "$lib_py/bench_machine.py" blas

# --- bench-model-report.py on a small bench_model JSON --------------------------------------
cat >"$work/model.json" <<'JSON'
{"benchmarks": [
 {"name": "BM_EigenGemm/256/128/64", "GFLOPs": 40.0},
 {"name": "BM_Model/mode:0/nodes:1000/configs:16/backward:1", "cpu_time": 2.5,
  "us_per_config": 156.25, "configs_per_s": 6400.0, "dense_GFLOPs": 10.0, "affected_frac": 0.25},
 {"name": "BM_Model/mode:1/nodes:50/configs:8/backward:0", "error_occurred": true,
  "error_message": "skipped: too large"},
 {"name": "BM_InferenceBlocks/nodes:12000/configs:1000/block_rows:4096", "cpu_time": 100.0,
  "real_time": 101.5, "us_per_config": 100.0, "config_nodes": 60},
 {"name": "BM_InferenceBlocks/nodes:12000/configs:1000/block_rows:0", "cpu_time": 250.0,
  "real_time": 400.0, "us_per_config": 250.0, "config_nodes": 60}
]}
JSON
run 0 '^  +256x128x64 +40\.0 GFLOP/s$' "$python" "$src/tools/bench/bench-model-report.py" "$work/model.json"
grep -Eq '^layout +1000 +16 fwd\+bwd +2\.50 +156\.2 +6400\.0 +10\.00 +25\.0 +0\.250$' "$work/out" \
  || { cat "$work/out" >&2; fail "bench-model-report.py: layout row"; }
grep -Eq '^tile-late +50 +8 fwd +skipped: too large$' "$work/out" \
  || { cat "$work/out" >&2; fail "bench-model-report.py: error row"; }
grep -Eq '^ +12000 +1000 +60 +4096 +100\.00 +100\.0 +101\.50 +2\.50x$' "$work/out" \
  || { cat "$work/out" >&2; fail "bench-model-report.py: inference-blocks row"; }
grep -Eq '^ +12000 +1000 +60 +0 +250\.00 +250\.0 +400\.00 +1\.00x$' "$work/out" \
  || { cat "$work/out" >&2; fail "bench-model-report.py: inference without blocks"; }

# --- bench-ingest-memory.sh at a tiny scale -------------------------------------------------
run 0 '^ingest \(stream\): peak RSS [0-9]+ MiB, wall [0-9:.]+, dataset [0-9]+ MB$' \
  env TPUGRAPHS="$bin" bash "$src/tools/bench/bench-ingest-memory.sh" 10 5 "$work/ingest-memory"
grep -Eq '^ingest \(whole\): peak RSS [0-9]+ MiB' "$work/out" \
  || { cat "$work/out" >&2; fail "bench-ingest-memory.sh: no whole-file line"; }
grep -Eq '^numpy np.load of all arrays: [0-9.]+ s$' "$work/out" \
  || { cat "$work/out" >&2; fail "bench-ingest-memory.sh: no numpy line"; }
# --- bench-scaling.sh at a tiny scale (the figures are noise at this size; the fields are not) --
bash "$src/tools/bench/bench-scaling.sh" --binary "$bin" --threads 2 --steps 1,2 --scale 0.01 \
  --json >"$work/scaling.json" 2>"$work/scaling.log" ||
  { cat "$work/scaling.log" >&2; fail "bench-scaling.sh --json exited non-zero"; }
grep -Eq '^== load average \(1 min\) at start: ' "$work/scaling.log" ||
  { cat "$work/scaling.log" >&2; fail "bench-scaling.sh: no machine header"; }
"$python" - "$work/scaling.json" <<'PY' || { cat "$work/scaling.json" >&2; fail "bench-scaling.sh: JSON"; }
import json, sys
d = json.load(open(sys.argv[1]))
assert d["machine"]["cores"] >= 1 and "load_at_start" in d["machine"], d["machine"]
assert [c["name"] for c in d["cases"]] == ["pair-nlp", "pair-xla", "single", "gst",
                                           "attention"], d["cases"]
assert [c["recipe"] for c in d["cases"]] == ["layout-large.textproto", "layout.textproto",
                                             "layout.textproto", "default", "layout.textproto"]
assert [len(c["nodes"]) for c in d["cases"]] == [2, 2, 1, 1, 1]
# The commands on one graph: timed whole (validation by its own seconds), phases at -j 1.
assert [c["name"] for c in d["commands"]] == ["tune", "predict", "validation"], d["commands"]
assert [c["configs_per_program"] for c in d["commands"]] == [200, 1000, 10000], d["commands"]
serial_of = {"tune": ("other",), "predict": ("other",), "validation": ("load", "metrics")}
for c in d["commands"]:
    phases = c["phases"]
    want = ({"load", "read", "score", "metrics"} if c["name"] == "validation"
            else {"prepare", "score", "other"})
    assert set(phases) == want and all(v >= 0 for v in phases.values()), c
    assert phases["score"] > 0, c
    serial = sum(phases[k] for k in serial_of[c["name"]]) / sum(phases.values())
    assert abs(c["serial_share"] - serial) <= 2e-3, (c, serial)
    assert abs(c["amdahl_16"] - 1 / (c["serial_share"] + (1 - c["serial_share"]) / 16)) <= 0.02, c
    rows = c["threads"]
    assert [r["j"] for r in rows] == [1, 2] and rows[0]["speedup"] == 1.0, rows
    if c["name"] != "validation":  # whole commands: the -j 1 time is the phases' sum
        assert abs(rows[0]["seconds"] - sum(phases.values())) <= 2e-3, c
    for r in rows:
        assert r["seconds"] > 0 and r["ceiling"] > 0, r
        ratio = r["speedup"] / r["ceiling"]
        assert abs(r["efficiency"] - ratio) <= 0.01 * max(1.0, ratio), r
for c in d["cases"]:
    phases = c["phases"]
    assert set(phases) == {"prepare", "shared_forward", "config_forward", "loss",
                           "config_backward", "chunk_sum", "shared_backward", "gradient_sum",
                           "optimizer"}, phases
    # GST's one task per graph is timed as config_backward (forward and backward of a graph).
    busy = "config_backward" if c["name"] == "gst" else "config_forward"
    assert all(v >= 0 for v in phases.values()) and phases[busy] > 0, phases
    serial = sum(phases[k] for k in ("shared_forward", "shared_backward", "loss",
                                     "gradient_sum", "optimizer"))
    assert abs(c["serial_share"] - serial / sum(phases.values())) <= 1e-3, c
    assert abs(c["amdahl_16"] - 1 / (c["serial_share"] + (1 - c["serial_share"]) / 16)) <= 0.02, c
    # The measured share: each serial phase by its Karp-Flatt fraction at the top -j (here 2).
    top = c["phases_at_top"]
    assert top["j"] == 2 and set(top["phases"]) == set(phases), top
    est = sum(min(1.0, max(0.0, (2 * top["phases"][k] / phases[k] - 1))) * phases[k]
              for k in ("shared_forward", "shared_backward", "loss", "gradient_sum", "optimizer")
              if phases[k] > 0) / sum(phases.values())
    assert abs(c["serial_share_measured"] - est) <= 1e-3, (c, est)
    assert c["serial_share_measured"] <= c["serial_share"] + 1e-3, c
    rows = c["threads"]
    assert [r["j"] for r in rows] == [1, 2], rows  # -j 1 is always measured: the base
    assert rows[0]["speedup"] == 1.0 and rows[0]["ceiling"] == 1.0, rows
    for r in rows:
        assert r["step_ms"] > 0 and r["ceiling"] > 0, r
        # The three are rounded to 3 decimals; at this scale the figures are noise, any size.
        ratio = r["speedup"] / r["ceiling"]
        assert abs(r["efficiency"] - ratio) <= 0.01 * max(1.0, ratio), r
PY
# --- bench-user-collection.sh on two tiny collections -----------------------------------------
TPUGRAPHS="$bin" bash "$src/tools/bench/bench-user-collection.sh" --data-seeds 1,2 --graphs 10 \
  --min-nodes 60 --max-nodes 120 --configs 30 --work "$work/uc" -- --epochs 2 \
  --ensemble-members 2 >"$work/uc.tsv" 2>"$work/uc.log" ||
  { cat "$work/uc.log" >&2; fail "bench-user-collection.sh exited non-zero"; }
"$python" - "$work/uc.tsv" <<'PY' || { cat "$work/uc.tsv" >&2; fail "bench-user-collection.sh: lines"; }
import statistics, sys
lines = open(sys.argv[1]).read().splitlines()
assert lines[0].split("\t") == ["data_seed", "seed", "test_graphs", "test_kendall",
                                "train_wall_s", "train_cpu_s"], lines[0]
rows = [l.split("\t") for l in lines[1:-1]]
assert [(r[0], r[1]) for r in rows] == [("1", "1"), ("2", "1")], rows
for r in rows:
    assert int(r[2]) >= 1 and -1 <= float(r[3]) <= 1 and float(r[4]) >= 0 and float(r[5]) >= 0, r
mean = dict(kv.split("=") for kv in lines[-1].split("\t")[1:])
assert lines[-1].startswith("mean\t") and mean["lines"] == "2", lines[-1]
g = [int(r[2]) for r in rows]
want = sum(n * float(r[3]) for n, r in zip(g, rows)) / sum(g)
assert abs(float(mean["test_kendall"]) - want) <= 1e-4, (mean, want)
assert abs(float(mean["sd"]) - statistics.stdev(float(r[3]) for r in rows)) <= 1e-4, mean
PY
# A collection already made is reused (its data file untouched).
before=$(stat -c %Y "$work/uc/collection-1/data.tpug")
TPUGRAPHS="$bin" bash "$src/tools/bench/bench-user-collection.sh" --data-seeds 1 --graphs 10 \
  --min-nodes 60 --max-nodes 120 --configs 30 --work "$work/uc" -- --epochs 1 \
  --ensemble-members 1 >/dev/null 2>&1 || fail "bench-user-collection.sh: a second run failed"
[ "$(stat -c %Y "$work/uc/collection-1/data.tpug")" = "$before" ] ||
  fail "bench-user-collection.sh: the collection was made again"
run 2 "unknown option '--no-such-flag'" bash "$src/tools/bench/bench-user-collection.sh" --no-such-flag
run 2 "seeds are comma-separated integers" bash "$src/tools/bench/bench-user-collection.sh" \
  --data-seeds 1,x
run 2 "no recipe" bash "$src/tools/bench/bench-user-collection.sh" --recipe no-such-recipe
run 0 "tried as a user would" bash "$src/tools/bench/bench-user-collection.sh" --help
run 2 'unknown case\(s\) no-such-case' bash "$src/tools/bench/bench-scaling.sh" --cases no-such-case
run 2 'LO,HI with LO < HI' bash "$src/tools/bench/bench-scaling.sh" --steps 5,5
run 2 'comma-separated list of positive integers' bash "$src/tools/bench/bench-scaling.sh" \
  --threads 0,2
run 0 "ceiling" bash "$src/tools/bench/bench-scaling.sh" --help

# --- the binary the scripts run (tools/lib/tpugraphs-binary.sh) ------------------------------
fake=$work/fake-root
mkdir -p "$fake/build" "$fake/other-build" "$work/onpath" "$work/built"
touch "$fake/build/tpugraphs" "$fake/other-build/tpugraphs" "$work/onpath/tpugraphs" \
  "$work/given" "$work/built/tpugraphs"
chmod +x "$fake/build/tpugraphs" "$work/onpath/tpugraphs"
pick() {  # TPUGRAPHS BUILD_DIR PATH_PREFIX
  (
    here=$fake
    # shellcheck source=/dev/null
    source "$src/tools/lib/tpugraphs-binary.sh"
    TPUGRAPHS=$1 BUILD_DIR=$2 PATH="$3/usr/bin:/bin" tpugraphs_binary
  )
}
[ "$(pick "$work/given" "$work/built" "$work/onpath:")" = "$work/given" ] ||
  fail "tpugraphs-binary.sh: \$TPUGRAPHS does not come first"
[ "$(pick "" "$work/built" "$work/onpath:")" = "$work/built/tpugraphs" ] ||
  fail "tpugraphs-binary.sh: \$BUILD_DIR does not come before PATH"
[ "$(pick "" "other-build" "$work/onpath:")" = "$fake/other-build/tpugraphs" ] ||
  fail "tpugraphs-binary.sh: a relative \$BUILD_DIR is not the checkout's"
[ "$(pick "" "" "$work/onpath:")" = "$work/onpath/tpugraphs" ] ||
  fail "tpugraphs-binary.sh: tpugraphs on PATH does not come before build/"
[ "$(pick "" "" "")" = "$fake/build/tpugraphs" ] ||
  fail "tpugraphs-binary.sh: build/tpugraphs is not the last resort"
[ "$(cd "$work" && pick "given" "" "")" = "$work/given" ] ||
  fail "tpugraphs-binary.sh: a relative path is not made absolute"
# No script finds the binary another way: none gives the lookup an argument, and none but the
# helper reads TPUGRAPHS or builds a path to build/tpugraphs itself.
others=$(grep -rlE 'tpugraphs_binary [^)]|\$\{?TPUGRAPHS:-' "$src/tools" \
  --include='*.sh' | grep -v 'tools/lib/tpugraphs-binary.sh' || true)
[ -z "$others" ] || fail "scripts that find the binary another way: $others"

echo "tools scripts: ${#shells[@]} shell and ${#pys[@]} Python files checked; usage paths and machine header ok"
