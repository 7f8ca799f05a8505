"""The quality-per-hour frontier: test Kendall of recipe variants on held-out programs.

tools/bench/bench-frontier.sh runs this as `tools/release frontier` (docs/train.md, "Quality per
hour").

  run    trains every (variant, seed) of tools/configs/frontier-variants.tsv that the results
         file lacks, on its fixture, evaluates it on the fixture's unseen test programs and
         appends one JSON line per run to the results file. Resumable: a run killed (or stopped
         by --minutes) continues from its training checkpoint when started again, and a line is
         appended only once a run is complete, so partial results are never lost or doubled.
  table  the frontier table (markdown) and plot (SVG) from the results file and a projection of
         the variants' hours (tools/bench-release.sh --project --frontier --json).
  summary  per variant: seeds, mean and spread of test Kendall (JSON), what the planner reads.

Fixtures (each held out by program; synth seeds fixed, so every machine makes the same files):
  nlp  20 training and 3 validation programs of 4,000-8,000 nodes with 20,000 configurations
       each (random search), and 20 test programs of the same sizes with 1,000 configurations,
       as the release's test files have;
  xla  20 training and 3 validation programs of 2,000-24,000 nodes with 15,000 configurations
       (the xla training files' mean is 12,745 nodes and 14,579 configurations), and 20 test
       programs of 4,000-40,000 nodes with 1,000 configurations (the xla test files' mean is
       23,561 nodes; ../shared/docs/release-shape.md);
  tile 150 kernels as tools/bench/bench-quality.sh SCALE=medium draws them (90 training, 15
       validation, 45 test).
"""

import argparse
import datetime
import fcntl
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VARIANTS = os.path.join(ROOT, "tools", "configs", "frontier-variants.tsv")
RESULTS = os.path.join(ROOT, "docs", "frontier", "results.jsonl")
sys.path.insert(0, os.path.join(ROOT, "tools", "lib"))
import bench_machine  # noqa: E402

# name -> list of synth invocations: (flags, seed, renamed split or None). A second draw's files
# are renamed (test_*), so that one ingest of both trees keeps every program.


def training_draw(graphs, min_nodes, max_nodes, configs, seed):
    """Random-search programs split 0.87 / 0.13 into training and validation programs."""
    return (["--search", "random", "--graphs", str(graphs), "--min-nodes", str(min_nodes),
             "--max-nodes", str(max_nodes), "--configs", str(configs), "--splits",
             "0.87,0.13,0"], seed, None)


def unseen_draw(min_nodes, max_nodes, seed):
    """20 unseen test programs with 1,000 configurations, as the release's test files have."""
    return (["--search", "random", "--graphs", "20", "--min-nodes", str(min_nodes),
             "--max-nodes", str(max_nodes), "--configs", "1000", "--splits", "0,0,1"], seed,
            "test")


NLP_TEST = unseen_draw(4000, 8000, 1101)
XLA_TEST = unseen_draw(4000, 40000, 1201)
FIXTURES = {
    "nlp": dict(task="layout", draws=[training_draw(23, 4000, 8000, 20000, 101), NLP_TEST]),
    "xla": dict(task="layout", draws=[training_draw(23, 2000, 24000, 15000, 201), XLA_TEST]),
    "tile": dict(task="tile", draws=[
        (["--graphs", "150", "--configs", "60", "--splits", "0.6,0.1,0.3"], 103, None)]),
    # The release's program counts (../shared/docs/release-shape.md: about 200 nlp and 61 xla
    # training programs per collection), with the same unseen test programs as nlp and xla (the
    # same draws), so that a recipe's lines on the two sizes compare. 5,000 configurations per
    # program: the recipes' 300 epochs of 2 x 32 sample about 9,600 (nlp200) and 9,750 (xla61,
    # per member) per program, so min_config_passes (1.5) never raises the budget.
    "nlp200": dict(task="layout", draws=[training_draw(230, 4000, 8000, 5000, 301), NLP_TEST]),
    "xla61": dict(task="layout", draws=[training_draw(70, 2000, 24000, 5000, 401), XLA_TEST]),
}
# Smaller fixtures for the tests of the script itself (FRONTIER_FIXTURE_SCALE=tiny): the numbers
# are then not the frontier's.
if os.environ.get("FRONTIER_FIXTURE_SCALE") == "tiny":
    FIXTURES = {
        "nlp": dict(task="layout", draws=[
            (["--graphs", "5", "--min-nodes", "150", "--max-nodes", "300", "--configs", "60",
              "--splits", "0.6,0.4,0"], 101, None),
            (["--graphs", "2", "--min-nodes", "150", "--max-nodes", "300", "--configs", "30",
              "--splits", "0,0,1"], 1101, "test")]),
        "xla": dict(task="layout", draws=[
            (["--graphs", "4", "--min-nodes", "150", "--max-nodes", "300", "--configs", "60",
              "--splits", "0.5,0.5,0"], 201, None),
            (["--graphs", "2", "--min-nodes", "150", "--max-nodes", "300", "--configs", "30",
              "--splits", "0,0,1"], 1201, "test")]),
        "tile": dict(task="tile", draws=[
            (["--graphs", "20", "--configs", "20", "--splits", "0.6,0.2,0.2"], 103, None)]),
    }
    FIXTURES["nlp200"] = FIXTURES["nlp"]
    FIXTURES["xla61"] = FIXTURES["xla"]
# The same programs ingested with `ingest --mark-absent-dimensions` (docs/ingest.md, "Absent
# dimensions"): <fixture>-marked reads its base fixture's synth trees and noise-free costs, so
# its lines compare with the base fixture's on the same programs and ceiling.
MARKED_SUFFIX = "-marked"
for _base in ("nlp", "xla", "xla61"):
    FIXTURES[_base + MARKED_SUFFIX] = dict(FIXTURES[_base], base=_base,
                                           ingest=["--mark-absent-dimensions"])


# One graph's lines are real runtimes (the release's U-Net file): there is no noise-free cost to
# rank by, so no ceiling.
REAL_CEILING_NOTE = "real runtimes: no noise-free cost, no ceiling"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def read_variants(path=VARIANTS):
    """frontier-variants.tsv -> ordered list of dicts (variant, fixture, recipe, flags)."""
    out = []
    seen = set()
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line or line.startswith("#") or line.startswith("variant\t"):
                continue
            parts = line.split("\t")
            if len(parts) != 4:
                sys.exit("%s:%d: want 4 tab-separated fields, got %d" % (path, n, len(parts)))
            name, fixture, recipe, flags = parts
            known = sorted(FIXTURES) + ["single"]
            if fixture not in known or not name.startswith(fixture):
                sys.exit("%s:%d: fixture %r (%s; the variant's name starts with it)"
                         % (path, n, fixture, ", ".join(known)))
            if name in seen:
                sys.exit("%s:%d: variant %r twice" % (path, n, name))
            seen.add(name)
            if not os.path.isfile(os.path.join(ROOT, "tools", "configs", recipe + ".textproto")):
                sys.exit("%s:%d: no recipe tools/configs/%s.textproto" % (path, n, recipe))
            out.append(dict(variant=name, fixture=fixture, recipe=recipe,
                            flags=[] if flags == "-" else flags.split()))
    return out


_DIGESTS = {}


def config_digest(binary, recipe, flags):
    """What a variant trains with, as a digest: the settings digest of the TrainConfig that its
    recipe file and flags resolve to (`train --print-config`: defaults left out, so a setting
    written in the recipe and the same setting given as a flag are the same configuration)."""
    key = (binary, recipe, tuple(flags))
    if key not in _DIGESTS:
        path = os.path.join(ROOT, "tools", "configs", recipe + ".textproto")
        p = subprocess.run([binary, "train", "--config", path, *flags, "--print-config"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit("%s train --config %s %s --print-config failed: %s" % (
                binary, path, " ".join(flags), p.stderr.strip()[-1000:]))
        m = re.match(r"# settings digest: ([0-9a-f]{16})\n", p.stdout)
        if not m:
            sys.exit("%s train --print-config: no settings digest on its first line" % binary)
        _DIGESTS[key] = m.group(1)
    return _DIGESTS[key]


def digest_of(binary, v):
    return config_digest(binary, v["recipe"], v["flags"])


def lines_by_variant(results, variants, binary, extra=""):
    """{variant: {seed: line}}: per variant of the file, the lines that measured what it trains
    today (the same fixture and config_digest; the last one per seed), among those run with
    these extra flags, whatever name they ran under; lines of other programs than the trainer
    (the PyTorch GNN's: no digest) under their own name. Lines that stand for no variant are
    reported: their recipe's settings or their flags changed since."""
    by_config = {}
    for v in variants:
        by_config.setdefault((v["fixture"], digest_of(binary, v)), []).append(v["variant"])
    names = {v["variant"] for v in variants}
    out, stale = {}, {}
    for r in results:
        if r.get("extra_flags", "") != extra:
            continue
        if "config_digest" in r:
            owners = by_config.get((r.get("fixture"), r["config_digest"]), [])
        else:
            owners = [] if r["variant"] in names else [r["variant"]]  # not a trainer's run
        for name in owners:
            out.setdefault(name, {})[r["seed"]] = r
        if not owners:
            stale[r["variant"]] = stale.get(r["variant"], 0) + 1
    for name, k in sorted(stale.items()):
        log("%s: %d result line(s) of a configuration that no variant trains today (its recipe "
            "or flags changed); not counted" % (name, k))
    return out


def recorded_digest(model):
    """The configuration digest a run's files were trained with (MODEL.key), or None."""
    if not os.path.exists(model + ".key"):
        return None
    with open(model + ".key") as f:
        return f.read().strip()


def read_results(path):
    """The results file: one JSON object per line; a torn last line (a kill while appending) is
    reported and skipped."""
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as e:
                log("%s:%d: skipped, not a JSON line (%s)" % (path, n, e))
    return out


def append_result(path, obj):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    line = json.dumps(obj, sort_keys=True) + "\n"
    # After a torn last line (a kill while appending), start on a line of its own.
    if os.path.exists(path) and os.path.getsize(path) > 0:
        with open(path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                line = "\n" + line
    size = os.path.getsize(path) if os.path.exists(path) else None
    try:
        with open(path, "a") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        # Taken back (a full disk): the file keeps exactly the lines it had, none cut.
        try:
            if size is None:
                os.remove(path)
            else:
                os.truncate(path, size)
        except OSError:
            pass
        sys.exit("%s: cannot append the result of %s seed %s: %s; the file is as it was, and the "
                 "same command appends the result once there is room" %
                 (path, obj.get("variant"), obj.get("seed"), e.strerror or e))


def tp(binary, threads, *args):
    cmd = [binary]
    if threads:
        cmd += ["-j", str(threads)]
    return cmd + list(args)


def make_fixture(binary, threads, work, name):
    """Synthesises and ingests the fixture once; returns its dataset and the test ceiling."""
    d = os.path.join(work, "fixtures", name)
    data = os.path.join(d, "data.tpug")
    if os.path.exists(data):
        return data
    f = FIXTURES[name]
    if "base" in f:
        # The base fixture's programs and costs, ingested with this fixture's flags.
        make_fixture(binary, threads, work, f["base"])
        base = os.path.join(work, "fixtures", f["base"])
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        trees = []
        for i in range(len(f["draws"])):
            shutil.copyfile(os.path.join(base, "costs%d.tsv" % i),
                            os.path.join(d, "costs%d.tsv" % i))
            trees.append(os.path.join(base, "tree%d" % i))
        log("== fixture %s: ingest %s's programs %s" % (name, f["base"], " ".join(f["ingest"])))
        tmp = data + ".tmp"
        p = subprocess.run(tp(binary, threads, "-q", "ingest", *trees, *f["ingest"], "-o", tmp),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            # The work directory's binary is the one copied on its first run (see main): an
            # older one may lack the option this fixture is ingested with.
            sys.exit("bench-frontier: fixture %s: %s ingest %s failed (exit %d): %s\n"
                     "This work directory runs the binary copied into it on its first run; if "
                     "that binary predates %s, run with a new --work (its base fixture's "
                     "directory, fixtures/%s, can be linked in)." %
                     (name, binary, " ".join(f["ingest"]), p.returncode,
                      p.stderr.strip()[-500:], " ".join(f["ingest"]), f["base"]))
        os.rename(tmp, data)
        return data
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    trees = []
    for i, (flags, seed, rename) in enumerate(f["draws"]):
        tree = os.path.join(d, "tree%d" % i)
        log("== fixture %s: synth %s --seed %d" % (name, " ".join(flags), seed))
        subprocess.run(tp(binary, threads, "-q", "synth", "--task", f["task"], *flags, "--seed",
                          str(seed), "-o", tree, "--noise-free-costs",
                          os.path.join(d, "costs%d.tsv" % i)),
                       check=True, stdout=subprocess.DEVNULL)
        if rename:
            for root, _, files in os.walk(tree):
                for x in files:
                    if x.startswith("program_"):
                        os.rename(os.path.join(root, x),
                                  os.path.join(root, rename + "_" + x[len("program_"):]))
        trees.append(tree)
    tmp = data + ".tmp"
    subprocess.run(tp(binary, threads, "-q", "ingest", *trees, "-o", tmp), check=True,
                   stdout=subprocess.DEVNULL)
    os.rename(tmp, data)
    return data


def ceiling(work, name):
    """Kendall of the noise-free cost against the measured runtime, mean over the test graphs
    (the best any model can score; needs numpy)."""
    try:
        import numpy as np
    except ImportError:
        return None
    d = os.path.join(work, "fixtures", name)
    graphs = {}
    for i in range(len(FIXTURES[name]["draws"])):
        path = os.path.join(d, "costs%d.tsv" % i)
        if not os.path.exists(path):
            continue
        with open(path) as f:
            header = None
            for line in f:
                if line.startswith("#"):
                    continue
                p = line.rstrip("\n").split("\t")
                if header is None:
                    header = p
                    continue
                row = dict(zip(header, p))
                if row.get("split") == "test":
                    graphs.setdefault((i, row["graph"]), []).append(
                        (float(row["measured_ns"] if "measured_ns" in row else p[4]),
                         float(row["noise_free_ns"] if "noise_free_ns" in row else p[5])))
    taus = []
    for v in graphs.values():
        a = np.array(v)
        m, c = a[:, 0], a[:, 1]
        sm = np.sign(m[:, None] - m[None, :])
        sc = np.sign(c[:, None] - c[None, :])
        num = (sm * sc).sum()
        den = math.sqrt((sm != 0).sum() * (sc != 0).sum())
        if den > 0:
            taus.append(num / den)
    return round(float(np.mean(taus)), 4) if taus else None


class Deadline(Exception):
    pass


def run_train(cmd, log_path, deadline):
    """Runs one training (its own process group) until it ends or the deadline passes (then it
    is stopped, and its checkpoint continues it next time). Returns its CPU seconds.

    A training outlives nothing it should not: SIGTERM, SIGINT or SIGHUP to this script stops
    the training first (its checkpoint continues it next time). A lock beside the log, held by
    this script and inherited by the training, refuses a second training of the same run while
    one still writes its files (as one left running by a `kill -9` of this script would)."""
    lock_path = log_path[:-len(".log")] + ".run.lock"  # MODEL.lock is train's own
    lock = open(lock_path, "a+")
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip() or "unknown"
        lock.close()
        sys.exit("%s: a training of this run is still going (process %s holds %s); stop it, "
                 "or wait for it, before running it again" % (log_path, holder, lock_path))
    caught = []
    handlers = {}

    def on_signal(signum, _frame):
        caught.append(signum)

    try:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            handlers[sig] = signal.signal(sig, on_signal)
        with open(log_path, "a") as err:
            err.write("== %s %s\n" % (datetime.datetime.now().isoformat(timespec="seconds"),
                                      " ".join(cmd)))
            err.flush()
            out_path = log_path[:-len(".log")] + ".out"
            with open(out_path, "w") as out:
                p = subprocess.Popen(cmd, stdout=out, stderr=err, start_new_session=True,
                                     pass_fds=(lock.fileno(),))
                lock.seek(0)
                lock.truncate()
                lock.write("%d\n" % p.pid)
                lock.flush()
                while True:
                    pid, status, usage = os.wait4(p.pid, os.WNOHANG)
                    if pid:
                        break
                    if caught or (deadline and time.time() > deadline):
                        os.killpg(p.pid, signal.SIGTERM)
                        os.wait4(p.pid, 0)
                        if caught:
                            sys.exit("stopped by signal %d: %s; the same command continues it "
                                     "from its checkpoint" % (caught[0], " ".join(cmd)))
                        raise Deadline()
                    time.sleep(1.0)
    finally:
        for sig, h in handlers.items():
            signal.signal(sig, h)
        lock.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        with open(log_path) as f:
            tail = f.read()[-2000:]
        sys.exit("training failed (exit %d): %s\n%s" % (code, " ".join(cmd), tail))
    return usage.ru_utime + usage.ru_stime


def without_members(flags):
    """`flags` less --ensemble-members and its value."""
    out = []
    skip = False
    for f in flags:
        if skip:
            skip = False
        elif f == "--ensemble-members":
            skip = True
        elif not f.startswith("--ensemble-members="):
            out.append(f)
    return out


def members_lender(v, variants, work, seed, binary):
    """The variant whose finished run of `seed` lends its members to `v`'s: the first of the
    same fixture and recipe whose flags differ from v's in --ensemble-members alone (either may
    leave it to the recipe), so an ensemble shrinks or grows from a smaller one; None when no
    such run is finished."""
    for b in variants:
        if (b["variant"] == v["variant"] or b["fixture"] != v["fixture"] or
                b["recipe"] != v["recipe"] or
                without_members(b["flags"]) != without_members(v["flags"])):
            continue
        model = os.path.join(work, "runs", b["variant"], "seed%d.tpm" % seed)
        if not os.path.exists(model) or os.path.exists(model + ".members-from"):
            continue
        if recorded_digest(model) not in (None, digest_of(binary, b)):
            continue  # trained before b changed: set aside when b runs again
        return b["variant"]
    return None


def set_aside_if_stale(model, key):
    """A run's files (model, checkpoint, log, ...) record the configuration digest they were
    trained with in MODEL.key. When the variant has changed since, they move to
    stale-<time>/ beside them, so that the run starts afresh instead of finishing or
    evaluating another configuration's model. Files without a key (from before the key was
    kept) are taken as the variant's."""
    d, base = os.path.split(model)
    old = recorded_digest(model)
    if old == key:
        return
    if old is not None:
        aside = os.path.join(d, "stale-%s" % time.strftime("%Y%m%dT%H%M%S"))
        os.makedirs(aside, exist_ok=True)
        for name in os.listdir(d):
            if name.startswith(base):
                os.rename(os.path.join(d, name), os.path.join(aside, name))
        log("== %s: trained with another configuration (digest %s, now %s: the recipe or the "
            "flags changed); its files moved to %s" % (model, old, key, aside))
    with open(model + ".key", "w") as f:
        f.write(key + "\n")


def cmd_run(args):
    variants = read_variants(args.variants)
    want = set(args.variant or [])
    unknown = want - {v["variant"] for v in variants}
    if unknown:
        sys.exit("--variant: unknown %s (see %s)" % (", ".join(sorted(unknown)), args.variants))
    chosen = [v for v in variants if (not want or v["variant"] in want) and
              (not args.fixture or v["fixture"] in args.fixture)]
    if not chosen:
        sys.exit("no variant chosen")
    seeds = [int(s) for s in args.seeds.split(",")]
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    # The binary is copied once per work directory: a rebuild while the runs go on changes
    # nothing under them (the copy's version is in every result line).
    binary = os.path.join(work, "tpugraphs")
    if not os.path.exists(binary):
        shutil.copy2(args.binary, binary + ".tmp")
        os.rename(binary + ".tmp", binary)
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()
    deadline = time.time() + 60 * args.minutes if args.minutes else None
    # A line counts for the same extra flags only (the tests' lines never stand for a variant).
    extra = " ".join(args.train_flags)
    done = {(name, seed) for name, by_seed in
            lines_by_variant(read_results(args.results), variants, args.binary, extra).items()
            for seed in by_seed}
    machine = bench_machine.machine_json()
    pending = [(s, v) for s in seeds for v in chosen if (v["variant"], s) not in done]
    log("== %d runs to do (%d done already) in %s" % (len(pending), len(chosen) * len(seeds) -
                                                        len(pending), work))
    ceilings = {}
    for seed, v in pending:
        fx = v["fixture"]
        data = make_fixture(binary, args.threads, work, fx)
        if fx not in ceilings:
            ceilings[fx] = ceiling(work, fx)
        d = os.path.join(work, "runs", v["variant"])
        os.makedirs(d, exist_ok=True)
        model = os.path.join(d, "seed%d.tpm" % seed)
        recipe = os.path.join(ROOT, "tools", "configs", v["recipe"] + ".textproto")
        cmd = tp(binary, args.threads, "train", "--config", recipe, "--dataset", data,
                 "--seed", str(seed), "--output", model, "--auto-resume", "true",
                 *v["flags"], *args.train_flags)
        cpu_path = model + ".cpu"
        set_aside_if_stale(model, digest_of(args.binary, v))
        # A variant that differs from another in --ensemble-members alone starts from that
        # one's finished file of the same seed: train reuses the members both have (an ensemble
        # grows or shrinks without retraining them; docs/train.md, "Ensembles"). The marker
        # says the file at `model` is the lender's copy until the training rewrites it.
        marker = model + ".members-from"
        lender = None
        if os.path.exists(marker):
            with open(marker) as f:
                lender = f.read().strip()
        elif not os.path.exists(model):
            lender = members_lender(v, variants, work, seed, args.binary)
            if lender:
                with open(marker, "w") as f:
                    f.write(lender + "\n")
        if lender and not os.path.exists(model):
            src = os.path.join(work, "runs", lender, "seed%d.tpm" % seed)
            shutil.copy2(src, model + ".tmp")
            os.rename(model + ".tmp", model)
        if not os.path.exists(model) or os.path.exists(marker):
            log("== %s seed %d: train (%s)%s" % (
                v["variant"], seed, " ".join(v["flags"]) or "the recipe as it is",
                ", reusing the members of %s seed %d" % (lender, seed) if lender else ""))
            t0 = time.time()
            try:
                cpu = run_train(cmd, model + ".log", deadline)
            except Deadline:
                log("== --minutes %g reached: %s seed %d stopped; the same command continues it"
                    % (args.minutes, v["variant"], seed))
                return 3
            with open(cpu_path, "a") as f:
                f.write("%.1f\t%.1f\n" % (cpu, time.time() - t0))
            if lender:
                os.remove(marker)
        ev = subprocess.run(tp(binary, args.threads, "-q", "evaluate", "--data", data, "--split",
                               "test", "--model", model, "--json"),
                            capture_output=True, text=True)
        if ev.returncode != 0:
            sys.exit("evaluate failed: %s" % ev.stderr[-2000:])
        c = json.loads(ev.stdout)["collections"][0]
        with open(model + ".log") as f:
            text = f.read()
        spe = re.findall(r"(\d+) steps per epoch instead of", text)
        best = re.findall(r"\(best epoch (\d+), ([a-z_]+)=([-0-9.e]+)\)", text)
        epochs = re.findall(r"epoch=(\d+) ", text)
        cpu_s = wall_s = 0.0
        pieces = 0
        if os.path.exists(cpu_path):
            with open(cpu_path) as f:
                for line in f:
                    a, b = line.split()
                    cpu_s += float(a)
                    wall_s += float(b)
                    pieces += 1
        result = dict(
            variant=v["variant"], fixture=fx, recipe=v["recipe"],
            config_digest=digest_of(args.binary, v), flags=" ".join(v["flags"]), seed=seed,
            test_graphs=c["graphs"], kendall=round(c["kendall_tau"], 4),
            opa=round(c["opa"], 4),
            top1_slowdown=round(c.get("top_k_slowdown", {}).get("1", float("nan")), 4),
            ceiling_kendall=ceilings[fx],
            ceiling_share=(round(c["kendall_tau"] / ceilings[fx], 4) if ceilings[fx] else None),
            best_epoch=int(best[-1][0]) if best else None,
            best_valid=float(best[-1][2]) if best else None,
            epochs_run=max((int(e) for e in epochs), default=0),
            steps_per_epoch=int(spe[-1]) if spe else None,
            train_cpu_s=round(cpu_s, 1), train_wall_s=round(wall_s, 1), train_pieces=pieces,
            binary=version, machine="%s, %d cores" % (machine["cpu"], machine["cores"]),
            finished=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
        if args.train_flags:
            result["extra_flags"] = " ".join(args.train_flags)
        if lender:
            result["members_from"] = lender
        append_result(args.results, result)
        log("== %s seed %d: test Kendall %.4f (%d graphs)" % (v["variant"], seed,
                                                               result["kendall"], c["graphs"]))
        print(json.dumps(result, sort_keys=True), flush=True)
    return 0


SINGLE_NPZ = os.path.join(ROOT, "tests", "data", "real", "npz", "release", "layout", "xla",
                          "default", "valid", "unet_3d.4x4.bf16.npz")
SHARED_TORCH = os.path.join(os.path.dirname(ROOT), "shared", "tools", "plain_torch_layout_gnn.py")
REPO_TORCH = os.path.join(ROOT, "tools", "reference", "plain_gnn_reference.py")


def timed(cmd, env=None):
    """Runs cmd; returns (exit code, stdout, stderr, wall seconds)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    out, err = p.communicate()
    return p.returncode, out, err, time.monotonic() - t0


def cpu_children():
    """CPU seconds of the children reaped so far (a run's CPU time is the difference)."""
    r = os.times()
    return r.children_user + r.children_system


def cmd_single(args):
    """One graph's held-out configurations: the single-graph variants (fixture "single") on the
    U-Net file, 3 seeds each, and the plain PyTorch GNN in the same run; the load is printed
    before each run, since the times are the figure here."""
    variants = [v for v in read_variants(args.variants) if v["fixture"] == "single"]
    if args.variant:
        variants = [v for v in variants if v["variant"] in args.variant]
    if not variants:
        sys.exit("no single-graph variant chosen (fixture single in %s)" % args.variants)
    seeds = [int(x) for x in args.seeds.split(",")]
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    data = os.path.join(work, "single.tpug")
    if not os.path.exists(data):
        subprocess.run([args.binary, "-q", "ingest", args.npz, "--collection", "layout:xla:default",
                        "-o", data + ".tmp"], check=True,
                       stdout=subprocess.DEVNULL)
        os.rename(data + ".tmp", data)
    version = subprocess.run([args.binary, "--version"], capture_output=True,
                             text=True).stdout.strip()
    machine = bench_machine.machine_json()
    done = {(name, seed) for name, by_seed in
            lines_by_variant(read_results(args.results), variants, args.binary).items()
            for seed in by_seed}
    bench_machine.header()
    for v in variants:
        recipe = os.path.join(ROOT, "tools", "configs", v["recipe"] + ".textproto")
        for seed in seeds:
            if (v["variant"], seed) in done:
                continue
            model = os.path.join(work, "%s.seed%d.tpm" % (v["variant"], seed))
            load = os.getloadavg()[0]
            c0 = cpu_children()
            cmd = tp(args.binary, args.threads, "train", "--config", recipe, "--dataset", data,
                     "--train-split", "", "--valid-split", "", "--holdout-config-fraction", "0.3",
                     "--seed", str(seed), "--output", model, *v["flags"])
            code, out, err, wall = timed(cmd)
            cpu = cpu_children() - c0
            if code != 0:
                sys.exit("training failed (exit %d): %s\n%s" % (code, " ".join(cmd), err[-2000:]))
            kv = dict(l.split("\t", 1) for l in out.splitlines() if "\t" in l)
            result = dict(variant=v["variant"], fixture="single", recipe=v["recipe"],
                          config_digest=digest_of(args.binary, v), flags=" ".join(v["flags"]),
                          seed=seed, test_graphs=1,
                          kendall=round(float(kv.get("held_out_kendall", "nan")), 4),
                          ridge_kendall=round(float(kv.get("reference_ridge_valid_kendall",
                                                           "nan")), 4),
                          wall_s=round(wall, 2), cpu_s=round(cpu, 2), load_at_start=load,
                          graph=os.path.basename(args.npz), ceiling_kendall=None,
                          ceiling_note=REAL_CEILING_NOTE, binary=version,
                          machine="%s, %d cores" % (machine["cpu"], machine["cores"]),
                          finished=datetime.datetime.now(datetime.timezone.utc).isoformat(
                              timespec="seconds"))
            append_result(args.results, result)
            log("== %s seed %d: held-out Kendall %.4f (ridge %.4f) in %.1f s wall, %.1f s CPU "
                "(load %.2f at the start)" % (v["variant"], seed, result["kendall"],
                                              result["ridge_kendall"], wall, cpu, load))
            print(json.dumps(result, sort_keys=True), flush=True)
    # The plain PyTorch GNN on the same file, its OpenBLAS at its best.
    if args.torch and (args.torch_variant, seeds[0]) not in done:
        env = bench_machine.reference_env()
        script = args.torch
        load = os.getloadavg()[0]
        c0 = cpu_children()
        if os.path.basename(script) == os.path.basename(SHARED_TORCH):
            code, out, err, wall = timed(["/usr/bin/python3", script, args.npz, "--seeds",
                                          str(len(seeds))], env=env)
            taus = [float(x) for x in re.findall(r"seed \d+: held-out Kendall ([-0-9.]+)", out)]
        else:
            taus, wall, code, err = [], 0.0, 0, ""
            for seed in seeds:
                c, out, e, w = timed(["/usr/bin/python3", script, args.npz, "--seed", str(seed)],
                                     env=env)
                code = code or c
                err += e
                wall += w
                m = re.search(r"final_kendall\t([-0-9.]+)", out)
                taus.append(float(m.group(1)) if m else float("nan"))
        cpu = cpu_children() - c0
        if code != 0 or len(taus) != len(seeds):
            sys.exit("the PyTorch GNN failed (%s): %s" % (script, err[-2000:]))
        for seed, tau in zip(seeds, taus):
            result = dict(variant=args.torch_variant, fixture="single", recipe="plain PyTorch GNN",
                          flags=os.path.basename(script), seed=seed, test_graphs=1,
                          kendall=round(tau, 4), wall_s=round(wall / len(seeds), 2),
                          cpu_s=round(cpu / len(seeds), 2), load_at_start=load,
                          graph=os.path.basename(args.npz),
                          machine="%s, %d cores" % (machine["cpu"], machine["cores"]),
                          finished=datetime.datetime.now(datetime.timezone.utc).isoformat(
                              timespec="seconds"))
            append_result(args.results, result)
            print(json.dumps(result, sort_keys=True), flush=True)
        log("== plain PyTorch GNN: held-out Kendall %s in %.1f s wall per seed (load %.2f at the "
            "start)" % (" / ".join("%.3f" % t for t in taus), wall / len(seeds), load))
    bench_machine.footer()
    return 0


def summarise(results, variants, binary):
    """Per variant: seeds, Kendall mean, min and max, from the lines that stand for it today
    ("lines"; "measured_as": the names they ran under, where not the variant's own)."""
    order = {v["variant"]: i for i, v in enumerate(variants)}
    by = lines_by_variant(results, variants, binary)
    out = []
    for name in sorted(by, key=lambda n: (order.get(n, 1e9), n)):
        rs = [by[name][s] for s in sorted(by[name])]
        k = [r["kendall"] for r in rs]
        other = sorted({r["variant"] for r in rs} - {name})
        out.append(dict(variant=name, fixture=rs[0]["fixture"], seeds=[r["seed"] for r in rs],
                        kendall=[r["kendall"] for r in rs], mean=round(sum(k) / len(k), 4),
                        min=min(k), max=max(k), test_graphs=rs[0]["test_graphs"],
                        ceiling=rs[0].get("ceiling_kendall"), measured_as=other, lines=rs))
    return out


def cmd_summary(args):
    summary = summarise(read_results(args.results), read_variants(args.variants), args.binary)
    for x in summary:
        del x["lines"]
    print(json.dumps(summary, indent=1))
    return 0


def projected_hours(projection, variants):
    """{variant: {"hours": the variant's collections' projected hours, ...}} from the JSON of
    bench-release.sh --project --frontier --json: the rows projected with the recipe file the
    variant starts from today (a variant moved to another recipe since has no hours; flags added
    since that change no cost, such as a feature switched off, keep them)."""
    today = {v["variant"]: v["recipe"] + ".textproto" for v in variants}
    out, stale = {}, set()
    for row in projection.get("frontier", []):
        if today.get(row["variant"]) != row["recipe"]:
            stale.add(row["variant"])
            continue
        o = out.setdefault(row["variant"], dict(hours=0.0, train_hours=0.0, valid_hours=0.0,
                                                collections=[]))
        o["hours"] += row["hours"]
        o["train_hours"] += row["train_hours"]
        o["valid_hours"] += row["valid_hours"]
        o["collections"].append(row["name"])
    for name in sorted(stale):
        log("%s: the projection's rows were projected with another recipe than the variant's "
            "today: no hours" % name)
    return out


def svg_plot(points, path, title):
    """Kendall against hours, one point per variant with its seeds' spread as a bar, per fixture
    a panel. points: [(fixture, variant, hours, mean, lo, hi)]."""
    fixtures = sorted({p[0] for p in points})
    w, h, pad = 460, 300, 50
    width = w * max(1, len(fixtures))
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
             'font-family="sans-serif" font-size="11">' % (width, h + 30),
             '<text x="10" y="16" font-size="13">%s</text>' % title]
    for i, fx in enumerate(fixtures):
        ps = [p for p in points if p[0] == fx]
        x0 = i * w
        hs = [p[2] for p in ps]
        ks = [p[4] for p in ps] + [p[5] for p in ps]
        hmin, hmax = 0.0, max(hs) * 1.1 if hs else 1.0
        kmin, kmax = min(ks) - 0.02, max(ks) + 0.02
        sx = lambda v: x0 + pad + (v - hmin) / (hmax - hmin or 1) * (w - 2 * pad)
        sy = lambda v: 30 + (h - pad) - (v - kmin) / (kmax - kmin or 1) * (h - pad - 10)
        parts.append('<rect x="%d" y="30" width="%d" height="%d" fill="none" stroke="#888"/>' %
                     (x0 + pad, w - 2 * pad, h - pad - 10 + 10))
        parts.append('<text x="%d" y="%d">%s</text>' % (
            x0 + pad, 28, "one graph: held-out Kendall against seconds per seed" if fx == "single"
            else "%s: test Kendall (mean, seed range) against projected hours" % fx))
        for t in range(5):
            hv = hmin + (hmax - hmin) * t / 4
            kv = kmin + (kmax - kmin) * t / 4
            parts.append('<text x="%.1f" y="%d" text-anchor="middle">%.1f</text>' %
                         (sx(hv), h + 22, hv))
            parts.append('<text x="%d" y="%.1f" text-anchor="end">%.3f</text>' %
                         (x0 + pad - 4, sy(kv) + 4, kv))
        for _, name, hv, mean, lo, hi in ps:
            parts.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#36c"/>' %
                         (sx(hv), sy(lo), sx(hv), sy(hi)))
            parts.append('<circle cx="%.1f" cy="%.1f" r="3.5" fill="#36c"/>' % (sx(hv), sy(mean)))
            parts.append('<text x="%.1f" y="%.1f">%s</text>' % (sx(hv) + 5, sy(mean) - 4, name))
    parts.append("</svg>")
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(parts) + "\n")
    os.replace(path + ".tmp", path)


def cmd_table(args):
    variants = read_variants(args.variants)
    summary = summarise(read_results(args.results), variants, args.binary)
    hours = {}
    machine = ""
    if args.projection:
        with open(args.projection) as f:
            projection = json.load(f)
        hours = projected_hours(projection, variants)
        m = projection.get("machine", {})
        machine = "%s, %s cores, load %s at the start" % (m.get("cpu", "?"), m.get("cores", "?"),
                                                          m.get("load_at_start", "?"))
    if args.doc:
        # The table between the document's markers, replaced in place.
        import contextlib
        import io
        buf = io.StringIO()
        doc = args.doc
        args.doc = None
        with contextlib.redirect_stdout(buf):
            cmd_table(args)
        with open(doc) as f:
            text = f.read()
        begin, end = "<!-- frontier table: begin -->\n", "<!-- frontier table: end -->"
        i, j = text.find(begin), text.find(end)
        if i < 0 or j < i:
            sys.exit("%s: no '%s' ... '%s' markers" % (doc, begin.strip(), end))
        text = text[:i + len(begin)] + buf.getvalue() + text[j:]
        with open(doc + ".tmp", "w") as f:
            f.write(text)
        os.replace(doc + ".tmp", doc)
        log("wrote the table into %s" % doc)
        return 0
    single = [x for x in summary if x["fixture"] == "single"]
    summary = [x for x in summary if x["fixture"] != "single"]
    base = {s["fixture"]: s for s in summary if s["variant"] == s["fixture"]}
    print("| variant | fixture | flags | seeds | test Kendall (per seed) | mean | sd | vs recipe | "
          "projected h (its collections) | train h | valid h | noise-free ceiling | share of "
          "ceiling |")
    print("|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    # A variant on another recipe file than its fixture's own variant names that file.
    own = {v["fixture"]: v["recipe"] for v in variants if v["variant"] == v["fixture"]}
    flags = {v["variant"]: " ".join(([] if v["recipe"] == own.get(v["fixture"], v["recipe"])
                                     else [v["recipe"] + ".textproto"]) + v["flags"])
             or "(the recipe)" for v in variants}
    points = []
    for s in summary:
        b = base.get(s["fixture"])
        delta = "%+.3f" % (s["mean"] - b["mean"]) if b and b is not s else ""
        hv = hours.get(s["variant"])
        hcol = ("%.2f" % hv["hours"], "%.2f" % hv["train_hours"],
                "%.2f" % hv["valid_hours"]) if hv else ("", "", "")
        name = s["variant"]
        if s["measured_as"]:
            name += " (runs of %s)" % ", ".join(s["measured_as"])
        ks = s["kendall"]
        sd = statistics.stdev(ks) if len(ks) > 1 else None
        ceil = s.get("ceiling")
        print("| %s | %s | `%s` | %d | %s | %.3f | %s | %s | %s | %s | %s | %s | %s |" % (
            name, s["fixture"], flags.get(s["variant"], "?"), len(s["seeds"]),
            " / ".join("%.3f" % k for k in ks), s["mean"], "%.3f" % sd if sd is not None else "",
            delta, *hcol, "%.3f" % ceil if ceil else "",
            "%.0f %%" % (100 * s["mean"] / ceil) if ceil else ""))
        if hv:
            points.append((s["fixture"], s["variant"], hv["hours"], s["mean"], s["min"],
                           s["max"]))
    if machine:
        print("\nProjected on %s." % machine)
    if single:
        # One graph: the time per seed is the figure, beside ridge and the PyTorch GNN.
        print("\n| one graph: variant | flags | held-out Kendall (per seed) | mean | ridge (mean) "
              "| wall s per seed | CPU s per seed | load at the start |")
        print("|---|---|---|---:|---:|---|---|---|")
        for x in single:
            rs = x["lines"]
            ridge = [r["ridge_kendall"] for r in rs if "ridge_kendall" in r]
            rng = lambda k: "%.1f-%.1f" % (min(r[k] for r in rs), max(r[k] for r in rs))
            points.append(("single", x["variant"], sum(r["wall_s"] for r in rs) / len(rs),
                           x["mean"], x["min"], x["max"]))
            print("| %s | `%s` | %s | %.3f | %s | %s | %s | %s |" % (
                x["variant"], flags.get(x["variant"], rs[0].get("flags", "")),
                " / ".join("%.3f" % k for k in x["kendall"]), x["mean"],
                "%.3f" % (sum(ridge) / len(ridge)) if ridge else "", rng("wall_s"),
                rng("cpu_s"), rng("load_at_start")))
    if args.svg and points:
        svg_plot(points, args.svg, "tpugraphs: the quality-per-hour frontier")
        log("wrote %s" % args.svg)
    return 0


def main(argv=None, binary=None):
    ap = argparse.ArgumentParser(prog="tools/release frontier",
                                 description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)

    def common(p):
        p.add_argument("--binary", default=binary, required=binary is None,
                       help="the tpugraphs binary that resolves each variant's configuration "
                       "(train --print-config)")
        p.add_argument("--results", default=RESULTS)
        p.add_argument("--variants", default=VARIANTS)

    r = sub.add_parser("run", help="train and evaluate the variants' missing seeds")
    common(r)
    r.add_argument("--work", default=os.path.join(ROOT, "out", "frontier"),
                   help="fixtures, models and checkpoints")
    r.add_argument("--variant", action="append", help="only this variant (repeatable)")
    r.add_argument("--fixture", action="append", choices=sorted(FIXTURES),
                   help="only this fixture's variants (repeatable)")
    r.add_argument("--seeds", default="1,2,3")
    r.add_argument("--threads", type=int, default=0, help="-j of every process (0: all cores)")
    r.add_argument("--minutes", type=float, default=0,
                   help="stop after this many minutes (exit 3), to continue later")
    r.add_argument("--train-flag", dest="train_flags", action="append", default=[],
                   help="extra train flag (tests only: such lines are not the variant's figure)")
    t = sub.add_parser("table", help="markdown table and SVG plot")
    common(t)
    t.add_argument("--projection", help="JSON of bench-release.sh --project --frontier --json")
    t.add_argument("--svg", help="write the plot here")
    t.add_argument("--doc", help="write the table into this document, between its lines "
                   "'<!-- frontier table: begin -->' and '<!-- frontier table: end -->'")
    g = sub.add_parser("single", help="one graph's held-out configurations, beside the plain "
                       "PyTorch GNN (times measured: run it alone)")
    common(g)
    g.add_argument("--work", default=os.path.join(ROOT, "out", "frontier", "single"))
    g.add_argument("--variant", action="append")
    g.add_argument("--seeds", default="1,2,3")
    g.add_argument("--threads", type=int, default=0)
    g.add_argument("--npz", default=SINGLE_NPZ, help="the graph (default: the release's U-Net "
                   "file, tests/data/real)")
    g.add_argument("--torch", default=SHARED_TORCH if os.path.exists(SHARED_TORCH) else REPO_TORCH,
                   help="the PyTorch GNN script run beside ('' : none)")
    g.add_argument("--torch-variant", default="torch",
                   help="the name of the PyTorch GNN's lines; another name measures it again "
                   "beside new variants (its seeds already in the results are skipped)")
    s = sub.add_parser("summary", help="per variant: seeds and Kendall (JSON)")
    common(s)
    args = ap.parse_args(argv)
    return dict(run=cmd_run, table=cmd_table, summary=cmd_summary,
                single=cmd_single)[args.command](args)
