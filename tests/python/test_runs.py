"""tpugraphs.train, tune, evaluate and synth against the commands with the same options: the same
models, configurations, metrics and files; keyword errors; the log through `logging`; the GIL."""

import json
import logging
import threading

import numpy as np
import pytest

import tpugraphs as tg

COLLECTION = "layout:synth:random"
SMALL = {"collection": COLLECTION, "epochs": 2, "configs_per_graph": 16, "hidden_dim": 8,
         "num_layers": 1, "head_hidden_dim": 8, "seed": 5, "learning_rate": 0.003,
         "layout_size_features": True}


def flags(options):
    out = []
    for k, v in options.items():
        out += ["--" + k.replace("_", "-"), str(v).lower() if isinstance(v, bool) else str(v)]
    return out


def cli_result(stdout):
    return dict(line.split("\t", 1) for line in stdout.strip().splitlines())


def all_scores(model_path, dataset):
    model = tg.Model(str(model_path), threads=2)
    return {g.name: model.score(g) for g in tg.Dataset(str(dataset)).graphs(collection=COLLECTION)}


def test_train_equals_the_command(cli, sample_dataset, tmp_path):
    r = cli.run("-j", "2", "train", "--dataset", sample_dataset, "--output", tmp_path / "cli.tpm",
                *flags(SMALL))
    expected = cli_result(r.stdout)
    got = tg.train(dataset=str(sample_dataset), output=tmp_path / "py.tpm", threads=2, **SMALL)
    assert got["model"] == str(tmp_path / "py.tpm")
    assert got["epochs"] == int(expected["epochs"])
    assert got["best_epoch"] == int(expected["best_epoch"])
    assert f"{got['best_metric']:.6g}" == expected[got["metric"]]
    a, b = all_scores(tmp_path / "cli.tpm", sample_dataset), all_scores(tmp_path / "py.tpm",
                                                                       sample_dataset)
    assert a.keys() == b.keys() and len(a) == 12
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


def test_train_reads_a_config_file_and_keywords_override_it(sample_dataset, tmp_path):
    (tmp_path / "c.textproto").write_text("epochs: 7\nmodel { hidden_dim: 8 num_layers: 1 }\n")
    got = tg.train(config=tmp_path / "c.textproto", dataset=str(sample_dataset), epochs=1,
                   collection=COLLECTION, configs_per_graph=8, output=str(tmp_path / "m.tpm"))
    assert got["epochs"] == 1 and len(got["epoch_loss"]) == 1


def test_evaluate_equals_the_command(cli, sample_dataset, layout_models):
    models = [str(layout_models["a"]), str(layout_models["b"])]
    r = cli.run("-j", "2", "evaluate", "--data", sample_dataset, "--model", models[0], "--model",
                models[1], "--collection", COLLECTION, "--json", "--per-graph")
    got = tg.evaluate(data=str(sample_dataset), model=models, collection=COLLECTION,
                      per_graph=True, threads=2)
    assert got == json.loads(r.stdout)
    r = cli.run("evaluate", "--data", sample_dataset, "--baseline", "random", "--seed", "3",
                "--json")
    assert tg.evaluate(str(sample_dataset), baseline="random", seed=3) == json.loads(r.stdout)


def test_tune_equals_the_command(cli, sample_dataset, layout_models, tmp_path):
    graph = next(tg.Dataset(str(sample_dataset)).graphs(collection=COLLECTION)).name
    options = {"budget": 200, "top": 4, "seed": 9}
    r = cli.run("-j", "2", "tune", "--data", sample_dataset, "--model", layout_models["a"],
                "--graph", graph, "-o", tmp_path / "cli.npz", "--json", *flags(options))
    got = tg.tune(data=str(sample_dataset), model=str(layout_models["a"]), graph=[graph],
                  output=str(tmp_path / "py.npz"), threads=2, **options)
    expected = json.loads(r.stdout)
    assert len(got) == 1
    for d in (expected, got[0]):
        for timing in ("seconds", "configs_per_second", "output"):
            d.pop(timing)
    assert got[0] == expected
    assert (tmp_path / "cli.npz").read_bytes() == (tmp_path / "py.npz").read_bytes()


def test_tune_loop_equals_the_command(cli, sample_dataset, layout_models, tmp_path):
    """The closed loop (measure_cmd=...) from Python: the same trace and the same output file."""
    graph = next(tg.Dataset(str(sample_dataset)).graphs(collection=COLLECTION)).name
    measurer = tmp_path / "measure.py"
    # A deterministic stand-in for hardware: a runtime from the configuration's values.
    measurer.write_text(
        "import sys, numpy as np\n"
        "f = np.load(sys.argv[1])['node_config_feat'].astype(np.int64)\n"
        "w = np.arange(1, f[0].size + 1).reshape(f[0].shape) % 7\n"
        "for i in range(f.shape[0]):\n"
        "    print(f'{i}\\t{1000 + int(((f[i] + 1) * w).sum())}')\n")
    options = {"budget": 100, "measure": 3, "rounds": 2, "finetune_steps": 5, "seed": 9,
               "measure_cmd": f"/usr/bin/python3 {measurer} {{}}"}
    r = cli.run("tune", "--data", sample_dataset, "--model", layout_models["a"], "--graph", graph,
                "-o", tmp_path / "cli.npz", "--json", *flags(options))
    got = tg.tune(data=str(sample_dataset), model=str(layout_models["a"]), graph=[graph],
                  output=str(tmp_path / "py.npz"), **options)
    expected = json.loads(r.stdout)
    assert [x["measured"] for x in got[0]["rounds"]] == [3, 6]
    for d in (expected, got[0]):
        d.pop("seconds")
        d.pop("output")
        for x in d["rounds"]:
            x.pop("model_seconds")
            x.pop("measure_seconds")
    assert got[0] == expected
    assert (tmp_path / "cli.npz").read_bytes() == (tmp_path / "py.npz").read_bytes()


def test_synth_equals_the_command(cli, tmp_path):
    options = {"task": "layout", "graphs": 3, "min_nodes": 60, "max_nodes": 120, "configs": 20,
               "seed": 4}
    r = cli.run("-j", "2", "synth", "-o", tmp_path / "cli", "--noise-free-costs",
                tmp_path / "cli.tsv", "--splits", "0.34,0.33,0.33", *flags(options))
    got = tg.synth(output=str(tmp_path / "py"), noise_free_costs=str(tmp_path / "py.tsv"),
                   splits=[0.34, 0.33, 0.33], threads=2, **options)
    rows = [line.split("\t") for line in r.stdout.strip().splitlines()[1:]]
    assert [(g["split"], g["name"], g["nodes"]) for g in got] == [
        (row[0], row[1], int(row[2])) for row in rows]
    cli_files = sorted(p.relative_to(tmp_path / "cli") for p in (tmp_path / "cli").rglob("*.pb"))
    py_files = sorted(p.relative_to(tmp_path / "py") for p in (tmp_path / "py").rglob("*.pb"))
    assert cli_files == py_files and len(cli_files) == 3
    for rel in cli_files:
        assert (tmp_path / "cli" / rel).read_bytes() == (tmp_path / "py" / rel).read_bytes()
    assert (tmp_path / "cli.tsv").read_text() == (tmp_path / "py.tsv").read_text()


def test_errors_carry_their_kind(sample_dataset, tmp_path):
    with pytest.raises(tg.Error, match="unknown keyword 'hiden_dim'") as e:
        tg.train(dataset=str(sample_dataset), output=str(tmp_path / "m.tpm"), hiden_dim=8)
    assert e.value.code == "usage_error"
    with pytest.raises(tg.Error, match="usage: epochs: expected an integer") as e:
        tg.train(dataset=str(sample_dataset), output=str(tmp_path / "m.tpm"), epochs="many")
    assert e.value.code == "usage_error"
    with pytest.raises(tg.Error, match="no graph matches collection layout:xla:default") as e:
        tg.evaluate(str(sample_dataset), baseline="random", collection="layout:xla:default")
    assert e.value.code == "no_matching_graphs"
    assert not (tmp_path / "m.tpm").exists()


def test_progress_and_log_go_to_logging(sample_dataset, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="tpugraphs"):
        tg.train(dataset=str(sample_dataset), output=str(tmp_path / "m.tpm"), **SMALL)
    messages = [r.getMessage() for r in caplog.records if r.name == "tpugraphs"]
    assert any("epoch" in m for m in messages), messages[:5]
    assert all(r.levelno >= logging.INFO for r in caplog.records if r.name == "tpugraphs")


def test_train_releases_the_gil(sample_dataset, tmp_path):
    done = threading.Event()

    def run():
        try:
            tg.train(dataset=str(sample_dataset), output=str(tmp_path / "m.tpm"),
                     **{**SMALL, "epochs": 3})
        finally:
            done.set()

    worker = threading.Thread(target=run)
    worker.start()
    spins = 0
    while not done.is_set():
        spins += 1
    worker.join()
    # With the GIL held for the whole run this loop could not have turned while training.
    assert spins > 1000
