#!/usr/bin/env python3
"""DeepSpeed's ds_config.json keys at a pinned commit, as data (export/frameworks/).

deepspeed.initialize reads the JSON with DeepSpeedConfig (deepspeed/runtime/config.py): top-level
keys through get_scalar_param / param_dict lookups (names in deepspeed/runtime/constants.py; keys it
does not read are ignored), and sections through pydantic models derived from
DeepSpeedConfigModel, whose model_config has extra="forbid" (deepspeed/runtime/config_utils.py):
an unknown key there is an error. This script records the top-level keys it reads and the fields
(with aliases) of the pydantic sections scaleplan writes.

Usage: extract_deepspeed.py GIT_DIR COMMIT > export/frameworks/deepspeed.json
"""
import ast
import json
import sys

from common import git_show, header, literal

CONFIG = "deepspeed/runtime/config.py"
CONSTANTS = "deepspeed/runtime/constants.py"
SECTIONS = {  # key -> (file, pydantic class)
    "zero_optimization": ("deepspeed/runtime/zero/config.py", "DeepSpeedZeroConfig"),
    "bf16": ("deepspeed/runtime/precision_config.py", "DeepSpeedBF16Config"),
    "tensor_parallel": ("deepspeed/runtime/tensor_parallel/config.py", "TPTrainingConfig"),
}
ACT_CKPT = "deepspeed/runtime/activation_checkpointing/config.py"


def string_constants(src):
    out = {}
    for n in ast.parse(src).body:
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name):
            try:
                v = literal(n.value)
            except ValueError:
                continue
            if isinstance(v, str):
                out[n.targets[0].id] = v
    return out


def pydantic_fields(src, cls):
    node = next(n for n in ast.parse(src).body if isinstance(n, ast.ClassDef) and n.name == cls)
    out = {}
    for s in node.body:
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name):
            f = {"annotation": ast.unparse(s.annotation)}
            if isinstance(s.value, ast.Call) and ast.unparse(s.value.func) == "Field":
                for k in s.value.keywords:
                    if k.arg == "alias":
                        f["alias"] = literal(k.value)
                    if k.arg == "json_schema_extra":
                        f["deprecated"] = "deprecated" in ast.unparse(k.value)
            out[s.target.id] = f
    return out


def main():
    git_dir, commit = sys.argv[1], sys.argv[2]
    consts = string_constants(git_show(git_dir, commit, CONSTANTS))
    cfg = ast.parse(git_show(git_dir, commit, CONFIG))
    read = set()

    def key_of(node):
        if isinstance(node, ast.Name) and node.id in consts:
            return consts[node.id]
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        return None

    for n in ast.walk(cfg):
        # get_scalar_param(param_dict, KEY, default) / get_list_param / get_dict_param
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id.startswith("get_") \
                and len(n.args) >= 2 and isinstance(n.args[0], ast.Name) and n.args[0].id == "param_dict":
            k = key_of(n.args[1])
            if k:
                read.add(k)
        # param_dict.get(KEY ...)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get" \
                and isinstance(n.func.value, ast.Name) and n.func.value.id == "param_dict" and n.args:
            k = key_of(n.args[0])
            if k:
                read.add(k)
        # param_dict[KEY], KEY in param_dict
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == "param_dict":
            k = key_of(n.slice)
            if k:
                read.add(k)
        if isinstance(n, ast.Compare) and any(isinstance(o, ast.In) for o in n.ops):
            c = n.comparators[0]
            if (isinstance(c, ast.Name) and c.id == "param_dict") or (
                    isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                    and isinstance(c.func.value, ast.Name) and c.func.value.id == "param_dict"):
                k = key_of(n.left)
                if k:
                    read.add(k)
    sections = {}
    files = [CONFIG, CONSTANTS, ACT_CKPT]
    for key, (path, cls) in SECTIONS.items():
        files.append(path)
        sections[key] = {"class": cls, "extra": "forbid",
                         "fields": pydantic_fields(git_show(git_dir, commit, path), cls)}
    act = string_constants(git_show(git_dir, commit, ACT_CKPT))
    sections["activation_checkpointing"] = {
        "class": "DeepSpeedActivationCheckpointingConfig", "extra": "ignored",
        "fields": {v: {} for k, v in act.items() if not k.endswith("_DEFAULT")
                   and k.startswith("ACT_CHKPT_") and k != "ACT_CHKPT"}}
    d = header("DeepSpeed", "deepspeedai/DeepSpeed", git_dir, commit, files,
               "scripts/framework_defs/extract_deepspeed.py")
    d["loader"] = "json, then DeepSpeedConfig: top-level keys read by name; pydantic sections forbid extras"
    # The sections are read by their own getters (get_zero_config, get_bfloat16_config, ...).
    d["top_level_keys"] = sorted(read | set(sections))
    d["sections"] = sections
    json.dump(d, sys.stdout, indent=1, default=str)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
