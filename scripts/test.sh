#!/usr/bin/env bash
# Sets up, builds, and runs the whole test suite (GPU tests skip with a reason without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --preset default "$@"
