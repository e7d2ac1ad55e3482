// Writes the exports of issue 47's targets (Megatron-Bridge, current torchtitan) for the four
// jobs the issue names, at the layouts `scaleplan plan` ranks first for them (the command is
// beside each case), with manifest.json holding the inputs, the resolved layout, its data-parallel
// degree, micro-batch count and schedule, and, where an exporter refuses, its message.
// tests/export/new_exports/check_new_exports.py reads every file back with the frameworks'
// definitions (export/frameworks/).
//
// Usage: new_exports OUT_DIR
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/data_dir.h"
#include "export/exporters.h"

namespace {

using scaleplan::planner::ExportFormat;

struct Case {
  const char* name;
  const char* model;
  const char* cluster;
  int64_t gpus;
  int64_t seq;
  ExportFormat format;
  const char* layout;
};

// The layouts are the best plan of `scaleplan plan --model M --cluster C --gpus N --seq S --gbs B
// --top 1 --emit F` at this commit (the layouts the target runs as simulated), with B = 512
// (Llama 3), 1024 (Mixtral 8x22B) and 4096 (DeepSeek-V3, its Megatron-Bridge recipe's batch).
// torchtitan has no Mixtral module: that export is refused (its layout is Megatron-Bridge's).
const std::vector<Case> kCases = {
    {"llama3-8b_64xH100", "llama3-8b", "dgx-h100", 64, 8192, ExportFormat::kMegatronBridge,
     "tp=1,pp=1,cp=1,mbs=1,gbs=512,zero=2,recompute=none"},
    {"llama3-70b_256xH100", "llama3-70b", "dgx-h100", 256, 8192, ExportFormat::kMegatronBridge,
     "tp=2,pp=4,cp=2,vpp=5,schedule=interleaved,sp=on,mbs=1,gbs=512,zero=2,recompute=none"},
    {"mixtral-8x22b_512xH100", "mixtral-8x22b", "dgx-h100", 512, 4096,
     ExportFormat::kMegatronBridge,
     "tp=1,pp=4,cp=2,ep=8,etp=1,vpp=7,schedule=interleaved,mbs=1,gbs=1024,zero=1,recompute=none"},
    {"deepseek-v3_2048xH800", "deepseek-v3", "dgx-h800", 2048, 4096,
     ExportFormat::kMegatronBridge,
     "tp=1,pp=16,cp=2,ep=8,etp=1,mbs=1,gbs=4096,zero=1,recompute=selective,"
     "recompute_modules=core_attn+layernorm+moe_act+mla_up_proj,pp_last=1"},
    {"llama3-8b_64xH100", "llama3-8b", "dgx-h100", 64, 8192, ExportFormat::kTorchtitanMain,
     "tp=1,pp=2,vpp=4,schedule=interleaved,mbs=1,gbs=512,zero=2,recompute=none"},
    {"llama3-70b_256xH100", "llama3-70b", "dgx-h100", 256, 8192, ExportFormat::kTorchtitanMain,
     "tp=4,pp=8,vpp=5,schedule=interleaved,sp=on,mbs=1,gbs=512,zero=2,recompute=none"},
    {"mixtral-8x22b_512xH100", "mixtral-8x22b", "dgx-h100", 512, 4096,
     ExportFormat::kTorchtitanMain,
     "tp=1,pp=4,cp=2,ep=8,etp=1,vpp=7,schedule=interleaved,mbs=1,gbs=1024,zero=1,recompute=none"},
    {"deepseek-v3_2048xH800", "deepseek-v3", "dgx-h800", 2048, 4096,
     ExportFormat::kTorchtitanMain,
     "tp=2,pp=16,ep=16,etp=1,sp=on,mbs=1,gbs=4096,zero=2,recompute=none,pp_last=1"},
};

const char* file_name(ExportFormat f) {
  switch (f) {
    case ExportFormat::kMegatronBridge:
      return "megatron-bridge.sh";
    case ExportFormat::kTorchtitanMain:
      return "scaleplan_plan.py";
    default:
      return "out";
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace scaleplan;
  if (argc != 2) {
    std::fprintf(stderr, "usage: new_exports OUT_DIR\n");
    return 2;
  }
  const std::filesystem::path out(argv[1]);
  std::filesystem::create_directories(out);
  nlohmann::json manifest = nlohmann::json::array();
  for (const Case& c : kCases) {
    auto model = models::load_model(c.model);
    if (!model) {
      std::fprintf(stderr, "%s: %s\n", c.name, model.status().message().c_str());
      return 1;
    }
    auto parsed = parse_layout(c.layout);
    auto layout = parsed
                      ? resolve_layout(*parsed, models::layout_constraints(*model, c.seq), c.gpus)
                      : Result<Layout>(parsed.status());
    if (!layout) {
      std::fprintf(stderr, "%s: %s\n", c.name, layout.status().message().c_str());
      return 1;
    }
    planner::ExportInput in;
    in.model = &*model;
    in.model_source = c.model;
    in.cluster = c.cluster;
    in.gpus = c.gpus;
    in.gpus_per_node = 8;
    in.gpu_sm = 90;
    in.seq_len = c.seq;
    in.layout = *layout;
    auto chunks = stage_layer_counts(*layout, model->num_layers);
    nlohmann::json e = {{"case", c.name},
                        {"model", c.model},
                        {"config", data_dir() + "/models/presets/" + c.model + ".json"},
                        {"gpus", c.gpus},
                        {"gpus_per_node", 8},
                        {"seq", c.seq},
                        {"layout", format_layout(*layout)},
                        {"dp", *layout->dp},
                        {"microbatches", layout->num_microbatches()},
                        {"schedule", std::string(to_string(layout->schedule))},
                        {"vpp", layout->vpp_degree()},
                        {"chunk_layers", chunks ? *chunks : std::vector<int>{}},
                        {"mtp_layers", model->mtp_layers},
                        {"exports", nlohmann::json::object()}};
    for (ExportFormat f : {c.format}) {
      const std::string fmt(planner::to_string(f));
      auto x = planner::export_layout(in, f);
      if (!x) {
        e["exports"][fmt] = {{"error", x.status().message()}};
        continue;
      }
      const std::string file = std::string(c.name) + "." + file_name(f);
      std::ofstream(out / file) << x->content;
      e["exports"][fmt] = {{"file", file}, {"notes", x->notes}};
    }
    manifest.push_back(e);
  }
  std::ofstream(out / "manifest.json") << manifest.dump(1) << "\n";
  return 0;
}
