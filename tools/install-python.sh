#!/usr/bin/env bash
# Builds the Python package tpugraphs and installs it for Debian's /usr/bin/python3
# (docs/python.md): a copy of ${BUILD_DIR:-build}/python/tpugraphs (the extension module
# _tpugraphs.*.so and the pure-Python files) in the interpreter's local site directory,
# /usr/local/lib/python3.X/dist-packages/tpugraphs, replaced in one rename. The copy does not
# depend on the checkout or the build tree afterwards; run the script again after changing
# either. Needs root (or sudo) for the default site directory.
#
# Usage: bash tools/install-python.sh [--uninstall]
#   TPUGRAPHS_PYTHON_SITE=DIR installs into DIR instead (then put DIR on PYTHONPATH).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
BUILD_DIR=${BUILD_DIR:-build}
site=${TPUGRAPHS_PYTHON_SITE:-$($PY -c 'import site; print(site.getsitepackages()[0])')}
SUDO=""
existing="$site"
while [ ! -e "$existing" ]; do existing=$(dirname "$existing"); done
if [ "$(id -u)" -ne 0 ] && [ ! -w "$existing" ]; then SUDO="sudo"; fi
if [ "${1:-}" = "--uninstall" ]; then
  $SUDO rm -rf "$site/tpugraphs"
  echo "install-python: removed $site/tpugraphs" >&2
  exit 0
fi
bash tools/build.sh --target tpugraphs_python
pkg="$BUILD_DIR/python/tpugraphs"
if ! ls "$pkg"/_tpugraphs*.so >/dev/null 2>&1; then
  echo "install-python: $pkg has no extension module (is TPUGRAPHS_PYTHON_MODULE off?" \
    "it needs pybind11-dev and python3-dev: bash tools/install-deps.sh)" >&2
  exit 1
fi
$SUDO mkdir -p "$site"
staging="$site/.tpugraphs.tmp-$$"
$SUDO rm -rf "$staging"
$SUDO mkdir "$staging"
$SUDO cp "$pkg"/*.py "$pkg"/_tpugraphs*.so "$staging/"
$SUDO chmod -R a+rX "$staging"
if [ -e "$site/tpugraphs" ]; then
  $SUDO mv "$site/tpugraphs" "$site/.tpugraphs.old-$$"
fi
$SUDO mv "$staging" "$site/tpugraphs"
$SUDO rm -rf "$site/.tpugraphs.old-$$"
# Check it from outside the checkout, as a user would import it.
where=$(cd / && PYTHONPATH="${TPUGRAPHS_PYTHON_SITE:-}" $PY -c \
  'import tpugraphs; print(tpugraphs.__file__, tpugraphs.__version__)')
echo "install-python: installed tpugraphs into $site ($where)" >&2
