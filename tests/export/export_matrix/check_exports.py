#!/usr/bin/env python3
"""Reads every export of the matrix back as its framework would, and checks that every model field
(from the Hugging Face config.json itself) and every layout degree round-trips.

The frameworks' own parsers need torch and GPU builds, so each is reproduced from its definitions
at the pinned commit (export/frameworks/*.json, scripts/framework_defs/):
  Megatron-LM  argparse.ArgumentParser(allow_abbrev=False) built from every option pretrain_gpt.py
               accepts; parse_args on the script's arguments, as Megatron does; then the
               validate_args conditions the exporter relies on.
  torchtitan   tomllib.load, then ConfigManager._dict_to_dataclass's rule (a key that is not a
               JobConfig field raises) with the fields' types; model name and flavor looked up.
  nanotron     yaml.safe_load, then dacite.from_dict(Config, strict=True)'s rules: unknown keys,
               missing required fields and wrong types raise; the model config union picks the
               first class that matches strictly.
  DeepSpeed    json.load; every top-level key one DeepSpeedConfig reads; the pydantic sections'
               keys (extra="forbid").
A refusal (the exporter's error) is accepted only where the test lists it with its reason.

Usage: check_exports.py --generator BUILD/tests/export_matrix --frameworks export/frameworks --out DIR
"""
import argparse
import contextlib
import io
import json
import math
import os
import re
import shlex
import subprocess
import sys
import tomllib

try:
    import yaml
except ImportError:
    sys.exit("check_exports.py needs PyYAML (scripts/setup.sh installs python3-yaml)")

FAILURES = []

# Exports that must be refused, and a phrase of the reason (what the framework lacks).
EXPECTED_REFUSALS = {
    ("mixtral-8x7b", "torchtitan-0.2.2"): "has no model for model_type 'mixtral'",
    ("qwen3-30b-a3b", "nanotron"): "no per-head q/k norm",
    ("deepseek-v3", "nanotron"): "no multi-latent attention",
}


def expected_refusal(entry, fmt):
    want = EXPECTED_REFUSALS.get((entry["model"], fmt))
    if want is None and fmt == "nanotron" and int(layout_dict(entry["layout"]).get("zero", 0)) > 1:
        want = "takes zero_stage 0 or 1"  # nanotron's optimizer: ZeRO-0 and ZeRO-1 only
    if want is None and fmt == "deepspeed" and int(layout_dict(entry["layout"]).get("cp", 1)) > 1:
        want = "DeepSpeed has no context parallelism"  # its topology has no CP axis
    return want


def check(cond, what):
    if not cond:
        FAILURES.append(what)
    return cond


def eq(ctx, name, got, want):
    ok = got == want
    if isinstance(got, float) or isinstance(want, float):
        ok = (isinstance(got, (int, float)) and isinstance(want, (int, float))
              and math.isclose(got, want, rel_tol=1e-12))
    check(ok, f"{ctx}: {name}: read {got!r}, the model/layout says {want!r}")


def layout_dict(text):
    return dict(kv.split("=", 1) for kv in text.split(","))


# ---------------------------------------------------------------------------------------------
# Megatron-LM

def megatron_parser(defs):
    p = argparse.ArgumentParser(prog="pretrain_gpt.py", allow_abbrev=False, add_help=False)
    types = {"int": int, "float": float, "str": str}
    for o in defs["options"]:
        kw = {"dest": o["dest"]}
        action = o.get("action", "store")
        if action in ("store_true", "store_false"):
            kw["action"] = action
        elif action in ("store_const", "append_const"):
            kw["action"] = action
            kw["const"] = o.get("const")
        elif action == "append":
            kw["action"] = "append"
        else:
            t = o.get("type")
            kw["type"] = types.get(t, str)
            if o.get("nargs") is not None:
                kw["nargs"] = o["nargs"]
            ch = o.get("choices")
            if isinstance(ch, list) and t in ("int", "float", "str", "enum"):
                kw["choices"] = [types.get(t, str)(c) for c in ch]
        if "default" in o and not isinstance(o["default"], dict):
            kw["default"] = o["default"]
        p.add_argument(*o["flags"], **kw)
    return p


PLACEHOLDER_VALUES = {"DATA_PATH": "/data/prefix", "TOKENIZER_MODEL": "org/tokenizer",
                      "TRAIN_ITERS": "1000", "LR": "3e-4", "MIN_LR": "3e-5",
                      "LR_WARMUP_ITERS": "100", "NODE_RANK": "0", "MASTER_ADDR": "node0",
                      "MASTER_PORT": "6000"}


def megatron_command(script):
    """(environment exports, required variables, torchrun tokens) of the script."""
    env, required = {}, set()
    joined = re.sub(r"\\\n", " ", script)
    cmd = None
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r'export (\w+)=(\S+)', line)
        if m:
            env[m.group(1)] = m.group(2)
            continue
        m = re.fullmatch(r'unset (\w+)', line)
        if m:
            env[m.group(1)] = None
            continue
        m = re.fullmatch(r': "\$\{(\w+):\?[^}]*\}"', line)
        if m:
            required.add(m.group(1))
            continue
        if line.startswith("torchrun"):
            cmd = line
            continue
        FAILURES.append(f"unexpected line in the script: {line}")
    used = set(re.findall(r"\$\{?(\w+)", cmd or ""))
    for v in used - required - {"MASTER_PORT"}:
        FAILURES.append(f"the script uses ${v} without requiring it")
    expanded = re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: PLACEHOLDER_VALUES.get(m.group(1), m.group(2)),
                      cmd or "")
    expanded = re.sub(r"\$\{?(\w+)\}?", lambda m: PLACEHOLDER_VALUES[m.group(1)], expanded)
    return env, shlex.split(expanded)


def megatron_stage_layers(a, num_layers):
    """Layers per chunk, in chunk order, as Megatron splits them."""
    if a.pipeline_model_parallel_layout:
        return [s.count("t") for s in a.pipeline_model_parallel_layout.split("|")]
    pp = a.pipeline_model_parallel_size
    if a.num_layers_per_virtual_pipeline_stage:
        n = a.num_layers_per_virtual_pipeline_stage
        check(num_layers % n == 0, "layers per virtual stage must divide the layers")
        return [n] * (num_layers // n)
    first, last = a.decoder_first_pipeline_num_layers, a.decoder_last_pipeline_num_layers
    if first is None and last is None:
        check(num_layers % pp == 0, "Megatron needs the layers to divide by pp without pinned ends")
        return [num_layers // pp] * pp
    middle_stages = pp - (first is not None) - (last is not None)
    rest = num_layers - (first or 0) - (last or 0)
    check(middle_stages == 0 or rest % middle_stages == 0, "uneven middle stages")
    mid = [rest // middle_stages] * middle_stages if middle_stages else []
    return ([first] if first is not None else []) + mid + ([last] if last is not None else [])


def check_megatron(entry, path, defs, cfg):
    ctx = f"{entry['case']} megatron"
    script = open(path).read()
    r = subprocess.run(["bash", "-n", path], capture_output=True, text=True)
    check(r.returncode == 0, f"{ctx}: bash -n: {r.stderr}")
    env, tokens = megatron_command(script)
    check("pretrain_gpt.py" in tokens, f"{ctx}: no pretrain_gpt.py")
    launcher = tokens[:tokens.index("pretrain_gpt.py")]
    args = tokens[tokens.index("pretrain_gpt.py") + 1:]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            a = megatron_parser(defs).parse_args(args)
    except SystemExit:
        FAILURES.append(f"{ctx}: Megatron-LM's parser refuses it: {err.getvalue().strip()}")
        return
    gpus, per_node = entry["gpus"], entry["gpus_per_node"]
    # torchrun: one node runs standalone; more need their rank, which the script requires.
    nproc = int(launcher[launcher.index("--nproc_per_node") + 1])
    nnodes = int(launcher[launcher.index("--nnodes") + 1]) if "--nnodes" in launcher else 1
    eq(ctx, "torchrun processes", nproc * nnodes, gpus)
    if nnodes == 1:
        check("--standalone" in launcher, f"{ctx}: one node runs torchrun --standalone")
    lay = layout_dict(entry["layout"])
    L = cfg["num_hidden_layers"]
    # Model fields, from config.json.
    eq(ctx, "num_layers", a.num_layers, L)
    eq(ctx, "hidden_size", a.hidden_size, cfg["hidden_size"])
    eq(ctx, "num_attention_heads", a.num_attention_heads, cfg["num_attention_heads"])
    moe_all = "num_local_experts" in cfg or (cfg.get("num_experts") and not cfg.get("mlp_only_layers")
                                              and cfg.get("decoder_sparse_step", 1) == 1)
    eq(ctx, "ffn_hidden_size", a.ffn_hidden_size, cfg["intermediate_size"])
    # The embedding Megatron builds: the vocabulary padded to a multiple of
    # make_vocab_size_divisible_by · tp (training.tokenizer _vocab_size_with_padding).
    multiple = a.make_vocab_size_divisible_by * a.tensor_model_parallel_size
    eq(ctx, "padded vocab", a.vocab_size + (-a.vocab_size) % multiple, cfg["vocab_size"])
    eq(ctx, "swiglu", a.swiglu, cfg.get("hidden_act", "silu") == "silu")
    eq(ctx, "normalization", a.normalization, "RMSNorm")
    eq(ctx, "norm_epsilon", a.layernorm_epsilon, float(cfg["rms_norm_eps"]))
    eq(ctx, "untie", a.untie_embeddings_and_output_weights, not cfg.get("tie_word_embeddings", False))
    eq(ctx, "position_embedding_type", a.position_embedding_type, "rope")
    eq(ctx, "rotary_base", a.rotary_base, cfg["rope_theta"])
    eq(ctx, "add_bias_linear", a.add_bias_linear, False)
    eq(ctx, "add_qkv_bias", a.add_qkv_bias, cfg.get("model_type") in ("qwen2", "qwen2_moe"))
    eq(ctx, "qk_layernorm", a.qk_layernorm, cfg.get("model_type") in ("qwen3", "qwen3_moe"))
    rs = cfg.get("rope_scaling")
    mla = "kv_lora_rank" in cfg
    if mla:
        eq(ctx, "multi_latent_attention", a.multi_latent_attention, True)
        eq(ctx, "q_lora_rank", a.q_lora_rank, cfg["q_lora_rank"])
        eq(ctx, "kv_lora_rank", a.kv_lora_rank, cfg["kv_lora_rank"])
        eq(ctx, "qk_head_dim", a.qk_head_dim, cfg["qk_nope_head_dim"])
        eq(ctx, "qk_pos_emb_head_dim", a.qk_pos_emb_head_dim, cfg["qk_rope_head_dim"])
        eq(ctx, "v_head_dim", a.v_head_dim, cfg["v_head_dim"])
        if rs and rs.get("type", rs.get("rope_type")) == "yarn":
            eq(ctx, "rope_type", a.rope_type, "yarn")
            eq(ctx, "rotary_scaling_factor", a.rotary_scaling_factor, float(rs["factor"]))
            eq(ctx, "mscale", a.mscale, float(rs["mscale"]))
            eq(ctx, "mscale_all_dim", a.mscale_all_dim, float(rs["mscale_all_dim"]))
            # MLATransformerConfig's defaults, which have no flag.
            eq(ctx, "yarn original positions", 4096, rs["original_max_position_embeddings"])
            eq(ctx, "yarn beta_fast", 32, rs["beta_fast"])
            eq(ctx, "yarn beta_slow", 1, rs["beta_slow"])
    else:
        kv = cfg.get("num_key_value_heads", cfg["num_attention_heads"])
        groups = a.num_query_groups if a.group_query_attention else cfg["num_attention_heads"]
        eq(ctx, "query groups", groups, kv)
        eq(ctx, "kv_channels", a.kv_channels,
           cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"]))
        eq(ctx, "use_rope_scaling", bool(a.use_rope_scaling),
           bool(rs) and rs.get("rope_type", rs.get("type")) == "llama3")
    experts = cfg.get("num_local_experts") or cfg.get("num_experts") or cfg.get("n_routed_experts")
    if experts:
        eq(ctx, "num_experts", a.num_experts, experts)
        eq(ctx, "moe_router_topk", a.moe_router_topk, cfg["num_experts_per_tok"])
        eq(ctx, "moe_ffn_hidden_size", a.moe_ffn_hidden_size,
           cfg.get("moe_intermediate_size", cfg["intermediate_size"]))
        shared = cfg.get("n_shared_experts", 0) * cfg.get("moe_intermediate_size", 0) or \
            cfg.get("shared_expert_intermediate_size")
        eq(ctx, "moe_shared_expert_intermediate_size", a.moe_shared_expert_intermediate_size,
           shared or None)
        dense = cfg.get("first_k_dense_replace", 0)
        freq = a.moe_layer_freq
        pattern = eval(freq.strip("'")) if isinstance(freq, str) else [1] * L
        eq(ctx, "moe layer pattern", pattern, [0] * dense + [1] * (L - dense))
        score = cfg.get("scoring_func", "softmax")
        eq(ctx, "moe_router_score_function", a.moe_router_score_function, score)
        renorm = cfg.get("norm_topk_prob", True)
        eq(ctx, "moe_router_pre_softmax (softmax, no renormalization)", a.moe_router_pre_softmax,
           score == "softmax" and not renorm)
        eq(ctx, "moe_router_enable_expert_bias", a.moe_router_enable_expert_bias,
           cfg.get("topk_method") == "noaux_tc" or cfg.get("model_type") == "deepseek_v3")
        eq(ctx, "moe_router_topk_scaling_factor", a.moe_router_topk_scaling_factor,
           cfg.get("routed_scaling_factor"))
        eq(ctx, "moe_router_num_groups", a.moe_router_num_groups, cfg.get("n_group"))
        eq(ctx, "moe_router_group_topk", a.moe_router_group_topk, cfg.get("topk_group"))
        coeff = cfg.get("router_aux_loss_coef", cfg.get("aux_loss_alpha"))
        eq(ctx, "moe_aux_loss_coeff", a.moe_aux_loss_coeff, [coeff])
    eq(ctx, "mtp_num_layers", a.mtp_num_layers, cfg.get("num_nextn_predict_layers"))
    # Layout degrees.
    tp, pp, cp = int(lay["tp"]), int(lay["pp"]), int(lay["cp"])
    eq(ctx, "tp", a.tensor_model_parallel_size, tp)
    eq(ctx, "pp", a.pipeline_model_parallel_size, pp)
    eq(ctx, "cp", a.context_parallel_size, cp)
    eq(ctx, "dp = world / (tp·pp·cp)", gpus // (tp * pp * cp), int(lay["dp"]))
    eq(ctx, "ep", a.expert_model_parallel_size, int(lay.get("ep", 1)))
    if int(lay.get("ep", 1)) > 1:  # expert grid (expert_tensor_parallel_size defaults to tp)
        eq(ctx, "etp", a.expert_tensor_parallel_size or tp, int(lay.get("etp", 1)))
    eq(ctx, "sp", a.sequence_parallel, lay.get("sp") == "on")
    eq(ctx, "mbs", a.micro_batch_size, int(lay["mbs"]))
    eq(ctx, "gbs", a.global_batch_size, int(lay["gbs"]))
    eq(ctx, "seq", a.seq_length, entry["seq"])
    eq(ctx, "chunk layers", megatron_stage_layers(a, L), entry["chunk_layers"])
    zero = int(lay.get("zero", 0))
    eq(ctx, "distributed optimizer (ZeRO-1)", a.use_distributed_optimizer, zero == 1)
    eq(ctx, "Megatron FSDP (ZeRO-2/3)", a.use_megatron_fsdp, zero >= 2)
    if zero >= 2:
        eq(ctx, "sharding strategy", a.data_parallel_sharding_strategy,
           "optim_grads" if zero == 2 else "optim_grads_params")
        eq(ctx, "ckpt_format", a.ckpt_format, "fsdp_dtensor")
    rec = lay.get("recompute", "none")
    eq(ctx, "recompute_granularity", a.recompute_granularity, None if rec == "none" else rec)
    # The site's values are asked for, not left out: pretrain_gpt.py needs data, a tokenizer, a
    # length and a learning rate (validate_args, the data loader and the tokenizer builder).
    eq(ctx, "data_path", a.data_path, [PLACEHOLDER_VALUES["DATA_PATH"]])
    eq(ctx, "tokenizer", (a.tokenizer_type, a.tokenizer_model),
       ("HuggingFaceTokenizer", PLACEHOLDER_VALUES["TOKENIZER_MODEL"]))
    eq(ctx, "train_iters", a.train_iters, int(PLACEHOLDER_VALUES["TRAIN_ITERS"]))
    eq(ctx, "lr", a.lr, float(PLACEHOLDER_VALUES["LR"]))
    # validate_args conditions the export must meet.
    if a.overlap_param_gather:
        check(a.use_distributed_optimizer or a.use_megatron_fsdp,
              f"{ctx}: --overlap-param-gather needs the distributed optimizer")
        check(a.overlap_grad_reduce, f"{ctx}: --overlap-param-gather needs --overlap-grad-reduce")
    if zero >= 2:
        check(env.get("CUDA_DEVICE_MAX_CONNECTIONS") is None,
              f"{ctx}: FSDP asserts CUDA_DEVICE_MAX_CONNECTIONS != 1")
    elif tp > 1 or cp > 1:
        eq(ctx, "CUDA_DEVICE_MAX_CONNECTIONS", env.get("CUDA_DEVICE_MAX_CONNECTIONS"), "1")
    check(sum(x is not None for x in (a.num_layers_per_virtual_pipeline_stage,
                                       a.num_virtual_stages_per_pipeline_rank,
                                       a.pipeline_model_parallel_layout)) <= 1,
          f"{ctx}: validate_args allows one of the virtual-stage options")
    if a.pipeline_model_parallel_layout:
        flat = a.pipeline_model_parallel_layout.replace("|", "")
        eq(ctx, "layout: embedding first, loss last", (flat[0], flat[-1]), ("E", "L"))
        eq(ctx, "layout: MTP modules (validate_layer_layout)", flat.count("m"),
           a.mtp_num_layers or 0)
        check("t" not in flat[flat.find("m"):] if "m" in flat else True,
              f"{ctx}: decoder layers must come before MTP layers")
        eq(ctx, "layout stages divide by pp",
           len(a.pipeline_model_parallel_layout.split("|")) % pp, 0)
    if a.tp_comm_overlap:
        check(a.sequence_parallel, f"{ctx}: --tp-comm-overlap needs --sequence-parallel")
    if int(lay.get("ep", 1)) > 1 and tp > 1:
        check(a.sequence_parallel, f"{ctx}: EP with TP needs SP (TransformerConfig)")


# ---------------------------------------------------------------------------------------------
# torchtitan

def toml_type_ok(ann, v):
    ann = ann.replace(" ", "")
    if ann.endswith("|None") or ann.startswith("Optional["):
        if v is None:
            return True
        ann = ann[:-5] if ann.endswith("|None") else ann[len("Optional["):-1]
    if ann.startswith("Literal["):
        return v in [json.loads(x.replace("'", '"')) for x in re.findall(r"'[^']*'|\"[^\"]*\"|-?\d+", ann[8:-1])]
    if ann == "int":
        return isinstance(v, int) and not isinstance(v, bool)
    if ann == "float":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if ann in ("float|int", "int|float"):
        return isinstance(v, (int, float))
    if ann == "bool":
        return isinstance(v, bool)
    if ann == "str":
        return isinstance(v, str)
    if ann.startswith("list[list[str]]"):
        return isinstance(v, list) and all(isinstance(x, list) and all(isinstance(y, str) for y in x) for x in v)
    if ann.startswith("list[str]"):
        return isinstance(v, list) and all(isinstance(x, str) for x in v) or (ann.endswith("|str") and isinstance(v, str))
    return True


def walk_toml(ctx, data, tree, prefix=""):
    for k, v in data.items():
        if k not in tree:
            FAILURES.append(f"{ctx}: ConfigManager._dict_to_dataclass: invalid field {prefix}{k}")
            continue
        node = tree[k]
        if "section" in node:
            if check(isinstance(v, dict), f"{ctx}: {prefix}{k} must be a table"):
                walk_toml(ctx, v, node["section"], prefix + k + ".")
        else:
            check(toml_type_ok(node["annotation"], v),
                  f"{ctx}: {prefix}{k} = {v!r} is not {node['annotation']}")


def check_torchtitan(entry, path, defs, cfg):
    ctx = f"{entry['case']} torchtitan"
    with open(path, "rb") as f:
        t = tomllib.load(f)
    walk_toml(ctx, t, defs["job_config"])
    name, flavor = t["model"]["name"], t["model"]["flavor"]
    check(name in defs["supported_models"], f"{ctx}: model {name} is not a torchtitan model")
    fl = defs["flavors"].get(name, {}).get(flavor)
    if not check(fl is not None, f"{ctx}: {name} has no flavor {flavor}"):
        return
    # The flavor's shape is the config's (torchtitan keeps the model in code).
    for k, v in fl["hf_shape"].items():
        if k in ("rope_theta", "rms_norm_eps", "rope_scaling", "scoring_func",
                 "routed_scaling_factor", "n_group", "topk_group"):
            continue  # training details the exporter notes where they differ
        if k == "tie_word_embeddings":
            eq(ctx, k, v, cfg.get(k, False))
        elif k in cfg:
            eq(ctx, f"flavor {flavor} {k}", v, cfg[k])
        elif k == "head_dim":
            eq(ctx, "flavor head_dim", v, cfg["hidden_size"] // cfg["num_attention_heads"])
        elif k == "num_key_value_heads":
            eq(ctx, "flavor kv heads", v, cfg["num_attention_heads"])
    p, tr = t["parallelism"], t["training"]
    lay = layout_dict(entry["layout"])
    tp, pp, cp, dp = int(lay["tp"]), int(lay["pp"]), int(lay["cp"]), int(lay["dp"])
    eq(ctx, "tp", p.get("tensor_parallel_degree", 1), tp)
    eq(ctx, "pp", p.get("pipeline_parallel_degree", 1), pp)
    eq(ctx, "cp", p.get("context_parallel_degree", 1), cp)
    eq(ctx, "ep", p.get("expert_parallel_degree", 1), int(lay.get("ep", 1)))
    eq(ctx, "etp", p.get("expert_tensor_parallel_degree", 1), int(lay.get("etp", 1)))
    rep, shard = p.get("data_parallel_replicate_degree", 1), p.get("data_parallel_shard_degree", -1)
    eq(ctx, "dp = replicate·shard", rep * shard, dp)
    eq(ctx, "world", rep * shard * cp * tp * pp, entry["gpus"])
    zero = int(lay.get("zero", 0))
    want = {0: (dp, 1), 2: (1, dp), 3: (1, dp)}.get(zero)
    if want:
        eq(ctx, "replicate, shard", (rep, shard), want)
        if zero:
            eq(ctx, "fsdp_reshard_after_forward", p.get("fsdp_reshard_after_forward"),
               "never" if zero == 2 else "always")
    if pp > 1:
        parts = p["module_fqns_per_model_part"]
        layers = [[int(x.split(".")[1]) for x in part if x.startswith("layers.")] for part in parts]
        eq(ctx, "chunk layers", [len(x) for x in layers], entry["chunk_layers"])
        eq(ctx, "layers in order", sum(layers, []), list(range(cfg["num_hidden_layers"])))
        eq(ctx, "embedding first", parts[0][0], "tok_embeddings")
        eq(ctx, "head last", parts[-1][-2:], ["norm", "output"])
        sched = {"1f1b": "1F1B", "afab": "GPipe", "interleaved": "Interleaved1F1B",
                 "zb-h1": "InterleavedZeroBubble", "dualpipev": "DualPipeV", "zb-v": "ZBVZeroBubble"}
        eq(ctx, "schedule", p["pipeline_parallel_schedule"], sched.get(lay.get("schedule", "1f1b")))
        eq(ctx, "microbatch", p["pipeline_parallel_microbatch_size"], int(lay["mbs"]))
    eq(ctx, "global batch", tr["global_batch_size"], int(lay["gbs"]))
    eq(ctx, "seq_len", tr["seq_len"], entry["seq"])
    rec = lay.get("recompute", "none")
    eq(ctx, "activation checkpoint", t["activation_checkpoint"]["mode"], rec)
    torchtitan_startup(ctx, p, tr, entry["gpus"], zero)


def torchtitan_startup(ctx, p, tr, world, zero):
    """torchtitan v0.2.2's start-up checks on the parallelism it reads, with PyTorch's schedules."""
    rep, shard = p.get("data_parallel_replicate_degree", 1), p.get("data_parallel_shard_degree", -1)
    cp, pp = p.get("context_parallel_degree", 1), p.get("pipeline_parallel_degree", 1)
    # distributed/parallel_dims.py:334: fsdp_enabled = dp_shard_enabled or cp_enabled.
    fsdp = shard > 1 or cp > 1
    # models/llama3/infra/parallelize.py:148-151: without FSDP, replication is DDP, and "DDP has
    # not supported > 1D parallelism" unless the replicate mesh is the world.
    if not fsdp and rep > 1:
        check(rep == world, f"{ctx}: torchtitan raises 'DDP has not supported > 1D parallelism' "
                            f"(replicate {rep} of {world} ranks)")
    # With CP, FSDP is on whatever the degrees: a plan simulated at ZeRO-0 would run sharded.
    if cp > 1:
        check(zero >= 1, f"{ctx}: torchtitan shards over the CP ranks, the plan was ZeRO-0")
    if pp > 1:
        local, mbs = tr["local_batch_size"], p["pipeline_parallel_microbatch_size"]
        # distributed/pipeline_parallel.py:189: the batch splits into whole micro-batches.
        if not check(local % mbs == 0, f"{ctx}: local_batch_size {local} % microbatch {mbs}"):
            return
        m = local // mbs
        sched = p["pipeline_parallel_schedule"]
        # torch/distributed/pipelining/schedules.py ScheduleInterleaved1F1B / InterleavedZeroBubble:
        # number_of_rounds = max(1, m // pp); m % number_of_rounds must be 0.
        if sched in ("Interleaved1F1B", "InterleavedZeroBubble"):
            rounds = max(1, m // pp)
            check(m % rounds == 0, f"{ctx}: {sched} requires the micro-batches ({m}) to be a "
                                   f"multiple of the number of rounds ({rounds})")
        # ScheduleDualPipeV: "requires at least as many microbatches as stages" (2·pp stages).
        if sched == "DualPipeV":
            check(m >= 2 * pp, f"{ctx}: DualPipeV needs {2 * pp} micro-batches, got {m}")


# ---------------------------------------------------------------------------------------------
# nanotron (dacite strict)

def split_top(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += ch in "[("
        depth -= ch in "])"
        cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


class Dacite:
    ENUM_HOOKS = {"PipelineEngine": ["afab", "1f1b"],
                  "TensorParallelLinearMode": ["ALL_REDUCE", "REDUCE_SCATTER"]}

    def __init__(self, defs):
        self.classes = defs["dataclasses"]
        self.enums = defs["enums"]
        self.aliases = defs["aliases"]
        self.matched = {}

    def value(self, ann, v, where):
        """None when v fits ann, else the error."""
        ann = ann.strip()
        if ann in self.aliases:
            ann = self.aliases[ann]
        if ann == "Any":
            return None
        if ann.startswith("Optional["):
            return None if v is None else self.value(ann[9:-1], v, where)
        if ann.startswith("Union["):
            errs = []
            for alt in split_top(ann[6:-1]):
                e = self.value(alt, v, where)
                if e is None:
                    self.matched[where] = alt
                    return None
                errs.append(e)
            return f"{where}: no member of {ann} fits: {errs}"
        if ann.startswith(("List[", "list[")):
            if not isinstance(v, list):
                return f"{where}: expected a list"
            for i, x in enumerate(v):
                e = self.value(ann[5:-1], x, f"{where}[{i}]")
                if e:
                    return e
            return None
        if ann in self.classes:
            return self.dataclass(ann, v, where)
        if ann in self.enums:
            return None if isinstance(v, str) and v.upper() in self.enums[ann] else f"{where}: {v!r} not in {ann}"
        if ann in self.ENUM_HOOKS:
            return None if v in self.ENUM_HOOKS[ann] or str(v).upper() in self.ENUM_HOOKS[ann] else f"{where}: {v!r}"
        if ann in ("Path", "xPath"):
            return None if isinstance(v, str) else f"{where}: expected a path"
        if ann == "torch.dtype":
            return None if v in ("bfloat16", "float32", "float16") else f"{where}: dtype {v!r}"
        py = {"int": int, "float": float, "str": str, "bool": bool, "dict": dict, "list": list}
        if ann in py:
            ok = isinstance(v, py[ann]) and not (ann == "int" and isinstance(v, bool))
            return None if ok else f"{where}: {v!r} is not {ann} (dacite does not convert)"
        return None  # types dacite checks no further here (e.g. AttentionImplementation literal)

    def dataclass(self, cls, data, where):
        if not isinstance(data, dict):
            return f"{where}: expected a mapping for {cls}"
        fields = {f["name"]: f for f in self.classes[cls]}
        extra = set(data) - set(fields)
        if extra:
            return f"{where}: {cls}: unexpected keys {sorted(extra)} (strict)"
        for name, f in fields.items():
            if name not in data:
                if f["required"] and not f["annotation"].startswith("Optional["):
                    return f"{where}: {cls}: missing required field {name}"
                continue
            e = self.value(f["annotation"], data[name], f"{where}.{name}")
            if e:
                return e
        return None


def check_nanotron(entry, path, defs, cfg):
    ctx = f"{entry['case']} nanotron"
    data = yaml.safe_load(open(path))
    d = Dacite(defs)
    err = d.dataclass("Config", data, "config")
    if not check(err is None, f"{ctx}: dacite strict: {err}"):
        return
    eq(ctx, "model config class", d.matched.get("config.model.model_config"), "Qwen2Config")
    mc = data["model"]["model_config"]
    for k in ("hidden_size", "num_attention_heads", "num_hidden_layers", "vocab_size",
              "rope_theta", "rms_norm_eps"):
        eq(ctx, k, mc[k], cfg[k])
    eq(ctx, "num_key_value_heads", mc["num_key_value_heads"],
       cfg.get("num_key_value_heads", cfg["num_attention_heads"]))
    eq(ctx, "tie_word_embeddings", mc["tie_word_embeddings"], cfg.get("tie_word_embeddings", False))
    eq(ctx, "attention_bias (q, k, v)", mc["attention_bias"], cfg.get("model_type") in ("qwen2", "qwen2_moe"))
    eq(ctx, "head_dim = hidden / heads", cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"]),
       cfg["hidden_size"] // cfg["num_attention_heads"])
    experts = cfg.get("num_local_experts") or cfg.get("num_experts")
    if experts:
        moe = mc["moe_config"]
        eq(ctx, "num_experts", moe["num_experts"], experts)
        eq(ctx, "top_k", moe["top_k"], cfg["num_experts_per_tok"])
        eq(ctx, "moe_intermediate_size", moe["moe_intermediate_size"],
           cfg.get("moe_intermediate_size", cfg["intermediate_size"]))
    else:
        eq(ctx, "intermediate_size", mc["intermediate_size"], cfg["intermediate_size"])
    p, t = data["parallelism"], data["tokens"]
    lay = layout_dict(entry["layout"])
    tp, pp, cp, dp = int(lay["tp"]), int(lay["pp"]), int(lay["cp"]), int(lay["dp"])
    eq(ctx, "tp", p["tp"], tp)
    eq(ctx, "pp", p["pp"], pp)
    eq(ctx, "dp", p["dp"], dp)
    eq(ctx, "cp", p.get("context_parallel_size", 1), cp)
    eq(ctx, "ep", p.get("expert_parallel_size", 1), int(lay.get("ep", 1)))
    eq(ctx, "TP*CP*DP*PP = world (ParallelContext)", tp * cp * dp * pp, entry["gpus"])
    eq(ctx, "zero", data["optimizer"]["zero_stage"], int(lay.get("zero", 0)))
    eq(ctx, "mbs", t["micro_batch_size"], int(lay["mbs"]))
    eq(ctx, "gbs", t["micro_batch_size"] * t["batch_accumulation_per_replica"] * dp, int(lay["gbs"]))
    eq(ctx, "seq", t["sequence_length"], entry["seq"])
    if cp > 1:
        check(mc.get("_attn_implementation") in ("ring", "llama3_ring_attention"),
              f"{ctx}: cp > 1 needs a ring attention, got {mc.get('_attn_implementation')}")
    check(mc.get("_attn_implementation") in defs["attention_implementations"],
          f"{ctx}: attention implementation {mc.get('_attn_implementation')}")


# ---------------------------------------------------------------------------------------------
# DeepSpeed

def check_deepspeed(entry, path, defs, cfg):
    ctx = f"{entry['case']} deepspeed"
    j = json.load(open(path))
    for k, v in j.items():
        check(k in defs["top_level_keys"], f"{ctx}: DeepSpeedConfig does not read {k}")
        sec = defs["sections"].get(k)
        if sec and sec["extra"] == "forbid":
            names = set(sec["fields"]) | {f.get("alias") for f in sec["fields"].values()}
            for kk in v:
                check(kk in names, f"{ctx}: {k}.{kk} is not a field of {sec['class']} (extra=forbid)")
    lay = layout_dict(entry["layout"])
    # DeepSpeed's batch assertion (runtime/config.py:924 at v0.19.5): train_batch_size = micro ·
    # accumulation · world_size, where world_size is the data-parallel size its topology gives
    # (mpu.get_data_parallel_world_size(): the world over the pipe and model axes; it has no
    # context-parallel axis, config.py:697-711), not the layout's dp.
    ds_dp = entry["gpus"] // (int(lay["tp"]) * int(lay["pp"]))
    eq(ctx, "train_batch_size", j["train_batch_size"],
       j["train_micro_batch_size_per_gpu"] * j["gradient_accumulation_steps"] * ds_dp)
    eq(ctx, "gbs", j["train_batch_size"], int(lay["gbs"]))
    eq(ctx, "mbs", j["train_micro_batch_size_per_gpu"], int(lay["mbs"]))
    eq(ctx, "zero", j["zero_optimization"]["stage"], int(lay.get("zero", 0)))
    eq(ctx, "autotp", j.get("tensor_parallel", {}).get("autotp_size", 1), int(lay["tp"]))


CHECKERS = {"megatron": ("megatron-lm", check_megatron), "torchtitan-0.2.2": ("torchtitan", check_torchtitan),
            "nanotron": ("nanotron", check_nanotron), "deepspeed": ("deepspeed", check_deepspeed)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--generator", required=True)
    ap.add_argument("--frameworks", required=True)
    ap.add_argument("--out", required=True)
    o = ap.parse_args()
    subprocess.run([o.generator, o.out], check=True)
    manifest = json.load(open(os.path.join(o.out, "manifest.json")))
    defs = {f: json.load(open(os.path.join(o.frameworks, name + ".json")))
            for f, (name, _) in CHECKERS.items()}
    counted = 0
    for entry in manifest:
        cfg = json.load(open(entry["config"]))
        for fmt, (_, fn) in CHECKERS.items():
            if fmt not in entry["exports"]:
                continue  # a ranked layout is exported with its target only
            x = entry["exports"][fmt]
            want = expected_refusal(entry, fmt)
            if "error" in x:
                if check(want is not None, f"{entry['case']} {fmt}: refused: {x['error']}"):
                    check(want in x["error"], f"{entry['case']} {fmt}: refused for another reason: {x['error']}")
                continue
            check(want is None, f"{entry['case']} {fmt}: exported, but the framework cannot: {want}")
            before = len(FAILURES)
            fn(entry, os.path.join(o.out, x["file"]), defs[fmt], cfg)
            counted += 1
            status = "ok" if len(FAILURES) == before else "FAILED"
            print(f"{status}: {entry['case']} {fmt}")
    for f in FAILURES:
        print("FAIL:", f)
    ranked = {}
    for entry in manifest:
        if "ranked_for" in entry:
            ranked[entry["ranked_for"]] = ranked.get(entry["ranked_for"], 0) + 1
    # Every target has ranked layouts read back (a sampler that found none would test nothing).
    for fmt in CHECKERS:
        check(ranked.get(fmt, 0) >= 10, f"ranked layouts for {fmt}: only {ranked.get(fmt, 0)}")
    print(f"{counted} exports read back ({ranked} ranked), {len(FAILURES)} failures")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
