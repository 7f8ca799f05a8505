"""`pip install .` and its kin (docs/python.md, "Install"), each in a fresh venv of Debian's
/usr/bin/python3 with a short session: a dataset's arrays and a trained model's scores.

- pip install --no-build-isolation . into a venv;
- python3 -m build --no-isolation --wheel: the wheel's files, tags and metadata; installed into a
  fresh venv, the session, then pip uninstall;
- pip install --no-build-isolation -e .: the package imported from the sources;
- a missing compiler, CMake, protobuf or pybind11 stops the build with one message naming the
  Debian packages; a package built for another interpreter says so at import.

The sources are copied as a fresh clone has them (git's tracked and unignored files), so no build
folder of the checkout is reused. The three installs share that copy, so the first one builds
(one CMake configure; ccache serves the objects tools/build.sh compiled with the same flags,
hence CMAKE_ARGS=-DTPUGRAPHS_WERROR=ON as tools/build.sh) and the others find it built. pip runs
with --no-index: everything comes from Debian's packages.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile

import pytest

from conftest import BUILD, REPO, SAMPLE

SYSTEM_PYTHON = "/usr/bin/python3"
MISSING = "tpugraphs: missing build dependencies:"

# The session run in each venv: argv = sample directory, work directory. Prints one JSON line.
SESSION = """
import json, pathlib, sys
import numpy as np
import tpugraphs as tg
sample, work = sys.argv[1], pathlib.Path(sys.argv[2])
summary = tg.ingest([sample], str(work / "sample.tpug"))
ds = tg.Dataset(str(work / "sample.tpug"))
g = next(ds.graphs(collection="layout:synth:random", split="test"))
tg.train(dataset=str(work / "sample.tpug"), collection="layout:synth:random", epochs=1,
         configs_per_graph=8, output=str(work / "m.tpm"), threads=2)
scores = tg.Model(str(work / "m.tpm"), threads=2).score(g)
print(json.dumps({
    "file": tg.__file__, "version": tg.__version__, "graphs": len(ds),
    "graph": g.name, "node_feat": [list(g.node_feat.shape), str(g.node_feat.dtype)],
    "edge_index": [list(g.edge_index.shape), str(g.edge_index.dtype)],
    "configs": g.num_configs, "scores": len(scores),
    "finite": bool(np.isfinite(scores).all()),
    "kendall_tau": tg.metrics.kendall_tau(scores, g.normalized_runtime)}))
"""


def clean_env(**extra):
    """The environment of pip and the venvs: no PYTHONPATH (the test process's package must not
    leak in), no index, the compile flags of tools/build.sh."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               CMAKE_ARGS="-DTPUGRAPHS_WERROR=ON")
    env.update(extra)
    return env


def run(cmd, check=True, **kwargs):
    """Runs `cmd` (output captured); fails the test with its output when check and it fails."""
    start = time.monotonic()
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                       env=kwargs.pop("env", clean_env()), **kwargs)
    print(f"{time.monotonic() - start:.1f} s: {' '.join(map(str, cmd))}")
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} exited {r.returncode}:\n"
                             f"{r.stdout[-6000:]}\n{r.stderr[-6000:]}")
    return r


def copy_sources(dest):
    """The files a fresh clone of this checkout has (tracked and unignored, as they are now)."""
    r = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others",
                        "--exclude-standard"], capture_output=True)
    if r.returncode != 0:
        shutil.copytree(REPO, dest, ignore=shutil.ignore_patterns("build*", ".git", "dist"))
        return dest
    for rel in filter(None, r.stdout.decode().split("\0")):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def make_venv(path):
    """A fresh venv of Debian's python3 that sees Debian's numpy (and setuptools, for
    --no-build-isolation)."""
    run([SYSTEM_PYTHON, "-m", "venv", "--system-site-packages", path])
    return pathlib.Path(path)


def venv_site(venv):
    return pathlib.Path(run([venv / "bin" / "python", "-c",
                             "import sysconfig; print(sysconfig.get_path('purelib'))"]
                            ).stdout.strip())


def cli_version():
    """The version `tpugraphs --version` prints ("tpugraphs 0.1.0 (...)")."""
    return run([BUILD / "tpugraphs", "--version"]).stdout.split()[1]


def run_session(venv, tmp_path):
    work = tmp_path / "session"
    work.mkdir()
    r = run([venv / "bin" / "python", "-c", SESSION, SAMPLE, work], cwd="/")
    session = json.loads(r.stdout.strip().splitlines()[-1])
    print(json.dumps(session, indent=1))
    assert session["version"] == cli_version()
    assert session["graphs"] == 42
    assert session["node_feat"][0][1] == 140 and session["node_feat"][1] == "float32"
    assert session["edge_index"][0][1] == 2 and session["edge_index"][1] == "int64"
    assert session["configs"] > 1 and session["scores"] == session["configs"]
    assert session["finite"]
    assert -1.0 <= session["kendall_tau"] <= 1.0
    return session


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """One copy of the sources for the three installs (they share its CMake build folder)."""
    return copy_sources(tmp_path_factory.mktemp("clone"))


def test_pip_install_into_a_venv(sources, tmp_path):
    venv = make_venv(tmp_path / "v")
    run([venv / "bin" / "pip", "install", "--no-build-isolation", sources])
    session = run_session(venv, tmp_path)
    assert pathlib.Path(session["file"]).parent == venv_site(venv) / "tpugraphs"
    # Built in the copy, for the venv's interpreter; the checkout's build/ is not touched.
    build_dirs = list(sources.glob("build-python-*"))
    assert len(build_dirs) == 1 and not (sources / "build").exists()
    show = run([venv / "bin" / "pip", "show", "tpugraphs"]).stdout
    assert f"Version: {cli_version()}" in show and "License: MIT" in show
    assert "Requires: numpy" in show


def test_wheel_installs_runs_and_uninstalls(sources, tmp_path):
    dist = tmp_path / "dist"
    run([SYSTEM_PYTHON, "-m", "build", "--no-isolation", "--wheel", "--outdir", dist, sources])
    wheels = list(dist.glob("*.whl"))
    assert len(wheels) == 1, wheels
    version = cli_version()
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    assert wheels[0].name == f"tpugraphs-{version}-{tag}-{tag}-{platform}.whl"
    info = f"tpugraphs-{version}.dist-info"
    with zipfile.ZipFile(wheels[0]) as z:
        names = set(z.namelist())
        metadata = z.read(f"{info}/METADATA").decode()
        wheel = z.read(f"{info}/WHEEL").decode()
    print("\n".join(sorted(names)))
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    assert names == {
        "tpugraphs/__init__.py", "tpugraphs/metrics.py", "tpugraphs/torch.py",
        "tpugraphs/_build_info.py", f"tpugraphs/_tpugraphs{suffix}",
        f"{info}/METADATA", f"{info}/WHEEL", f"{info}/RECORD", f"{info}/LICENSE",
        f"{info}/top_level.txt"}
    assert f"Tag: {tag}-{tag}-{platform}" in wheel and "Root-Is-Purelib: false" in wheel
    for line in (f"Version: {version}", "License: MIT", "Requires-Dist: numpy",
                 "Description-Content-Type: text/markdown", "# tpugraphs"):
        assert line in metadata, line

    venv = make_venv(tmp_path / "v")
    run([venv / "bin" / "pip", "install", wheels[0]])
    site = venv_site(venv)
    session = run_session(venv, tmp_path)
    assert pathlib.Path(session["file"]).parent == site / "tpugraphs"

    run([venv / "bin" / "pip", "uninstall", "-y", "tpugraphs"])
    assert not [p.name for p in site.iterdir() if p.name.startswith("tpugraphs")]
    # A copy installed for the whole system (tools/install-python.sh) may still be found.
    where = run([venv / "bin" / "python", "-c",
                 "import importlib.util as u; s = u.find_spec('tpugraphs'); "
                 "print(s.origin if s else '')"], cwd="/").stdout.strip()
    assert not where.startswith(str(venv)), where


def test_editable_install_imports_the_sources(sources, tmp_path):
    venv = make_venv(tmp_path / "v")
    run([venv / "bin" / "pip", "install", "--no-build-isolation", "-e", sources])
    session = run_session(venv, tmp_path)
    package = sources / "src" / "python" / "tpugraphs"
    assert pathlib.Path(session["file"]) == package / "__init__.py"
    assert (package / "_build_info.py").exists()
    # A Python file added to the sources is importable without reinstalling.
    (package / "_editable_probe.py").write_text("ANSWER = 42\n")
    try:
        r = run([venv / "bin" / "python", "-c",
                 "import tpugraphs._editable_probe as p; print(p.ANSWER)"], cwd="/")
        assert r.stdout.strip() == "42"
    finally:
        (package / "_editable_probe.py").unlink()


def pip_wheel(sources, tmp_path, env):
    """`pip wheel` of the sources with Debian's pip (no venv needed: nothing is installed)."""
    return run([SYSTEM_PYTHON, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
                "-w", tmp_path / "wheels", sources], check=False, env=env)


def failed_build_output(sources, tmp_path, env):
    """The output of a wheel build that must fail, with the one missing-dependencies message."""
    r = pip_wheel(sources, tmp_path, env)
    out = r.stdout + r.stderr
    print(out)
    assert r.returncode != 0
    assert out.count(MISSING) == 1
    return out


def test_missing_compiler_and_cmake_are_named(tmp_path):
    sources = copy_sources(tmp_path / "clone")
    empty = tmp_path / "empty-path"
    empty.mkdir()
    env = clean_env(PATH=str(empty))
    env.pop("CXX", None)
    out = failed_build_output(sources, tmp_path, env)
    assert "CMake 3.20 or later (Debian: cmake)" in out
    assert "a C++20 compiler (c++, g++ or clang++ on PATH) (Debian: g++ build-essential)" in out
    assert "sudo apt-get install cmake g++ build-essential" in out
    assert "sudo bash tools/install-deps.sh" in out
    assert not list(sources.glob("build-python-*/CMakeCache.txt"))


def test_missing_protobuf_and_pybind11_are_named(tmp_path):
    # CMake's CMAKE_DISABLE_FIND_PACKAGE_<name> makes find_package fail as on a machine
    # without the package.
    sources = copy_sources(tmp_path / "clone")
    env = clean_env(CMAKE_ARGS="-DCMAKE_DISABLE_FIND_PACKAGE_Protobuf=ON "
                               "-DCMAKE_DISABLE_FIND_PACKAGE_pybind11=ON")
    out = failed_build_output(sources, tmp_path, env)
    assert "protobuf (libraries and headers) (Debian: libprotobuf-dev)" in out
    assert "protoc, the protobuf compiler (Debian: protobuf-compiler)" in out
    assert "pybind11 (TPUGRAPHS_PYTHON_MODULE is on) (Debian: pybind11-dev python3-dev)" in out
    assert ("sudo apt-get install libprotobuf-dev protobuf-compiler pybind11-dev python3-dev"
            in out)
    assert not list(tmp_path.glob("wheels/*.whl"))


def package_as_if_built_for_python_3_12(tmp_path, build_info=True):
    """The build tree's package, its extension renamed and _build_info.py rewritten as a build
    for another interpreter (CPython 3.12) would have them."""
    site = tmp_path / "site"
    package = site / "tpugraphs"
    shutil.copytree(BUILD / "python" / "tpugraphs", package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    other = suffix.replace(f"-{sys.version_info.major}{sys.version_info.minor}-", "-312-")
    assert other != suffix
    (package / f"_tpugraphs{suffix}").rename(package / f"_tpugraphs{other}")
    if build_info:
        (package / "_build_info.py").write_text(
            "PYTHON_EXECUTABLE = '/opt/python3.12/bin/python3.12'\n"
            "PYTHON_VERSION = '3.12.1'\nPYTHON_IMPLEMENTATION = 'cpython'\n"
            f"EXT_SUFFIX = {other!r}\nTPUGRAPHS_VERSION = '0'\n")
    else:
        (package / "_build_info.py").unlink()
    return site, other


def import_with(python, site):
    env = clean_env(PYTHONPATH=str(site))
    return run([python, "-c", "import tpugraphs"], check=False, cwd="/", env=env)


def test_import_names_the_interpreter_it_was_built_for(tmp_path):
    site, other = package_as_if_built_for_python_3_12(tmp_path)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    r = import_with(SYSTEM_PYTHON, site)
    print(r.stderr)
    assert r.returncode == 1
    last = r.stderr[r.stderr.rindex("ImportError: tpugraphs in"):]
    assert "cannot load its extension module _tpugraphs: No module named" in last
    assert (f"built for:  cpython 3.12.1 (/opt/python3.12/bin/python3.12, extension suffix "
            f"{other})") in last
    running = run([SYSTEM_PYTHON, "-c",
                   "import sys; print(sys.executable, sys.version.split()[0])"])
    executable, version = running.stdout.split()
    assert f"running on: cpython {version} ({executable}, extension suffix {suffix})" in last
    assert f"{executable} -m pip install --no-build-isolation ." in last


def test_import_without_build_info_lists_the_extensions(tmp_path):
    site, other = package_as_if_built_for_python_3_12(tmp_path, build_info=False)
    r = import_with(SYSTEM_PYTHON, site)
    assert r.returncode == 1
    assert f"extension files here: _tpugraphs{other}" in r.stderr, r.stderr


def other_interpreter():
    """A CPython 3 of another minor version than Debian's python3 on this machine:
    $TPUGRAPHS_OTHER_PYTHON, a python3.X on PATH, or one of pyenv's versions. None if none."""
    ours = (sys.version_info.major, sys.version_info.minor)
    candidates = [os.environ.get("TPUGRAPHS_OTHER_PYTHON")]
    candidates += [shutil.which(f"python3.{minor}") for minor in range(8, 15)]
    pyenv = shutil.which("pyenv")
    if pyenv:
        root = subprocess.run([pyenv, "root"], capture_output=True, text=True).stdout.strip()
        if root:
            candidates += sorted(map(str, pathlib.Path(root).glob("versions/3.*/bin/python3")))
    for exe in filter(None, candidates):
        r = subprocess.run([exe, "-c", "import sys; print(sys.executable); "
                            "print(*sys.version_info[:2])"], capture_output=True, text=True)
        if r.returncode == 0:
            executable, version = r.stdout.splitlines()
            if tuple(map(int, version.split())) != ours:
                return executable
    return None


def test_another_interpreter_is_told_what_the_build_is_for(tmp_path):
    exe = other_interpreter()
    if exe is None:
        pytest.skip("no CPython of another minor version on PATH (the simulated test above "
                    "covers the message)")
    r = import_with(exe, BUILD / "python")
    print(r.stderr)
    assert r.returncode == 1
    assert "cannot load its extension module _tpugraphs" in r.stderr
    assert "running on: cpython" in r.stderr and f"({exe}," in r.stderr
    info = {}
    exec((BUILD / "python" / "tpugraphs" / "_build_info.py").read_text(), info)
    assert f"built for:  cpython {info['PYTHON_VERSION']} ({info['PYTHON_EXECUTABLE']}" in r.stderr


def test_a_venv_without_wheel_is_told_what_to_install(tmp_path):
    # A venv without --system-site-packages has setuptools but not wheel.
    venv = tmp_path / "plain"
    run([SYSTEM_PYTHON, "-m", "venv", venv])
    sources = copy_sources(tmp_path / "clone")
    r = run([venv / "bin" / "pip", "install", "--no-build-isolation", sources], check=False)
    out = r.stdout + r.stderr
    print(out)
    assert r.returncode != 0
    assert f"tpugraphs: the environment of {venv / 'bin' / 'python'}" in out
    assert "lacks the build back-end's packages: wheel." in out
    assert "sudo apt-get install python3-setuptools python3-wheel" in out
    assert "python3 -m venv --system-site-packages" in out
    assert not list(sources.glob("build-python-*"))
