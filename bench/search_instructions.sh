#!/usr/bin/env bash
# Instructions executed by the 405B plan of issue 45 (docs/planner.md, "Issue 45's figures"), on
# one thread, counted by valgrind's cachegrind: a figure that other processes on a shared machine
# do not move (CPU seconds vary by ±10% with the load), for comparing two binaries' work. It does
# not see cache misses, which the simulations' event loop is bound by, so a change is kept only
# where the CPU time, measured alternately (bench/search_speed_alternate.sh), agrees.
# Prints each binary's total and its ten dearest functions. Takes ~3 minutes per binary.
# Usage: bench/search_instructions.sh BINARY [BINARY...]
set -euo pipefail
if [ $# -lt 1 ]; then echo "usage: $0 BINARY [BINARY...]" >&2; exit 2; fi
if ! command -v valgrind > /dev/null; then echo "$0: valgrind is not installed" >&2; exit 2; fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for b in "$@"; do
  valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$out/cg" "$b" plan \
    --model llama3.1-405b --cluster dgx-h100 --gpus 16384 --seq 8192 --gbs 2048 \
    --no-robustness -q --threads 1 > /dev/null 2>&1
  echo "== $b"
  cg_annotate "$out/cg" 2>/dev/null | grep -E '^ *[0-9,]+ \(' | head -11 | cut -c1-110
done
