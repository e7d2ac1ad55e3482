#!/usr/bin/env python3
"""Reads issue 47's exports back as their frameworks would, with the definitions extracted from
each framework's source at its pin (export/frameworks/, scripts/framework_defs/), and checks that
the run each one starts is the simulated one.

Megatron-Bridge (v0.6.0; megatron-bridge.json). scripts/training/run_recipe.py:
  - its parser (the options the export uses: --recipe, --mode, --dataset among DATASET_PRESETS'
    keys; every trailing word KEY=VALUE, _collect_overrides);
  - the recipe among the functions the H100 recipe packages export (find_library_recipe), whose
    model is the planned one (the Hugging Face model its AutoBridge reads is the preset's);
  - the overrides applied as parse_hydra_overrides does (omegaconf_utils.py): the container as an
    OmegaConf tree in struct mode, so a key must name a field of the object at that place: a
    ConfigContainer field, then a field of the class it holds (the recipe's model provider, the
    dataset class --dataset mock puts there, the section's class); a section the recipe leaves as a
    string (mixed_precision="bf16_mixed") takes a whole value, one of its registered names;
  - what the container then computes (config.py ConfigContainer.validate at 51885cf): dp =
    world / (tp·pp·cp) (get_data_parallel_size, which asserts it divides), the micro-batch count
    gbs / (mbs·dp) (Megatron-core num_microbatches_calculator.py:381 asserts it divides; at the
    submodule commit cd4afff), seq divisible by 2·cp (config.py, "Sequence length must be
    divisible by 2 * context parallel size"), model and dataset sequence equal; Megatron-core's
    TransformerConfig.__post_init__ rules for the fields written (heads and query groups divide by
    tp; a pipeline layout excludes the other split settings, its stage count divides by pp and sets
    vpp, PipelineParallelLayerLayout.validate_layer_layout), the interleaved schedule's group
    (schedules.py:1141: pp <= group <= M, a last group of 0 or >= pp), Megatron FSDP's
    CUDA_DEVICE_MAX_CONNECTIONS (config.py:1101) and fsdp_dtensor checkpoints (config.py:1098);
  - then that dp, micro-batch count, schedule (Megatron-core runs 1F1B with pp > 1, interleaved
    with vpp > 1: get_forward_backward_func) and per-chunk layers are the plan's, and the model
    fields are config.json's.
torchtitan main (b5bcd76; torchtitan-main.json). The module `scaleplan_plan.py` is parsed, not run
(it needs torch): every import must name what the module exports at the pin; the function must
start from a shipped config function (config_registry.py) whose flavor's shape is config.json's;
each `config.SECTION.FIELD = literal` must name a field of the section's dataclass (slots=True
refuses any other attribute) with a value of its type or among its Literal choices;
`activation_checkpoint` one of the AC config classes or None; `model_spec` the module's
model_registry with its own parameters. Then ParallelDims._validate (the degrees multiply to the
world; ep divides dp_shard·cp·tp), the token-count evenness (trainer.py:296), the gradient
accumulation (trainer.py:409-428), validate_cp_backend, the model parts (contiguous, embedding
first, norm and lm_head last; one per rank for a single-stage schedule, several for a looped one)
and MTP only without PP (models/deepseek_v3/mtp.py:198), against the plan's dp, micro-batch count,
schedule, per-chunk layers, ZeRO and recompute.

Each checker is itself checked: mutations of a passing export, each a mistake an exporter could
make, must all be caught (self_test).

A field the recipe sets in code the reader cannot evaluate (a call that changes cfg.model, such as
DeepSeek-V3's set_deepseek_v3_pipeline_model_parallel_layout) must be overridden where the check
reads it: otherwise the run would keep the recipe's value.

Usage: check_new_exports.py --generator BUILD/tests/new_exports --frameworks export/frameworks --out DIR
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys

FAILURES = []

# The Hugging Face model each preset is (its config.json is models/presets/<preset>.json).
HF_MODEL_OF_PRESET = {"llama3-8b": "meta-llama/Meta-Llama-3-8B",
                      "llama3-70b": "meta-llama/Meta-Llama-3-70B",
                      "deepseek-v3": "deepseek-ai/DeepSeek-V3"}


def check(cond, what):
    if not cond:
        FAILURES.append(what)
    return cond


def eq(ctx, name, got, want):
    check(got == want, f"{ctx}: {name}: the container has {got!r}, the plan/model says {want!r}")


def layout_dict(text):
    return dict(kv.split("=", 1) for kv in text.split(","))


# ---------------------------------------------------------------------------------------------
# Hydra override values (hydra/core/override_parser grammar, the subset an export may use)

def hydra_value(text):
    if text == "null":
        return None
    if text in ("true", "false"):
        return text == "true"
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1].strip()
        return [hydra_value(x.strip()) for x in inner.split(",")] if inner else []
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        pass
    check(re.fullmatch(r"[A-Za-z_][\w./-]*", text) is not None,
          f"Hydra cannot read the bare value {text!r}")
    return text


# ---------------------------------------------------------------------------------------------
# Megatron-Bridge

def bridge_script(ctx, script):
    """(unset variables, required variables, torchrun words) of the script."""
    unset, required, cmd = set(), set(), None
    joined = re.sub(r"\\\n", " ", script)
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"unset (\w+)", line)
        if m:
            unset.add(m.group(1))
            continue
        m = re.fullmatch(r': "\$\{(\w+):\?[^}]*\}"', line)
        if m:
            required.add(m.group(1))
            continue
        if line.startswith("torchrun"):
            cmd = line
            continue
        FAILURES.append(f"{ctx}: unexpected line in the script: {line}")
    values = {"NODE_RANK": "0", "MASTER_ADDR": "node0"}
    expanded = re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: m.group(2), cmd or "")
    for v in set(re.findall(r"\$\{?(\w+)", expanded)):
        check(v in required, f"{ctx}: the script uses ${v} without requiring it")
    expanded = re.sub(r"\$\{?(\w+)\}?", lambda m: values.get(m.group(1), ""), expanded)
    return unset, shlex.split(expanded)


def bridge_fields(defs, key):
    return set(defs["class_fields"].get(key, []))


def check_bridge(entry, path, defs, cfg):
    ctx = f"{entry['case']} megatron-bridge"
    script = open(path).read()
    r = subprocess.run(["bash", "-n", path], capture_output=True, text=True)
    check(r.returncode == 0, f"{ctx}: bash -n: {r.stderr}")
    unset, words = bridge_script(ctx, script)
    if not check("scripts/training/run_recipe.py" in words, f"{ctx}: no run_recipe.py"):
        return
    i = words.index("scripts/training/run_recipe.py")
    launcher, rest = words[:i], words[i + 1:]
    nproc = int(launcher[launcher.index("--nproc_per_node") + 1])
    nnodes = int(launcher[launcher.index("--nnodes") + 1]) if "--nnodes" in launcher else 1
    world = nproc * nnodes
    eq(ctx, "torchrun processes", world, entry["gpus"])
    # run_recipe.py's parser: the options the export uses, then KEY=VALUE words.
    p = argparse.ArgumentParser(allow_abbrev=False, add_help=False)
    p.add_argument("--recipe", required=True)
    p.add_argument("--mode", choices=["pretrain", "sft", "lora", "dora"])
    p.add_argument("--dataset", choices=defs["dataset_presets"])
    args, unknown = p.parse_known_args(rest)
    overrides = []
    for w in unknown:
        if check(not w.startswith("-") and "=" in w, f"{ctx}: run_recipe.py refuses {w!r}"):
            k, v = w.split("=", 1)
            overrides.append((k, hydra_value(v)))
    eq(ctx, "mode", args.mode, "pretrain")
    if not check(args.recipe in defs["recipe_names"],
                 f"{ctx}: no recipe {args.recipe} at Megatron-Bridge {defs['ref']}"):
        return
    recipe = defs["recipes"].get(args.recipe)
    if not check(recipe is not None, f"{ctx}: recipe {args.recipe} not extracted"):
        return
    # The recipe's model is the planned one: its AutoBridge reads the preset's Hugging Face model,
    # or it is the bare provider that the overrides shape entirely.
    want_hf = HF_MODEL_OF_PRESET.get(entry["model"])
    eq(ctx, "recipe's Hugging Face model", recipe["hf_path"], want_hf)
    provider = recipe["provider"]
    sections = {name: (c["classes"][0] if len(c["classes"]) == 1 else None)
                for name, c in defs["container"].items()}
    sections["model"] = provider
    if args.dataset == "mock":
        sections["dataset"] = defs["mock_dataset"]
    strings = {"mixed_precision"}  # the recipe holds the name, not a MixedPrecisionConfig
    # The container's values: the class defaults, what the recipe sets, then the overrides.
    values = {}
    for sec, cls in sections.items():
        if cls is None:
            continue
        stack = [cls]
        seen = set()
        while stack:
            k = stack.pop()
            if k in seen or k not in defs["classes"]:
                continue
            seen.add(k)
            stack.extend(defs["classes"][k]["bases"])
            for f in defs["classes"][k]["fields"]:
                values.setdefault(f"{sec}.{f['name']}", f.get("default"))
    opaque = {}
    for k, v in recipe["sets"].items():
        values[k] = v
    for call in recipe["opaque_calls"]:
        opaque[call] = True
    written = set()
    for k, v in overrides:
        parts = k.split(".")
        sec = parts[0]
        if not check(sec in defs["container"], f"{ctx}: {k}: ConfigContainer has no field {sec!r}"):
            continue
        if len(parts) == 1:
            if sec in strings:
                check(v in defs["mixed_precision"],
                      f"{ctx}: {k}={v}: not a registered mixed-precision recipe")
            values[k] = v
            written.add(k)
            continue
        if not check(sec not in strings, f"{ctx}: {k}: the recipe holds a string there, which "
                     "has no fields (OmegaConf struct mode refuses the key)"):
            continue
        cls = sections.get(sec)
        if not check(cls is not None and len(parts) == 2,
                     f"{ctx}: {k}: not a field of one known class"):
            continue
        check(parts[1] in bridge_fields(defs, cls),
              f"{ctx}: {k}: {cls.rsplit('.', 1)[-1]} has no field {parts[1]!r} (struct mode "
              "refuses an unknown key)")
        values[k] = v
        written.add(k)

    def get(k):
        v = values.get(k)
        check(not isinstance(v, dict) and (k in written or not opaque or not k.startswith("model.")),
              f"{ctx}: {k} is set by recipe code the reader cannot evaluate "
              f"({', '.join(recipe['opaque_calls']) or v}) and the export does not override it")
        return None if isinstance(v, dict) else v

    # Fields whose value comes from the model's Hugging Face config (AutoBridge) are checked only
    # where the export writes them.
    for k in ("model.num_layers", "model.hidden_size", "model.num_attention_heads",
              "model.vocab_size", "model.share_embeddings_and_output_weights"):
        check(k in written, f"{ctx}: {k} is not written; the run's value would be the recipe's")
    tp, pp, cp = get("model.tensor_model_parallel_size"), get("model.pipeline_model_parallel_size"), \
        get("model.context_parallel_size")
    ep = get("model.expert_model_parallel_size") or 1
    mbs, gbs = get("train.micro_batch_size"), get("train.global_batch_size")
    if None in (tp, pp, cp, mbs, gbs):
        FAILURES.append(f"{ctx}: a parallel degree or the batch is unset")
        return
    # ConfigContainer.get_data_parallel_size.
    if not check(world % (tp * pp * cp) == 0, f"{ctx}: world {world} % tp·pp·cp != 0"):
        return
    dp = world // (tp * pp * cp)
    check(gbs % (mbs * dp) == 0, f"{ctx}: global batch {gbs} not divisible by mbs·dp {mbs * dp}")
    m = gbs // (mbs * dp)
    lay = layout_dict(entry["layout"])
    eq(ctx, "data-parallel size", dp, entry["dp"])
    eq(ctx, "micro-batches", m, entry["microbatches"])
    eq(ctx, "tp", tp, int(lay["tp"]))
    eq(ctx, "pp", pp, int(lay["pp"]))
    eq(ctx, "cp", cp, int(lay.get("cp", 1)))
    seq = get("model.seq_length")
    eq(ctx, "model.seq_length", seq, entry["seq"])
    eq(ctx, "dataset.seq_length", get("dataset.seq_length"), seq)
    if cp > 1:
        check(seq % (2 * cp) == 0, f"{ctx}: seq {seq} not divisible by 2·cp")
    # TransformerConfig.__post_init__ (cd4afff transformer_config.py).
    heads = get("model.num_attention_heads")
    check(heads % tp == 0, f"{ctx}: heads {heads} % tp {tp}")
    if "model.num_query_groups" in written:
        check(get("model.num_query_groups") % tp == 0 or tp % get("model.num_query_groups") == 0,
              f"{ctx}: query groups vs tp")
    num_layers = get("model.num_layers")
    mtp = get("model.mtp_num_layers")
    pl = get("model.pipeline_model_parallel_layout")
    vpp = get("model.virtual_pipeline_model_parallel_size")
    chunks = None
    if pl is not None:
        check(get("model.num_layers_in_first_pipeline_stage") is None
              and get("model.num_layers_in_last_pipeline_stage") is None
              and not get("model.account_for_embedding_in_pipeline_split")
              and not get("model.account_for_loss_in_pipeline_split"),
              f"{ctx}: pipeline_model_parallel_layout cannot be set with other pipeline layout "
              "arguments")
        stages = layout_stages(pl)
        if check(len(stages) % pp == 0, f"{ctx}: layout stages {len(stages)} % pp {pp}"):
            detected = len(stages) // pp
            if vpp is not None:
                eq(ctx, "vpp (layout)", vpp, detected)
            elif detected > 1:
                vpp = detected
        flat = [c for s in stages for c in s]
        check(flat[:1] == ["E"] and flat[-1:] == ["L"] and flat.count("E") == 1
              and flat.count("L") == 1, f"{ctx}: layout must start with E and end with L once")
        eq(ctx, "decoder layers in the layout", flat.count("t"), num_layers)
        eq(ctx, "MTP layers in the layout", flat.count("m"), mtp or 0)
        chunks = [s.count("t") for s in stages]
    elif pp > 1:
        first = get("model.num_layers_in_first_pipeline_stage")
        last = get("model.num_layers_in_last_pipeline_stage")
        check(first is None and last is None, f"{ctx}: uneven split not reproduced by the checker")
        n = pp * (vpp or 1)
        check(num_layers % n == 0, f"{ctx}: layers {num_layers} % pp·vpp {n}")
        chunks = [num_layers // n] * n
    if pp > 1:
        # ModelParallelConfig raises "When using pipeline parallelism, pipeline_dtype must be
        # specified" (model_parallel_config.py:527); runtime_config_update sets it from the
        # mixed-precision recipe before validate() (bf16_mixed: pipeline_dtype=torch.bfloat16,
        # mixed_precision.py:194; the fp8 recipes start from bf16_mixed).
        mp = get("mixed_precision")
        check((isinstance(mp, str) and mp.startswith(("bf16", "fp16")))
              or get("model.pipeline_dtype") is not None,
              f"{ctx}: pp > 1 without a pipeline_dtype")
        eq(ctx, "layers per chunk", chunks, entry["chunk_layers"])
        schedule = "interleaved" if (vpp or 1) > 1 else "1f1b"
        eq(ctx, "schedule", schedule, entry["schedule"])
        eq(ctx, "vpp", vpp or 1, entry["vpp"])
        if (vpp or 1) > 1:
            group = get("model.microbatch_group_size_per_vp_stage") or pp
            check(pp <= group <= m, f"{ctx}: micro-batch group {group} outside [pp, M]")
            check(not (0 < m % group < pp), f"{ctx}: last micro-batch group {m % group} < pp")
    if entry["exports"]["megatron-bridge"].get("moe"):
        pass
    if cfg.get("n_routed_experts") or cfg.get("num_local_experts"):
        experts = cfg.get("n_routed_experts") or cfg.get("num_local_experts")
        eq(ctx, "ep", ep, int(lay.get("ep", 1)))
        check(experts % ep == 0, f"{ctx}: experts {experts} % ep {ep}")
        etp = get("model.expert_tensor_parallel_size") or tp
        check((tp * cp * dp) % (ep * etp) == 0, f"{ctx}: ep·etp does not divide tp·cp·dp")
    # ZeRO as Megatron-core says it.
    zero = int(lay.get("zero", 0))
    eq(ctx, "distributed optimizer", get("ddp.use_distributed_optimizer"), zero >= 1)
    eq(ctx, "optimizer.use_distributed_optimizer", get("optimizer.use_distributed_optimizer"),
       zero >= 1)
    eq(ctx, "Megatron FSDP", get("ddp.use_megatron_fsdp"), zero >= 2)
    if zero >= 2:
        eq(ctx, "sharding", get("ddp.data_parallel_sharding_strategy"),
           "optim_grads" if zero == 2 else "optim_grads_params")
        check("CUDA_DEVICE_MAX_CONNECTIONS" in unset,
              f"{ctx}: Megatron FSDP asserts CUDA_DEVICE_MAX_CONNECTIONS != 1; the script must unset it")
        if get("checkpoint.save") is not None or get("checkpoint.load") is not None:
            eq(ctx, "ckpt_format", get("checkpoint.ckpt_format"), "fsdp_dtensor")
    sp = get("model.sequence_parallel")
    eq(ctx, "sequence_parallel", sp, lay.get("sp", "on" if tp > 1 else "off") == "on")
    # The model: config.json's own fields.
    eq(ctx, "num_layers", num_layers, cfg["num_hidden_layers"])
    eq(ctx, "hidden_size", get("model.hidden_size"), cfg["hidden_size"])
    eq(ctx, "num_attention_heads", heads, cfg["num_attention_heads"])
    eq(ctx, "vocab_size", get("model.vocab_size"), cfg["vocab_size"])
    eq(ctx, "tied embeddings", get("model.share_embeddings_and_output_weights"),
       cfg.get("tie_word_embeddings", False))
    eq(ctx, "mtp_num_layers", mtp or 0, cfg.get("num_nextn_predict_layers", 0))
    if "kv_lora_rank" not in cfg:
        eq(ctx, "num_query_groups", get("model.num_query_groups"),
           cfg.get("num_key_value_heads", cfg["num_attention_heads"]))
        eq(ctx, "ffn_hidden_size", get("model.ffn_hidden_size"), cfg["intermediate_size"])
    else:
        eq(ctx, "kv_lora_rank", get("model.kv_lora_rank"), cfg["kv_lora_rank"])
        eq(ctx, "q_lora_rank", get("model.q_lora_rank"), cfg["q_lora_rank"])
        eq(ctx, "qk_head_dim", get("model.qk_head_dim"), cfg["qk_nope_head_dim"])
        eq(ctx, "qk_pos_emb_head_dim", get("model.qk_pos_emb_head_dim"), cfg["qk_rope_head_dim"])
        eq(ctx, "v_head_dim", get("model.v_head_dim"), cfg["v_head_dim"])
    if recipe["hf_path"] is None:  # the bare provider: everything else comes from the overrides
        eq(ctx, "normalization", get("model.normalization"), "RMSNorm")
        eq(ctx, "layernorm_epsilon", get("model.layernorm_epsilon"), cfg["rms_norm_eps"])
        eq(ctx, "activation", get("model.activation_func"), cfg.get("hidden_act", "silu"))
        eq(ctx, "gated_linear_unit", get("model.gated_linear_unit"), True)
        eq(ctx, "position_embedding_type", get("model.position_embedding_type"), "rope")
        eq(ctx, "rotary_base", get("model.rotary_base"), cfg["rope_theta"])
        eq(ctx, "add_bias_linear", get("model.add_bias_linear"), False)
        eq(ctx, "kv_channels", get("model.kv_channels"),
           cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"]))
        if "num_local_experts" in cfg:  # Mixtral
            eq(ctx, "num_moe_experts", get("model.num_moe_experts"), cfg["num_local_experts"])
            eq(ctx, "moe_router_topk", get("model.moe_router_topk"), cfg["num_experts_per_tok"])
            eq(ctx, "moe_ffn_hidden_size", get("model.moe_ffn_hidden_size"),
               cfg["intermediate_size"])
            eq(ctx, "moe_aux_loss_coeff", get("model.moe_aux_loss_coeff"),
               cfg["router_aux_loss_coef"])
    elif entry["model"] == "deepseek-v3":
        # The recipe's HybridEP (apply_flex_dispatcher_backend) is not what was simulated.
        eq(ctx, "moe_token_dispatcher_type", get("model.moe_token_dispatcher_type"), "alltoall")
        eq(ctx, "moe_flex_dispatcher_backend", get("model.moe_flex_dispatcher_backend"), None)


# ---------------------------------------------------------------------------------------------
# torchtitan main

# Exports that must be refused, and a phrase of the reason (what the framework lacks).
EXPECTED_REFUSALS = {("mixtral-8x22b", "torchtitan"): "has no model for model_type 'mixtral'"}

# PyTorch's schedule class names (get_schedule_class) for scaleplan's schedules, and whether the
# class runs several stages per rank (PipelineScheduleMulti: looped).
TT_SCHEDULES = {"GPipe": ("afab", False), "1F1B": ("1f1b", False),
                "Interleaved1F1B": ("interleaved", True), "InterleavedZeroBubble": ("zb-h1", True),
                "ZBVZeroBubble": ("zb-v", True), "DualPipeV": ("dualpipev", True)}

# The flavor's shape compared with config.json: the keys the model definition takes from it.
TT_SHAPE_KEYS = ["hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                 "head_dim", "vocab_size", "moe_intermediate_size", "first_k_dense_replace",
                 "n_routed_experts", "n_shared_experts", "num_experts_per_tok", "q_lora_rank",
                 "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"]


def py_literal(node):
    import ast
    return ast.literal_eval(node)


def check_torchtitan(entry, path, defs, cfg):
    import ast
    ctx = f"{entry['case']} torchtitan"
    src = open(path).read()
    try:
        tree = ast.parse(src)
    except SyntaxError as e:
        FAILURES.append(f"{ctx}: Python cannot parse it: {e}")
        return
    funcs = defs["config_functions"]
    imported = {}
    for n in tree.body:
        if isinstance(n, ast.ImportFrom):
            for a in n.names:
                imported[a.asname or a.name] = (n.module, a.name)
                mod, name = n.module, a.name
                parts = mod.split(".")
                ok = False
                if mod == "torchtitan.trainer":
                    ok = name == "Trainer"
                elif mod == "torchtitan.distributed.activation_checkpoint":
                    ok = f"{name}.Config" in defs["activation_checkpoint"]
                elif mod == "torchtitan.components.quantization":
                    ok = name in defs["quantization_names"]
                elif len(parts) == 3 and parts[:2] == ["torchtitan", "models"]:
                    ok = name == "model_registry" and parts[2] in defs["model_registry"]
                elif len(parts) == 4 and parts[3] == "config_registry":
                    ok = name in funcs.get(parts[2], {})
                check(ok, f"{ctx}: from {mod} import {name}: not there at torchtitan {defs['ref']}")
        elif not isinstance(n, (ast.FunctionDef, ast.Expr)):
            FAILURES.append(f"{ctx}: unexpected top-level statement {ast.unparse(n)!r}")
    fn = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "scaleplan_plan"]
    if not check(len(fn) == 1, f"{ctx}: no function scaleplan_plan (CONFIG=scaleplan_plan)"):
        return
    body = fn[0].body
    first = body[0]
    if not check(isinstance(first, ast.Assign) and isinstance(first.value, ast.Call)
                 and ast.unparse(first.targets[0]) == "config",
                 f"{ctx}: the function must start from a shipped config function"):
        return
    base = ast.unparse(first.value.func)
    module = imported.get(base, ("", ""))[0].split(".")
    if not check(len(module) == 4, f"{ctx}: {base} is not a config_registry function"):
        return
    model = module[2]
    flavor = funcs[model][base]["flavor"]
    shape = defs["flavors"].get(model, {}).get(flavor, {}).get("hf_shape")
    if not check(shape is not None, f"{ctx}: {model} flavor {flavor} has no extracted shape"):
        return
    # The flavor's shape is the model's: config.json's own fields.
    for k in TT_SHAPE_KEYS:
        if shape.get(k) is not None and k in cfg:
            eq(ctx, f"flavor {flavor} {k}", shape[k], cfg[k])
    dense_ffn = cfg["intermediate_size"]
    if not (cfg.get("num_local_experts") or (cfg.get("n_routed_experts") and not cfg.get("first_k_dense_replace"))):
        eq(ctx, f"flavor {flavor} intermediate_size", shape["intermediate_size"], dense_ffn)
    # Trainer.Config, its section dataclasses (slots=True: no other attribute) and their types.
    sections = {name: {f["name"]: f for f in fields} for name, fields in defs["sections"].items()}
    top = {f["name"] for f in defs["trainer_config"]}
    values, model_kwargs, mtp = {}, None, 0
    ret = False
    for st in body[1:]:
        if isinstance(st, ast.Return):
            ret = ast.unparse(st.value) == "config"
            continue
        if not check(isinstance(st, ast.Assign) and len(st.targets) == 1,
                     f"{ctx}: unexpected statement {ast.unparse(st)!r}"):
            continue
        target = ast.unparse(st.targets[0]).split(".")
        if not check(target[0] == "config" and len(target) in (2, 3),
                     f"{ctx}: unexpected target {'.'.join(target)}"):
            continue
        if len(target) == 2:
            key = target[1]
            check(key in top, f"{ctx}: Trainer.Config has no field {key!r}")
            if key == "activation_checkpoint":
                v = st.value
                if isinstance(v, ast.Constant) and v.value is None:
                    values[key] = "none"
                elif isinstance(v, ast.Call):
                    cls = ast.unparse(v.func)
                    check(cls in defs["activation_checkpoint"] and not v.args and not v.keywords,
                          f"{ctx}: activation_checkpoint {cls} is not a config class")
                    values[key] = {"FullAC.Config": "full", "SelectiveAC.Config": "selective"}.get(cls)
            elif key == "model_spec":
                call = st.value
                check(isinstance(call, ast.Call) and ast.unparse(call.func) == "model_registry"
                      and imported.get("model_registry", ("", ""))[0] == f"torchtitan.models.{model}",
                      f"{ctx}: model_spec must come from {model}'s model_registry")
                eq(ctx, "model_registry flavor", py_literal(call.args[0]), flavor)
                for k in call.keywords:
                    check(k.arg in defs["model_registry"][model],
                          f"{ctx}: model_registry has no parameter {k.arg!r}")
                    if k.arg == "num_mtp_layers":
                        mtp = py_literal(k.value)
            continue
        sec, field = target[1], target[2]
        if not check(sec in sections, f"{ctx}: config.{sec}: not a section the checker knows"):
            continue
        f = sections[sec].get(field)
        if not check(f is not None, f"{ctx}: config.{sec}.{field}: {sec} has no field {field!r} "
                     "(slots=True refuses it)"):
            continue
        try:
            v = py_literal(st.value)
        except ValueError:
            FAILURES.append(f"{ctx}: config.{sec}.{field} = {ast.unparse(st.value)}: not a "
                            "literal the export may write")
            continue
        ann = f["annotation"]
        if "choices" in f:
            check(v in f["choices"], f"{ctx}: {sec}.{field} = {v!r} not among {f['choices']}")
        elif ann == "int":
            check(isinstance(v, int) and not isinstance(v, bool), f"{ctx}: {sec}.{field} takes an int")
        elif ann == "bool":
            check(isinstance(v, bool), f"{ctx}: {sec}.{field} takes a bool")
        values[f"{sec}.{field}"] = v
    check(ret, f"{ctx}: the function must return config")

    def get(k):
        check(k in values, f"{ctx}: {k} is not set; the run would keep {base}()'s value")
        return values.get(k)

    lay = layout_dict(entry["layout"])
    world = entry["gpus"]
    rep, shard = get("parallelism.data_parallel_replicate_degree"), get("parallelism.data_parallel_shard_degree")
    tp, pp = get("parallelism.tensor_parallel_degree"), get("parallelism.pipeline_parallel_degree")
    cp, ep = get("parallelism.context_parallel_degree"), get("parallelism.expert_parallel_degree")
    if None in (rep, shard, tp, pp, cp, ep):
        return
    # ParallelDims._validate (distributed/parallel_dims.py:166).
    if shard < 0:
        shard = world // (rep * cp * tp * pp)
    if not check(rep * shard * cp * tp * pp == world,
                 f"{ctx}: dp_replicate·dp_shard·cp·tp·pp != WORLD_SIZE {world}"):
        return
    check((shard * cp * tp) % ep == 0, f"{ctx}: ep {ep} must divide dp_shard*cp*tp")
    sp = get("parallelism.enable_sequence_parallel")
    tokens_mb = get("training.num_tokens_per_microbatch_per_dp_rank")
    step = get("training.num_tokens_per_train_step")
    seq = get("training.max_context_length")
    # trainer.py:296: tokens per pipeline micro-batch divisible by tp (with SP) and 2·cp.
    div = (tp if sp else 1) * (2 * cp if cp > 1 else 1)
    check(tokens_mb % div == 0, f"{ctx}: tokens per micro-batch {tokens_mb} % {div}")
    if cp > 1:
        eq(ctx, "spmd_backend (validate_cp_backend)", get("parallelism.spmd_backend"), "spmd_types")
    # trainer.py:409-428: the gradient accumulation.
    num_pp = get("parallelism.num_pp_microbatches") if pp > 1 else 1
    dp = rep * shard
    per_dp = tokens_mb * num_pp
    if not check(step % (per_dp * dp) == 0, f"{ctx}: num_tokens_per_train_step {step} not "
                 f"divisible by {per_dp * dp}"):
        return
    accum = step // (per_dp * dp)
    eq(ctx, "data-parallel size", dp, entry["dp"])
    eq(ctx, "micro-batches (accumulation x pipeline micro-batches)", accum * num_pp,
       entry["microbatches"])
    eq(ctx, "sequence", seq, entry["seq"])
    eq(ctx, "micro-batch tokens", tokens_mb, int(lay["mbs"]) * entry["seq"])
    eq(ctx, "tp", tp, int(lay["tp"]))
    eq(ctx, "pp", pp, int(lay["pp"]))
    eq(ctx, "cp", cp, int(lay.get("cp", 1)))
    eq(ctx, "ep", ep, int(lay.get("ep", 1)))
    eq(ctx, "sequence parallel", sp, lay.get("sp", "on" if tp > 1 else "off") == "on")
    zero = int(lay.get("zero", 0))
    eq(ctx, "FSDP shard mesh", shard, dp if zero >= 1 else 1)
    if zero >= 2:
        eq(ctx, "reshard after forward", get("parallelism.fsdp_reshard_after_forward"),
           "always" if zero == 3 else "never")
    eq(ctx, "activation checkpointing", values.get("activation_checkpoint"),
       lay.get("recompute", "none"))
    check(values.get("compile.enable_async_tensor_parallel") is False,
          f"{ctx}: async TP must be off (the eager run simulated)")
    if pp > 1:
        sched = get("parallelism.pipeline_parallel_schedule")
        if check(sched in TT_SCHEDULES, f"{ctx}: schedule {sched!r} unknown"):
            name, looped = TT_SCHEDULES[sched]
            eq(ctx, "schedule", name, entry["schedule"])
            parts = get("parallelism.module_fqns_per_model_part") or []
            check(get("parallelism.pipeline_parallel_layers_per_stage") is None,
                  f"{ctx}: layers_per_stage set with explicit module names")
            per_rank = len(parts) // pp
            check(len(parts) % pp == 0 and (per_rank >= 2 if looped else per_rank == 1),
                  f"{ctx}: {len(parts)} model parts for pp {pp} with {sched}")
            flat = [x for p in parts for x in p]
            L = cfg["num_hidden_layers"]
            eq(ctx, "module order", flat,
               ["tok_embeddings"] + [f"layers.{i}" for i in range(L)] + ["norm", "lm_head"])
            eq(ctx, "layers per chunk", [sum(x.startswith("layers.") for x in p) for p in parts],
               entry["chunk_layers"])
        # models/deepseek_v3/mtp.py:198: "MTP does not support pipeline parallelism yet."
        check(mtp == 0, f"{ctx}: MTP modules under pipeline parallelism")
    else:
        eq(ctx, "MTP modules", mtp, cfg.get("num_nextn_predict_layers", 0))


def layout_stages(text):
    """PipelineParallelLayerLayout.parse_str_to_list at cd4afff."""
    s = text.replace(",", "")
    s = re.sub(r"\(([^)]+)\)\*(\d+)", lambda x: x.group(1) * int(x.group(2)), s)
    s = re.sub(r"(.)\*(\d+)", lambda x: x.group(1) * int(x.group(2)), s)
    stages = s.split("|")
    for st in stages:
        for ch in st:
            check(ch in "ELtm", f"invalid layer character {ch!r} in {text!r}")
    return stages


MUTATIONS = [
    ("an unknown model field", "model.tensor_model_parallel_size=", "model.tensor_parallel_size="),
    ("a field on the wrong section", "train.micro_batch_size=", "model.micro_batch_size="),
    ("a global batch the plan did not simulate", "train.global_batch_size=", "train.global_batch_size=1"),
    ("the recipe's own pipeline layout kept",
     re.compile(r"\s*'model.pipeline_model_parallel_layout=[^']*' \\\n"), "\n"),
    ("a recipe that does not exist", "--recipe ", "--recipe no_such_"),
    ("a layout with one decoder layer too many", "tmL", "ttmL"),
]


TT_MUTATIONS = [
    ("an unknown parallelism field", "parallelism.tensor_parallel_degree", "parallelism.tp_degree"),
    ("a config function torchtitan does not ship", "config_registry import llama3_70b\n",
     "config_registry import llama3_70b_scaleplan as llama3_70b\n"),
    ("a step of other tokens than the plan's", "num_tokens_per_train_step = 4194304",
     "num_tokens_per_train_step = 8388608"),
    ("a value that is not a literal", "tensor_parallel_degree = 4", "tensor_parallel_degree = 2 * 2"),
    ("a single-stage schedule over looped model parts", '"Interleaved1F1B"', '"1F1B"'),
    ("a layer left out of the model parts", '"layers.79", ', ""),
    ("DDP where the plan shards", "data_parallel_shard_degree = 8", "data_parallel_shard_degree = 1"),
]


def self_test(out, manifest, bridge, titan):
    global FAILURES
    for fmt, model, mutations, checker, defs in (
            ("megatron-bridge", "deepseek-v3", MUTATIONS, check_bridge, bridge),
            ("torchtitan", "llama3-70b", TT_MUTATIONS, check_torchtitan, titan)):
        entry = next(e for e in manifest if e["model"] == model and fmt in e["exports"])
        cfg = json.load(open(entry["config"]))
        text = open(os.path.join(out, entry["exports"][fmt]["file"])).read()
        mutate(out, entry, cfg, text, mutations, checker, defs, fmt)


def mutate(out, entry, cfg, text, mutations, checker, defs, fmt):
    global FAILURES
    for what, old, new in mutations:
        mutated = old.sub(new, text, count=1) if hasattr(old, "sub") else text.replace(old, new, 1)
        if mutated == text:
            FAILURES.append(f"self-test: the mutation '{what}' did not apply")
            continue
        path = os.path.join(out, "mutated." + fmt)
        open(path, "w").write(mutated)
        before = FAILURES
        FAILURES = []
        try:
            checker(entry, path, defs, cfg)
        except Exception as e:  # a crash on bad input is the checker's own bug
            before.append(f"self-test: {what}: the checker crashed: {e!r}")
        caught, FAILURES = FAILURES, before
        check(caught, f"self-test: {what} was not caught")
        if caught:
            print(f"self-test: {fmt}: {what}: caught ({caught[0]})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--generator", required=True)
    ap.add_argument("--frameworks", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    subprocess.run([a.generator, a.out], check=True)
    manifest = json.load(open(os.path.join(a.out, "manifest.json")))
    bridge = json.load(open(os.path.join(a.frameworks, "megatron-bridge.json")))
    titan = json.load(open(os.path.join(a.frameworks, "torchtitan-main.json")))
    checked = 0
    for entry in manifest:
        cfg = json.load(open(entry["config"]))
        for fmt, x in entry["exports"].items():
            want = EXPECTED_REFUSALS.get((entry["model"], fmt))
            if "error" in x:
                check(want is not None and want in x["error"],
                      f"{entry['case']} {fmt}: refused: {x['error']}")
                continue
            check(want is None, f"{entry['case']} {fmt}: written, but {want}")
            path = os.path.join(a.out, x["file"])
            if fmt == "megatron-bridge":
                check_bridge(entry, path, bridge, cfg)
            elif fmt == "torchtitan":
                check_torchtitan(entry, path, titan, cfg)
            checked += 1
    # The check must be able to fail: each mutation of a passing export is one mistake an
    # exporter could make, and each must be caught.
    if not FAILURES:
        self_test(a.out, manifest, bridge, titan)
    for f in FAILURES:
        print("FAIL", f)
    print(f"{checked} exports checked, {len(FAILURES)} failures")
    sys.exit(1 if FAILURES or checked == 0 else 0)


if __name__ == "__main__":
    main()
