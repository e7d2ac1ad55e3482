// The current-torchtitan export (`--emit torchtitan`): a chosen layout as a Python config
// function, for torchtitan main at b5bcd76 (2026-08-21), which configures runs in Python since
// pull request 2386 ("Config System Refactor: TOML to Python Dataclass Registry"). The TOML of
// v0.2.2, its last release that read one, is `--emit torchtitan-0.2.2` (export/exporters.cc).
//
// A run is a function returning `Trainer.Config` (torchtitan/trainer.py), chosen when
// `./run_train.sh` starts by MODULE (`--module`) and CONFIG (`--config`); torchtitan/config/
// README.md. The export is a module `scaleplan_plan.py` with one function `scaleplan_plan()`
// that starts from the shipped config function of the model's flavor
// (torchtitan/models/<model>/config_registry.py) and sets the layout's fields on its dataclasses
// (training, parallelism, activation_checkpoint, compile; torchtitan/config/configs.py, slots=True:
// an attribute that is not a field raises). The batch is counted in tokens
// (training.num_tokens_per_microbatch_per_dp_rank = mbs·seq, training.num_tokens_per_train_step
// = gbs·seq) and pipeline micro-batches (parallelism.num_pp_microbatches), from which the trainer
// derives the gradient accumulation (trainer.py:409-428).
//
// Definitions: export/frameworks/torchtitan-main.json (scripts/framework_defs/
// extract_torchtitan_main.py); test tests/export/new_exports/check_new_exports.py. Pure
// function of its inputs and that file; thread-safe.
#pragma once

#include "core/status.h"
#include "export/exporters.h"

namespace scaleplan::planner {

Result<Export> export_torchtitan_main(const ExportInput& in);

}  // namespace scaleplan::planner
