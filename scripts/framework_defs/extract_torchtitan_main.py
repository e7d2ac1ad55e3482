#!/usr/bin/env python3
"""Current torchtitan's configuration surface at a pinned commit, as data (export/frameworks/).

Since pull request 2386 ("Config System Refactor: TOML to Python Dataclass Registry") torchtitan
reads no TOML: a run is a Python function returning `Trainer.Config` (torchtitan/trainer.py),
chosen when `./run_train.sh` starts by MODULE (the module that defines it, `--module`) and CONFIG
(the function, `--config`); torchtitan/config/README.md at the pin. A config function derives
from a shipped one (`torchtitan.models.<model>.config_registry`) and sets dataclass fields. Running
that needs torch and a GPU, so this script reads the source instead:

  trainer_config   Trainer.Config's fields (name, annotation, default);
  sections         the dataclasses of the sections an export sets (training: TrainingConfig,
                   parallelism: ParallelismConfig, compile: CompileConfig; torchtitan/config/
                   configs.py), each field with its annotation, default and Literal choices;
                   dataclasses with slots=True refuse an attribute that is not a field;
  activation_checkpoint   the AC config classes (torchtitan/distributed/activation_checkpoint.py)
                   a config may assign to Trainer.Config.activation_checkpoint;
  config_functions  every function of each model's config_registry.py, with the flavor its
                   model_registry(...) call names;
  model_registry   each model module's model_registry parameters (e.g. num_mtp_layers);
  supported_models the model modules (torchtitan/models/<name>/ with a config_registry.py);
  quantization_names  what torchtitan.components.quantization exports (the fp8 converter);
  flavors          the shape of each flavor of llama3 and deepseek_v3, as Hugging Face config
                   keys (hf_shape), computed from the flavor functions as the model code computes
                   it (compute_ffn_hidden_dim, models/common/feed_forward.py; RMSNorm's default
                   eps, models/common/nn_modules.py).

Usage: extract_torchtitan_main.py GIT_DIR COMMIT > export/frameworks/torchtitan-main.json
"""
import ast
import json
import subprocess
import sys

from common import git_show, header, value

CONFIGS = "torchtitan/config/configs.py"
TRAINER = "torchtitan/trainer.py"
AC = "torchtitan/distributed/activation_checkpoint.py"
FLAVOR_MODULES = {"llama3": "llama3_configs", "deepseek_v3": "deepseekv3_configs"}


def fields(cls):
    out = []
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            ann = ast.unparse(stmt.annotation)
            if ann.startswith("ClassVar"):
                continue
            f = {"name": stmt.target.id, "annotation": ann}
            v = stmt.value
            if isinstance(v, ast.Call) and ast.unparse(v.func) == "field":
                kw = {k.arg: k.value for k in v.keywords}
                if "default" in kw:
                    f["default"] = value(kw["default"])
                elif "default_factory" in kw:
                    f["default"] = {"factory": ast.unparse(kw["default_factory"])}
            elif v is not None:
                f["default"] = value(v)
            lit = [n for n in ast.walk(stmt.annotation) if isinstance(n, ast.Subscript)
                   and ast.unparse(n.value) == "Literal"]
            if lit:
                s = lit[0].slice
                f["choices"] = [ast.literal_eval(e) for e in (s.elts if isinstance(s, ast.Tuple) else [s])]
            out.append(f)
    return out


def top_classes(src):
    return {n.name: n for n in ast.parse(src).body if isinstance(n, ast.ClassDef)}


def nested(cls, name):
    return next(n for n in cls.body if isinstance(n, ast.ClassDef) and n.name == name)


def evaluate(node, env):
    """A flavor function's arithmetic on its locals (dim // n_heads, 4096 * 4, ...)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.BinOp):
        a, b = evaluate(node.left, env), evaluate(node.right, env)
        ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
               ast.FloorDiv: lambda: a // b, ast.Div: lambda: a / b}
        return ops[type(node.op)]()
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -evaluate(node.operand, env)
    if isinstance(node, ast.Call) and ast.unparse(node.func) == "compute_ffn_hidden_dim":
        # models/common/feed_forward.py compute_ffn_hidden_dim at the pin.
        dim = evaluate(node.args[0], env)
        kw = {k.arg: evaluate(k.value, env) for k in node.keywords}
        hidden = int(2 * 4 * dim / 3)
        if kw.get("ffn_dim_multiplier") is not None:
            hidden = int(kw["ffn_dim_multiplier"] * hidden)
        m = kw.get("multiple_of", 1)
        return m * ((hidden + m - 1) // m)
    raise ValueError(ast.unparse(node))


def flavor_values(fn):
    """The flavor function's locals and every keyword argument it passes, evaluated."""
    env = {}
    for a in fn.args.args + fn.args.kwonlyargs:
        env[a.arg] = None
    for stmt in fn.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
            try:
                env[stmt.targets[0].id] = evaluate(stmt.value, env)
            except (ValueError, KeyError):
                pass
    kwargs = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Call):
            for k in n.keywords:
                if k.arg is None:
                    continue
                try:
                    kwargs.setdefault(k.arg, evaluate(k.value, env))
                except (ValueError, KeyError):
                    pass
    return env, kwargs


def hf_shape(module, env, kw):
    def get(name, *alts):
        for n in (name,) + alts:
            if env.get(n) is not None:
                return env[n]
            if kw.get(n) is not None:
                return kw[n]
        return None
    rope = {"rope_type": "llama3"} if kw.get("scaling") == "llama" else (
        {"rope_type": kw["scaling"]} if kw.get("scaling") not in (None, "none") else None)
    if module == "llama3":
        dim, heads = get("dim"), get("n_heads")
        return {"hidden_size": dim, "num_hidden_layers": get("n_layers"),
                "num_attention_heads": heads, "num_key_value_heads": get("n_kv_heads") or heads,
                "head_dim": dim // heads, "intermediate_size": get("hidden_dim"),
                "vocab_size": get("vocab_size"), "rope_theta": get("theta"),
                "rms_norm_eps": 1e-5, "rope_scaling": rope}
    if module == "deepseek_v3":
        return {"hidden_size": get("dim"), "num_hidden_layers": get("n_layers"),
                "num_attention_heads": get("n_heads"), "intermediate_size": get("dense_hidden_dim"),
                "vocab_size": get("vocab_size"), "moe_intermediate_size": get("moe_hidden_dim"),
                "first_k_dense_replace": get("n_dense_layers"),
                "n_routed_experts": get("num_experts"), "n_shared_experts": get("num_shared_experts"),
                "num_experts_per_tok": get("router_top_k"),
                "n_group": get("router_num_expert_groups"),
                "topk_group": get("router_num_limited_groups"),
                "scoring_func": get("router_score_func"),
                "routed_scaling_factor": get("router_route_scale"),
                "q_lora_rank": get("q_lora_rank"), "kv_lora_rank": get("kv_lora_rank"),
                "qk_nope_head_dim": get("qk_nope_head_dim"),
                "qk_rope_head_dim": get("qk_rope_head_dim", "rope_dim"),
                "v_head_dim": get("v_head_dim"), "rope_theta": get("theta"),
                "rms_norm_eps": 1e-5}
    return None


def main():
    git_dir, commit = sys.argv[1:3]
    ls = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "-r", "--name-only", commit],
                        check=True, capture_output=True, text=True).stdout.split()
    cfg_classes = top_classes(git_show(git_dir, commit, CONFIGS))
    trainer = top_classes(git_show(git_dir, commit, TRAINER))["Trainer"]
    tcfg = nested(trainer, "Config")
    sections = {"training": "TrainingConfig", "parallelism": "ParallelismConfig",
                "compile": "CompileConfig", "comm": "CommConfig", "debug": "DebugConfig"}
    ac = top_classes(git_show(git_dir, commit, AC))
    ac_configs = {}
    for name, cls in ac.items():
        inner = [n for n in cls.body if isinstance(n, ast.ClassDef) and n.name == "Config"]
        if inner:
            ac_configs[f"{name}.Config"] = {"fields": fields(inner[0]),
                                            "bases": [ast.unparse(b) for b in inner[0].bases]}
    models = sorted({p.split("/")[2] for p in ls if p.startswith("torchtitan/models/")
                     and p.endswith("/config_registry.py") and p.count("/") == 3})
    functions, registries, flavors = {}, {}, {}
    for m in models:
        tree = ast.parse(git_show(git_dir, commit, f"torchtitan/models/{m}/config_registry.py"))
        functions[m] = {}
        for fn in tree.body:
            if not isinstance(fn, ast.FunctionDef) or fn.name.startswith("_"):
                continue
            flavor = None
            for c in ast.walk(fn):
                if isinstance(c, ast.Call) and ast.unparse(c.func) == "model_registry" and c.args:
                    try:
                        flavor = ast.literal_eval(c.args[0])
                    except ValueError:
                        pass
                    break
            functions[m][fn.name] = {"line": fn.lineno, "flavor": flavor,
                                     "calls": sorted({ast.unparse(c.func) for c in ast.walk(fn)
                                                      if isinstance(c, ast.Call)
                                                      and isinstance(c.func, ast.Name)}
                                                     & set(functions[m]))}
        init = ast.parse(git_show(git_dir, commit, f"torchtitan/models/{m}/__init__.py"))
        reg = [n for n in init.body if isinstance(n, ast.FunctionDef) and n.name == "model_registry"]
        if reg:
            a = reg[0].args
            registries[m] = [x.arg for x in a.args + a.kwonlyargs]
        if m in FLAVOR_MODULES:
            fns = {n.name: n for n in init.body if isinstance(n, ast.FunctionDef)}
            table = next(n.value for n in init.body if isinstance(n, ast.Assign)
                         and ast.unparse(n.targets[0]) == FLAVOR_MODULES[m])
            flavors[m] = {}
            for k, v in zip(table.keys, table.values):
                env, kw = flavor_values(fns[v.id])
                flavors[m][ast.literal_eval(k)] = {"function": v.id, "line": fns[v.id].lineno,
                                                   "hf_shape": hf_shape(m, env, kw)}
    out = header("torchtitan", "pytorch/torchtitan", git_dir, commit,
                 [CONFIGS, TRAINER, AC, "run_train.sh", "torchtitan/config/README.md",
                  "torchtitan/distributed/parallel_dims.py",
                  "torchtitan/distributed/pipeline_parallel.py"],
                 "scripts/framework_defs/extract_torchtitan_main.py")
    out["ref"] = commit[:7]
    out["launch"] = {"script": "run_train.sh", "module_variable": "MODULE",
                     "config_variable": "CONFIG",
                     "entry": "python -m torchtitan.train --module MODULE --config CONFIG"}
    out["trainer_config"] = fields(tcfg)
    out["sections"] = {s: fields(cfg_classes[c]) for s, c in sections.items()}
    out["activation_checkpoint"] = ac_configs
    out["supported_models"] = models
    out["model_registry"] = registries
    out["config_functions"] = functions
    out["flavors"] = flavors
    # What `from torchtitan.components.quantization import NAME` finds (its __init__.py).
    q = ast.parse(git_show(git_dir, commit, "torchtitan/components/quantization/__init__.py"))
    names = set()
    for n in q.body:
        if isinstance(n, ast.ImportFrom):
            names |= {a.asname or a.name for a in n.names}
        elif isinstance(n, (ast.ClassDef, ast.FunctionDef)):
            names.add(n.name)
    out["quantization_names"] = sorted(names)
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
