#!/usr/bin/env bash
# Writes the seed corpora of the fuzz harnesses (docs/fuzzing.md) into OUT_DIR/<harness>/, from
# the real files in tests/data/real and from small synthetic data made with the given
# `tpugraphs` binary: raw dumps (also gzip/zlib, HloModuleProto and HloProto cut out of a
# ModuleTuningData), datasets, release .npz, npy members, model files, predictions, submissions.
# Usage: tools/dev/make-fuzz-corpus.sh OUT_DIR
#   (the binary tools/lib/tpugraphs-binary.sh finds: TPUGRAPHS, BUILD_DIR, PATH, build/)
set -euo pipefail
cd "$(dirname "$0")/../.."
here=$(pwd)
# shellcheck source=tools/lib/tpugraphs-binary.sh
source "$here/tools/lib/tpugraphs-binary.sh"
out=${1:?usage: tools/dev/make-fuzz-corpus.sh OUT_DIR}
bin=$(tpugraphs_binary)
real=tests/data/real
[ -x "$bin" ] || { echo "make-fuzz-corpus: no tpugraphs binary at $bin" >&2; exit 1; }
rm -rf "$out"
for h in zip npy npz raw_dump dataset model_file predictions submission eval_indices \
  train_config hlo_text hlo_rewrite; do
  mkdir -p "$out/$h"
done
cp "$real"/hlo_text/* "$out/hlo_text/"
cp "$real"/hlo_text/* "$out/hlo_rewrite/"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tp() { "$bin" -q "$@" >/dev/null; }

# Small synthetic raw dumps (a few hundred nodes at most).
tp synth --task layout --graphs 2 --min-nodes 30 --max-nodes 50 --configs 6 --seed 3 \
  --splits 0.5,0.5,0 -o "$work/layout"
tp synth --task layout --search default --graphs 1 --nodes 30 --configs 4 --seed 4 \
  -o "$work/layout_default.pb"
tp synth --task tile --graphs 3 --configs 4 --seed 5 -o "$work/tile.pb"
i=0
while IFS= read -r f; do
  i=$((i + 1))
  cp "$f" "$out/raw_dump/synth_$i.pb"
done < <(find "$work/layout" -name '*.pb' | sort)
cp "$work/layout_default.pb" "$work/tile.pb" "$out/raw_dump/"
cp "$real/raw/op_tuning_data.pb" "$out/raw_dump/real_op_tuning_data.pb"
python3 - "$work/layout_default.pb" "$out/raw_dump" <<'PY'
import gzip, sys, zlib
src, out = sys.argv[1], sys.argv[2]
data = open(src, "rb").read()
open(out + "/layout_default.pb.gz", "wb").write(gzip.compress(data))
open(out + "/layout_default.pb.zz", "wb").write(zlib.compress(data))

def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1
        v |= (c & 0x7F) << s; s += 7
        if c < 0x80:
            return v, i

def put_varint(v):
    o = bytearray()
    while True:
        c = v & 0x7F; v >>= 7
        if v:
            o.append(c | 0x80)
        else:
            o.append(c)
            return bytes(o)

# ModuleTuningData field 1 is the HloModuleProto; HloProto wraps it as its field 1.
i = 0
while i < len(data):
    key, i = varint(data, i)
    field, wire = key >> 3, key & 7
    if wire == 0:
        _, i = varint(data, i)
    elif wire == 2:
        n, i = varint(data, i)
        if field == 1:
            module = data[i:i + n]
            open(out + "/hlo_module.pb", "wb").write(module)
            open(out + "/hlo_proto.pb", "wb").write(b"\x0a" + put_varint(len(module)) + module)
            break
        i += n
    elif wire == 1:
        i += 8
    elif wire == 5:
        i += 4
    else:
        raise SystemExit("unexpected wire type %d" % wire)
PY

# Datasets, release files, models, predictions and submissions from those dumps.
tp ingest "$work/layout" -o "$work/layout.tpug"
tp ingest "$work/tile.pb" --split train -o "$work/tile.tpug" 2>/dev/null ||
  tp ingest "$work/tile.pb" -o "$work/tile.tpug"
cp "$work/layout.tpug" "$work/tile.tpug" "$out/dataset/"
tp export "$work/layout.tpug" -o "$work/export_layout"
tp export "$work/tile.tpug" -o "$work/export_tile"
i=0
while IFS= read -r f; do
  i=$((i + 1))
  cp "$f" "$out/npz/synth_$i.npz"
  cp "$f" "$out/zip/synth_$i.zip"
done < <(find "$work/export_layout" "$work/export_tile" -name '*.npz' | sort | head -4)
find "$real/npz" -name '*.npz' -size -64k | sort | while IFS= read -r f; do
  cp "$f" "$out/npz/real_$(basename "$f")"
done
python3 - "$out/npz" "$out/npy" <<'PY'
import glob, os, sys, zipfile
src, out = sys.argv[1], sys.argv[2]
for path in sorted(glob.glob(src + "/*.npz"))[:3]:
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            data = z.read(name)
            if len(data) <= 16384:
                stem = os.path.basename(path)[:-4]
                open(os.path.join(out, stem + "_" + name), "wb").write(data)
PY

tile_coll=$("$bin" -q stats "$work/tile.tpug" --json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(next(iter(d["collections"])) if isinstance(d.get("collections"), dict) else "tile:xla")' \
  2>/dev/null || echo tile:xla)
tp train --dataset "$work/tile.tpug" --collection "$tile_coll" --train-split train \
  --valid-split train --epochs 1 --hidden-dim 8 --num-layers 1 --opcode-embedding-dim 4 \
  --head-hidden-dim 8 --output "$work/tile.tpm" --seed 1 2>/dev/null || true
tp train --dataset "$work/layout.tpug" --collection layout:synth:random --epochs 1 \
  --hidden-dim 8 --num-layers 1 --opcode-embedding-dim 4 --head-hidden-dim 8 \
  --output "$work/layout.tpm" --seed 1 2>/dev/null || true
for f in "$work"/*.tpm "$work"/*.ckpt; do
  [ -f "$f" ] && cp "$f" "$out/model_file/"
done

tp predict --data "$work/layout.tpug" --baseline random --format scores -o "$work/layout.tsv"
tp predict --data "$work/tile.tpug" --baseline random --format scores -o "$work/tile.tsv"
tp predict --data "$work/layout.tpug" --baseline random --format kaggle -o "$work/layout.csv"
tp predict --data "$work/tile.tpug" --baseline random --format kaggle -o "$work/tile.csv"
cp "$work/layout.tsv" "$work/tile.tsv" "$out/predictions/"
cp "$work/layout.csv" "$work/tile.csv" "$out/submission/"

cp "$real"/eval_indices/xla_*.json "$out/eval_indices/"
cp tools/configs/*.textproto "$out/train_config/"

for h in "$out"/*/; do
  echo "make-fuzz-corpus: $(basename "$h"): $(find "$h" -type f | wc -l) files," \
    "$(du -sk "$h" | cut -f1) KB" >&2
done
