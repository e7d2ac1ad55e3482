#!/usr/bin/env bash
# The Python package from a clean state: a fresh virtual environment in a temporary directory,
# `pip install .` (builds the C++ core as scaleplan._core with scikit-build-core and nanobind, and
# installs the `scaleplan` command and the bundled data), pytest, then pytest of tests/python/.
# ccache, when installed, shares the compiled objects with the other builds.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
venv=$(mktemp -d "${TMPDIR:-/tmp}/scaleplan-venv.XXXXXX")
trap 'rm -rf "$venv"' EXIT
"$python" -m venv "$venv"
# The tests compare the module with the command installed beside it: neither may read another
# data directory.
unset SCALEPLAN_DATA_DIR
# What git sees of the source tree, ignored files included, before and after the install:
# tests/python compares the two (`pip install .` must build outside the tree).
tree_status() { git status --porcelain --ignored 2>/dev/null || true; }
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  tree_status >"$venv/tree-before.txt"
fi
start=$(date +%s)
"$venv/bin/pip" install --quiet --disable-pip-version-check .
echo "test_python: pip install . took $(( $(date +%s) - start )) s" >&2
if [ -f "$venv/tree-before.txt" ]; then
  tree_status >"$venv/tree-after.txt"
  export SCALEPLAN_TREE_BEFORE="$venv/tree-before.txt" SCALEPLAN_TREE_AFTER="$venv/tree-after.txt"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check pytest
cd "$venv"  # import the installed package, not python/ of the checkout
"$venv/bin/python" -m pytest -q "$OLDPWD/tests/python" "$@"
