set -o pipefail; source gpu_kit/env.sh; o=$OUT/g2; mkdir -p $o; M=examples/torch_reference/llama3-8b-4l.json
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv,noheader -lms 100 > $o/clocks.csv 2>&1 & smi=$!
timeout 60 gpu_kit/bin/runtime_test --gtest_filter='*GpuFp8Gemm*:*GpuGather*:*GpuCollectives*' > $o/tests.txt 2>&1; echo "tests rc=$?"
timeout 90 gpu_kit/bin/scaleplan run --backend cuda --cluster hgx-h200 --model $M --seq 4096 --framework torchtitan --layout tp=1,pp=1,dp=1,mbs=1,gbs=4 --steps 5 --warmup 2 --json --trace $o/run_trace.json > $o/run_cuda.json 2> $o/run_log.txt; echo "run rc=$?"; gzip $o/run_trace.json
timeout 90 gpu_kit/bin/scaleplan run --backend cuda --cluster hgx-h200 --model $M --seq 4096 --framework torchtitan --layout tp=1,pp=1,dp=1,mbs=1,gbs=4,dtype=fp8 --steps 5 --warmup 2 --json > $o/run_cuda_fp8.json 2>> $o/run_log.txt; echo "run fp8 rc=$?"
PYTHONUNBUFFERED=1 timeout 60 python3 examples/torch_reference/memory_paths.py $o/memory_paths.json > $o/mp_log.txt 2>&1; echo "mp rc=$?"
kill $smi; ls -la $o; tail -3 $o/run_log.txt; grep -E "OK|FAILED" $o/tests.txt
