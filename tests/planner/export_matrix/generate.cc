// Writes every exporter's output for the export test matrix (tests/planner/export_matrix/
// check_exports.py reads them back as each framework would): five models at layouts that use TP,
// interleaved PP, CP, EP and ZeRO-1/2/3, one file per (case, format), and manifest.json with the
// inputs and, where an exporter refuses, its message.
//
// Usage: export_matrix OUT_DIR
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/data_dir.h"
#include "planner/exporters.h"

namespace {

using scaleplan::planner::ExportFormat;

struct Case {
  const char* name;
  const char* model;
  int64_t gpus;
  int64_t seq;
  const char* layout;
};

// Each model at one layout with interleaving and ZeRO-1 (the Megatron distributed optimizer), and
// one with FSDP (ZeRO-3) or ZeRO-2; CP on some, EP on every MoE model.
const std::vector<Case> kCases = {
    {"llama3-8b_interleaved_cp", "llama3-8b", 32, 8192,
     "tp=2,pp=2,vpp=2,schedule=interleaved,cp=2,mbs=1,gbs=64,zero=1,recompute=selective"},
    {"llama3-8b_fsdp_cp", "llama3-8b", 32, 8192, "tp=4,cp=2,mbs=1,gbs=64,zero=3"},
    {"llama3-70b_interleaved_cp", "llama3-70b", 128, 8192,
     "tp=8,pp=4,vpp=5,schedule=interleaved,cp=2,mbs=1,gbs=64,zero=1,recompute=full"},
    {"llama3-70b_fsdp", "llama3-70b", 64, 4096, "tp=8,mbs=1,gbs=64,zero=3"},
    {"qwen3-30b-a3b_interleaved_ep_cp", "qwen3-30b-a3b", 64, 8192,
     "tp=2,pp=2,vpp=2,schedule=interleaved,cp=2,ep=8,mbs=1,gbs=64,zero=1"},
    {"qwen3-30b-a3b_zero2_ep", "qwen3-30b-a3b", 32, 4096, "tp=1,ep=8,mbs=1,gbs=64,zero=2"},
    {"mixtral-8x7b_interleaved_ep", "mixtral-8x7b", 64, 4096,
     "tp=2,pp=4,vpp=2,schedule=interleaved,ep=8,mbs=1,gbs=128,zero=1"},
    {"mixtral-8x7b_fsdp_ep_cp", "mixtral-8x7b", 64, 8192, "tp=2,cp=2,ep=8,mbs=1,gbs=64,zero=3"},
    {"deepseek-v3_interleaved_ep", "deepseek-v3", 512, 4096,
     "tp=2,pp=8,vpp=2,schedule=interleaved,ep=32,mbs=1,gbs=512,zero=1,recompute=full"},
    {"deepseek-v3_1f1b_ep_cp", "deepseek-v3", 256, 8192,
     "tp=2,pp=4,cp=2,ep=16,mbs=1,gbs=256,zero=1,recompute=full"},
};

const char* ext(ExportFormat f) {
  switch (f) {
    case ExportFormat::kMegatron:
      return "megatron.sh";
    case ExportFormat::kTorchtitan:
      return "torchtitan.toml";
    case ExportFormat::kDeepspeed:
      return "ds_config.json";
    case ExportFormat::kNanotron:
      return "nanotron.yaml";
    case ExportFormat::kJson:
      return "plan.json";
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace scaleplan;
  if (argc != 2) {
    std::fprintf(stderr, "usage: export_matrix OUT_DIR\n");
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
    in.cluster = "dgx-h100";
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
                        {"chunk_layers", chunks ? *chunks : std::vector<int>{}},
                        {"exports", nlohmann::json::object()}};
    for (ExportFormat f : {ExportFormat::kMegatron, ExportFormat::kTorchtitan,
                           ExportFormat::kDeepspeed, ExportFormat::kNanotron}) {
      const std::string fmt(planner::to_string(f));
      auto x = planner::export_layout(in, f);
      if (!x) {
        e["exports"][fmt] = {{"error", x.status().message()}};
        continue;
      }
      const std::string file = std::string(c.name) + "." + ext(f);
      std::ofstream(out / file) << x->content;
      e["exports"][fmt] = {{"file", file}, {"notes", x->notes}};
    }
    manifest.push_back(e);
  }
  std::ofstream(out / "manifest.json") << manifest.dump(1) << "\n";
  return 0;
}
