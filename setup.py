"""Builds the Python package tpugraphs with the project's own CMake build (docs/python.md).

`pip install .`, `python3 -m build --wheel` and `pip install -e .` call this through
setuptools (pyproject.toml holds the metadata). It adds what pyproject.toml cannot say:

- the version, read from `project(tpugraphs VERSION x.y.z)` in CMakeLists.txt, the one place
  it is defined (`tpugraphs --version` and `tpugraphs.__version__` come from there too);
- the extension module `tpugraphs._tpugraphs`, built by CMake (target tpugraphs_python) for
  the interpreter that runs this file, in build-python-<tag>/ next to this file (one folder
  per interpreter, kept between builds, so a rebuild only compiles what changed).

Environment: CMAKE_ARGS (extra configure arguments, e.g. "-DTPUGRAPHS_NATIVE=OFF" for a wheel
that runs on other x86-64-v3 machines), CMAKE_BUILD_PARALLEL_LEVEL (compile jobs; default all
cores), CXX (the compiler). ccache is used when it is on PATH.
"""

import hashlib
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig

import setuptools
from setuptools.command.build_ext import build_ext
from setuptools.errors import SetupError

ROOT = pathlib.Path(__file__).resolve().parent
MIN_CMAKE = (3, 20)
MISSING_MARKER = "tpugraphs: missing build dependencies:"


def check_backend():
    """Exits with a message naming what to install when this environment's setuptools is too old
    for pyproject.toml's [project] table or, for a wheel, the `wheel` package is missing: with
    --no-build-isolation pip builds with the environment's own packages (a venv made without
    --system-site-packages has setuptools but not wheel)."""
    problems = []
    major = int(re.match(r"\d+", setuptools.__version__).group())
    if major < 61:
        problems.append(f"setuptools 61 or later (it has {setuptools.__version__})")
    wheel_commands = {"bdist_wheel", "dist_info", "editable_wheel"}
    if wheel_commands & set(sys.argv[1:]):
        try:
            import wheel  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
        except ImportError:
            problems.append("wheel")
    if problems:
        sys.exit(f"tpugraphs: the environment of {sys.executable} lacks the build back-end's "
                 f"packages: {', '.join(problems)}.\n"
                 "pip --no-build-isolation and `python3 -m build --no-isolation` build with the "
                 "environment's own packages.\n"
                 "On Debian: sudo apt-get install python3-setuptools python3-wheel (or sudo bash "
                 "tools/install-deps.sh),\n"
                 "  and make the venv with `python3 -m venv --system-site-packages`.\n"
                 "Elsewhere: pip install 'setuptools>=61' wheel, or, online, leave out "
                 "--no-build-isolation\n"
                 "  (pip then downloads them into an isolated build environment).")


def project_version():
    """The version of `project(tpugraphs VERSION x.y.z)` in CMakeLists.txt."""
    text = (ROOT / "CMakeLists.txt").read_text()
    m = re.search(r"^project\(tpugraphs\s+VERSION\s+([0-9]+(?:\.[0-9]+)*)", text, re.M)
    if not m:
        sys.exit(f"tpugraphs: {ROOT / 'CMakeLists.txt'} has no `project(tpugraphs VERSION "
                 "x.y.z` line, where the version is read from")
    return m.group(1)


def build_python():
    """The interpreter to build for: the running one, symlinks resolved (a venv's python is a
    link to its base interpreter, whose headers and ABI the extension is built against)."""
    return os.path.realpath(sys.executable)


def build_dir():
    """build-python-<implementation>-<version>-<hash of the interpreter's path>/ beside this
    file: kept between builds, one per interpreter (CMake caches the interpreter it found). It
    sits one level below the root, as build/ does, so that ccache (with CCACHE_BASEDIR at the
    root) serves the objects `bash tools/build.sh` compiled with the same flags."""
    digest = hashlib.sha256(build_python().encode()).hexdigest()[:8]
    return ROOT / f"build-python-{sys.implementation.cache_tag}-{digest}"


def missing_dependencies_message(missing):
    """The message CMake's own check prints too (cmake/TpugraphsDependencies.cmake): what is
    missing, each with its Debian packages, and the commands that install them."""
    packages = []
    for _, debs in missing:
        packages += [d for d in debs.split() if d not in packages]
    lines = [MISSING_MARKER] + [f"  {what} (Debian: {debs})" for what, debs in missing]
    lines += ["Install them with", "  sudo apt-get install " + " ".join(packages),
              "or everything the project uses with", "  sudo bash tools/install-deps.sh"]
    return "\n".join(lines)


def find_compiler():
    """The C++ compiler CMake would pick: $CXX, else c++, g++ or clang++ on PATH; None if none."""
    cxx = os.environ.get("CXX")
    if cxx:
        words = shlex.split(cxx)
        return shutil.which(words[0]) if words else None
    for name in ("c++", "g++", "clang++"):
        found = shutil.which(name)
        if found:
            return found
    return None


def check_tools():
    """Raises SetupError naming the Debian packages when CMake, a C++ compiler or the
    interpreter's C headers are missing (CMake reports the libraries: protobuf, pybind11...)."""
    missing = []
    cmake = shutil.which("cmake")
    if not cmake:
        missing.append(("CMake 3.20 or later", "cmake"))
    else:
        out = subprocess.run([cmake, "--version"], capture_output=True, text=True).stdout
        m = re.search(r"version (\d+)\.(\d+)", out)
        if not m or (int(m.group(1)), int(m.group(2))) < MIN_CMAKE:
            found = f"{m.group(1)}.{m.group(2)}" if m else "an unknown version"
            missing.append((f"CMake 3.20 or later ({cmake} is {found})", "cmake"))
    if not find_compiler():
        what = (f"a C++20 compiler (CXX={os.environ['CXX']} is not on PATH)"
                if os.environ.get("CXX") else "a C++20 compiler (c++, g++ or clang++ on PATH)")
        missing.append((what, "g++ build-essential"))
    include = sysconfig.get_path("include")
    if not os.path.exists(os.path.join(include, "Python.h")):
        ver = f"{sys.version_info.major}.{sys.version_info.minor}"
        missing.append((f"the C headers of {sys.executable} (Python.h in {include})",
                        f"python3-dev python{ver}-dev"))
    if missing:
        raise SetupError(missing_dependencies_message(missing))
    return cmake


def run_cmake_configure(cmake, build, env):
    """Configures `build` for the running interpreter; prints CMake's output. On failure raises
    SetupError with CMake's missing-dependencies message, or with the end of its output."""
    python = build_python()
    args = [cmake, "-S", str(ROOT), "-B", str(build),
            "-DCMAKE_BUILD_TYPE=Release",
            "-DTPUGRAPHS_PYTHON_MODULE=ON",
            f"-DTPUGRAPHS_PYTHON={python}",
            f"-DPYTHON_EXECUTABLE={python}",
            "-DTPUGRAPHS_BUILD_TESTS=OFF",
            "-DTPUGRAPHS_BUILD_BENCHMARKS=OFF",
            # Sources compiled in batches, as tools/build.sh does, so that ccache serves its
            # objects (cmake/TpugraphsUnity.cmake); CMAKE_ARGS="-DTPUGRAPHS_UNITY_BUILD=OFF"
            # undoes it.
            "-DTPUGRAPHS_UNITY_BUILD=ON"]
    if not (build / "CMakeCache.txt").exists() and shutil.which("ninja"):
        args += ["-G", "Ninja"]
    if shutil.which("ccache"):
        args.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
    args += shlex.split(os.environ.get("CMAKE_ARGS", ""))
    print("tpugraphs: " + shlex.join(args), flush=True)
    r = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if r.returncode == 0:
        print(r.stdout, flush=True)
        return
    # CMake's message of the missing dependencies, alone: from its first line to CMake's
    # "Call Stack", without the blank lines and the indentation CMake adds.
    lines = r.stdout.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == MISSING_MARKER:
            block = []
            for follow in lines[i:]:
                if follow.startswith(("Call Stack", "CMake ", "-- ")):
                    break
                if follow.strip():
                    block.append(follow[2:] if follow.startswith("  ") else follow)
            raise SetupError("\n".join(block))
    print(r.stdout, flush=True)
    raise SetupError(f"CMake could not configure the build in {build} (its output is above). "
                     "On Debian, `sudo bash tools/install-deps.sh` installs every build "
                     "dependency.")


class CMakeBuildExt(build_ext):
    """Builds the extension with CMake instead of compiling `sources` itself."""

    def build_extension(self, ext):
        cmake = check_tools()
        build = build_dir()
        env = dict(os.environ)
        if shutil.which("ccache"):
            # As tools/build.sh: objects are shared between checkouts and build folders.
            env.setdefault("CCACHE_BASEDIR", str(ROOT))
            env.setdefault("CCACHE_NOHASHDIR", "1")
        run_cmake_configure(cmake, build, env)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        cmd = [cmake, "--build", str(build), "--target", "tpugraphs_python", "-j", jobs]
        print("tpugraphs: " + shlex.join(cmd), flush=True)
        if subprocess.run(cmd, env=env).returncode != 0:
            raise SetupError(f"building the extension module in {build} failed (the compiler's "
                             "output is above)")

        package = build / "python" / "tpugraphs"
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        built = package / target.name
        if not built.exists():
            found = ", ".join(p.name for p in package.glob("_tpugraphs*")) or "nothing"
            raise SetupError(f"CMake built {found} in {package}, not {target.name}, the name "
                             f"{sys.executable} imports (is PYTHON_EXECUTABLE overridden in "
                             "CMAKE_ARGS?)")
        target.parent.mkdir(parents=True, exist_ok=True)
        self.copy_file(str(built), str(target))
        self.copy_file(str(package / "_build_info.py"), str(target.parent / "_build_info.py"))

    def copy_extensions_to_source(self):
        """In place (`pip install -e .`): _build_info.py goes next to the extension too."""
        super().copy_extensions_to_source()
        build_py = self.get_finalized_command("build_py")
        for ext in self.extensions:
            inplace_file, regular_file = self._get_inplace_equivalent(build_py, ext)
            self.copy_file(os.path.join(os.path.dirname(regular_file), "_build_info.py"),
                           os.path.join(os.path.dirname(inplace_file), "_build_info.py"))


check_backend()
setuptools.setup(
    version=project_version(),
    package_dir={"": "src/python"},
    packages=["tpugraphs"],
    # Only the package's .py files and the extension CMake built: not an editable install's
    # extension left in src/python/tpugraphs.
    include_package_data=False,
    zip_safe=False,
    ext_modules=[setuptools.Extension("tpugraphs._tpugraphs", sources=[])],
    cmdclass={"build_ext": CMakeBuildExt},
    # setuptools' own build folder would be build/, the CMake build of tools/build.sh.
    options={"build": {"build_base": str(build_dir() / "setuptools")}},
)
