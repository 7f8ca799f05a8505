#!/usr/bin/python3
"""Checks that every source of a unity build also compiles on its own.

A unity build (cmake/TpugraphsUnity.cmake) compiles a target's sources in batches, so a source
that forgets an #include, or uses a helper that another file of its batch defines, still
compiles there, and fails in a build with TPUGRAPHS_UNITY_BUILD=OFF. This script takes each
batch's compile command from the build directory (`ninja -t compdb`), and runs it with
-fsyntax-only on every source the batch includes, alone: the front end only, with the batch's
exact flags, so it costs a fraction of compiling them.

Usage: tools/dev/check-standalone.sh [BUILD_DIR] [-j N] [--under DIR]...
  BUILD_DIR  a configured unity build (default build); its generated headers must exist
             (build it first)
  --under    check only the sources under these folders of the checkout (default: all)
Exit status: 0 when every source compiles alone, 1 when one does not (the compiler's messages,
per source, on stderr), 2 on a usage error.
"""

import argparse
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys
import time

INCLUDE = re.compile(r'^#include "(.+)"$')
# Arguments that name the object file or its dependency file, with the value that follows.
DROP_WITH_VALUE = {"-o", "-MT", "-MF", "-MQ"}
DROP_ALONE = {"-MD", "-MMD", "-c"}


def batch_entries(build_dir):
    """The compile commands of the build's unity batches: [(directory, argv, batch path)]."""
    try:
        out = subprocess.run(["ninja", "-C", build_dir, "-t", "compdb"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit("check-standalone: cannot list the compile commands of %s: %s" % (build_dir, e))
    entries = []
    for e in json.loads(out):
        path = e["file"]
        if not os.path.isabs(path):
            path = os.path.join(e["directory"], path)
        if re.search(r"/unity/[^/]+/batch_\d+\.cc$", path) and os.path.isfile(path):
            entries.append((e["directory"], shlex.split(e["command"]), path))
    return entries


def standalone_command(argv, batch, source):
    """The batch's command made a syntax check of `source` alone."""
    out = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in DROP_WITH_VALUE:
            skip = True
            continue
        if arg in DROP_ALONE or arg == batch:
            continue
        out.append(arg)
    # The launcher (ccache) does not cache -fsyntax-only; run the compiler itself.
    if out and os.path.basename(out[0]) == "ccache":
        out = out[1:]
    return out + ["-fsyntax-only", source]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("build_dir", nargs="?", default="build")
    p.add_argument("-j", type=int, default=os.cpu_count() or 1)
    p.add_argument("--under", action="append", default=[])
    args = p.parse_args()
    if not os.path.isfile(os.path.join(args.build_dir, "build.ninja")):
        print("check-standalone: %s is not a Ninja build directory" % args.build_dir,
              file=sys.stderr)
        return 2
    entries = batch_entries(args.build_dir)
    if not entries:
        print("check-standalone: %s has no unity batches (configure it with "
              "-DTPUGRAPHS_UNITY_BUILD=ON)" % args.build_dir, file=sys.stderr)
        return 2
    under = [os.path.abspath(u) + os.sep for u in args.under]
    jobs = {}
    for directory, argv, batch in entries:
        with open(batch) as f:
            for line in f:
                m = INCLUDE.match(line.strip())
                if not m:
                    continue
                source = os.path.normpath(os.path.join(os.path.dirname(batch), m.group(1)))
                if under and not any(source.startswith(u) for u in under):
                    continue
                # A source in two targets (aligned_heap.cc) is checked with the first one's flags.
                jobs.setdefault(source, (directory, standalone_command(argv, batch, source)))
    start = time.time()
    failed = []

    def check(item):
        source, (directory, cmd) = item
        r = subprocess.run(cmd, cwd=directory, capture_output=True, text=True)
        return source, r.returncode, r.stdout + r.stderr

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.j)) as pool:
        for source, rc, output in pool.map(check, sorted(jobs.items())):
            if rc != 0:
                failed.append(source)
                print("check-standalone: %s does not compile on its own:\n%s" % (source, output),
                      file=sys.stderr)
    print("check-standalone: %d sources of %d batches checked alone in %.0f s: %s"
          % (len(jobs), len(entries), time.time() - start,
             "%d failed" % len(failed) if failed else "all compile"), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
