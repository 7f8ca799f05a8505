#!/usr/bin/env bash
# Peak memory and time of `tpugraphs ingest` on a large layout-shaped .npz made with numpy, to
# show that streaming node_config_feat keeps memory well below the file's decoded size.
#
# Usage: tools/bench/bench-ingest-memory.sh [CONFIGS] [CONFIG_NODES] [WORKDIR]
#   the binary: tools/lib/tpugraphs-binary.sh's (TPUGRAPHS, BUILD_DIR, PATH, build/); defaults: 5000 configs, 300 configurable
#   nodes (108 MB of float32 configs),
#   WORKDIR a fresh directory under /tmp (removed at the end).
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tools/lib/tpugraphs-binary.sh
source "$here/tools/lib/tpugraphs-binary.sh"
BIN=$(tpugraphs_binary)
C=${1:-5000}
NC=${2:-300}
WORK=${3:-$(mktemp -d /tmp/tpugraphs-bench-XXXXXX)}
PY=/usr/bin/python3
# shellcheck source=tools/lib/bench-machine.sh
source "$here/tools/lib/bench-machine.sh"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/npz/layout/nlp/random/train"
NPZ="$WORK/npz/layout/nlp/random/train/big.npz"
"$PY" - "$NPZ" "$C" "$NC" <<'PY'
import sys, numpy as np
path, c, nc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(0); n = 20000
np.savez(path, node_feat=rng.normal(size=(n, 140)).astype('<f4'),
         node_opcode=rng.integers(0, 200, n).astype('u1'),
         edge_index=np.sort(rng.integers(0, n, (3 * n, 2)), axis=0),
         node_config_ids=np.sort(rng.choice(n, nc, replace=False)),
         node_config_feat=rng.integers(-1, 6, (c, nc, 18)).astype('<f4'),
         config_runtime=rng.integers(10**5, 10**8, c), node_splits=np.array([[0, n // 2, n]]))
PY
size=$(stat -c %s "$NPZ")
decoded=$((C * NC * 18 * 4))
echo "file: $NPZ ($((size / 1000000)) MB; node_config_feat decoded as float32: $((decoded / 1000000)) MB; as int8: $((decoded / 4000000)) MB)"
echo "cores: $(nproc)"
bench_machine_header
for mode in stream whole; do
  thr=16777216
  [ "$mode" = whole ] && thr=$((C * NC * 18 + 1))
  /usr/bin/time -v "$BIN" -q -j 1 ingest "$WORK/npz" -o "$WORK/out.tpug" --stream-threshold "$thr" \
    > /dev/null 2> "$WORK/time.txt"
  rss=$(grep 'Maximum resident set size' "$WORK/time.txt" | awk '{print $6}')
  wall=$(grep 'Elapsed (wall clock)' "$WORK/time.txt" | awk '{print $8}')
  out=$(stat -c %s "$WORK/out.tpug")
  echo "ingest ($mode): peak RSS $((rss / 1024)) MiB, wall $wall, dataset $((out / 1000000)) MB"
done
# The reference, with the OpenBLAS overrides unset (bench_reference); its BLAS first, apart
# from the timed process.
bench_reference "$PY" "$here/tools/lib/bench_machine.py" blas
start=$(date +%s.%N)
bench_reference "$PY" -c "import numpy as np, sys; z = np.load(sys.argv[1]); [z[k] for k in z.files]" "$NPZ"
end=$(date +%s.%N)
echo "numpy np.load of all arrays: $(echo "$end - $start" | bc) s"
bench_machine_footer
