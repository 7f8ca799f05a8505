#!/usr/bin/python3
"""Trains a plain PyTorch GNN on the layout graphs of the bundled sample through
tpugraphs.torch.LayoutDataset, evaluates it with tpugraphs.metrics, and compares it with a model
trained by `tpugraphs train`, scored in-process by tpugraphs.Model (docs/python.md).

Usage: /usr/bin/python3 tools/examples/train_layout_torch.py [--build build] [--epochs 12]
           [--work DIR] [--seed 1]
Needs the built package (bash tools/build.sh, or bash tools/install-python.sh) and torch
(Debian's python3-torch). Takes well under a minute on 2 cores.
"""

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]
COLLECTION = "layout:synth:random"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=str(REPO / "build"), help="build directory (its python/ "
                   "folder and tpugraphs binary are used)")
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--configs", type=int, default=48, help="configurations per graph and step")
    p.add_argument("--work", default=None, help="directory for the dataset and the model "
                   "(default: a temporary one)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--train-epochs", type=int, default=None,
                   help="--epochs of `tpugraphs train` (default: its recipe's)")
    return p.parse_args()


args = parse_args()
sys.path.insert(0, str(pathlib.Path(args.build) / "python"))
import torch  # noqa: E402

import tpugraphs as tg  # noqa: E402
from tpugraphs.torch import LayoutDataset  # noqa: E402


class LayoutGnn(torch.nn.Module):
    """Node features (signed log) + opcode embedding -> MLP; two rounds of mean message passing
    over the edges in both directions (configuration-independent, computed once per graph);
    then for each configuration, every configurable node's embedding joined with its 18 layout
    values -> MLP -> mean over the configurable nodes -> one score (lower = faster)."""

    def __init__(self, dim=48):
        super().__init__()
        self.opcode = torch.nn.Embedding(256, 16)
        self.embed = torch.nn.Sequential(torch.nn.Linear(140 + 16, dim), torch.nn.ReLU(),
                                         torch.nn.Linear(dim, dim))
        self.self_w = torch.nn.ModuleList([torch.nn.Linear(dim, dim) for _ in range(2)])
        self.nbr_w = torch.nn.ModuleList([torch.nn.Linear(dim, dim, bias=False)
                                          for _ in range(2)])
        self.config = torch.nn.Sequential(torch.nn.Linear(dim + 18, dim), torch.nn.ReLU(),
                                          torch.nn.Linear(dim, dim), torch.nn.ReLU())
        self.head = torch.nn.Linear(dim, 1)

    def nodes(self, item):
        feat = item["node_feat"]
        x = torch.cat([torch.sign(feat) * torch.log1p(feat.abs()),
                       self.opcode(item["node_opcode"])], dim=1)
        h = self.embed(x)                                        # [n, d]
        e = item["edge_index"]
        both = torch.cat([e, e.flip(1)], dim=0)                  # messages both ways
        deg = torch.zeros(len(h)).index_add_(0, both[:, 0], torch.ones(len(both))).clamp(min=1)
        for self_w, nbr_w in zip(self.self_w, self.nbr_w):
            agg = torch.zeros_like(h).index_add_(0, both[:, 0], h[both[:, 1]]) / deg[:, None]
            h = torch.relu(self_w(h) + nbr_w(agg))
        return h[item["node_config_ids"]]                        # [nc, d]

    def forward(self, item, config_feat, nodes=None):
        h = self.nodes(item) if nodes is None else nodes
        s = config_feat.shape[0]
        x = torch.cat([h.unsqueeze(0).expand(s, -1, -1), config_feat.float()], dim=2)
        return self.head(self.config(x).mean(dim=1)).squeeze(1)  # [s]


def pairwise_hinge(scores, runtimes):
    slower = runtimes[:, None] > runtimes[None, :]               # i slower than j
    margin = torch.relu(1.0 - (scores[:, None] - scores[None, :]))
    return (margin * slower).sum() / slower.sum().clamp(min=1)


def torch_scores(model, g, chunk=150):
    item = {"node_feat": torch.from_numpy(g.node_feat),
            "node_opcode": torch.from_numpy(g.node_opcode.astype(np.int64)),
            "edge_index": torch.from_numpy(g.edge_index),
            "node_config_ids": torch.from_numpy(g.node_config_ids)}
    out = []
    with torch.no_grad():
        nodes = model.nodes(item)
        for b in range(0, g.num_configs, chunk):
            picks = list(range(b, min(g.num_configs, b + chunk)))
            config_feat = torch.from_numpy(g.layout_config_feat(picks))
            out.append(model(item, config_feat, nodes).numpy())
    return np.concatenate(out).astype(np.float64)


def report(name, per_graph):
    taus = [t for t, _ in per_graph.values()]
    slow = [s for _, s in per_graph.values()]
    print(f"{name:<34} {np.mean(taus):>11.3f} {np.mean(slow):>14.3f}")


def main():
    torch.manual_seed(args.seed)
    # One thread: the graphs are small, and on a loaded 2-core machine two OpenMP threads that
    # wait for each other made every step 20x slower (0.44 s against 0.022 s, measured).
    torch.set_num_threads(1)
    start = time.time()
    work = pathlib.Path(args.work or tempfile.mkdtemp(prefix="tpugraphs-example-"))
    work.mkdir(parents=True, exist_ok=True)
    data = work / "sample.tpug"
    summary = tg.ingest([str(REPO / "data" / "sample")], str(data))
    print(f"ingested {summary['graphs']} graphs of data/sample into {data}")

    # The reference: a model trained by the command-line trainer (default recipe, same epochs
    # budget scale), run while the PyTorch model trains below would compete for the 2 cores, so
    # it runs first.
    tpm = work / "layout.tpm"
    t0 = time.time()
    subprocess.run([str(pathlib.Path(args.build) / "tpugraphs"), "-q", "-j", "2", "train",
                    "--dataset", str(data), "--collection", COLLECTION, "--output", str(tpm),
                    "--seed", str(args.seed)] +
                   ([] if args.train_epochs is None else ["--epochs", str(args.train_epochs)]),
                   check=True, stdout=subprocess.DEVNULL)
    print(f"tpugraphs train: {time.time() - t0:.1f} s")

    # seed=None: each item's configurations come from torch's generator, which the DataLoader
    # seeds per worker and epoch from torch.manual_seed above (reproducible, new every epoch).
    train = LayoutDataset(str(data), collection=COLLECTION, split="train",
                          num_configs=args.configs, seed=None)
    loader = torch.utils.data.DataLoader(train, batch_size=None, shuffle=True, num_workers=2,
                                         persistent_workers=True)
    model = LayoutGnn()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    t0 = time.time()
    for epoch in range(args.epochs):
        total = 0.0
        for item in loader:
            runtimes = item["config_runtime"].double()
            loss = pairwise_hinge(model(item, item["config_feat"]), runtimes)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        if epoch % 10 == 9 or epoch == args.epochs - 1:
            print(f"torch epoch {epoch + 1}: loss {total / len(train):.4f}")
    print(f"torch training ({len(train)} graphs x {args.configs} configs, {args.epochs} epochs, "
          f"DataLoader with 2 workers): {time.time() - t0:.1f} s")

    ds = tg.Dataset(str(data))
    scorer = tg.Model(str(tpm), threads=2)
    ours, theirs = {}, {}
    model.eval()
    for g in ds.graphs(collection=COLLECTION, split="test"):
        runtimes = g.normalized_runtime
        for table, scores in ((ours, torch_scores(model, g)), (theirs, scorer.score(g))):
            table[g.name] = (tg.metrics.kendall_tau(scores, runtimes),
                             tg.metrics.top_k_slowdown(scores, runtimes, k=10))
    print(f"\ntest split of {COLLECTION}: {len(ours)} graphs, all configurations")
    print(f"{'model':<34} {'kendall_tau':>11} {'slowdown@10':>14}")
    report("PyTorch GNN (this script)", ours)
    report("tpugraphs train (tg.Model)", theirs)
    print(f"\ntotal {time.time() - start:.1f} s")


if __name__ == "__main__":
    main()
