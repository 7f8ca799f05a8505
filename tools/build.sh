#!/usr/bin/env bash
# Configures and builds tpugraphs (Release, ccache when available) into ${BUILD_DIR:-build}.
# Extra arguments are passed to `cmake --build` (e.g. `--target tpugraphs`). CMAKE_ARGS (a
# space-separated list) is passed to the first configure, e.g.
# CMAKE_ARGS="-DTPUGRAPHS_SANITIZE_ADDRESS=ON" BUILD_DIR=build-asan bash tools/build.sh
# The binaries are optimised for this machine's CPU (-march=native). For binaries that run on
# other machines: TPUGRAPHS_NATIVE=OFF (x86-64-v3: AVX2 + FMA), plus
# TPUGRAPHS_PORTABLE_ARCH=generic for any x86-64 CPU; both are applied to an existing build dir.
# A build directory created here is a unity build (cmake/TpugraphsUnity.cmake: each target's
# sources compiled in batches of 8, a quarter to a half of the CPU time of a cold build); UNITY=0
# creates one that compiles file by file, quicker to rebuild after editing one file.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
launcher=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="$PWD"
  export CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
arch=()
if [ -n "${TPUGRAPHS_NATIVE:-}" ]; then arch+=(-DTPUGRAPHS_NATIVE="$TPUGRAPHS_NATIVE"); fi
if [ -n "${TPUGRAPHS_PORTABLE_ARCH:-}" ]; then
  arch+=(-DTPUGRAPHS_PORTABLE_ARCH="$TPUGRAPHS_PORTABLE_ARCH")
fi
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DTPUGRAPHS_WERROR=ON -DTPUGRAPHS_UNITY_BUILD="$([ "${UNITY:-1}" = 0 ] && echo OFF || echo ON)" \
    "${launcher[@]}" "${arch[@]}" ${CMAKE_ARGS:-} >&2
elif [ ${#arch[@]} -gt 0 ]; then
  cmake -S . -B "$BUILD_DIR" "${arch[@]}" >&2
fi
cmake --build "$BUILD_DIR" -j"$(nproc)" "$@" >&2
