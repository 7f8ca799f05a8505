#!/usr/bin/env bash
# Renders a `tpugraphs report` HTML page to a PNG with headless Chromium, to look at it without
# a desktop browser. Not part of the build or the tests.
#
#   tools/dev/render-report.sh report.html [out.png]      (default: report.png beside the page)
#   WIDTH=1240 HEIGHT=9000 tools/dev/render-report.sh ...  (viewport; the PNG is cut at HEIGHT)
#   ANCHOR=ranking-0 HEIGHT=1600 tools/dev/render-report.sh ...  (start at a section: models,
#       curves, ranking-N, dataset-N, detail-...; the page's ids. A copy of the page hides
#       what comes before it, so that a short PNG shows that section.)
#
# Installs Debian's `chromium` package when no chromium binary is found.
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 report.html [out.png]" >&2
  exit 2
fi
html="$1"
png="${2:-${html%.html}.png}"
if [ ! -f "$html" ]; then
  echo "$0: $html: no such file" >&2
  exit 1
fi
browser=""
for b in chromium chromium-browser; do
  if command -v "$b" >/dev/null 2>&1; then browser="$b"; break; fi
done
if [ -z "$browser" ]; then
  echo "render-report: installing chromium (Debian package)" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q >&2
  $SUDO apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core >&2
  browser=chromium
fi
abs="$(cd "$(dirname "$html")" && pwd)/$(basename "$html")"
# A throwaway profile; no network is needed (the page fetches nothing).
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
if [ -n "${ANCHOR:-}" ]; then
  if ! grep -q "id=\"$ANCHOR\"" "$html"; then
    echo "render-report: $html has no element with id \"$ANCHOR\"" >&2
    exit 1
  fi
  sed "s|</head>|<style>body > *:has(~ #$ANCHOR){display:none}</style></head>|" "$html" \
    >"$profile/page.html"
  abs="$profile/page.html"
fi
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
  --disable-background-networking --user-data-dir="$profile" \
  --window-size="${WIDTH:-1240},${HEIGHT:-9000}" --screenshot="$png" "file://$abs" >&2 2>/dev/null
if [ ! -s "$png" ]; then
  echo "render-report: $browser wrote no $png" >&2
  exit 1
fi
echo "$png"
