#!/usr/bin/env bash
# Regenerates docs/features.md from the feature name table (src/ingest/feature_names.cc).
# The ingest test FeatureNames.DocsPageIsGeneratedFromTheTable writes the page when
# TPUGRAPHS_UPDATE_DOCS=1 and otherwise fails if the page is stale.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
bash tools/build.sh --target ingest_test
TPUGRAPHS_UPDATE_DOCS=1 "$BUILD_DIR/tests/ingest_test" \
  --gtest_filter='FeatureNames.DocsPageIsGeneratedFromTheTable'
echo "wrote docs/features.md" >&2
