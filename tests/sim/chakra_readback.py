#!/usr/bin/env python3
"""Chakra traces written by `scaleplan simulate --emit-chakra` read back with Chakra's own reader.

The classes come from the vendored et_def.proto (third_party/chakra/, Chakra v0.0.4) through
protoc, the length-delimited messages are read with Chakra's protolib.decodeMessage: what ASTRA-sim's
Python tooling does. Checks, from the schema and from what a correct trace of a training iteration
must satisfy rather than from what scaleplan printed:
  - every file decodes: GlobalMetadata (version 0.0.4), then nodes with ids 0..n-1;
  - the node and dependency counts equal the Program's (simulate --json "chakra": ops, deps);
  - every dependency names an earlier node of the same trace (the Program is a DAG in issue order);
  - every send has exactly one receive on its destination with the same tag, source and bytes;
  - the members of a communicator issue the same collectives (type, bytes) in the same order, as
    NCCL requires, and every rank that uses a pg_name is a member of it in scaleplan.json;
  - a pipeline send carries one micro-batch's activations, seq/tp x mbs x hidden x 2 bytes (bf16).
Exit 77 (skipped) when protoc or the protobuf module is missing (scripts/setup.sh installs both).
"""
import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile


def find_protobuf_python():
    try:
        import google.protobuf  # noqa: F401
        return None
    except ImportError:
        pass
    # Debian's python3-protobuf installs for /usr/bin/python3, which a pyenv python3 hides.
    for py in ("/usr/bin/python3",):
        if os.path.exists(py) and os.path.realpath(py) != os.path.realpath(sys.executable):
            if subprocess.run([py, "-c", "import google.protobuf"], capture_output=True).returncode == 0:
                return py
    return "missing"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scaleplan", required=True)
    ap.add_argument("--chakra", required=True, help="third_party/chakra")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    py = find_protobuf_python()
    if py == "missing" or shutil.which("protoc") is None:
        print("SKIP: needs protoc and the python protobuf module "
              "(Debian protobuf-compiler, python3-protobuf; scripts/setup.sh)")
        return 77
    if py is not None:
        os.execv(py, [py] + sys.argv)

    shutil.rmtree(a.out, ignore_errors=True)
    os.makedirs(a.out)
    gen = os.path.join(a.out, "gen")
    os.makedirs(gen)
    subprocess.run(["protoc", f"--proto_path={a.chakra}", f"--python_out={gen}", "et_def.proto"],
                   check=True)
    sys.path[:0] = [gen, a.chakra]
    import et_def_pb2 as pb
    import protolib

    # llama3-8b (hidden 4096) on 8 GPUs: every parallelism that sends or reduces, every rank
    # simulated so that both ends of every send and every member of every group are in the traces.
    seq, mbs, hidden = 2048, 1, 4096
    traces = os.path.join(a.out, "traces")
    os.makedirs(traces)
    cmd = [a.scaleplan, "simulate", "--model", "llama3-8b", "--cluster", "dgx-h100",
           "--seq", str(seq), "--layout", f"tp=2,pp=2,dp=2,mbs={mbs},gbs=8,zero=1",
           "--all-ranks", "--emit-chakra", traces, "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        return 1
    out = json.loads(r.stdout)["chakra"]

    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    nodes = {}  # global rank -> [Node]
    for f in out["files"]:
        if not f.endswith(".et"):
            continue
        rank = int(f.split(".")[-2])
        with open(os.path.join(traces, f), "rb") as fh:
            meta = pb.GlobalMetadata()
            check(protolib.decodeMessage(fh, meta), f"{f}: no GlobalMetadata")
            check(meta.version == "0.0.4", f"{f}: version {meta.version!r}")
            ns = []
            while True:
                n = pb.Node()
                if not protolib.decodeMessage(fh, n):
                    break
                ns.append(n)
        nodes[rank] = ns
    check(sorted(nodes) == list(range(8)), f"ranks {sorted(nodes)}")
    with open(os.path.join(traces, "scaleplan.json")) as fh:
        groups = {int(k): v for k, v in json.load(fh).items()}

    total_nodes = sum(len(v) for v in nodes.values())
    total_data = sum(len(n.data_deps) for v in nodes.values() for n in v)
    check(total_nodes == out["ops"], f"{total_nodes} nodes, the Program has {out['ops']} ops")
    check(total_data == out["deps"], f"{total_data} data deps, the Program has {out['deps']}")

    def attrs(n):
        d = {}
        for x in n.attr:
            d[x.name] = getattr(x, x.WhichOneof("value"))
        return d

    sends, recvs = collections.Counter(), collections.Counter()
    colls = collections.defaultdict(list)  # (pg, rank) -> [(type, size)]
    send_sizes = set()
    types = collections.Counter()
    for rank, ns in nodes.items():
        for i, n in enumerate(ns):
            types[pb.NodeType.Name(n.type)] += 1
            check(n.id == i, f"rank {rank}: node {i} has id {n.id}")
            for d in list(n.data_deps) + list(n.ctrl_deps):
                check(d < n.id, f"rank {rank}: node {n.id} depends on later node {d}")
            at = attrs(n)
            if n.type == pb.COMM_SEND_NODE:
                check(at["comm_src"] == rank, f"rank {rank}: send from {at['comm_src']}")
                sends[(at["comm_src"], at["comm_dst"], at["comm_tag"], at["comm_size"])] += 1
                send_sizes.add(at["comm_size"])
            elif n.type == pb.COMM_RECV_NODE:
                check(at["comm_dst"] == rank, f"rank {rank}: receive at {at['comm_dst']}")
                recvs[(at["comm_src"], at["comm_dst"], at["comm_tag"], at["comm_size"])] += 1
            elif n.type == pb.COMM_COLL_NODE:
                pg = int(at["pg_name"])
                check(rank in groups.get(pg, []), f"rank {rank} not in group {pg}")
                colls[(pg, rank)].append((at["comm_type"], at["comm_size"]))
            elif n.type == pb.COMP_NODE:
                check(at["scaleplan.duration_ps"] >= 0, f"rank {rank}: node {n.id} duration")
                check(abs(n.duration_micros - at["scaleplan.duration_ps"] / 1e6) <= 0.5,
                      f"rank {rank}: node {n.id} duration_micros {n.duration_micros}")
    check(sends == recvs and len(sends) > 0 and all(c == 1 for c in sends.values()),
          f"sends and receives do not pair: {len(sends)} sends, {len(recvs)} receives")
    check(len(colls) > 0, "no collectives")
    for pg, members in groups.items():
        seqs = [colls.get((pg, m), []) for m in members]
        check(all(s == seqs[0] for s in seqs) and seqs[0],
              f"group {pg} {members}: members issue different collectives")
    # A pipeline p2p carries one micro-batch's stage output, [seq/tp, mbs, hidden] in bf16 under
    # sequence parallelism (Megatron-LM megatron/core/pipeline_parallel/schedules.py,
    # get_tensor_shapes: seq_length // tensor_model_parallel_size when sequence_parallel):
    # 2048/2 x 1 x 4096 x 2 bytes = 8 MiB.
    expected = seq // 2 * mbs * hidden * 2
    check(send_sizes == {expected}, f"send sizes {sorted(send_sizes)}, expected {expected}")

    print(f"{len(nodes)} traces, {total_nodes} nodes ({dict(types)}), {total_data} data deps, "
          f"{len(sends)} send/recv pairs, {len(groups)} groups")
    for f in failures[:20]:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
