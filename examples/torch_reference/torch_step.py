"""The reference training step in plain PyTorch: what `scaleplan run --backend cuda` and
`scaleplan compare` are set beside on a GPU (docs/runtime.md, "The reference step").

A Llama-family model read from a HF config.json (llama3-8b-4l.json beside this file: Llama-3-8B
cut to 4 layers) trained on one GPU the way torchtitan trains it there: fp32 parameters,
bf16 autocast, SDPA attention (PyTorch picks cuDNN's kernels on Hopper), K and V repeated to the
query heads (torchtitan's repeat_kv), complex RoPE, fp32 logits into cross-entropy, fused AdamW.
One step = GAS micro-batches of MBS x SEQ tokens, then the optimizer: the layout
`tp=1,pp=1,dp=1,mbs=MBS,gbs=MBS*GAS` with `--framework torchtitan`.

Writes into OUT:
  torch_step.json       step times (CUDA events; median, min, max of --steps after 3 warm-up),
                        eager and compiled, peak allocated and reserved memory, card, versions,
                        parameters, the SDPA backend
  torch_trace.json.gz   one profiled eager step (PyTorch profiler, record_shapes=True,
                        profile_memory=True): `scaleplan compare --measured`

Usage: torch_step.py OUT [--config llama3-8b-4l.json] [--seq 4096] [--mbs 1] [--gas 4]
                         [--steps 10] [--skip-compile] [--dry-run]
--dry-run checks the arguments and the config without PyTorch or a GPU and prints the plan.
The recipe is that of measured/h200-2026-11-28/torch_step.py (H200, 2026-11-28: eager 0.3228 s,
compiled 0.2971 s, 41.65 GiB peak allocated), written for the project; since 2026-11-29 it frees
the bf16 logits before the backward as torchtitan does (that run kept them: 0.98 GiB more at the peak).
"""
import argparse
import gzip
import json
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--config", default=os.path.join(HERE, "llama3-8b-4l.json"))
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--mbs", type=int, default=1)
    p.add_argument("--gas", type=int, default=4)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--skip-compile", action="store_true")
    p.add_argument("--dry-run", action="store_true")
    a = p.parse_args(argv)
    for k in ("seq", "mbs", "gas", "steps"):
        if getattr(a, k) <= 0:
            p.error(f"--{k}: must be positive, got {getattr(a, k)}")
    return a


def read_config(path):
    """The fields of a HF Llama config the step uses; a missing or bad one is named."""
    try:
        with open(path) as f:
            c = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"torch_step.py: --config {path}: {e}")
    need = {"hidden_size": int, "intermediate_size": int, "num_attention_heads": int,
            "num_hidden_layers": int, "vocab_size": int}
    cfg = {}
    for k, t in need.items():
        if not isinstance(c.get(k), t) or c[k] <= 0:
            sys.exit(f"torch_step.py: --config {path}: {k}: expected a positive integer, "
                     f"got {c.get(k)!r}")
        cfg[k] = c[k]
    cfg["num_key_value_heads"] = c.get("num_key_value_heads") or cfg["num_attention_heads"]
    cfg["rope_theta"] = float(c.get("rope_theta", 10000.0))
    cfg["rms_norm_eps"] = float(c.get("rms_norm_eps", 1e-5))
    if cfg["hidden_size"] % cfg["num_attention_heads"]:
        sys.exit(f"torch_step.py: --config {path}: hidden_size {cfg['hidden_size']} is not a "
                 f"multiple of num_attention_heads {cfg['num_attention_heads']}")
    if cfg["num_attention_heads"] % cfg["num_key_value_heads"]:
        sys.exit(f"torch_step.py: --config {path}: num_attention_heads is not a multiple of "
                 f"num_key_value_heads")
    return cfg


def main(argv):
    a = parse_args(argv)
    cfg = read_config(a.config)
    plan = {"config": os.path.basename(a.config), "model": cfg, "seq": a.seq, "mbs": a.mbs,
            "gas": a.gas, "steps": a.steps, "compile": not a.skip_compile,
            "layout": f"tp=1,pp=1,dp=1,mbs={a.mbs},gbs={a.mbs * a.gas}"}
    if a.dry_run:
        print(json.dumps({"dry_run": plan}, indent=1))
        return 0

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    if not torch.cuda.is_available():
        sys.exit("torch_step.py: no CUDA device (torch.cuda.is_available() is False)")
    os.makedirs(a.out, exist_ok=True)
    dev = torch.device("cuda")
    DIM, FFN = cfg["hidden_size"], cfg["intermediate_size"]
    HEADS, KV, VOCAB = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["vocab_size"]
    THETA, EPS, HD = cfg["rope_theta"], cfg["rms_norm_eps"], DIM // cfg["num_attention_heads"]
    props = torch.cuda.get_device_properties(0)
    R = {"torch": torch.__version__, "cuda": torch.version.cuda,
         "cudnn": torch.backends.cudnn.version(), "card": torch.cuda.get_device_name(0),
         "sm_count": props.multi_processor_count, "memory_bytes": props.total_memory,
         "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "plan": plan}

    def rope_freqs(seq):
        f = 1.0 / (THETA ** (torch.arange(0, HD, 2, device=dev).float() / HD))
        t = torch.arange(seq, device=dev).float()
        return torch.polar(torch.ones(seq, HD // 2, device=dev), torch.outer(t, f))

    def apply_rope(x, fc):  # torchtitan models/llama3/model.py apply_rotary_emb
        xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(xc * fc[None, :, None, :]).flatten(3).type_as(x)

    class Block(nn.Module):
        def __init__(s):
            super().__init__()
            s.an, s.fn = nn.RMSNorm(DIM, eps=EPS), nn.RMSNorm(DIM, eps=EPS)
            s.wq = nn.Linear(DIM, HEADS * HD, bias=False)
            s.wk, s.wv = nn.Linear(DIM, KV * HD, bias=False), nn.Linear(DIM, KV * HD, bias=False)
            s.wo = nn.Linear(HEADS * HD, DIM, bias=False)
            s.w1, s.w3 = nn.Linear(DIM, FFN, bias=False), nn.Linear(DIM, FFN, bias=False)
            s.w2 = nn.Linear(FFN, DIM, bias=False)

        def forward(s, x, fc):
            b, t, _ = x.shape
            h = s.an(x)
            q = s.wq(h).view(b, t, HEADS, HD)
            k = s.wk(h).view(b, t, KV, HD)
            v = s.wv(h).view(b, t, KV, HD)
            q, k = apply_rope(q, fc), apply_rope(k, fc)
            rep = HEADS // KV  # torchtitan repeat_kv
            k = k[:, :, :, None, :].expand(b, t, KV, rep, HD).reshape(b, t, HEADS, HD)
            v = v[:, :, :, None, :].expand(b, t, KV, rep, HD).reshape(b, t, HEADS, HD)
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                               v.transpose(1, 2), is_causal=True)
            x = x + s.wo(o.transpose(1, 2).reshape(b, t, DIM))
            h = s.fn(x)
            return x + s.w2(F.silu(s.w1(h)) * s.w3(h))

    class Llama(nn.Module):
        def __init__(s, n):
            super().__init__()
            s.emb = nn.Embedding(VOCAB, DIM)
            s.layers = nn.ModuleList(Block() for _ in range(n))
            s.norm = nn.RMSNorm(DIM, eps=EPS)
            s.out = nn.Linear(DIM, VOCAB, bias=False)

        def forward(s, tok, fc):
            x = s.emb(tok)
            for layer in s.layers:
                x = layer(x, fc)
            return s.out(s.norm(x))

    torch.manual_seed(0)
    model = Llama(cfg["num_hidden_layers"]).to(dev)
    for p_ in model.parameters():
        if p_.dim() > 1:
            nn.init.normal_(p_, std=0.02)
    R["params"] = sum(p_.numel() for p_ in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
    fc = rope_freqs(a.seq)
    g = torch.Generator(device=dev).manual_seed(1)
    data = [(torch.randint(0, VOCAB, (a.mbs, a.seq), device=dev, generator=g),
             torch.randint(0, VOCAB, (a.mbs, a.seq), device=dev, generator=g))
            for _ in range(a.gas)]
    tokens = a.mbs * a.seq * a.gas

    def step(m):
        for tok, lab in data:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = m(tok, fc)
            loss = F.cross_entropy(logits.float().view(-1, VOCAB), lab.view(-1)) / a.gas
            # torchtitan frees the bf16 logits before the backward (train.py:540-541 at v0.2.2:
            # "need to free pred before bwd to avoid peaking memory"); cross-entropy keeps what
            # its backward needs. The trace of 2026-11-28 kept them (0.98 GiB at the peak).
            del logits
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def time_steps(m, n, warm=3):
        for _ in range(warm):
            step(m)
        torch.cuda.synchronize()
        ts = []
        for _ in range(n):
            e0 = torch.cuda.Event(enable_timing=True)
            e1 = torch.cuda.Event(enable_timing=True)
            e0.record()
            step(m)
            e1.record()
            torch.cuda.synchronize()
            ts.append(e0.elapsed_time(e1) / 1e3)
        ts.sort()
        return {"median_s": ts[len(ts) // 2], "min_s": ts[0], "max_s": ts[-1], "steps_s": ts,
                "tokens_per_s": tokens / ts[len(ts) // 2]}

    def save():
        with open(os.path.join(a.out, "torch_step.json"), "w") as f:
            json.dump(R, f, indent=1)

    torch.cuda.reset_peak_memory_stats()
    R["eager"] = time_steps(model, a.steps)
    R["eager"]["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
    R["eager"]["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
    print(f"eager step {R['eager']['median_s']:.4f} s, peak allocated "
          f"{R['eager']['peak_allocated_bytes'] / 2**30:.2f} GiB", flush=True)
    save()

    # One profiled step (after one warm-up step inside the profiler's schedule), with the input
    # shapes of every op and the allocator's [memory] events: compare's measured timeline.
    from torch.profiler import ProfilerActivity, profile, schedule
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=0, warmup=1, active=1, repeat=1),
                 record_shapes=True, profile_memory=True) as prof:
        for _ in range(2):
            step(model)
            torch.cuda.synchronize()
            prof.step()
    raw = os.path.join(a.out, "torch_trace.json")
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as f_in, gzip.open(raw + ".gz", "wb") as f_out:
        shutil.copyfileobj(f_in, f_out)
    os.remove(raw)
    kernels = [e for e in prof.key_averages() if e.device_time_total > 0]
    R["sdpa_kernels"] = sorted({e.key[:100] for e in kernels
                                if "cudnn" in e.key.lower() or "flash" in e.key.lower()
                                or "fmha" in e.key.lower()})[:10]
    save()

    if not a.skip_compile:
        t0 = time.time()
        R["compiled"] = time_steps(torch.compile(model), a.steps)
        R["compiled"]["wall_incl_compile_s"] = time.time() - t0
        print(f"compiled step {R['compiled']['median_s']:.4f} s", flush=True)
        save()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
