#!/usr/bin/python3
"""Self time per function of a `perf record` profile, for tools/bench/bench-train.sh.

Usage: perf-functions.py PERF.DATA BINARY [TOP]
perf here does not always resolve the symbols of our (PIE, not stripped) binaries; samples it
leaves as raw addresses in BINARY are mapped to functions with `nm -C -n`. Prints the TOP (20)
functions by share of samples, then "products=<percent>": the share of Eigen's GEMM kernels and
packing (gebp_kernel, gemm_pack_*), i.e. the time spent in the model's matrix products.
"""
import bisect
import collections
import re
import subprocess
import sys


def main():
    data, binary = sys.argv[1], sys.argv[2]
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    report = subprocess.run(
        ["perf", "report", "-i", data, "--no-children", "--sort", "dso,sym", "-g", "none",
         "--percent-limit", "0.01"], capture_output=True, text=True, check=True).stdout
    syms = []
    nm = subprocess.run(["nm", "-C", "--defined-only", "-n", binary], capture_output=True,
                        text=True, check=True).stdout
    for line in nm.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in "tTwW":
            syms.append((int(parts[0], 16), parts[2]))
    addrs = [a for a, _ in syms]
    share = collections.Counter()
    for line in report.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(.*)", line)
        if not m:
            continue
        pct, dso, kind, sym = float(m.group(1)), m.group(2), m.group(3), m.group(4).strip()
        if kind == "k":
            name = "[kernel] " + sym
        elif sym.startswith("0x") and binary.endswith(dso):
            i = bisect.bisect_right(addrs, int(sym, 16)) - 1
            name = syms[i][1] if i >= 0 else sym
        else:
            name = "[%s] %s" % (dso, sym)
        share[name] += pct
    by_function = collections.Counter()
    for name, pct in share.items():
        short = name
        while re.search(r"<[^<>]*>", short):
            short = re.sub(r"<[^<>]*>", "", short)
        by_function[re.sub(r"\(.*", "", short)[:110]] += pct
    for name, pct in by_function.most_common(top):
        print("%6.2f%%  %s" % (pct, name))
    kernel = sum(p for n, p in share.items() if n.startswith("[kernel]"))
    products = sum(p for n, p in share.items() if re.search(r"gebp_kernel|gemm_pack", n))
    print("kernel=%.1f" % kernel)
    print("products=%.1f" % products)


if __name__ == "__main__":
    main()
