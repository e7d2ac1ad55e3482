#!/usr/bin/env bash
# The GPU checks of docs/runtime.md ("Checking on a GPU") in one run of at most 8 minutes on one
# H100 or H200, everything written into one folder of at most 8 files.
#
# The GPU machine has the CUDA driver, nvcc 13, CMake, ninja, Python 3.12 and PyTorch 2.11 (whose
# pip packages carry cuBLASLt, cuDNN and NCCL) but none of the Debian packages scaleplan builds
# with, and nothing can be downloaded there. So the build is made on the CPU machine and carried:
#
#   scripts/gpu_check.sh --pack [BUILD]   CPU machine: packs BUILD (default build/, a CUDA build)
#                                         into gpu_kit/ (ignored by git; it travels with the
#                                         checkout): bin/scaleplan, bin/runtime_test, every shared
#                                         library they load that the GPU machine lacks, the
#                                         bundled data, env.sh
#   scripts/gpu_check.sh OUT              GPU machine: the checks below, into OUT
#   [SCALEPLAN_BUILD=DIR] scripts/gpu_check.sh --dry-run OUT
#                                         any machine: the checks' CPU parts: the kit or build is
#                                         there and runs, every command's arguments are accepted
#                                         (the GPU commands stop at "no CUDA device" or "no GPU
#                                         visible"), the
#                                         predictions and compare run for real, the reference
#                                         step's arguments and config are checked
#
# The checks (each bounded by `timeout`; a failing one is logged and the rest still run):
#   1. the GPU tests (runtime_test --gtest_filter='*GpuTest.*': every cuda kernel against the
#      host backend: GEMMs bf16 and fp8, attention cuDNN/unfused/reference, the memory-bound ops,
#      Transformer Engine's fp8 cast-transpose, AdamW; the collectives)                log.txt
#   2. the reference step in PyTorch, eager and compiled, profiler trace with shapes and memory
#      (examples/torch_reference/torch_step.py)                     torch_step.json, torch_trace.json.gz
#      and PyTorch's memory-bound kernels by implementation (memory_paths.py)  into log.txt
#      and the expert GEMMs at the MoE records' shapes (moe_gemm.py)         into log.txt
#      and Megatron-core's expert activations (moe_act.py): GPT-OSS's eager clamp, strided and
#      contiguous, and the compiled weighted gated units, kernels and bytes/s into log.txt
#      and Transformer Engine's split GEMMs under TP overlap at the dgxc records' shapes: whole,
#      chunks in a row, chunks on 3 streams, with copies beside (tp_split_gemm.py)  into log.txt
#   3. run --backend cuda of the same step                          run_cuda.json, run_trace.json.gz
#      (the SM clock and power every 100 ms during 1-3, into log.txt)
#   4. profile --backend cuda --quick                               profile_cuda_quick.json
#   5. the step predicted with the bundled hgx-h200 and with that profile    predictions.json
#   6. compare: each prediction against PyTorch's trace and against run's    compare.json
# Step: Llama-3-8B cut to 4 layers, seq 4096, tp=1,pp=1,dp=1,mbs=1,gbs=4, --framework torchtitan
# (the step of measured/h200-2026-11-28/README.md).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kit="$root/gpu_kit"

model="$root/examples/torch_reference/llama3-8b-4l.json"
step_args=(--model "$model" --seq 4096 --framework torchtitan --layout tp=1,pp=1,dp=1,mbs=1,gbs=4)

usage() {
  sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# ---- --pack: on the CPU machine ---------------------------------------------------------------
pack() {
  local build=${1:-$root/build}
  [ -x "$build/scaleplan" ] || { echo "gpu_check: $build/scaleplan: not built" >&2; exit 2; }
  [ -x "$build/tests/runtime_test" ] || { echo "gpu_check: $build/tests/runtime_test: not built" >&2; exit 2; }
  rm -rf "$kit"
  mkdir -p "$kit/bin" "$kit/lib" "$kit/data/hw_profiles"
  cp "$build/scaleplan" "$build/tests/runtime_test" "$kit/bin/"
  # The runtime's loadable modules (docs/architecture.md, "Loadable modules"), beside the binaries
  # where the loader looks first; the loop below carries what they link, too.
  cp "$build"/libscaleplan_*.so "$kit/bin/"
  strip "$kit/bin/"* 2>/dev/null || true
  # Libraries the GPU machine lacks. The CUDA libraries come from PyTorch's packages there
  # (cuBLASLt, cuDNN, NCCL under site-packages/nvidia/*/lib), except the small CUDA runtime,
  # carried so that its version is the build's (../shared/gpu/pack_build.sh, which ran on an H200
  # on 2026-11-28, does the same).
  for b in "$kit/bin/"*; do ldd "$b"; done | awk '/=> \//{print $1" "$3}' | sort -u |
    while read -r name path; do
      case "$name" in
        libc.so*|libm.so*|libpthread*|libdl*|librt*|ld-linux*|libgcc_s*|libstdc++*|libz.so*) ;;
        libcuda.so*|libnccl*|libcudnn*|libcublas*|libnvrtc*|libnvJitLink*) ;;
        *) cp -L "$path" "$kit/lib/$name" ;;
      esac
    done
  cp -r "$root/models" "$kit/data/"
  cp -r "$root/hw_profiles/bundled" "$kit/data/hw_profiles/"
  find "$kit/data" \( -name '*.cc' -o -name '*.h' -o -name CMakeLists.txt \) -delete
  cat > "$kit/env.sh" <<'ENV'
# sourced by scripts/gpu_check.sh on the GPU machine: the kit's libraries, then PyTorch's CUDA ones
k=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
sp=$(python3 -c "import site; print(site.getsitepackages()[0])" 2>/dev/null || true)
nv=$( [ -n "$sp" ] && find "$sp/nvidia" -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u | tr '\n' ':')
export LD_LIBRARY_PATH="$k/lib:${nv}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export SCALEPLAN_DATA_DIR="$k/data"
ENV
  du -sh "$kit" >&2
}

# ---- the checks -------------------------------------------------------------------------------
out="" dry=0
case "${1:-}" in
  --pack) shift; pack "$@"; exit 0 ;;
  --dry-run) dry=1; out=${2:-} ;;
  -h|--help|"") usage ;;
  -*) echo "gpu_check: unknown option $1" >&2; usage ;;
  *) out=$1 ;;
esac
[ -n "$out" ] || usage
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
log="$out/log.txt"
: > "$log"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0

note() { echo "=== $(date -u +%H:%M:%S) $*" | tee -a "$log" >&2; }
# step SECONDS NAME COMMAND...: runs COMMAND with a time limit, its output into the log (its
# standard output into $STDOUT when set).
step() {
  local limit=$1 name=$2; shift 2
  note "$name"
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" >>"${STDOUT:-$log}" 2>>"$log"
  local rc=$?
  echo "--- $name: rc=$rc, $((SECONDS - t0)) s" | tee -a "$log" >&2
  [ $rc -eq 0 ] || failures=$((failures + 1))
  return $rc
}
# expect_no_device NAME COMMAND...: (dry run) the command accepts its arguments and stops at the
# backend: its message says there is no CUDA device (run), no GPU visible (profile), or no cuda
# backend in this build.
expect_no_device() {
  local name=$1; shift
  note "$name (arguments only)"
  local msg
  msg=$("$@" 2>&1 >/dev/null)
  echo "$msg" >>"$log"
  if echo "$msg" | grep -q -e "no CUDA device" -e "no GPU visible" -e "built without the CUDA"; then
    echo "--- $name: arguments accepted, stopped at the backend" | tee -a "$log" >&2
  else
    echo "--- $name: FAILED: expected 'no CUDA device', got: $msg" | tee -a "$log" >&2
    failures=$((failures + 1))
  fi
}

if [ -n "${SCALEPLAN_BUILD:-}" ]; then
  bin=$SCALEPLAN_BUILD  # a build folder named by the caller (the ctest of the dry run)
elif [ -f "$kit/env.sh" ]; then
  # shellcheck disable=SC1091
  source "$kit/env.sh"
  bin="$kit/bin"
elif [ -x "$root/build/scaleplan" ]; then
  bin="$root/build"  # a CPU-machine build: dry runs and machines that have the build's libraries
else
  echo "gpu_check: no gpu_kit/ (scripts/gpu_check.sh --pack on the CPU machine) and no build/" >&2
  exit 2
fi
sp="$bin/scaleplan"
tests_bin="$bin/runtime_test"
[ -x "$tests_bin" ] || tests_bin="$bin/tests/runtime_test"

note "environment"
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv 2>&1 || true
  "$sp" --version 2>&1
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())" 2>&1 || true
  echo "kit: $bin"
} >>"$log"
"$sp" --version >/dev/null 2>&1 || { echo "gpu_check: $sp does not run (see $log)" >&2; exit 1; }

if [ $dry -eq 1 ]; then
  step 60 "reference step (dry run)" python3 "$root/examples/torch_reference/torch_step.py" \
    "$scratch/torch" --dry-run
  step 60 "memory-bound kernels (dry run)" python3 \
    "$root/examples/torch_reference/memory_paths.py" "$scratch/memory_paths.json" --dry-run
  step 60 "expert GEMMs (dry run)" python3 "$root/examples/torch_reference/moe_gemm.py" \
    "$scratch/moe_gemm.json" --dry-run
  step 60 "MoE activations (dry run)" python3 "$root/examples/torch_reference/moe_act.py" \
    "$scratch/moe_act.json" --dry-run
  step 60 "TE split GEMMs (dry run)" python3 "$root/examples/torch_reference/tp_split_gemm.py" \
    "$scratch/tp_split_gemm.json" --dry-run
  [ -x "$tests_bin" ] && step 60 "GPU tests (skip without a device)" "$tests_bin" \
    --gtest_filter='*GpuTest.*'
  expect_no_device "run --backend cuda" "$sp" run --backend cuda --cluster hgx-h200 "${step_args[@]}" \
    --steps 5 --warmup 2 --json --trace "$scratch/run_trace.json"
  expect_no_device "profile --backend cuda --quick" "$sp" profile --backend cuda --quick \
    --out "$scratch/profile.json"
else
  step 90 "GPU tests" "$tests_bin" --gtest_filter='*GpuTest.*'
  # The SM clock and power every 100 ms while the reference step and run execute: what a step's
  # own mix does to the clock under the 700 W limit (docs/hw_profiles.md, "GH100 under its 700 W
  # limit": the 1 s samples of 2026-11-28 could not resolve it). Appended to log.txt at the end.
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_throttle_reasons.active \
    --format=csv,noheader -lms 100 >"$scratch/clocks.csv" 2>&1 &
  smi=$!
  step 150 "reference step (PyTorch)" python3 "$root/examples/torch_reference/torch_step.py" "$out" \
    --config "$model" --seq 4096 --mbs 1 --gas 4 --steps 10
  # PyTorch's memory-bound kernels by implementation, and cuDNN attention as the step calls it,
  # under the same clock sampling (docs/runtime.md, "The reference step"); its JSON goes into
  # log.txt so that the folder keeps at most 8 files.
  step 60 "memory-bound kernels by implementation" python3 \
    "$root/examples/torch_reference/memory_paths.py" "$scratch/memory_paths.json"
  [ -f "$scratch/memory_paths.json" ] && { echo "=== memory_paths.json"
    cat "$scratch/memory_paths.json"; } >>"$log"
  # The expert GEMMs at the MoE records' shapes: grouped, per expert and dense (docs/simulator.md,
  # "Expert GEMMs"); its JSON into log.txt too.
  step 60 "expert GEMMs grouped, per expert, dense" python3 \
    "$root/examples/torch_reference/moe_gemm.py" "$scratch/moe_gemm.json"
  [ -f "$scratch/moe_gemm.json" ] && { echo "=== moe_gemm.json"
    cat "$scratch/moe_gemm.json"; } >>"$log"
  # Megatron-core's MoE activations as they run (docs/simulator.md, "Megatron-core's eager
  # kernels"): GPT-OSS's eager clamp on fc1's row-strided halves beside the same clamp of a
  # contiguous tensor, and the weighted gated units and the dense backward under torch.compile;
  # ~1-2 minutes, most of it Inductor's compiles. Its JSON is rewritten after every case, so what
  # it measured before a time-out comes back too; into log.txt.
  step 120 "MoE activations: clamp, compiled gated units" python3 \
    "$root/examples/torch_reference/moe_act.py" "$scratch/moe_act.json"
  [ -f "$scratch/moe_act.json" ] && { echo "=== moe_act.json"
    cat "$scratch/moe_act.json"; } >>"$log"
  # Transformer Engine's split GEMMs under TP overlap (docs/simulator.md, "TP communication
  # overlap"): at the dgxc records' per-GPU shapes, each GEMM whole, as its chunks in a row (the
  # simulator's charge), on 3 streams as TE issues them, and with copy-engine copies of each
  # chunk's rows beside; ~25-35 s (docs/runtime.md). JSON rewritten per GEMM, into log.txt.
  step 60 "TE split GEMMs: whole, chunks in a row, on 3 streams" python3 \
    "$root/examples/torch_reference/tp_split_gemm.py" "$scratch/tp_split_gemm.json"
  [ -f "$scratch/tp_split_gemm.json" ] && { echo "=== tp_split_gemm.json"
    cat "$scratch/tp_split_gemm.json"; } >>"$log"
  STDOUT="$out/run_cuda.json" step 90 "run --backend cuda" "$sp" run --backend cuda \
    --cluster hgx-h200 "${step_args[@]}" --steps 5 --warmup 2 --json \
    --trace "$scratch/run_trace.json"
  [ -f "$scratch/run_trace.json" ] && gzip -c "$scratch/run_trace.json" >"$out/run_trace.json.gz"
  kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null
  { echo "=== SM clock (MHz), power (W), event reasons every 100 ms during the steps above"
    cat "$scratch/clocks.csv"; } >>"$log"
  step 120 "profile --backend cuda --quick" "$sp" profile --backend cuda --quick \
    --out "$out/profile_cuda_quick.json" --json
fi

# Predictions: with the bundled profile, and with this GPU's own where one was measured.
profiles=(hgx-h200)
[ -f "$out/profile_cuda_quick.json" ] && profiles+=("$out/profile_cuda_quick.json")
for p in "${profiles[@]}"; do
  tag=$(basename "$p" .json)
  STDOUT="$scratch/sim_$tag.json" step 30 "simulate ($tag)" "$sp" simulate --cluster "$p" \
    "${step_args[@]}" --json --trace "$scratch/pred_$tag.json"
done
# compare: each prediction against PyTorch's trace and against run's trace (in a dry run the
# bundled prediction against itself: the arguments and the reading of a trace).
measured=()
[ -f "$out/torch_trace.json.gz" ] && measured+=("$out/torch_trace.json.gz")
[ -f "$scratch/run_trace.json" ] && measured+=("$scratch/run_trace.json")
[ $dry -eq 1 ] && measured+=("$scratch/pred_hgx-h200.json")
for p in "${profiles[@]}"; do
  tag=$(basename "$p" .json)
  for m in "${measured[@]}"; do
    mtag=$(basename "$m" | sed 's/\.json.*//')
    STDOUT="$scratch/cmp_${tag}__$mtag.json" step 30 "compare $tag vs $mtag" "$sp" compare \
      --predicted "$scratch/pred_$tag.json" --measured "$m" --json
  done
done
# One JSON each for the predictions and the comparisons, keyed by what they are.
python3 - "$scratch" "$out" <<'PY' >>"$log" 2>&1 || failures=$((failures + 1))
import glob, json, os, sys
scratch, out = sys.argv[1:]
def gather(prefix):
    d = {}
    for f in sorted(glob.glob(os.path.join(scratch, prefix + "*.json"))):
        key = os.path.basename(f)[len(prefix):-5]
        try:
            d[key] = json.load(open(f))
        except ValueError as e:
            d[key] = {"error": str(e)}
    return d
json.dump(gather("sim_"), open(os.path.join(out, "predictions.json"), "w"), indent=1)
json.dump(gather("cmp_"), open(os.path.join(out, "compare.json"), "w"), indent=1)
PY

note "done: $failures failed step(s); files:"
ls -la "$out" | tee -a "$log" >&2
[ "$(find "$out" -type f | wc -l)" -le 8 ] || { echo "gpu_check: more than 8 files in $out" >&2; exit 1; }
[ $failures -eq 0 ]
