"""PyTorch access to tpugraphs datasets (needs torch; Debian's python3-torch).

    from torch.utils.data import DataLoader
    from tpugraphs.torch import LayoutDataset
    ds = LayoutDataset("sample.tpug", collection="layout:synth:random", split="train",
                       num_configs=32)
    for item in DataLoader(ds, batch_size=None, shuffle=True, num_workers=2):
        item["node_feat"], item["config_feat"], item["config_runtime"]   # tensors

Each item is one graph with a sample of its configurations. Each worker process opens the
dataset file itself and decodes one graph at a time, so memory stays bounded by one graph plus
the configurations asked for, per worker. See docs/python.md.
"""

import os

import numpy as np
import torch

from . import Dataset


class LayoutDataset(torch.utils.data.Dataset):
    """The layout graphs of a dataset file, one item per graph.

    Args:
      path: the dataset file (.tpug).
      collection, split: only graphs of this collection / split (None: any). Tile graphs are
        always left out.
      num_configs: configurations per item (all of a graph's when it has fewer; None: all).
      seed: None draws each item's configurations from torch's random generator (different in
        every worker and epoch under a DataLoader); an int makes item i's sample depend only on
        (seed, epoch, i) (see set_epoch).

    An item is a dict: name, collection (str); node_feat float32 [n, 140], node_opcode int64
    [n], edge_index int64 [m, 2] (row = consumer, producer), node_config_ids int64 [nc],
    node_splits int64 [k]; config_indices int64 [s], config_feat int8 [s, nc, 18] (the layout
    values of those configurations) and config_runtime int64 [s]. Use batch_size=None in the
    DataLoader (graphs differ in size).
    """

    def __init__(self, path, collection=None, split=None, num_configs=32, seed=None):
        if num_configs is not None and num_configs < 1:
            raise ValueError(f"num_configs must be at least 1 or None, got {num_configs}")
        self.path = os.fspath(path)
        self.num_configs = num_configs
        self.seed = seed
        self.epoch = 0
        ds = Dataset(self.path)
        self.indices = [i for i in ds.indices(collection or "", split or "")
                        if ds.info(i)["kind"] == "layout" and ds.info(i)["num_configs"] > 0]
        self._ds = None
        self._pid = None

    def set_epoch(self, epoch):
        """With a fixed seed, draws other configurations in the next epoch."""
        self.epoch = int(epoch)

    def __len__(self):
        return len(self.indices)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_ds"] = None  # a worker opens the file itself
        state["_pid"] = None
        return state

    def _dataset(self):
        if self._ds is None or self._pid != os.getpid():
            self._ds = Dataset(self.path)
            self._pid = os.getpid()
        return self._ds

    def sample(self, item, num_configs):
        """The configuration indices drawn for `item` out of `num_configs`."""
        k = num_configs if self.num_configs is None else min(self.num_configs, num_configs)
        if self.seed is None:
            perm = torch.randperm(num_configs)
        else:
            gen = torch.Generator()
            gen.manual_seed((self.seed * 1000003 + self.epoch) * 1000003 + item)
            perm = torch.randperm(num_configs, generator=gen)
        return np.sort(perm[:k].numpy())

    def __getitem__(self, item):
        if item < 0:
            item += len(self.indices)
        g = self._dataset().graph_at(self.indices[item])
        picks = self.sample(item, g.num_configs)
        return {
            "name": g.name,
            "collection": g.collection,
            "node_feat": torch.from_numpy(g.node_feat),
            "node_opcode": torch.from_numpy(g.node_opcode.astype(np.int64)),
            "edge_index": torch.from_numpy(g.edge_index),
            "node_config_ids": torch.from_numpy(g.node_config_ids),
            "node_splits": torch.from_numpy(g.node_splits.reshape(-1)),
            "config_indices": torch.from_numpy(picks.astype(np.int64)),
            "config_feat": torch.from_numpy(g.layout_config_feat(picks.tolist())),
            "config_runtime": torch.from_numpy(g.config_runtime[picks]),
        }


__all__ = ["LayoutDataset"]
