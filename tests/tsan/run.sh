#!/usr/bin/env bash
# The threaded paths under ThreadSanitizer (tools/test.sh --tsan builds BUILD_DIR first):
#   1. the trainer at -j 2: train_test's thread-count, resume, ensemble and GST tests;
#   2. the CLI at -j 2 on the bundled sample: train tile and layout, a GST run and a two-member
#      ensemble, then the scorer threads of evaluate, predict and tune;
#   3. the Python module: two Python threads scoring with one Model and reading one Dataset at
#      once, both releasing the GIL (tests/tsan/python_threads.py).
# Any report fails the run (halt_on_error); there are no suppressions.
# Usage: bash tests/tsan/run.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:?usage: run.sh BUILD_DIR}
bin="$build/tpugraphs"
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
step() { echo "== tsan: $*" >&2; }

step "train_test at -j 1 and 2 (thread count, resume, ensembles, GST)"
"$build/tests/train_test" \
  --gtest_filter='*SameSeed*:*Resume*:EnsembleTest.*:GstTrainTest.*' --gtest_brief=1

step "CLI: ingest the sample"
"$bin" -q ingest data/sample --output "$work/sample.tpug"
quick=(--epochs 2 --configs-per-graph 8 --batch-graphs 2 --seed 3)
step "CLI: train tile -j 2"
"$bin" -q -j 2 train --dataset "$work/sample.tpug" --collection tile:synth "${quick[@]}" \
  --output "$work/tile.tpm"
step "CLI: train layout -j 2, a two-member ensemble, its members side by side"
"$bin" -q -j 2 train --dataset "$work/sample.tpug" --collection layout:synth:random \
  "${quick[@]}" --ensemble-members 2 --members-side-by-side 2 --output "$work/layout.tpm"
step "CLI: train layout -j 2 with Graph Segment Training"
"$bin" -q -j 2 train --dataset "$work/sample.tpug" --collection layout:synth:random \
  "${quick[@]}" --gst on --segment-size 64 --output "$work/gst.tpm"
for m in tile layout gst; do
  case $m in tile) c=tile:synth ;; *) c=layout:synth:random ;; esac
  step "CLI: evaluate and predict -j 2 with $m.tpm"
  "$bin" -q -j 2 evaluate --data "$work/sample.tpug" --collection "$c" --split test \
    --model "$work/$m.tpm" --memory-per-thread 16 >/dev/null
  "$bin" -q -j 2 predict --data "$work/sample.tpug" --collection "$c" --split test \
    --model "$work/$m.tpm" --output "$work/$m.pred" >/dev/null
done
step "CLI: tune -j 2"
"$bin" -q -j 2 tune --data "$work/sample.tpug" --graph program_00007 \
  --model "$work/layout.tpm" --budget 200 --top 3 -o "$work/tuned.npz" >/dev/null

if [ -f "$build/python/tpugraphs/__init__.py" ]; then
  step "Python: two threads scoring and reading at once"
  # The interpreter is not instrumented: the TSan runtime is preloaded so that the extension
  # module can load, and it sees the interpreter's locks (the GIL) through libc.
  runtime=$(g++ -print-file-name=libtsan.so)
  LD_PRELOAD="$runtime" PYTHONPATH="$build/python" \
    /usr/bin/python3 tests/tsan/python_threads.py "$work/sample.tpug" "$work/layout.tpm"
else
  echo "tsan: $build has no Python module; the Python threads were not run" >&2
fi
echo "tsan: no reports" >&2
