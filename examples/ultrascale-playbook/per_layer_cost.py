#!/usr/bin/env python3
"""Time per layer and micro-batch in the nanotron sweep, measured and predicted.

The sweep's step time is derived from its tokens/s/GPU: step = gbs * seq / (tokens/s/GPU * gpus).
A 1F1B step runs acc + pp - 1 micro-batch slots (acc = gbs / (dp * mbs)) of one stage each, and a
stage holds layers / pp decoder layers, so step / (acc + pp - 1) / (layers / pp) is the time one
stage spends per layer and micro-batch (forward and backward). Compute-bound cells scale with mbs;
a per-micro-batch fixed cost does not. Rows the sweep flags out-of-memory are left out.

Usage (from the repository root, after scripts/build.sh):
  build/scaleplan validate validation/dev_runs.json --group nanotron \\
      --profile dgx-h100=hf-h100 --json -q > /tmp/v.json
  examples/ultrascale-playbook/per_layer_cost.py validation/dev_runs.json /tmp/v.json
"""
import json
import statistics
import sys
from collections import defaultdict


def main(records_path, validate_path):
    records = {r["id"]: r for r in json.load(open(records_path))}
    rows = json.load(open(validate_path))["rows"]
    cells = defaultdict(list)  # (hidden, placement, tp, mbs) -> [(measured ms, predicted ms)]
    for row in rows:
        rec = records.get(row["id"])
        if rec is None or row.get("metric") != "throughput" or not row.get("measured"):
            continue
        if "oom_error=True" in rec.get("notes", ""):
            continue
        kv = dict(item.split("=") for item in rec["layout"].split(","))
        tp, pp, dp, mbs, gbs = (int(kv.get(k, 1)) for k in ("tp", "pp", "dp", "mbs", "gbs"))
        if tp > 8:
            continue  # tensor parallelism across nodes: a different regime
        nodes = rec["gpus"] // 8
        layers = rec["model"]["num_hidden_layers"]
        acc = gbs // (dp * mbs)
        slots = acc + pp - 1
        tokens = gbs * rec["seq_len"]

        def per_layer_ms(tokens_per_s_per_gpu):
            step = tokens / (tokens_per_s_per_gpu * rec["gpus"])
            return 1e3 * step / slots / (layers / pp)

        placement = "one node" if nodes == 1 else ("nodes, pp=1" if pp == 1 else "nodes, pp>1")
        key = (rec["model"]["hidden_size"], placement, tp, mbs)
        cells[key].append((per_layer_ms(row["measured"]), per_layer_ms(row["predicted"])))
    print(f"{'hidden':>6} {'placement':<12} {'tp':>3} {'mbs':>4} {'rows':>5} "
          f"{'measured ms':>12} {'predicted ms':>13} {'ratio':>6}")
    for key in sorted(cells):
        meas = statistics.median(m for m, _ in cells[key])
        pred = statistics.median(p for _, p in cells[key])
        h, placement, tp, mbs = key
        print(f"{h:>6} {placement:<12} {tp:>3} {mbs:>4} {len(cells[key]):>5} "
              f"{meas:>12.1f} {pred:>13.1f} {meas / pred:>6.2f}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
