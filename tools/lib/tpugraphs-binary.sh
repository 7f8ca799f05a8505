# shellcheck shell=bash
# The tpugraphs binary of the scripts under tools/: the one way every script (and tools/release)
# finds it. Sourced with `here` set to the checkout's root:
#   source "$here/tools/lib/tpugraphs-binary.sh"
#   bin=$(tpugraphs_binary)
# Order: $TPUGRAPHS (a binary), $BUILD_DIR/tpugraphs (a build directory: the scripts that build
# what they measure set BUILD_DIR, default build), `tpugraphs` on PATH, $here/build/tpugraphs.
# The result is absolute when the file exists, so scripts may change directory.
tpugraphs_binary() {
  local b=${TPUGRAPHS:-}
  if [ -z "$b" ] && [ -n "${BUILD_DIR:-}" ]; then
    b=$BUILD_DIR/tpugraphs
    case "$b" in /*) ;; *) [ -e "$b" ] || b=$here/$b ;; esac
  fi
  if [ -z "$b" ]; then
    b=$(command -v tpugraphs || echo "$here/build/tpugraphs")
  fi
  if [ -e "$b" ]; then
    b=$(cd "$(dirname "$b")" && pwd)/$(basename "$b")
  fi
  echo "$b"
}
