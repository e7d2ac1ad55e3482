// Writes every exporter's output for the export test matrix (tests/export/export_matrix/
// check_exports.py reads them back as each framework would): five models at layouts that use TP,
// interleaved PP, CP, EP and ZeRO-1/2/3, one file per (case, format), and manifest.json with the
// inputs and, where an exporter refuses, its message.
//
// Usage: export_matrix OUT_DIR
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/data_dir.h"
#include "export/exporters.h"

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

// Jobs whose search space each export target ranks from (plan --emit F): the layouts the planner
// may rank for F, sampled one per combination of schedule, ZeRO stage, CP, TP, PP and EP, are
// exported with F and read back with F's start-up checks (issue 44: every exported layout starts).
struct Job {
  const char* name;
  const char* model;
  int64_t gpus;
  int64_t seq;
  int64_t gbs;
};
const std::vector<Job> kRankedJobs = {
    {"llama3-8b", "llama3-8b", 64, 8192, 96},
    {"llama3-70b", "llama3-70b", 256, 8192, 512},  // issue 44's DeepSpeed job
    {"qwen3-30b-a3b", "qwen3-30b-a3b", 64, 4096, 192},
};
constexpr size_t kPerJob = 24;  // sampled layouts per job and format

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

// Appends the sampled ranked layouts of every job, exported with their target only.
int add_ranked(const std::filesystem::path& out, nlohmann::json& manifest) {
  using namespace scaleplan;
  for (const Job& job : kRankedJobs) {
    auto model = models::load_model(job.model);
    if (!model) {
      std::fprintf(stderr, "%s: %s\n", job.name, model.status().message().c_str());
      return 1;
    }
    for (ExportFormat f : {ExportFormat::kMegatron, ExportFormat::kTorchtitan,
                           ExportFormat::kDeepspeed, ExportFormat::kNanotron}) {
      planner::SearchOptions so;
      so.model = models::layout_constraints(*model, job.seq);
      so.gpus = job.gpus;
      so.gbs = job.gbs;
      so.runnable = planner::runnable_values(f, *model);
      so.runnable_by = std::string(planner::framework_name(f));
      so.refused = planner::refused_combinations(f);
      auto space = planner::enumerate_layouts(so);
      if (!space) {
        std::fprintf(stderr, "%s: %s\n", job.name, space.status().message().c_str());
        return 1;
      }
      std::set<std::string> seen;
      const std::string fmt(planner::to_string(f));
      for (const Layout& l : space->candidates) {
        if (seen.size() >= kPerJob) break;
        const std::string kind = std::string(to_string(l.schedule)) + "/" + std::to_string(l.zero) +
                                 "/" + std::to_string(l.cp > 1) + "/" + std::to_string(l.tp) + "/" +
                                 std::to_string(l.pp > 1) + "/" + std::to_string(l.ep > 1);
        if (!seen.insert(kind).second) continue;
        planner::ExportInput in;
        in.model = &*model;
        in.model_source = job.model;
        in.cluster = "dgx-h100";
        in.gpus = job.gpus;
        in.gpus_per_node = 8;
        in.gpu_sm = 90;
        in.seq_len = job.seq;
        in.layout = l;
        const std::string name =
            std::string("ranked_") + job.name + "_" + fmt + "_" + std::to_string(seen.size());
        auto chunks = stage_layer_counts(l, model->num_layers);
        nlohmann::json e = {{"case", name},
                            {"model", job.model},
                            {"config", data_dir() + "/models/presets/" + job.model + ".json"},
                            {"gpus", job.gpus},
                            {"gpus_per_node", 8},
                            {"seq", job.seq},
                            {"layout", format_layout(l)},
                            {"chunk_layers", chunks ? *chunks : std::vector<int>{}},
                            {"ranked_for", fmt},
                            {"exports", nlohmann::json::object()}};
        auto x = planner::export_layout(in, f);
        if (!x) {
          e["exports"][fmt] = {{"error", x.status().message()}};
        } else {
          const std::string file = name + "." + ext(f);
          std::ofstream(out / file) << x->content;
          e["exports"][fmt] = {{"file", file}, {"notes", x->notes}};
        }
        manifest.push_back(e);
      }
    }
  }
  return 0;
}

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
  if (int rc = add_ranked(out, manifest); rc != 0) return rc;
  std::ofstream(out / "manifest.json") << manifest.dump(1) << "\n";
  return 0;
}
