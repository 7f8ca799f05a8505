"""The scripts docs/python.md tells a user to run: the PyTorch example and the benchmark."""

import os
import subprocess

import pytest

from conftest import BUILD, REPO


def test_example_trains_and_compares(tmp_path):
    pytest.importorskip("torch")
    r = subprocess.run(["/usr/bin/python3", str(REPO / "tools/examples/train_layout_torch.py"),
                        "--build", str(BUILD), "--epochs", "1", "--configs", "8",
                        "--train-epochs", "1", "--work", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    torch_row = [l for l in lines if l.startswith("PyTorch GNN")]
    ours_row = [l for l in lines if l.startswith("tpugraphs train (tg.Model)")]
    assert len(torch_row) == 1 and len(ours_row) == 1, r.stdout
    for row in torch_row + ours_row:
        tau, slowdown = map(float, row.split()[-2:])
        assert -1 <= tau <= 1 and slowdown >= 0


def test_benchmark_runs_at_small_scale(tmp_path):
    r = subprocess.run(["/usr/bin/python3", str(REPO / "tools/bench/bench-python.py"), "--build",
                        str(BUILD), "--work", str(tmp_path), "--repeats", "1", "--scale", "0.01",
                        "--sample-configs", "10", "--limit-mb", "2048"],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=""))
    assert r.returncode == 0, r.stderr
    assert "speedup" in r.stdout and "peak RSS" in r.stdout and "throughput ratio" in r.stdout
    assert "FAILED under the limit" not in r.stdout
