#!/usr/bin/env python3
"""Compares the collective cost model with the published busbw figures of
validation/component_figures.json and prints the markdown table of docs/validation.md.

Usage: python3 examples/nccl-tests/validate_collectives.py [path/to/scaleplan]
Every model number comes from one `scaleplan collective ... --json` call, printed in the table."""
import json, subprocess, sys, os

BIN = sys.argv[1] if len(sys.argv) > 1 else "build/scaleplan"
HERE = os.path.dirname(os.path.abspath(__file__))
A100_4NIC = os.path.join(HERE, "a100-40g-4nic.json")
UNIT = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}

def size(s):
    for u, m in UNIT.items():
        if s.endswith(u):
            return int(float(s[:-len(u)]) * m)
    return int(s)

def model(cluster, op, ranks, nbytes, extra=""):
    cmd = f"{BIN} collective --cluster {cluster} --op {op} --ranks {ranks} --bytes {nbytes} --json {extra}".split()
    j = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    r = j["results"][0]
    return r["busbw_gbps"], r["algorithm"], r["time_s"]

rows = []
def add(what, cluster, op, ranks, s, published, extra="", metric=lambda bus, t, n: bus):
    bus, algo, t = model(cluster, op, ranks, size(s), extra)
    val = metric(bus, t, size(s))
    err = (val - published) / published * 100
    rows.append((what, f"`--cluster {os.path.basename(cluster)} --op {op} --ranks {ranks} --bytes {s} {extra}`".replace(" `", "`"),
                 s, published, val, err, algo))

# NVLink all-reduce, 8x A100 (nccl-tests, Bekman)
for s, v in {"32KiB": 1.31, "1MiB": 18.0, "16MiB": 106.16, "128MiB": 176.92, "512MiB": 222.72, "1GiB": 229.04,
             "2GiB": 231.41, "4GiB": 233.88, "8GiB": 234.61}.items():
    add("A100x8 NVLink all-reduce", "dgx-a100-80g", "all_reduce", 8, s, v)
# 8x H200 / H100 (nccl-tests and NCCL maintainers)
add("H200x8 all-reduce NVLS (nccl-tests)", "hgx-h200", "all_reduce", 8, "16GiB", 480.0)
add("H200x8 all-reduce ring, NVLS off", "hgx-h200", "all_reduce", 8, "16GiB", 367.2, "--algo ring")
add("H200x8 all-gather ring", "hgx-h200", "all_gather", 8, "16GiB", 361.4)
add("H200x8 reduce-scatter ring", "hgx-h200", "reduce_scatter", 8, "16GiB", 362.9)
add("H100x8 all-reduce (maintainer: ~480)", "dgx-h100", "all_reduce", 8, "16GiB", 480.0)
add("H100x8 all-reduce (measured 476, 4 GiB max)", "dgx-h100", "all_reduce", 8, "4GiB", 476.0)
add("H100x8 ring / non-all-reduce (maintainer: ~370)", "dgx-h100", "all_gather", 8, "16GiB", 370.0)
for n, v in {4: 363.3, 6: 435.6, 8: 473.1}.items():
    add(f"H200 all-reduce on {n} GPUs, 8 GiB", "hgx-h200", "all_reduce", n, "8GiB", v)
for s, v in {"1MiB": 39.93, "16MiB": 219.89, "64MiB": 346.51, "128MiB": 401.93, "512MiB": 450.29, "4GiB": 473.1,
             "16GiB": 482.26}.items():
    add("H200x8 all-reduce (torch all_reduce_bench)", "hgx-h200", "all_reduce", 8, s, v)
# InfiniBand multi-node
add("H100 2 nodes ring, per NIC (maintainer: 46-48)", "dgx-h100", "all_reduce", 16, "16GiB", 47.0, "--algo ring",
    metric=lambda bus, t, n: bus / 8)
add("A100 3 nodes x 4 HDR, peak busbw (128 MB)", A100_4NIC, "all_reduce", 24, "128MiB", 96.0)
add("HDR per NIC, 3 nodes (maintainer: ~24)", "dgx-a100-40g", "all_reduce", 24, "8GiB", 24.0, "--algo ring",
    metric=lambda bus, t, n: bus / 8)
add("B200 4 nodes all-reduce (EFA; profile is IB)", "dgx-b200", "all_reduce", 32, "16GiB", 381.8)
add("H200 248 nodes all-reduce 512 MB (typical)", "hgx-h200", "all_reduce", 1984, "512MiB", 350.0)
# All-to-all (DeepEP on H800: per-GPU bandwidth on the bottleneck link)
add("H800 EP8 all-to-all, NVLink (DeepEP dispatch)", "dgx-h800", "alltoall", 8, "256MiB", 153.0,
    metric=lambda bus, t, n: bus)
add("H800 EP16 all-to-all, RDMA (DeepEP)", "dgx-h800", "alltoall", 16, "256MiB", 43.0,
    metric=lambda bus, t, n: n * 8 / 16 / t / 1e9)

print("| figure | size | published GB/s | model GB/s | error | model algorithm | command (`scaleplan collective ... --json`) |")
print("|---|---|---:|---:|---:|---|---|")
for what, cmd, s, pub, val, err, algo in rows:
    print(f"| {what} | {s} | {pub:.1f} | {val:.1f} | {err:+.0f}% | {algo} | {cmd} |")
