#!/usr/bin/python3
"""The layout training step of our GNN written in PyTorch: the speed reference of bench-train.sh.

Same architecture as docs/model.md with the defaults (hidden 64, 3 SAGE layers with mean
aggregation over operands and users, residual + LayerNorm, leaky ReLU 0.2, opcode embedding 32,
layout value embedding 4, mean + max + configurable-node-sum pooling, a 64-wide head, pairwise
hinge with margin 0.1, Adam at 1e-3), written the way a PyTorch user batches configurations:
the states of the k sampled configurations are one [n, k, H] tensor, so every dense product runs
once over n * k rows and each aggregation is one sparse matmul (--agg spmm, a row-normalised
[n, n] adjacency times the [n, k * H] states) or one index_add_ (--agg index_add).

Usage: torch_reference_step.py GRAPH.npz [--configs 16] [--steps 10] [--warmup 2]
       [--threads 2] [--agg spmm|index_add]
GRAPH.npz is a release-format layout file (tpugraphs export writes them). Prints the BLAS the
process loaded (for OpenBLAS, the kernel it chose) and the thread count on stderr and one
key=value line on stdout:
  nodes edges config_nodes configs steps ms_per_step configs_per_s blas threads agg
Run it as bench-train.sh does, with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (they pin
OpenBLAS to an older kernel): env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 ...
"""
import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import bench_machine  # noqa: E402


def loaded_blas():
    """The BLAS/LAPACK shared objects mapped into this process (after torch ran a GEMM)."""
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            base = os.path.basename(path)
            if "blas" in base or "lapack" in base or "mkl" in base:
                libs.add(os.path.realpath(path))
    return sorted(libs)


def blas_kind(libs):
    if any("openblas" in p for p in libs):
        return "openblas"
    if any("mkl" in p for p in libs):
        return "mkl"
    if any("blis" in p for p in libs):
        return "blis"
    if any("/blas/" in p or p.endswith("libblas.so.3") for p in libs):
        return "reference"
    return "unknown"


def transform_features(x):
    """Signed log then standardisation, constant columns dropped (as our FeatureTransform)."""
    x = np.sign(x) * np.log1p(np.abs(x))
    mu, sd = x.mean(0), x.std(0)
    keep = sd > 1e-6
    return ((x[:, keep] - mu[keep]) / sd[keep]).astype(np.float32)


class Gnn(torch.nn.Module):
    def __init__(self, f, n, edges, H=64, L=3, agg="spmm"):
        super().__init__()
        self.H, self.L, self.agg, self.n = H, L, agg, n
        self.op_emb = torch.nn.Embedding(128, 32)
        self.w_op = torch.nn.Linear(32, H, bias=False)
        self.w_feat = torch.nn.Linear(f, H)
        self.lay_emb = torch.nn.Embedding(9, 4)
        self.w_cfg = torch.nn.Linear(18 * 4, H, bias=False)
        self.layers = torch.nn.ModuleList(torch.nn.Linear(3 * H, H) for _ in range(L))
        self.norms = torch.nn.ModuleList(torch.nn.LayerNorm(H) for _ in range(L))
        self.head = torch.nn.Sequential(torch.nn.Linear(3 * H, 64), torch.nn.LeakyReLU(0.2),
                                        torch.nn.Linear(64, 1))
        u = torch.from_numpy(edges[:, 0].astype(np.int64))  # consumer
        v = torch.from_numpy(edges[:, 1].astype(np.int64))  # producer (operand of u)
        self.dirs = []
        for dst, src in ((u, v), (v, u)):  # operands of u, then users of v
            deg = torch.zeros(n).index_add_(0, dst, torch.ones(len(dst)))
            inv = 1.0 / deg.clamp(min=1.0)
            if agg == "spmm":
                a = torch.sparse_coo_tensor(torch.stack([dst, src]), inv[dst], (n, n)).coalesce()
                self.dirs.append(a)
            else:
                self.dirs.append((dst, src, inv.view(n, 1, 1)))

    def aggregate(self, h, d):
        n, k, H = h.shape
        if self.agg == "spmm":
            return torch.sparse.mm(self.dirs[d], h.reshape(n, k * H)).view(n, k, H)
        dst, src, inv = self.dirs[d]
        return torch.zeros_like(h).index_add_(0, dst, h[src]) * inv

    def forward(self, opcode, feat, cfg_nodes, cfg_vals):
        # cfg_vals: [k, nc, 18] long in [0, 8]
        k = cfg_vals.shape[0]
        base = self.w_op(self.op_emb(opcode)) + self.w_feat(feat)  # [n, H]
        c = self.w_cfg(self.lay_emb(cfg_vals).flatten(2))  # [k, nc, H]
        a0 = base.unsqueeze(1).expand(-1, k, -1).clone()
        a0[cfg_nodes] += c.transpose(0, 1)
        h = torch.nn.functional.leaky_relu(a0, 0.2)  # [n, k, H]
        for lin, norm in zip(self.layers, self.norms):
            z = torch.cat([h, self.aggregate(h, 0), self.aggregate(h, 1)], dim=2)
            h = norm(h + torch.nn.functional.leaky_relu(lin(z), 0.2))
        g = torch.cat([h.mean(0), h.max(0).values, h[cfg_nodes].sum(0)], dim=1)  # [k, 3H]
        return self.head(g).squeeze(1)


def hinge(scores, runtimes, margin=0.1):
    ds = scores.unsqueeze(1) - scores.unsqueeze(0)  # s_i - s_j
    faster = (runtimes.unsqueeze(1) < runtimes.unsqueeze(0)).float()  # i faster than j
    pairs = faster.sum().clamp(min=1.0)
    return (torch.relu(margin + ds) * faster).sum() / pairs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("npz")
    ap.add_argument("--configs", type=int, default=16)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--agg", choices=["spmm", "index_add"], default="spmm")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    d = np.load(args.npz)
    feat = torch.from_numpy(transform_features(d["node_feat"].astype(np.float64)))
    opcode = torch.from_numpy(np.minimum(d["node_opcode"].astype(np.int64), 127))
    edges = d["edge_index"].astype(np.int64)
    cfg_nodes = torch.from_numpy(d["node_config_ids"].astype(np.int64))
    vals = d["node_config_feat"].astype(np.int64)  # [C, nc, 18], -1 = default
    vals = np.where((vals >= -1) & (vals <= 6), vals + 1, 8)
    runtimes = d["config_runtime"].astype(np.float64)
    n = feat.shape[0]
    model = Gnn(feat.shape[1], n, edges, agg=args.agg)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(1)
    timed = 0.0
    for s in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        pick = rng.choice(len(runtimes), size=min(args.configs, len(runtimes)), replace=False)
        cv = torch.from_numpy(vals[pick])
        rt = torch.from_numpy(runtimes[pick])
        opt.zero_grad(set_to_none=True)
        loss = hinge(model(opcode, feat, cfg_nodes, cv), rt)
        loss.backward()
        opt.step()
        if s >= args.warmup:
            timed += time.perf_counter() - t0
    libs = loaded_blas()
    kind = blas_kind(libs)
    print("torch %s, BLAS libraries mapped: %s, threads %d" %
          (torch.__version__, " ".join(libs) or "none", torch.get_num_threads()), file=sys.stderr)
    print("libblas.so.3 resolves to %s" %
          os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3"), file=sys.stderr)
    bench_machine.blas_report()
    print("nodes=%d edges=%d config_nodes=%d configs=%d steps=%d ms_per_step=%.3f "
          "configs_per_s=%.2f blas=%s threads=%d agg=%s" %
          (n, len(edges), len(cfg_nodes), args.configs, args.steps, 1e3 * timed / args.steps,
           args.configs * args.steps / timed, kind, torch.get_num_threads(), args.agg))


if __name__ == "__main__":
    main()
