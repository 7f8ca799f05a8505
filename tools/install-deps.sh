#!/usr/bin/env bash
# Installs the Debian packages tpugraphs needs to build, test and benchmark.
# Safe to run repeatedly: packages already present are skipped without touching apt.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libprotobuf-dev protobuf-compiler
  libeigen3-dev libcli11-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev libdeflate-dev
  python3-numpy python3-scipy
  # OpenBLAS for numpy and PyTorch: the references our speed is compared with run at their best
  # (Debian's reference BLAS is several times slower at GEMM).
  libopenblas0-pthread
  time bc  # GNU time (/usr/bin/time) and bc: tools/bench-release.sh, bench-ingest-memory.sh and their tests
  # The Python module (docs/python.md): pybind11 and the headers of /usr/bin/python3, pytest for
  # tests/python; torch for tpugraphs.torch, its tests and tools/examples/train_layout_torch.py
  # (about 150 MB to download; those tests are skipped when it is absent).
  pybind11-dev python3-pybind11 python3-dev python3-pytest python3-torch
  # `pip install .` and `python3 -m build --wheel` of the module (pyproject.toml, setup.py)
  # without a package index: venvs with pip, the setuptools back-end, wheel and build.
  python3-venv python3-pip python3-setuptools python3-wheel python3-build
  libopenmpi-dev openmpi-bin  # MPI: data-parallel train/evaluate/predict (docs/distributed.md)
  clang libclang-rt-dev  # libFuzzer and the sanitizer runtimes for tools/dev/fuzz.sh
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present" >&2
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
