# The five TpuGraphs collections of a release tree, one entry per collection:
#   "<name> <collection> <release sub-directory>"
# <name> names the files a collection gets in an output directory (<name>.tpug, <name>.tpm, ...).
# Sourced by tools/train-all-collections.sh, tools/make-submission.sh and tools/bench-release.sh,
# so the three scripts agree on the collections and their file names.
# shellcheck disable=SC2034  # used by the scripts that source this file
release_collections=(
  "tile_xla tile:xla npz/tile/xla"
  "layout_xla_random layout:xla:random npz/layout/xla/random"
  "layout_xla_default layout:xla:default npz/layout/xla/default"
  "layout_nlp_random layout:nlp:random npz/layout/nlp/random"
  "layout_nlp_default layout:nlp:default npz/layout/nlp/default"
)
