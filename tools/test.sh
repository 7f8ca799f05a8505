#!/usr/bin/env bash
# Sets up a fresh machine (Debian packages), builds everything and runs the whole test suite.
# Usage: bash tools/test.sh [ctest arguments, e.g. -L io or -R Npz]
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
bash tools/build.sh
BUILD_DIR=${BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" "$@"
