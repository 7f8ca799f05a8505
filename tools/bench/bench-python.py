#!/usr/bin/python3
"""Benchmarks of the Python module (docs/python.md, "Performance"), each against what a user
would otherwise run, in the same run:

  1. read  - every array of a release layout file: tpugraphs.Dataset (graph + node_config_feat)
             vs np.load of the release .npz (all members); time (median of --repeats fresh
             processes) and peak RSS of each process.
  2. iter  - iterating every graph of a synthetic dataset whose arrays (as np.load gives them)
             are larger than the address-space limit given to the process (RLIMIT_AS, i.e.
             ulimit -v): arrays + --sample-configs configurations per graph; peak RSS against
             the largest graph's arrays + the configurations asked for. np.load of the largest
             exported graph under the same limit for comparison.
  3. score - tpugraphs.Model.score of every configuration of one synthetic layout graph vs
             `tpugraphs predict --format scores` of the same graph, same model, same threads;
             configurations per second, process start and model load included on both sides.

Usage: /usr/bin/python3 tools/bench/bench-python.py [--build build] [--work DIR] [--repeats 5]
           [--threads 2] [--limit-mb 1024] [--only read,iter,score]
Prints one table per benchmark with the ratios. Timings on a shared machine are noisy: run it
when the machine is idle or say "under load" with the figures (the machine and its load are
printed on stderr, tools/lib/bench_machine.py). The np.load references run with
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset.
"""

import argparse
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
PY = "/usr/bin/python3"
UNET = REPO / "tests/data/real/npz/release/layout/xla/default/valid/unet_3d.4x4.bf16.npz"

p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
p.add_argument("--build", default=str(REPO / "build"))
p.add_argument("--work", default=None)
p.add_argument("--repeats", type=int, default=5)
p.add_argument("--threads", type=int, default=2)
p.add_argument("--limit-mb", type=int, default=1024)
p.add_argument("--sample-configs", type=int, default=1000)
p.add_argument("--only", default="read,iter,score")
p.add_argument("--scale", type=float, default=1.0,
               help="multiplies the synthetic datasets' configuration counts (tests use 0.01)")
args = p.parse_args()
BUILD = pathlib.Path(args.build).resolve()
BIN = str(BUILD / "tpugraphs")
ENV = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
sys.path.insert(0, str(BUILD / "python"))
import numpy as np  # noqa: E402

import tpugraphs as tg  # noqa: E402

sys.path.insert(0, str(REPO / "tools" / "lib"))
import bench_machine  # noqa: E402

work = pathlib.Path(args.work or tempfile.mkdtemp(prefix="tpugraphs-bench-python-"))
work.mkdir(parents=True, exist_ok=True)
bench_machine.header()
# The BLAS a reference process (numpy, OpenBLAS overrides unset) loads.
subprocess.run([PY, str(REPO / "tools" / "lib" / "bench_machine.py"), "blas"], check=False,
               env=bench_machine.reference_env(ENV))

# A child process: runs `body` (which sets `result`), prints {"seconds", "peak_rss", "result"}.
CHILD = """
import json, sys, time
def peak():
    for line in open('/proc/self/status'):
        if line.startswith('VmHWM:'):
            return int(line.split()[1]) * 1024
import numpy as np
import tpugraphs as tg
base = peak()
t0 = time.perf_counter()
result = None
{body}
seconds = time.perf_counter() - t0
print(json.dumps({{"seconds": seconds, "peak_rss": peak(), "base_rss": base, "result": result}}))
"""


def child(body, limit_mb=None, reference=False):
    """reference: a numpy reference, run with the OpenBLAS overrides unset."""
    def limit():
        if limit_mb:
            resource.setrlimit(resource.RLIMIT_AS, (limit_mb << 20, limit_mb << 20))
    env = bench_machine.reference_env(ENV) if reference else ENV
    r = subprocess.run([PY, "-c", CHILD.format(body=body)], env=env, capture_output=True,
                       text=True, preexec_fn=limit)
    if r.returncode != 0:
        return {"error": r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "failed"}
    return json.loads(r.stdout.strip().splitlines()[-1])


def nconf(n):
    return max(20, int(n * args.scale))


def mib(x):
    return f"{x / 2**20:8.1f}"


def cli(*a):
    subprocess.run([BIN, "-q", *map(str, a)], check=True, stdout=subprocess.DEVNULL)


def bench_read():
    print("\n== read: all arrays of a release layout file (median of "
          f"{args.repeats} fresh processes; peak RSS includes the interpreter + numpy + module)")
    rows = []
    cases = [("unet_3d.4x4.bf16 (real release file)", UNET)]
    synth = work / "read_synth"
    if not synth.exists():
        cli("synth", "--task", "layout", "--graphs", "1", "--min-nodes", "2000", "--max-nodes",
            "2500", "--configs", str(nconf(20000)), "--seed", "5", "-o", synth)
        cli("ingest", synth, "-o", work / "read_synth.tpug")
        cli("export", work / "read_synth.tpug", "-o", work / "read_synth_npz")
    exported = sorted((work / "read_synth_npz").rglob("*.npz"))[0]
    cases.append((f"synthetic, {nconf(20000)} configs (export)", exported))
    for label, npz in cases:
        data = work / (npz.stem + ".tpug")
        if not data.exists():
            tg.ingest([str(npz)], str(data), collection="layout:xla:default")
        numpy_body = (f"z = np.load({str(npz)!r})\n"
                      "a = {k: z[k] for k in z.files}\n"
                      "result = sum(v.nbytes for v in a.values())")
        ours_body = (f"g = tg.Dataset({str(data)!r}).graph_at(0)\n"
                     "a = g.arrays()\n"
                     "result = sum(v.nbytes for v in a.values())")
        res = {}
        for name, body in (("np.load", numpy_body), ("tg.Dataset", ours_body)):
            runs = [child(body, reference=name == "np.load") for _ in range(args.repeats)]
            assert all("error" not in r for r in runs), runs
            res[name] = (statistics.median(r["seconds"] for r in runs),
                         max(r["peak_rss"] for r in runs), runs[0]["result"],
                         statistics.median(r["base_rss"] for r in runs))
        assert res["np.load"][2] == res["tg.Dataset"][2]
        rows.append((label, res))
    print(f"{'file':<40} {'MiB':>8} {'np.load s':>10} {'tg s':>9} {'speedup':>8} "
          f"{'np RSS MiB':>11} {'tg RSS MiB':>11}")
    for label, res in rows:
        n, t = res["np.load"], res["tg.Dataset"]
        print(f"{label:<40} {mib(n[2])} {n[0]:>10.4f} {t[0]:>9.4f} {n[0] / t[0]:>7.2f}x "
              f"{mib(n[1]):>11} {mib(t[1]):>11}")
    return rows


def bench_iter():
    print(f"\n== iter: every graph of a dataset larger than the memory given "
          f"(RLIMIT_AS = ulimit -v = {args.limit_mb} MiB)")
    data = work / "iter.tpug"
    if not data.exists():
        cli("synth", "--task", "layout", "--graphs", "8", "--min-nodes", "1500", "--max-nodes",
            "2500", "--configs", str(nconf(40000)), "--seed", "7", "-o", work / "iter_synth")
        cli("ingest", work / "iter_synth", "-o", data)
    ds = tg.Dataset(str(data))
    infos = [ds.info(i) for i in range(len(ds))]

    def npz_bytes(i):  # what np.load of the release-format file would hold
        return (i["num_nodes"] * (140 * 4 + 1) + i["num_edges"] * 16 + i["num_configs"] * 8 +
                i["num_config_nodes"] * 8 + i["num_configs"] * i["num_config_nodes"] * 18 * 4)

    total = sum(npz_bytes(i) for i in infos)
    largest = max(infos, key=lambda i: i["num_configs"] * i["num_config_nodes"])
    k = args.sample_configs
    graph_only = max(i["num_nodes"] * (140 * 4 + 1) + i["num_edges"] * 16 +
                     i["num_configs"] * 8 + i["num_config_nodes"] * 8 for i in infos)
    asked = max(min(k, i["num_configs"]) * i["num_config_nodes"] * 18 for i in infos)
    body = f"""
ds = tg.Dataset({str(data)!r})
rng = np.random.default_rng(0)
n = 0
for g in ds.graphs():
    a = g.arrays(configs=False)
    picks = np.sort(rng.choice(g.num_configs, size=min({k}, g.num_configs), replace=False))
    c = g.layout_config_feat(picks.tolist())
    n += sum(v.nbytes for v in a.values()) + c.nbytes
    del a, c, g
result = n
"""
    r = child(body, args.limit_mb)
    print(f"dataset: {len(infos)} graphs, file {mib(data.stat().st_size)} MiB; as np.load "
          f"arrays {mib(total)} MiB (largest graph {mib(npz_bytes(largest))} MiB)")
    if "error" in r:
        print(f"tg.Dataset iteration FAILED under the limit: {r['error']}")
        return r
    bound = graph_only + asked
    print(f"tg.Dataset, arrays + {k} configs/graph: {r['seconds']:.2f} s, peak RSS "
          f"{mib(r['peak_rss'])} MiB = interpreter+modules {mib(r['base_rss'])} MiB + "
          f"{mib(r['peak_rss'] - r['base_rss'])} MiB; bound (largest graph arrays without "
          f"configs + configs asked for) {mib(bound)} MiB")
    exported = work / "iter_npz"
    if not exported.exists():
        cli("export", data, "-o", exported, "--graph", largest["name"])
    f = sorted(exported.rglob("*.npz"))[0]
    rn = child(f"z = np.load({str(f)!r})\nresult = sum(z[k].nbytes for k in z.files)",
               args.limit_mb, reference=True)
    print("np.load of the largest graph's .npz under the same limit: " +
          (f"FAILED ({rn['error']})" if "error" in rn else
           f"{rn['seconds']:.2f} s, peak RSS {mib(rn['peak_rss'])} MiB"))
    return r


def bench_score():
    print(f"\n== score: Model.score vs tpugraphs predict, one graph, {args.threads} threads "
          f"(median of {args.repeats})")
    data = work / "score.tpug"
    if not data.exists():
        cli("synth", "--task", "layout", "--graphs", "1", "--min-nodes", "1500", "--max-nodes",
            "2000", "--configs", str(nconf(4000)), "--seed", "9", "-o", work / "score_synth")
        cli("ingest", work / "score_synth", "-o", data)
    model = work / "score.tpm"
    if not model.exists():
        cli("-j", str(args.threads), "train", "--dataset", data, "--output", model, "--epochs",
            "1", "--seed", "1", "--holdout-config-fraction", "0.2")
    configs = tg.Dataset(str(data)).graph_at(0).num_configs
    ours_t, cli_t = [], []
    body = (f"m = tg.Model({str(model)!r}, threads={args.threads})\n"
            f"s = m.score(tg.Dataset({str(data)!r}).graph_at(0))\nresult = len(s)")
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        subprocess.run([BIN, "-q", "-j", str(args.threads), "predict", "--data", str(data),
                        "--model", str(model), "--format", "scores", "--output",
                        str(work / "scores.tsv")], check=True)
        cli_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        r = child(body)
        assert r.get("result") == configs, r
        ours_t.append(time.perf_counter() - t0)
    c, o = statistics.median(cli_t), statistics.median(ours_t)
    print("runs (s): predict " + " ".join(f"{t:.3f}" for t in cli_t) + "; python " +
          " ".join(f"{t:.3f}" for t in ours_t))
    print(f"graph: {configs} configs; tpugraphs predict {c:.3f} s ({configs / c:.0f} configs/s), "
          f"python Model.score {o:.3f} s ({configs / o:.0f} configs/s, process start and imports "
          f"included); throughput ratio python/CLI {c / o:.3f}")


for what in args.only.split(","):
    {"read": bench_read, "iter": bench_iter, "score": bench_score}[what]()
print(f"\nwork dir: {work}")
bench_machine.footer()
