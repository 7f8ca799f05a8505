"""tg.metrics against scipy, brute force and `tpugraphs evaluate --json`."""

import json

import numpy as np
import pytest
import scipy.stats

import tpugraphs as tg


def opa_brute(scores, runtimes):
    s, r = np.asarray(scores, float), np.asarray(runtimes, float)
    ordered = r[:, None] > r[None, :]
    return (ordered & (s[:, None] > s[None, :])).sum() / ordered.sum()


def top_k_brute(scores, runtimes, k):
    order = np.argsort(np.asarray(scores), kind="stable")[:k]
    r = np.asarray(runtimes, float)
    return r[order].min() / r.min() - 1


@pytest.mark.parametrize("seed", range(8))
def test_kendall_tau_equals_scipy_tau_b_with_ties(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 400))
    scores = rng.integers(0, 12, n).astype(float)  # many ties in both
    runtimes = rng.integers(0, 9, n) * 1000.0
    expected = scipy.stats.kendalltau(scores, runtimes).statistic
    assert tg.metrics.kendall_tau(scores, runtimes) == pytest.approx(expected, abs=1e-12)
    cont = rng.normal(size=n)
    assert tg.metrics.kendall_tau(cont, runtimes) == pytest.approx(
        scipy.stats.kendalltau(cont, runtimes).statistic, abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_opa_and_top_k_equal_brute_force(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(2, 300))
    scores = rng.integers(0, 20, n).astype(float)
    runtimes = rng.integers(1, 50, n).astype(float)
    assert tg.metrics.opa(scores, runtimes) == pytest.approx(opa_brute(scores, runtimes))
    for k in (1, 5, 10, n + 3):
        expected = top_k_brute(scores, runtimes, k)
        assert tg.metrics.top_k_slowdown(scores, runtimes, k=k) == pytest.approx(expected)
        assert tg.metrics.tile_top_k_error(scores, runtimes, k=k) == pytest.approx(expected)


def test_undefined_cases_are_nan_like_scipy():
    assert np.isnan(tg.metrics.kendall_tau([1.0], [2.0]))
    assert np.isnan(tg.metrics.kendall_tau([1, 1, 1], [1, 2, 3]))
    assert np.isnan(tg.metrics.opa([1, 2, 3], [5, 5, 5]))


def test_metrics_equal_evaluate_json_per_graph(cli, sample_dataset, layout_models, tmp_path):
    ds = tg.Dataset(str(sample_dataset))
    model = tg.Model(str(layout_models["a"]))
    r = cli.run("evaluate", "--data", sample_dataset, "--collection", "layout:synth:random",
                "--model", layout_models["a"], "--json", "--per-graph")
    graphs = json.loads(r.stdout)["graphs"]
    assert len(graphs) == 12
    for row in graphs:
        g = ds.graph(row["graph"], collection=row["collection"])
        scores, runtimes = model.score(g), g.normalized_runtime
        assert tg.metrics.kendall_tau(scores, runtimes) == row["kendall_tau"]
        assert tg.metrics.opa(scores, runtimes) == row["opa"]
        for k, v in row["top_k_slowdown"].items():
            assert tg.metrics.top_k_slowdown(scores, runtimes, k=int(k)) == v
