#!/usr/bin/env python3
"""PyTorch's memory-bound kernels by implementation, at the shapes of the reference step.

The profile's `gpu.efficiency.memory` (docs/hw_profiles.md) gives the fraction of HBM peak each
implementation sustains: the vectorized element-wise loop, the unrolled dynamic-casting loop
(`needs_dynamic_casting` in aten/src/ATen/native/cuda/CUDALoops.cuh: bf16 -> fp32 copies, adds of
an fp32 and a bf16 operand), the row-reduction RMSNorm (`_fused_rms_norm`) and multi_tensor_apply
(fused AdamW). This times each on its own (CUDA events, median of `--reps` after warm-up; not a
training step, so that the figures are component measurements the step can be checked against)
and prints, per kernel, its bytes read plus written, its time and the bandwidth, as JSON. It also
times torchtitan's eager extras whose figures are pending (RoPE's strided complex product,
repeat_kv's copy and sum, the embedding's dense backward) and cuDNN's attention as the step calls
it (one sequence per call on transpose(1, 2) views) beside the four-sequence call of the
profile's curve.

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
    # torchtitan's eager extras (docs/simulator.md, "Memory-bound kernels by implementation", the
    # kernels still timed at a pending figure): RoPE's complex64 product with freqs_cis broadcast
    # over the heads (the legacy strided elementwise_kernel<128, 2>), repeat_kv's copy of an
    # expanded K (elementwise_kernel<128, 4> over a stride-0 dimension) and its backward's sum
    # over the repeats (reduce_kernel), the embedding's dense backward (sort and segment sums) of
    # an fp32 gradient.
    for heads in (32, 8):
        q = torch.randn(1, 4096, heads, 64, device=dev, dtype=torch.complex64)
        fc = torch.polar(torch.ones(4096, 64, device=dev), torch.randn(4096, 64, device=dev))
        out.append((f"rope_complex_mul_{heads}h", "strided", 16 * q.numel(),
                    lambda q=q, fc=fc: q * fc[None, :, None, :]))
    k = torch.randn(1, 4096, 8, 128, device=dev, dtype=bf16)
    out.append(("repeat_kv_copy_8to32h", "strided", 2 * k.numel() * (1 + 4),
                lambda: k[:, :, :, None, :].expand(1, 4096, 8, 4, 128).reshape(1, 4096, 32, 128)))
    gk = torch.randn(1, 4096, 8, 4, 128, device=dev, dtype=bf16)
    out.append(("repeat_kv_bwd_sum_32to8h", "reduce", 2 * gk.numel() * (1 + 0.25),
                lambda: gk.sum(3)))
    ids = torch.randint(0, 128256, (4096,), device=dev)
    ge = torch.randn(4096, 4096, device=dev, dtype=f32)
    out.append(("embedding_dense_backward_fp32", "segment_sum", 4 * 128256 * 4096 + 16 * ge.numel(),
                lambda: torch.ops.aten.embedding_dense_backward(ge, ids, 128256, -1, False)))
    ps = [torch.randn(218_103_808 // 8, device=dev) for _ in range(8)]
    for p in ps:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(ps, lr=1e-4, fused=True)
    out.append(("adamw_fused_fp32_218M", "multi_tensor", 28 * 218_103_808, opt.step))
    return out


def attention_calls(torch, dev):
    """(name, FLOPs, fn): cuDNN SDPA as the reference step calls it, one 4096-token sequence per
    call on q/k/v given as transpose(1, 2) views of [1, 4096, 32, 128], against a contiguous
    [1, 32, 4096, 128] call and the four-sequence call the profile's curve was measured with."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    F = torch.nn.functional
    out = []
    for name, b, views in (("b1_transposed_views", 1, True), ("b1_contiguous", 1, False),
                           ("b4_contiguous", 4, False)):
        shape = (b, 4096, 32, 128) if views else (b, 32, 4096, 128)
        q, k, v = (torch.randn(*shape, device=dev, dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        # q, k, v bound now (default arguments): a closure would see the last loop's tensors
        # (the run of 2026-11-30 timed the first call on the four-sequence tensors that way).
        args = (lambda q=q, k=k, v=v: (q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))) \
            if views else (lambda q=q, k=k, v=v: (q, k, v))
        flops = 4 * b * 32 * 4096 * 4096 * 128 / 2  # causal

        def fwd(args=args):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(*args(), is_causal=True)
        o = fwd()
        go = torch.randn_like(o)
        out.append((f"sdpa_cudnn_fwd_{name}", flops, fwd))
        out.append((f"sdpa_cudnn_fwdbwd_{name}", 3.5 * flops,
                    lambda fwd=fwd, go=go, q=q, k=k, v=v:
                    torch.autograd.grad(fwd(), (q, k, v), go)))
    return out


def timed(torch, fn, reps):
    for _ in range(5):
        fn()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    return statistics.median(times), min(times), max(times)


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
        t, lo, hi = timed(torch, fn, a.reps)
        rows.append({"kernel": name, "implementation": path, "bytes": nbytes, "median_s": t,
                     "min_s": lo, "max_s": hi, "bytes_per_s": nbytes / t})
        print(json.dumps(rows[-1]), flush=True)
    for name, flops, fn in attention_calls(torch, dev):
        t, lo, hi = timed(torch, fn, a.reps)
        rows.append({"kernel": name, "implementation": "attention", "flops": flops,
                     "median_s": t, "min_s": lo, "max_s": hi, "flops_per_s": flops / t})
        print(json.dumps(rows[-1]), flush=True)
    result = {"card": torch.cuda.get_device_name(), "torch": torch.__version__,
              "cuda": torch.version.cuda, "kernels": rows}
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
