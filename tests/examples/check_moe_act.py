"""Checks examples/torch_reference/moe_act.py without PyTorch.

1. `--dry-run` plans GPT-OSS-120B's expert shape from the model's config: rows = mbs x seq x
   top-k (4 x 4096 x 4 = 65,536, the rows per rank of docs/simulator.md's GB200 GPT-OSS row),
   fc1's output 2 x intermediate_size wide, the clamp value `swiglu_limit`; it refuses a config
   without experts or a clamp, and a small shape that is not smaller.
2. The Megatron-core functions the script copied (fused_bias_swiglu.py, fused_bias_geglu.py at
   Megatron-LM b0cc2706dd) are each other's derivatives: every `*_back` equals the finite
   difference of its forward (for the input and for the router's weights), on a small tensor
   type written here in plain Python, float64. A slip in the copy fails here, before a GPU
   session spends its minutes on it.

Usage: check_moe_act.py SCRIPT PRESETS_DIR
"""

import json
import os
import subprocess
import sys
import types


class T:
    """A [rows, cols] float64 tensor with column broadcasting: what the copied functions use."""

    dtype = "float64"

    def __init__(self, rows):
        self.v = [list(map(float, r)) for r in rows]

    def to(self, dtype):
        return self

    def _zip(self, o, f):
        if not isinstance(o, T):
            return T([[f(a, o) for a in r] for r in self.v])
        out = []
        for r, s in zip(self.v, o.v):
            if len(s) == 1:
                s = s * len(r)
            if len(r) == 1:
                r = r * len(s)
            out.append([f(a, b) for a, b in zip(r, s)])
        return T(out)

    def __add__(self, o):
        return self._zip(o, lambda a, b: a + b)

    def __sub__(self, o):
        return self._zip(o, lambda a, b: a - b)

    def __mul__(self, o):
        return self._zip(o, lambda a, b: a * b)

    __radd__, __rmul__ = __add__, __mul__

    def __rsub__(self, o):
        return self._zip(o, lambda a, b: b - a)

    def map(self, f):
        return T([[f(a) for a in r] for r in self.v])


def fake_torch():
    import math

    def sigmoid(x):
        return x.map(lambda a: 1 / (1 + math.exp(-a)))

    def chunk(y, n, dim=-1):
        assert n == 2 and dim == -1
        h = len(y.v[0]) // 2
        return T([r[:h] for r in y.v]), T([r[h:] for r in y.v])

    def cat(ts, dim=-1):
        assert dim == -1
        return T([[a for t in ts for a in t.v[i]] for i in range(len(ts[0].v))])

    def tsum(x, dim=-1, keepdim=False):
        assert dim == -1 and keepdim
        return T([[sum(r)] for r in x.v])

    functional = types.SimpleNamespace(silu=lambda x: x * sigmoid(x))
    return types.SimpleNamespace(
        chunk=chunk,
        cat=cat,
        sigmoid=sigmoid,
        sum=tsum,
        nn=types.SimpleNamespace(functional=functional),
    )


def finite_difference(f, x, i, j, eps=1e-6):
    up, down = T(x.v), T(x.v)
    up.v[i][j] += eps
    down.v[i][j] -= eps
    return (f(up) - f(down)) / (2 * eps)


def check_gradients(fns):
    # y [2, 6] (ffn 3), weights [2, 1], upstream g [2, 3]; loss = sum(out * g).
    y = T([[0.3, -1.2, 2.0, 0.7, -0.4, 1.5], [-2.2, 0.9, 0.1, -0.6, 1.3, 0.05]])
    w = T([[0.7], [0.25]])
    g = T([[1.0, -0.5, 0.3], [0.2, 0.8, -1.1]])

    def loss(out):
        return sum(a * b for r, s in zip(out.v, g.v) for a, b in zip(r, s))

    cases = [
        (
            "weighted_swiglu",
            lambda y, w: fns["weighted_swiglu"](y, w),
            lambda: fns["weighted_swiglu_back"](g, y, w),
        ),
        (
            "weighted_quick_geglu",
            lambda y, w: fns["weighted_quick_geglu"](y, w, 1.0),
            lambda: fns["weighted_quick_geglu_back"](g, y, w, 1.0),
        ),
        (
            "swiglu (dense)",
            lambda y, w: fns["weighted_swiglu"](y, T([[1.0], [1.0]])),
            lambda: (fns["swiglu_back"](g, y), None),
        ),
    ]
    worst = 0.0
    for name, fwd, back in cases:
        dy, dw = back()
        for i in range(2):
            for j in range(6):
                want = finite_difference(lambda t, f=fwd: loss(f(t, w)), y, i, j)
                worst = max(worst, abs(dy.v[i][j] - want))
                if abs(dy.v[i][j] - want) > 1e-6 * max(1.0, abs(want)):
                    sys.exit(f"{name}: d/dy[{i}][{j}] = {dy.v[i][j]}, finite difference {want}")
            if dw is not None:
                want = finite_difference(lambda t, f=fwd: loss(f(y, t)), w, i, 0)
                if abs(dw.v[i][0] - want) > 1e-6 * max(1.0, abs(want)):
                    sys.exit(f"{name}: d/dw[{i}] = {dw.v[i][0]}, finite difference {want}")
    return worst


def dry_run(script, *args):
    return subprocess.run(
        [sys.executable, script, "out.json", "--dry-run", *args],
        check=False,
        capture_output=True,
        text=True,
    )


def main():
    script, presets = sys.argv[1:3]
    with open(os.path.join(presets, "gpt-oss-120b.json")) as f:
        cfg = json.load(f)
    r = dry_run(script)
    if r.returncode != 0:
        sys.exit(f"--dry-run failed: {r.stderr}")
    plan = json.loads(r.stdout)["dry_run"]
    rows = 4 * 4096 * cfg["num_experts_per_tok"]  # mbs 4 x seq 4096 x top-k, the defaults
    want = {
        "rows": [rows, 8192],
        "fc1_cols": 2 * cfg["intermediate_size"],
        "clamp_value": cfg["swiglu_limit"],
        "linear_offset": 1.0,
    }
    got = {k: plan[k] for k in want}
    if got != want:
        sys.exit(f"--dry-run plan {got}, want {want}")
    r = dry_run(script, "--mbs", "1")
    if json.loads(r.stdout)["dry_run"]["rows"][0] != rows // 4:
        sys.exit("--mbs 1 did not scale the rows by 1/4")
    for args, needle in (
        (("--model", os.path.join(presets, "llama3-8b.json")), "num_experts_per_tok"),
        (("--small-rows", str(rows)), "--small-rows"),
        (("--reps", "2"), "--reps"),
    ):
        r = dry_run(script, *args)
        if r.returncode == 0 or needle not in r.stderr:
            sys.exit(
                f"--dry-run {' '.join(args)}: want a refusal naming {needle}, got "
                f"rc {r.returncode}: {r.stderr.strip()}"
            )

    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    import moe_act

    worst = check_gradients(moe_act.megatron_functions(fake_torch()))
    print(
        f"ok: --dry-run plans {rows} x {want['fc1_cols']} and refuses bad input; the copied "
        f"backward functions match finite differences (worst {worst:.1e})"
    )


if __name__ == "__main__":
    main()
