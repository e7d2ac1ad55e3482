#!/usr/bin/env python3
"""GEMM rate and SM clock on constant against varied operands, under the GPU's power limit.

The executor of `scaleplan run` used to fill every weight with one value (0.01). A tensor-core
GEMM whose operand toggles few bits draws less power, so under a power cap it keeps a higher
clock. This times the reference step's largest GEMM shapes (Llama-3-8B: [4096, 4096] x
[4096, 14336] and the LM head [4096, 4096] x [4096, 128256], bf16) back to back for --seconds
each, with B constant (every element 0.01), uniform in [0.005, 0.015) (the executor's weights
of e139be4), uniform in [-0.03, 0.03) (its weights since then) and normal with sigma 0.02 (a
trained model's initialization), A uniform in [-0.5, 0.5] in each, and samples the SM clock and
power with NVML every 50 ms while it runs. Prints JSON.

    python3 gemm_power.py OUT.json [--seconds 4] [--dry-run]
"""
import argparse
import json
import sys
import threading
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    if a.seconds <= 0:
        ap.error(f"--seconds: must be positive, got {a.seconds}")
    if a.dry_run:
        print(f"gemm_power.py: 2 shapes x 4 fills of B, {a.seconds} s each, into {a.out}")
        return 0
    import pynvml
    import torch
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    res = {"card": torch.cuda.get_device_name(), "torch": torch.__version__, "cases": []}
    for m, k, n in ((4096, 4096, 14336), (4096, 4096, 128256)):
        x = torch.rand(m, k, device="cuda", dtype=torch.bfloat16) - 0.5
        for fill in ("constant", "varied", "signed", "normal"):
            if fill == "constant":
                w = torch.full((k, n), 0.01, device="cuda", dtype=torch.bfloat16)
            elif fill == "varied":
                w = 0.005 + 0.01 * torch.rand(k, n, device="cuda", dtype=torch.bfloat16)
            elif fill == "signed":
                w = 0.06 * (torch.rand(k, n, device="cuda", dtype=torch.bfloat16) - 0.5)
            else:
                w = 0.02 * torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
            torch.cuda.synchronize()
            time.sleep(1.0)  # let the clock recover between cases
            samples, stop = [], threading.Event()

            def sample():
                while not stop.is_set():
                    samples.append((pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                                    pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0))
                    time.sleep(0.05)
            t = threading.Thread(target=sample)
            t.start()
            t0, calls, rates = time.time(), 0, []
            while time.time() - t0 < a.seconds:
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                for _ in range(20):
                    torch.mm(x, w)
                e.record()
                e.synchronize()
                rates.append(20 * 2.0 * m * n * k / (s.elapsed_time(e) * 1e-3) / 1e12)
                calls += 20
            stop.set()
            t.join()
            half = samples[len(samples) // 2:]  # the second half: the clock has settled
            clk = sorted(c for c, _ in half)
            pw = sorted(p for _, p in half)
            r2 = sorted(rates[len(rates) // 2:])
            res["cases"].append({"m": m, "k": k, "n": n, "b": fill, "calls": calls,
                                 "tflops_median_second_half": r2[len(r2) // 2],
                                 "sm_mhz_median_second_half": clk[len(clk) // 2],
                                 "power_w_median_second_half": pw[len(pw) // 2]})
            print(json.dumps(res["cases"][-1]), file=sys.stderr)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
