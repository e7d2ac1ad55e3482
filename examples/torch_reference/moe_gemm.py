#!/usr/bin/env python3
"""Expert GEMMs at the MoE records' shapes: grouped, one GEMM per expert, and dense, on one GPU.

scaleplan times a rank's expert GEMMs as one grouped GEMM whose tiles fill the SMs in waves at the
dense GEMM rate (calibrate/roofline.cc, `quantization_efficiency` with `batch` = local experts).
This measures what that stands for, at the expert shapes of the MoE records (GPT-OSS-120B,
Qwen3-30B-A3B, DeepSeek-V3; their HF configs under models/), for a range of tokens per expert:

  grouped   torch._grouped_mm over the local experts (CUTLASS's grouped GEMM on Hopper), the
            tokens of each expert padded to 16 rows as torchtitan pads them
  loop      one torch.mm per expert, one after another (the path of a GroupedLinear that runs
            its GEMMs one by one)
  dense     one GEMM with all the routed tokens against one expert's weight: the same FLOPs at
            the dense rate, the ideal the grouped GEMM is modelled as

each forward fc1 (tokens x hidden -> 2 x ffn, gate and up fused) and fc2 (ffn -> hidden), bf16,
balanced (every expert the same tokens) and routed (tokens per expert from top-k of random
logits, as an untrained router spreads them). Times are CUDA-event medians after warm-up; the
output is JSON with the TFLOP/s of each.

Then one whole MoE layer per model, forward and backward, all experts on the GPU, one
micro-batch of --tokens tokens, written the way torchtitan writes it with grouped GEMMs (router
linear, fp32 softmax, top-k, sort by expert, gather into 16-row-padded groups, grouped fc1,
SwiGLU, grouped fc2, weighted scatter-add back): its time against the expert GEMMs' share, and
its kernels by name from the PyTorch profiler (time per kernel name, the 25 largest), so that
the MoE layer's non-GEMM kernels (permutation, router, scatter) are measured, not guessed.

    python3 moe_gemm.py OUT.json [--reps 20] [--tokens 4096] [--dry-run]
"""
import argparse
import json
import sys

import memory_paths  # beside this file: its CUDA-event timer

# (model, hidden, expert ffn, experts, top-k, local experts on one rank)
SHAPES = [
    ("gpt-oss-120b", 2880, 2880, 128, 4, (16, 32)),
    ("qwen3-30b-a3b", 2048, 768, 128, 8, (16, 32)),
    ("deepseek-v3", 7168, 2048, 256, 8, (8, 32)),
]
TOKENS_PER_EXPERT = (64, 128, 256, 512, 1024, 2048)
ALIGN = 16


def timed(torch, fn, reps):
    """The median seconds of fn over reps calls after warm-up (memory_paths.py's timer)."""
    return memory_paths.timed(torch, fn, reps)[0]


def routed_counts(torch, experts, topk, local, tokens_per_expert, gen):
    """Tokens per local expert when tokens are routed by top-k of random logits."""
    tokens = tokens_per_expert * experts // topk
    logits = torch.randn(tokens, experts, generator=gen)
    idx = logits.topk(topk, dim=1).indices.flatten()
    counts = torch.bincount(idx, minlength=experts)[:local]
    return [int(c) for c in counts]


def case(torch, hidden, ffn, counts, reps):
    dev, bf16 = "cuda", torch.bfloat16
    padded = [(c + ALIGN - 1) // ALIGN * ALIGN for c in counts]
    rows = sum(padded)
    e = len(counts)
    res = {"counts": counts, "rows_padded": rows}
    useful = sum(counts)
    for name, k, n in (("fc1", hidden, 2 * ffn), ("fc2", ffn, hidden)):
        x = torch.randn(rows, k, device=dev, dtype=bf16)
        w = torch.randn(e, n, k, device=dev, dtype=bf16)  # nn.Linear layout, used transposed
        wt = w.transpose(-2, -1)
        flops = 2.0 * useful * k * n
        offs = torch.tensor(padded, device=dev, dtype=torch.int32).cumsum(0, dtype=torch.int32)
        r = {}
        try:
            r["grouped_s"] = timed(torch, lambda: torch._grouped_mm(x, wt, offs=offs), reps)
        except Exception as ex:  # noqa: BLE001 - the figure is left out, the reason kept
            r["grouped_error"] = str(ex)[:200]
        starts = [0]
        for p in padded:
            starts.append(starts[-1] + p)
        views = [(x[starts[i]:starts[i] + counts[i]], wt[i]) for i in range(e) if counts[i] > 0]
        r["loop_s"] = timed(torch, lambda: [torch.mm(a, b) for a, b in views], reps)
        xd = x[:useful]
        r["dense_s"] = timed(torch, lambda: torch.mm(xd, wt[0]), reps)
        for key in ("grouped", "loop", "dense"):
            if key + "_s" in r:
                r[key + "_tflops"] = round(flops / r[key + "_s"] / 1e12, 1)
        res[name] = r
        del x, w
    return res


def moe_layer(torch, x, router_w, w1t, w2t, topk):
    """One MoE layer as torchtitan runs it with grouped GEMMs (bf16; x is tokens x hidden)."""
    t, _ = x.shape
    e = w1t.shape[0]
    scores = torch.softmax((x @ router_w.t()).float(), dim=-1)
    top_s, top_i = scores.topk(topk, dim=-1)
    flat = top_i.flatten()
    order = flat.argsort(stable=True)
    counts = torch.bincount(flat, minlength=e)
    padded = (counts + ALIGN - 1) // ALIGN * ALIGN
    ends = padded.cumsum(0)
    starts = ends - padded
    sorted_e = flat[order]
    rank_in_e = torch.arange(order.numel(), device=x.device) - (counts.cumsum(0) - counts)[sorted_e]
    dst = starts[sorted_e] + rank_in_e
    tok = order // topk
    rows = int(ends[-1])
    xs = x.new_zeros(rows, x.shape[1]).index_copy(0, dst, x[tok])
    offs = ends.to(torch.int32)
    h = torch._grouped_mm(xs, w1t, offs=offs)
    gate, up = h.chunk(2, dim=-1)
    y = torch._grouped_mm(torch.nn.functional.silu(gate) * up, w2t, offs=offs)
    w = top_s.flatten()[order].to(y.dtype).unsqueeze(1)
    return x.new_zeros(x.shape).index_add(0, tok, y[dst] * w)


def layer_case(torch, hidden, ffn, experts, topk, tokens, reps):
    dev, bf16 = "cuda", torch.bfloat16
    x = torch.randn(tokens, hidden, device=dev, dtype=bf16, requires_grad=True)
    router = (torch.randn(experts, hidden, device=dev, dtype=bf16) * 0.02).requires_grad_()
    w1 = (torch.randn(experts, 2 * ffn, hidden, device=dev, dtype=bf16) * 0.02).requires_grad_()
    w2 = (torch.randn(experts, hidden, ffn, device=dev, dtype=bf16) * 0.02).requires_grad_()
    g = torch.randn(tokens, hidden, device=dev, dtype=bf16)

    def step():
        out = moe_layer(torch, x, router, w1.transpose(-2, -1), w2.transpose(-2, -1), topk)
        out.backward(g)

    fwd = timed(torch, lambda: moe_layer(torch, x, router, w1.transpose(-2, -1),
                                         w2.transpose(-2, -1), topk), reps)
    both = timed(torch, step, reps)
    routed = tokens * topk
    gemm_flops = 3 * 2.0 * routed * hidden * 3 * ffn  # fc1 (2 ffn) + fc2 (ffn), forward + 2 backward
    res = {"tokens": tokens, "forward_s": fwd, "forward_backward_s": both,
           "expert_gemm_flops": gemm_flops,
           "expert_gemm_tflops_if_all_time": round(gemm_flops / both / 1e12, 1)}
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
    kern = {}
    for ev in prof.events():
        if str(getattr(ev, "device_type", "")).endswith("CUDA"):
            t = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0)
            kern[ev.name] = kern.get(ev.name, 0.0) + t / 3 * 1e-6
    top = sorted(kern.items(), key=lambda kv: -kv[1])[:25]
    res["kernels_s_per_step"] = [[n[:160], round(v, 7)] for n, v in top]
    res["kernels_total_s_per_step"] = round(sum(kern.values()), 6)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--tokens", type=int, default=4096, help="tokens of the MoE layer's micro-batch")
    ap.add_argument("--dry-run", action="store_true", help="check the arguments, no PyTorch")
    a = ap.parse_args()
    for k in ("reps", "tokens"):
        if getattr(a, k) <= 0:
            ap.error(f"--{k}: must be positive, got {getattr(a, k)}")
    plan = [(m, h, f, e, k, loc, t) for m, h, f, e, k, locs in SHAPES for loc in locs
            for t in TOKENS_PER_EXPERT]
    if a.dry_run:
        print(f"moe_gemm.py: {len(plan)} cases x 2 routings x fc1/fc2, {len(SHAPES)} MoE layers "
              f"of {a.tokens} tokens into {a.out}")
        return 0
    import torch
    gen = torch.Generator().manual_seed(0)
    out = {"card": torch.cuda.get_device_name(), "torch": torch.__version__, "align": ALIGN,
           "cases": []}
    for m, h, f, e, k, loc, t in plan:
        for routing in ("balanced", "routed"):
            counts = [t] * loc if routing == "balanced" else routed_counts(torch, e, k, loc, t, gen)
            r = case(torch, h, f, counts, a.reps)
            r.update(model=m, hidden=h, ffn=f, local_experts=loc, tokens_per_expert=t,
                     routing=routing)
            out["cases"].append(r)
            print(m, loc, t, routing, {n: r[n].get("grouped_tflops") for n in ("fc1", "fc2")},
                  file=sys.stderr)
    out["layers"] = []
    for m, h, f, e, k, _ in SHAPES:
        try:
            r = layer_case(torch, h, f, e, k, a.tokens, a.reps)
        except Exception as ex:  # noqa: BLE001 - the layer is left out, the reason kept
            r = {"error": f"{type(ex).__name__}: {str(ex)[:300]}"}
        r.update(model=m, hidden=h, ffn=f, experts=e, topk=k)
        out["layers"].append(r)
        print(m, "layer", r.get("forward_backward_s"), r.get("error", ""), file=sys.stderr)
        torch.cuda.empty_cache()
    with open(a.out, "w") as fh:
        json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
