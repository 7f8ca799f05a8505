#!/usr/bin/env bash
# Peak memory and step time of `tpugraphs train` on one synthetic layout graph of growing size,
# with Graph Segment Training off (whole graph forward and backward) and on (segments + history
# table), docs/gst.md. For every size N: `synth --nodes N`, `ingest`, then one training run per
# mode (1 graph per step, so every epoch is one optimizer step; no validation). Peak RSS comes
# from /usr/bin/time; the step time is the median of the per-epoch times after the first epoch
# (the first GST epoch also fills the history table). A watchdog kills a run whose RSS exceeds
# --limit-gb and reports it.
#
# Usage: tools/bench/bench-gst.sh [--sizes "10000 50000 100000 200000"] [--configs-per-graph 16]
#                           [--segment-size 2000] [--epochs 5] [--threads 1] [--limit-gb 20]
#                           [--work DIR]
# Prints a Markdown table on stdout; logs on stderr.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
# shellcheck source=tools/lib/bench-machine.sh
source tools/lib/bench-machine.sh
sizes="10000 50000 100000 200000"
k=16
seg=2000
epochs=5
threads=1
limit_gb=20
work=""
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) sizes="$2"; shift ;;
    --configs-per-graph) k="$2"; shift ;;
    --segment-size) seg="$2"; shift ;;
    --epochs) epochs="$2"; shift ;;
    --threads) threads="$2"; shift ;;
    --limit-gb) limit_gb="$2"; shift ;;
    --work) work="$2"; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "bench-gst.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
# The binary of BUILD_DIR, the build being measured.
here=$(pwd)
# shellcheck source=tools/lib/tpugraphs-binary.sh
source "$here/tools/lib/tpugraphs-binary.sh"
if [ ! -x "$BUILD_DIR/tpugraphs" ]; then bash tools/build.sh --target tpugraphs; fi
BIN=$(tpugraphs_binary)
if [ -z "$work" ]; then
  work=$(mktemp -d /tmp/bench-gst.XXXXXX)
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"
limit_kb=$((limit_gb * 1024 * 1024))
bench_machine_header

# run_watched LOG CMD...: runs CMD under /usr/bin/time, killing it if its RSS exceeds the limit.
# Prints "<peak_kb> <status>" (status: ok, killed or failed).
run_watched() {
  local log="$1"; shift
  /usr/bin/time -f "peak_kb=%M" "$@" >"$log.out" 2>"$log" &
  local tpid=$!
  local status=ok
  while kill -0 "$tpid" 2>/dev/null; do
    local child
    child=$(pgrep -P "$tpid" | head -1 || true)
    if [ -n "$child" ]; then
      local rss
      rss=$(awk '/^VmRSS/ {print $2}' "/proc/$child/status" 2>/dev/null || echo 0)
      if [ "${rss:-0}" -gt "$limit_kb" ]; then
        kill "$child" 2>/dev/null || true
        status=killed
      fi
    fi
    sleep 0.5
  done
  wait "$tpid" || { [ "$status" = ok ] && status=failed; }
  local peak
  peak=$(sed -n 's/.*peak_kb=\([0-9]*\).*/\1/p' "$log" | tail -1)
  echo "${peak:-0} $status"
}

echo "| nodes | edges | configurable | GST | peak RSS | step time (s) | segments |"
echo "|---:|---:|---:|---|---:|---:|---:|"
for n in $sizes; do
  d="$work/n$n"
  if [ ! -f "$d.tpug" ]; then
    echo "== synth + ingest $n nodes" >&2
    "$BIN" -q -j"$threads" synth -o "$d" --graphs 1 --nodes "$n" --configs 64 --seed 1 >/dev/null
    "$BIN" -q ingest "$d/pb/layout/synth/random/train" --collection layout:synth:random \
      -o "$d.tpug" >/dev/null
  fi
  read -r edges cnodes < <("$BIN" -q stats "$d.tpug" --json | /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin)
def find(o, key):
    if isinstance(o, dict):
        if key in o and isinstance(o[key], (int, float)): return o[key]
        for v in o.values():
            r = find(v, key)
            if r is not None: return r
    if isinstance(o, list):
        for v in o:
            r = find(v, key)
            if r is not None: return r
    return None
print(find(j, "edges") or find(j, "num_edges") or "?", find(j, "config_nodes") or find(j, "num_config_nodes") or "?")
' 2>/dev/null || echo "? ?")
  for mode in off on; do
    args=(--gst "$mode")
    nseg=1
    if [ "$mode" = on ]; then
      args+=(--segment-size "$seg")
      nseg="~$(( (n + seg - 1) / seg ))"
    fi
    echo "== train $n nodes, gst $mode" >&2
    log="$work/train_${n}_$mode.log"
    read -r peak status < <(run_watched "$log" "$BIN" -j"$threads" train --dataset "$d.tpug" \
      --train-split "" --valid-split "" --output "$work/m_${n}_$mode.tpum" \
      --epochs "$epochs" --batch-graphs 1 --configs-per-graph "$k" --patience 0 \
      --checkpoint-interval-seconds 1e9 --seed 1 "${args[@]}")
    step=$(grep -o 'time=[0-9.]*s' "$log" | tail -n +2 | tr -d 'time=s' | sort -g |
      awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "-"}')
    peak_mb=$(awk -v p="$peak" 'BEGIN {printf "%.0f MB", p / 1024}')
    if [ "$status" != ok ]; then
      step="$status ($(grep -m1 -o 'error.*' "$log" || echo "RSS over ${limit_gb} GB"))"
    fi
    echo "| $n | $edges | $cnodes | $mode | $peak_mb | $step | $nseg |"
  done
done
echo
echo "(configs per step $k, segment size $seg, -j$threads, $(nproc) cores, $(date -u +%F))"
bench_machine_footer
