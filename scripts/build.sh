#!/usr/bin/env bash
# Sets up what is missing, configures and builds scaleplan into build/ (ccache when present).
# Usage: scripts/build.sh [extra cmake args]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ ! -f build/build.ninja ]; then
  cmake --preset default "$@" >/dev/null
fi
cmake --build --preset default
