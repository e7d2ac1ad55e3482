#!/usr/bin/env bash
# Sets up, builds, and runs the whole test suite (GPU tests skip with a reason without a GPU), then
# the reliability suites (scripts/sanitize.sh: the suite under ASan + UBSan, the fuzz targets, the
# thread pools under TSan; docs/reliability.md). SCALEPLAN_SKIP_SANITIZERS=1 skips the latter.
# Between the two, the Python package from a fresh venv (scripts/test_python.sh);
# SCALEPLAN_SKIP_PYTHON=1 skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --preset default "$@"
if [ "${SCALEPLAN_SKIP_PYTHON:-0}" != 1 ]; then
  scripts/test_python.sh
fi
if [ "${SCALEPLAN_SKIP_SANITIZERS:-0}" != 1 ]; then
  scripts/sanitize.sh
fi
