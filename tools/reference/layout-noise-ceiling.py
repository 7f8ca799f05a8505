#!/usr/bin/python3
"""How much of a layout graph's held-out ranking any model can predict (docs/train.md).

Reads one layout graph in the release .npz format (e.g. `tpugraphs export` of an ingested raw
dump) and measures, from the data alone:

  * runtime levels: the sorted runtimes are cut wherever two neighbours differ by more than
    --gap-factor times the median spread of repeated measurements of one configuration;
  * repeat agreement inside the largest level: the intraclass correlation of the runtimes of
    configurations that were measured more than once (0 = a repeat tells nothing about the
    other measurement, so the order inside the level is measurement noise);
  * for each level above the fastest, the config columns (node, slot, value) that match it
    exactly;
  * over --splits random 70/30 splits by DISTINCT configuration (the protocol of
    tools/bench/real-dump-baselines.sh), the mean and spread of Kendall tau-b of:
      level oracle    - the true level, a random order of the configurations inside it,
      ridge one-hot   - ridge regression of log runtime on one-hot config values (lambda 1),
      ridge in level  - the same, fitted and scored inside the largest level only.

A model that predicts configurations better than chance inside the levels would beat the level
oracle; when the repeats disagree, nothing can, and the level oracle is the ceiling.
Needs numpy and scipy (Debian: python3-numpy python3-scipy).

Usage: tools/reference/layout-noise-ceiling.py FILE.npz [--splits N] [--seed S] [--gap-factor G]
           [--json]
"""
import argparse
import json
import sys

import numpy as np
from scipy.stats import kendalltau


def die(message):
    print(f"layout-noise-ceiling: {message}", file=sys.stderr)
    sys.exit(1)


def load(path):
    try:
        d = np.load(path)
        cfg = np.asarray(d["node_config_feat"])
        runtime = np.asarray(d["config_runtime"]).astype(np.float64)
    except (OSError, ValueError, KeyError) as e:
        die(f"{path}: cannot read a layout graph: {e}")
    if cfg.ndim != 3 or cfg.shape[0] != runtime.shape[0] or cfg.shape[0] < 4:
        die(f"{path}: node_config_feat {cfg.shape} and config_runtime {runtime.shape} "
            "do not describe at least 4 configurations")
    if not np.all(runtime > 0):
        die(f"{path}: config_runtime has values <= 0")
    return cfg.reshape(cfg.shape[0], -1).astype(np.int64), runtime, cfg.shape[2]


def groups_of(x):
    """Id of the distinct configuration of each row."""
    _, ids = np.unique(x, axis=0, return_inverse=True)
    return ids.reshape(-1)


def levels_of(runtime, repeat_spread, gap_factor):
    order = np.argsort(runtime)
    level = np.zeros(len(runtime), dtype=np.int64)
    cut = gap_factor * repeat_spread
    current = 0
    for a, b in zip(order[:-1], order[1:]):
        if runtime[b] - runtime[a] > cut:
            current += 1
        level[b] = current
    return level


def icc(pairs):
    """Symmetric (double-entry) intraclass correlation of measurement pairs."""
    if len(pairs) < 3:
        return float("nan")
    p = np.asarray(pairs)
    x = np.concatenate([p[:, 0], p[:, 1]])
    y = np.concatenate([p[:, 1], p[:, 0]])
    return float(np.corrcoef(x, y)[0, 1])


def one_hot(x):
    cols = []
    for c in range(x.shape[1]):
        values = np.unique(x[:, c])
        if len(values) > 1:
            cols.extend((x[:, c] == v).astype(np.float64) for v in values)
    return np.array(cols).T if cols else np.zeros((x.shape[0], 0))


def ridge_scores(a_train, y_train, a_test, lam=1.0):
    mean_a = a_train.mean(0)
    a = a_train - mean_a
    # Dual form: the design has far more columns than rows.
    alpha = np.linalg.solve(a @ a.T + lam * np.eye(len(a)), y_train - y_train.mean())
    return (a_test - mean_a) @ (a.T @ alpha)


def tau(scores, runtime):
    t = kendalltau(scores, runtime)[0]
    return float(t) if np.isfinite(t) else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("npz")
    ap.add_argument("--splits", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--gap-factor", type=float, default=20.0)
    ap.add_argument("--holdout", type=float, default=0.3)
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = ap.parse_args()

    x, runtime, width = load(args.npz)
    gid = groups_of(x)
    n_distinct = gid.max() + 1
    repeated = [np.flatnonzero(gid == g) for g in range(n_distinct)]
    repeated = [rows for rows in repeated if len(rows) > 1]
    if not repeated:
        die(f"{args.npz}: no configuration was measured twice; the noise cannot be estimated")
    repeat_spread = float(np.median([np.ptp(runtime[rows]) for rows in repeated]))
    level = levels_of(runtime, max(repeat_spread, 1e-12 * runtime.max()), args.gap_factor)
    big = np.bincount(level).argmax()
    in_big = [runtime[rows[:2]] for rows in repeated if np.all(level[rows] == big)]

    rules = {}
    for lv in range(level.max() + 1):
        if lv == big:
            continue
        members = level == lv
        found = []
        for c in range(x.shape[1]):
            for v in np.unique(x[members, c]):
                if np.array_equal(x[:, c] == v, members):
                    found.append(f"node {c // width} slot {c % width} = {v}")
        rules[lv] = found

    rng = np.random.RandomState(args.seed)
    oh = one_hot(x)
    logr = np.log(runtime)
    results = {"level_oracle": [], "ridge_one_hot": [], "ridge_in_level": []}
    n_test = int(round(args.holdout * n_distinct))
    for _ in range(args.splits):
        test_groups = rng.permutation(n_distinct)[:n_test]
        test = np.isin(gid, test_groups)
        train = ~test
        rt = runtime[test]
        # A random order inside the level, the same score for repeats of one configuration (as
        # any function of the configuration gives them).
        jitter = 0.5 * rng.rand(n_distinct)
        results["level_oracle"].append(tau(level[test] + jitter[gid[test]], rt))
        results["ridge_one_hot"].append(tau(ridge_scores(oh[train], logr[train], oh[test]), rt))
        tr_big, te_big = train & (level == big), test & (level == big)
        if tr_big.sum() > 2 and te_big.sum() > 2:
            results["ridge_in_level"].append(
                tau(ridge_scores(oh[tr_big], logr[tr_big], oh[te_big]), runtime[te_big]))

    summary = {
        "configs": int(len(runtime)),
        "distinct_configs": int(n_distinct),
        "repeated_configs": len(repeated),
        "repeat_spread_median": repeat_spread,
        "levels": [{"count": int(np.sum(level == lv)),
                    "runtime_min": float(runtime[level == lv].min()),
                    "runtime_max": float(runtime[level == lv].max()),
                    "matching_columns": rules.get(lv, [])}
                   for lv in range(level.max() + 1)],
        "largest_level": int(big),
        "repeat_icc_in_largest_level": icc(in_big),
        "repeat_pairs_in_largest_level": len(in_big),
        "splits": args.splits,
    }
    for name, values in results.items():
        v = np.array([t for t in values if np.isfinite(t)])
        summary[name] = {"mean": float(v.mean()) if len(v) else None,
                         "sd": float(v.std(ddof=1)) if len(v) > 1 else None}
    if args.json:
        json.dump(summary, sys.stdout, indent=1)
        print()
        return
    print(f"configs {summary['configs']}, distinct {n_distinct}, measured more than once "
          f"{len(repeated)} (median max-min of a repeat {repeat_spread:.6g})")
    for lv, info in enumerate(summary["levels"]):
        mark = " (largest)" if lv == big else ""
        rule = "; ".join(info["matching_columns"][:3]) or "-"
        more = len(info["matching_columns"]) - 3
        if more > 0:
            rule += f"; ... {more} more"
        print(f"level {lv}{mark}: {info['count']} configs, runtime "
              f"{info['runtime_min']:.6g}..{info['runtime_max']:.6g}; exactly: {rule}")
    print(f"repeats inside the largest level: {len(in_big)} pairs, intraclass correlation "
          f"{summary['repeat_icc_in_largest_level']:.3f}")
    print(f"Kendall tau-b on held-out distinct configurations ({args.holdout:.0%}, "
          f"{args.splits} splits):")
    for name in results:
        s = summary[name]
        if s["mean"] is not None:
            print(f"  {name:16s} {s['mean']:.3f} +- {s['sd']:.3f}")


if __name__ == "__main__":
    main()
