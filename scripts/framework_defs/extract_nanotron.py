#!/usr/bin/env python3
"""nanotron's YAML config schema at a pinned commit, as data (export/frameworks/).

nanotron's trainer reads its YAML with get_config_from_file (src/nanotron/config/config.py):
yaml.load(SafeLoader), then dacite.from_dict(Config, strict=True), which raises on a missing
required field and on any key that is not a field. This script records every dataclass of the
config modules (field, annotation, required, default), the Enum members that dacite's type hooks
accept, and the attention implementations (ALL_ATTENTION_FUNCTIONS in src/nanotron/nn/attention.py).

Usage: extract_nanotron.py GIT_DIR COMMIT > export/frameworks/nanotron.json
"""
import ast
import json
import sys

from common import git_show, header, class_defs, dataclass_fields, literal

FILES = ["src/nanotron/config/config.py", "src/nanotron/config/parallelism_config.py",
         "src/nanotron/config/models_config.py", "src/nanotron/config/utils_config.py",
         "src/nanotron/config/lighteval_config.py"]
ATTN = "src/nanotron/nn/attention.py"


def main():
    git_dir, commit = sys.argv[1], sys.argv[2]
    classes, enums = {}, {}
    all_defs = {}
    for f in FILES:
        all_defs.update(class_defs(git_show(git_dir, commit, f)))
    for name, node in all_defs.items():
        bases = [ast.unparse(b) for b in node.bases]
        if any("Enum" in b for b in bases):
            enums[name] = [s.targets[0].id for s in node.body
                           if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name)]
            continue
        decorated = any("dataclass" in ast.unparse(d) for d in node.decorator_list)
        if decorated:
            classes[name] = dataclass_fields(node, all_defs)
    attn = []
    for node in ast.walk(ast.parse(git_show(git_dir, commit, ATTN))):
        if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "ALL_ATTENTION_FUNCTIONS"):
            attn = [literal(k) for k in node.value.keys]
    unions = {}
    for node in ast.walk(ast.parse(git_show(git_dir, commit, "src/nanotron/config/models_config.py"))):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id == "NanotronConfigs":
            unions["NanotronConfigs"] = ast.unparse(node.value)
    d = header("nanotron", "huggingface/nanotron", git_dir, commit, FILES + [ATTN],
               "scripts/framework_defs/extract_nanotron.py")
    d["loader"] = "yaml SafeLoader, then dacite.from_dict(Config, strict=True) with type hooks"
    d["dataclasses"] = classes
    d["enums"] = enums
    d["aliases"] = unions
    d["attention_implementations"] = attn
    d["pipeline_engines"] = ["afab", "1f1b"]  # utils_config.cast_str_to_pipeline_engine
    json.dump(d, sys.stdout, indent=1, default=str)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
