#!/usr/bin/env bash
# Layout training step speed against a PyTorch implementation of the same architecture, in one
# run: configs/s of our step (tools/bench/bench_step.cc: 16 configurations, hidden 64, 3 layers,
# one graph per step, start-up excluded) with 1 and 2 threads, of the PyTorch step
# (tools/reference/torch_reference_step.py, 2 threads, the faster of its sparse-matmul and
# index_add_ aggregations), and their ratio, on synthetic layout programs of 1k, 10k and 50k nodes
# and the real U-Net (3,163 nodes). Then the products' share of our step (perf, 10k graph), their GFLOP/s
# against a plain Eigen GEMM of the same shapes and against the machine's peak.
#
# Usage: tools/bench/bench-train.sh [--steps N] [--sizes "1000 unet 10000 50000"] [--compare DIR]...
#                             [--no-torch] [--no-perf] [--work DIR]
#   --compare DIR  also time DIR/tools/bench/bench_step (another build, e.g. portable or an older
#                  commit), 1 thread and 2 threads, in the same run
#   --work DIR     where the graphs are made (default /tmp/tpugraphs-bench-train; reused)
# The ratio is refused (printed as "n/a") when PyTorch runs on Debian's reference BLAS: select
# OpenBLAS with `update-alternatives --config libblas.so.3-x86_64-linux-gnu`.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
# shellcheck source=tools/lib/bench-machine.sh
source tools/lib/bench-machine.sh
steps=10
sizes="1000 unet 10000 50000"
work=/tmp/tpugraphs-bench-train
compare=()
torch=1
perf_on=1
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps="$2"; shift ;;
    --sizes) sizes="$2"; shift ;;
    --compare) compare+=("$2"); shift ;;
    --work) work="$2"; shift ;;
    --no-torch) torch=0 ;;
    --no-perf) perf_on=0 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "bench-train.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
BUILD_DIR="$BUILD_DIR" bash tools/build.sh --target tpugraphs bench_step
here=$(pwd)
# shellcheck source=tools/lib/tpugraphs-binary.sh
source "$here/tools/lib/tpugraphs-binary.sh"
tg=$(tpugraphs_binary)   # the binary just built
mkdir -p "$work"
unet_npz=tests/data/real/npz/release/layout/xla/default/valid/unet_3d.4x4.bf16.npz

# One dataset (.tpug) and one release .npz per size.
make_graph() {
  local size="$1" dir="$work/$1"
  [ -f "$dir/graph.tpug" ] && return
  rm -rf "$dir"
  mkdir -p "$dir"
  if [ "$size" = unet ]; then
    "$tg" -q ingest "$unet_npz" --collection layout:xla:default -o "$dir/graph.tpug" >/dev/null
    cp "$unet_npz" "$dir/graph.npz"
  else
    "$tg" -q synth --nodes "$size" --graphs 1 --configs 200 --seed 1 -o "$dir/synth" >/dev/null
    "$tg" -q ingest "$dir/synth/pb" -o "$dir/graph.tpug" >/dev/null
    "$tg" -q export "$dir/graph.tpug" -o "$dir/export" >/dev/null
    cp "$(find "$dir/export" -name '*.npz' | head -1)" "$dir/graph.npz"
  fi
}

field() { tr ' ' '\n' | sed -n "s/^$1=//p"; }

bench_machine_header
echo "# $(date -u '+%F %T UTC'); load: $(uptime | sed 's/.*load average: //'); $(nproc) cores;" \
  "$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'); build: $BUILD_DIR"
mhz=$(awk -F: '/cpu MHz/ {s += $2; n++} END {printf "%.0f", s / n}' /proc/cpuinfo)
peak=$(awk -v m="$mhz" -v c="$(nproc)" 'BEGIN {printf "%.1f", m * 32 / 1000 * c}')
echo "# peak: ${mhz} MHz x 32 float FLOP/cycle (2 FMA x 8 lanes x 2) x $(nproc) cores = $peak GFLOP/s"

printf '%-6s %7s %5s | %9s %9s' graph nodes nc ours_1t ours_2t
for d in "${compare[@]}"; do printf ' %12s %12s' "$(basename "$d")_1t" "$(basename "$d")_2t"; done
[ "$torch" = 1 ] && printf ' | %9s %6s %8s' torch blas ratio
printf '   (configs/s; ratio = ours_2t / torch)\n'

blas_seen=""
for size in $sizes; do
  make_graph "$size"
  g="$work/$size/graph.tpug"
  n=$steps
  [ "$size" = 50000 ] && n=$(( steps > 3 ? 3 : steps ))
  one=$("$BUILD_DIR/tools/bench/bench_step" "$g" --steps "$n" --warmup 1 --threads 1 --gemm 0)
  two=$("$BUILD_DIR/tools/bench/bench_step" "$g" --steps "$n" --warmup 1 --threads 2 --gemm 0)
  printf '%-6s %7s %5s | %9s %9s' "$size" "$(echo "$one" | field nodes)" \
    "$(echo "$one" | field config_nodes)" "$(echo "$one" | field configs_per_s)" \
    "$(echo "$two" | field configs_per_s)"
  for d in "${compare[@]}"; do
    c1=$("$d/tools/bench/bench_step" "$g" --steps "$n" --warmup 1 --threads 1 --gemm 0 \
      2>/dev/null | field configs_per_s)
    c2=$("$d/tools/bench/bench_step" "$g" --steps "$n" --warmup 1 --threads 2 --gemm 0 \
      2>/dev/null | field configs_per_s)
    printf ' %12s %12s' "$c1" "$c2"
  done
  if [ "$torch" = 1 ]; then
    # PyTorch steps take seconds: fewer of them (the rate is per step all the same).
    tsteps=$(( steps > 5 ? 5 : steps ))
    [ "$size" = 50000 ] && tsteps=2
    best=""
    aggs="spmm index_add"
    [ "$size" = 50000 ] && aggs=spmm  # the slower one at the smaller sizes (stderr shows both)
    for agg in $aggs; do
      # The reference alone runs with the OpenBLAS overrides unset (tools/lib/bench-machine.sh).
      out=$(bench_reference /usr/bin/python3 tools/reference/torch_reference_step.py \
        "$work/$size/graph.npz" --steps "$tsteps" --warmup 1 --threads 2 --agg "$agg" \
        2>"$work/torch.err")
      rate=$(echo "$out" | field configs_per_s)
      echo "torch $size $agg: $rate configs/s" >&2
      blas=$(echo "$out" | field blas)
      if [ -z "$best" ] || awk -v a="$rate" -v b="$best" 'BEGIN {exit !(a > b)}'; then best=$rate; fi
    done
    blas_seen=$(cat "$work/torch.err")
    ratio=$(awk -v a="$(echo "$two" | field configs_per_s)" -v b="$best" \
      'BEGIN {printf "%.1fx", a / b}')
    [ "$blas" = openblas ] || [ "$blas" = mkl ] || [ "$blas" = blis ] || ratio="n/a"
    printf ' | %9s %6s %8s' "$best" "$blas" "$ratio"
  fi
  printf '\n'
done
[ -n "$blas_seen" ] && echo "# PyTorch: $blas_seen" | tr '\n' ' ' && echo

# Profile of the step (perf, 10k graph, 1 thread) of each build: where the time goes, the
# products' share of it, and their GFLOP/s against a plain Eigen GEMM of the same shapes and the
# one-core peak.
profile() {
  local bin="$1" g="$work/10000/graph.tpug" line ms gf gemm share kern
  line=$("$bin" "$g" --steps "$steps" --threads 1)
  ms=$(echo "$line" | field ms_per_step)
  gf=$(echo "$line" | field layer_gflop_per_step)
  gemm=$(echo "$line" | field gemm_gflops)
  if ! perf record -q -F 499 -o "$work/perf.data" -- "$bin" "$g" --steps "$steps" --warmup 1 \
    --threads 1 --gemm 0 >/dev/null 2>"$work/perf.err"; then
    echo "# perf record failed: $(head -1 "$work/perf.err")"
    return
  fi
  /usr/bin/python3 tools/dev/perf-functions.py "$work/perf.data" "$bin" 12 >"$work/perf.txt"
  share=$(sed -n 's/^products=//p' "$work/perf.txt")
  kern=$(sed -n 's/^kernel=//p' "$work/perf.txt")
  echo "# $bin, 10k graph, 1 thread: $ms ms/step; layer products $gf GFLOP/step;" \
    "products ${share}% and kernel ${kern}% of the samples (start-up included)"
  awk -v ms="$ms" -v gf="$gf" -v sh="$share" -v gemm="$gemm" -v pk="$peak" -v c="$(nproc)" \
    'BEGIN {r = gf / (ms / 1000 * sh / 100); printf "#   products %.1f GFLOP/s; plain Eigen GEMM of the same shapes %.1f GFLOP/s; one-core peak %.1f GFLOP/s (products at %.0f%% of it)\n", r, gemm, pk / c, 100 * r / (pk / c)}'
  grep '%' "$work/perf.txt" | sed 's/^/#   /'
}
if [ "$perf_on" = 1 ] && command -v perf >/dev/null 2>&1 && [ -f "$work/10000/graph.tpug" ]; then
  profile "$BUILD_DIR/tools/bench/bench_step"
  for d in "${compare[@]}"; do profile "$d/tools/bench/bench_step"; done
fi
bench_machine_footer
