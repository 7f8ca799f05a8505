"""How one training step scales with threads on this machine (tools/bench/bench-scaling.sh).

Five cases, each a real `tpugraphs train` of a recipe on synthetic programs of release sizes
(../shared/docs/release-shape.md; docs/train.md, "More cores and machines"):

  pair-nlp  layout-large recipe, an uneven pair of nlp-sized programs (1,800 and 9,000 nodes):
            every step holds both, as the recipe's batch_graphs: 2 does
  pair-xla  layout recipe, a pair of xla-sized programs (4,000 and 12,000 nodes)
  single    layout recipe, one program of 3,000 nodes (tune's fine-tuning, a user's own program)
  gst       Graph Segment Training on one program of 20,000 nodes (the default model, segments of
            2,000 nodes; GST keeps one task per graph, whose kernels are row-parallel)
  attention the layout recipe with cross-configuration attention (--config-attention 8) on the
            single case's program: chunk tasks around a join of every configurable node's
            attention (its nodes split over the threads), timed as config_forward/backward

and three commands on one graph, timed whole (start-up included: what a user waits for), except
validation, timed by train's own validation seconds:
  tune        `tune --budget 2000` of one 3,000-node program with an 8-member layout-recipe model
  predict     `predict` of one 20,000-node program with 1,000 configurations, the same kind of model
  validation  a validation of one 3,000-node program with 10,000 configurations (layout recipe,
              one member, every configuration scored)

For each case and each -j T of --threads:
  step_ms     the time of one step: two runs of LO and HI steps (one epoch, no validation), the
              difference of their wall times over HI - LO steps, so that start-up cancels (LO
              and HI per case give about 10 s of difference at -j 1 on 2 cores; --steps sets
              them for all)
  speedup     step_ms at -j 1 over step_ms at -j T
  ceiling     the machine's own limit for T threads: T independent `-j 1` runs of HI steps at
              once against one alone just before, as throughput (T x one's time / the time until
              the last of the T ends; start-up included in both).
              A shared VM's vCPU is not a whole core; this says how much of one it is
  efficiency  speedup / ceiling

The phases of a step at -j 1 come from the -j 1 run of HI steps (`train -v` logs them, in ms
per step; docs/train.md, "More cores and machines"):
  prepare          the step's graphs, sampled configurations and their values (read ahead on
                   a thread of its own at -j > 1)
  shared_forward   the configuration-independent passes, once per graph (row-parallel kernels)
  shared_backward
  config_forward   the per-configuration passes, as tasks of (graph, chunk of configurations)
  config_backward
  loss             each graph's loss over its configurations
  chunk_sum        the chunks' gradients summed in chunk order (row- and parameter-parallel)
  gradient_sum     the graphs' gradients summed (and the collectives, with MPI)
  optimizer        the update
For the commands the phases at -j 1, in seconds, come from the -v logs: tune and predict give the
scorer's `prepare` (each member's graph and its configuration-independent pass) and `score` (the
(member, chunk) tasks), and `other` is the rest of the wall time (reading, the search, writing;
serial); validation gives `load` (the graphs read and prepared), `read` (their configurations'
layout values, in chunks of configurations on every thread), `score` and `metrics` (with one
graph, load and metrics are serial). Their serial_share is the serial phases' share of the -j 1 time.
serial_share: the share of the -j 1 step in the phases that run while the step's other threads
wait (the shared passes, loss, gradient_sum, optimizer; prepare is not among them: at -j > 1 it
is read ahead beside the previous step): an upper bound on Amdahl's serial fraction, since the
shared passes' layer kernels are row-parallel too. amdahl_16: the speed-up it allows
at 16 threads, 1 / (s + (1 - s) / 16).
serial_share_measured (with a -j above 1): the same phases counted by how little they sped up
at the largest -j measured, each by its Karp-Flatt serial fraction (j T(j) / T(1) - 1) / (j - 1)
in [0, 1] (phases_at_top holds that run's phases); amdahl_16_measured, the speed-up it allows.
On a VM whose vCPUs are not whole cores this is noisy: it is an estimate, the other a bound.
The machine (CPU, vector extensions, cores, load) is printed first, with a warning when the load
is above 0.5.

Output: a table on stdout (then the phase table), or with --json one object {"machine",
"cases": [{"name", "recipe", "nodes", "configs_per_program", "steps", "serial_share",
"amdahl_16", "phases": {phase: ms per step}, "threads": [{"j", "step_ms", "speedup", "ceiling",
"efficiency"}], and with a -j above 1 "phases_at_top": {"j", "phases"}, "serial_share_measured",
"amdahl_16_measured"}], "commands": [{"name", "nodes", "configs_per_program", "command",
"phases": {phase: seconds at -j 1}, "serial_share", "amdahl_16", "threads": [{"j", "seconds",
"speedup", "ceiling", "efficiency"}]}]}. Each command's seconds are the better of two runs.
Logs on stderr.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "lib"))
import bench_machine  # noqa: E402

# name: (recipe, program sizes, default LO,HI steps: about 10 s of difference at -j 1 on 2 cores)
CASES = {
    "pair-nlp": ("layout-large.textproto", (1800, 9000), (5, 35)),
    "pair-xla": ("layout.textproto", (4000, 12000), (10, 210)),
    "single": ("layout.textproto", (3000,), (20, 1220)),
    "gst": ("default", (20000,), (2, 72)),
    "attention": ("layout.textproto", (3000,), (20, 1020)),
}
# Flags a step case adds to its recipe (the default model: no --config).
CASE_FLAGS = {"gst": ["--gst", "on", "--segment-size", "2000"],
              "attention": ["--config-attention", "8"]}
# The commands on one graph: name: (program nodes, configurations per program).
COMMANDS = {
    "tune": (3000, 200),
    "predict": (20000, 1000),
    "validation": (3000, 10000),
}
COMMAND_PHASES = {"tune": ("prepare", "score", "other"), "predict": ("prepare", "score", "other"),
                  "validation": ("load", "read", "score", "metrics")}
COMMAND_SERIAL = {"tune": ("other",), "predict": ("other",), "validation": ("load", "metrics")}
TUNE_BUDGET = 2000
CONFIGS_PER_PROGRAM = 200  # the recipes sample 32 (layout-large) or fewer per step
# Phases during which the step's other threads wait (the -v phase line of `train`).
SERIAL_PHASES = ("shared_forward", "shared_backward", "loss", "gradient_sum", "optimizer")


def significant(x, digits=4):
    """x to `digits` significant digits: a positive time never prints as 0 (a tiny --scale gives
    steps of microseconds, which two fixed decimals would round to nothing)."""
    return float("%.*g" % (digits, x))


def log(msg):
    print("bench-scaling: " + msg, file=sys.stderr, flush=True)


def positive_ints(text, what):
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError("%s takes a comma-separated list of positive integers, "
                                         "not '%s'" % (what, text))
    return values


def default_threads():
    n = os.cpu_count() or 1
    out, t = [], 1
    while t < n:
        out.append(t)
        t *= 2
    out.append(n)
    return out


class Bench:
    def __init__(self, binary, work, lo, hi, flags=()):
        self.binary, self.work, self.lo, self.hi = binary, work, lo, hi
        self.flags = list(flags)  # the case's train flags

    def run(self, args, log_name):
        with open(os.path.join(self.work, log_name + ".log"), "w") as f:
            r = subprocess.run([self.binary] + args, stdout=f, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            with open(os.path.join(self.work, log_name + ".log")) as f:
                tail = f.read()[-2000:]
            sys.exit("bench-scaling: `tpugraphs %s` failed (exit %d):\n%s" %
                     (" ".join(args), r.returncode, tail))

    def fixture(self, name, nodes, scale, configs=None, splits=None):
        """The case's programs (configs each; per program its split, default train),
        synthesised and ingested into one dataset."""
        dirs = []
        sizes = [max(30, int(round(n * scale))) for n in nodes]
        for i, n in enumerate(sizes):
            d = os.path.join(self.work, "%s-p%d" % (name, i))
            self.run(["-q", "synth", "--task", "layout", "--graphs", "1", "--nodes", str(n),
                      "--configs", str(configs or CONFIGS_PER_PROGRAM), "--seed", str(11 + i),
                      "--output", d], "%s-synth%d" % (name, i))
            # Each synth run names its program program_00000: the case's programs need their own.
            train = os.path.join(d, "pb", "layout", "synth", "random", "train")
            split = splits[i] if splits else "train"
            dest = os.path.join(d, "pb", "layout", "synth", "random", split)
            os.makedirs(dest, exist_ok=True)
            os.rename(os.path.join(train, "program_00000.pb"),
                      os.path.join(dest, "%s_%d.pb" % (name.replace("-", "_"), i)))
            dirs.append(os.path.join(d, "pb", "layout"))
        ds = os.path.join(self.work, name + ".tpug")
        self.run(["-q", "ingest"] + dirs + ["-o", ds], name + "-ingest")
        return ds, sizes

    def train_args(self, recipe, ds, steps, out, flags=()):
        config = ([] if recipe == "default" else
                  ["--config", os.path.join(ROOT, "tools", "configs", recipe)])
        return ["train"] + config + [
            "--dataset", ds, "--train-split", "train", "--valid-split", "",
            "--carve-valid-fraction", "0", "--ensemble-members", "1", "--min-config-passes", "0",
            "--epochs", "1", "--steps-per-epoch", str(steps), "--checkpoint-interval-seconds", "0",
            "--seed", "3", "--output", out] + list(flags)

    def timed(self, threads, recipe, ds, steps, tag, verbose=False):
        out = os.path.join(self.work, tag + ".tpm")
        t0 = time.monotonic()
        self.run(["-v" if verbose else "-q", "-j", str(threads)] +
                 self.train_args(recipe, ds, steps, out, self.flags), tag)
        return time.monotonic() - t0

    def phases(self, tag):
        """The phase line of a -v run's log: {phase: ms per step}."""
        with open(os.path.join(self.work, tag + ".log")) as f:
            m = re.search(r"step phases \(ms per step\): (.*)", f.read())
        if not m:
            sys.exit("bench-scaling: no step phases in %s.log (is the binary older than the "
                     "chunked step?)" % tag)
        return {k: float(v) for k, v in (kv.split("=") for kv in m.group(1).split())}

    def step_ms(self, threads, recipe, ds, tag):
        w_lo = self.timed(threads, recipe, ds, self.lo, "%s-j%d-lo" % (tag, threads))
        w_hi = self.timed(threads, recipe, ds, self.hi, "%s-j%d-hi" % (tag, threads),
                          verbose=True)
        step = (w_hi - w_lo) / (self.hi - self.lo)
        if step <= 0:  # start-up noise larger than the difference: the longer run, an upper bound
            step = w_hi / self.hi
        return 1e3 * step, w_hi

    def ceiling(self, k, recipe, ds, tag):
        """Throughput of k independent -j 1 runs of HI steps at once against one run alone,
        timed back to back (the same warm files for both)."""
        if k == 1:
            return 1.0
        one = self.timed(1, recipe, ds, self.hi, "%s-ceil%d-alone" % (tag, k))
        argvs = [["-q", "-j", "1"] + self.train_args(
            recipe, ds, self.hi, os.path.join(self.work, "%s-ceil%d-%d.tpm" % (tag, k, i)),
            self.flags) for i in range(k)]
        return k * one / self.at_once(argvs, "%s-ceil%d" % (tag, k))

    def at_once(self, argvs, tag):
        """The wall time of the runs argvs started together, until the last one ends."""
        procs, logs = [], []
        t0 = time.monotonic()
        for i, argv in enumerate(argvs):
            f = open(os.path.join(self.work, "%s-%d.log" % (tag, i)), "w")
            logs.append(f)
            procs.append(subprocess.Popen([self.binary] + argv, stdout=f,
                                          stderr=subprocess.STDOUT))
        codes = [p.wait() for p in procs]
        wall = time.monotonic() - t0
        for f in logs:
            f.close()
        if any(codes):
            sys.exit("bench-scaling: a ceiling run of %s failed (exit codes %s; logs in %s)" %
                     (tag, codes, self.work))
        return wall


class CommandBench:
    """One of COMMANDS: its fixture (and model), then its time at -j T (the better of two runs),
    its phases at -j 1 and the machine's ceiling for T such runs."""

    def __init__(self, bench, name, scale):
        self.bench, self.name = bench, name
        nodes, configs = COMMANDS[name]
        work = bench.work
        if name == "validation":
            # A training program of the step cases' size and the validation program.
            self.ds, self.sizes = bench.fixture(name, (nodes, nodes), scale,
                                                configs=configs, splits=("train", "valid"))
            self.sizes = self.sizes[1:]
        else:
            self.ds, self.sizes = bench.fixture(name, (nodes,), scale, configs=configs)
            # An 8-member model of the layout recipe, two steps: its quality is not measured.
            self.model = os.path.join(work, name + "-model.tpm")
            bench.run(["-q", "train", "--config",
                       os.path.join(ROOT, "tools", "configs", "layout.textproto"),
                       "--dataset", self.ds, "--train-split", "train", "--valid-split", "",
                       "--carve-valid-fraction", "0", "--min-config-passes", "0", "--epochs", "1",
                       "--steps-per-epoch", "2", "--checkpoint-interval-seconds", "0", "--seed",
                       "3", "--output", self.model], name + "-model")
        self.configs = configs
        self.runs = 0

    def argv(self):
        self.runs += 1
        out = os.path.join(self.bench.work, "%s-out%d" % (self.name, self.runs))
        if self.name == "tune":
            return ["tune", "--data", self.ds, "--model", self.model, "--budget",
                    str(TUNE_BUDGET), "-o", out]
        if self.name == "predict":
            return ["predict", "--data", self.ds, "--model", self.model, "--format", "scores",
                    "-o", out + ".scores"]
        return ["train", "--config", os.path.join(ROOT, "tools", "configs", "layout.textproto"),
                "--dataset", self.ds, "--train-split", "train", "--valid-split", "valid",
                "--carve-valid-fraction", "0", "--valid-max-configs", "0", "--ensemble-members",
                "1", "--min-config-passes", "0", "--epochs", "1", "--steps-per-epoch", "1",
                "--valid-every-epochs", "1", "--checkpoint-interval-seconds", "0", "--seed", "3",
                "--output", out + ".tpm"]

    def once(self, threads):
        """(seconds, phases) of one -v run at -j threads."""
        tag = "%s-j%d-r%d" % (self.name, threads, self.runs + 1)
        t0 = time.monotonic()
        self.bench.run(["-v", "-j", str(threads)] + self.argv(), tag)
        wall = time.monotonic() - t0
        with open(os.path.join(self.bench.work, tag + ".log")) as f:
            text = f.read()
        if self.name == "validation":
            m = re.search(r"validation phases \(s\): validations=(\d+) load=(\S+)"
                          r"(?: read=(\S+))? score=(\S+) metrics=(\S+)", text)
            if not m or int(m.group(1)) < 1:
                sys.exit("bench-scaling: no validation phases in %s.log" % tag)
            # A binary older than the read phase counts the values' reading in load.
            phases = dict(load=float(m.group(2)), read=float(m.group(3) or 0.0),
                          score=float(m.group(4)), metrics=float(m.group(5)))
            return sum(phases.values()), phases
        m = re.search(r"scoring phases \(s\): calls=\d+ graphs=\d+ configs=\d+ prepare=(\S+) "
                      r"configs_seconds=(\S+)", text)
        if not m:
            sys.exit("bench-scaling: no scoring phases in %s.log (is the binary older than "
                     "the scorer's phases?)" % tag)
        prepare, score = float(m.group(1)), float(m.group(2))
        return wall, dict(prepare=prepare, score=score, other=max(0.0, wall - prepare - score))

    def best(self, threads):
        runs = [self.once(threads) for _ in range(2)]
        return min(runs, key=lambda r: r[0])

    def ceiling(self, k):
        """Throughput of k independent -j 1 runs at once against one alone (whole wall)."""
        if k == 1:
            return 1.0
        t0 = time.monotonic()
        self.bench.run(["-q", "-j", "1"] + self.argv(), "%s-ceil%d-alone" % (self.name, k))
        one = time.monotonic() - t0
        argvs = [["-q", "-j", "1"] + self.argv() for _ in range(k)]
        return k * one / self.bench.at_once(argvs, "%s-ceil%d" % (self.name, k))


def measure_command(binary, work, name, scale, threads):
    bench = Bench(binary, work, 0, 0)
    cb = CommandBench(bench, name, scale)
    log("%s: %d nodes, %d configurations" % (name, cb.sizes[0], cb.configs))
    rows, base, phases = [], None, None
    for t in threads:
        seconds, ph = cb.best(t)
        if t == 1:
            base, phases = seconds, ph
        ceil = cb.ceiling(t)
        speedup = base / seconds
        rows.append(dict(j=t, seconds=significant(seconds), speedup=round(speedup, 3),
                         ceiling=round(ceil, 3), efficiency=round(speedup / ceil, 3)))
        log("  -j %d: %.3f s, speed-up %.2f, ceiling %.2f, efficiency %.2f" %
            (t, seconds, speedup, ceil, speedup / ceil))
    total = sum(phases.values())
    serial = sum(phases[k] for k in COMMAND_SERIAL[name])
    share = serial / total if total > 0 else 0.0
    amdahl = 1.0 / (share + (1.0 - share) / 16)
    log("  phases at -j 1 (s): %s; serial share %.3f (Amdahl at 16 threads: %.1fx)" %
        (" ".join("%s=%.3f" % kv for kv in phases.items()), share, amdahl))
    return dict(name=name, nodes=cb.sizes, configs_per_program=cb.configs,
                command=cb.argv()[0], phases={k: round(v, 4) for k, v in phases.items()},
                serial_share=round(share, 4), amdahl_16=round(amdahl, 2), threads=rows)


def measured_serial_share(one, top, j):
    """The serial share that the phases' own scaling shows: per phase of SERIAL_PHASES its
    Karp-Flatt serial fraction at -j j, (j T(j) / T(1) - 1) / (j - 1) clamped to [0, 1], times
    its share of the -j 1 step. A phase that is row-parallel (the shared passes) counts for the
    part of it that did not speed up."""
    total = sum(one.values())
    if total <= 0:
        return 0.0
    serial = 0.0
    for k in SERIAL_PHASES:
        t1, tj = one.get(k, 0.0), top.get(k, 0.0)
        if t1 <= 0:
            continue
        f = min(1.0, max(0.0, (j * tj / t1 - 1.0) / (j - 1.0)))
        serial += f * t1
    return serial / total


def main():
    p = argparse.ArgumentParser(
        prog="tools/bench/bench-scaling.sh",
        description="How one training step scales with threads (-j) on this machine: per case "
                    "and -j, the step time, the speed-up over -j 1, the machine's ceiling and "
                    "the efficiency (speed-up / ceiling).")
    p.add_argument("--threads", type=lambda s: positive_ints(s, "--threads"),
                   default=default_threads(),
                   help="the -j values, comma-separated (default: 1, 2, 4, ... and the number of "
                        "cores, %s here)" % ",".join(map(str, default_threads())))
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--cases", default=",".join(list(CASES) + list(COMMANDS)),
                   help="which cases, comma-separated (default: all, %s)" %
                        ",".join(list(CASES) + list(COMMANDS)))
    p.add_argument("--steps", type=lambda s: positive_ints(s, "--steps"), default=None,
                   help="LO,HI: the steps of the two timed runs per -j, for every case (default: "
                        "per case, %s)" % ", ".join("%s %d,%d" % (n, c[2][0], c[2][1])
                                                    for n, c in CASES.items()))
    p.add_argument("--steps-scale", type=float, default=1.0,
                   help="multiplies the per-case default steps (e.g. 0.5 for a machine of faster "
                        "cores, to bound the run's time)")
    p.add_argument("--scale", type=float, default=1.0,
                   help="multiplies the programs' node counts (small values for a quick check)")
    p.add_argument("--binary", default=os.environ.get("TPUGRAPHS", ""),
                   help="the tpugraphs binary (default: $TPUGRAPHS, tpugraphs on PATH, "
                        "build/tpugraphs)")
    p.add_argument("--work", default="", help="keep the fixtures and logs in this directory")
    a = p.parse_args()
    cases = [c for c in a.cases.split(",") if c]
    unknown = [c for c in cases if c not in CASES and c not in COMMANDS]
    if unknown or not cases:
        p.error("unknown case(s) %s; the cases are %s" % (",".join(unknown) or "''",
                                                          ",".join(list(CASES) + list(COMMANDS))))
    if a.steps is not None and (len(a.steps) != 2 or a.steps[0] >= a.steps[1]):
        p.error("--steps takes LO,HI with LO < HI")
    if not 0 < a.scale <= 10:
        p.error("--scale must be in (0, 10]")
    if not 0 < a.steps_scale <= 100:
        p.error("--steps-scale must be in (0, 100]")
    threads = sorted(set(a.threads))
    if threads[0] != 1:
        threads = [1] + threads  # the speed-ups are over -j 1
    binary = a.binary or (subprocess.run(["bash", "-c", "command -v tpugraphs"],
                                         capture_output=True, text=True).stdout.strip() or
                          os.path.join(ROOT, "build", "tpugraphs"))
    if not os.access(binary, os.X_OK):
        sys.exit("bench-scaling: no tpugraphs binary at %s (build it: bash tools/build.sh)" % binary)
    work = a.work or tempfile.mkdtemp(prefix="bench-scaling-")
    os.makedirs(work, exist_ok=True)
    bench_machine.header()
    results, commands = [], []
    for name in cases:
        if name in COMMANDS:
            commands.append(measure_command(binary, work, name, a.scale, threads))
            continue
        recipe, nodes, steps = CASES[name]
        if a.steps:
            steps = a.steps
        else:
            lo = max(1, int(round(steps[0] * a.steps_scale)))
            steps = (lo, max(lo + 1, int(round(steps[1] * a.steps_scale))))
        bench = Bench(binary, work, steps[0], steps[1], CASE_FLAGS.get(name, ()))
        ds, sizes = bench.fixture(name, nodes, a.scale)
        log("%s: %s on %s nodes" % (name, recipe, " + ".join(map(str, sizes))))
        rows, base, phases, phases_at = [], None, None, {}
        for t in threads:
            ms, _ = bench.step_ms(t, recipe, ds, name)
            phases_at[t] = bench.phases("%s-j%d-hi" % (name, t))
            if t == 1:
                base = ms
                phases = phases_at[1]
            ceil = bench.ceiling(t, recipe, ds, name)
            speedup = base / ms
            rows.append(dict(j=t, step_ms=significant(ms), speedup=round(speedup, 3),
                             ceiling=round(ceil, 3), efficiency=round(speedup / ceil, 3)))
            log("  -j %d: %.1f ms per step, speed-up %.2f, ceiling %.2f, efficiency %.2f" %
                (t, ms, speedup, ceil, speedup / ceil))
        total = sum(phases.values())
        serial = sum(phases.get(k, 0.0) for k in SERIAL_PHASES)
        share = serial / total if total > 0 else 0.0
        amdahl = 1.0 / (share + (1.0 - share) / 16)
        log("  phases at -j 1 (ms per step): %s; serial share %.3f (Amdahl at 16 threads: %.1fx)"
            % (" ".join("%s=%.2f" % kv for kv in phases.items()), share, amdahl))
        case = dict(name=name, recipe=recipe, nodes=sizes, configs_per_program=CONFIGS_PER_PROGRAM,
                    steps=list(steps), serial_share=round(share, 4), amdahl_16=round(amdahl, 2),
                    phases=phases, threads=rows)
        top = max(threads)
        if top > 1:
            measured = measured_serial_share(phases, phases_at[top], top)
            m_amdahl = 1.0 / (measured + (1.0 - measured) / 16)
            log("  phases at -j %d (ms per step): %s; measured serial share %.3f (Amdahl at 16 "
                "threads: %.1fx)" % (top, " ".join("%s=%.2f" % kv for kv in phases_at[top].items()),
                                     measured, m_amdahl))
            case.update(phases_at_top=dict(j=top, phases=phases_at[top]),
                        serial_share_measured=round(measured, 4),
                        amdahl_16_measured=round(m_amdahl, 2))
        results.append(case)
    bench_machine.footer()
    if a.json:
        print(json.dumps(dict(machine=bench_machine.machine_json(), cases=results,
                              commands=commands)))
    else:
        print("case\trecipe\tnodes\tj\tstep_ms\tspeedup\tceiling\tefficiency")
        for r in results:
            for row in r["threads"]:
                print("%s\t%s\t%s\t%d\t%.2f\t%.3f\t%.3f\t%.3f" %
                      (r["name"], r["recipe"], "+".join(map(str, r["nodes"])), row["j"],
                       row["step_ms"], row["speedup"], row["ceiling"], row["efficiency"]))
        print()
        names = list(results[0]["phases"]) if results else []
        print("case\t" + "\t".join(names) +
              "\tserial_share\tamdahl_16\tserial_share_measured\tamdahl_16_measured")
        for r in results:
            measured = ("%.4f\t%.2f" % (r["serial_share_measured"], r["amdahl_16_measured"])
                        if "serial_share_measured" in r else "-\t-")
            print("%s\t%s\t%.4f\t%.2f\t%s" % (r["name"], "\t".join("%.3f" % r["phases"][k] for k in names),
                                            r["serial_share"], r["amdahl_16"], measured))
        if commands:
            print()
            print("command\tnodes\tconfigs\tj\tseconds\tspeedup\tceiling\tefficiency")
            for r in commands:
                for row in r["threads"]:
                    print("%s\t%d\t%d\t%d\t%.3f\t%.3f\t%.3f\t%.3f" %
                          (r["name"], r["nodes"][0], r["configs_per_program"], row["j"],
                           row["seconds"], row["speedup"], row["ceiling"], row["efficiency"]))
            print()
            print("command\tphases at -j 1 (s)\tserial_share\tamdahl_16")
            for r in commands:
                print("%s\t%s\t%.4f\t%.2f" % (r["name"], " ".join(
                    "%s=%.3f" % kv for kv in r["phases"].items()), r["serial_share"],
                    r["amdahl_16"]))
    if not a.work:
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
