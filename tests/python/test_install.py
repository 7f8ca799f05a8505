"""tools/install-python.sh installs a working copy of the package (into a temporary site dir)."""

import os
import subprocess

from conftest import BUILD, REPO


def test_install_script_installs_an_importable_package(tmp_path):
    site = tmp_path / "site"
    env = dict(os.environ, TPUGRAPHS_PYTHON_SITE=str(site), BUILD_DIR=str(BUILD))
    r = subprocess.run(["bash", str(REPO / "tools" / "install-python.sh")], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (site / "tpugraphs" / "__init__.py").exists()
    code = ("import tpugraphs, tpugraphs.metrics; "
            "print(tpugraphs.__file__); print(tpugraphs.metrics.kendall_tau([1, 2, 3], [1, 2, 3]))")
    r = subprocess.run(["/usr/bin/python3", "-c", code], cwd="/",
                       env=dict(os.environ, PYTHONPATH=str(site)), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    where, tau = r.stdout.split()
    assert where.startswith(str(site)) and float(tau) == 1.0
    r = subprocess.run(["bash", str(REPO / "tools" / "install-python.sh"), "--uninstall"],
                       env=env, capture_output=True, text=True)
    assert r.returncode == 0 and not (site / "tpugraphs").exists()
