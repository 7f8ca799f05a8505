#!/usr/bin/python3
"""A PyTorch twin of the tpugraphs layout model (docs/model.md), to check our forward pass and
hand-written backward pass on a real graph, and to train the same way for comparing learning
curves (docs/twin.md).

Input: an .npz written by `tpugraphs_dump_batch` (the graph as the model sees it, the configs,
the flat parameters with their block layout, our scores, loss and gradients in float and double).

The twin re-implements the architecture from its description, computing every configuration on
the whole graph (no shared computation), gets scores and gradients with autograd in float64 and
float32, and prints per parameter block the largest relative difference
    max_i |ours_i - twin_i| / max_i |twin_i|
of the gradients (and of the scores and loss). With --check it exits 1 when a difference
exceeds the tolerance.

With --train-steps N (needs a dump made with --curve) it starts from our initial parameters,
trains N steps on the trainer's own batches with our optimizer (AdamW or Adam, global-norm
clipping, the trainer's learning rate per step) and prints the held-out Kendall tau per step next
to the one our trainer recorded.

Usage:
  tools/reference/torch_twin.py batch.npz [--check] [--train-steps N] [--valid-every K]
                                [--threads T]
"""

import argparse
import json
import math
import sys

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover
    print(f"torch_twin: needs PyTorch (Debian: apt-get install python3-torch): {e}",
          file=sys.stderr)
    sys.exit(3)


def kendall_tau_b(x, y):
    """Kendall tau-b of two sequences (O(k^2), fine for a few thousand configs)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    dx = np.sign(x[:, None] - x[None, :])
    dy = np.sign(y[:, None] - y[None, :])
    iu = np.triu_indices(len(x), 1)
    dx, dy = dx[iu], dy[iu]
    num = np.sum(dx * dy)
    den = math.sqrt(np.sum(dx != 0) * np.sum(dy != 0))
    return float(num / den) if den > 0 else float("nan")


FLOOR = 1e-2
F32_SLACK = 3.0


class Twin:
    """The layout network, computed per configuration on the whole graph."""

    def __init__(self, d, meta):
        self.spec = meta["spec"]
        self.loss_spec = meta["loss"]
        self.blocks = {b["name"]: b for b in meta["blocks"]}
        self.block_list = meta["blocks"]
        s = self.spec
        self.H = s["hidden_dim"]
        self.L = s["num_layers"]
        n = d["node_feat"].shape[0]
        self.n = n
        op = d["node_opcode"].astype(np.int64)
        op[op >= s["num_opcodes"]] = 0
        self.opcode = torch.from_numpy(op)
        # Transformed features in all 140 columns (dropped columns 0).
        x = np.zeros((n, 140), dtype=np.float64)
        x[:, d["kept_node_columns"]] = d["node_feat"].astype(np.float64)
        self.x140 = x
        e = d["edge_index"].astype(np.int64).reshape(-1, 2)
        self.cons = torch.from_numpy(e[:, 0].copy())
        self.prod = torch.from_numpy(e[:, 1].copy())
        deg_op = np.bincount(e[:, 0], minlength=n).astype(np.float64)
        deg_us = np.bincount(e[:, 1], minlength=n).astype(np.float64)
        if s["aggregation"] == 0:  # mean
            self.w_op = 1.0 / np.maximum(deg_op[e[:, 0]], 1.0)
            self.w_us = 1.0 / np.maximum(deg_us[e[:, 1]], 1.0)
        else:
            self.w_op = np.ones(len(e))
            self.w_us = np.ones(len(e))
        self.cfg_ids = torch.from_numpy(d["node_config_ids"].astype(np.int64))
        self.nc = len(d["node_config_ids"])
        # Layout tensor info: dims and graph minor_to_major of each configurable node's output and
        # first two operands (in edge order).
        raw = d["node_feat_raw"].astype(np.float64)
        info = np.zeros((self.nc, 3, 12))
        for j, v in enumerate(d["node_config_ids"]):
            operands = e[e[:, 0] == v, 1]
            for t in range(3):
                node = v if t == 0 else (operands[t - 1] if t - 1 < len(operands) else -1)
                if node < 0:
                    info[j, t, 6:] = -1
                    continue
                info[j, t, :6] = raw[node, 21:27]
                info[j, t, 6:] = raw[node, 134:140]
        self.tensor_info = info

    # --- inputs ---
    def tensor_features(self, values):
        """[k, nc, 18] layout tensor features from raw values [k, nc, 18]."""
        k = values.shape[0]
        out = np.zeros((k, self.nc, 18))
        for t in range(3):
            dims = self.tensor_info[:, t, :6]  # [nc, 6]
            m2m = self.tensor_info[:, t, 6:]
            v = values[:, :, 6 * t:6 * t + 6].astype(np.int64)  # [k, nc, 6]

            def dim(x):
                ok = (x >= 0) & (x < 6)
                xi = np.clip(x, 0, 5)
                dd = np.take_along_axis(np.broadcast_to(dims, (k,) + dims.shape), xi, axis=2)
                return np.where(ok & (dd >= 1), dd, 0.0)

            d0 = dim(v[:, :, 0:1])[:, :, 0]
            d1 = dim(v[:, :, 1:2])[:, :, 0]
            with np.errstate(divide="ignore", invalid="ignore"):
                o = out[:, :, 6 * t:6 * t + 6]
                o[..., 0] = np.where(d0 > 0, np.log1p(d0) / 8, 0)
                o[..., 1] = np.where(d1 > 0, np.log1p(d1) / 8, 0)
                o[..., 2] = np.where(d0 > 0, np.log(np.ceil(d0 / 128) * 128 / d0) / np.log(128), 0)
                o[..., 3] = np.where(d1 > 0, np.log(np.ceil(d1 / 8) * 8 / d1) / np.log(8), 0)
                o[..., 4] = np.where(d0 > 0, 1.0, 0.0)
                differs = (d0 > 0) & np.any((m2m[None] >= 0) & (v != m2m[None]), axis=2)
                elements = np.prod(np.where(dims >= 1, dims, 1.0), axis=1)  # [nc]
                o[..., 5] = np.where(differs, np.log1p(elements)[None, :] / 16, 0)
        return out

    def act(self, x):
        if self.spec["activation"] == 1:
            return F.gelu(x)
        return F.leaky_relu(x, negative_slope=self.spec["leaky_relu_slope"])

    def blk(self, P, name):
        b = self.blocks[name]
        return P[b["offset"]:b["offset"] + b["rows"] * b["cols"]].view(b["rows"], b["cols"])

    def forward(self, P, values):
        """Scores [k] for raw layout values [k, nc, 18] with flat parameters P."""
        s, H, n, nc = self.spec, self.H, self.n, self.nc
        dt = P.dtype
        k = values.shape[0]
        x = torch.tensor(self.x140, dtype=dt)
        a0_base = (self.blk(P, "opcode_embedding")[self.opcode] @ self.blk(P, "input.w_opcode") +
                   x @ self.blk(P, "input.w_features") + self.blk(P, "input.bias"))  # [n, H]
        vmax = s["layout_value_max"]
        v = torch.from_numpy(values.astype(np.int64))
        rows = torch.where((v >= -1) & (v <= vmax), v + 1, torch.full_like(v, vmax + 2))
        emb = self.blk(P, "layout_value_embedding")[rows]  # [k, nc, 18, d]
        cfg_in = emb.reshape(k, nc, -1)
        if s["layout_tensor_features"]:
            tf = torch.tensor(self.tensor_features(values), dtype=dt)
            cfg_in = torch.cat([cfg_in, tf], dim=2)
        c = cfg_in @ self.blk(P, "input.w_config")  # [k, nc, H]
        cterm = torch.zeros(k, n, H, dtype=dt).index_add(1, self.cfg_ids, c)
        h = self.act(a0_base.unsqueeze(0) + cterm)  # [k, n, H]
        w_op = torch.tensor(self.w_op, dtype=dt).view(1, -1, 1)
        w_us = torch.tensor(self.w_us, dtype=dt).view(1, -1, 1)
        for l in range(1, self.L + 1):
            agg_op = torch.zeros_like(h).index_add(1, self.cons, h[:, self.prod] * w_op)
            agg_us = torch.zeros_like(h).index_add(1, self.prod, h[:, self.cons] * w_us)
            z = torch.cat([h, agg_op, agg_us], dim=2)
            y = self.act(z @ self.blk(P, f"layer{l}.w") + self.blk(P, f"layer{l}.bias"))
            if s["residual"]:
                y = y + h
            if s["layer_norm"]:
                y = F.layer_norm(y, (H,), self.blk(P, f"layer{l}.norm_gain").view(H),
                                 self.blk(P, f"layer{l}.norm_bias").view(H),
                                 eps=s["layer_norm_epsilon"])
            h = y
        parts = []
        if s["pool_mean"]:
            parts.append(h.mean(dim=1))
        if s["pool_max"]:
            parts.append(h.max(dim=1).values)
        hc = h[:, self.cfg_ids]  # [k, nc, H]
        if s["config_pooling"] == 1:
            parts.append(hc.sum(dim=1))
        elif s["config_pooling"] == 0:
            parts.append(hc.mean(dim=1))
        g = torch.cat(parts, dim=1)
        t = 0
        while f"head{t}.w" in self.blocks:
            g = g @ self.blk(P, f"head{t}.w") + self.blk(P, f"head{t}.bias")
            if f"head{t + 1}.w" in self.blocks:
                g = self.act(g)
            t += 1
        score = g[:, 0]
        if s["config_node_head"] > 0:
            xn = torch.cat([hc, cfg_in], dim=2)
            sv = self.act(xn @ self.blk(P, "node_head.w1") + self.blk(P, "node_head.bias"))
            terms = (sv @ self.blk(P, "node_head.w2"))[..., 0]
            if s.get("config_node_head_pooling", 0) == 1:  # log-sum-exp
                score = score + torch.logsumexp(terms, dim=1)
            else:
                score = score + terms.sum(dim=1)
        return score

    def loss(self, scores, runtimes):
        """The LossSpec loss of one list (computed in float64, like ours)."""
        ls = self.loss_spec
        s = scores.double()
        r = torch.tensor(runtimes, dtype=torch.float64)
        total = torch.zeros((), dtype=torch.float64)
        if ls["pairwise_hinge_weight"] != 0:
            pair = r[:, None] > r[None, :]
            w = torch.ones_like(s[:, None] * s[None, :])
            noise = ls.get("hinge_noise", 0.0)
            if ls["hinge_pair_weighting"] == 1 or (ls["hinge_pair_weighting"] == 2 and noise > 0):
                lr_ = torch.log(torch.clamp(r, min=1e-30))
                gap = lr_[:, None] - lr_[None, :]
                if ls["hinge_pair_weighting"] == 2:  # erf(|gap| / (2 noise))
                    gap = torch.erf(gap.abs() / (2.0 * noise))
                mean_gap = gap[pair].mean() if pair.any() else torch.tensor(0.0)
                if mean_gap > 0:
                    w = gap / mean_gap
            hinge = torch.relu(ls["hinge_margin"] - (s[:, None] - s[None, :]))
            npairs = int(pair.sum())
            if npairs > 0:
                total = total + ls["pairwise_hinge_weight"] * (w * hinge)[pair].sum() / npairs
        if ls["listmle_weight"] != 0:
            order = torch.from_numpy(np.argsort(-np.asarray(runtimes), kind="stable").copy())
            z = s[order] / ls["listmle_temperature"]
            lse = torch.flip(torch.logcumsumexp(torch.flip(z, [0]), 0), [0])
            total = total + ls["listmle_weight"] * (lse - z).mean()
        if ls["mse_weight"] != 0:
            if ls["mse_target"] == 0:
                tgt = torch.log(torch.clamp(r, min=1e-30))
                tgt = tgt - tgt.mean()
            else:
                tgt = r * ls["mse_scale"]
            total = total + ls["mse_weight"] * ((s - tgt) ** 2).mean()
        return total

    def scores_and_grad(self, params, values, runtimes, dtype):
        P = torch.tensor(params, dtype=dtype, requires_grad=True)
        sc = self.forward(P, values)
        loss = self.loss(sc, runtimes)
        loss.backward()
        return sc.detach().double().numpy(), float(loss), P.grad.double().numpy()


def rel(a, b, floor=0.0):
    """max|a - b| / max(max|b|, floor)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    den = max(np.max(np.abs(b)) if b.size else 0.0, floor)
    num = np.max(np.abs(a - b)) if b.size else 0.0
    return num / den if den > 0 else num


def check_inputs(d, meta):
    """Independent checks of the dumped inputs: the feature transform and the pruning."""
    raw = d["node_feat_raw"].astype(np.float64)[:, d["kept_node_columns"]]
    slog = np.sign(raw) * np.log1p(np.abs(raw))
    want = (slog - d["transform_mean"]) / d["transform_std"]
    tf_diff = np.max(np.abs(want - d["node_feat"])) if want.size else 0.0
    print(f"inputs: feature transform recomputed from the raw features: max abs difference "
          f"{tf_diff:.3g}")
    hops = meta["spec"]["prune_hops"]
    ok = True
    if hops >= 0:
        n = int(d["full_num_nodes"][0])
        e = d["full_edge_index"].reshape(-1, 2)
        adj = [[] for _ in range(n)]
        for u, v in e:
            adj[u].append(v)
            adj[v].append(u)
        dist = np.full(n, -1)
        frontier = list(d["full_node_config_ids"])
        dist[frontier] = 0
        for step in range(1, hops + 1):
            nxt = []
            for u in frontier:
                for v in adj[u]:
                    if dist[v] < 0:
                        dist[v] = step
                        nxt.append(v)
            frontier = nxt
        kept = np.flatnonzero(dist >= 0)
        same_nodes = np.array_equal(kept, d["kept_nodes"])
        newid = np.full(n, -1)
        newid[kept] = np.arange(len(kept))
        keep_e = (newid[e[:, 0]] >= 0) & (newid[e[:, 1]] >= 0)
        edges = newid[e[keep_e]]
        same_edges = np.array_equal(edges, d["edge_index"].reshape(-1, 2))
        same_cfg = np.array_equal(newid[d["full_node_config_ids"]], d["node_config_ids"])
        ok = same_nodes and same_edges and same_cfg
        print(f"inputs: pruning to {hops} hops recomputed: {len(kept)} of {n} nodes, "
              f"{int(keep_e.sum())} edges; nodes {'agree' if same_nodes else 'DIFFER'}, edges "
              f"{'agree' if same_edges else 'DIFFER'}, configurable nodes "
              f"{'agree' if same_cfg else 'DIFFER'}")
    return tf_diff < 1e-4 and ok


def compare(twin, d, meta, args):
    params = d["params"].astype(np.float64)
    values = d["config_values"]
    rt = d["runtimes"]
    s64, l64, g64 = twin.scores_and_grad(params, values, rt, torch.float64)
    s32, l32, g32 = twin.scores_and_grad(d["params"], values, rt, torch.float32)
    ours64, ours32 = d["grad64"], d["grad"].astype(np.float64)
    # A block whose gradient is far smaller than the largest one (e.g. the last head bias under a
    # ranking loss, whose gradient is the sum of dscores = 0) is measured against FLOOR x the
    # largest gradient instead of its own size: rounding errors scale with the terms summed.
    floor = FLOOR * np.max(np.abs(g64))
    rows = [("scores", rel(d["scores64"], s64), rel(d["scores"], s64), rel(s32, s64),
             rel(d["scores"], s32), ""),
            ("loss", rel(d["loss64"], [l64]), rel(d["loss"], [l64]), rel([l32], [l64]),
             rel(d["loss"], [l32]), "")]
    for b in twin.block_list:
        sl = slice(b["offset"], b["offset"] + b["rows"] * b["cols"])
        big = np.max(np.abs(g64[sl]))
        rows.append((b["name"], rel(ours64[sl], g64[sl], floor), rel(ours32[sl], g64[sl], floor),
                     rel(g32[sl], g64[sl], floor), rel(ours32[sl], g32[sl], floor),
                     f"{big:10.3g}" + ("*" if big < floor else " ")))
    print(f"graph {meta['graph']}: {twin.n} nodes, {len(d['edge_index'])} edges, {twin.nc} "
          f"configurable nodes, {len(rt)} configs; loss ours {float(d['loss64'][0]):.12g} "
          f"twin {l64:.12g}")
    print("max relative difference = max|a - b| / max|b| per block (b the second named)")
    print(f"{'block':<24} {'max|grad|':>11} {'f64 ours/twin':>14} {'f32 ours/twin64':>15} "
          f"{'f32 twin/twin64':>15} {'f32 ours/twin':>14}")
    # float64 must agree to --tol64. Ours in float32 must be within --tol32 of the float64 twin,
    # or no further from it than F32_SLACK x the float32 twin is (sums that cancel exactly, such
    # as a bias gradient that is 0 in exact arithmetic, carry float32 noise in both).
    worst64 = worst32 = 0.0
    for r in rows:
        bad32 = r[2] > max(args.tol32, F32_SLACK * r[3])
        print(f"{r[0]:<24} {r[5]:>11} {r[1]:14.3g} {r[2]:15.3g} {r[3]:15.3g} {r[4]:14.3g}"
              f"{'  FAIL64' if r[1] > args.tol64 else ''}{'  FAIL32' if bad32 else ''}")
        worst64 = max(worst64, r[1])
        worst32 = max(worst32, r[2] if bad32 else 0.0)
    print(f"* gradient below {FLOOR:g} x the largest: difference relative to {FLOOR:g} x the "
          f"largest")
    zero = [b["name"] for b in twin.block_list
            if np.max(np.abs(g64[b["offset"]:b["offset"] + b["rows"] * b["cols"]])) == 0]
    if zero:
        print(f"blocks whose gradient is 0 in this batch: {', '.join(zero)}")
    ok = worst64 <= args.tol64 and worst32 == 0.0
    print(f"worst float64 ours/twin {worst64:.3g} (tolerance {args.tol64:g}); float32: "
          f"{'every block' if worst32 == 0 else 'NOT every block'} within {args.tol32:g} of the "
          f"float64 twin or within {F32_SLACK:g}x the float32 twin's own error -> "
          f"{'AGREE' if ok else 'DISAGREE'}")
    return ok


def train(twin, d, meta, args):
    cur = meta.get("curve")
    if not cur or "curve_steps" not in d.files:
        print("torch_twin: --train-steps needs a dump made with --curve", file=sys.stderr)
        return False
    steps = d["curve_steps"]
    n_steps = min(args.train_steps, len(steps))
    if n_steps < args.train_steps:
        print(f"note: the trainer ran {len(steps)} steps; training {n_steps}")
    dt = torch.float64 if args.train_dtype == "float64" else torch.float32
    P = torch.tensor(d["curve_init_params"], dtype=dt)
    m = torch.zeros_like(P)
    v = torch.zeros_like(P)
    values_all, rt_all = d["all_config_values"], d["all_runtimes"]
    valid = d["curve_valid"]
    ours = d["ours_valid_kendall"]
    b1, b2, eps, wd = cur["beta1"], cur["beta2"], cur["epsilon"], cur["weight_decay"]

    def evaluate():
        with torch.no_grad():
            sc = []
            for i in range(0, len(valid), args.eval_chunk):
                idx = valid[i:i + args.eval_chunk]
                sc.append(twin.forward(P, values_all[idx]).double().numpy())
        return kendall_tau_b(np.concatenate(sc), rt_all[valid])

    print(f"training {n_steps} steps of {steps.shape[1]} configs ({args.train_dtype}); "
          f"{len(d['curve_train_pool'])} training, {len(valid)} held-out configs")
    print(f"{'step':>5} {'lr':>10} {'loss':>10} {'grad_norm':>10} {'twin_tau':>9} {'ours_tau':>9}")
    for t in range(n_steps):
        picks = steps[t]
        Pg = P.clone().requires_grad_(True)
        loss = twin.loss(twin.forward(Pg, values_all[picks]), rt_all[picks])
        loss.backward()
        g = Pg.grad.detach()
        norm = math.sqrt(float((g.double() ** 2).sum()))
        if cur["clip_norm"] > 0 and norm > cur["clip_norm"]:
            g = g * (cur["clip_norm"] / norm)
        lr = float(d["curve_lr"][t])
        if cur["optimizer"] == "adam" and wd != 0:
            g = g + wd * P
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        if cur["optimizer"] == "adamw" and wd != 0:
            P = P * (1 - lr * wd)
        bc1 = 1 - b1 ** (t + 1)
        bc2 = 1 - b2 ** (t + 1)
        P = P - (lr / bc1) * m / (torch.sqrt(v) / math.sqrt(bc2) + eps)
        last = t + 1 == n_steps
        tau = evaluate() if (t + 1) % args.valid_every == 0 or last else float("nan")
        o = ours[t] if t < len(ours) else float("nan")
        print(f"{t + 1:5d} {lr:10.4g} {float(loss):10.5g} {norm:10.4g} {tau:9.4f} {o:9.4f}",
              flush=True)
    if cur["params_step"] == n_steps:
        print(f"parameters after {n_steps} steps, ours (from the dumped file) vs twin, max "
              f"relative difference per block:")
        mine, theirs = P.double().numpy(), d["params"].astype(np.float64)
        for b in twin.block_list:
            sl = slice(b["offset"], b["offset"] + b["rows"] * b["cols"])
            print(f"  {b['name']:<24} {rel(theirs[sl], mine[sl]):10.3g}")
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("npz", help="output of tpugraphs_dump_batch")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 when a difference exceeds --tol64/--tol32")
    ap.add_argument("--tol64", type=float, default=1e-8)
    ap.add_argument("--tol32", type=float, default=1e-2)
    ap.add_argument("--train-steps", type=int, default=0,
                    help="train this many steps from our initial parameters (dump with --curve)")
    ap.add_argument("--train-dtype", choices=["float32", "float64"], default="float32")
    ap.add_argument("--valid-every", type=int, default=1,
                    help="held-out Kendall every this many steps (and after the last)")
    ap.add_argument("--eval-chunk", type=int, default=64, help="configs per validation forward")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--skip-compare", action="store_true", help="only train")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    try:
        d = np.load(args.npz)
        meta = json.loads(bytes(d["meta_json"]).decode())
    except (OSError, KeyError, ValueError) as e:
        print(f"torch_twin: {args.npz}: not a tpugraphs_dump_batch output: {e}", file=sys.stderr)
        return 1
    twin = Twin(d, meta)
    ok = check_inputs(d, meta)
    if not args.skip_compare:
        ok = compare(twin, d, meta, args) and ok
    if args.train_steps > 0:
        ok = train(twin, d, meta, args) and ok
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
