#!/usr/bin/env python3
"""torchtitan's TOML job config and model flavors at a pinned commit, as data (export/frameworks/).

torchtitan (up to v0.2.2, its last release configured by TOML files) reads `--job.config_file` with
tomllib and converts it with ConfigManager._dict_to_dataclass (torchtitan/config/manager.py), which
raises on any key that is not a field of the JobConfig dataclasses (torchtitan/config/job_config.py).
The model is `[model] name` (a module of torchtitan/models, `_supported_models`) and `flavor` (a
key of that module's `<name>_args` dict). This script records the dataclass tree (field, annotation,
default) and every flavor's constructor arguments with the ModelArgs defaults filled in, plus the
Hugging-Face-equivalent shape of each flavor, computed as the model code computes it (cited below).

Usage: extract_torchtitan.py GIT_DIR COMMIT > export/frameworks/torchtitan.json
"""
import ast
import json
import math
import sys

from common import git_show, header, class_defs, dataclass_fields, call_kwargs, literal

JOB = "torchtitan/config/job_config.py"
MODELS = "torchtitan/models/__init__.py"
# module -> (flavor dict name in __init__.py, ModelArgs file)
MODULES = {
    "llama3": ("llama3_args", "torchtitan/models/llama3/model/args.py"),
    "qwen3": ("qwen3_args", "torchtitan/models/qwen3/model/args.py"),
    "deepseek_v3": ("deepseekv3_args", "torchtitan/models/deepseek_v3/model/args.py"),
    "llama4": ("llama4_args", "torchtitan/models/llama4/model/args.py"),
    "gpt_oss": ("gptoss_args", "torchtitan/models/gpt_oss/model/args.py"),
}
MOE_ARGS = "torchtitan/models/moe/moe.py"


def job_tree(src):
    classes = class_defs(src)
    def tree(name):
        out = {}
        for f in dataclass_fields(classes[name], classes):
            ann = f["annotation"]
            if ann in classes:
                out[f["name"]] = {"section": tree(ann)}
            else:
                out[f["name"]] = {"annotation": ann, "default": f.get("default")}
        return out
    return tree("JobConfig")


def defaults(src, cls):
    classes = class_defs(src)
    return {f["name"]: f.get("default") for f in dataclass_fields(classes[cls], classes)}


def flavors(src, dict_name):
    for node in ast.walk(ast.parse(src)):
        if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == dict_name and isinstance(node.value, ast.Dict)):
            out = {}
            for k, v in zip(node.value.keys, node.value.values):
                out[literal(k)] = {"call": ast.unparse(v.func), "kwargs": call_kwargs(v)}
            return out
    return {}


def llama_ffn(dim, multiple_of, ffn_dim_multiplier):
    # torchtitan/models/llama3/model/model.py FeedForward: hidden = 4·dim, int(2·hidden/3), times
    # ffn_dim_multiplier, rounded up to a multiple of multiple_of.
    hidden = int(2 * (4 * dim) / 3)
    if ffn_dim_multiplier is not None:
        hidden = int(ffn_dim_multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def shape(module, a, moe_defaults):
    """The flavor in Hugging Face config terms (what scaleplan's ModelSpec reads)."""
    moe = dict(moe_defaults)
    if isinstance(a.get("moe_args"), dict) and "kwargs" in a["moe_args"]:
        moe.update(a["moe_args"]["kwargs"])
    if module == "llama3":
        kv = a["n_kv_heads"] or a["n_heads"]
        return {"hidden_size": a["dim"], "num_hidden_layers": a["n_layers"],
                "num_attention_heads": a["n_heads"], "num_key_value_heads": kv,
                "head_dim": a["dim"] // a["n_heads"],
                "intermediate_size": llama_ffn(a["dim"], a["multiple_of"], a["ffn_dim_multiplier"]),
                "vocab_size": a["vocab_size"], "rope_theta": a["rope_theta"],
                "rms_norm_eps": a["norm_eps"],
                # precompute_freqs_cis always applies RoPEScalingArgs (Llama 3.1's scaling).
                "rope_scaling": {"rope_type": "llama3",
                                 "factor": a["rope_scaling_args"]["kwargs"].get("scaling_factor", 8.0)
                                 if isinstance(a["rope_scaling_args"], dict)
                                 and "kwargs" in a["rope_scaling_args"] else 8.0}}
    if module == "qwen3":
        s = {"hidden_size": a["dim"], "num_hidden_layers": a["n_layers"],
             "num_attention_heads": a["n_heads"], "num_key_value_heads": a["n_kv_heads"],
             "head_dim": a["head_dim"], "vocab_size": a["vocab_size"],
             "rope_theta": a["rope_theta"], "rms_norm_eps": a["norm_eps"],
             "tie_word_embeddings": a["enable_weight_tying"]}
        if a["moe_enabled"]:
            s.update({"num_experts": moe["num_experts"], "num_experts_per_tok": moe["top_k"],
                      "moe_intermediate_size": a["moe_inter_dim"]})
        else:
            s["intermediate_size"] = a["hidden_dim"]
        return s
    if module == "deepseek_v3":
        return {"hidden_size": a["dim"], "num_hidden_layers": a["n_layers"],
                "num_attention_heads": a["n_heads"], "intermediate_size": a["inter_dim"],
                "vocab_size": a["vocab_size"], "moe_intermediate_size": a["moe_inter_dim"],
                "first_k_dense_replace": a["n_dense_layers"],
                "n_routed_experts": moe["num_experts"], "n_shared_experts": moe["num_shared_experts"],
                "num_experts_per_tok": moe["top_k"], "n_group": moe.get("num_expert_groups"),
                "topk_group": moe.get("num_limited_groups"),
                "scoring_func": moe["score_func"], "routed_scaling_factor": moe["route_scale"],
                "q_lora_rank": a["q_lora_rank"], "kv_lora_rank": a["kv_lora_rank"],
                "qk_nope_head_dim": a["qk_nope_head_dim"], "qk_rope_head_dim": a["qk_rope_head_dim"],
                "v_head_dim": a["v_head_dim"], "rope_theta": a["rope_theta"],
                "rms_norm_eps": a["norm_eps"]}
    return None


def main():
    git_dir, commit = sys.argv[1], sys.argv[2]
    job_src = git_show(git_dir, commit, JOB)
    supported = None
    for node in ast.walk(ast.parse(git_show(git_dir, commit, MODELS))):
        if isinstance(node, ast.Assign) and node.targets[0].id == "_supported_models":
            supported = sorted(literal(node.value.args[0]))
    moe_defaults = defaults(git_show(git_dir, commit, MOE_ARGS), "MoEArgs")
    models = {}
    files = [JOB, MODELS, MOE_ARGS]
    for module, (dict_name, args_file) in MODULES.items():
        init = f"torchtitan/models/{module}/__init__.py"
        files += [init, args_file]
        args_src = git_show(git_dir, commit, args_file)
        fl = flavors(git_show(git_dir, commit, init), dict_name)
        out = {}
        for name, f in fl.items():
            cls = f["call"]
            a = defaults(args_src, cls)
            a.update(f["kwargs"])
            out[name] = {"args_class": cls, "args": a, "hf_shape": shape(module, a, moe_defaults)}
        models[module] = out
    d = header("torchtitan", "pytorch/torchtitan", git_dir, commit, files,
               "scripts/framework_defs/extract_torchtitan.py")
    d["loader"] = ("tomllib.load, then ConfigManager._dict_to_dataclass: unknown keys raise "
                   "ValueError('Invalid field names ...')")
    d["job_config"] = job_tree(job_src)
    d["supported_models"] = supported
    d["flavors"] = models
    json.dump(d, sys.stdout, indent=1, default=str)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
