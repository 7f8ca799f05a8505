"""Shared fixtures of the Python tests: the module from the build tree, the CLI binary, and small
datasets built from tests/data/real and data/sample.

The build directory is $TPUGRAPHS_BUILD_DIR, else <repository>/build. Its python/ folder holds
the package (built by `bash tools/build.sh`); it goes first on sys.path so that the tests check
this checkout's build, not an installed copy.
"""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("TPUGRAPHS_BUILD_DIR", REPO / "build")).resolve()
REAL = REPO / "tests" / "data" / "real"
SAMPLE = REPO / "data" / "sample"

if not (BUILD / "python" / "tpugraphs" / "__init__.py").exists():
    raise RuntimeError(f"no Python package in {BUILD / 'python'}: build first (bash tools/build.sh)"
                       " or set TPUGRAPHS_BUILD_DIR")
sys.path.insert(0, str(BUILD / "python"))

import tpugraphs  # noqa: E402

if not pathlib.Path(tpugraphs.__file__).resolve().is_relative_to(BUILD):
    raise RuntimeError(f"imported tpugraphs from {tpugraphs.__file__}, not from {BUILD}")


class Cli:
    """Runs the built `tpugraphs` binary."""

    def __init__(self, binary):
        self.binary = str(binary)

    def run(self, *args, check=True):
        r = subprocess.run([self.binary, "-q", *map(str, args)], capture_output=True, text=True)
        if check and r.returncode != 0:
            raise AssertionError(f"tpugraphs {' '.join(map(str, args))} exited {r.returncode}:\n"
                                 f"{r.stderr}")
        return r


@pytest.fixture(scope="session")
def cli():
    binary = BUILD / "tpugraphs"
    assert binary.exists(), f"{binary} is missing: build first"
    return Cli(binary)


@pytest.fixture(scope="session")
def release_files():
    """Every release .npz in tests/data/real/npz."""
    files = sorted((REAL / "npz").rglob("*.npz"))
    assert len(files) >= 7
    return files


@pytest.fixture(scope="session")
def real_dataset(tmp_path_factory, cli):
    """tests/data/real/npz ingested (the release tree and the loose tile test files) and
    exported again: (dataset path, export root)."""
    d = tmp_path_factory.mktemp("real")
    # Collections and splits come from the release tree's path, npz/<task>/...
    shutil.copytree(REAL / "npz" / "release", d / "tree" / "npz")
    cli.run("ingest", d / "tree" / "npz", REAL / "npz" / "tile_test", "-o", d / "real.tpug")
    cli.run("export", d / "real.tpug", "-o", d / "out")
    return d / "real.tpug", d / "out"


@pytest.fixture(scope="session")
def sample_dataset(tmp_path_factory):
    """The bundled sample (data/sample) ingested through the module."""
    d = tmp_path_factory.mktemp("sample")
    summary = tpugraphs.ingest([str(SAMPLE)], str(d / "sample.tpug"))
    assert summary["graphs"] == 42
    return d / "sample.tpug"


@pytest.fixture(scope="session")
def layout_models(tmp_path_factory, cli, sample_dataset):
    """Two tiny layout models of the sample (seeds 1 and 2) and a 2-member ensemble file."""
    d = tmp_path_factory.mktemp("models")
    common = ["--dataset", sample_dataset, "--collection", "layout:synth:random", "--epochs", "2",
              "--configs-per-graph", "16"]
    paths = {}
    for name, extra in (("a", ["--seed", "1"]), ("b", ["--seed", "2"]),
                        ("ens", ["--seed", "3", "--ensemble-members", "2"])):
        paths[name] = d / f"{name}.tpm"
        cli.run("-j", "2", "train", *common, *extra, "--output", paths[name])
    return paths
