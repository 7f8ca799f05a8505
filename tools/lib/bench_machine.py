"""The machine a benchmark ran on, and the BLAS a reference ran on (the Python side of
tools/lib/bench-machine.sh; the same lines, on stderr).

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
    import bench_machine
    bench_machine.header()         # at the start of measuring: CPU, vector extensions, cores,
                                   # 1-minute load; a WARNING when that load is above 0.5
    ...
    bench_machine.footer()         # at the end: the load again
    bench_machine.machine_json()   # {"cpu", "vector_extensions", "cores", "load_at_start",
                                   #  "load_at_end"} for a --json output
    bench_machine.blas_report()    # in a reference, after numpy/torch ran: the BLAS library and,
                                   # for OpenBLAS, the kernel (core) it chose
    bench_machine.reference_env()  # os.environ without OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE,
                                   # for running a reference as a child process

As a script: `python3 tools/lib/bench_machine.py blas [torch]` imports numpy (and torch) and
prints the BLAS report: what a reference started with the same environment would load.
For tests the inputs can be replaced: BENCH_MACHINE_LOADAVG_FILE (default /proc/loadavg) and
BENCH_MACHINE_CPUINFO_FILE (default /proc/cpuinfo).
"""
import contextlib
import ctypes
import io
import json
import os
import re
import sys

MAX_LOAD = 0.5
EXTENSIONS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16",
              "avx512_vnni")
# OpenBLAS reads these when it loads; set, they pin it to an older kernel on AVX-512 CPUs.
OPENBLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")

_load_start = None
_load_end = None


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _cpuinfo():
    return _read(os.environ.get("BENCH_MACHINE_CPUINFO_FILE", "/proc/cpuinfo"))


def cpu():
    """The first "model name" of /proc/cpuinfo."""
    for line in _cpuinfo().splitlines():
        if line.startswith("model name") and ":" in line:
            return line.split(":", 1)[1].strip() or "unknown"
    return "unknown"


def vector_extensions():
    """Which of EXTENSIONS (and any amx_*) the CPU flags list, in that order."""
    for line in _cpuinfo().splitlines():
        if line.startswith("flags") and ":" in line:
            flags = line.split(":", 1)[1].split()
            have = set(flags)
            return [e for e in EXTENSIONS if e in have] + [f for f in flags if f.startswith("amx")]
    return []


def load():
    """The 1-minute load average, or None when it cannot be read."""
    text = _read(os.environ.get("BENCH_MACHINE_LOADAVG_FILE", "/proc/loadavg")).split()
    try:
        return float(text[0])
    except (IndexError, ValueError):
        return None


def _cores():
    try:
        return len(os.sched_getaffinity(0))  # what nproc prints
    except AttributeError:  # pragma: no cover
        return os.cpu_count()


def _fmt(x):
    return "unknown" if x is None else f"{x:.2f}"


def header(file=None):
    """Prints the machine and the load at start (stderr); remembers the load."""
    global _load_start
    file = file or sys.stderr
    _load_start = load()
    ext = " ".join(vector_extensions()) or "none"
    print(f"== machine: {cpu()}; vector extensions: {ext}; {_cores()} cores", file=file)
    print(f"== load average (1 min) at start: {_fmt(_load_start)}", file=file)
    if _load_start is not None and _load_start > MAX_LOAD:
        print(f"WARNING: load average {_fmt(_load_start)} > {MAX_LOAD} at start: figures taken "
              "beside other work were 3-5x off; rerun on an idle machine", file=file)
    file.flush()


def footer(file=None, measured_at=None):
    """Prints the load at the end (stderr). measured_at: when nothing was measured now (the
    figures are kept ones), the load at the start of the run that measured them; it is printed
    and judged instead of today's, and machine_json() reports it."""
    global _load_end, _load_start
    file = file or sys.stderr
    _load_end = load()
    if measured_at is not None:
        _load_start = measured_at if measured_at != "unknown" else None
        print(f"== nothing measured now (load average {_fmt(_load_end)}); the kept figures were "
              f"measured at a load of {_fmt(_load_start)} at the start", file=file)
    else:
        start = "not taken" if _load_start is None else _fmt(_load_start)
        print(f"== load average (1 min) at end: {_fmt(_load_end)} (at start: {start}; the "
              "benchmark's own threads count too)", file=file)
    if _load_start is not None and _load_start > MAX_LOAD:
        print(f"WARNING: the machine was busy at start (load {_fmt(_load_start)}): these figures "
              "are not an idle machine's", file=file)
    file.flush()


def load_at_start():
    """The load header() read (None before it ran)."""
    return _load_start


def machine_json():
    """The machine as a dict for JSON output (the load at end read now unless footer ran)."""
    return {"cpu": cpu(), "vector_extensions": vector_extensions(), "cores": _cores(),
            "load_at_start": _load_start,
            "load_at_end": _load_end if _load_end is not None else load()}


def reference_env(env=None):
    """A copy of env (default os.environ) without the OpenBLAS overrides."""
    env = dict(os.environ if env is None else env)
    for k in OPENBLAS_OVERRIDES:
        env.pop(k, None)
    return env


def _mapped_blas():
    """Shared libraries mapped into this process that look like a BLAS (not scipy's wrappers)."""
    libs = []
    for line in _read("/proc/self/maps").splitlines():
        parts = line.split()
        if len(parts) < 6 or not parts[5].startswith("/"):
            continue
        base = os.path.basename(parts[5])
        if (base.startswith("lib") and ".cpython-" not in base and parts[5] not in libs and
                any(k in base for k in ("blas", "mkl", "blis"))):
            libs.append(parts[5])
    return libs


def _openblas_core(path):
    """(config, corename) of an OpenBLAS at path, or None when it is not OpenBLAS."""
    try:
        lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_NOLOAD", 0) | ctypes.RTLD_LOCAL)
    except OSError:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            return None
    try:
        corename = lib.openblas_get_corename
    except AttributeError:
        return None
    corename.restype = ctypes.c_char_p
    config = ""
    try:
        get_config = lib.openblas_get_config
        get_config.restype = ctypes.c_char_p
        config = (get_config() or b"").decode(errors="replace").strip()
    except AttributeError:
        pass
    return config, (corename() or b"").decode(errors="replace").strip()


def _fallback():
    """What torch and numpy say about their BLAS when no OpenBLAS kernel could be asked."""
    said = []
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            info = re.findall(r"\b(?:BLAS|LAPACK)_INFO=[^,\s]*", torch.__config__.show())
            said.append("torch " + (" ".join(info) or "shows no BLAS_INFO"))
        except Exception:  # noqa: BLE001 - a report, never a failure
            pass
    np = sys.modules.get("numpy")
    if np is not None:
        try:
            try:  # numpy >= 1.26
                deps = np.show_config(mode="dicts")["Build Dependencies"]
                said.append("numpy built with " + ", ".join(
                    f"{k} {v.get('name', '?')}" for k, v in deps.items() if isinstance(v, dict)))
            except TypeError:  # older numpy: print only; sections "X_info:" then NOT AVAILABLE
                buf = io.StringIO()
                with contextlib.redirect_stdout(buf):
                    np.show_config()
                lines = buf.getvalue().splitlines()
                found = [s.strip()[:-len("_info:")] for i, s in enumerate(lines)
                         if s.strip().endswith("_info:") and
                         (i + 1 == len(lines) or "NOT AVAILABLE" not in lines[i + 1])]
                said.append("numpy built with " + (" ".join(found) or "?"))
        except Exception:  # noqa: BLE001
            pass
    return "; ".join(said)


def blas_kernel():
    """One line: the BLAS libraries mapped, and for OpenBLAS its config and chosen core."""
    parts, openblas = [], {}
    for path in _mapped_blas():
        base = os.path.basename(path)
        core = _openblas_core(path)
        if core is not None:  # libblas.so.3 and libopenblas*.so of one OpenBLAS: one entry
            openblas.setdefault(core, []).append(path)
        elif "mkl" in base:
            parts.append(f"MKL ({path})")
        elif "blis" in base:
            parts.append(f"BLIS ({path})")
        elif "/blas/" in path or base.startswith("libblas.so"):
            parts.append(f"reference BLAS, no optimised kernel ({path})")
        else:
            parts.append(path)
    parts = [f"OpenBLAS core {name or '?'} ({config or 'no config string'}; {' '.join(paths)})"
             for (config, name), paths in openblas.items()] + parts
    if not openblas:
        fb = _fallback()
        if fb:
            parts.append(fb)
    return "; ".join(parts) or "no BLAS library mapped"


def blas_report(file=None):
    """Prints (stderr) the BLAS kernel and the OpenBLAS overrides this process saw."""
    file = file or sys.stderr
    seen = ", ".join(f"{k}={os.environ[k]}" if k in os.environ else f"{k} unset"
                     for k in OPENBLAS_OVERRIDES)
    print(f"== reference BLAS: {blas_kernel()}; {seen}", file=file)
    file.flush()


def _main(argv):
    what = argv[1] if len(argv) > 1 else ""
    if what == "blas":
        import numpy as np
        a = np.ones((64, 64), dtype=np.float32)
        (a @ a).sum()  # a GEMM, so that a lazily loaded BLAS is mapped
        if "torch" in argv[2:]:
            try:
                import torch
                torch.ones(64, 64) @ torch.ones(64, 64)
            except ImportError as e:
                print(f"bench_machine: no torch ({e})", file=sys.stderr)
        blas_report()
    elif what == "header":
        header()
    elif what == "json":
        with open(os.devnull, "w") as quiet:
            header(file=quiet)
        print(json.dumps(machine_json()))
    else:
        print("usage: bench_machine.py blas [torch] | header | json", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
