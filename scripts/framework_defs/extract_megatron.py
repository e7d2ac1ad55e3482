#!/usr/bin/env python3
"""Megatron-LM's command-line options at a pinned commit, as data (export/frameworks/).

pretrain_gpt.py parses its command line with megatron/training/arguments.py: literal
`add_argument` calls, plus groups that `ArgumentGroupFactory` (megatron/training/argument_utils.py)
generates from config dataclasses (TransformerConfig and its base ModelParallelConfig,
TrainingConfig, ...). Running that code needs torch and a GPU build of Megatron-core, so this script
reads the source instead and applies ArgumentGroupFactory's rules to the dataclass fields:
  --field-name; bool defaulting to False -> store_true; any other bool default -> store_false under
  --no-field-name and --disable-field-name; Optional[X] -> X; list[X] -> nargs '+'; Literal ->
  choices; Enum -> choices by member name; field(metadata={"argparse_meta": {...}}) overrides all
  (arg_names, type, nargs, default, ...); init=False fields and the factory's `exclude` are skipped.

Usage: extract_megatron.py GIT_DIR COMMIT > export/frameworks/megatron-lm.json
"""
import ast
import json
import subprocess
import sys

from common import git_show, git_grep_class, literal, value, header

ARGS = "megatron/training/arguments.py"


def enum_members(cls_node):
    names = []
    for stmt in cls_node.body:
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                if isinstance(t, ast.Name) and not t.id.startswith("_"):
                    names.append(t.id)
    return names


class Resolver:
    """Finds a class by name in the tree at the commit and parses it."""

    def __init__(self, git_dir, commit):
        self.git_dir, self.commit = git_dir, commit
        self.cache = {}

    def find(self, name):
        if name in self.cache:
            return self.cache[name]
        hits = git_grep_class(self.git_dir, self.commit, name, "megatron/")
        node = path = None
        for p in hits:
            tree = ast.parse(git_show(self.git_dir, self.commit, p))
            for n in tree.body:
                if isinstance(n, ast.ClassDef) and n.name == name:
                    node, path = n, p
                    break
            if node:
                break
        self.cache[name] = (node, path)
        return node, path

    def is_enum(self, name):
        node, _ = self.find(name)
        if node is None:
            return False
        for b in node.bases:
            bn = b.id if isinstance(b, ast.Name) else getattr(b, "attr", "")
            if "Enum" in bn:
                return True
            if isinstance(b, ast.Name) and self.is_enum(b.id):
                return True
        return False


def type_name(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Lambda):
        return "lambda"
    if isinstance(node, ast.Call):
        return type_name(node.func) + "()"
    return ast.unparse(node)


def extract_type(ann, res):
    """ArgumentGroupFactory._extract_type on an annotation AST: dict of type/nargs/choices, or
    None where the factory raises TypeInferenceError."""
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        ann = ast.parse(ann.value, mode="eval").body
    if isinstance(ann, ast.Name) or isinstance(ann, ast.Attribute):
        name = type_name(ann)
        if name in ("int", "float", "str", "bool"):
            return {"type": name}
        if res.is_enum(name):
            node, _ = res.find(name)
            return {"type": "enum", "choices": enum_members(node)}
        return {"type": name}
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        # X | None
        if isinstance(ann.right, ast.Constant) and ann.right.value is None:
            return extract_type(ann.left, res)
        return None
    if isinstance(ann, ast.Subscript):
        head = type_name(ann.value)
        args = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        if head == "Optional":
            return extract_type(args[0], res)
        if head == "Union":
            if len(args) == 2 and isinstance(args[1], ast.Constant) and args[1].value is None:
                return extract_type(args[0], res)
            return None
        if head in ("list", "List"):
            if len(args) != 1:
                return None
            inner = extract_type(args[0], res)
            if inner is None:
                return None
            inner = dict(inner)
            inner["nargs"] = "+"
            return inner
        if head == "Literal":
            vals = [literal(a) for a in args]
            return {"type": type(vals[0]).__name__, "choices": vals}
        return None
    return None


def field_default(node_value):
    """(default, has_default, init, metadata) of a dataclass field's right-hand side."""
    if node_value is None:
        return None, False, True, None
    if isinstance(node_value, ast.Call) and type_name(node_value.func) == "field":
        kw = {k.arg: k.value for k in node_value.keywords}
        init = True
        if "init" in kw and isinstance(kw["init"], ast.Constant):
            init = kw["init"].value
        meta = None
        if "metadata" in kw and isinstance(kw["metadata"], ast.Dict):
            for k, v in zip(kw["metadata"].keys, kw["metadata"].values):
                if literal(k) == "argparse_meta":
                    meta = v
        if "default" in kw:
            return value(kw["default"]), True, init, meta
        if "default_factory" in kw:
            f = kw["default_factory"]
            if isinstance(f, ast.Name) and f.id in ("list", "dict"):
                return ([] if f.id == "list" else {}), True, init, meta
            if isinstance(f, ast.Lambda):
                return value(f.body), True, init, meta
            return "<factory>", True, init, meta
        return None, False, init, meta
    return value(node_value), True, True, None


def dataclass_fields(name, res, seen=None):
    """Fields in dataclasses.fields() order: the base class's first."""
    node, path = res.find(name)
    if node is None:
        raise SystemExit(f"class {name} not found")
    out = []
    for b in node.bases:
        if isinstance(b, ast.Name) and b.id not in ("object",) and res.find(b.id)[0] is not None:
            if not res.is_enum(b.id):
                out = dataclass_fields(b.id, res)
                break
    by_name = {f["name"]: i for i, f in enumerate(out)}
    for stmt in node.body:
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
            continue
        ann_text = ast.unparse(stmt.annotation)
        if ann_text.startswith("ClassVar") or ann_text.startswith("InitVar"):
            continue
        default, has_default, init, meta = field_default(stmt.value)
        f = {"name": stmt.target.id, "annotation": stmt.annotation, "default": default,
             "has_default": has_default, "init": init, "meta": meta,
             "source": f"{path}:{stmt.lineno}"}
        if f["name"] in by_name:
            out[by_name[f["name"]]] = f
        else:
            by_name[f["name"]] = len(out)
            out.append(f)
    return out


def flag(name, prefix=None):
    n = name if not prefix else prefix + "_" + name
    return "--" + n.replace("_", "-")


def factory_options(cls, exclude, res):
    opts = []
    for f in dataclass_fields(cls, res):
        if f["name"] in exclude or not f["init"]:
            continue
        o = {"flags": [flag(f["name"])], "dest": f["name"], "action": "store",
             "default": f["default"], "source": f["source"]}
        inferred = extract_type(f["annotation"], res)
        if inferred is not None:
            o.update(inferred)
            if o.get("type") == "bool":
                o["action"] = "store_true" if f["default"] is False else "store_false"
                del o["type"]
                if o["action"] == "store_false":
                    o["flags"] = [flag(f["name"], "no"), flag(f["name"], "disable")]
        elif f["meta"] is None:
            raise SystemExit(f"{cls}.{f['name']}: the factory cannot infer a type: "
                             f"{ast.unparse(f['annotation'])}")
        if f["meta"] is not None:
            for k, v in zip(f["meta"].keys, f["meta"].values):
                key = literal(k)
                if key == "arg_names":
                    o["flags"] = literal(v)
                elif key == "type":
                    o["type"] = type_name(v)
                elif key in ("action", "nargs", "default", "dest", "const"):
                    o[key] = value(v)
                elif key == "choices":
                    try:
                        o["choices"] = literal(v)
                    except ValueError:
                        o["choices"] = None
        if o["action"] in ("store_true", "store_false"):
            o.pop("type", None)
            o.pop("nargs", None)
        opts.append(o)
    return opts


def call_options(call, path):
    flags = []
    for a in call.args:
        if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-"):
            flags.append(a.value)
    if not flags:
        return None
    o = {"flags": flags, "action": "store", "source": f"{path}:{call.lineno}"}
    for k in call.keywords:
        if k.arg == "action":
            o["action"] = literal(k.value) if isinstance(k.value, ast.Constant) else type_name(k.value)
        elif k.arg == "type":
            o["type"] = type_name(k.value)
        elif k.arg in ("nargs", "dest", "const"):
            o[k.arg] = value(k.value)
        elif k.arg == "default":
            o["default"] = value(k.value)
        elif k.arg == "choices":
            try:
                o["choices"] = literal(k.value)
            except ValueError:
                o["choices"] = None  # computed: not checked
    if "dest" not in o:
        long = [f for f in flags if f.startswith("--")]
        o["dest"] = (long[0] if long else flags[0]).lstrip("-").replace("-", "_")
    return o


def literal_list(node):
    try:
        return literal(node)
    except ValueError:
        return []


def main():
    git_dir, commit = sys.argv[1], sys.argv[2]
    res = Resolver(git_dir, commit)
    src = git_show(git_dir, commit, ARGS)
    tree = ast.parse(src)
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    # The option builders add_megatron_arguments calls, in its order.
    order = []
    for n in ast.walk(funcs["add_megatron_arguments"]):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in funcs:
            order.append(n.func.id)
    order.sort(key=lambda name: funcs[name].lineno)  # stable; order does not matter to argparse
    options = []
    for name in order:
        fn = funcs[name]
        for n in ast.walk(fn):
            if not isinstance(n, ast.Call):
                continue
            if isinstance(n.func, ast.Attribute) and n.func.attr == "add_argument":
                o = call_options(n, ARGS)
                if o:
                    o["group"] = name
                    options.append(o)
            elif isinstance(n.func, ast.Name) and n.func.id == "ArgumentGroupFactory":
                cls = type_name(n.args[0])
                exclude = []
                for k in n.keywords:
                    if k.arg == "exclude":
                        if isinstance(k.value, ast.Name):
                            # exclude = [...] assigned earlier in the function
                            for s in ast.walk(fn):
                                if (isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name)
                                        and s.targets[0].id == k.value.id):
                                    exclude = literal_list(s.value)
                        else:
                            exclude = literal_list(k.value)
                for o in factory_options(cls, set(exclude), res):
                    o["group"] = f"{name} ({cls})"
                    options.append(o)
    seen = {}
    for o in options:
        for f in o["flags"]:
            if f in seen:
                raise SystemExit(f"{f} defined twice: {seen[f]} and {o['source']}")
            seen[f] = o["source"]
    out = header("Megatron-LM", "NVIDIA/Megatron-LM", git_dir, commit,
                 [ARGS, "megatron/training/argument_utils.py"],
                 "scripts/framework_defs/extract_megatron.py")
    out["parser"] = {"allow_abbrev": False, "entry": "pretrain_gpt.py"}
    out["options"] = options
    json.dump(out, sys.stdout, indent=1, default=str)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
