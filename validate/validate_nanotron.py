#!/usr/bin/env python3
"""Planner vs the nanotron Ultra-Scale Playbook sweep (docs/validation.md, "## Planner").

For each (model, GPU count) cell of the nanotron rows of dev_runs.json with the 1M-token batch
(gbs 256 x seq 4096), run `scaleplan plan` restricted with --fix to what the sweep could run:
ZeRO <= 1, no CP, no recompute, the 1F1B engine, no pinned stage sizes, and the sweep's own tp, pp
and micro-batch values in that cell; memory conventions of nanotron (--framework nanotron). Then:
  - the planner's top choice (the first ranked layout with SP on exactly when tp > 1, as the
    sweep's REDUCE_SCATTER TP mode), and where it ranks among the measured configurations;
  - when the top choice was not measured, the first planner-ranked layout that was;
  - whether the planner recommends a layout that ran out of memory (its top choice, and how many
    of its fitting layouts the sweep saw run out of memory).
Nothing here is fitted: the planner runs with its defaults.

Usage: validate/validate_nanotron.py [--scaleplan build/scaleplan] [--cache DIR] [--markdown]
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS = os.path.join(ROOT, "..", "shared", "validation", "dev_runs.json")
MODEL_NAMES = {2048: "1.34B", 4096: "8.86B"}


def key_of(layout):
    """(tp, pp, dp, mbs, zero) of a layout string: what identifies a sweep configuration."""
    kv = dict(item.split("=") for item in layout.split(","))
    return (int(kv.get("tp", 1)), int(kv.get("pp", 1)), int(kv["dp"]), int(kv.get("mbs", 1)),
            int(kv.get("zero", 0)))


def sp_matches_sweep(layout):
    kv = dict(item.split("=") for item in layout.split(","))
    return (kv.get("sp") == "on") == (int(kv.get("tp", 1)) > 1)


def cells(runs_path):
    runs = json.load(open(runs_path))
    out = collections.defaultdict(list)
    for r in runs:
        if not r["framework"].lower().startswith("nanotron") or r.get("incomplete"):
            continue
        kv = dict(item.split("=") for item in r["layout"].split(","))
        if kv.get("gbs") != "256" or r["seq_len"] != 4096:
            continue
        out[(r["model"]["hidden_size"], r["gpus"])].append(r)
    return out


def run_plan(scaleplan, rows, gpus, cache, margin=None, cluster=None):
    model = rows[0]["model"]
    tps = sorted({key_of(r["layout"])[0] for r in rows})
    pps = sorted({key_of(r["layout"])[1] for r in rows})
    mbss = sorted({key_of(r["layout"])[3] for r in rows})
    fixes = ["zero=0|1", "cp=1", "recompute=none", "schedule=1f1b", "pp_first=none",
             "pp_last=none", "tp=" + "|".join(map(str, tps)), "pp=" + "|".join(map(str, pps)),
             "mbs=" + "|".join(map(str, mbss))]
    # The cache is opt-in and only for re-reading one build's results: a plan JSON does not say
    # which binary produced it.
    cache_file = (os.path.join(cache, "plan_%d_%d_%s_%s.json" % (model["hidden_size"], gpus,
                                                              margin or "default",
                                                              cluster or "records"))
                  if cache else None)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(model, f)
        config = f.name
    cmd = [scaleplan, "plan", "--model", config, "--cluster", cluster or rows[0]["cluster"], "--gpus",
           str(gpus), "--seq", "4096", "--gbs", "256", "--framework", "nanotron", "--top",
           "1000000", "--max-simulations", "0", "--json", "-q"]
    for fx in fixes:
        cmd += ["--fix", fx]
    if margin:
        cmd += ["--memory-margin", margin]
    if cache_file and os.path.exists(cache_file):
        result = json.load(open(cache_file))
    else:
        p = subprocess.run(cmd, capture_output=True, text=True)
        os.unlink(config)
        if p.returncode != 0:
            raise SystemExit("scaleplan plan failed: %s\n%s" % (" ".join(cmd), p.stderr))
        result = json.loads(p.stdout)
        if cache_file:
            json.dump(result, open(cache_file, "w"))
    return result, fixes


def evaluate(rows, result):
    measured_ok = {}
    oom = set()
    for r in rows:
        k = key_of(r["layout"])
        m = r["measured"]
        if m["status"] == "oom":
            oom.add(k)
        elif m["status"] == "ok" and m.get("timing_valid", True) is not False:
            t = m.get("tokens_per_s_per_gpu")
            if t is not None:
                measured_ok[k] = max(measured_ok.get(k, 0), t)
    ranked = sorted(measured_ok.items(), key=lambda kv: -kv[1])
    measured_rank = {k: i + 1 for i, (k, _) in enumerate(ranked)}
    best = ranked[0][1] if ranked else None
    plans = [p for p in result["plans"] if sp_matches_sweep(p["layout"])]
    row = {"measured_configs": len(ranked), "measured_best": best,
           "planner_fit": len(plans), "fit_but_oom": sum(key_of(p["layout"]) in oom for p in plans)}
    if not plans:
        row["top"] = None
        return row
    top = plans[0]
    row["top"] = top["layout"]
    tk = key_of(top["layout"])
    row["top_status"] = ("oom" if tk in oom else "ok" if tk in measured_rank else "not measured")
    row["top_rank"] = measured_rank.get(tk)
    row["top_gap"] = 1 - measured_ok[tk] / best if tk in measured_ok else None
    row["top_predicted"] = top["tokens_per_s_per_gpu"]
    for i, p in enumerate(plans):
        k = key_of(p["layout"])
        if k in measured_rank or k in oom:
            row["first_measured_planner_rank"] = i + 1
            row["first_measured_layout"] = p["layout"]
            row["first_measured_status"] = "oom" if k in oom else "ok"
            row["first_measured_rank"] = measured_rank.get(k)
            row["first_measured_gap"] = 1 - measured_ok[k] / best if k in measured_ok else None
            break
    return row


def short(layout):
    k = key_of(layout)
    return "tp%d pp%d dp%d mbs%d z%d" % k


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scaleplan", default=os.path.join(ROOT, "build-plan", "scaleplan"))
    ap.add_argument("--runs", default=RUNS)
    ap.add_argument("--cache", default=None,
                    help="keep each cell's plan JSON here and reuse it on the next run (same build only)")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--memory-margin", default=None, help="passed to scaleplan plan (default: its own)")
    ap.add_argument("--cluster", default=None,
                    help="plan on this profile instead of the records' (e.g. hf-h100, the sweep's "
                         "cluster with its measured network scaling)")
    a = ap.parse_args()
    if a.cache:
        os.makedirs(a.cache, exist_ok=True)
    table = []
    for (hidden, gpus), rows in sorted(cells(a.runs).items()):
        result, fixes = run_plan(a.scaleplan, rows, gpus, a.cache, a.memory_margin, a.cluster)
        row = evaluate(rows, result)
        row.update(model=MODEL_NAMES.get(hidden, str(hidden)), nodes=gpus // 8, gpus=gpus,
                   search_s=result["search_s"], simulated=result["simulated"])
        table.append(row)
        print("done %s %d GPUs: top %s" % (row["model"], gpus, row.get("top")), file=sys.stderr)
    if not a.markdown:
        print(json.dumps(table, indent=1))
        return
    pct = lambda x: "-" if x is None else "%.1f%%" % (100 * x)
    print("| model | nodes | measured configs | planner top choice | measured status | measured "
          "rank | gap to measured best | first measured in planner order (planner rank: measured "
          "rank, gap) | planner-fitting layouts that ran OOM |")
    print("|---|---|---|---|---|---|---|---|---|")
    within5 = cells_ok = top_oom = 0
    for r in table:
        first = "-"
        if r.get("first_measured_layout"):
            first = "#%d %s: %s%s" % (
                r["first_measured_planner_rank"], short(r["first_measured_layout"]),
                "OOM" if r["first_measured_status"] == "oom" else "rank %s" % r["first_measured_rank"],
                "" if r["first_measured_gap"] is None else ", " + pct(r["first_measured_gap"]))
        print("| %s | %d | %d | %s | %s | %s | %s | %s | %d of %d |" % (
            r["model"], r["nodes"], r["measured_configs"],
            short(r["top"]) if r["top"] else "none fits", r.get("top_status", "-"),
            r.get("top_rank") or "-", pct(r.get("top_gap")), first, r["fit_but_oom"],
            r["planner_fit"]))
        gap = r.get("top_gap")
        if gap is None and r.get("first_measured_status") == "ok":
            gap = r.get("first_measured_gap")
        cells_ok += 1
        within5 += gap is not None and gap <= 0.05
        top_oom += r.get("top_status") == "oom"
    print()
    print("Cells: %d. Top choice (or, when it was not measured, the first measured layout in "
          "planner order) the measured best or within 5%% of it: %d. Top choice measured OOM: %d."
          % (cells_ok, within5, top_oom))


if __name__ == "__main__":
    main()
