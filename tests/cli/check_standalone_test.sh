#!/usr/bin/env bash
# tools/dev/check-standalone.sh: the sources of src/common compile alone in this unity build,
# and a directory that is not a build is a usage error (exit 2) that names it.
set -euo pipefail
build=$1 source=$2
bash "$source/tools/dev/check-standalone.sh" "$build" --under "$source/src/common" 2>"$build/cs.err"
grep -q "all compile" "$build/cs.err" || { cat "$build/cs.err"; exit 1; }
rc=0
bash "$source/tools/dev/check-standalone.sh" /nonexistent-build 2>"$build/cs.err" || rc=$?
[ "$rc" = 2 ] || { echo "expected exit 2, got $rc"; exit 1; }
grep -q "/nonexistent-build is not a Ninja build directory" "$build/cs.err"
echo "check_standalone: ok"
