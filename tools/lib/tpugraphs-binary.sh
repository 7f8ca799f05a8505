# shellcheck shell=bash
# The tpugraphs binary of the scripts under tools/, found one way for all of them. Sourced with
# `here` set to the checkout's root:
#   source "$here/tools/lib/tpugraphs-binary.sh"
#   bin=$(tpugraphs_binary "${1:-}")   # an explicit path first, if the script takes one
# Order: the path given (non-empty), $TPUGRAPHS, `tpugraphs` on PATH, $here/build/tpugraphs.
# The result is absolute when the file exists, so scripts may change directory.
tpugraphs_binary() {
  local b=${1:-${TPUGRAPHS:-}}
  if [ -z "$b" ]; then
    b=$(command -v tpugraphs || echo "$here/build/tpugraphs")
  fi
  if [ -e "$b" ]; then
    b=$(cd "$(dirname "$b")" && pwd)/$(basename "$b")
  fi
  echo "$b"
}
