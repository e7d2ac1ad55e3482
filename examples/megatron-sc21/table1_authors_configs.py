#!/usr/bin/env python3
"""The Megatron-LM 2021 Table 1 records with the layout their authors ran (docs/validation.md).

The shared records (validation/dev_runs.json, ids megatron2021_t1_*) carry what the
paper's Table 1 states: tp, pp, GPUs and batch. The micro-batch size and the interleaving depth are
not in the table, so the records omit them and `validate` falls back to the layout defaults
(mbs = 1; vpp = 2 where the record says `schedule=interleaved`). The authors published the scripts
that produced Table 1 in the Megatron-LM repository, examples/sc21/run_table_1.sh (commit
79a3bb6bf2c85b748c46749dd0695e23310d4e16): per model size, MBS and, for some sizes,
--num-layers-per-virtual-pipeline-stage N, i.e. vpp = layers / (pp * N). Sizes without that flag
ran the plain 1F1B schedule. This script writes the ten Table 1 records with those keys filled in
(measured values unchanged) so that the simulator can be checked on the configurations that were
actually measured:

    examples/megatron-sc21/table1_authors_configs.py > /tmp/table1.json
    build/scaleplan validate /tmp/table1.json

Nothing here is fitted: the keys are copied from the authors' script. What the script also sets
and scaleplan does not model per record: DDP=torch (PyTorch DDP, fp16 gradients reduced in buckets
during the backward) for the pp = 1 sizes and DDP=local (Megatron's fp32 buffer reduced after the
backward, what `megatron-2022` models) for the others.

Usage: table1_authors_configs.py [--runs PATH]   (JSON array on stdout)
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNS = os.path.join(ROOT, "..", "shared", "validation", "dev_runs.json")
SCRIPT = ("NVIDIA/Megatron-LM examples/sc21/run_table_1.sh at commit "
          "79a3bb6bf2c85b748c46749dd0695e23310d4e16")

# Record id suffix -> (MBS, --num-layers-per-virtual-pipeline-stage or None), from SCRIPT.
AUTHORS = {
    "1p7B": (16, None),
    "3p6B": (16, None),
    "7p5B": (16, None),
    "18p4B": (8, None),
    "39p1B": (4, None),
    "76p1B": (2, 5),
    "145p6B": (2, 5),
    "310p1B": (1, 3),
    "529p6B": (1, 1),
    "1008p0B": (1, None),
}


def authors_layout(layout, layers, mbs, layers_per_virtual):
    """The record's layout with mbs set and the schedule and vpp the authors' script used."""
    kv = dict(item.split("=") for item in layout.split(","))
    for key in ("mbs", "vpp", "schedule"):
        kv.pop(key, None)
    kv["mbs"] = str(mbs)
    pp = int(kv.get("pp", 1))
    if layers_per_virtual is not None:
        if layers % (pp * layers_per_virtual) != 0:
            raise ValueError(f"{layers} layers do not split into pp={pp} x {layers_per_virtual}")
        kv["schedule"] = "interleaved"
        kv["vpp"] = str(layers // (pp * layers_per_virtual))
    return ",".join(f"{k}={v}" for k, v in kv.items())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", default=RUNS, help="validation records (default: %(default)s)")
    args = parser.parse_args()
    with open(args.runs) as f:
        data = json.load(f)
    records = data["records"] if isinstance(data, dict) else data
    out = []
    for rec in records:
        if not rec["id"].startswith("megatron2021_t1_"):
            continue
        size = rec["id"].split("_")[2]
        if size not in AUTHORS:
            sys.exit(f"table1_authors_configs: no authors' configuration for {rec['id']}")
        mbs, per_virtual = AUTHORS[size]
        rec = dict(rec)
        rec["layout"] = authors_layout(rec["layout"], rec["model"]["num_hidden_layers"], mbs,
                                       per_virtual)
        rec["id"] = rec["id"] + "_authors"
        rec["notes"] = (f"Layout keys mbs/vpp/schedule from {SCRIPT} (MBS={mbs}" +
                        (f", --num-layers-per-virtual-pipeline-stage {per_virtual}" if per_virtual
                         else ", no interleaving") + "). " + rec.get("notes", ""))
        out.append(rec)
    if len(out) != len(AUTHORS):
        sys.exit(f"table1_authors_configs: found {len(out)} Table 1 records, expected "
                 f"{len(AUTHORS)}")
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
