"""Model.score against `tpugraphs predict --format scores`, single models and ensembles."""

import numpy as np
import pytest

import tpugraphs as tg


def predicted_scores(cli, dataset, models, path, extra=()):
    args = ["predict", "--data", dataset, "--collection", "layout:synth:random", "--format",
            "scores", "--output", path, *extra]
    for m in models:
        args += ["--model", m]
    cli.run("-j", "2", *args)
    scores = {}
    for line in open(path):
        if line.startswith("#") or line.startswith("collection\t"):
            continue
        collection, name, config, score = line.rstrip("\n").split("\t")
        scores.setdefault(name, {})[int(config)] = float(score)
    return {name: np.array([s[i] for i in range(len(s))]) for name, s in scores.items()}


@pytest.mark.parametrize("which", [["a"], ["ens"], ["a", "b"]], ids=["single", "ensemble_file",
                                                                     "two_files"])
def test_score_equals_predict(cli, sample_dataset, layout_models, tmp_path, which):
    paths = [str(layout_models[w]) for w in which]
    expected = predicted_scores(cli, sample_dataset, paths, tmp_path / "scores.tsv")
    model = tg.Model(paths if len(paths) > 1 else paths[0], threads=2)
    ds = tg.Dataset(str(sample_dataset))
    graphs = list(ds.graphs(collection="layout:synth:random"))
    assert sorted(g.name for g in graphs) == sorted(expected)
    for g in graphs:
        ours = model.score(g)
        assert ours.dtype == np.float64 and ours.shape == (g.num_configs,)
        assert ours.tobytes() == expected[g.name].tobytes(), g.name


def test_rank_ensemble_equals_predict(cli, sample_dataset, layout_models, tmp_path):
    paths = [str(layout_models["a"]), str(layout_models["b"])]
    expected = predicted_scores(cli, sample_dataset, paths, tmp_path / "scores.tsv",
                                ["--ensemble", "rank"])
    model = tg.Model(paths, ensemble="rank")
    for g in tg.Dataset(str(sample_dataset)).graphs(collection="layout:synth:random"):
        np.testing.assert_array_equal(model.score(g), expected[g.name])


@pytest.mark.parametrize("threads", [1, 2])
def test_score_of_some_configs_is_independent_of_the_rest(sample_dataset, layout_models, threads):
    # Bit for bit, for every batch size 1..40 with the last configuration at the start, the middle
    # and the end of the batch (every packet tail of the vectorised kernels), as docs/model.md
    # promises.
    model = tg.Model(str(layout_models["a"]), threads=threads)
    g = next(tg.Dataset(str(sample_dataset)).graphs(collection="layout:synth:random"))
    full = model.score(g)
    last = g.num_configs - 1
    rng = np.random.default_rng(3)
    picks = [7, 3, 3, last]
    assert model.score(g, picks).tobytes() == full[picks].tobytes()
    for size in range(1, 41):
        for pos in sorted({0, size // 2, size - 1}):
            picks = rng.integers(0, g.num_configs, size)
            picks[pos] = last
            got = model.score(g, picks.tolist())
            assert got.tobytes() == full[picks].tobytes(), (size, pos)
