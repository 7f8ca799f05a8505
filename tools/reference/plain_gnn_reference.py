#!/usr/bin/python3
"""A plain PyTorch layout GNN: the single-graph reference of docs/train.md.

The model a PyTorch user writes in an afternoon: hidden 32, 3 SAGE layers with residual and
LayerNorm, the graph pruned to the 2-hop neighbourhood of the configurable nodes, the 18 layout
values of a configurable node appended to its inputs, mean pooling, a pairwise hinge (margin 0.1)
on 32 configurations per step, Adam 1e-3. It holds out a share of a graph's DISTINCT
configurations (duplicates kept together, as `tpugraphs train --holdout-config-fraction`) and
prints the held-out Kendall tau-b every --eval-every steps, then `final_kendall` and
`best_kendall` on stdout.

Usage: tools/reference/plain_gnn_reference.py FILE.npz [--steps 150] [--seed 1] [--holdout 0.3]
Needs Debian's python3-torch (OpenBLAS as libblas.so.3 for speed) and python3-scipy. Prints the
BLAS it runs on (for OpenBLAS, the kernel chosen) on stderr; for its times, run it with
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ...
"""
import argparse
import os
import sys
import time

import numpy as np
import scipy.stats
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import bench_machine  # noqa: E402


def load(path):
    try:
        d = np.load(path)
        g = {k: d[k] for k in ("node_feat", "node_opcode", "edge_index", "node_config_feat",
                               "node_config_ids", "config_runtime")}
    except Exception as e:  # noqa: BLE001 - any unreadable file is reported the same way
        sys.exit(f"{path}: not a layout .npz ({e})")
    return g


def prune(n, edges, seeds, hops):
    """Nodes within `hops` hops (either direction) of the seeds, and the induced edges."""
    keep = np.zeros(n, bool)
    keep[seeds] = True
    for _ in range(hops):
        nxt = keep.copy()
        nxt[edges[keep[edges[:, 0]], 1]] = True
        nxt[edges[keep[edges[:, 1]], 0]] = True
        keep = nxt
    ids = np.flatnonzero(keep)
    remap = -np.ones(n, np.int64)
    remap[ids] = np.arange(len(ids))
    e = edges[keep[edges[:, 0]] & keep[edges[:, 1]]]
    return ids, remap[e]


class Sage(torch.nn.Module):
    def __init__(self, h):
        super().__init__()
        self.self_lin = torch.nn.Linear(h, h)
        self.nbr_lin = torch.nn.Linear(h, h, bias=False)
        self.norm = torch.nn.LayerNorm(h)

    def forward(self, x, src, dst, deg):
        # x: [B, n, h]; mean over neighbours (both directions), index_add_ over the node axis.
        agg = torch.zeros_like(x).index_add_(1, dst, x[:, src]) / deg
        return self.norm(x + torch.relu(self.self_lin(x) + self.nbr_lin(agg)))


class PlainGnn(torch.nn.Module):
    def __init__(self, f, h=32, layers=3):
        super().__init__()
        self.op = torch.nn.Embedding(256, 16)
        self.inp = torch.nn.Linear(f + 16 + 18, h)
        self.layers = torch.nn.ModuleList(Sage(h) for _ in range(layers))
        self.head = torch.nn.Sequential(torch.nn.Linear(h, h), torch.nn.ReLU(),
                                        torch.nn.Linear(h, 1))

    def forward(self, feat, op, cfg, src, dst, deg):
        # feat [n, f], op [n], cfg [B, n, 18] (zeros off configurable nodes).
        b = cfg.shape[0]
        base = torch.cat([feat, self.op(op)], 1).expand(b, -1, -1)
        x = torch.relu(self.inp(torch.cat([base, cfg], 2)))
        for layer in self.layers:
            x = layer(x, src, dst, deg)
        return self.head(x.mean(1)).squeeze(1)


def hinge(scores, runtime, margin=0.1):
    # Pairs (i, j) with runtime_i > runtime_j should have score_i > score_j + margin.
    diff = scores[:, None] - scores[None, :]
    slower = (runtime[:, None] > runtime[None, :]).float()
    return (torch.relu(margin - diff) * slower).sum() / slower.sum().clamp(min=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("npz")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--configs", type=int, default=32)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--holdout", type=float, default=0.3)
    ap.add_argument("--hops", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    rng = np.random.default_rng(a.seed)
    g = load(a.npz)

    n = len(g["node_feat"])
    ids, e = prune(n, g["edge_index"], g["node_config_ids"], a.hops)
    x = g["node_feat"][ids].astype(np.float64)
    x = np.sign(x) * np.log1p(np.abs(x))
    x = (x - x.mean(0)) / np.where(x.std(0) > 0, x.std(0), 1)
    pos = np.searchsorted(ids, g["node_config_ids"])
    cfg_all = g["node_config_feat"].astype(np.float32)  # [c, nc, 18]

    # Distinct configurations split together, as the trainer's holdout does.
    _, inverse = np.unique(cfg_all.reshape(len(cfg_all), -1), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    groups = rng.permutation(inverse.max() + 1)
    held_groups = set(groups[: int(round(a.holdout * len(groups)))].tolist())
    held = np.array([i for i in range(len(inverse)) if inverse[i] in held_groups])
    train = np.array([i for i in range(len(inverse)) if inverse[i] not in held_groups])

    feat = torch.tensor(x, dtype=torch.float32)
    op = torch.tensor(g["node_opcode"][ids].astype(np.int64))
    src = torch.tensor(np.concatenate([e[:, 0], e[:, 1]]))
    dst = torch.tensor(np.concatenate([e[:, 1], e[:, 0]]))
    deg = torch.zeros(len(ids)).index_add_(0, dst, torch.ones(len(dst))).clamp(min=1)[None, :, None]
    runtime = torch.tensor(g["config_runtime"].astype(np.float64))

    def cfg_batch(idx):
        c = torch.zeros(len(idx), len(ids), 18)
        c[:, torch.tensor(pos)] = torch.tensor(cfg_all[idx])
        return c

    model = PlainGnn(x.shape[1])
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)

    def evaluate():
        with torch.no_grad():
            s = torch.cat([model(feat, op, cfg_batch(held[i:i + 256]), src, dst, deg)
                           for i in range(0, len(held), 256)])
        return scipy.stats.kendalltau(s.numpy(), runtime[held].numpy()).correlation

    print(f"plain_gnn: {len(ids)} of {n} nodes after {a.hops}-hop pruning, "
          f"{len(train)} train / {len(held)} held-out configs", file=sys.stderr)
    bench_machine.blas_report()
    best, t0 = -2.0, time.time()
    tau = float("nan")
    for step in range(1, a.steps + 1):
        idx = rng.choice(train, size=min(a.configs, len(train)), replace=False)
        loss = hinge(model(feat, op, cfg_batch(idx), src, dst, deg), runtime[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % a.eval_every == 0 or step == a.steps:
            tau = evaluate()
            best = max(best, tau)
            print(f"step={step} loss={loss.item():.4f} held_out_kendall={tau:.4f} "
                  f"time={time.time() - t0:.1f}s", file=sys.stderr)
    print(f"final_kendall\t{tau:.6f}\nbest_kendall\t{best:.6f}")


if __name__ == "__main__":
    main()
