"""Turns bench_model's JSON output into the tables of docs/model.md (stdout)."""
import json
import re
import sys


def main(path):
    with open(path) as f:
        data = json.load(f)
    rows, gemm, blocks = [], [], []
    for b in data["benchmarks"]:
        name = b["name"]
        m = re.search(r"BM_InferenceBlocks/nodes:(\d+)/configs:(\d+)/block_rows:(\d+)", name)
        if m:
            if not b.get("error_occurred"):
                blocks.append((int(m[1]), int(m[2]), int(m[3]), b))
            continue
        if b.get("error_occurred"):
            m = re.search(r"mode:(\d)/nodes:(\d+)/configs:(\d+)/backward:(\d)", name)
            if m:
                rows.append((int(m[1]), int(m[2]), int(m[3]), int(m[4]), None, b.get("error_message", "")))
            continue
        if name.startswith("BM_EigenGemm"):
            gemm.append((name.split("/")[1:4], b["GFLOPs"]))
            continue
        m = re.search(r"mode:(\d)/nodes:(\d+)/configs:(\d+)/backward:(\d)", name)
        if m:
            rows.append((int(m[1]), int(m[2]), int(m[3]), int(m[4]), b, ""))
    peak = max((g for _, g in gemm), default=float("nan"))
    if gemm:
        print("Eigen float GEMM (CPU-time rate):")
    for shape, g in gemm:
        print(f"  {'x'.join(shape):>16}  {g:8.1f} GFLOP/s")
    modes = {0: "layout", 1: "tile-late", 2: "tile-early"}
    if rows:
        print()
        print(f"{'task':<10} {'nodes':>7} {'configs':>7} {'pass':<8} {'ms/call':>9} {'us/config':>10}"
              f" {'configs/s':>10} {'GFLOP/s':>8} {'%peak':>6} {'|S_L|/n':>7}")
    for mode, n, k, bwd, b, err in sorted(rows, key=lambda r: r[:4]):
        p = "fwd+bwd" if bwd else "fwd"
        if b is None:
            print(f"{modes[mode]:<10} {n:>7} {k:>7} {p:<8} {err}")
            continue
        cpu_ms = b["cpu_time"]
        print(f"{modes[mode]:<10} {n:>7} {k:>7} {p:<8} {cpu_ms:9.2f} {b['us_per_config']:10.1f}"
              f" {b['configs_per_s']:10.1f} {b['dense_GFLOPs']:8.2f}"
              f" {100 * b['dense_GFLOPs'] / peak:6.1f} {b['affected_frac']:7.3f}")
    if blocks:
        print()
        print("layout recipe inference in blocks of rows (one Forward call; 0 = no blocks):")
        print(f"{'nodes':>7} {'configs':>7} {'config nodes':>12} {'block rows':>10}"
              f" {'ms/call':>9} {'us/config':>10} {'wall ms':>9} {'vs no blocks':>12}")
        whole = {(n, k): b["cpu_time"] for n, k, r, b in blocks if r == 0}
        for n, k, r, b in sorted(blocks, key=lambda x: x[:3]):
            ratio = whole.get((n, k), float("nan")) / b["cpu_time"]
            print(f"{n:>7} {k:>7} {b['config_nodes']:>12.0f} {r:>10} {b['cpu_time']:9.2f}"
                  f" {b['us_per_config']:10.1f} {b['real_time']:9.2f} {ratio:11.2f}x")


if __name__ == "__main__":
    main(sys.argv[1])
