#!/usr/bin/env bash
# The figures of issue 45 (docs/planner.md, "Performance"): CPU time (user + sys, /usr/bin/time)
# and wall time of the table's commands, run one after another in this order, and the sweep's
# ratio to one `plan` at 1,024 GPUs taken in the same run. Timing on a shared machine is noisy:
# say the load (printed first and last) with the figures, and compare ratios.
# Usage: bench/search_speed_figures.sh [BINARY]   (default build/scaleplan)
set -euo pipefail
B=${1:-build/scaleplan}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
cpu() {  # prints "<cpu s> <wall s>" of one command (stdout and stderr discarded)
  /usr/bin/time -f "%U %S %e" -o /tmp/scaleplan_fig.$$ "$@" > /dev/null 2>&1 || true
  awk '{printf "%.2f %.2f\n", $1 + $2, $3}' /tmp/scaleplan_fig.$$
}
row() { local name=$1; shift; read -r c w < <(cpu "$@"); printf "%-34s %8s s CPU %8s s wall\n" "$name" "$c" "$w"; echo "$c" > "/tmp/scaleplan_fig_$name.$$"; }
# The process start alone: what every command pays before its work (dynamic loading; the CUDA,
# cuDNN, NCCL and MPI libraries are loadable modules since issue 45, docs/architecture.md).
row version "$B" --version
row dsv3-2048-fp8 "$B" plan --model deepseek-v3 --cluster dgx-h800 --gpus 2048 --seq 4096 \
  --gbs 15360 --fix dtype=fp8 --no-robustness -q
row l405b-16384 "$B" plan --model llama3.1-405b --cluster dgx-h100 --gpus 16384 --seq 8192 \
  --gbs 2048 --no-robustness -q
row plan70b-1024 "$B" plan --model llama3-70b --cluster dgx-h100 --gpus 1024 --seq 8192 --gbs 512 -q
row sweep70b-256-4096 "$B" sweep --model llama3-70b --cluster dgx-h100 --gpus 256:4096 --seq 8192 \
  --gbs 512 -q
row sim405b "$B" simulate --model llama3.1-405b --cluster dgx-h100 --seq 8192 \
  --layout tp=8,pp=16,dp=128,vpp=2,schedule=interleaved,gbs=2048 -q
row sim405b-trace "$B" simulate --model llama3.1-405b --cluster dgx-h100 --seq 8192 \
  --layout tp=8,pp=16,dp=128,vpp=2,schedule=interleaved,gbs=2048 -q --trace /tmp/scaleplan_fig.trace.json
awk -v s="$(cat /tmp/scaleplan_fig_sweep70b-256-4096.$$)" -v p="$(cat /tmp/scaleplan_fig_plan70b-1024.$$)" \
  'BEGIN {printf "sweep / plan at 1024 GPUs (CPU): %.2fx\n", s / p}'
rm -f /tmp/scaleplan_fig*.$$ /tmp/scaleplan_fig.trace.json
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
