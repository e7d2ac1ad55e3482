#!/usr/bin/env python3
"""Megatron-core's MoE expert activations as they run: GPT-OSS's eager clamp, the compiled units.

The simulator prices what Megatron-core (Megatron-LM b0cc2706dd = core_r0.16.0) runs between an
expert's fc1 and fc2 at bytes per element and a memory-bound rate (docs/simulator.md,
"Megatron-core's eager kernels"). Two of those rates have no measurement (issue 43); this takes
them on one GPU, bf16, at GPT-OSS-120B's expert shape (rows = mbs x seq x top-k tokens per rank,
65,536 for mbs 4, seq 4096, top-4; fc1's output 2 x intermediate_size = 5,760 wide, from the
model's config) and at a smaller row count:

  clamp     the clamp of `weighted_bias_quick_geglu_impl` (megatron/core/fusions/
            fused_bias_geglu.py:424-432): `chunk` of fc1's output into two row-strided halves,
            `clamp(max=v)` and `clamp(-v, v)`, `torch.cat`, eager; each op alone, beside the same
            clamps of a contiguous copy (PyTorch's vectorized loop), and the block's autograd
            backward (`clamp_backward`'s comparisons and `where`s, the chunk's cat) as a whole
            and op by op. Bytes as the simulator charges them: forward 8 B and backward 15 B per
            element of fc1's output.
  compiled  `weighted_swiglu` / `weighted_swiglu_back` (fused_bias_swiglu.py:44-48, 89-97),
            `weighted_quick_geglu` / `weighted_quick_geglu_back` (fused_bias_geglu.py:184-252) and
            the dense `swiglu_back` (fused_bias_swiglu.py:54-69, what `bias_swiglu_impl` runs
            without a bias) under `torch.compile`, which is Megatron's `jit_fuser` on PyTorch >=
            2.2 (megatron/core/jit.py:16-33); copied below from the pinned source. Per call: the
            kernels (profiler names, launches, device time) and the rate against the bytes the
            simulator charges per element of the activation's output: forward 6 B, the input's
            gradient 10 B (`moe.expert.act.bwd`), the probabilities' gradient 6 B
            (`moe.expert.act.probs_grad`); the dense backward 10 B. Compiled with static shapes
            (a fresh compile per shape, Megatron's first steps) and, at the large shape, with the
            row dimension dynamic (Dynamo's automatic dynamic shapes recompile that way once the
            rows change, as routed token counts do in Megatron's later steps).
  as_run    `weighted_bias_quick_geglu_impl` itself (fused_bias_geglu.py:303-347, 410-442, no
            bias as `TEGroupedMLP` calls it, experts.py:698-706), forward and backward through
            autograd: the eager clamp, the host-to-device copy of `linear_offset` and the compiled
            kernels in one profile.

Times are CUDA-event medians after warm-up (memory_paths.py's timer); every compiled function is
checked against its eager run outside the timed region. The JSON is rewritten after each case, so
a run stopped by its time limit keeps what it measured.

    python3 moe_act.py OUT.json [--model CONFIG] [--dense-model CONFIG] [--mbs 4] [--seq 4096]
                       [--small-rows 8192] [--reps 20] [--no-dynamic] [--dry-run]
"""

import argparse
import functools
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PRESETS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "models", "presets")
PIN = "NVIDIA/Megatron-LM b0cc2706dd (core_r0.16.0)"
# Megatron-Bridge v0.3.1 src/megatron/bridge/models/gpt_oss/gpt_oss_bridge.py:88-91 maps GPT-OSS's
# `swiglu_limit` to `activation_func_clamp_value` and sets `glu_linear_offset = 1.0`.
GLU_LINEAR_OFFSET = 1.0

# Bytes the simulator charges, per element of fc1's output [rows, 2 ffn] for the clamp and per
# element of the activation's output [rows, ffn] for the compiled units (docs/simulator.md,
# "Megatron-core's eager kernels"); each op's own bytes are in clamp_cases() below.
CLAMP_FWD_B = 8
CLAMP_BWD_B = 15
ACT_FWD_B = 6
ACT_BWD_B = 10
PROBS_GRAD_B = 6


def plan(a):
    """The shapes, from the models' configs; no PyTorch."""
    with open(a.model) as f:
        moe = json.load(f)
    with open(a.dense_model) as f:
        dense = json.load(f)
    for key in ("intermediate_size", "num_experts_per_tok", "swiglu_limit"):
        if key not in moe:
            raise ValueError(f"{a.model}: no {key!r}: not a clamped MoE config like GPT-OSS's")
    if "intermediate_size" not in dense:
        raise ValueError(f"{a.dense_model}: no 'intermediate_size'")
    ffn, topk = int(moe["intermediate_size"]), int(moe["num_experts_per_tok"])
    rows = a.mbs * a.seq * topk  # every token of the rank's micro-batch routed to top-k experts
    if not 0 < a.small_rows < rows:
        raise ValueError(f"--small-rows: must be in (0, {rows}), got {a.small_rows}")
    return {
        "megatron": PIN,
        "model": os.path.basename(a.model),
        "ffn": ffn,
        "fc1_cols": 2 * ffn,
        "rows": [rows, a.small_rows],
        "clamp_value": float(moe["swiglu_limit"]),
        "linear_offset": GLU_LINEAR_OFFSET,
        "dense_model": os.path.basename(a.dense_model),
        "dense_rows": a.mbs * a.seq,
        "dense_ffn": int(dense["intermediate_size"]),
        "reps": a.reps,
        "dynamic": not a.no_dynamic,
        "charged_bytes_per_element": {
            "clamp_fwd_per_fc1_elem": CLAMP_FWD_B,
            "clamp_bwd_per_fc1_elem": CLAMP_BWD_B,
            "act_fwd_per_out_elem": ACT_FWD_B,
            "act_bwd_per_out_elem": ACT_BWD_B,
            "probs_grad_per_out_elem": PROBS_GRAD_B,
            "dense_act_bwd_per_out_elem": ACT_BWD_B,
        },
    }


# The functions below (megatron_functions, megatron_impl) are copied from Megatron-LM at
# b0cc2706dd, megatron/core/fusions/fused_bias_swiglu.py and fused_bias_geglu.py, under its
# LICENSE:
#
# Copyright (c) 2019-2025, NVIDIA CORPORATION. All rights reserved.
# Redistribution and use in source and binary forms, with or without
# modification, are permitted provided that the following conditions
# are met:
#  * Redistributions of source code must retain the above copyright
#    notice, this list of conditions and the following disclaimer.
#  * Redistributions in binary form must reproduce the above copyright
#    notice, this list of conditions and the following disclaimer in the
#    documentation and/or other materials provided with the distribution.
#  * Neither the name of NVIDIA CORPORATION nor the names of its
#    contributors may be used to endorse or promote products derived
#    from this software without specific prior written permission.
#
# THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS ``AS IS'' AND ANY
# EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE
# IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR
# PURPOSE ARE DISCLAIMED.  IN NO EVENT SHALL THE COPYRIGHT OWNER OR
# CONTRIBUTORS BE LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL,
# EXEMPLARY, OR CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT LIMITED TO,
# PROCUREMENT OF SUBSTITUTE GOODS OR SERVICES; LOSS OF USE, DATA, OR
# PROFITS; OR BUSINESS INTERRUPTION) HOWEVER CAUSED AND ON ANY THEORY
# OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY, OR TORT
# (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE
# OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.


def megatron_functions(torch):
    """Megatron-core's activation functions, copied from the pinned source (bodies unchanged;
    type annotations and docstrings left out; `jit_fuser` left off here and applied by the
    caller as torch.compile, which is what it is on PyTorch >= 2.2, megatron/core/jit.py:16-33)."""
    F = torch.nn.functional

    # fused_bias_swiglu.py:15-26
    def swiglu(y):
        y_1, y_2 = torch.chunk(y, 2, -1)
        return F.silu(y_1) * y_2

    # fused_bias_swiglu.py:44-48
    def weighted_swiglu(y, weights):
        dtype = y.dtype
        res = swiglu(y) * weights
        return res.to(dtype)

    # fused_bias_swiglu.py:54-69
    def swiglu_back(g, y):
        y_1, y_2 = torch.chunk(y, 2, -1)
        return torch.cat(
            (g * torch.sigmoid(y_1) * (1 + y_1 * (1 - torch.sigmoid(y_1))) * y_2, g * F.silu(y_1)),
            -1,
        )

    # fused_bias_swiglu.py:89-97
    def weighted_swiglu_back(g, y, weights):
        input_dtype = y.dtype
        w_dtype = weights.dtype
        input_grad = swiglu_back(g * weights, y)
        # precison of w may be higher than y and g, so we need to cast g to w_dtype
        weights_grad = swiglu(y) * g.to(w_dtype)
        weights_grad = torch.sum(weights_grad, dim=-1, keepdim=True)
        return input_grad.to(input_dtype), weights_grad.to(w_dtype)

    # fused_bias_geglu.py:184-187
    def quick_gelu(y):
        return y * torch.sigmoid(1.702 * y)

    # fused_bias_geglu.py:190-202
    def quick_geglu(y, linear_offset=0.0):
        y_1, y_2 = torch.chunk(y, 2, dim=-1)
        return quick_gelu(y_1) * (y_2 + linear_offset)

    # fused_bias_geglu.py:205-216
    def weighted_quick_geglu(y, weights, linear_offset=0.0):
        dtype = y.dtype
        res = quick_geglu(y, linear_offset) * weights
        return res.to(dtype)

    # fused_bias_geglu.py:220-236
    def quick_geglu_back(g, y, linear_offset=0.0):
        y_1, y_2 = torch.chunk(y, 2, -1)
        sigmoid_out = torch.sigmoid(1.702 * y_1)
        dy_1 = g * sigmoid_out * (1 + 1.702 * y_1 * (1 - sigmoid_out)) * (y_2 + linear_offset)
        dy_2 = g * y_1 * sigmoid_out
        return torch.cat((dy_1, dy_2), -1)

    # fused_bias_geglu.py:239-252
    def weighted_quick_geglu_back(g, y, weights, linear_offset=0.0):
        input_dtype = y.dtype
        w_dtype = weights.dtype
        input_grad = quick_geglu_back(g * weights, y, linear_offset)
        weights_grad = quick_geglu(y, linear_offset) * g.to(w_dtype)
        weights_grad = torch.sum(weights_grad, dim=-1, keepdim=True)
        return input_grad.to(input_dtype), weights_grad.to(w_dtype)

    return {
        "weighted_swiglu": weighted_swiglu,
        "weighted_swiglu_back": weighted_swiglu_back,
        "swiglu_back": swiglu_back,
        "weighted_quick_geglu": weighted_quick_geglu,
        "weighted_quick_geglu_back": weighted_quick_geglu_back,
    }


def megatron_impl(torch, fns):
    """`weighted_bias_quick_geglu_impl` without a bias, with `WeightedQuickGeGLUFunction`
    (fused_bias_geglu.py:303-347, 410-442 at the pin; the fp8 input store left out, off in the
    bf16 recipes), calling the compiled `fns`."""

    class WeightedQuickGeGLUFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input, weights, linear_offset):
            ctx.save_for_backward(input, weights, linear_offset)
            return fns["weighted_quick_geglu"](input, weights, linear_offset)

        @staticmethod
        def backward(ctx, grad_output):
            input, weights, linear_offset = ctx.saved_tensors
            input_grad, wgrad = fns["weighted_quick_geglu_back"](
                grad_output, input, weights, linear_offset
            )
            return input_grad, wgrad, None

    def weighted_bias_quick_geglu_impl(input, weights, linear_offset, clamp_value):
        ori_shape = input.shape
        if clamp_value is not None:
            x_glu, x_linear = input.chunk(2, -1)
            input = torch.cat(
                (
                    x_glu.clamp(min=None, max=clamp_value),
                    x_linear.clamp(min=-clamp_value, max=clamp_value),
                ),
                -1,
            )
        input = input.view(-1, ori_shape[-1])
        linear_offset = torch.tensor(linear_offset, dtype=input.dtype, device=input.device)
        return WeightedQuickGeGLUFunction.apply(input, weights, linear_offset)

    return weighted_bias_quick_geglu_impl


class Recorder:
    """The JSON result, rewritten after every case."""

    def __init__(self, path, head):
        self.path, self.result = path, dict(head, cases=[], errors=[])

    def add(self, row):
        self.result["cases"].append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "kernels"}), flush=True)
        self.write()

    def error(self, what, ex):
        self.result["errors"].append(f"{what}: {type(ex).__name__}: {str(ex)[:400]}")
        print("moe_act.py:", self.result["errors"][-1], file=sys.stderr, flush=True)
        self.write()

    def write(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.result, f, indent=1)
        os.replace(tmp, self.path)


def kernels(torch, fn, calls=3):
    """The device activities of one call of fn, by name: launches and seconds per call."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    by_name = {}
    for ev in prof.events():
        if str(getattr(ev, "device_type", "")).endswith("CUDA"):
            t = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0)
            n, s = by_name.get(ev.name, (0, 0.0))
            by_name[ev.name] = (n + 1, s + t * 1e-6)
    rows = [
        {"name": name[:300], "launches": n / calls, "s": s / calls}
        for name, (n, s) in sorted(by_name.items(), key=lambda kv: -kv[1][1])
    ]
    return rows


def measure(torch, timer, rec, fn, reps, **row):
    """Times fn (CUDA events) and profiles its kernels; row names the case and its bytes."""
    t, lo, hi = timer(torch, fn, reps)
    ks = kernels(torch, fn)
    ksum = sum(k["s"] for k in ks)
    row.update(
        median_s=t,
        min_s=lo,
        max_s=hi,
        kernel_s=ksum,
        launches=sum(k["launches"] for k in ks),
        kernels=ks,
    )
    if row.get("bytes"):
        row["bytes_per_s"] = row["bytes"] / t
        if ksum > 0:
            row["kernel_bytes_per_s"] = row["bytes"] / ksum
    rec.add(row)


def clamp_cases(torch, timer, rec, rows, ffn, v, reps):
    """The eager clamp of fused_bias_geglu.py:424-432 at [rows, 2 ffn], op by op and whole."""
    dev, bf16 = "cuda", torch.bfloat16
    n = rows * ffn  # elements of one half
    x = torch.randn(rows, 2 * ffn, device=dev, dtype=bf16) * 4  # some beyond +-7, as clamps need
    x_glu, x_linear = x.chunk(2, -1)  # [rows, ffn] views of row stride 2 ffn
    xc = x_glu.contiguous()
    a, b = x_glu.clamp(max=v), x_linear.clamp(-v, v)
    g = torch.randn(rows, 2 * ffn, device=dev, dtype=bf16)
    g_linear = g.narrow(-1, ffn, ffn)  # a view, as cat_tensors_backward hands it (row-strided)
    m_le, m_ge = x_linear <= v, x_linear >= -v
    zero = torch.zeros((), device=dev, dtype=bf16)

    def block(t):
        t_glu, t_linear = t.chunk(2, -1)
        return torch.cat((t_glu.clamp(min=None, max=v), t_linear.clamp(min=-v, max=v)), -1)

    xr = x.clone().requires_grad_()
    out = block(xr)
    # (case, bytes, fn): the forward's ops, then clamp_backward's (FunctionsManual.cpp, Scalar
    # overload: where(self <= max, grad, 0) for the gate half, where((self >= min).logical_and_(
    # self <= max), grad, 0) for the linear half) and the chunk's backward, a cat of the two
    # gradients, whose bytes and loop are cat_halves'.
    ops = [
        ("clamp_max_strided", 4 * n, lambda: x_glu.clamp(min=None, max=v)),
        ("clamp_minmax_strided", 4 * n, lambda: x_linear.clamp(min=-v, max=v)),
        ("clamp_max_contiguous", 4 * n, lambda: xc.clamp(min=None, max=v)),
        ("clamp_minmax_contiguous", 4 * n, lambda: xc.clamp(min=-v, max=v)),
        ("cat_halves", 8 * n, lambda: torch.cat((a, b), -1)),
        ("forward_block", CLAMP_FWD_B * 2 * n, lambda: block(x)),
        ("bwd_le_strided", 3 * n, lambda: x_glu <= v),
        ("bwd_ge_strided", 3 * n, lambda: x_linear >= -v),
        ("bwd_logical_and", 3 * n, lambda: m_ge.logical_and(m_le)),
        ("bwd_where_strided", 5 * n, lambda: torch.where(m_le, g_linear, zero)),
        (
            "backward_block",
            CLAMP_BWD_B * 2 * n,
            lambda: torch.autograd.grad(out, xr, g, retain_graph=True),
        ),
    ]
    for name, nbytes, fn in ops:
        try:
            measure(
                torch,
                timer,
                rec,
                fn,
                reps,
                group="clamp",
                case=name,
                mode="eager",
                rows=rows,
                cols=2 * ffn,
                bytes=nbytes,
            )
        except Exception as ex:  # noqa: BLE001 - the case is left out, the reason kept
            rec.error(f"clamp {name} {rows}", ex)


def compiled_cases(torch, timer, rec, fns, rows, ffn, reps, mode, offset, v, dense=None):
    """The compiled activations at [rows, 2 ffn] (and the dense backward at dense = (rows, ffn)),
    compiled afresh; mode "dynamic" marks the row dimension dynamic as automatic dynamic would."""
    dev, bf16 = "cuda", torch.bfloat16
    torch._dynamo.reset()
    comp = {k: torch.compile(f) for k, f in fns.items()}
    y = torch.randn(rows, 2 * ffn, device=dev, dtype=bf16)
    g = torch.randn(rows, ffn, device=dev, dtype=bf16)
    w = torch.rand(rows, 1, device=dev, dtype=bf16)  # router probabilities, bf16 (router dtype)
    lo = torch.tensor(offset, dtype=bf16, device=dev)  # as the impl passes it, line 434
    if mode == "dynamic":
        for t in (y, g, w):
            torch._dynamo.maybe_mark_dynamic(t, 0)
    out_elems = rows * ffn
    cases = [
        ("weighted_swiglu", ACT_FWD_B, (y, w)),
        ("weighted_swiglu_back", ACT_BWD_B + PROBS_GRAD_B, (g, y, w)),
        ("weighted_quick_geglu", ACT_FWD_B, (y, w, lo)),
        ("weighted_quick_geglu_back", ACT_BWD_B + PROBS_GRAD_B, (g, y, w, lo)),
    ]
    for name, per_elem, args in cases:
        try:
            row = {"group": "compiled", "case": name, "mode": mode, "rows": rows, "cols": 2 * ffn}
            row.update(run_compiled(torch, comp[name], fns[name], args, check=rows < 20000))
            measure(
                torch,
                timer,
                rec,
                lambda f=comp[name], a=args: f(*a),
                reps,
                bytes=per_elem * out_elems,
                **row,
            )
        except Exception as ex:  # noqa: BLE001
            rec.error(f"compiled {name} {mode} {rows}", ex)
    if mode == "static" and rows == max(rec.result["plan"]["rows"]):
        try:  # the whole unit as TEGroupedMLP runs it: eager clamp + compiled kernels
            impl = megatron_impl(torch, comp)
            xr = y.clone().requires_grad_()
            wr = w.clone().requires_grad_()

            def fwd_bwd():
                o = impl(xr, wr, offset, v)
                return torch.autograd.grad(o, (xr, wr), g)

            fwd_bwd()
            per_out = 2 * (CLAMP_FWD_B + CLAMP_BWD_B) + ACT_FWD_B + ACT_BWD_B + PROBS_GRAD_B
            measure(
                torch,
                timer,
                rec,
                fwd_bwd,
                reps,
                group="as_run",
                case="weighted_bias_quick_geglu_impl_fwd_bwd",
                mode=mode,
                rows=rows,
                cols=2 * ffn,
                bytes=per_out * out_elems,
            )
        except Exception as ex:  # noqa: BLE001
            rec.error(f"as_run {rows}", ex)
    if dense is not None:
        drows, dffn = dense
        try:
            yd = torch.randn(drows, 2 * dffn, device=dev, dtype=bf16)
            gd = torch.randn(drows, dffn, device=dev, dtype=bf16)
            row = {
                "group": "compiled",
                "case": "swiglu_back",
                "mode": mode,
                "rows": drows,
                "cols": 2 * dffn,
                "note": "dense MLP, bias_swiglu_impl without a bias",
            }
            row.update(
                run_compiled(torch, comp["swiglu_back"], fns["swiglu_back"], (gd, yd), check=False)
            )
            measure(
                torch,
                timer,
                rec,
                lambda: comp["swiglu_back"](gd, yd),
                reps,
                bytes=ACT_BWD_B * drows * dffn,
                **row,
            )
        except Exception as ex:  # noqa: BLE001
            rec.error(f"compiled swiglu_back {mode} {drows}", ex)


def run_compiled(torch, compiled, eager, args, check):
    """The first call's wall time (the compile), and, when check, the largest difference from
    the eager function relative to the output's scale."""
    torch.cuda.synchronize()
    t0 = time.time()
    got = compiled(*args)
    torch.cuda.synchronize()
    info = {"first_call_s": round(time.time() - t0, 3)}
    if check:
        want = eager(*args)
        got, want = (got if isinstance(got, tuple) else (got,)), (
            want if isinstance(want, tuple) else (want,)
        )
        info["max_rel_diff_vs_eager"] = max(
            float((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-6))
            for a, b in zip(got, want)
        )
    return info


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--model", default=os.path.join(PRESETS, "gpt-oss-120b.json"))
    ap.add_argument("--dense-model", default=os.path.join(PRESETS, "llama3-8b.json"))
    ap.add_argument("--mbs", type=int, default=4, help="micro-batch size of the row count")
    ap.add_argument("--seq", type=int, default=4096, help="sequence length of the row count")
    ap.add_argument("--small-rows", type=int, default=8192, help="rows of the smaller shape")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--no-dynamic", action="store_true", help="skip the dynamic-rows compiles")
    ap.add_argument("--dry-run", action="store_true", help="check the arguments, no PyTorch")
    a = ap.parse_args()
    for k in ("mbs", "seq"):
        if getattr(a, k) <= 0:
            ap.error(f"--{k}: must be positive, got {getattr(a, k)}")
    if a.reps < 3:
        ap.error(f"--reps: at least 3, got {a.reps}")
    try:
        p = plan(a)
    except (OSError, ValueError) as ex:
        ap.error(str(ex))
    if a.dry_run:
        print(json.dumps({"dry_run": p, "out": a.out}))
        return 0

    import memory_paths  # beside this file: its CUDA-event timer
    import torch

    head = {
        "card": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "plan": p,
    }
    rec = Recorder(a.out, head)
    rec.write()
    timer = memory_paths.timed
    fns = megatron_functions(torch)
    ffn, v, offset = p["ffn"], p["clamp_value"], p["linear_offset"]
    big, small = p["rows"]
    # The order puts first what the docs wait for: the clamp, then the compiled units at the
    # large shape; a run cut by its time limit loses the last ones.
    clamp = functools.partial(clamp_cases, torch, timer, rec)
    compiled = functools.partial(compiled_cases, torch, timer, rec, fns)
    dense = (p["dense_rows"], p["dense_ffn"])
    steps = [
        lambda: clamp(big, ffn, v, a.reps),
        lambda: clamp(small, ffn, v, a.reps),
        lambda: compiled(big, ffn, a.reps, "static", offset, v, dense=dense),
        lambda: compiled(small, ffn, a.reps, "static", offset, v),
    ]
    if p["dynamic"]:
        steps.append(lambda: compiled(big, ffn, a.reps, "dynamic", offset, v))
    for step in steps:
        step()
        torch.cuda.empty_cache()  # each step's tensors are gone with its frame
    return 0 if not rec.result["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
