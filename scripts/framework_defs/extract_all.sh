#!/usr/bin/env bash
# Regenerates export/frameworks/*.json: each framework's configuration surface at the pinned
# version that scaleplan's exporters target (docs/planner.md, "Exports"). Needs the frameworks'
# repositories as git directories (bare clones are enough):
#   MEGATRON_GIT=... TORCHTITAN_GIT=... NANOTRON_GIT=... DEEPSPEED_GIT=... MEGATRON_BRIDGE_GIT=...
#   extract_all.sh
# A new pin: change the ref here, rerun, update the exporters until tests/planner pass, and the
# versions in README.md and docs/planner.md.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$here/../../export/frameworks"
python3 "$here/extract_megatron.py" "$MEGATRON_GIT" core_v0.19.0 > "$out/megatron-lm.json"
python3 "$here/extract_torchtitan.py" "$TORCHTITAN_GIT" v0.2.2 > "$out/torchtitan.json"
python3 "$here/extract_nanotron.py" "$NANOTRON_GIT" 2411b022a75fb7f7561a1bb4166706da5e1b76de > "$out/nanotron.json"
python3 "$here/extract_deepspeed.py" "$DEEPSPEED_GIT" v0.19.5 > "$out/deepspeed.json"
# Megatron-Bridge and the Megatron-LM commit its 3rdparty/Megatron-LM submodule pins (the config
# dataclasses' bases live there): MEGATRON_BRIDGE_GIT=... MEGATRON_GIT=...
python3 "$here/extract_megatron_bridge.py" "$MEGATRON_BRIDGE_GIT" v0.6.0 "$MEGATRON_GIT" > "$out/megatron-bridge.json"
python3 "$here/extract_torchtitan_main.py" "$TORCHTITAN_GIT" b5bcd76c66d0acb1a08b176d9639425bc55e0b2a > "$out/torchtitan-main.json"
