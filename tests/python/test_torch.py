"""tpugraphs.torch.LayoutDataset through a DataLoader with worker processes."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tpugraphs as tg  # noqa: E402
from tpugraphs.torch import LayoutDataset  # noqa: E402


def test_dataloader_with_two_workers(sample_dataset):
    ds = LayoutDataset(str(sample_dataset), collection="layout:synth:random", split="train",
                       num_configs=16, seed=7)
    plain = tg.Dataset(str(sample_dataset))
    names = {plain.info(i)["name"] for i in plain.indices("layout:synth:random", "train")}
    assert len(ds) == len(names) > 0
    loader = torch.utils.data.DataLoader(ds, batch_size=None, shuffle=True, num_workers=2)
    seen = set()
    for item in loader:
        g = plain.graph(item["name"], collection=item["collection"])
        picks = item["config_indices"].numpy()
        assert len(picks) == min(16, g.num_configs) and len(set(picks)) == len(picks)
        assert item["node_feat"].dtype == torch.float32
        assert item["node_feat"].shape == (g.num_nodes, 140)
        np.testing.assert_array_equal(item["node_feat"].numpy(), g.node_feat)
        np.testing.assert_array_equal(item["edge_index"].numpy(), g.edge_index)
        np.testing.assert_array_equal(item["node_opcode"].numpy(), g.node_opcode)
        np.testing.assert_array_equal(item["node_config_ids"].numpy(), g.node_config_ids)
        assert item["config_feat"].dtype == torch.int8
        np.testing.assert_array_equal(item["config_feat"].numpy(),
                                      g.layout_config_feat(picks.tolist()))
        np.testing.assert_array_equal(item["config_runtime"].numpy(), g.config_runtime[picks])
        seen.add(item["name"])
    assert seen == names


def test_seeded_samples_repeat_and_change_with_the_epoch(sample_dataset):
    ds = LayoutDataset(str(sample_dataset), num_configs=8, seed=3)
    first = ds[0]["config_indices"].tolist()
    assert ds[0]["config_indices"].tolist() == first
    ds.set_epoch(1)
    assert ds[0]["config_indices"].tolist() != first
    everything = LayoutDataset(str(sample_dataset), num_configs=None)
    g = everything[0]
    assert len(g["config_indices"]) == len(g["config_runtime"]) == g["config_feat"].shape[0]
