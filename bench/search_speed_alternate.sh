#!/usr/bin/env bash
# The short commands of issue 45's figures (docs/planner.md, "Issue 45's figures"), run on two or
# more binaries alternately, round after round, so that each sees the same load: the 405B plan on
# 16,384 GPUs, the 70B plan at 1,024 GPUs and the 70B sweep over 256-4,096 GPUs. Prints each
# command's CPU time (user + sys, /usr/bin/time) and the sweep's ratio to the plan of the same
# binary and round, with the load before and after. On a shared machine compare the ratios and
# the binaries' figures within a round, not seconds across sessions.
# Usage: bench/search_speed_alternate.sh ROUNDS BINARY [BINARY...]
set -euo pipefail
if [ $# -lt 2 ]; then echo "usage: $0 ROUNDS BINARY [BINARY...]" >&2; exit 2; fi
rounds=$1; shift
cpu() {  # CPU seconds of one command (its output discarded)
  /usr/bin/time -f "%U %S" -o /tmp/scaleplan_alt.$$ "$@" > /dev/null 2>&1 || true
  awk '{printf "%.2f", $1 + $2}' /tmp/scaleplan_alt.$$
}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
for r in $(seq "$rounds"); do
  for b in "$@"; do
    big=$(cpu "$b" plan --model llama3.1-405b --cluster dgx-h100 --gpus 16384 --seq 8192 \
      --gbs 2048 --no-robustness -q)
    plan=$(cpu "$b" plan --model llama3-70b --cluster dgx-h100 --gpus 1024 --seq 8192 --gbs 512 -q)
    sweep=$(cpu "$b" sweep --model llama3-70b --cluster dgx-h100 --gpus 256:4096 --seq 8192 \
      --gbs 512 -q)
    awk -v r="$r" -v b="$b" -v x="$big" -v p="$plan" -v s="$sweep" 'BEGIN {
      printf "round %s %s: plan 405B %s s, plan 70B@1024 %s s, sweep 70B %s s CPU, sweep/plan %.2fx\n",
             r, b, x, p, s, s / p }'
  done
done
rm -f /tmp/scaleplan_alt.$$
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
