"""The release tooling: projection, plan, frontier and comparison, as one program.

Usage: /usr/bin/python3 tools/release COMMAND [ARGS]   (COMMAND --help for its flags)

  project   the release workflow's cost on this machine, projected from measurements
            (tools/bench-release.sh --project; projection.py)
  plan      the plan for --hours H of a workflow's OUT_DIR: kept from OUT_DIR/plan.json, or made
            from the projection and the frontier's results (tools/train-all-collections.sh
            --hours; plan.py)
  frontier  run | single | table | summary: test Kendall of the recipe variants
            (tools/bench/bench-frontier.sh; frontier.py)
  compare   a run of tools/bench-release.sh S against the projection of its tree (compare.py)

The binary is found as every script finds it (tools/lib/tpugraphs-binary.sh); --binary
overrides it. The PROJECTION_* and FRONTIER_* settings are read here only (projection.parser).
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import compare  # noqa: E402
import frontier  # noqa: E402
import projection  # noqa: E402


def find_binary():
    """The binary as tools/lib/tpugraphs-binary.sh finds it (one lookup for every script)."""
    return subprocess.run(["bash", "-c", 'here=$1; source "$here/tools/lib/tpugraphs-binary.sh" '
                           "&& tpugraphs_binary", "-", ROOT],
                          stdout=subprocess.PIPE, text=True, check=True).stdout.strip()


def cmd_plan(argv, binary):
    """The plan of a workflow's OUT_DIR for --hours H (tools/train-all-collections.sh).

    OUT_DIR/plan.json, when there, is kept (another H is refused: exit 2); else the projection
    (cached per machine) and the frontier's results make it. Without --print: the plan on
    stderr, OUT_DIR/plan.json written, and one line per collection on stdout for the script:
    COLLECTION <tab> RECIPE_FILE <tab> FLAGS. With --print: the plan on stdout, nothing written
    unless --write.
    """
    ap = argparse.ArgumentParser(prog="tools/release plan", description=cmd_plan.__doc__)
    ap.add_argument("--hours", required=True, help="the budget (as given: it names the plan)")
    ap.add_argument("--out", required=True, metavar="OUT_DIR")
    ap.add_argument("--tree", help="the release tree (its shape.tsv, when there, is projected)")
    ap.add_argument("--print", action="store_true", dest="print_only")
    ap.add_argument("--write", action="store_true", help="with --print: write OUT_DIR/plan.json")
    ap.add_argument("--binary", default=binary)
    args = ap.parse_args(argv)
    try:
        hours = projection.hours_arg(args.hours)
    except argparse.ArgumentTypeError as e:
        print("--hours: %s" % e, file=sys.stderr)
        return 2
    plan_file = os.path.join(args.out, "plan.json")
    if os.path.isfile(plan_file):
        try:
            with open(plan_file) as f:
                obj = json.load(f)
            kept = obj["budget_hours"]
        except (OSError, ValueError, KeyError, TypeError):
            print("%s: not a plan (delete it to plan again)" % plan_file, file=sys.stderr)
            return 1
        if float(kept) != hours:
            print("--hours %s: %s already holds the plan for --hours %s (%s): run with --hours %s "
                  "to continue it, or delete %s (and the models it trained) to plan again" %
                  (args.hours, args.out, kept, plan_file, kept, plan_file), file=sys.stderr)
            return 2
        print("== the plan of %s (--hours %s), kept" % (plan_file, kept), file=sys.stderr)
    else:
        if os.environ.get("SHARD"):
            print("SHARD with --hours: %s is missing; make the plan once for every machine with: "
                  "tools/train-all-collections.sh --hours %s --plan --write-plan %s %s" %
                  (plan_file, args.hours, args.tree, args.out), file=sys.stderr)
            return 2
        print("== planning --hours %s from the projection on this machine" % args.hours,
              file=sys.stderr)
        proj = ["--binary", args.binary, "--work", os.path.join(args.out, "projection"),
                "--hours", args.hours]
        if args.tree and os.path.isfile(os.path.join(args.tree, "shape.tsv")):
            proj += ["--tree", args.tree]
        proj = projection.parser().parse_args(proj)
        try:
            obj = projection.project(proj)
        except projection.release_plan.NoPlan as e:
            return projection.refuse(proj, e)
    if args.print_only:
        print("plan for --hours %s:\n%s" % (args.hours, "\n".join(obj["plan_text"])))
    else:
        print("== plan for --hours %s:\n   %s" % (args.hours, "\n   ".join(obj["plan_text"])),
              file=sys.stderr)
    if (args.write or not args.print_only) and not os.path.exists(plan_file):
        os.makedirs(args.out, exist_ok=True)
        with open(plan_file + ".tmp", "w") as f:
            json.dump(obj, f, indent=1)
            f.write("\n")
        os.replace(plan_file + ".tmp", plan_file)
        print("== wrote %s" % plan_file, file=sys.stderr)
    if not args.print_only:
        for c, p in obj["plan"].items():
            print("%s\t%s\t%s" % (c, p["recipe"], p["flags"]))
    return 0


def main(argv):
    commands = ("project", "plan", "frontier", "compare")
    if not argv or argv[0] not in commands:
        if argv and argv[0] in ("-h", "--help"):
            print(__doc__)
            return 0
        print("%s%s" % ("tools/release: unknown command '%s'\n\n" % argv[0] if argv else "",
                        __doc__), file=sys.stderr)
        return 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "compare":
        return compare.main(rest)
    binary = find_binary()  # --binary overrides it
    if cmd == "project":
        return projection.main(rest, binary)
    if cmd == "frontier":
        return frontier.main(rest, binary)
    return cmd_plan(rest, binary)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
