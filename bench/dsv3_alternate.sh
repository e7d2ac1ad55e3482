#!/usr/bin/env bash
# The DeepSeek-V3 search of issue 45 (docs/planner.md, "Issue 45's figures", sessions 10 and 11)
# run alternately on two binaries, each pair one right after the other, so that both meet the same
# load on a shared machine: prints CPU (user + sys) and wall time per run, the load around it, and
# each pair's ratios (CPU, wall) and how many cores each kept busy on average (CPU / wall: the
# wall time of issue 45's aim needs both of a 2-core machine's, session 12).
# Usage: [BEFORE_DATA=DIR] [AFTER_DATA=DIR] bench/dsv3_alternate.sh BEFORE AFTER [ROUNDS=2] [ARGS...]
# BEFORE_DATA / AFTER_DATA: the SCALEPLAN_DATA_DIR each binary reads its bundled data from (a
# checkout of its own commit; unset: the source tree it was built from). ARGS go to `plan` (e.g.
# --threads 1).
set -euo pipefail
before=$1 after=$2 rounds=${3:-2}
shift $(($# < 3 ? $# : 3))
t=$(mktemp)
trap 'rm -f "$t"' EXIT
run() {  # BINARY DATA: prints "<cpu s> <wall s>"
  env ${2:+SCALEPLAN_DATA_DIR="$2"} /usr/bin/time -f "%U %S %e" -o "$t" "$1" plan \
    --model deepseek-v3 --cluster dgx-h800 --gpus 2048 --seq 4096 --gbs 15360 --fix dtype=fp8 \
    --no-robustness -q --json "${args[@]}" > /dev/null 2>&1
  awk '{printf "%.2f %.1f\n", $1 + $2, $3}' "$t"
}
args=("$@")
for ((r = 1; r <= rounds; ++r)); do
  l0=$(cut -d' ' -f1 /proc/loadavg)
  read -r cb wb < <(run "$before" "${BEFORE_DATA:-}")
  read -r ca wa < <(run "$after" "${AFTER_DATA:-}")
  echo "round $r (load $l0 -> $(cut -d' ' -f1 /proc/loadavg)): before $cb s CPU ($wb s wall)," \
    "after $ca s CPU ($wa s wall), after/before CPU" \
    "$(awk -v a="$ca" -v b="$cb" 'BEGIN {printf "%.2f", a / b}'), wall" \
    "$(awk -v a="$wa" -v b="$wb" 'BEGIN {printf "%.2f", a / b}'), cores busy (CPU / wall)" \
    "$(awk -v c="$cb" -v w="$wb" 'BEGIN {printf "%.2f", c / w}') / $(awk -v c="$ca" -v w="$wa" 'BEGIN {printf "%.2f", c / w}')"
done
