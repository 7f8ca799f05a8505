"""Bad input raises tpugraphs.Error (a RuntimeError) with the CLI's message; nothing crashes."""

import shutil

import numpy as np
import pytest

import tpugraphs as tg


def cli_error(cli, *args):
    r = cli.run(*args, check=False)
    assert r.returncode == 1, r.stderr
    prefix = f"tpugraphs {args[0]}: error: "
    line = [l for l in r.stderr.splitlines() if l.startswith(prefix)][-1]
    return line[len(prefix):]


def test_error_is_a_runtime_error():
    assert issubclass(tg.Error, RuntimeError)


def test_missing_dataset_has_the_cli_message(cli, tmp_path):
    missing = tmp_path / "missing.tpug"
    with pytest.raises(tg.Error) as e:
        tg.Dataset(str(missing))
    assert str(e.value) == cli_error(cli, "stats", missing)
    assert str(missing) in str(e.value)


@pytest.mark.parametrize("keep", [0, 10, 100, 0.5, 0.9, -1])
def test_truncated_dataset(real_dataset, tmp_path, keep):
    data = real_dataset[0].read_bytes()
    n = int(len(data) * keep) if isinstance(keep, float) else (keep if keep >= 0 else len(data) - 1)
    bad = tmp_path / "bad.tpug"
    bad.write_bytes(data[:n])
    with pytest.raises(tg.Error) as e:
        tg.Dataset(str(bad))
    assert str(bad) in str(e.value)


def test_corrupted_records_raise_when_read(real_dataset, tmp_path):
    data = bytearray(real_dataset[0].read_bytes())
    # Flip bytes inside the records (the index and footer at the end stay intact).
    for at in range(64, len(data) // 2, 997):
        data[at] ^= 0x5A
    bad = tmp_path / "flipped.tpug"
    bad.write_bytes(bytes(data))
    ds = tg.Dataset(str(bad))
    failures = 0
    for i in range(len(ds)):
        try:
            g = ds.graph_at(i)
            if g.kind == "layout":
                g.layout_config_feat()
        except tg.Error as e:
            assert str(bad) in str(e)
            failures += 1
    assert failures > 0


def test_wrong_graph_name_and_index(real_dataset):
    ds = tg.Dataset(str(real_dataset[0]))
    with pytest.raises(tg.Error, match="no graph matches graph nope"):
        ds.graph("nope")
    with pytest.raises(tg.Error, match="no graph matches"):
        ds.graph("unet_3d.4x4.bf16", collection="layout:xla:random")
    with pytest.raises(tg.Error, match="out of range"):
        ds.graph_at(len(ds))
    with pytest.raises(tg.Error, match="out of range"):
        ds.info(-len(ds) - 1)
    with pytest.raises(tg.Error, match="collection"):
        list(ds.graphs(collection="not a collection"))


def test_config_indices_out_of_range(real_dataset, sample_dataset, layout_models):
    ds = tg.Dataset(str(real_dataset[0]))
    g = ds.graph("openai_v0_rnn_optimized")
    with pytest.raises(tg.Error, match=r"config index .* out of range"):
        g.layout_config_feat([0, g.num_configs])
    with pytest.raises(tg.Error, match="out of range"):
        g.layout_config_feat([-1])
    model = tg.Model(str(layout_models["a"]))
    sg = next(tg.Dataset(str(sample_dataset)).graphs(collection="layout:synth:random"))
    with pytest.raises(tg.Error, match="out of range"):
        model.score(sg, [sg.num_configs])


def test_bad_model_files(cli, real_dataset, layout_models, tmp_path):
    with pytest.raises(tg.Error) as e:
        tg.Model(str(tmp_path / "missing.tpm"))
    assert str(tmp_path / "missing.tpm") in str(e.value)
    data = layout_models["a"].read_bytes()
    bad = tmp_path / "truncated.tpm"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(tg.Error) as e:
        tg.Model(str(bad))
    assert str(e.value) == cli_error(cli, "predict", "--data", real_dataset[0], "--model", bad,
                                     "--output", tmp_path / "o.csv")
    not_a_model = tmp_path / "dataset.tpm"
    shutil.copy(real_dataset[0], not_a_model)
    with pytest.raises(tg.Error):
        tg.Model(str(not_a_model))
    with pytest.raises(tg.Error, match="zscore"):
        tg.Model(str(layout_models["a"]), ensemble="median")


def test_bad_metric_input():
    with pytest.raises(tg.Error, match="length"):
        tg.metrics.kendall_tau([1, 2, 3], [1, 2])
    with pytest.raises(tg.Error, match="NaN"):
        tg.metrics.opa([1, np.nan], [1, 2])
    with pytest.raises(tg.Error, match="1-D"):
        tg.metrics.kendall_tau(np.zeros((2, 2)), np.zeros((2, 2)))
    with pytest.raises(tg.Error, match="k must be"):
        tg.metrics.top_k_slowdown([1, 2], [1, 2], k=0)


def test_ingest_errors(tmp_path):
    with pytest.raises(tg.Error) as e:
        tg.ingest([str(tmp_path / "nothing_here")], str(tmp_path / "o.tpug"))
    assert "nothing_here" in str(e.value)
    assert not (tmp_path / "o.tpug").exists()
