#!/usr/bin/env bash
# Sets up a fresh machine (Debian packages), builds everything and runs the whole test suite.
# Usage: bash tools/test.sh [--sanitize] [ctest arguments, e.g. -L io or -R Npz]
# Without arguments the Python tests (tests/python, /usr/bin/python3 -m pytest) run after ctest.
#   --sanitize  build with AddressSanitizer + UndefinedBehaviorSanitizer (halt on the first
#               report) into ${BUILD_DIR:-build-sanitize} and run the suite there.
# BUILD_TARGETS (space-separated) builds only those targets instead of everything; pass the
# matching ctest selection (-L/-R) along, tests of unbuilt executables cannot run.
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize=0
if [ "${1:-}" = "--sanitize" ]; then
  sanitize=1
  shift
fi
bash tools/install-deps.sh
if [ "$sanitize" = 1 ]; then
  export BUILD_DIR=${BUILD_DIR:-build-sanitize}
  export CMAKE_ARGS="-DTPUGRAPHS_SANITIZE_ADDRESS=ON -DTPUGRAPHS_SANITIZE_UNDEFINED=ON
    -DTPUGRAPHS_BUILD_BENCHMARKS=OFF"
  # Leaks fail the run too; abort (not exit) so ctest reports the test as crashed.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fi
targets=()
for t in ${BUILD_TARGETS:-}; do targets+=(--target "$t"); done
bash tools/build.sh "${targets[@]}"
BUILD_DIR=${BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" "$@"

# The Python module's tests (tests/python, docs/python.md) against the package in the build tree.
# The sanitizer build has no Python module; a run restricted by ctest arguments or BUILD_TARGETS
# skips them too.
if [ "$sanitize" = 1 ] || [ $# -gt 0 ] || [ -n "${BUILD_TARGETS:-}" ]; then
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
