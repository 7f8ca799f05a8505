#!/usr/bin/python3
"""Benchmark: our .npz reader (tools/bench/bench_npz) against numpy's np.load, same files, one run.

Generates with numpy, under --dir (default /tmp/tpugraphs-bench-npz, never in the repository):
  small_{stored,compressed}.npz   a tile-like graph of 50 nodes (np.savez / np.savez_compressed)
  layout_{stored,compressed}.npz  a layout-shaped graph over 100 MB: node_feat (20000, 140) f4,
                                  edge_index (40000, 2) i8, node_config_feat (1000, 1500, 18) f4
                                  (small integers as in the release), config_runtime (1000,) i8, ...
  balanced_{stored,compressed}.npz  node_feat (60000, 140) f4 and node_config_feat (300, 1500, 18)
                                  f4, about 32 MiB each: two large members to read in parallel
then reads every array of every file with our reader (whole arrays, all kept until the file is
done; with zlib and with libdeflate when the build has it, on 1 and 2 threads) and with np.load (forcing every array to load into a dict), each in a fresh process, and
prints best/median times, the ratio numpy/ours and peak RSS. Our streaming mode (ReadChunked,
1M elements per chunk) is measured on the large files too.

Run with Debian's python3 (it has numpy):
  BUILD_DIR=build bash tools/build.sh --target bench_npz
  /usr/bin/python3 tools/bench/bench-npz.py
Results go to stdout (a table, or JSON lines with --json; the last line has the machine); progress,
the machine and the load (tools/lib/bench_machine.py) to stderr. numpy runs with OPENBLAS_CORETYPE
and OPENBLAS_L2_SIZE unset and reports the BLAS it loaded.
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import bench_machine  # noqa: E402

NUMPY_CHILD = r"""
import json, resource, sys, time
import numpy as np
f, rep = sys.argv[1], int(sys.argv[2])
times = []
n = 0
for _ in range(rep):
    t = time.perf_counter()
    with np.load(f) as z:
        arrs = {k: z[k] for k in z.files}
    times.append(time.perf_counter() - t)
    n = sum(a.size for a in arrs.values())
    del arrs
times.sort()
hwm = 0
for line in open('/proc/self/status'):
    if line.startswith('VmHWM:'):
        hwm = int(line.split()[1]) * 1024
maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
sys.path.insert(0, sys.argv[3])  # after the peaks are read: not counted in numpy's RSS
import bench_machine
print(json.dumps({'file': f, 'elements': int(n), 'best_s': times[0],
                  'median_s': times[len(times) // 2], 'peak_rss_bytes': hwm,
                  'ru_maxrss_bytes': maxrss, 'blas': bench_machine.blas_kernel()}))
"""

NUMPY_BASELINE = r"""
import numpy as np
for line in open('/proc/self/status'):
    if line.startswith('VmHWM:'):
        print(int(line.split()[1]) * 1024)
"""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# Runs in a child process so that this driver never holds the arrays: on Linux a child's
# ru_maxrss starts from its parent's high-water mark, which would inflate numpy's figure.
GENERATE_CHILD = r"""
import os, sys
import numpy as np
d, regen = sys.argv[1], sys.argv[2] == '1'
rng = np.random.default_rng(2023)
os.makedirs(d, exist_ok=True)

def small():
    n = 50
    return {
        'node_feat': rng.standard_normal((n, 140)).astype(np.float32),
        'node_opcode': rng.integers(0, 120, n).astype(np.uint8),
        'edge_index': rng.integers(0, n, (90, 2)).astype(np.int64),
        'config_feat': rng.standard_normal((400, 24)).astype(np.float32),
        'config_runtime': rng.integers(10**5, 10**8, 400).astype(np.int64),
        'config_runtime_normalizers': rng.integers(10**5, 10**8, 400).astype(np.int64),
        'node_splits': np.array([[0, 21, 50]], dtype=np.int64),
    }

def layout():
    n, e, c, nc = 20000, 40000, 1000, 1500
    return {
        'node_feat': rng.standard_normal((n, 140)).astype(np.float32),
        'node_opcode': rng.integers(0, 120, n).astype(np.uint8),
        'edge_index': rng.integers(0, n, (e, 2)).astype(np.int64),
        'node_config_feat': rng.integers(-1, 6, (c, nc, 18)).astype(np.float32),
        'node_config_ids': np.sort(rng.choice(n, nc, replace=False)).astype(np.int64),
        'config_runtime': rng.integers(10**6, 10**9, c).astype(np.int64),
        'node_splits': np.array([[0, 5000, 12000, n]], dtype=np.int64),
    }

def balanced():
    # Two members of about 32 MiB each: what reading members in parallel can speed up.
    n, e, c, nc = 60000, 120000, 300, 1500
    return {
        'node_feat': rng.standard_normal((n, 140)).astype(np.float32),
        'node_opcode': rng.integers(0, 120, n).astype(np.uint8),
        'edge_index': rng.integers(0, n, (e, 2)).astype(np.int64),
        'node_config_feat': rng.integers(-1, 6, (c, nc, 18)).astype(np.float32),
        'node_config_ids': np.sort(rng.choice(n, nc, replace=False)).astype(np.int64),
        'config_runtime': rng.integers(10**6, 10**9, c).astype(np.int64),
    }

for name, make in (('small', small), ('layout', layout), ('balanced', balanced)):
    stored, comp = (os.path.join(d, name + '_' + k + '.npz') for k in ('stored', 'compressed'))
    if regen or not (os.path.exists(stored) and os.path.exists(comp)):
        print('generating', name, 'files in', d, '...', file=sys.stderr, flush=True)
        arrays = make()
        np.savez(stored, **arrays)
        np.savez_compressed(comp, **arrays)
    print(name + '_stored', stored)
    print(name + '_compressed', comp)
print('numpy', np.__version__)
"""


def generate(d, regen):
    out = subprocess.run([sys.executable, '-c', GENERATE_CHILD, d, '1' if regen else '0'],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    pairs = [line.split() for line in out.splitlines() if line.strip()]
    files = {k: v for k, v in pairs if k != 'numpy'}
    version = dict(pairs)['numpy']
    return files, version


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--bin', default=None,
                    help='bench_npz binary (default: $BUILD_DIR/tools/bench/bench_npz, '
                         'BUILD_DIR defaulting to build)')
    ap.add_argument('--dir', default='/tmp/tpugraphs-bench-npz',
                    help='where the generated files live (default: %(default)s)')
    ap.add_argument('--repeat', type=int, default=5,
                    help='reads per file and reader; best and median reported (default: 5)')
    ap.add_argument('--regen', action='store_true', help='regenerate the files even if present')
    ap.add_argument('--json', action='store_true', help='print JSON lines instead of a table')
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    binary = args.bin or os.path.join(root, os.environ.get('BUILD_DIR', 'build'), 'tools', 'bench',
                                      'bench_npz')
    if not os.path.exists(binary):
        sys.exit(f'bench-npz: {binary} not found; build it with '
                 f'`bash tools/build.sh --target bench_npz` or pass --bin')
    files, numpy_version = generate(args.dir, args.regen)
    # Which inflaters this build has: --inflate libdeflate fails (exit 2) without it.
    probe = subprocess.run([binary, '--inflate', 'libdeflate', '--help'], capture_output=True)
    backends = ['zlib', 'libdeflate'] if probe.returncode == 0 else ['zlib']
    if len(backends) == 1:
        log('bench-npz: this build has no libdeflate; timing zlib only')
    numpy_base = int(subprocess.run([sys.executable, '-c', NUMPY_BASELINE], check=True,
                                    capture_output=True, text=True,
                                    env=bench_machine.reference_env()).stdout)
    bench_machine.header()
    lib = os.path.dirname(os.path.abspath(bench_machine.__file__))
    blas_logged = False
    rows = []
    for label, path in files.items():
        log(f'timing {label} ({os.path.getsize(path) / 2**20:.1f} MiB) ...')
        # Ours as before (zlib, streamed) and with libdeflate, on 1 and on 2 threads (members in
        # parallel), each in its own process.
        variants = {}
        for inflate in backends:
            for threads in (1, 2):
                variants[(inflate, threads)] = run_json(
                    [binary, '--repeat', str(args.repeat), '--inflate', inflate, '--threads',
                     str(threads), path])[0]
        ours = variants[(backends[-1], 1)]
        # The reference, with the OpenBLAS overrides unset.
        nump = json.loads(subprocess.run([sys.executable, '-c', NUMPY_CHILD, path,
                                          str(args.repeat), lib], check=True, capture_output=True,
                                         text=True, env=bench_machine.reference_env()).stdout)
        if not blas_logged:
            log(f"== reference BLAS (numpy's process): {nump['blas']}")
            blas_logged = True
        if ours['elements'] != nump['elements']:
            sys.exit(f'bench-npz: element counts differ for {path}: ours {ours["elements"]}, '
                     f'numpy {nump["elements"]}')
        row = {'file': label, 'file_mib': os.path.getsize(path) / 2**20,
               'array_mib': ours['bytes'] / 2**20,
               'ours_best_s': ours['best_s'], 'ours_median_s': ours['median_s'],
               'numpy_best_s': nump['best_s'], 'numpy_median_s': nump['median_s'],
               'ratio_numpy_over_ours': nump['best_s'] / ours['best_s'],
               'ours_peak_rss_mib': ours['peak_rss_bytes'] / 2**20,
               'numpy_peak_rss_mib': nump['peak_rss_bytes'] / 2**20,
               'numpy_ru_maxrss_mib': nump['ru_maxrss_bytes'] / 2**20}
        for (inflate, threads), v in variants.items():
            row[f'{inflate}_t{threads}_best_s'] = v['best_s']
            row[f'{inflate}_t{threads}_mb_s'] = v['bytes'] / v['best_s'] / 1e6
        row['numpy_mb_s'] = ours['bytes'] / nump['best_s'] / 1e6
        if label.startswith('layout') or label.startswith('balanced'):
            streamed = run_json([binary, '--repeat', '1', '--chunked', str(1 << 20), path])[0]
            row['ours_chunked_s'] = streamed['best_s']
            row['ours_chunked_peak_rss_mib'] = streamed['peak_rss_bytes'] / 2**20
        rows.append(row)
    crc = run_json([binary, '--crc-speed'])[0]
    bench_machine.footer()
    if args.json:
        print(json.dumps(crc))
        for r in rows:
            print(json.dumps(r))
        print(json.dumps({'numpy_import_rss_mib': numpy_base / 2**20, 'cores': os.cpu_count(),
                          'machine': bench_machine.machine_json()}))
        return
    print(f'# .npz read: ours (bench_npz) vs numpy {numpy_version} np.load, '
          f'best of {args.repeat}, warm page cache, {os.cpu_count()} cores')
    hdr = (f'{"file":<18} {"file MiB":>9} {"arrays MiB":>10} {"ours s":>9} {"numpy s":>9} '
           f'{"numpy/ours":>10} {"ours RSS":>9} {"numpy RSS":>9} {"ru_maxrss":>9}')
    print(hdr)
    for r in rows:
        print(f'{r["file"]:<18} {r["file_mib"]:>9.1f} {r["array_mib"]:>10.1f} '
              f'{r["ours_best_s"]:>9.4f} {r["numpy_best_s"]:>9.4f} '
              f'{r["ratio_numpy_over_ours"]:>10.2f} {r["ours_peak_rss_mib"]:>8.1f}M '
              f'{r["numpy_peak_rss_mib"]:>8.1f}M {r["numpy_ru_maxrss_mib"]:>8.1f}M')
    print(f'# RSS = peak resident set (VmHWM) of the reading process; numpy also by '
          f'getrusage ru_maxrss; a python3 that only imports numpy: {numpy_base / 2**20:.1f} MiB')
    print(f'# CRC-32 throughput: ours {crc["crc32_gbps"]:.2f} GB/s, zlib (what numpy\'s zipfile '
          f'uses) {crc["zlib_crc32_gbps"]:.2f} GB/s')
    print(f'# decoded array MB/s (best of {args.repeat}; MB = 10^6 bytes of arrays), '
          f'threads = members read in parallel:')
    cols = [(b, t) for b in backends for t in (1, 2)]
    print(f'{"file":<18} ' + ' '.join(f'{b + " t" + str(t):>14}' for b, t in cols) +
          f' {"numpy":>9} {"t2/t1":>6}')
    for r in rows:
        best = backends[-1]
        print(f'{r["file"]:<18} ' +
              ' '.join(f'{r[f"{b}_t{t}_mb_s"]:>14.1f}' for b, t in cols) +
              f' {r["numpy_mb_s"]:>9.1f} '
              f'{r[f"{best}_t1_best_s"] / r[f"{best}_t2_best_s"]:>6.2f}')
    for r in rows:
        if 'ours_chunked_s' in r:
            print(f'# {r["file"]}: ours streamed (ReadChunked, 1M elements/chunk): '
                  f'{r["ours_chunked_s"]:.4f} s, peak RSS {r["ours_chunked_peak_rss_mib"]:.1f} MiB')


if __name__ == '__main__':
    main()
