"""The release workflow's cost at S = 1, projected from measurements on this machine.

tools/bench-release.sh --project runs this (`tools/release project`). It makes small synthetic
datasets whose graphs have the release's mean sizes (../shared/docs/release-shape.md, cited in
tools/make-release-shaped.sh), measures with the recipes tools/train-all-collections.sh would pick:

  * a training step (the wall time of 120 steps minus that of 20, over 100: start-up excluded;
    each run twice, PROJECT_REPEATS, and the fastest kept; a variant's step as its ratio to
    the recipe's, timed again beside it),
  * a validation graph per epoch (3 epochs with one validation graph minus 3 without),
  * evaluate's cost per configuration (the whole valid split, as the workflow's evaluate runs),
  * ingest's cost per configuration row of release-format .npz files,
  * the peak RSS of every process, and the RSS a training graph adds (2 against 4 graphs),

and projects each collection at S = 1 with the recipes' own step rule (train/trainer.cc,
InitOptimisation): steps per epoch = max(ceil(G / batch_graphs), ceil(min_config_passes x rows /
(batch_graphs x configs_per_graph x epochs))), times epochs, times ensemble members.

Results: a table on stdout (or, with --json, one JSON object); progress on stderr. The cache
(--cache, PROJECTION_CACHE) keys the measurements by the binary, the recipes, the CPU and its
cores and the measuring method's version, and reuses them until one of these changes. For tests
only (the figures are then not the release's): PROJECT_FIXTURE_NODES, PROJECT_FIXTURE_CONFIGS
and PROJECT_STEPS ("20 120", the step counts timed) shrink the measurements.
"""

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
import hashlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools", "lib"))
import bench_machine  # noqa: E402
import frontier  # noqa: E402
import plan as release_plan  # noqa: E402

# The release at S = 1 (../shared/docs/release-shape.md: files per split and config rows, exact;
# tile rows per split are not published: the paper's 12.9 M samples over 6,988 kernels gives
# 1,842 per kernel, used for every split, an estimate).
RELEASE = {
    "tile:xla": dict(train_graphs=5709, valid_graphs=676, test_graphs=844,
                     train_rows=5709 * 1842, valid_rows=676 * 1842, test_rows=844 * 1842,
                     fixture="tile"),
    "layout:xla:random": dict(train_graphs=69, valid_graphs=7, test_graphs=8,
                              train_rows=1005926, valid_rows=59809, test_rows=8001, fixture="xla"),
    "layout:xla:default": dict(train_graphs=61, valid_graphs=7, test_graphs=8,
                               train_rows=1046683, valid_rows=66021, test_rows=8000,
                               fixture="xla"),
    "layout:nlp:random": dict(train_graphs=207, valid_graphs=20, test_graphs=17,
                              train_rows=13457555, valid_rows=1374614, test_rows=17000,
                              fixture="nlp"),
    "layout:nlp:default": dict(train_graphs=198, valid_graphs=20, test_graphs=17,
                               train_rows=12772024, valid_rows=1401384, test_rows=17001,
                               fixture="nlp"),
}

# Fixtures: graphs of the release's mean sizes. Layout: 5 programs (2 train, 2 for the RSS
# step, 1 valid) of the mean node count of the train split (nlp 5,758, xla 12,745; their valid
# means are 5,610 and 12,797) with 3,000 configurations (a step samples 32 per graph and
# validation 1,000, so more only costs time to make). Tile: synth's kernels, scaled to the
# release's 40 nodes per kernel by node count.
FIXTURES = {
    "nlp": dict(task="layout", graphs=5, nodes=5758, configs=3000),
    "xla": dict(task="layout", graphs=5, nodes=12745, configs=3000),
    "tile": dict(task="tile", graphs=80, configs=1842),
}
TILE_RELEASE_NODES = 40.0
# For tests only (the figures are then not the release's): PROJECT_FIXTURE_NODES and
# PROJECT_FIXTURE_CONFIGS shrink the fixtures, PROJECT_STEPS="A B" the two step counts timed.
if os.environ.get("PROJECT_FIXTURE_NODES"):
    for _f in FIXTURES.values():
        if "nodes" in _f:
            _f["nodes"] = int(os.environ["PROJECT_FIXTURE_NODES"])
if os.environ.get("PROJECT_FIXTURE_CONFIGS"):
    for _f in FIXTURES.values():
        _f["configs"] = int(os.environ["PROJECT_FIXTURE_CONFIGS"])
    FIXTURES["tile"]["graphs"] = 10
STEPS = [int(x) for x in os.environ.get("PROJECT_STEPS", "20 120").split()]
# Tile steps are ~100x cheaper: timed over 10x the steps.
TILE_STEP_FACTOR = 1 if os.environ.get("PROJECT_STEPS") else 10
# Each of the two timed runs is repeated and its fastest kept: a run slowed by a neighbour or by
# the VM's host reads high, never low. One run of each read the xla step at 28.0 and 33.5 ms
# 12 minutes apart on one idle VM (docs/train.md, "Quality per hour").
REPEATS = max(1, int(os.environ.get("PROJECT_REPEATS", "2")))

LOG = sys.stderr


def log(msg):
    print(msg, file=LOG, flush=True)


def run(cmd, out=None):
    """Runs cmd; returns (wall seconds, peak RSS MiB, stdout). Fails loudly."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    stdout = p.stdout.read()
    stderr = p.stderr.read()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        log("failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), stderr[-3000:]))
        sys.exit(1)
    if out:
        with open(out, "w") as f:
            f.write(stderr)
    return wall, usage.ru_maxrss / 1024.0, stdout


def recipe_fields(path):
    """Top-level scalar fields of a TrainConfig text proto (the step rule's inputs)."""
    fields = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"^([a-z_]+):\s*([-0-9.e]+)\s*$", line)
            if m:
                fields[m.group(1)] = float(m.group(2))
            m = re.match(r'^train_split:\s*"([^"]*)"\s*$', line)
            if m:
                fields["train_split"] = m.group(1)
    defaults = dict(epochs=20, batch_graphs=8, configs_per_graph=32, min_config_passes=0,
                    ensemble_members=1, valid_max_configs=1000, patience=10,
                    valid_every_epochs=1, train_split="train", carve_valid_fraction=0)
    for k, v in defaults.items():
        fields.setdefault(k, v)
    return fields


def trains_on_valid(r):
    """Whether recipe fields r train on the validation programs (train_split "train,valid"):
    they are then training graphs and rows, and nothing is validated."""
    return "valid" in str(r["train_split"]).split(",")


def member_steps(r, graphs, rows):
    """Steps of one member at S = 1: the trainer's rule (train/trainer.cc, RaiseStepsPerEpoch)."""
    bg = min(r["batch_graphs"], graphs)
    per_epoch = math.ceil(graphs / bg)
    if r["min_config_passes"] > 0:
        need = math.ceil(r["min_config_passes"] * rows /
                         (bg * r["configs_per_graph"] * r["epochs"]))
        per_epoch = max(per_epoch, need)
    return int(r["epochs"] * per_epoch), per_epoch


# Recipe fields --set may change: they set how many steps and validations a run takes, not what
# a step or a validation costs, so the measurements stay valid.
# Fields that change what a step costs but not a validation or an evaluation.
STEP_ONLY_FIELDS = ("configs_per_graph", "batch_graphs")
BUDGET_FIELDS = ("epochs", "min_config_passes", "ensemble_members", "valid_every_epochs",
                 "valid_max_configs")
# Fields that change which graphs a run trains and validates on, not what a step, a validation
# or an evaluation costs (a variant's flags, projected with the measurements of its recipe).
SPLIT_FIELDS = ("train_split", "carve_valid_fraction")
# Recipes projected with another recipe's measurements: layout-collection.textproto is
# layout.textproto with the MSE term (a pass over a step's 64 scores, in the loss phase: about
# 0.015 ms of a 10 ms step) and other splits (SPLIT_FIELDS): a step, a validation and an
# evaluation cost the same.
MEASURED_AS = {"layout-collection": "layout"}


def parse_sets(items):
    """--set RECIPE.FIELD=VALUE (repeatable) -> {recipe: {field: value}}; exits on a bad one."""
    sets = {}
    for item in items or []:
        m = re.match(r"^(tile|layout|layout-large|layout-collection)\.([a-z_]+)=([0-9.e+]+)$",
                     item)
        if not m or m.group(2) not in BUDGET_FIELDS:
            sys.exit("--set %r: want RECIPE.FIELD=VALUE with RECIPE tile, layout, layout-large or "
                     "layout-collection "
                     "and FIELD one of %s (fields that change a step's cost need a measurement: "
                     "edit the recipe and run --project)" % (item, ", ".join(BUDGET_FIELDS)))
        value = float(m.group(3))
        if value < 0 or (m.group(2) != "min_config_passes" and (value < 1 or value != int(value))):
            sys.exit("--set %r: %s must be %s" % (item, m.group(2), "a count >= 1"
                                                  if m.group(2) != "min_config_passes" else ">= 0"))
        sets.setdefault(m.group(1), {})[m.group(2)] = value
    return sets


class Projection:
    def __init__(self, args):
        self.bin = args.binary
        self.work = args.work
        self.glob = args.global_flags
        self.large = args.large
        self.sets = parse_sets(args.set)
        self.m = {}  # per fixture: its datasets and ingest costs
        self.cache = {}  # (fixture, recipe[, cost flags]) -> measurements
        self.saved_load = None  # the saved measurements' load at the start ("unknown" if unsaid)
        self.saved_count = 0  # how many of self.cache came from them

    def tp(self, *a, threads=None, quiet=True):
        glob = list(self.glob)
        if threads is not None:
            # This run's thread count instead of the global flags' -j.
            for flag in ("-j", "--threads"):
                while flag in glob:
                    i = glob.index(flag)
                    del glob[i:i + 2]
            glob += ["-j", str(threads)]
        return [self.bin] + glob + (["-q"] if quiet else []) + list(a)

    def make_fixture(self, name):
        f = FIXTURES[name]
        d = os.path.join(self.work, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        log("== fixture %s: %s" % (name, f))
        synth = ["synth", "--task", f["task"], "--graphs", str(f["graphs"]), "--configs",
                 str(f["configs"]), "--seed", "7", "-o", os.path.join(d, "raw")]
        if f["task"] == "layout":
            synth += ["--nodes", str(f["nodes"])]
            synth += ["--splits", "0.4,0.4,0.2"]  # 2 train, 2 more (RSS), 1 valid below
        else:
            synth += ["--splits", "0.8,0.2,0"]
        run(self.tp(*synth))
        coll = "tile:xla" if f["task"] == "tile" else "layout:%s:random" % name
        # Through the release format, as the workflow reads it: raw -> dataset -> .npz -> dataset.
        raw_ds = os.path.join(d, "raw.tpug")
        run(self.tp("ingest", os.path.join(d, "raw"), "--collection", coll, "-o", raw_ds))
        run(self.tp("export", raw_ds, "-o", os.path.join(d, "tree")))
        npz = sorted(os.path.join(r, x) for r, _, fs in os.walk(os.path.join(d, "tree"))
                     for x in fs if x.endswith(".npz"))
        by_split = {}
        for p in npz:
            by_split.setdefault(os.path.basename(os.path.dirname(p)), []).append(p)
        ds = {}
        if f["task"] == "layout":
            # train: 2 graphs (steps); train4: those and the 2 "valid" graphs (RSS per graph);
            # the test split's graph is the one validated on.
            two, more, one = by_split["train"], by_split["valid"], by_split["test"]
            sets = dict(train={"train": two}, train4={"train": two + more},
                        valid={"valid": one}, both={"train": two, "valid": one})
            sub = "layout/%s/random" % name
        else:
            sets = dict(train={"train": by_split["train"]}, valid={"valid": by_split["valid"]},
                        both={"train": by_split["train"], "valid": by_split["valid"]})
            sub = "tile/xla"
        rows = 0
        wall = 0.0
        for key, splits in sets.items():
            # A release-layout tree of links, so that ingest takes each file's split from its path.
            tree = os.path.join(d, "sets", key)
            for split, files in splits.items():
                dd = os.path.join(tree, "npz", sub, split)
                os.makedirs(dd)
                for p in files:
                    os.symlink(p, os.path.join(dd, os.path.basename(p)))
            out = os.path.join(d, key + ".tpug")
            w, _, _ = run(self.tp("ingest", tree, "--collection", coll, "-o", out))
            ds[key] = out
            if key in ("train", "valid"):
                wall += w
                rows += self.total(out)["configs"]
        nodes = self.mean_nodes(ds["train"])
        graphs = self.total(ds["train"])["graphs"] + self.total(ds["valid"])["graphs"]
        per_graph_s, per_row_s = 0.0, wall / rows
        if f["task"] == "layout":
            # One graph of the same size with 10x the configurations: ingest's cost per graph
            # and per configuration row (t = a graphs + b rows through the two points).
            big = os.path.join(d, "big")
            run(self.tp("synth", "--task", "layout", "--graphs", "1", "--nodes", str(f["nodes"]),
                        "--configs", str(10 * f["configs"]), "--seed", "8", "-o", big + "-raw"))
            run(self.tp("ingest", big + "-raw", "--collection", coll, "-o", big + "-raw.tpug"))
            run(self.tp("export", big + "-raw.tpug", "-o", big + "-tree"))
            wb, _, _ = run(self.tp("ingest", big + "-tree", "--collection", coll, "-o",
                                   big + ".tpug"))
            rows_big = self.total(big + ".tpug")["configs"]
            # wall = graphs a + rows b; wb = a + rows_big b.
            den = rows_big * graphs - rows
            if den > 0:
                per_row_s = max(0.0, (wb * graphs - wall) / den)
                per_graph_s = max(0.0, wb - rows_big * per_row_s)
            log("   ingest of one graph with %d rows: %.2f s" % (rows_big, wb))
        self.m[name] = dict(coll=coll, ds=ds, ingest_us_per_row=1e6 * per_row_s,
                            ingest_s_per_graph=per_graph_s, nodes=nodes,
                            valid_configs=self.mean_configs(ds["valid"]))
        log("   ingest: %d rows of %d graphs in %.2f s: %.3f s per graph + %.2f us per row; "
            "%.0f nodes per graph" % (rows, graphs, wall, per_graph_s, 1e6 * per_row_s, nodes))

    def total(self, ds):
        """The dataset's totals (tpugraphs stats --json): graphs, nodes, configs, ..."""
        _, _, out = run(self.tp("stats", ds, "--json"))
        return json.loads(out)["total"]

    def mean_nodes(self, ds):
        t = self.total(ds)
        return t["nodes"] / t["graphs"]

    def mean_configs(self, ds):
        t = self.total(ds)
        return t["configs"] / t["graphs"]

    def train(self, fixture, recipe, ds, extra, tag, threads=None, flags=(), quiet=True):
        m = self.m[fixture]
        os.makedirs(os.path.join(self.work, fixture), exist_ok=True)
        label = recipe + "".join("_" + re.sub(r"[^a-z0-9.]", "", f) for f in flags)
        out = os.path.join(self.work, fixture, "%s.%s.tpm" % (label, tag))
        recipe_file = os.path.join(ROOT, "tools/configs/%s.textproto" % recipe)
        args = ["train", "--config", recipe_file, "--dataset", ds, "--collection", m["coll"],
                "--output", out] + list(flags) + [
                "--ensemble-members", "1", "--min-config-passes", "0",
                "--carve-valid-fraction", "0", "--checkpoint-interval-seconds", "0",
                "--seed", "3"] + list(extra)
        cmd = self.tp(*args, threads=threads, quiet=quiet)
        w, rss, _ = run(cmd, out=out + ".log")
        return w, rss, out

    @staticmethod
    def walls_text(t, lo, hi):
        """The runs behind a step of time_steps, as "HI steps A / B s, LO steps C / D s"."""
        return "%d steps %s s, %d steps %s s" % (
            hi, " / ".join("%.1f" % w for w in t["walls_hi"]), lo,
            " / ".join("%.1f" % w for w in t["walls_lo"]))

    def time_steps(self, fixture, recipe, flags, lo, hi, tag="s"):
        """The time of a step: the wall time of hi steps minus that of lo, over hi - lo (start-up
        excluded), each run REPEATS times and the fastest kept."""
        ds = self.m[fixture]["ds"]

        def fastest(steps):
            walls, rss_max = [], 0.0
            for i in range(REPEATS):
                name = "%s%d" % (tag, steps) + ("" if i == 0 else ".r%d" % (i + 1))
                w, r, _ = self.train(fixture, recipe, ds["train"],
                                     ["--epochs", "1", "--steps-per-epoch", str(steps)], name,
                                     flags=flags)
                walls.append(w)
                rss_max = max(rss_max, r)
            return min(walls), rss_max, walls

        w_lo, _, walls_lo = fastest(lo)
        w_hi, rss, walls_hi = fastest(hi)
        step = (w_hi - w_lo) / (hi - lo)
        if step <= 0:
            # Start-up noise larger than the steps' difference (tiny fixtures): the longer run's
            # time per step, start-up included, an upper bound.
            step = w_hi / hi
            log("   the two runs' difference was not positive: %d steps' whole time used" % hi)
        return dict(step=step, w_hi=w_hi, w_lo=w_lo, walls_hi=walls_hi, walls_lo=walls_lo,
                    rss=rss)

    def measure(self, fixture, recipe, flags=(), one_thread=True, base=None, ref_step_ms=None):
        """What a step, a validation graph and an evaluated configuration cost with the recipe
        and the cost flags of a variant (flags), and the peak RSS. one_thread: also the step at
        -j 1 (for projections to more cores). base: the recipe's own measurements, whose
        validation and evaluate costs are taken instead of measured (flags that change the
        step only). ref_step_ms: the recipe's step, which a variant's step is scaled to by
        timing the recipe again beside it."""
        m = self.m[fixture]
        ds = m["ds"]
        flags = list(flags)
        recipe_label = " ".join([recipe] + flags)
        log("== %s on %s: steps" % (recipe_label, fixture))
        # No validation: the dataset has no valid split.
        novalid = ["--epochs", "1"]
        lo, hi = STEPS
        if FIXTURES[fixture]["task"] == "tile":
            hi = lo + (hi - lo) * TILE_STEP_FACTOR
        t = self.time_steps(fixture, recipe, flags, lo, hi)
        step = t["step"]
        w_lo = t["w_lo"]  # the shorter run's wall time, start-up included
        rss2 = t["rss"]  # the peak RSS of the longer runs, on the 2 training graphs
        log("   step %.1f ms (%s; the fastest of each taken); peak RSS %.0f MiB" %
            (1e3 * step, self.walls_text(t, lo, hi), rss2))
        scaled = {}
        if flags and ref_step_ms:
            # The VM's speed drifts by up to a third over tens of minutes, and the variants are
            # timed minutes after the recipe: the recipe is timed again beside the variant, and
            # the variant's step is the recipe's measured step times the ratio of the two.
            r = self.time_steps(fixture, recipe, [], lo, hi, tag="beside")
            ratio = step / r["step"]
            scaled = dict(raw_step_ms=1e3 * step, recipe_beside_ms=1e3 * r["step"])
            log("   the recipe timed beside it: %.1f ms (%s), so this step is %.3fx the "
                "recipe's %.1f ms: %.1f ms" % (1e3 * r["step"], self.walls_text(r, lo, hi), ratio,
                                              ref_step_ms, ratio * ref_step_ms))
            step = ratio * ref_step_ms / 1e3
        rss = {}
        if "train4" in ds:
            _, rss4, _ = self.train(fixture, recipe, ds["train4"],
                                    novalid + ["--steps-per-epoch", "20"], "g4", flags=flags)
            rss["per_graph_mb"] = max(0.0, (rss4 - rss2) / 2.0)
            rss["base_mb"] = rss2 - 2 * rss["per_graph_mb"]
        else:
            rss["per_graph_mb"] = 0.0
            rss["base_mb"] = rss2
        # One thread: what the second thread gives (for projections to more cores).
        step_j1 = 0.0
        if one_thread:
            w1, _, _ = self.train(fixture, recipe, ds["train"],
                                  novalid + ["--steps-per-epoch", str(hi)], "j1", threads=1,
                                  flags=flags)
            step_j1 = max(step, (w1 - (w_lo - lo * step)) / hi)
            log("   step at -j 1: %.1f ms (%d steps %.1f s): %.2fx from the second thread" %
                (1e3 * step_j1, hi, w1, step_j1 / step))
        if base is not None:
            # Flags that change the step only (configurations or graphs per step): validation
            # and evaluate cost what the recipe's do, measured once.
            return dict(step_ms=1e3 * step, step_ms_j1=1e3 * step_j1,
                        valid_graph_s=base["valid_graph_s"],
                        eval_ms_per_config=base["eval_ms_per_config"],
                        peak_rss_mb=max(rss2, base["peak_rss_mb"]), rss=rss,
                        valid_from_recipe=True, **scaled)
        log("== %s on %s: validation" % (recipe_label, fixture))
        # Every epoch validated, whatever the recipe's valid_every_epochs: this measures one
        # validation, and the projection counts the validations a recipe runs.
        epochs = ["--epochs", "3", "--steps-per-epoch", "20", "--valid-every-epochs", "1"]
        # Its log (TAG.valid.tpm.log) lists the epochs validated.
        wv, rssv, model = self.train(fixture, recipe, ds["both"], epochs + ["--patience", "0"],
                                     "valid", flags=flags, quiet=False)
        wn, _, _ = self.train(fixture, recipe, ds["both"],
                              epochs + ["--patience", "0", "--valid-split", "test"], "novalid",
                              flags=flags)
        n_valid = self.total(ds["valid"])["graphs"]
        valid_graph_s = max(0.0, (wv - wn) / 3.0 / n_valid)
        log("   validation %.3f s per graph and epoch (%d graphs; 3 epochs %.1f s, without %.1f s)"
            % (valid_graph_s, n_valid, wv, wn))
        log("== %s on %s: evaluate" % (recipe_label, fixture))
        we, rsse, _ = run(self.tp("evaluate", "--data", ds["valid"], "--model", model, "--split",
                                  "valid", "--json"))
        configs = self.total(ds["valid"])["configs"]
        # Loading aside: evaluate with no graph costs the start-up.
        eval_s_per_config = we / configs
        log("   evaluate %.2f ms per config (%d configs in %.1f s)" %
            (1e3 * eval_s_per_config, configs, we))
        return dict(step_ms=1e3 * step, step_ms_j1=1e3 * step_j1, valid_graph_s=valid_graph_s,
                    eval_ms_per_config=1e3 * eval_s_per_config,
                    peak_rss_mb=max(rss2, rssv, rsse), rss=rss, **scaled)

    def measured(self, fixture, recipe, cost_flags=(), one_thread=True):
        """The measurements of (fixture, recipe, cost flags): from the cache, else measured."""
        recipe = MEASURED_AS.get(recipe, recipe)
        key = (fixture, recipe) + ((" ".join(cost_flags),) if cost_flags else ())
        if key in self.cache:
            return self.cache[key]
        if fixture not in self.m or not all(os.path.exists(d)
                                            for d in self.m[fixture]["ds"].values()):
            self.make_fixture(fixture)
        base = ref = None
        fields = set(flag_fields(list(cost_flags)))
        if cost_flags:
            ref = self.measured(fixture, recipe)
        if cost_flags and fields <= set(STEP_ONLY_FIELDS):
            base = ref
        self.cache[key] = self.measure(fixture, recipe, cost_flags, one_thread, base,
                                       ref["step_ms"] if ref else None)
        return self.cache[key]

    def load(self, saved):
        if saved:
            self.m = saved["fixtures"]
            self.cache = {tuple(k.split("|")): v for k, v in saved["recipes"].items()}
            self.saved_load = saved.get("load_at_start", "unknown")
            self.saved_count = len(self.cache)

    def saved_state(self):
        # The load at the start of the measuring run; the highest of the runs that added any.
        now = bench_machine.load_at_start() if self.measured_now() else None
        loads = [x for x in (self.saved_load, now) if isinstance(x, (int, float))]
        return dict(fixtures=self.m, recipes={"|".join(k): v for k, v in self.cache.items()},
                    load_at_start=max(loads) if loads else "unknown")

    def measured_now(self):
        """Whether this run measured anything (False: every figure came from the saved run)."""
        return len(self.cache) > self.saved_count

    def workflow_recipe(self, name, rel):
        kind = "tile" if name.startswith("tile") else "layout"
        if kind == "layout":
            return "layout-large" if rel["train_graphs"] >= self.large else "layout-collection"
        return kind

    def project(self, release, saved=None):
        """Projects every collection of `release` (graph and row counts per split) with the
        recipe the workflow picks; `saved`: measurements of an earlier run (measurements.json)
        instead of measuring again."""
        self.load(saved)
        results = []
        for name, rel in release.items():
            if rel["train_graphs"] == 0:
                continue
            recipe = self.workflow_recipe(name, rel)
            meas = self.measured(rel["fixture"], recipe)
            r = recipe_fields(os.path.join(ROOT, "tools/configs/%s.textproto" % recipe))
            r.update(self.sets.get(recipe, {}))
            results.append(self.project_one(name, rel, recipe, r, meas))
        self.saved = self.saved_state()
        return results

    def project_frontier(self, release, variants):
        """Projects, for every variant of frontier-variants.tsv, the collections of its fixture
        (nlp: layout:nlp:*, xla: layout:xla:*, tile: tile:xla) with its recipe and flags.
        Variants whose flags change a step's cost are measured (without the -j 1 step)."""
        rows = []
        for v in variants:
            budget, cost = split_flags(v["flags"])
            for name, rel in release.items():
                if rel["train_graphs"] == 0 or rel["fixture"] != v["fixture"]:
                    continue
                meas = self.measured(rel["fixture"], v["recipe"], cost, one_thread=not cost)
                r = recipe_fields(os.path.join(ROOT, "tools/configs/%s.textproto" % v["recipe"]))
                r.update(budget)
                r.update({k: val for k, val in flag_fields(cost).items() if k in r})
                row = self.project_one(name, rel, v["recipe"], r, meas)
                row["variant"] = v["variant"]
                row["fixture"] = v["fixture"]
                row["flags"] = " ".join(v["flags"])
                rows.append(row)
        self.saved = self.saved_state()
        return rows

    def project_one(self, name, rel, recipe, r, meas):
        """One collection's projection with recipe fields r and the measurements meas."""
        kind = "tile" if name.startswith("tile") else "layout"
        fx = rel["fixture"]
        members = int(r["ensemble_members"])
        refit = trains_on_valid(r)
        if refit and float(r["carve_valid_fraction"]) > 0:
            # Carved validations of training graphs are not projected.
            sys.exit("%s: a recipe that trains on the validation programs with "
                     "carve_valid_fraction > 0 is not projected" % name)
        train_graphs = rel["train_graphs"] + (rel["valid_graphs"] if refit else 0)
        train_rows = rel["train_rows"] + (rel["valid_rows"] if refit else 0)
        per_member, per_epoch = member_steps(r, train_graphs, train_rows)
        steps = per_member * members
        # A step, a validation graph and a configuration evaluated cost in proportion to the
        # nodes of the graphs concerned: the fixture's costs are scaled from its mean node
        # count to the collection's (per split). At S = 1 the layout fixtures have the
        # release's mean sizes; synth's tile kernels are smaller than the release's 40 nodes.
        # A tree of make-release-shaped.sh has its own graphs' sizes (release_of_tree), which
        # at small S can be far from the means (one xla training program of 4,914 nodes).
        fx_nodes = self.m[fx]["nodes"]
        default_nodes = TILE_RELEASE_NODES if kind == "tile" else fx_nodes
        scale = {split: rel.get(split + "_nodes") or default_nodes
                 for split in ("train", "valid", "test")}
        scale = {k: v / fx_nodes for k, v in scale.items()}
        step_ms = meas["step_ms"] * scale["train"]
        # Validation scores at most valid_max_configs configurations of each graph; it was
        # measured with the recipe file's own cap.
        cap = r["valid_max_configs"] or float("inf")
        measured_cap = (recipe_fields(os.path.join(ROOT, "tools/configs/%s.textproto" % recipe))
                        ["valid_max_configs"] or float("inf"))
        valid_s = (meas["valid_graph_s"] * scale["valid"] *
                   min(cap, rel["valid_rows"] / max(1, rel["valid_graphs"])) /
                   min(measured_cap, self.m[fx]["valid_configs"]))
        train_h = steps * step_ms / 3.6e6
        # Validations per member: every valid_every_epochs-th epoch and the last.
        every = max(1, int(r.get("valid_every_epochs", 1)))
        epochs = int(r["epochs"])
        # None when the validation programs are trained on: a graph trained on is never
        # validated on.
        validations = 0 if refit else epochs // every + (1 if epochs % every else 0)
        valid_h = validations * members * rel["valid_graphs"] * valid_s / 3600.0
        # The workflow evaluates the valid split twice (train-all-collections.sh writes
        # <name>.valid.json and <name>.valid.txt with one evaluate each) and predicts the
        # test split once.
        eval_h = ((2 * rel["valid_rows"] * scale["valid"] + rel["test_rows"] * scale["test"]) *
                  meas["eval_ms_per_config"] * members / 3.6e6)
        ingest_h = ((rel["train_rows"] + rel["valid_rows"] + rel["test_rows"]) *
                    self.m[fx]["ingest_us_per_row"] / 3.6e9 +
                    (rel["train_graphs"] + rel["valid_graphs"] + rel["test_graphs"]) *
                    self.m[fx].get("ingest_s_per_graph", 0.0) / 3600.0)
        graphs = rel["train_graphs"] + rel["valid_graphs"]
        rss = meas["rss"]["base_mb"] + graphs * meas["rss"]["per_graph_mb"]
        return dict(
            name=name, recipe="%s.textproto" % recipe, steps=steps,
            steps_per_epoch=per_epoch, members=members, epochs=epochs,
            patience=int(r["patience"]), validations=validations,
            nodes_per_graph={k: round(v * fx_nodes, 1) for k, v in scale.items()},
            # Hours to 5 decimals: a small tree's collections take a few thousandths of an hour,
            # and at 3 decimals its variants tied.
            step_ms=round(step_ms, 2), train_hours=round(train_h, 5),
            valid_hours=round(valid_h, 5), eval_hours=round(eval_h, 5),
            ingest_hours=round(ingest_h, 5),
            hours=round(train_h + valid_h + eval_h + ingest_h, 5),
            peak_rss_mb=round(max(rss, meas["peak_rss_mb"]), 1),
            measured=dict(fixture=fx, nodes_per_graph=round(self.m[fx]["nodes"], 1),
                          step_ms=round(meas["step_ms"], 2),
                          step_ms_one_thread=round(meas.get("step_ms_j1", 0.0), 2),
                          valid_seconds_per_graph_epoch=round(meas["valid_graph_s"], 4),
                          eval_ms_per_config=round(meas["eval_ms_per_config"], 4),
                          ingest_us_per_row=round(self.m[fx]["ingest_us_per_row"], 2),
                          ingest_s_per_graph=round(self.m[fx].get("ingest_s_per_graph", 0.0), 4),
                          peak_rss_mb=round(meas["peak_rss_mb"], 1),
                          rss_per_graph_mb=round(meas["rss"]["per_graph_mb"], 2)))


def flag_fields(flags):
    """["--prune-hops", "1", ...] -> {"prune_hops": 1.0, ...} (numeric values only)."""
    out = {}
    for a, b in zip(flags[0::2], flags[1::2]):
        if not a.startswith("--"):
            sys.exit("variant flags %r: want --flag value pairs" % " ".join(flags))
        try:
            out[a[2:].replace("-", "_")] = float(b)
        except ValueError:
            out[a[2:].replace("-", "_")] = b
    if len(flags) % 2:
        sys.exit("variant flags %r: want --flag value pairs" % " ".join(flags))
    return out


def split_flags(flags):
    """A variant's flags -> (budget and split fields {field: value}, the other flags, which
    change what a step, validation or evaluation costs and so need a measurement)."""
    budget, cost = {}, []
    for a, b in zip(flags[0::2], flags[1::2]):
        field = a[2:].replace("-", "_")
        if field == "train_split":
            budget[field] = b
        elif field in BUDGET_FIELDS + SPLIT_FIELDS:
            budget[field] = float(b)
        else:
            cost += [a, b]
    flag_fields(flags)  # checks the pairs
    return budget, cost


def release_of_tree(tree):
    """Graph and row counts per collection and split of a tree of make-release-shaped.sh
    (its shape.tsv: collection, split, name, nodes, configs), with the release's fixtures."""
    counts = {}
    with open(os.path.join(tree, "shape.tsv")) as f:
        next(f)
        for line in f:
            coll, split, _, nodes, configs = line.rstrip("\n").split("\t")
            c = counts.setdefault(coll, {})
            c[split + "_graphs"] = c.get(split + "_graphs", 0) + 1
            c[split + "_rows"] = c.get(split + "_rows", 0) + int(configs)
            if nodes.isdigit():
                c[split + "_nodes"] = c.get(split + "_nodes", 0) + int(nodes)
            else:
                c[split + "_sized"] = False
    # shape.tsv gives no size for tile kernels (synth draws them): read the files.
    c = counts.get("tile:xla", {})
    for split in ("train", "valid", "test"):
        if c.get(split + "_sized", True):
            continue
        d = os.path.join(tree, "npz", "tile", "xla", split)
        files = sorted(os.listdir(d)) if os.path.isdir(d) else []
        sizes = []
        for x in files:
            if x.endswith(".npz"):
                sizes.append(kernel_nodes(os.path.join(d, x)))
                if sizes[-1] is None:
                    break  # the release's size is used for this split
        if sizes and None not in sizes and len(sizes) == c.get(split + "_graphs"):
            c[split + "_nodes"] = sum(sizes)
            c[split + "_sized"] = True
    out = {}
    for name, rel in RELEASE.items():
        c = counts.get(name, {})
        out[name] = dict(fixture=rel["fixture"])
        for split in ("train", "valid", "test"):
            graphs = c.get(split + "_graphs", 0)
            out[name][split + "_graphs"] = graphs
            out[name][split + "_rows"] = c.get(split + "_rows", 0)
            if graphs and split + "_nodes" in c and c.get(split + "_sized", True):
                out[name][split + "_nodes"] = c[split + "_nodes"] / graphs
    return out


def kernel_nodes(path):
    """Nodes of one graph of the release format (.npz): the rows of its node_feat."""
    try:
        import numpy as np  # python3-numpy; needed only for a tree's tile kernels
        with np.load(path) as z:
            return int(z["node_feat"].shape[0])
    except Exception as e:  # a tree that cannot be read gives no size: the default is used
        log("   %s: no node count (%s)" % (path, e))
        return None


# How the measurements are taken; raised when that changes, so that a cache of figures taken
# the old way is not reused. 2: the validation measured on every epoch (--valid-every-epochs 1).
# 3: the fastest of REPEATS runs timed for each step count. 4: a variant's step scaled by the
# recipe's, timed again beside it.
MEASUREMENT_VERSION = 4


def machine_key(binary):
    """What a cached projection depends on: the binary, the recipes, the CPU and its cores, the
    way the measurements are taken, and the test-only fixture overrides. A change of any gives
    another cache entry."""
    h = hashlib.sha256()
    h.update(("measurement %d;" % MEASUREMENT_VERSION).encode())
    with open(binary, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    configs = os.path.join(ROOT, "tools", "configs")
    for x in sorted(os.listdir(configs)):
        if x.endswith(".textproto"):
            with open(os.path.join(configs, x), "rb") as f:
                h.update(x.encode() + f.read())
    for k in ("PROJECT_FIXTURE_NODES", "PROJECT_FIXTURE_CONFIGS", "PROJECT_STEPS",
              "PROJECT_REPEATS"):
        h.update(("%s=%s;" % (k, os.environ.get(k, ""))).encode())
    m = bench_machine.machine_json()
    h.update(("%s|%s" % (m["cpu"], m["cores"])).encode())
    return h.hexdigest()[:16]


def hours_arg(text):
    """--hours H: a number of hours > 0, written plainly (12, 7.5)."""
    if not re.match(r"^[0-9]+([.][0-9]+)?$", text) or not float(text) > 0:
        raise argparse.ArgumentTypeError("want a number of hours > 0, got '%s'" % text)
    return float(text)


def parser(binary=None, prog="tools/release project"):
    """The projection's flags, whose defaults are the environment's settings (read here only)."""
    env = os.environ.get
    variants = env("FRONTIER_VARIANTS") or frontier.VARIANTS
    ap = argparse.ArgumentParser(prog=prog, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=binary, required=binary is None)
    ap.add_argument("work_dir", nargs="?", metavar="WORK_DIR",
                    help="measurements and fixtures (default /tmp/bench-release-project)")
    ap.add_argument("--work", help="the same as WORK_DIR")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--large", type=int, default=int(env("LARGE_COLLECTION_GRAPHS", "100")))
    ap.add_argument("--global-flags", default=env("TPUGRAPHS_GLOBAL_FLAGS", ""))
    ap.add_argument("--tree", help="project the tree of make-release-shaped.sh (shape.tsv) "
                    "instead of the release")
    ap.add_argument("--measurements", default=env("PROJECTION_MEASUREMENTS") or None,
                    help="measurements.json of an earlier run: project without measuring again "
                    "(what it lacks is measured); default PROJECTION_MEASUREMENTS")
    ap.add_argument("--cache", help="measurements per machine, reused and extended (--work is "
                    "then ignored); with --frontier or --hours default PROJECTION_CACHE, else "
                    "~/.cache/tpugraphs/projection", default=(env("PROJECTION_CACHE") or
                    os.path.join(env("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                                 "tpugraphs", "projection")))
    ap.add_argument("--set", action="append", metavar="RECIPE.FIELD=VALUE",
                    default=env("PROJECTION_SET", "").split() or None,
                    help="project as if the recipe had this budget field (%s); repeatable; "
                    "default PROJECTION_SET" % ", ".join(BUDGET_FIELDS))
    ap.add_argument("--frontier", nargs="?", metavar="VARIANTS_TSV", const=variants,
                    help="also project every variant of this file (default FRONTIER_VARIANTS, "
                    "else tools/configs/frontier-variants.tsv)")
    ap.add_argument("--results", default=env("FRONTIER_RESULTS") or frontier.RESULTS,
                    help="the frontier's results (FRONTIER_RESULTS, else the project's)")
    ap.add_argument("--hours", type=hours_arg, help="plan for H hours; exit 2 when nothing fits")
    ap.set_defaults(variants=variants)
    return ap


def project(args):
    """The projection (and with args.hours the plan) as one JSON object, or NoPlan."""
    args.work = args.work or args.work_dir or "/tmp/bench-release-project"
    args.global_flags = args.global_flags.split()
    if args.hours is not None:
        args.frontier = args.frontier or args.variants
    cache_file = None
    if args.frontier:  # measurements kept per machine
        args.work = os.path.join(args.cache, machine_key(args.binary))
        cache_file = os.path.join(args.work, "measurements.json")
        if not args.measurements and os.path.exists(cache_file):
            args.measurements = cache_file
    os.makedirs(args.work, exist_ok=True)
    t0 = time.monotonic()
    bench_machine.header()
    p = Projection(args)
    saved = None
    if args.measurements:
        with open(args.measurements) as f:
            saved = json.load(f)
        log("== measurements from %s" % args.measurements)
    release = release_of_tree(args.tree) if args.tree else RELEASE
    results = p.project(release, saved)
    rows = []
    if args.frontier:
        variants = frontier.read_variants(args.frontier)
        rows = p.project_frontier(release, variants)
    if not saved or cache_file or len(p.cache) > len(saved["recipes"]):
        out = cache_file or os.path.join(args.work, "measurements.json")
        with open(out + ".tmp", "w") as f:
            json.dump(p.saved, f, indent=1)
        os.replace(out + ".tmp", out)
    if saved and not p.measured_now():
        bench_machine.footer(measured_at=saved.get("load_at_start", "unknown"))
    else:
        bench_machine.footer()
    machine = bench_machine.machine_json()
    if isinstance(p.saved.get("load_at_start"), (int, float)):
        machine["load_at_start"] = p.saved["load_at_start"]  # the measuring runs' (see above)
    load = machine["load_at_start"]
    chosen = None
    if args.hours is not None:
        summary = frontier.summarise(frontier.read_results(args.results), variants, args.binary)
        order = {v["variant"]: i for i, v in enumerate(variants)}
        chosen = release_plan.plan(rows, summary, args.hours, order)
        results = []
        for name, (v, h, k, row) in sorted(chosen.items(),
                                           key=lambda x: list(release).index(x[0])):
            row = dict(row)
            row["chosen"] = v
            row["kendall"] = k
            results.append(row)
    total = sum(r["hours"] for r in results)
    obj = dict(machine=machine, collections=results, total_hours=round(total, 2),
               peak_rss_mb=round(max(r["peak_rss_mb"] for r in results), 1),
               measured_in_seconds=round(time.monotonic() - t0, 1),
               release=args.tree or "S = 1", measurements=args.measurements or "measured",
               overrides=sorted(args.set or []))
    if rows:
        obj["frontier"] = rows
    if chosen is not None:
        obj["budget_hours"] = args.hours
        obj["plan"] = release_plan.as_json(chosen)
        obj["plan_text"] = release_plan.describe(chosen, rows, summary, args.hours)
    return obj


def refuse(args, e):
    """A budget nothing fits: the smallest that does, and exit 2."""
    print("--hours %g: %s; the smallest budget that fits is --hours %.2f" %
          (args.hours, e, math.ceil(e.min_hours * 100) / 100), file=sys.stderr)
    return 2


def main(argv=None, binary=None):
    args = parser(binary).parse_args(argv)
    try:
        obj = project(args)
    except release_plan.NoPlan as e:
        return refuse(args, e)
    results, rows, chosen = obj["collections"], obj.get("frontier"), obj.get("plan")
    total, load = sum(r["hours"] for r in results), obj["machine"]["load_at_start"]
    if args.json:
        print(json.dumps(obj, indent=1))
        return 0
    print("%-20s %-24s %9s %9s %9s %9s %9s %9s %9s %11s" %
          ("collection", "recipe", "steps", "step_ms", "train_h", "valid_h", "eval_h",
           "ingest_h", "hours", "peak_rss_MB"))
    for r in results:
        print("%-20s %-24s %9d %9.1f %9.2f %9.2f %9.2f %9.3f %9.2f %11.0f" %
              (r["name"], r["recipe"], r["steps"], r["step_ms"], r["train_hours"],
               r["valid_hours"], r["eval_hours"], r["ingest_hours"], r["hours"],
               r["peak_rss_mb"]))
    if args.set:
        print("budget as if: %s" % ", ".join(sorted(args.set)))
    if rows and not chosen:
        print("\nfrontier variants (projected hours per collection):")
        print("%-22s %-20s %9s %9s %9s %9s" % ("variant", "collection", "step_ms", "train_h",
                                                "valid_h", "hours"))
        for r in rows:
            print("%-22s %-20s %9.1f %9.2f %9.2f %9.2f" % (r["variant"], r["name"], r["step_ms"],
                                                           r["train_hours"], r["valid_hours"],
                                                           r["hours"]))
    if chosen:
        print("\nplan for --hours %g:" % args.hours)
        for line in obj["plan_text"]:
            print(line)
    print("total: %.1f h on %d cores; peak RSS %.0f MB; load %.2f at the start, %.2f at the end; "
          "measured in %.0f s" % (total, obj["machine"]["cores"], obj["peak_rss_mb"], load,
                                  obj["machine"]["load_at_end"], obj["measured_in_seconds"]))
