#!/usr/bin/env bash
# Checks that every source of a unity build compiles on its own (-fsyntax-only with its batch's
# flags), so that a build with TPUGRAPHS_UNITY_BUILD=OFF compiles too: a unity batch hides a
# missing #include, or a helper used from another file of the batch (tools/lib/check_standalone.py
# says how). Not a CI stage (it would cost 400 s of the 2-core budget for src/ alone): run it
# after changing includes or moving helpers between files (docs/fuzzing.md, "Build time").
# Usage: tools/dev/check-standalone.sh [BUILD_DIR] [-j N] [--under DIR]...
set -euo pipefail
cd "$(dirname "$0")/../.."
exec /usr/bin/python3 tools/lib/check_standalone.py "$@"
