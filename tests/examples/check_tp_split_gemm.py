"""Checks examples/torch_reference/tp_split_gemm.py without PyTorch.

1. `--dry-run` plans, from the dgxc records in validation/dev_runs_2026.json, the per-GPU GEMMs
   that the published architectures and the records' layouts give, computed here on their own:
   Llama 3.1 70B and 405B (Llama 3 paper, arXiv:2407.21783, Table 3: model dimension 8,192 /
   16,384, FFN 28,672 / 53,248, 64 / 128 heads, 8 KV heads, SwiGLU), Nemotron-4 340B
   (arXiv:2406.11704, Table 1: hidden 18,432, 96 heads, 8 KV heads, squared ReLU, FFN 73,728),
   GPT-3 175B (arXiv:2005.14165, Table 2.1: d_model 12,288, 96 heads, d_head 128, FFN 4 d_model);
   layouts of dgxc-benchmarking v25.04.01 (70B tp 4 cp 2 seq 8,192; 405B tp 8 cp 2 seq 8,192;
   340B tp 8 seq 4,096; 175B tp 4 seq 2,048; mbs 1). Ring exchange: tp chunks (and tp/2 for the
   405B preset's `aggregate`), pipeline: 4; 3 GEMM streams (TE's NVTE_COMM_OVERLAP_MAX_STREAMS).
   It refuses bad arguments and a records file without the records.
2. `chunked` issues the chunks as TE d0067d0 does (comm_gemm_overlap.cpp:1161-1218): chunk i on
   stream i % 3 after the fork event, chunk i >= 1 after the copy of its rows, every stream joined
   back; checked on a recording stand-in for torch.

Usage: check_tp_split_gemm.py SCRIPT
"""

import json
import os
import subprocess
import sys
import tempfile
import types

# (name, hidden, ffn, heads, kv heads, head dim, gated, seq, tp, cp) from the sources above
PUBLISHED = [
    ("llama3.1-70b", 8192, 28672, 64, 8, 128, True, 8192, 4, 2),
    ("llama3.1-405b", 16384, 53248, 128, 8, 128, True, 8192, 8, 2),
    ("nemotron4-340b", 18432, 73728, 96, 8, 18432 // 96, False, 4096, 8, 1),
    ("gpt3-175b", 12288, 4 * 12288, 96, 96, 128, False, 2048, 4, 1),
]


def expected():
    want = set()
    for name, h, f, heads, kv, hd, gated, seq, tp, cp in PUBLISHED:
        m = seq // cp  # mbs 1
        ring = {
            "qkv.fprop": (h, (heads + 2 * kv) * hd // tp),
            "fc1.fprop": (h, (2 if gated else 1) * f // tp),
            "proj.dgrad": (h, heads * hd // tp),
            "fc2.dgrad": (h, f // tp),
        }
        for gemm, (k, n) in ring.items():
            want.add((name, gemm, "ring", m, k, n, tp, 3))
            if name == "llama3.1-405b":
                want.add((name, gemm, "ring_aggregate", m, k, n, tp // 2, 3))
        want.add((name, "proj.fprop", "pipeline", m, heads * hd // tp, h, 4, 3))
        want.add((name, "fc2.fprop", "pipeline", m, f // tp, h, 4, 3))
    return want


def dry_run(script, *args):
    return subprocess.run(
        [sys.executable, script, "out.json", "--dry-run", *args],
        check=False,
        capture_output=True,
        text=True,
    )


class Rec:
    """A stand-in for torch.cuda's streams and events that logs what is issued where."""

    def __init__(self):
        self.log, self.current = [], None
        rec = self

        class Stream:
            def __init__(self, name):
                self.name = name

            def wait_event(self, ev):
                rec.log.append((self.name, "wait", ev.tag))

        class Event:
            count = 0

            def __init__(self):
                Event.count += 1
                self.tag = f"e{Event.count}"

            def record(self, stream=None):
                rec.log.append(((stream or rec.current).name, "record", self.tag))

        class Ctx:
            def __init__(self, s):
                self.s = s

            def __enter__(self):
                self.prev, rec.current = rec.current, self.s

            def __exit__(self, *a):
                rec.current = self.prev

        self.main = Stream("main")
        self.current = self.main
        cuda = types.SimpleNamespace(
            Event=Event, current_stream=lambda: rec.current, stream=Ctx, Stream=Stream
        )
        self.torch = types.SimpleNamespace(
            cuda=cuda, mm=lambda a, b, out: rec.log.append((rec.current.name, "mm", a.rows))
        )
        self.Stream = Stream


class Rows:
    """A tensor stand-in: slicing keeps the row range, copy_ is logged."""

    def __init__(self, rec, rows):
        self.rec, self.rows, self.shape = rec, rows, (rows[1] - rows[0],)

    def __getitem__(self, s):
        return Rows(self.rec, (self.rows[0] + s.start, self.rows[0] + s.stop))

    def copy_(self, src):
        self.rec.log.append((self.rec.current.name, "copy", self.rows))


def check_issue_order(mod):
    rec = Rec()
    streams = [rec.Stream(f"s{i}") for i in range(3)]
    cs = rec.Stream("copy")
    x, out = Rows(rec, (0, 800)), Rows(rec, (0, 800))
    mod.chunked(rec.torch, x, None, out, 8, streams, (Rows(rec, (0, 800)), cs))
    log = rec.log
    fork = log[0]
    if fork[:2] != ("main", "record"):
        sys.exit(f"chunked: the first op is not the fork event on the caller's stream: {fork}")
    for s in ["s0", "s1", "s2", "copy"]:
        if (s, "wait", fork[2]) not in log:
            sys.exit(f"chunked: stream {s} does not wait for the fork")
    mms = [(i, e) for i, e in enumerate(log) if e[1] == "mm"]
    if [e[2] for _, e in mms] != [(i * 100, i * 100 + 100) for i in range(8)]:
        sys.exit(f"chunked: GEMM chunks {[e[2] for _, e in mms]}, want 8 of 100 rows in order")
    for c, (pos, e) in enumerate(mms):
        if e[0] != f"s{c % 3}":
            sys.exit(f"chunked: chunk {c} on {e[0]}, TE issues it on s{c % 3}")
        if c == 0:
            continue
        # its stream waited, before it, for an event recorded on the copy stream after the
        # copy of its rows
        waits = [w[2] for w in log[:pos] if w[:2] == (e[0], "wait")]
        copy_at = log.index(("copy", "copy", e[2]))
        after = {r[2] for r in log[copy_at:pos] if r[:2] == ("copy", "record")}
        if not after & set(waits):
            sys.exit(f"chunked: chunk {c} does not wait for the copy of its rows")
    joined = {w[2] for w in log if w[:2] == ("main", "wait")}
    for s in ["s0", "s1", "s2", "copy"]:
        last = [r[2] for r in log if r[:2] == (s, "record")][-1:]
        if not last or last[0] not in joined:
            sys.exit(f"chunked: the caller's stream is not joined to {s}'s end")
    if any(e[2] == (0, 100) for e in log if e[1] == "copy"):
        sys.exit("chunked: the first chunk's rows are local, not copied")


def main():
    script = sys.argv[1]
    r = dry_run(script)
    if r.returncode != 0:
        sys.exit(f"--dry-run failed: {r.stderr}")
    gemms = json.loads(r.stdout)["dry_run"]["gemms"]
    keys = ("model", "gemm", "method", "m", "k", "n", "splits", "gemm_streams")
    got = [tuple(g[k] for k in keys) for g in gemms]
    want = expected()
    if len(got) != len(set(got)) or set(got) != want:
        sys.exit(
            f"--dry-run plans {sorted(set(got) - want)} not wanted and misses "
            f"{sorted(want - set(got))}"
        )
    for g in gemms:
        if g["flops"] != 2 * g["m"] * g["k"] * g["n"]:
            sys.exit(f"{g['model']} {g['gemm']}: flops {g['flops']}")
    with tempfile.TemporaryDirectory() as d:
        empty = os.path.join(d, "records.json")
        with open(empty, "w") as f:
            f.write("[]")
        for args, needle in (
            (("--reps", "2"), "--reps"),
            (("--batch", "0"), "--batch"),
            (("--records", empty), "no record"),
        ):
            r = dry_run(script, *args)
            if r.returncode == 0 or needle not in r.stderr:
                sys.exit(
                    f"--dry-run {' '.join(args)}: want a refusal naming {needle}, got "
                    f"rc {r.returncode}: {r.stderr.strip()}"
                )

    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    import tp_split_gemm

    check_issue_order(tp_split_gemm)
    print(
        f"ok: --dry-run plans the {len(want)} GEMMs of the published shapes and refuses bad "
        f"input; chunks are issued on 3 streams after their copies, as TE issues them"
    )


if __name__ == "__main__":
    main()
