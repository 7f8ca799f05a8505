# shellcheck shell=bash
# The machine a benchmark ran on, printed with its figures (sourced by tools/bench/bench-*.sh and
# tools/bench-*.sh; the Python benchmarks use tools/lib/bench_machine.py, which prints the same
# lines).
#
#   bench_machine_header   at the start of measuring: CPU model, vector extensions, cores and the
#                          1-minute load average; a WARNING when that load is above 0.5
#   bench_machine_footer   at the end: the 1-minute load average again
#   bench_machine_json     the same as one JSON object on stdout:
#                          {"cpu": ..., "vector_extensions": [...], "cores": N,
#                           "load_at_start": x, "load_at_end": y}
#   bench_reference CMD... runs a reference (PyTorch, numpy, scipy) with OPENBLAS_CORETYPE and
#                          OPENBLAS_L2_SIZE unset, so that OpenBLAS picks its best kernel for
#                          this CPU (with them it ran an older one: reported 220 against 410 GFLOP/s of
#                          float32 GEMM on an AVX-512 EPYC). Only the reference: never exported.
#
# The header and footer go to stderr (results go to stdout). For tests the inputs can be
# replaced: BENCH_MACHINE_LOADAVG_FILE (default /proc/loadavg) and BENCH_MACHINE_CPUINFO_FILE
# (default /proc/cpuinfo).

BENCH_MACHINE_MAX_LOAD=0.5
BENCH_MACHINE_LOAD_START=""
BENCH_MACHINE_LOAD_END=""

bench_machine_cpu() {  # the first "model name" of cpuinfo
  local m
  m=$(awk -F': *' '/^model name/ {print $2; exit}' "${BENCH_MACHINE_CPUINFO_FILE:-/proc/cpuinfo}" \
    2>/dev/null || true)
  echo "${m:-unknown}"
}

bench_machine_vector_extensions() {  # which of the extensions that matter are in the flags
  awk '/^flags/ {
      for (i = 3; i <= NF; i++) { have[$i] = 1; if ($i ~ /^amx/) amx = amx " " $i }
      n = split("sse4_2 avx avx2 fma avx512f avx512bw avx512vl avx512_bf16 avx512_vnni", want, " ")
      out = ""
      for (i = 1; i <= n; i++) if (want[i] in have) out = out " " want[i]
      print substr(out amx, 2)
      exit
    }' "${BENCH_MACHINE_CPUINFO_FILE:-/proc/cpuinfo}" 2>/dev/null || true
}

bench_machine_load() {  # the 1-minute load average
  local l
  l=$(cut -d' ' -f1 "${BENCH_MACHINE_LOADAVG_FILE:-/proc/loadavg}" 2>/dev/null || true)
  echo "${l:-unknown}"
}

bench_machine_header() {
  local ext
  ext=$(bench_machine_vector_extensions)
  BENCH_MACHINE_LOAD_START=$(bench_machine_load)
  {
    echo "== machine: $(bench_machine_cpu); vector extensions: ${ext:-none}; $(nproc) cores"
    echo "== load average (1 min) at start: $BENCH_MACHINE_LOAD_START"
    if awk -v l="$BENCH_MACHINE_LOAD_START" -v m="$BENCH_MACHINE_MAX_LOAD" \
      'BEGIN {exit !(l + 0 > m + 0)}'; then
      echo "WARNING: load average $BENCH_MACHINE_LOAD_START > $BENCH_MACHINE_MAX_LOAD at start:" \
        "figures taken beside other work were 3-5x off; rerun on an idle machine"
    fi
  } >&2
}

bench_machine_footer() {
  BENCH_MACHINE_LOAD_END=$(bench_machine_load)
  {
    echo "== load average (1 min) at end: $BENCH_MACHINE_LOAD_END" \
      "(at start: ${BENCH_MACHINE_LOAD_START:-not taken}; the benchmark's own threads count too)"
    if awk -v l="${BENCH_MACHINE_LOAD_START:-0}" -v m="$BENCH_MACHINE_MAX_LOAD" \
      'BEGIN {exit !(l + 0 > m + 0)}'; then
      echo "WARNING: the machine was busy at start (load $BENCH_MACHINE_LOAD_START):" \
        "these figures are not an idle machine's"
    fi
  } >&2
}

_bench_machine_number() { case "$1" in '' | *[!0-9.]*) echo null ;; *) echo "$1" ;; esac; }

bench_machine_json() {
  local cpu ext end
  cpu=$(bench_machine_cpu | sed 's/\\/\\\\/g; s/"/\\"/g')
  ext=$(bench_machine_vector_extensions |
    awk '{for (i = 1; i <= NF; i++) printf "%s\"%s\"", (i > 1 ? ", " : ""), $i}')
  end=${BENCH_MACHINE_LOAD_END:-$(bench_machine_load)}
  printf '{"cpu": "%s", "vector_extensions": [%s], "cores": %d, "load_at_start": %s, "load_at_end": %s}\n' \
    "$cpu" "$ext" "$(nproc)" "$(_bench_machine_number "$BENCH_MACHINE_LOAD_START")" \
    "$(_bench_machine_number "$end")"
}

bench_reference() {
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$@"
}
