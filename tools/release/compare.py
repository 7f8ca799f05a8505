"""A run of tools/bench-release.sh S against the projection of its tree, per collection.

Usage: tools/release compare TIMES_TSV PROJECTION_JSON OUT_DIR [COMPARE_JSON]

TIMES_TSV is the run's times.tsv (one line per process: wall_s, user_s, sys_s, max_rss_kib,
command, collection), PROJECTION_JSON the --json output of `tools/release project --tree` for the
same tree, OUT_DIR the run's output directory (the train.tsv files say how many epochs each
training ran). Prints one line per collection on stdout:

  measured_s     wall time of the collection's processes (ingest, train, evaluate, predict)
  projected_s    the projection with the recipe's epochs
  ratio          measured / projected
  epochs         epochs run / the recipe's epochs (a recipe with patience stops early: its
                 projection is an upper bound, reached only when no epoch stops it)
  at_run_s       the projection with the epochs the run took (train and validation scaled)
  ratio_at_run   measured / at_run_s: the cost model's error, early stopping aside

and, with COMPARE_JSON, writes the same as one JSON object there.
"""

import glob
import json
import os
import sys


def epochs_run(out_dir, name):
    """Mean epochs over the collection's train.tsv files (one per process), or None."""
    base = os.path.join(out_dir, name.replace(":", "_"))
    found = []
    for path in [base + ".train.tsv"] + sorted(glob.glob(base + ".member-*.train.tsv")):
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                key, _, value = line.rstrip("\n").partition("\t")
                if key == "epochs" and value.isdigit():
                    found.append(int(value))
    return sum(found) / len(found) if found else None


def compare(times_path, projection, out_dir):
    measured = {}
    with open(times_path) as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) >= 6 and fields[4] in ("ingest", "train", "evaluate", "predict"):
                measured[fields[5]] = measured.get(fields[5], 0.0) + float(fields[0])
    rows = []
    for c in projection["collections"]:
        if c["name"] not in measured:
            continue
        proj = 3600.0 * c["hours"]
        run = epochs_run(out_dir, c["name"])
        at_run = proj
        if run is not None and c["epochs"] > 0:
            # Steps and validations are per epoch; evaluate and ingest do not depend on them.
            per_epoch_s = 3600.0 * (c["train_hours"] + c["valid_hours"]) / c["epochs"]
            at_run = proj - per_epoch_s * (c["epochs"] - run)
        m = measured[c["name"]]
        # Full precision here (a tiny run's seconds would not survive rounding); the table
        # rounds.
        rows.append(dict(name=c["name"], measured_s=m, projected_s=proj,
                         ratio=m / proj if proj > 0 else None,
                         epochs_run=run, epochs=c["epochs"], at_run_s=at_run,
                         ratio_at_run=m / at_run if at_run > 0 else None))
    return rows


def main(argv):
    if len(argv) not in (3, 4):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        projection = json.load(f)
    rows = compare(argv[0], projection, argv[2])
    print("%-20s %12s %12s %8s %11s %12s %13s" % ("collection", "measured_s", "projected_s",
                                                   "ratio", "epochs", "at_run_s",
                                                   "ratio_at_run"))

    def num(x, fmt):
        return fmt % x if x is not None else "-"

    for r in rows:
        epochs = "%s/%d" % (num(r["epochs_run"], "%.0f"), r["epochs"])
        print("%-20s %12.1f %12.1f %8s %11s %12.1f %13s" % (
            r["name"], r["measured_s"], r["projected_s"], num(r["ratio"], "%.2f"), epochs,
            r["at_run_s"], num(r["ratio_at_run"], "%.2f")))
    if len(argv) == 4:
        with open(argv[3], "w") as f:
            json.dump(dict(collections=rows, machine=projection.get("machine"),
                           measurements=projection.get("measurements")), f, indent=1)
    return 0
