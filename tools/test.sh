#!/usr/bin/env bash
# Sets up a fresh machine (Debian packages), builds everything and runs the whole test suite.
# Usage: bash tools/test.sh [--sanitize | --tsan | --isa LEVEL] [ctest arguments, e.g. -L io]
# Without arguments the Python tests (tests/python, /usr/bin/python3 -m pytest) run after ctest.
#   --sanitize   build with AddressSanitizer + UndefinedBehaviorSanitizer (halt on the first
#                report) into ${BUILD_DIR:-build-sanitize} and run the suite there, but for the
#                release tooling's script tests (label workflow) and the benchmark scripts' tiny
#                runs (Bench*ScriptTest); SANITIZE_WORKFLOWS=1 runs them.
#   --tsan       build with ThreadSanitizer into ${BUILD_DIR:-build-tsan} (the CLI, train_test
#                and the Python module) and run the threaded paths under it: the trainer at
#                -j 2 (tile, layout, GST, ensembles), the scorer threads of evaluate, predict
#                and tune, and two Python threads scoring and reading at once (tests/tsan/run.sh).
#   --isa LEVEL  build only the libraries and determinism_test for -march=LEVEL (x86-64-v2: SSE
#                packets, no FMA; x86-64-v3: AVX2 + FMA) into ${BUILD_DIR:-build-LEVEL} and run
#                it: the score-independence and determinism tests on another packet width than
#                the machine's own.
# BUILD_TARGETS (space-separated) builds only those targets instead of everything; pass the
# matching ctest selection (-L/-R) along, tests of unbuilt executables cannot run.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=normal
isa=""
case "${1:-}" in
  --sanitize) mode=sanitize; shift ;;
  --tsan) mode=tsan; shift ;;
  --isa)
    mode=isa
    isa=${2:-}
    case "$isa" in
      x86-64-v2 | x86-64-v3 | x86-64-v4 | x86-64) ;;
      *) echo "test.sh: --isa takes x86-64, x86-64-v2, x86-64-v3 or x86-64-v4, not '$isa'" >&2
         exit 2 ;;
    esac
    shift 2 ;;
esac
bash tools/install-deps.sh
case "$mode" in
  sanitize)
    export BUILD_DIR=${BUILD_DIR:-build-sanitize}
    export CMAKE_ARGS="-DTPUGRAPHS_SANITIZE_ADDRESS=ON -DTPUGRAPHS_SANITIZE_UNDEFINED=ON
      -DTPUGRAPHS_BUILD_BENCHMARKS=OFF"
    # Leaks fail the run too; abort (not exit) so ctest reports the test as crashed.
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
    ;;
  tsan)
    export BUILD_DIR=${BUILD_DIR:-build-tsan}
    # Warnings are errors in the other builds; GCC 12 at -O1 with TSan's instrumentation reports
    # false -Warray-bounds and -Wstringop-overread inside std::vector's reallocation.
    export CMAKE_ARGS="-DTPUGRAPHS_SANITIZE_THREAD=ON -DTPUGRAPHS_BUILD_BENCHMARKS=OFF
      -DTPUGRAPHS_WERROR=OFF"
    targets=(--target tpugraphs --target train_test)
    if /usr/bin/python3 -c 'import pybind11' 2>/dev/null; then
      targets+=(--target tpugraphs_python)
    fi
    bash tools/build.sh "${targets[@]}"
    exec bash tests/tsan/run.sh "$BUILD_DIR"
    ;;
  isa)
    export BUILD_DIR=${BUILD_DIR:-build-$isa}
    export TPUGRAPHS_NATIVE=OFF TPUGRAPHS_PORTABLE_ARCH=$isa
    export CMAKE_ARGS="-DTPUGRAPHS_BUILD_BENCHMARKS=OFF -DTPUGRAPHS_PYTHON_MODULE=OFF"
    bash tools/build.sh --target determinism_test
    echo "test.sh: determinism_test built for -march=$isa" >&2
    exec "$BUILD_DIR/tests/determinism_test" "$@"
    ;;
esac
targets=()
for t in ${BUILD_TARGETS:-}; do targets+=(--target "$t"); done
bash tools/build.sh "${targets[@]}"
BUILD_DIR=${BUILD_DIR:-build}
skip=()
# Under the sanitizers, the release tooling's script tests (label workflow) and the benchmark
# scripts' tiny runs (BenchTuneScriptTest, BenchFinetuneScriptTest: 94 and 15 s there) are left
# out: they are 8-11x slower there and add no C++ path the sanitized CLI tests lack
# (tests/CMakeLists.txt).
if [ "$mode" = sanitize ] && [ "${SANITIZE_WORKFLOWS:-0}" != 1 ]; then
  skip=(-LE workflow -E '^Bench[A-Za-z]*ScriptTest[.]')
  echo "test.sh: the workflow and benchmark script tests are skipped under the sanitizers" \
    "(SANITIZE_WORKFLOWS=1 runs them)" >&2
fi
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" "${skip[@]}" "$@"

# The Python module's tests (tests/python, docs/python.md) against the package in the build tree.
# The sanitizer build has no Python module; a run restricted by ctest arguments or BUILD_TARGETS
# skips them too.
if [ "$mode" = sanitize ] || [ $# -gt 0 ] || [ -n "${BUILD_TARGETS:-}" ]; then
  echo "test.sh: Python tests skipped (sanitizer build or a restricted run)" >&2
  exit 0
fi
if [ ! -f "$BUILD_DIR/python/tpugraphs/__init__.py" ]; then
  echo "test.sh: $BUILD_DIR/python/tpugraphs is missing (TPUGRAPHS_PYTHON_MODULE off?)" >&2
  exit 1
fi
status=0
TPUGRAPHS_BUILD_DIR="$BUILD_DIR" /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/python \
  || status=$?
case "$status" in
  0) ;;
  5) echo "test.sh: pytest collected no tests" >&2; exit 1 ;;
  *) echo "test.sh: Python tests failed (pytest exit $status)" >&2; exit 1 ;;
esac
