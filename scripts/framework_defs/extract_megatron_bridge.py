#!/usr/bin/env python3
"""Megatron-Bridge's configuration surface at a pinned commit, as data (export/frameworks/).

Megatron-Bridge runs a recipe: `scripts/training/run_recipe.py --recipe NAME --mode pretrain
--dataset mock KEY=VALUE...`. The recipe function returns a `ConfigContainer`
(src/megatron/bridge/training/config.py); the trailing KEY=VALUE overrides are applied to the
container turned into an OmegaConf tree set to struct mode (training/utils/omegaconf_utils.py
parse_hydra_overrides: OmegaConf.set_struct(cfg, True)), so a key that is not a field of the
container's sections fails, and then ConfigContainer.validate() runs. Running that needs torch,
Transformer Engine and a GPU build of Megatron-core, so this script reads the source instead:

  container   ConfigContainer's fields and the classes each may hold;
  classes     every dataclass those name, with its fields, bases resolved across the Bridge
              and the Megatron-LM submodule it pins (3rdparty/Megatron-LM, a second repository
              at its own commit: megatron.core.* and megatron.training.* come from there);
  recipes     the recipes scaleplan's exporter names: where each is defined, the Hugging Face
              model its AutoBridge reads (or none: the vanilla GPT recipe, a bare
              GPTModelProvider), the provider class that bridge builds, the common base it starts
              from, and each `cfg.SECTION.FIELD = ...` it sets (literal values, or the source text
              of anything else), and the calls that change cfg.model in ways a reader cannot
              evaluate (the checker then requires the export to set the fields those touch);
  recipe_names          every function the H100 recipe packages export (what --recipe finds);
  mixed_precision       the names `mixed_precision=NAME` accepts (MIXED_PRECISION_RECIPES);
  env_vars              COMMON_RECIPE_ENV_VARS, the environment every recipe sets.

Usage: extract_megatron_bridge.py BRIDGE_GIT REF MEGATRON_GIT > export/frameworks/megatron-bridge.json
"""
import ast
import json
import subprocess
import sys

from common import git_show, header, full_commit, commit_date, value

CONFIG = "src/megatron/bridge/training/config.py"

# The recipes the exporter writes (export/megatron_bridge.cc), by model.
RECIPES = [
    ("llama3_8b_pretrain_2gpu_h100_bf16_config", "src/megatron/bridge/recipes/llama/h100/llama3.py"),
    ("llama3_70b_pretrain_32gpu_h100_bf16_config", "src/megatron/bridge/recipes/llama/h100/llama3.py"),
    ("deepseek_v3_pretrain_1024gpu_h100_bf16_config",
     "src/megatron/bridge/recipes/deepseek/h100/deepseek_v3.py"),
    ("vanilla_gpt_pretrain_1gpu_h100_bf16_config", "src/megatron/bridge/recipes/gpt/h100/vanilla_gpt.py"),
]


class Repos:
    """Module lookup across the Bridge (src/) and its Megatron-LM submodule."""

    def __init__(self, bridge_git, ref, mcore_git, mcore_commit):
        self.b, self.ref, self.m, self.mc = bridge_git, ref, mcore_git, mcore_commit
        self.files = {}

    def ls(self, git, commit):
        key = (git, commit)
        if key not in self.files:
            out = subprocess.run(["git", "--git-dir", git, "ls-tree", "-r", "--name-only", commit],
                                 check=True, capture_output=True, text=True).stdout
            self.files[key] = set(out.split())
        return self.files[key]

    def module_file(self, module):
        """(repo tag, path) of a dotted module, or None."""
        rel = module.replace(".", "/")
        if module.startswith("megatron.bridge"):
            git, commit, prefix, tag = self.b, self.ref, "src/", "bridge"
        elif module.startswith("megatron."):
            git, commit, prefix, tag = self.m, self.mc, "", "megatron-lm"
        else:
            return None
        names = self.ls(git, commit)
        for cand in (prefix + rel + ".py", prefix + rel + "/__init__.py"):
            if cand in names:
                return tag, cand
        return None

    def source(self, tag, path):
        git, commit = (self.b, self.ref) if tag == "bridge" else (self.m, self.mc)
        return git_show(git, commit, path)


def module_of(tag, path):
    p = path[4:] if tag == "bridge" and path.startswith("src/") else path
    p = p[:-len("/__init__.py")] if p.endswith("/__init__.py") else p[:-3]
    return p.replace("/", ".")


def imports(tree, tag, path):
    """{local name: (module, name)} in statement order (a later import of a name wins)."""
    out = {}
    pkg = module_of(tag, path)
    if not path.endswith("__init__.py"):
        pkg = pkg.rsplit(".", 1)[0]
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom):
            mod = n.module or ""
            if n.level:
                base = pkg.split(".")
                base = base[:len(base) - (n.level - 1)]
                mod = ".".join(base + ([mod] if mod else []))
            for a in n.names:
                out[a.asname or a.name] = (mod, a.name)
    return out


class Classes:
    def __init__(self, repos):
        self.repos, self.defs, self.trees = repos, {}, {}

    def tree(self, tag, path):
        if (tag, path) not in self.trees:
            self.trees[(tag, path)] = ast.parse(self.repos.source(tag, path))
        return self.trees[(tag, path)]

    def locate(self, module, name, depth=0):
        """(tag, path, ClassDef) of `name` as module `module` exposes it."""
        loc = self.repos.module_file(module)
        if loc is None or depth > 6:
            return None
        tree = self.tree(*loc)
        for n in tree.body:
            if isinstance(n, ast.ClassDef) and n.name == name:
                return loc[0], loc[1], n
        imp = imports(tree, *loc)
        if name in imp:
            return self.locate(imp[name][0], imp[name][1], depth + 1)
        for n in tree.body:  # star imports
            if isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names):
                sub = imports(ast.Module(body=[n], type_ignores=[]), *loc)
                mod = n.module if not n.level else None
                if mod:
                    hit = self.locate(mod, name, depth + 1)
                    if hit:
                        return hit
        return None

    def add(self, module, name):
        """Registers the class and its bases; returns its qualified key."""
        hit = self.locate(module, name)
        if hit is None:
            return None
        tag, path, node = hit
        key = f"{module_of(tag, path)}.{node.name}"
        if key in self.defs:
            return key
        self.defs[key] = None  # cycle guard
        imp = imports(self.tree(tag, path), tag, path)
        bases = []
        for b in node.bases:
            bname = b.id if isinstance(b, ast.Name) else (
                b.value.id if isinstance(b, ast.Subscript) and isinstance(b.value, ast.Name) else None)
            if bname is None:
                continue
            if any(isinstance(n, ast.ClassDef) and n.name == bname for n in self.tree(tag, path).body):
                k = self.add(module_of(tag, path), bname)
            elif bname in imp:
                k = self.add(*imp[bname])
            else:
                k = None
            if k:
                bases.append(k)
        own = []
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                ann = ast.unparse(stmt.annotation)
                if ann.startswith("ClassVar"):
                    continue
                f = {"name": stmt.target.id, "annotation": ann}
                v = stmt.value
                if isinstance(v, ast.Call) and getattr(v.func, "id", "") == "field":
                    kw = {k.arg: k.value for k in v.keywords}
                    if "default" in kw:
                        f["default"] = value(kw["default"])
                    elif "default_factory" in kw:
                        f["default"] = {"factory": ast.unparse(kw["default_factory"])}
                elif v is not None:
                    f["default"] = value(v)
                own.append(f)
        self.defs[key] = {"repo": tag, "file": path, "line": node.lineno, "bases": bases,
                          "fields": own}
        return key

    def fields(self, key, seen=None):
        """Every field name of the class, its bases' included."""
        d = self.defs.get(key)
        if not d:
            return set()
        out = {f["name"] for f in d["fields"]}
        for b in d["bases"]:
            out |= self.fields(b)
        return out


def union_names(ann):
    """Class names of an annotation: X, Optional[X], X | Y | None, Union[X, Y]."""
    names = []
    for n in ast.walk(ann):
        if isinstance(n, ast.Name) and n.id not in ("Optional", "Union", "None", "str", "dict",
                                                   "int", "float", "bool"):
            names.append(n.id)
    return names


def recipe(repos, classes, name, path):
    tree = ast.parse(repos.source("bridge", path))
    imp = imports(tree, "bridge", path)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    out = {"file": path, "line": fn.lineno, "hf_path": None, "provider": None, "base": None,
           "sets": {}, "opaque_calls": []}
    for stmt in ast.walk(fn):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            t, v = stmt.targets[0], stmt.value
            text = ast.unparse(t)
            if text == "cfg" and isinstance(v, ast.Call):
                out["base"] = ast.unparse(v.func)
            if text == "cfg.model":
                call = ast.unparse(v)
                if "AutoBridge.from_hf_pretrained" in call:
                    inner = [c for c in ast.walk(v) if isinstance(c, ast.Call)
                             and ast.unparse(c.func).endswith("from_hf_pretrained")]
                    out["hf_path"] = ast.literal_eval(inner[0].args[0])
            if text.startswith("cfg.") and text.count(".") == 2:
                out["sets"][text[4:]] = value(v)
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            if any(ast.unparse(a) == "cfg.model" for a in call.args):
                out["opaque_calls"].append(ast.unparse(call))
    # The vanilla recipe builds ConfigContainer(model=GPTModelProvider(), ...) itself.
    for c in ast.walk(fn):
        if isinstance(c, ast.Call) and ast.unparse(c.func) == "ConfigContainer":
            out["base"] = "ConfigContainer(...)"
            for k in c.keywords:
                if k.arg == "model" and isinstance(k.value, ast.Call):
                    cls = ast.unparse(k.value.func)
                    out["provider"] = classes.add(*imp[cls])
    return out


def hf_provider(repos, classes, hf_path_arch):
    """The provider class the bridge registered for an HF architecture builds."""
    r = subprocess.run(["git", "--git-dir", repos.b, "grep", "-l", "-E",
                        f"source=\"?{hf_path_arch}\\b", repos.ref, "--", "src/megatron/bridge/models/*.py"],
                       capture_output=True, text=True)
    for line in r.stdout.splitlines():
        path = line.split(":", 1)[1]
        tree = ast.parse(repos.source("bridge", path))
        imp = imports(tree, "bridge", path)
        for n in ast.walk(tree):
            if isinstance(n, ast.Call) and ast.unparse(n.func).endswith("register_bridge"):
                kw = {k.arg: k.value for k in n.keywords}
                if hf_path_arch not in ast.unparse(kw.get("source", ast.Constant(""))):
                    continue
                prov = ast.unparse(kw["provider"]) if "provider" in kw else "GPTModelProvider"
                mod, nm = imp.get(prov, ("megatron.bridge.models.gpt_provider", prov))
                return classes.add(mod, nm), path
    return None, None


# The Hugging Face architecture of each model a recipe reads (its config.json "architectures";
# scaleplan's presets are those files: models/presets/*.json).
HF_ARCH = {"meta-llama/Meta-Llama-3-8B": "LlamaForCausalLM",
           "meta-llama/Meta-Llama-3-70B": "LlamaForCausalLM",
           "deepseek-ai/DeepSeek-V3": "DeepseekV3ForCausalLM"}


def main():
    bridge_git, ref, mcore_git = sys.argv[1:4]
    tree = subprocess.run(["git", "--git-dir", bridge_git, "ls-tree", ref, "3rdparty/Megatron-LM"],
                          check=True, capture_output=True, text=True).stdout.split()
    mcore_commit = tree[2]
    repos = Repos(bridge_git, ref, mcore_git, mcore_commit)
    classes = Classes(repos)
    cfg_tree = ast.parse(repos.source("bridge", CONFIG))
    imp = imports(cfg_tree, "bridge", CONFIG)
    local = {n.name for n in cfg_tree.body if isinstance(n, ast.ClassDef)}
    cc = next(n for n in cfg_tree.body if isinstance(n, ast.ClassDef) and n.name == "ConfigContainer")
    container = {}
    for stmt in cc.body:
        if not isinstance(stmt, ast.AnnAssign) or stmt.target.id.startswith("_"):
            continue
        keys = []
        for nm in union_names(stmt.annotation):
            k = classes.add("megatron.bridge.training.config", nm) if nm in local else (
                classes.add(*imp[nm]) if nm in imp else None)
            if k:
                keys.append(k)
        container[stmt.target.id] = {"annotation": ast.unparse(stmt.annotation), "classes": keys,
                                     "default": value(stmt.value) if stmt.value is not None else None,
                                     "required": stmt.value is None}
    recipes = {}
    for name, path in RECIPES:
        r = recipe(repos, classes, name, path)
        if r["hf_path"]:
            r["provider"], r["bridge_file"] = hf_provider(repos, classes, HF_ARCH[r["hf_path"]])
        recipes[name] = r
    # Every recipe name the H100 packages export.
    names = set()
    for p in repos.ls(bridge_git, ref):
        if p.startswith("src/megatron/bridge/recipes/") and "/h100/" in p and p.endswith(".py") \
                and not p.endswith("__init__.py"):
            for n in ast.parse(repos.source("bridge", p)).body:
                if isinstance(n, ast.FunctionDef) and not n.name.startswith("_"):
                    names.add(n.name)
    mp = ast.parse(repos.source("bridge", "src/megatron/bridge/training/mixed_precision.py"))
    mixed = sorted(n.name for n in mp.body if isinstance(n, ast.FunctionDef)
                   and any(ast.unparse(d) == "register" for d in n.decorator_list))
    # --dataset NAME (run_recipe.py): DATASET_PRESETS' keys; `mock` replaces cfg.dataset with what
    # _mock_dataset_config returns.
    du_path = "src/megatron/bridge/recipes/utils/dataset_utils.py"
    du = ast.parse(repos.source("bridge", du_path))
    du_imp = imports(du, "bridge", du_path)
    presets = next(n.value for n in du.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                   and ast.unparse(n.targets[0] if isinstance(n, ast.Assign) else n.target)
                   == "DATASET_PRESETS")
    dataset_presets = sorted(ast.literal_eval(k) for k in presets.keys)
    mock_fn = next(n for n in du.body if isinstance(n, ast.FunctionDef) and n.name == "_mock_dataset_config")
    mock_cls = next(ast.unparse(r.value.func) for r in ast.walk(mock_fn)
                    if isinstance(r, ast.Return) and isinstance(r.value, ast.Call))
    mock_key = classes.add(*du_imp[mock_cls])
    env = ast.parse(repos.source("bridge", "src/megatron/bridge/recipes/utils/environment_utils.py"))
    env_vars = next(ast.literal_eval(n.value) for n in env.body
                    if isinstance(n, ast.AnnAssign) and n.target.id == "COMMON_RECIPE_ENV_VARS")
    out = header("Megatron-Bridge", "NVIDIA-NeMo/Megatron-Bridge", bridge_git, ref,
                 [CONFIG, "src/megatron/bridge/training/utils/omegaconf_utils.py",
                  "scripts/training/run_recipe.py"] + sorted({p for _, p in RECIPES}),
                 "scripts/framework_defs/extract_megatron_bridge.py")
    out["megatron_core"] = {"repository": "NVIDIA/Megatron-LM", "path": "3rdparty/Megatron-LM",
                            "commit": full_commit(mcore_git, mcore_commit),
                            "commit_date": commit_date(mcore_git, mcore_commit)}
    out["container"] = container
    out["classes"] = {k: v for k, v in sorted(classes.defs.items()) if v}
    out["class_fields"] = {k: sorted(classes.fields(k)) for k in sorted(classes.defs) if classes.defs[k]}
    out["recipes"] = recipes
    out["dataset_presets"] = dataset_presets
    out["mock_dataset"] = mock_key
    out["recipe_names"] = sorted(names)
    out["mixed_precision"] = mixed
    out["env_vars"] = env_vars
    json.dump(out, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
