#!/usr/bin/env python3
"""Transformer Engine's split GEMMs under TP overlap: whole, chunks in a row, chunks on 3 streams.

Under Transformer Engine's userbuffers TP overlap (TE d0067d0) the GEMM beside each sequence-
parallel all-gather or reduce-scatter runs as chunks along the token dimension:

  ring exchange  (all-gather into qkv / fc1 forward, of the output gradient into proj / fc2
                 dgrad) tp chunks of m/tp rows, `CommOverlapP2PBase::split_overlap_ag`
                 (common/comm_gemm_overlap/comm_gemm_overlap.cpp:1044-1218): chunk i on
                 `_stream_compute[i % n]`, chunk i+1's stream waiting for the copy-engine receive
                 of its rows (`cudaStreamWaitEvent(_stream_compute[(i + 1) % n], _stop_recv)`,
                 :1195-1197); with `aggregate` (NeMo's 405B presets) tp/2 chunks of 2m/tp rows
  pipeline       (proj / fc2 forward, into the reduce-scatter) 4 chunks of m/4 rows,
                 `CommOverlapBase::split_overlap_rs` (:611-760), chunk i on `_stream_compute[i % n]`

with n = min(NVTE_COMM_OVERLAP_MAX_STREAMS = 3, splits) GEMM streams
(`CommOverlapCore::initialize`, :116-136; include/transformer_engine/comm_gemm_overlap.h:20),
forked from the caller's stream by one event and joined back by one event each. The simulator
charges the chunks one after another (sim/emit_timing.cc `time_op`: chunks x gemm(m/chunks)).
This measures, on one GPU in bf16, at the per-GPU shapes of the dgxc TP-overlap records (read
from validation/dev_runs_2026.json: the model's config, seq, tp, cp, mbs; tokens = seq/cp x mbs,
all-gathered over the TP group), for each of qkv and fc1 forward, proj and fc2 dgrad (ring) and
proj and fc2 forward (pipeline):

  whole    one GEMM of all m rows
  serial   its chunks one after another on one stream (what the simulator charges)
  streams  its chunks round-robin on 3 streams as TE issues them, forked and joined by events
  copies   (ring only) `streams` with each chunk's input rows arriving by a device-to-device
           `copy_` on a side stream (contiguous, same dtype: PyTorch's cudaMemcpyAsync, the copy
           engine TE's ring uses with `use_ce`), chunk i+1 waiting for its copy as in TE; the
           profiler's names of the copy's activity are recorded to show it ran as a memcpy

Not measurable from PyTorch: the pipeline's SM margin (its GEMMs on sm_count - 16 SMs) and the
reduce-scatter kernels beside them. Each case is timed with CUDA events around `--batch` calls
queued behind a GPU sleep (torch.cuda._sleep) so that the host's launches are out of the
interval (`host_bound` says if the host did not get ahead); the median of `--reps`. Each chunked
run is checked against the whole GEMM (`max_rel_diff`). Output: JSON with ms, TFLOP/s and the
ratios serial/whole, streams/whole, copies/whole, rewritten after every GEMM, so a time-out
keeps what was measured.

    python3 tp_split_gemm.py OUT.json [--reps 10] [--batch 5] [--records FILE] [--dry-run]
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "validation", "dev_runs_2026.json")
TE_PIN = "NVIDIA/TransformerEngine d0067d0"
MAX_STREAMS = 3  # NVTE_COMM_OVERLAP_MAX_STREAMS, include/transformer_engine/comm_gemm_overlap.h:20
# TE's default num_splits for the pipeline method (pytorch/module/base.py:387), and NeMo v2.2.1's
# H100 presets' (nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py:89-90, 142-143)
PIPELINE_SPLITS = 4
GATED_ACTS = ("silu", "swiglu")  # gate and up fused in fc1 (2 x ffn wide)

# The dgxc v25.04.01 records with TP overlap whose shapes are measured, and whether NeMo's preset
# for them runs the ring exchange with `aggregate` (NeMo v2.2.1 userbuffers.py:132-140: the 405B
# `userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192` sets aggregate=True for qkv/fc1 fprop
# and proj/fc2 dgrad; the 70B preset, :79-87, False; docs/simulator.md, "TP communication
# overlap"). Nemotron-4's and GPT-3's dgxc configurations were not read: TE's default, False.
TARGETS = [
    ("llama3.1-70b", "dgxc_v250401_llama31_70b_bf16_h100_64gpu", False),
    ("llama3.1-405b", "dgxc_v250401_llama31_405b_bf16_h100_512gpu", True),
    ("nemotron4-340b", "dgxc_v250401_nemotron4_340b_bf16_h100_256gpu", False),
    ("gpt3-175b", "dgxc_v250401_gpt3_175b_bf16_h100_128gpu", False),
]


def model_dims(cfg):
    """hidden, ffn, heads, kv heads, head dim, gated, from a Hugging Face config (Llama, GPT-2,
    Nemotron)."""
    hidden = int(cfg.get("hidden_size") or cfg["n_embd"])
    heads = int(cfg.get("num_attention_heads") or cfg["n_head"])
    ffn = int(cfg.get("intermediate_size") or cfg.get("n_inner") or 4 * hidden)
    kv = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or hidden // heads)
    act = cfg.get("hidden_act") or cfg.get("activation_function")
    return hidden, ffn, heads, kv, head_dim, act in GATED_ACTS


def layout(s):
    kv = dict(p.split("=", 1) for p in s.split(","))
    return {k: int(kv.get(k, 1)) for k in ("tp", "cp", "mbs")}


def plan(records_path):
    """The GEMMs to time, from the records; no PyTorch."""
    with open(records_path) as f:
        records = {r["id"]: r for r in json.load(f)}
    gemms = []
    for name, rid, aggregate in TARGETS:
        if rid not in records:
            raise ValueError(f"{records_path}: no record {rid!r}")
        r = records[rid]
        hidden, ffn, heads, kv, hd, gated = model_dims(r["model"])
        lay = layout(r["layout"])
        tp, cp, mbs = lay["tp"], lay["cp"], lay["mbs"]
        if tp < 2 or r["seq_len"] % cp:
            raise ValueError(f"{rid}: tp {tp}, seq {r['seq_len']}, cp {cp}: no TP overlap shape")
        m = r["seq_len"] // cp * mbs  # the TP group's all-gathered tokens on each rank
        qkv = (heads + 2 * kv) * hd // tp
        attn = heads * hd // tp
        fc1 = (2 if gated else 1) * ffn // tp
        ring = [
            ("qkv.fprop", hidden, qkv),
            ("fc1.fprop", hidden, fc1),
            ("proj.dgrad", hidden, attn),
            ("fc2.dgrad", hidden, ffn // tp),
        ]
        pipe = [("proj.fprop", attn, hidden), ("fc2.fprop", ffn // tp, hidden)]
        common = {"model": name, "record": rid, "tp": tp, "cp": cp, "mbs": mbs, "m": m}
        for gemm, k, n in ring:
            gemms.append(dict(common, gemm=gemm, method="ring", k=k, n=n, splits=tp))
            if aggregate:
                gemms.append(
                    dict(common, gemm=gemm, method="ring_aggregate", k=k, n=n, splits=tp // 2)
                )
        for gemm, k, n in pipe:
            gemms.append(
                dict(common, gemm=gemm, method="pipeline", k=k, n=n, splits=PIPELINE_SPLITS)
            )
    for g in gemms:
        if g["m"] % g["splits"]:
            raise ValueError(
                f"{g['model']} {g['gemm']}: {g['m']} rows not split {g['splits']} ways"
            )
        g["gemm_streams"] = min(MAX_STREAMS, g["splits"])
        g["flops"] = 2 * g["m"] * g["k"] * g["n"]
    return gemms


class Recorder:
    """The JSON result, rewritten after every GEMM."""

    def __init__(self, path, head):
        self.path, self.result = path, dict(head, gemms=[], errors=[])

    def add(self, row):
        self.result["gemms"].append(row)
        print(json.dumps(row), flush=True)
        self.write()

    def error(self, what, ex):
        self.result["errors"].append(f"{what}: {type(ex).__name__}: {str(ex)[:400]}")
        print("tp_split_gemm.py:", self.result["errors"][-1], file=sys.stderr, flush=True)
        self.write()

    def write(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.result, f, indent=1)
        os.replace(tmp, self.path)


class Timer:
    """GPU seconds per call: `batch` calls between two events, queued behind a GPU sleep."""

    def __init__(self, torch, reps, batch):
        self.torch, self.reps, self.batch = torch, reps, batch
        self.cycles = 10_000_000  # ~5 ms at ~2 GHz: ahead of the host's launches of a batch
        self.sleep_s = self._sleep_seconds()

    def _sleep_seconds(self):
        torch = self.torch
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(self.cycles)  # warm-up
        s.record()
        torch.cuda._sleep(self.cycles)
        e.record()
        e.synchronize()
        return s.elapsed_time(e) / 1e3

    def __call__(self, fn):
        torch = self.torch
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        times, enqueue = [], []
        for _ in range(self.reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(self.cycles)
            t0 = time.perf_counter()
            s.record()
            for _ in range(self.batch):
                fn()
            e.record()
            enqueue.append(time.perf_counter() - t0)
            e.synchronize()
            times.append(s.elapsed_time(e) / 1e3 / self.batch)
        return {
            "ms": round(statistics.median(times) * 1e3, 4),
            "ms_min": round(min(times) * 1e3, 4),
            "ms_max": round(max(times) * 1e3, 4),
            "host_bound": max(enqueue) > self.sleep_s,
        }


def chunked(torch, x, wmat, out, splits, streams, copy=None):
    """The chunks of out = x @ wmat: on `streams` round-robin (one stream: in a row), forked from
    and joined to the current stream by events as TE does; with `copy` = (source, stream), chunk
    i >= 1's rows of x are first copied from source on that stream and chunk i waits for it."""
    rows = x.shape[0] // splits
    main = torch.cuda.current_stream()
    start = torch.cuda.Event()
    start.record(main)
    for s in streams:
        s.wait_event(start)
    arrived = [None] * splits
    if copy is not None:
        src, cs = copy
        cs.wait_event(start)
        with torch.cuda.stream(cs):
            for i in range(1, splits):
                x[i * rows : (i + 1) * rows].copy_(src[i * rows : (i + 1) * rows])
                arrived[i] = torch.cuda.Event()
                arrived[i].record(cs)
    for i in range(splits):
        s = streams[i % len(streams)]
        if arrived[i] is not None:
            s.wait_event(arrived[i])
        with torch.cuda.stream(s):
            torch.mm(x[i * rows : (i + 1) * rows], wmat, out=out[i * rows : (i + 1) * rows])
    for s in streams:
        done = torch.cuda.Event()
        done.record(s)
        main.wait_event(done)
    if copy is not None:
        done = torch.cuda.Event()
        done.record(copy[1])
        main.wait_event(done)


def activity(torch, fn):
    """The profiler's names of the device activities of one call, with their counts."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = {}
    for ev in prof.events():
        if str(getattr(ev, "device_type", "")).endswith("CUDA"):
            names[ev.name[:120]] = names.get(ev.name[:120], 0) + 1
    return names


def measure(torch, timer, g, profile_copy):
    dev, bf16 = "cuda", torch.bfloat16
    m, k, n, splits = g["m"], g["k"], g["n"], g["splits"]
    x = torch.randn(m, k, device=dev, dtype=bf16)
    if g["gemm"].endswith("dgrad"):
        wmat = torch.randn(k, n, device=dev, dtype=bf16) * k**-0.5  # dy @ W, W [out, in]
    else:
        wmat = (torch.randn(n, k, device=dev, dtype=bf16) * k**-0.5).t()  # x @ W.t()
    out = torch.empty(m, n, device=dev, dtype=bf16)
    ref = torch.mm(x, wmat)
    streams = [torch.cuda.Stream() for _ in range(g["gemm_streams"])]
    one = [torch.cuda.current_stream()]
    cases = {
        "whole": lambda: torch.mm(x, wmat, out=out),
        "serial": lambda: chunked(torch, x, wmat, out, splits, one),
        "streams": lambda: chunked(torch, x, wmat, out, splits, streams),
    }
    if g["method"] != "pipeline":
        src = x.clone()  # the same values, so the result stays checkable
        cs = torch.cuda.Stream(priority=-1)  # TE's comm streams have the high priority
        cases["copies"] = lambda: chunked(torch, x, wmat, out, splits, streams, (src, cs))
    row = dict(g, dtype="bf16", chunk_rows=m // splits, copy_bytes_per_chunk=m // splits * k * 2)
    scale = ref.float().abs().max().item() or 1.0
    for name, fn in cases.items():
        out.zero_()
        fn()
        torch.cuda.synchronize()
        diff = (out.float() - ref.float()).abs().max().item() / scale
        r = timer(fn)
        r["tflops"] = round(g["flops"] / (r["ms"] * 1e-3) / 1e12, 1)
        r["max_rel_diff"] = float(f"{diff:.2e}")
        row[name] = r
    for name in ("serial", "streams", "copies"):
        if name in row:
            row[f"{name}_over_whole"] = round(row[name]["ms"] / row["whole"]["ms"], 4)
    if profile_copy and "copies" in cases:
        row["copies_activity"] = activity(torch, cases["copies"])
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--reps", type=int, default=10, help="timed batches per case (median)")
    ap.add_argument("--batch", type=int, default=5, help="calls per timed batch")
    ap.add_argument("--records", default=RECORDS, help="the validation records to read shapes from")
    ap.add_argument("--dry-run", action="store_true", help="print the plan, no PyTorch")
    a = ap.parse_args()
    if a.reps < 3:
        ap.error(f"--reps: at least 3, got {a.reps}")
    if a.batch < 1:
        ap.error(f"--batch: must be positive, got {a.batch}")
    try:
        gemms = plan(a.records)
    except (OSError, KeyError, ValueError) as ex:
        ap.error(f"{type(ex).__name__}: {ex}")
    if a.dry_run:
        print(
            json.dumps(
                {"dry_run": {"gemms": gemms, "reps": a.reps, "batch": a.batch}, "out": a.out}
            )
        )
        return 0

    import torch

    head = {
        "card": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "te_pin": TE_PIN,
        "reps": a.reps,
        "batch": a.batch,
    }
    rec = Recorder(a.out, head)
    timer = Timer(torch, a.reps, a.batch)
    rec.result["sleep_s"] = round(timer.sleep_s, 6)
    rec.write()
    profiled = False
    for g in gemms:
        try:
            row = measure(torch, timer, g, profile_copy=not profiled)
            profiled = profiled or "copies_activity" in row
            rec.add(row)
        except Exception as ex:  # noqa: BLE001 - the GEMM is left out, the reason kept
            rec.error(f"{g['model']} {g['gemm']} {g['method']}", ex)
        torch.cuda.empty_cache()
    return 0 if not rec.result["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
