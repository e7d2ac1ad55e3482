"""Checks the reference training step (examples/torch_reference/torch_step.py) without PyTorch.

It stands for torchtitan's single-GPU step, which `simulate --framework torchtitan` predicts, so it
must hold no tensor torchtitan does not: torchtitan deletes the model's output before the backward
(torchtitan train.py:540-541 at v0.2.2, "need to free pred before bwd to avoid peaking memory").
The script's `step` must therefore `del` the name bound to the model's output before it calls
`.backward()` in the same loop body. Also runs `--dry-run`, which needs neither PyTorch nor a GPU.
Usage: check_torch_reference.py SCRIPT
"""
import ast
import json
import subprocess
import sys
import tempfile


def step_function(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "step":
            return node
    sys.exit("no function `step` in the reference script")


def output_name(loop):
    """The name assigned from calling the model (`m(...)`) inside the loop's autocast block."""
    for node in ast.walk(loop):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name) and node.value.func.id == "m"):
            return node.targets[0].id
    sys.exit("the micro-batch loop does not call the model `m`")


def main():
    script = sys.argv[1]
    tree = ast.parse(open(script).read())
    loops = [n for n in ast.walk(step_function(tree)) if isinstance(n, ast.For)]
    if not loops:
        sys.exit("`step` has no micro-batch loop")
    loop = loops[0]
    out = output_name(loop)
    deleted_at, backward_at = None, None
    for i, stmt in enumerate(loop.body):
        if isinstance(stmt, ast.Delete) and any(
                isinstance(t, ast.Name) and t.id == out for t in stmt.targets):
            deleted_at = i
        for n in ast.walk(stmt):
            if isinstance(n, ast.Attribute) and n.attr == "backward" and backward_at is None:
                backward_at = i
    if backward_at is None:
        sys.exit("the micro-batch loop calls no .backward()")
    if deleted_at is None or deleted_at > backward_at:
        sys.exit(f"`{out}` (the model's output) is alive through .backward(): torchtitan frees it "
                 "first (train.py:540-541 at v0.2.2)")
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([sys.executable, script, d, "--dry-run"], capture_output=True,
                           text=True, check=True)
        plan = json.loads(r.stdout)["dry_run"]
        if plan["layout"] != "tp=1,pp=1,dp=1,mbs=1,gbs=4":
            sys.exit(f"--dry-run layout {plan['layout']!r}: want the default mbs=1, gas=4")
    print(f"ok: `{out}` freed before .backward(); --dry-run works without PyTorch")


if __name__ == "__main__":
    main()
