#!/usr/bin/env python3
"""PyTorch's memory-bound kernels by implementation, at the shapes of the reference step.

The profile's `gpu.efficiency.memory` (docs/hw_profiles.md) gives the fraction of HBM peak each
implementation sustains: the vectorized element-wise loop, the unrolled dynamic-casting loop
(`needs_dynamic_casting` in aten/src/ATen/native/cuda/CUDALoops.cuh: bf16 -> fp32 copies, adds of
an fp32 and a bf16 operand), the row-reduction RMSNorm (`_fused_rms_norm`) and multi_tensor_apply
(fused AdamW). This times each on its own (CUDA events, median of `--reps` after warm-up; not a
training step, so that the figures are component measurements the step can be checked against)
and prints, per kernel, its bytes read plus written, its time and the bandwidth, as JSON.

    python3 memory_paths.py OUT.json [--reps 50] [--dry-run]

On a GPU session: run it beside torch_step.py (docs/runtime.md, "Checking on a GPU") and put the
`cast_loop` figure (and the others, if they differ from the profile's) into the profile with this
file as the source.
"""
import argparse
import json
import statistics
import sys


def kernels(torch, dev):
    """(name, implementation, bytes, fn) at the reference step's shapes (Llama-3-8B, 4096 tokens)."""
    f32, bf16 = torch.float32, torch.bfloat16
    out = []
    for rows, cols in ((4096, 4096), (14336, 4096), (4096, 128256)):
        n = rows * cols
        a16 = torch.randn(rows, cols, device=dev, dtype=bf16)
        a32 = torch.randn(rows, cols, device=dev, dtype=f32)
        b32 = torch.randn(rows, cols, device=dev, dtype=f32)
        tag = f"{rows}x{cols}"
        out.append((f"copy_bf16_to_fp32_{tag}", "cast_loop", 6 * n, lambda a=a16: a.float()))
        out.append((f"copy_fp32_to_bf16_{tag}", "vectorized", 6 * n, lambda a=a32: a.bfloat16()))
        out.append((f"add_fp32_{tag}", "vectorized", 12 * n, lambda a=a32, b=b32: a.add_(b)))
        out.append((f"add_fp32_bf16_{tag}", "cast_loop", 10 * n, lambda a=a32, b=a16: a + b))
    x = torch.randn(4096, 4096, device=dev, dtype=f32, requires_grad=True)
    w = torch.ones(4096, device=dev, dtype=f32, requires_grad=True)
    g = torch.randn(4096, 4096, device=dev, dtype=f32)
    rms = lambda: torch.nn.functional.rms_norm(x, (4096,), w, 1e-5)  # noqa: E731
    out.append(("rms_norm_fwd_fp32_4096x4096", "row_norm", 8 * x.numel(), rms))
    out.append(("rms_norm_fwd_bwd_fp32_4096x4096", "row_norm", (8 + 12) * x.numel(),
                lambda: torch.autograd.grad(rms(), (x, w), g)))
    ps = [torch.randn(218_103_808 // 8, device=dev) for _ in range(8)]
    for p in ps:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(ps, lr=1e-4, fused=True)
    out.append(("adamw_fused_fp32_218M", "multi_tensor", 28 * 218_103_808, opt.step))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--dry-run", action="store_true", help="check the arguments, no PyTorch")
    a = ap.parse_args()
    if a.reps < 3:
        sys.exit("memory_paths.py: --reps: at least 3, got %d" % a.reps)
    if a.dry_run:
        print(json.dumps({"out": a.out, "reps": a.reps}))
        return
    import torch
    dev = torch.device("cuda")
    rows = []
    for name, path, nbytes, fn in kernels(torch, dev):
        for _ in range(5):
            fn()
        times = []
        for _ in range(a.reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) / 1e3)
        t = statistics.median(times)
        rows.append({"kernel": name, "implementation": path, "bytes": nbytes, "median_s": t,
                     "min_s": min(times), "max_s": max(times), "bytes_per_s": nbytes / t})
        print(json.dumps(rows[-1]), flush=True)
    result = {"card": torch.cuda.get_device_name(), "torch": torch.__version__,
              "cuda": torch.version.cuda, "kernels": rows}
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
