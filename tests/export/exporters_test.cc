// Exporter tests: golden files for a few layouts, and parsers that read each output the way its
// framework would and check it against the layout and the model.
//
// Golden files live in tests/export/golden/<case>.<format ext>. To regenerate them after a
// deliberate change of an exporter, run the test with SCALEPLAN_UPDATE_GOLDEN=1:
//   SCALEPLAN_UPDATE_GOLDEN=1 build-plan/tests/planner_test --gtest_filter='Exporters.*'
// and review the diff before committing.
#include "export/exporters.h"
#include "sim/simulate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/json_util.h"

namespace scaleplan::planner {
namespace {

const std::string kGoldenDir = std::string(SCALEPLAN_SOURCE_DIR) + "/tests/export/golden/";

struct Case {
  std::string name;
  std::string model;
  std::string cluster;
  int64_t gpus;
  int64_t seq;
  std::string layout;
};

// Three layouts that exercise the exporters' branches: interleaved + selective recompute +
// ZeRO-1 on a GQA model; an uneven 126-layer pipeline with CP and full recompute; MoE with EP and
// ZeRO-2 (Megatron FSDP).
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"llama3-8b_tp2_pp2_vpp2", "llama3-8b", "dgx-h100", 16, 8192,
       "tp=2,pp=2,cp=1,schedule=interleaved,vpp=2,mbs=1,gbs=64,zero=1,recompute=selective"},
      {"llama405b_tp8_pp16_cp2", "llama3.1-405b", "dgx-h100", 1024, 8192,
       "tp=8,pp=16,cp=2,schedule=1f1b,mbs=1,gbs=512,zero=1,recompute=full"},
      {"mixtral_tp2_pp4_ep8", "mixtral-8x7b", "dgx-h100", 64, 4096,
       "tp=2,pp=4,ep=8,etp=1,schedule=1f1b,mbs=2,gbs=256,zero=2,recompute=none"},
  };
  return c;
}

struct Loaded {
  models::ModelSpec model;
  ExportInput input;
};

Loaded load(const Case& c) {
  Loaded l;
  auto m = models::load_model(c.model);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  l.model = *m;
  auto parsed = parse_layout(c.layout);
  EXPECT_TRUE(parsed.is_ok()) << parsed.status().message();
  auto resolved = resolve_layout(*parsed, models::layout_constraints(l.model, c.seq), c.gpus);
  EXPECT_TRUE(resolved.is_ok()) << resolved.status().message();
  l.input.model_source = c.model;
  l.input.cluster = c.cluster;
  l.input.gpus = c.gpus;
  l.input.gpus_per_node = 8;
  l.input.seq_len = c.seq;
  l.input.layout = *resolved;
  // A fixed prediction, so that the header comments and the plan's "predicted" are exercised.
  Prediction p;
  p.iteration = Duration::seconds(2.5);
  p.tokens_per_s_per_gpu = 1234.5;
  p.mfu = 0.42;
  p.memory.peak = 60_GiB;
  p.memory.allocated = 56_GiB;
  p.memory.capacity = 80_GiB;
  p.breakdown.compute = Duration::seconds(2.0);
  p.breakdown.bubble = Duration::seconds(0.3);
  p.breakdown.exposed[static_cast<int>(CommClass::kTp)] = Duration::seconds(0.2);
  l.input.prediction = p;
  return l;
}

// A model from config.json text, at `layout` on `gpus` GPUs of 8 per node and sequence `seq`.
Loaded load_config(const std::string& config, const std::string& name, const std::string& layout,
                   int64_t gpus, int64_t seq) {
  Loaded l;
  auto m = models::model_from_config_text(config, name, "config.json");
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  if (m.is_ok()) l.model = *m;
  auto lay = resolve_layout(*parse_layout(layout), models::layout_constraints(l.model, seq), gpus);
  EXPECT_TRUE(lay.is_ok()) << lay.status().message();
  l.input.model_source = name;
  l.input.gpus = gpus;
  l.input.seq_len = seq;
  if (lay.is_ok()) l.input.layout = *lay;
  return l;
}

std::string ext(ExportFormat f) {
  switch (f) {
    case ExportFormat::kMegatron:
      return ".megatron.sh";
    case ExportFormat::kTorchtitan:
      return ".torchtitan.toml";
    case ExportFormat::kDeepspeed:
      return ".ds_config.json";
    case ExportFormat::kNanotron:
      return ".nanotron.yaml";
    case ExportFormat::kJson:
      return ".plan.json";
    case ExportFormat::kMegatronBridge:
      return ".megatron_bridge.py";
    case ExportFormat::kTorchtitanMain:
      return ".torchtitan.py";
  }
  return "";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Export run_export(Loaded& l, ExportFormat f) {
  l.input.model = &l.model;
  auto e = export_layout(l.input, f);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? *e : Export{};
}

// An export that may be refused (the framework cannot express the model or layout).
Result<Export> try_export(Loaded& l, ExportFormat f) {
  l.input.model = &l.model;
  return export_layout(l.input, f);
}

TEST(Exporters, MatchGoldenFiles) {
  const bool update = std::getenv("SCALEPLAN_UPDATE_GOLDEN") != nullptr;
  for (const Case& c : cases()) {
    Loaded l = load(c);
    for (ExportFormat f :
         {ExportFormat::kMegatron, ExportFormat::kTorchtitan, ExportFormat::kDeepspeed,
          ExportFormat::kNanotron, ExportFormat::kJson}) {
      SCOPED_TRACE(c.name + ext(f));
      const auto x = try_export(l, f);
      const std::string path = kGoldenDir + c.name + ext(f);
      if (!x.is_ok()) {  // refused: the matrix test checks why
        EXPECT_FALSE(std::filesystem::exists(path)) << path;
        continue;
      }
      const Export& e = *x;
      if (update) {
        std::filesystem::create_directories(kGoldenDir);
        std::ofstream(path) << e.content;
        continue;
      }
      ASSERT_TRUE(std::filesystem::exists(path)) << path << " (regenerate: see the file header)";
      EXPECT_EQ(e.content, read_file(path));
    }
  }
}

// Megatron: the tokens after pretrain_gpt.py, as argparse would see them: "--flag value" or a bare
// "--flag" (store_true).
std::map<std::string, std::string> parse_megatron(const std::string& script) {
  std::string joined;
  std::istringstream lines(script);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line[0] == '#') continue;
    if (!line.empty() && line.back() == '\\') line.pop_back();
    joined += line + " ";
  }
  std::istringstream words(joined);
  std::vector<std::string> tokens;
  for (std::string w; words >> w;) tokens.push_back(w);
  std::map<std::string, std::string> flags;
  size_t i = 0;
  while (i < tokens.size() && tokens[i] != "pretrain_gpt.py") ++i;
  EXPECT_LT(i, tokens.size()) << "no pretrain_gpt.py";
  for (++i; i < tokens.size(); ++i) {
    EXPECT_EQ(tokens[i].rfind("--", 0), 0u) << "stray token " << tokens[i];
    EXPECT_EQ(flags.count(tokens[i]), 0u) << "flag given twice: " << tokens[i];
    std::string value;
    if (i + 1 < tokens.size() && tokens[i + 1].rfind("--", 0) != 0) value = tokens[++i];
    flags[tokens[i - (value.empty() ? 0 : 1)]] = value;
  }
  return flags;
}

TEST(Exporters, MegatronFlagsMatchLayoutAndModel) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    Loaded l = load(c);
    const auto f = parse_megatron(run_export(l, ExportFormat::kMegatron).content);
    const Layout& lay = l.input.layout;
    const models::ModelSpec& m = l.model;
    auto num = [&](const std::string& k) { return f.count(k) ? std::stoll(f.at(k)) : -1; };
    EXPECT_EQ(num("--num-layers"), m.num_layers);
    EXPECT_EQ(num("--hidden-size"), m.hidden);
    EXPECT_EQ(num("--ffn-hidden-size"), m.ffn);
    EXPECT_EQ(num("--num-attention-heads"), m.num_heads);
    EXPECT_EQ(num("--num-query-groups"), m.num_kv_heads);  // all three are GQA models
    EXPECT_TRUE(f.count("--group-query-attention"));
    EXPECT_EQ(num("--kv-channels"), m.head_dim);
    EXPECT_EQ(num("--seq-length"), c.seq);
    EXPECT_EQ(num("--micro-batch-size"), lay.mbs);
    EXPECT_EQ(num("--global-batch-size"), lay.global_batch());
    EXPECT_EQ(num("--tensor-model-parallel-size"), lay.tp);
    EXPECT_EQ(num("--pipeline-model-parallel-size"), lay.pp);
    EXPECT_EQ(f.count("--sequence-parallel") == 1, lay.sequence_parallel());
    EXPECT_EQ(f.count("--swiglu"), 1u);
    EXPECT_EQ(f.at("--normalization"), "RMSNorm");
    EXPECT_EQ(f.count("--untie-embeddings-and-output-weights"), 1u);
    EXPECT_EQ(f.count("--bf16"), 1u);
    // Megatron derives DP = world / (TP·PP·CP): the flags must give back the layout's dp.
    const int64_t cp = f.count("--context-parallel-size") ? num("--context-parallel-size") : 1;
    EXPECT_EQ(cp, lay.cp);
    EXPECT_EQ(c.gpus / (lay.tp * lay.pp * cp), lay.dp_degree());
    // microbatches = GBS / (MBS·DP) must divide (arguments.py).
    EXPECT_EQ(num("--global-batch-size") % (num("--micro-batch-size") * lay.dp_degree()), 0);
    if (lay.vpp_degree() > 1) {
      // 32 layers / (pp 2 · vpp 2) = 8 layers per virtual stage.
      EXPECT_EQ(num("--num-layers-per-virtual-pipeline-stage"),
                m.num_layers / (lay.pp * lay.vpp_degree()));
    }
    // Pinned ends plus even middle stages must add up to the layers.
    if (f.count("--decoder-first-pipeline-num-layers") ||
        f.count("--decoder-last-pipeline-num-layers")) {
      auto counts = stage_layer_counts(lay, m.num_layers);
      ASSERT_TRUE(counts.is_ok());
      if (f.count("--decoder-first-pipeline-num-layers")) {
        EXPECT_EQ(num("--decoder-first-pipeline-num-layers"), counts->front());
      }
      if (f.count("--decoder-last-pipeline-num-layers")) {
        EXPECT_EQ(num("--decoder-last-pipeline-num-layers"), counts->back());
      }
    }
    switch (lay.zero) {
      case 0:
        EXPECT_EQ(f.count("--use-distributed-optimizer"), 0u);
        break;
      case 1:
        EXPECT_EQ(f.count("--use-distributed-optimizer"), 1u);
        break;
      case 2:
        EXPECT_EQ(f.at("--data-parallel-sharding-strategy"), "optim_grads");
        break;
      case 3:
        EXPECT_EQ(f.at("--data-parallel-sharding-strategy"), "optim_grads_params");
        break;
    }
    if (lay.recompute == Recompute::kNone) {
      EXPECT_EQ(f.count("--recompute-granularity"), 0u);
    } else {
      EXPECT_EQ(f.at("--recompute-granularity"), std::string(to_string(lay.recompute)));
    }
    if (m.moe) {
      EXPECT_EQ(num("--num-experts"), m.moe->num_experts);
      EXPECT_EQ(num("--moe-router-topk"), m.moe->top_k);
      EXPECT_EQ(num("--expert-model-parallel-size"), lay.ep);
      EXPECT_EQ(num("--expert-tensor-parallel-size"), lay.etp);
      EXPECT_EQ(num("--num-experts") % num("--expert-model-parallel-size"), 0);
    }
  }
}

// Selective recompute with modules is Megatron-core's --recompute-modules, the names in its
// order; the default (the attention core) adds no flag.
TEST(Exporters, MegatronWritesTheRecomputeModules) {
  Case c{"mixtral_modules",
         "mixtral-8x7b",
         "dgx-h100",
         64,
         4096,
         "tp=2,pp=4,ep=8,mbs=2,gbs=256,recompute=selective,"
         "recompute_modules=moe_act+core_attn+layernorm"};
  Loaded l = load(c);
  const std::string script = run_export(l, ExportFormat::kMegatron).content;
  EXPECT_NE(script.find("--recompute-granularity selective"), std::string::npos);
  EXPECT_NE(script.find("--recompute-modules core_attn layernorm moe_act"), std::string::npos);
  c.layout = "tp=2,pp=4,ep=8,mbs=2,gbs=256,recompute=selective";
  Loaded plain = load(c);
  EXPECT_EQ(run_export(plain, ExportFormat::kMegatron).content.find("--recompute-modules"),
            std::string::npos);
}

// DeepSeek's MTP module, simulated on the last stage, is trained by the exported run where the
// framework can (Megatron-LM's --mtp-num-layers), and a note says so where it cannot or where
// the exported file cannot express it (torchtitan under PP, nanotron, DeepSpeed's JSON).
// DeepSeek's group-limited routing is exported with the model (--moe-router-num-groups,
// --moe-router-group-topk); the DeepEP dispatcher as Megatron-core's flex dispatcher with DeepEP.
TEST(Exporters, MegatronRoutesInGroupsAndDispatchesThroughDeepEp) {
  Case c{"deepseek_groups",
         "deepseek-v3",
         "dgx-h100",
         1024,
         4096,
         "tp=2,pp=16,ep=64,mbs=1,gbs=1024,schedule=1f1b"};
  Loaded l = load(c);
  std::string sh = run_export(l, ExportFormat::kMegatron).content;
  EXPECT_NE(sh.find("--moe-router-num-groups 8"), std::string::npos);
  EXPECT_NE(sh.find("--moe-router-group-topk 4"), std::string::npos);
  EXPECT_NE(sh.find("--moe-token-dispatcher-type alltoall"), std::string::npos);
  EXPECT_EQ(sh.find("--moe-enable-deepep"), std::string::npos);
  ASSERT_TRUE(models::set_moe_dispatcher(l.model, "deepep").is_ok());
  sh = run_export(l, ExportFormat::kMegatron).content;
  EXPECT_NE(sh.find("--moe-token-dispatcher-type flex"), std::string::npos);
  EXPECT_NE(sh.find("--moe-enable-deepep"), std::string::npos);
}

TEST(Exporters, MultiTokenPredictionIsTrainedOrSaidNotToBe) {
  Case c{"deepseek_mtp", "deepseek-v3", "dgx-h100",
         1024,           4096,          "tp=2,pp=16,ep=64,mbs=1,gbs=1024,schedule=1f1b"};
  Loaded l = load(c);
  ASSERT_EQ(l.model.mtp_layers, 1);
  auto note_has = [](const Export& e, const std::string& text) {
    bool found = false;
    for (const auto& n : e.notes) found |= n.find(text) != std::string::npos;
    return found;
  };
  const Export meg = run_export(l, ExportFormat::kMegatron);
  EXPECT_NE(meg.content.find("--mtp-num-layers 1"), std::string::npos);
  EXPECT_FALSE(note_has(meg, "MTP"));
  EXPECT_TRUE(note_has(run_export(l, ExportFormat::kTorchtitan), "under pipeline parallelism"));
  // nanotron has no MLA: the whole model is refused, MTP modules or not.
  EXPECT_FALSE(try_export(l, ExportFormat::kNanotron).is_ok());
  EXPECT_TRUE(note_has(run_export(l, ExportFormat::kDeepspeed), "MTP module(s)"));
  c.layout = "tp=8,pp=1,ep=64,mbs=1,gbs=1024";
  Loaded no_pp = load(c);
  EXPECT_TRUE(note_has(run_export(no_pp, ExportFormat::kTorchtitan), "num_mtp_layers = 1"));
  // A model without MTP modules: no flag, no note.
  Loaded plain = load(cases()[2]);
  EXPECT_EQ(run_export(plain, ExportFormat::kMegatron).content.find("--mtp"), std::string::npos);
  EXPECT_FALSE(note_has(run_export(plain, ExportFormat::kDeepspeed), "MTP"));
}

// A model with sliding-window layers trains them so under Megatron-LM: --window-size with
// left = w - 1 (its mask keeps keys j >= i - left, so the config's w keys with the query's own)
// and the per-layer pattern, 1-indexed, 1 = sliding (is_layer_window_attention). Formats without
// such a key say so. gpt-oss-120b: window 128 on every other layer from the first.
TEST(Exporters, SlidingWindowLayersAreExportedOrSaidNotToBe) {
  Case c{"gpt_oss_swa", "gpt-oss-120b", "dgx-h100", 64, 4096, "tp=1,pp=1,ep=8,mbs=1,gbs=64"};
  Loaded l = load(c);
  ASSERT_EQ(l.model.sliding_window, 128);
  const Export meg = run_export(l, ExportFormat::kMegatron);
  EXPECT_NE(meg.content.find("--window-size 127,0"), std::string::npos);
  std::string pattern = "'[1";
  for (int i = 1; i < 36; ++i) pattern += i % 2 == 0 ? ",1" : ",0";
  EXPECT_NE(meg.content.find("--window-attn-skip-freq " + pattern + "]'"), std::string::npos);
  {
    bool noted = false;
    for (const auto& n : run_export(l, ExportFormat::kDeepspeed).notes)
      noted |= n.find("18 of the 36 layers attending to the last 128 tokens") != std::string::npos;
    EXPECT_TRUE(noted);
  }
  // nanotron's Qwen2 model has no FFN biases; torchtitan's gpt_oss flavors are not compared.
  EXPECT_FALSE(try_export(l, ExportFormat::kNanotron).is_ok());
  EXPECT_FALSE(try_export(l, ExportFormat::kTorchtitan).is_ok());
  // gpt-oss's own gated unit and sink logits, as Megatron-core's gpt-oss recipe names them.
  for (const char* flag : {"--quick-geglu", "--glu-linear-offset 1.0",
                           "--activation-func-clamp-value 7", "--softmax-type learnable"})
    EXPECT_NE(meg.content.find(flag), std::string::npos) << flag;
  EXPECT_EQ(meg.content.find("--swiglu"), std::string::npos);
  // Context parallelism: Transformer Engine takes sliding windows only with the all-gather or
  // all-to-all K/V exchange, not the p2p ring.
  Loaded cp = load(
      Case{"gpt_oss_cp", "gpt-oss-120b", "dgx-h100", 64, 4096, "tp=1,pp=1,cp=2,ep=8,mbs=1,gbs=32"});
  EXPECT_NE(run_export(cp, ExportFormat::kMegatron).content.find("--cp-comm-type all_gather"),
            std::string::npos);
  // Every layer sliding (Mistral-7B, window 4096): the size alone; a model without: neither.
  Loaded mistral = load(Case{"mistral", "mistral-7b", "dgx-h100", 8, 4096, "tp=1,mbs=1,gbs=8"});
  const std::string all = run_export(mistral, ExportFormat::kMegatron).content;
  EXPECT_NE(all.find("--window-size 4095,0"), std::string::npos);
  EXPECT_EQ(all.find("--window-attn-skip-freq"), std::string::npos);
  Loaded plain = load(cases()[2]);
  EXPECT_EQ(run_export(plain, ExportFormat::kMegatron).content.find("--window"), std::string::npos);
}

// The distributed optimizer's parameter gather overlaps the next forward where the simulation
// overlaps it (sim::param_gather_for): without pipelining, and with interleaving aligned across
// the stages (--align-param-gather, which Megatron-LM switches off for other schedules); a
// pipeline without interleaving gathers after the step.
TEST(Exporters, MegatronOverlapsTheParamGatherWhereSimulated) {
  struct Want {
    const char* layout;
    bool overlap, align;
  };
  for (const Want& w :
       {Want{"tp=2,pp=1,mbs=1,gbs=16,zero=1", true, false},
        Want{"tp=2,pp=2,mbs=1,gbs=16,zero=1,schedule=1f1b", false, false},
        Want{"tp=2,pp=2,mbs=1,gbs=16,zero=1,schedule=interleaved,vpp=2", true, true},
        Want{"tp=2,pp=1,mbs=1,gbs=16,zero=0", false, false},
        Want{"tp=2,pp=1,mbs=1,gbs=16,zero=2", true, false},
        Want{"tp=2,pp=2,mbs=1,gbs=16,zero=2,schedule=interleaved,vpp=2", false, false}}) {
    SCOPED_TRACE(w.layout);
    Loaded l = load(Case{"param_gather", "llama3-8b", "dgx-h100", 16, 4096, w.layout});
    const std::string sh = run_export(l, ExportFormat::kMegatron).content;
    EXPECT_EQ(sh.find("--overlap-param-gather") != std::string::npos, w.overlap);
    // align_param_gather is Megatron-LM's default (off only by --no-align-param-gather), and
    // validate_args turns it off without interleaving; there is no --align-param-gather flag.
    EXPECT_EQ(sh.find("align-param-gather"), std::string::npos);
    const sim::FrameworkTiming core = sim::framework(FrameworkId::kMegatron).timing;
    if (l.input.layout.zero == 1 || l.input.layout.zero == 2) {
      EXPECT_EQ(sim::param_gather_for(core, l.input.layout) != sim::ParamGather::kAfterStep,
                w.overlap);
    }
  }
}

// The simulation exposes every TP collective, so the export must not turn on Transformer Engine's
// --tp-comm-overlap, which hides part of them: the exported run would not be the simulated one.
TEST(Exporters, MegatronDoesNotOverlapTpCommunicationItSimulatedExposed) {
  for (const std::string sp : {"on", "off"}) {
    Case c{"llama_sp", "llama3-8b", "dgx-h100", 16, 4096, "tp=4,pp=2,mbs=1,gbs=16,sp=" + sp};
    Loaded l = load(c);
    const Export e = run_export(l, ExportFormat::kMegatron);
    EXPECT_EQ(e.content.find("--sequence-parallel") != std::string::npos, sp == "on");
    EXPECT_EQ(e.content.find("--tp-comm-overlap"), std::string::npos) << "sp=" << sp;
  }
}

// Megatron-core refuses an interleaved run whose last micro-batch group has 1..pp-1 micro-batches
// unless the group grows (--microbatch-group-size-per-virtual-pipeline-stage, default pp): 10
// micro-batches on pp = 8 run as one group of 10, which the simulation also ran; 16 keep the
// default and need no flag.
TEST(Exporters, MegatronSetsTheInterleavedGroupItSimulated) {
  Case c{"llama_group", "llama3-8b",
         "dgx-h100",    8,
         4096,          "tp=1,pp=8,dp=1,vpp=2,schedule=interleaved,mbs=1,gbs=10"};
  Loaded odd_case = load(c);
  const Export odd = run_export(odd_case, ExportFormat::kMegatron);
  EXPECT_NE(odd.content.find("--microbatch-group-size-per-virtual-pipeline-stage 10"),
            std::string::npos);
  c.layout = "tp=1,pp=8,dp=1,vpp=2,schedule=interleaved,mbs=1,gbs=16";
  Loaded even_case = load(c);
  const Export even = run_export(even_case, ExportFormat::kMegatron);
  EXPECT_EQ(even.content.find("--microbatch-group-size"), std::string::npos);
}

// Megatron-LM's validate_args refuses to start: with TP or CP before Blackwell unless
// CUDA_DEVICE_MAX_CONNECTIONS is 1, except under Megatron FSDP (ZeRO-2/3 here), which asserts it
// is not 1 and wants fsdp_dtensor checkpoints; from Blackwell (sm 100) the first requirement is
// gone; and interleaving at pp = 2 without --overlap-p2p-comm.
TEST(Exporters, MegatronScriptsPassMegatronsStartupChecks) {
  const std::string env = "export CUDA_DEVICE_MAX_CONNECTIONS=1\n";
  auto script = [](const std::string& layout, int sm) {
    Case c{"llama_env", "llama3-8b", "dgx-h100", 16, 4096, layout};
    Loaded l = load(c);
    l.input.gpu_sm = sm;
    return run_export(l, ExportFormat::kMegatron).content;
  };
  EXPECT_NE(script("tp=2,pp=2,mbs=1,gbs=16,zero=1", 90).find(env), std::string::npos);
  EXPECT_NE(script("tp=1,cp=2,pp=2,mbs=1,gbs=16", 80).find(env), std::string::npos);
  EXPECT_EQ(script("tp=2,pp=2,mbs=1,gbs=16,zero=2", 90).find(env), std::string::npos);
  EXPECT_EQ(script("tp=2,pp=2,mbs=1,gbs=16,zero=1", 100).find(env), std::string::npos);
  EXPECT_EQ(script("tp=1,pp=2,mbs=1,gbs=16", 90).find(env), std::string::npos);
  // Megatron FSDP asserts the variable is not 1 and saves only fsdp_dtensor checkpoints.
  const std::string fsdp = script("tp=2,pp=2,mbs=1,gbs=16,zero=3", 90);
  EXPECT_NE(fsdp.find("unset CUDA_DEVICE_MAX_CONNECTIONS\n"), std::string::npos);
  EXPECT_NE(fsdp.find("--ckpt-format fsdp_dtensor"), std::string::npos);
  EXPECT_EQ(script("tp=2,pp=2,mbs=1,gbs=16,zero=1", 90).find("--ckpt-format"), std::string::npos);
  // Interleaving at pp = 2 starts only with overlapped sends and receives, Megatron-LM's default
  // (--no-overlap-p2p-communication turns it off; --overlap-p2p-comm is not one of its flags).
  for (const char* layout :
       {"tp=1,pp=2,vpp=2,schedule=interleaved,mbs=1,gbs=16", "tp=1,pp=2,mbs=1,gbs=16"}) {
    EXPECT_EQ(script(layout, 90).find("overlap-p2p-comm"), std::string::npos) << layout;
  }
}

// torchtitan raises NotImplementedError for tied embeddings under pipeline parallelism: for a
// tied model its runnable values allow pp=1 only (other targets and untied models are
// unaffected), and an export at pp > 1 (named in --fix) says the model must be untied.
TEST(Exporters, TorchtitanRunsTiedEmbeddingsOnlyWithoutPipelining) {
  Case c{"tied", "llama3-8b", "dgx-h100", 16, 4096, "tp=2,pp=2,mbs=1,gbs=16"};
  Loaded l = load(c);
  auto pp_rule = [](const std::vector<std::pair<std::string, std::vector<std::string>>>& v) {
    for (const auto& [key, values] : v)
      if (key == "pp") return values;
    return std::vector<std::string>{};
  };
  EXPECT_TRUE(pp_rule(runnable_values(ExportFormat::kTorchtitan, l.model)).empty());
  l.model.tied_embeddings = true;
  EXPECT_EQ(pp_rule(runnable_values(ExportFormat::kTorchtitan, l.model)),
            std::vector<std::string>{"1"});
  EXPECT_TRUE(pp_rule(runnable_values(ExportFormat::kMegatron, l.model)).empty());
  bool said = false;
  for (const auto& n : run_export(l, ExportFormat::kTorchtitan).notes)
    said |= n.find("Weight tying is not supported") != std::string::npos;
  EXPECT_TRUE(said);
}

// torchtitan raises "Async TP requires torch.compile" when async TP is on without [compile]; the
// export runs eager, as simulated, so it leaves async TP off at any tp.
TEST(Exporters, TorchtitanLeavesAsyncTpOffWithoutCompile) {
  Loaded l = load(cases()[1]);  // tp=8, cp=2
  const std::string toml = run_export(l, ExportFormat::kTorchtitan).content;
  EXPECT_NE(toml.find("enable_async_tensor_parallel = false"), std::string::npos);
  EXPECT_EQ(toml.find("[compile]"), std::string::npos);
  // CP passes K/V around the ring, as simulated: PyTorch's all-to-all rotater, not the one
  // all-gather of torchtitan's default.
  EXPECT_NE(toml.find("context_parallel_rotate_method = \"alltoall\""), std::string::npos);
}

// An fp8 plan turns torchtitan's float8 converter on (the [float8] section alone trains in bf16);
// a bf16 plan leaves it off.
TEST(Exporters, TorchtitanFp8UsesTheFloat8Converter) {
  Loaded l = load(cases()[0]);
  EXPECT_EQ(run_export(l, ExportFormat::kTorchtitan).content.find("converters"), std::string::npos);
  l.input.layout.dtype = DType::kFp8;
  const std::string toml = run_export(l, ExportFormat::kTorchtitan).content;
  // torchtitan v0.2.2 registers the converter as "quantize.linear.float8", its section the same.
  EXPECT_NE(toml.find("converters = [\"quantize.linear.float8\"]"), std::string::npos);
  EXPECT_NE(toml.find("[quantize.linear.float8]"), std::string::npos);
  // DeepSpeed's JSON and nanotron's config cannot say fp8: a note says the run trains in bf16.
  for (ExportFormat f : {ExportFormat::kDeepspeed, ExportFormat::kNanotron}) {
    bool said = false;
    for (const auto& n : run_export(l, f).notes) said |= n.find("bf16") != std::string::npos;
    EXPECT_TRUE(said) << to_string(f);
  }
}

// What each framework refuses at startup in combination: Megatron-core EP with TP without SP,
// DeepSpeed's pipeline engine ZeRO-2/3; the others nothing. A DeepSpeed export forced there by
// --fix says so.
TEST(Exporters, RefusedCombinationsAreTheFrameworksStartupChecks) {
  Loaded l = load(cases()[2]);  // mixtral, tp=2, pp=4, ep=8, zero=2, sp on
  auto refuses = [&](ExportFormat f) {
    for (const RefusedCombination& r : refused_combinations(f))
      if (r.refuses(l.input.layout)) return r.text;
    return std::string();
  };
  EXPECT_EQ(refuses(ExportFormat::kMegatron), "");
  EXPECT_EQ(refuses(ExportFormat::kDeepspeed), "zero=0|1 with pp > 1");
  EXPECT_EQ(refuses(ExportFormat::kTorchtitan), "");
  l.input.layout.sp = false;
  EXPECT_EQ(refuses(ExportFormat::kMegatron), "sp=on with ep and tp > 1");
  bool said = false;
  for (const auto& n : run_export(l, ExportFormat::kDeepspeed).notes)
    said |= n.find("incompatible with pipeline parallelism") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(Exporters, MegatronUnevenStagesArePinned) {
  // 126 layers on pp=16: the balanced split is [7, 8×14, 7] (remainder to the middle), which
  // Megatron writes as first = last = 7 with the middle 112 layers split evenly over 14 stages.
  Loaded l = load(cases()[1]);
  const auto f = parse_megatron(run_export(l, ExportFormat::kMegatron).content);
  EXPECT_EQ(f.at("--decoder-first-pipeline-num-layers"), "7");
  EXPECT_EQ(f.at("--decoder-last-pipeline-num-layers"), "7");
  EXPECT_EQ((126 - 7 - 7) % (16 - 2), 0);
}

// TOML / YAML: a line-based reader of "key = value" under [section] (TOML) and two-level
// "key: value" indentation (YAML), enough for the flat files the exporters write.
std::map<std::string, std::string> parse_toml(const std::string& text) {
  std::map<std::string, std::string> kv;
  std::string section;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      EXPECT_EQ(line.back(), ']') << line;
      section = line.substr(1, line.size() - 2);
      continue;
    }
    const size_t eq = line.find(" = ");
    EXPECT_NE(eq, std::string::npos) << "not key = value: " << line;
    std::string value = line.substr(eq + 3);
    if (value.size() >= 2 && value.front() == '"') value = value.substr(1, value.size() - 2);
    EXPECT_EQ(kv.count(section + "." + line.substr(0, eq)), 0u) << "duplicate " << line;
    kv[section + "." + line.substr(0, eq)] = value;
  }
  return kv;
}

std::map<std::string, std::string> parse_yaml(const std::string& text) {
  std::map<std::string, std::string> kv;
  std::vector<std::string> path;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t indent = line.find_first_not_of(' ');
    EXPECT_EQ(indent % 2, 0u) << line;
    const size_t depth = indent / 2;
    const size_t colon = line.find(':');
    EXPECT_NE(colon, std::string::npos) << line;
    const std::string key = line.substr(indent, colon - indent);
    path.resize(depth);
    const std::string value = colon + 1 < line.size() ? line.substr(colon + 2) : "";
    if (value.empty()) {
      path.push_back(key);
      continue;
    }
    std::string full;
    for (const auto& p : path) full += p + ".";
    kv[full + key] = value;
  }
  return kv;
}

// Context parallelism's K/V exchange is exported as simulated: Megatron-core's --cp-comm-type
// names each; torchtitan rotates K/V around the ring ("alltoall") or gathers them ("allgather")
// and has no Ulysses variant, which a note says (and --emit torchtitan does not rank).
TEST(Exporters, ContextParallelExchangesAreExportedAsSimulated) {
  for (const char* comm : {"p2p", "all_gather", "a2a"}) {
    SCOPED_TRACE(comm);
    Loaded l = load(Case{"cp_comm", "llama3-8b", "dgx-h100", 8, 16384,
                         std::string("tp=2,cp=4,mbs=1,gbs=8,cp_comm=") + comm});
    EXPECT_NE(
        run_export(l, ExportFormat::kMegatron).content.find(std::string("--cp-comm-type ") + comm),
        std::string::npos);
    const Export tt = run_export(l, ExportFormat::kTorchtitan);
    const bool gather = std::string(comm) == "all_gather";
    EXPECT_NE(tt.content.find(gather ? "context_parallel_rotate_method = \"allgather\""
                                     : "context_parallel_rotate_method = \"alltoall\""),
              std::string::npos);
    bool noted = false;
    for (const auto& n : tt.notes) noted |= n.find("no all-to-all (Ulysses)") != std::string::npos;
    EXPECT_EQ(noted, std::string(comm) == "a2a");
  }
  bool refused = false;
  for (const auto& [key, values] : runnable_values(ExportFormat::kTorchtitan))
    refused |= key == "cp_comm" && std::find(values.begin(), values.end(), "a2a") == values.end();
  EXPECT_TRUE(refused);
}

TEST(Exporters, TorchtitanTomlHasTheDegrees) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    Loaded l = load(c);
    const auto x = try_export(l, ExportFormat::kTorchtitan);
    if (l.model.model_type == "mixtral") {  // torchtitan v0.2.2 has no Mixtral model
      EXPECT_FALSE(x.is_ok());
      continue;
    }
    ASSERT_TRUE(x.is_ok()) << x.status().message();
    const auto kv = parse_toml(x->content);
    const Layout& lay = l.input.layout;
    auto num = [&](const std::string& k) {
      EXPECT_TRUE(kv.count(k)) << k;
      return kv.count(k) ? std::stoll(kv.at(k)) : -1;
    };
    EXPECT_EQ(num("parallelism.tensor_parallel_degree"), lay.tp);
    EXPECT_EQ(num("parallelism.pipeline_parallel_degree"), lay.pp);
    EXPECT_EQ(num("parallelism.context_parallel_degree"), lay.cp);
    EXPECT_EQ(num("parallelism.expert_parallel_degree"), lay.ep);
    // torchtitan: world = replicate · shard · cp · tp · pp must equal NGPU.
    EXPECT_EQ(num("parallelism.data_parallel_replicate_degree") *
                  num("parallelism.data_parallel_shard_degree") * lay.cp * lay.tp * lay.pp,
              c.gpus);
    EXPECT_EQ(num("training.seq_len"), c.seq);
    EXPECT_EQ(num("training.global_batch_size"), lay.global_batch());
    EXPECT_EQ(kv.at("activation_checkpoint.mode"), std::string(to_string(lay.recompute)));
    if (lay.pp > 1) {
      EXPECT_EQ(num("parallelism.pipeline_parallel_microbatch_size"), lay.mbs);
      // local batch / micro-batch = micro-batches per step = gbs / (mbs·dp).
      EXPECT_EQ(num("training.local_batch_size") / lay.mbs, lay.num_microbatches());
    }
  }
}

TEST(Exporters, NanotronYamlHasTheDegreesAndBatch) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    Loaded l = load(c);
    const auto x = try_export(l, ExportFormat::kNanotron);
    if (l.input.layout.zero > 1) {  // nanotron's optimizer: ZeRO-0 and ZeRO-1
      EXPECT_FALSE(x.is_ok());
      continue;
    }
    ASSERT_TRUE(x.is_ok()) << x.status().message();
    const auto kv = parse_yaml(x->content);
    const Layout& lay = l.input.layout;
    auto num = [&](const std::string& k) {
      EXPECT_TRUE(kv.count(k)) << k;
      return kv.count(k) ? std::stoll(kv.at(k)) : -1;
    };
    EXPECT_EQ(num("parallelism.dp"), lay.dp_degree());
    EXPECT_EQ(num("parallelism.tp"), lay.tp);
    EXPECT_EQ(num("parallelism.pp"), lay.pp);
    EXPECT_EQ(kv.at("parallelism.tp_mode"),
              lay.sequence_parallel() ? "REDUCE_SCATTER" : "ALL_REDUCE");
    EXPECT_EQ(num("optimizer.zero_stage"), lay.zero);
    // nanotron's global batch = dp · micro_batch_size · batch_accumulation_per_replica.
    EXPECT_EQ(num("parallelism.dp") * num("tokens.micro_batch_size") *
                  num("tokens.batch_accumulation_per_replica"),
              lay.global_batch());
    EXPECT_EQ(num("tokens.sequence_length"), c.seq);
    EXPECT_EQ(num("model.model_config.hidden_size"), l.model.hidden);
    EXPECT_EQ(num("model.model_config.num_hidden_layers"), l.model.num_layers);
    EXPECT_EQ(num("model.model_config.num_key_value_heads"), l.model.num_kv_heads);
  }
}

TEST(Exporters, DeepspeedBatchArithmetic) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    Loaded l = load(c);
    const Layout& lay = l.input.layout;
    const auto x = try_export(l, ExportFormat::kDeepspeed);
    if (lay.cp > 1) {  // no CP axis in DeepSpeed's topology (Exporters.DeepspeedRanksNoContext...)
      EXPECT_FALSE(x.is_ok());
      continue;
    }
    ASSERT_TRUE(x.is_ok()) << x.status().message();
    const Json j = Json::parse(x->content);
    // DeepSpeed checks train_batch_size = micro · accumulation · data-parallel world size, the
    // world over its pipe and model axes (runtime/config.py:924): gpus / (tp·pp).
    EXPECT_EQ(j.at("train_batch_size").get<int64_t>(),
              j.at("train_micro_batch_size_per_gpu").get<int64_t>() *
                  j.at("gradient_accumulation_steps").get<int64_t>() * l.input.gpus /
                  (int64_t{lay.tp} * lay.pp));
    EXPECT_EQ(j.at("zero_optimization").at("stage").get<int>(), lay.zero);
    EXPECT_TRUE(j.at("bf16").at("enabled").get<bool>());
  }
}

TEST(Exporters, PlanJsonRoundTrips) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    Loaded l = load(c);
    const std::string text = run_export(l, ExportFormat::kJson).content;
    const Json j = Json::parse(text);
    EXPECT_EQ(j.at("layout").get<std::string>(), format_layout(l.input.layout));
    EXPECT_DOUBLE_EQ(j.at("predicted").at("iteration_s").get<double>(), 2.5);
    auto back = parse_plan(text, "plan.json");
    ASSERT_TRUE(back.is_ok()) << back.status().message();
    EXPECT_EQ(back->layout, l.input.layout);
    EXPECT_EQ(back->cluster, c.cluster);
    EXPECT_EQ(back->gpus, c.gpus);
    EXPECT_EQ(back->seq_len, c.seq);
    EXPECT_EQ(back->model.hidden, l.model.hidden);
    EXPECT_EQ(back->model.num_layers, l.model.num_layers);
    EXPECT_EQ(back->model.is_moe(), l.model.is_moe());
  }
  // The MoE options simulated travel with the plan, since config.json cannot hold them.
  Loaded moe = load(
      Case{"moe_options", "qwen3-30b-a3b", "dgx-h100", 16, 4096, "tp=1,pp=1,ep=16,mbs=1,gbs=16"});
  ASSERT_TRUE(models::set_moe_imbalance(moe.model, 1.25).is_ok());
  ASSERT_TRUE(models::set_moe_dispatcher(moe.model, "deepep").is_ok());
  const std::string text = run_export(moe, ExportFormat::kJson).content;
  auto back = parse_plan(text, "plan.json");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->model.moe->capacity_imbalance, 1.25);
  EXPECT_EQ(back->model.moe->dispatcher, models::MoeDispatcher::kDeepEp);
  Json bad = Json::parse(text);
  bad["model"]["moe"]["dispatcher"] = "nccl";
  auto err = parse_plan(bad.dump(), "plan.json");
  ASSERT_FALSE(err.is_ok());
  EXPECT_NE(err.status().message().find("plan.json: model: moe: dispatcher"), std::string::npos)
      << err.status().message();
}

TEST(Exporters, ErrorsNameTheProblem) {
  auto f = parse_export_format("slurm");
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.status().message().find("slurm"), std::string::npos);
  auto p = parse_plan(R"({"format": "scaleplan-plan", "model": {"name": "x"}})", "p.json");
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("config"), std::string::npos) << p.status().message();
}

TEST(Exporters, NotesSayWhatAFrameworkCannotExpress) {
  // ZB-H1 has no Megatron flag, nanotron has no ZeRO-3: both must be said, not silently changed.
  Loaded l = load(cases()[0]);
  l.input.layout.schedule = Schedule::kZbH1;
  l.input.layout.vpp = 1;
  l.input.layout.zero = 3;
  const Export meg = run_export(l, ExportFormat::kMegatron);
  ASSERT_FALSE(meg.notes.empty());
  EXPECT_NE(meg.content.find("# Note: Megatron-LM mainline has no ZB-H1"), std::string::npos);
  // nanotron's loader would refuse zero_stage 3: the export is refused, naming it.
  const auto nano = try_export(l, ExportFormat::kNanotron);
  ASSERT_FALSE(nano.is_ok());
  EXPECT_NE(nano.status().message().find("zero_stage 0 or 1, not 3"), std::string::npos)
      << nano.status().message();
  // torchtitan's DualPipeV keeps one copy of the parameters; the simulated DualPipe keeps two.
  Loaded dual = load(cases()[0]);
  dual.input.layout.schedule = Schedule::kDualPipe;
  dual.input.layout.vpp = 1;
  // Selective recompute: a note when the plan was simulated with another framework's meaning of
  // it, none when with torchtitan's own (op-level) conventions.
  Loaded sac = load(cases()[0]);
  ASSERT_EQ(sac.input.layout.recompute, Recompute::kSelective);
  auto has_ac_note = [](const Export& e) {
    bool found = false;
    for (const auto& n : e.notes) found |= n.find("selective AC") != std::string::npos;
    return found;
  };
  EXPECT_TRUE(has_ac_note(run_export(sac, ExportFormat::kTorchtitan)));
  sac.input.framework = FrameworkId::kTorchtitan;
  EXPECT_FALSE(has_ac_note(run_export(sac, ExportFormat::kTorchtitan)));
  ASSERT_GT(dual.input.layout.pp, 1);
  const Export titan = run_export(dual, ExportFormat::kTorchtitan);
  EXPECT_NE(titan.content.find("pipeline_parallel_schedule = \"DualPipeV\""), std::string::npos);
  bool copies_note = false;
  for (const auto& n : titan.notes) copies_note |= n.find("two copies") != std::string::npos;
  EXPECT_TRUE(copies_note);
  // DualPipeV is torchtitan's own schedule: no note, and the chunk layer counts of the V; Megatron
  // has no such schedule and says so.
  Loaded v = load(cases()[0]);
  v.input.layout.schedule = Schedule::kDualPipeV;
  v.input.layout.vpp = 1;
  const Export vt = run_export(v, ExportFormat::kTorchtitan);
  EXPECT_NE(vt.content.find("pipeline_parallel_schedule = \"DualPipeV\""), std::string::npos);
  for (const auto& n : vt.notes) EXPECT_EQ(n.find("two copies"), std::string::npos) << n;
  EXPECT_NE(vt.content.find("# Chunk layer counts"), std::string::npos);
  const Export vm = run_export(v, ExportFormat::kMegatron);
  EXPECT_NE(vm.content.find("no DualPipeV"), std::string::npos);
  // ZB-V is torchtitan's ZBVZeroBubble.
  v.input.layout.schedule = Schedule::kZbV;
  const Export zt = run_export(v, ExportFormat::kTorchtitan);
  EXPECT_NE(zt.content.find("pipeline_parallel_schedule = \"ZBVZeroBubble\""), std::string::npos);
  EXPECT_NE(run_export(v, ExportFormat::kMegatron).content.find("no ZB-V"), std::string::npos);
}

// The newer families through each exporter: written where the framework's definitions can build
// the model (Nemotron's LayerNorm1P and half rotary in Megatron-LM), refused with the reason where
// they cannot, never exported as another model.
TEST(Exporters, FamiliesAreExportedOrRefusedWithTheReason) {
  auto refusal = [](const std::string& preset, int64_t seq, ExportFormat f) {
    Loaded l = load(Case{"family", preset, "dgx-h100", 8, seq, "tp=1,dp=8,mbs=1,gbs=8"});
    auto e = try_export(l, f);
    return e.is_ok() ? std::string() : e.status().message();
  };
  // Megatron-LM core_v0.19.0: no GeGLU (only SiLU-gated --swiglu and gpt-oss's --quick-geglu),
  // no post-branch norms, no soft-capping, no parallel residual (export/frameworks/).
  const std::string gemma = refusal("gemma2-9b", 4096, ExportFormat::kMegatron);
  for (const char* what : {"a GeGLU FFN", "norms on the attention and FFN outputs",
                           "logit soft-capping", "--emit megatron would train another model"})
    EXPECT_NE(gemma.find(what), std::string::npos) << gemma;
  struct Refused {
    const char* preset;
    int64_t seq;
    ExportFormat format;
    const char* why;
  };
  for (const Refused& r : std::vector<Refused>{
           {"pythia-1b", 2048, ExportFormat::kMegatron, "parallel attention and FFN"},
           // Llama 4 beyond one chunk is chunked attention, which has no argument; within one
           // chunk the combination of its flags is not written unchecked.
           {"llama4-scout", 16384, ExportFormat::kMegatron, "chunked attention"},
           {"llama4-scout", 8192, ExportFormat::kMegatron, "does not write Llama 4"},
           // torchtitan v0.2.2 has a llama4 module, but its flavors carry no HF shape to check.
           {"llama4-scout", 8192, ExportFormat::kTorchtitan, "no extracted HF shape"},
           {"gemma3-27b", 4096, ExportFormat::kTorchtitan, "has no model for"},
           {"gemma3-27b", 4096, ExportFormat::kNanotron, "no per-head q/k norm"},
           {"gemma2-9b", 4096, ExportFormat::kNanotron, "Qwen2 model"},
           {"pythia-1b", 2048, ExportFormat::kNanotron, "Qwen2 model"},
       }) {
    const std::string why = refusal(r.preset, r.seq, r.format);
    EXPECT_NE(why.find(r.why), std::string::npos) << r.preset << ": " << why;
  }
  // Nemotron (Megatron-LM's own family): LayerNorm1P (--apply-layernorm-1p), half rotary
  // (--rotary-percent 0.5), squared ReLU, no biases.
  const std::string cfg = R"({"model_type": "nemotron", "hidden_act": "relu2", "hidden_size":
      6144, "intermediate_size": 24576, "num_hidden_layers": 32, "num_attention_heads": 48,
      "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 256000})";
  Loaded l = load_config(cfg, "nemotron4-15b", "tp=8,mbs=1,gbs=8", 8, 4096);
  const std::string sh = run_export(l, ExportFormat::kMegatron).content;
  for (const char* flag :
       {"--apply-layernorm-1p \\\n", "--rotary-percent 0.5 \\\n", "--squared-relu \\\n",
        "--normalization LayerNorm \\\n", "--disable-bias-linear \\\n"})
    EXPECT_NE(sh.find(flag), std::string::npos) << flag;
}

}  // namespace
}  // namespace scaleplan::planner

namespace scaleplan::planner {
namespace {

// Qwen2 has biases on q, k and v only: Megatron-LM's --disable-bias-linear with --add-qkv-bias
// (a bias on every linear would train another model); RoPE base and norm epsilon come from the
// config (Qwen2.5-7B: rope_theta 1e6, rms_norm_eps 1e-6). Llama 3.1's RoPE scaling is Megatron's
// --use-rope-scaling with the config's factor.
TEST(Exporters, MegatronTrainsTheConfigsBiasesRopeAndNorm) {
  const std::string qwen2 = R"({"model_type": "qwen2", "hidden_size": 3584, "intermediate_size":
      18944, "num_attention_heads": 28, "num_key_value_heads": 4, "num_hidden_layers": 28,
      "vocab_size": 152064, "rope_theta": 1000000.0, "rms_norm_eps": 1e-06,
      "tie_word_embeddings": false, "hidden_act": "silu"})";
  Loaded l = load_config(qwen2, "qwen2.5-7b", "tp=2,mbs=1,gbs=8", 8, 4096);
  const std::string sh = run_export(l, ExportFormat::kMegatron).content;
  for (const char* flag : {"--disable-bias-linear \\\n", "--add-qkv-bias \\\n",
                           "--rotary-base 1000000 \\\n", "--norm-epsilon 1e-06 \\\n"})
    EXPECT_NE(sh.find(flag), std::string::npos) << flag;
  Loaded llama =
      load(Case{"rope", "llama3.1-405b", "dgx-h100", 1024, 8192, "tp=8,pp=16,mbs=1,gbs=512"});
  const std::string sh405 = run_export(llama, ExportFormat::kMegatron).content;
  EXPECT_NE(sh405.find("--use-rope-scaling \\\n"), std::string::npos);
  EXPECT_NE(sh405.find("--rope-scaling-factor 8 \\\n"), std::string::npos);
  EXPECT_EQ(run_export(l, ExportFormat::kMegatron).content.find("--use-rope-scaling"),
            std::string::npos);
}

// issue 44: the layout the planner ranked first for qwen3-235b-a22b on 576 GB200 with --emit
// torchtitan: pp=9, zb-h1 (torchtitan's InterleavedZeroBubble), gbs 2048 over dp 64 at mbs 1 =
// 32 micro-batches. PyTorch's interleaved schedules cut m micro-batches into number_of_rounds =
// max(1, m // pp) = max(1, 32 // 9) = 3 rounds and raise unless 3 divides m: 32 = 3·10 + 2, so
// the run fails at start-up. At gbs 2304 (36 micro-batches: 4 rounds of 9) it starts.
TEST(Exporters, TorchtitanRefusesWhatPyTorchsInterleavedSchedulesRefuse) {
  auto layout = [](const std::string& text, int64_t gpus) {
    auto m = models::load_model("qwen3-235b-a22b");
    EXPECT_TRUE(m.is_ok());
    auto r = resolve_layout(*parse_layout(text), models::layout_constraints(*m, 4096), gpus);
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    return *r;
  };
  auto refusal = [](const Layout& l) {
    for (const RefusedCombination& r : refused_combinations(ExportFormat::kTorchtitan))
      if (r.refuses(l)) return r.text;
    return std::string();
  };
  const Layout issue = layout("tp=1,pp=9,dp=64,ep=16,schedule=zb-h1,mbs=1,gbs=2048,zero=2", 576);
  ASSERT_EQ(issue.num_microbatches(), 32);
  EXPECT_FALSE(torchtitan_rounds_accept(issue));
  EXPECT_NE(refusal(issue).find("rounds rule"), std::string::npos) << refusal(issue);
  const Layout fine = layout("tp=1,pp=9,dp=64,ep=16,schedule=zb-h1,mbs=1,gbs=2304,zero=2", 576);
  EXPECT_TRUE(torchtitan_rounds_accept(fine));
  EXPECT_EQ(refusal(fine), "");
  // 1F1B and GPipe have no rounds: any micro-batch count runs.
  EXPECT_TRUE(torchtitan_rounds_accept(layout("tp=1,pp=9,dp=64,ep=16,mbs=1,gbs=2048,zero=2", 576)));
  // Interleaved at pp 4 with 10 micro-batches: 2 rounds of 5, and Megatron's group (the one the
  // simulator runs) is 5 too (10 mod 4 = 2 would leave a last group under pp); 9 micro-batches:
  // 2 rounds do not divide 9.
  auto tiny = [](int64_t gbs) {
    auto m = models::load_model("llama3-8b");
    auto r = resolve_layout(*parse_layout("tp=1,pp=4,vpp=2,schedule=interleaved,mbs=1,zero=2,gbs=" +
                                          std::to_string(gbs)),
                            models::layout_constraints(*m, 4096), 4);
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    return *r;
  };
  EXPECT_TRUE(torchtitan_rounds_accept(tiny(10)));
  EXPECT_EQ(interleave_group_size(4, 10), 10 / std::max<int64_t>(1, 10 / 4));
  EXPECT_FALSE(torchtitan_rounds_accept(tiny(9)));
}

// torchtitan's ZeRO modes per parallelism (v0.2.2): replication without FSDP is DDP, which
// raises "DDP has not supported > 1D parallelism" with TP or PP (models/llama3/infra/
// parallelize.py:148-151); with CP it always shards over the CP ranks (parallel_dims.py:334
// fsdp_enabled = dp_shard_enabled or cp_enabled), so zero=0 is never what it runs there.
TEST(Exporters, TorchtitanRunsZeroZeroOnlyWherePlainDdpRuns) {
  auto m = models::load_model("llama3.1-405b");
  ASSERT_TRUE(m.is_ok());
  auto verdict = [&](const std::string& text, int64_t gpus) {
    auto r = resolve_layout(*parse_layout(text), models::layout_constraints(*m, 8192), gpus);
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    return framework_verdicts(*r, *m)[1];  // Megatron-LM, torchtitan, DeepSpeed, nanotron
  };
  EXPECT_EQ(verdict("tp=8,pp=16,mbs=1,gbs=512,zero=3", 1024).format, ExportFormat::kTorchtitan);
  EXPECT_TRUE(verdict("tp=8,pp=16,mbs=1,gbs=512,zero=3", 1024).runs());
  EXPECT_NE(verdict("tp=8,pp=16,mbs=1,gbs=512,zero=0", 1024).rule.find("DDP"), std::string::npos);
  EXPECT_NE(verdict("tp=8,cp=2,mbs=1,gbs=64,zero=0", 16).rule.find("FSDP on over the CP"),
            std::string::npos);
  // One GPU per replica and nothing else: plain DDP over the world, which torchtitan runs.
  auto small = models::load_model("llama3-8b");
  auto r = resolve_layout(*parse_layout("tp=1,mbs=1,gbs=64,zero=0"),
                          models::layout_constraints(*small, 4096), 8);
  ASSERT_TRUE(r.is_ok());
  EXPECT_TRUE(framework_verdicts(*r, *small)[1].runs()) << framework_verdicts(*r, *small)[1].rule;
}

// DeepSpeed has no context parallelism: its topology has data, pipe and model axes, so with cp=4
// it counts 4x the data-parallel ranks and its batch assertion (train_batch_size = micro ·
// accumulation · dp, runtime/config.py) fails on keys written for dp = world/(tp·pp·cp).
// --emit deepspeed does not rank cp > 1; without --emit the layout says DeepSpeed needs cp=1.
TEST(Exporters, DeepspeedRanksNoContextParallelism) {
  auto m = models::load_model("llama3-70b");
  ASSERT_TRUE(m.is_ok());
  auto r = resolve_layout(*parse_layout("tp=8,cp=4,pp=1,mbs=1,gbs=512,zero=1"),
                          models::layout_constraints(*m, 8192), 256);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(*r->dp, 256 / (8 * 4));
  const auto v = framework_verdicts(*r, *m);
  EXPECT_EQ(v[2].format, ExportFormat::kDeepspeed);
  EXPECT_EQ(v[2].rule, "cp=1");
  EXPECT_TRUE(v[0].runs()) << v[0].rule;  // Megatron-LM runs CP
  bool cp_rule = false;
  for (const auto& [key, values] : runnable_values(ExportFormat::kDeepspeed))
    cp_rule |= key == "cp" && values == std::vector<std::string>{"1"};
  EXPECT_TRUE(cp_rule);
}

// Megatron-core has no zero-bubble schedule (none of the 809 options of core_v0.19.0's
// arguments.py selects one; --delay-wgrad-compute splits the weight gradient for EP overlap
// inside 1F1B), so a zb-h1 layout says Megatron-LM needs another schedule, while torchtitan
// (InterleavedZeroBubble) runs it when its rounds rule holds.
TEST(Exporters, FrameworkVerdictsSayWhoRunsAZeroBubbleLayout) {
  auto m = models::load_model("llama3-8b");
  auto r = resolve_layout(*parse_layout("tp=2,pp=4,schedule=zb-h1,mbs=1,gbs=64,zero=2"),
                          models::layout_constraints(*m, 4096), 32);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const auto v = framework_verdicts(*r, *m);
  ASSERT_EQ(v.size(),
            6u);  // Megatron-LM, torchtitan 0.2.2, DeepSpeed, nanotron, Bridge, torchtitan
  EXPECT_EQ(v[0].rule, "schedule=1f1b|interleaved");
  EXPECT_TRUE(v[1].runs()) << v[1].rule;  // 16 micro-batches: 4 rounds of 4
  EXPECT_FALSE(v[2].runs());              // DeepSpeed: 1F1B only
  EXPECT_FALSE(v[3].runs());              // nanotron: AFAB, 1F1B
  EXPECT_EQ(v[4].format, ExportFormat::kMegatronBridge);
  EXPECT_FALSE(v[4].runs());  // Megatron-core's schedules, as Megatron-LM
  EXPECT_EQ(v[5].format, ExportFormat::kTorchtitanMain);
  EXPECT_TRUE(v[5].runs()) << v[5].rule;  // the same PyTorch schedule and rounds rule
}

// plan --tp-comm-overlap simulates Transformer Engine's overlap; the Megatron export then turns
// it on (with --sequence-parallel, which validate_args requires with it) and the plan file
// records it so that simulate --plan reproduces the prediction.
TEST(Exporters, TpCommOverlapIsExportedWhereSimulated) {
  Loaded l = load(cases()[0]);  // tp=2 with SP
  EXPECT_EQ(
      parse_megatron(run_export(l, ExportFormat::kMegatron).content).count("--tp-comm-overlap"),
      0u);
  l.input.tp_comm_overlap = true;
  const auto f = parse_megatron(run_export(l, ExportFormat::kMegatron).content);
  EXPECT_EQ(f.count("--tp-comm-overlap"), 1u);
  EXPECT_EQ(f.count("--sequence-parallel"), 1u);
  const Export plan = run_export(l, ExportFormat::kJson);
  auto back = parse_plan(plan.content, "plan.json");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_TRUE(back->tp_comm_overlap);
}

// issue 44: moments=bf16 is Megatron-core's precision-aware optimizer (megatron/training/
// arguments.py:3500-3517 at core_v0.19.0): Megatron-LM gets its three flags, Megatron-Bridge the
// OptimizerConfig fields (the dtype as the string its override parser turns back into a
// torch.dtype, and the fp32 master kept whole as simulated); without the distributed optimizer
// (zero=0) OptimizerConfig asserts, and the export refuses naming the key. torchtitan, nanotron
// and DeepSpeed keep fp32 moments and refuse it; act_cache=fp8 (DeepSeek's own framework) is
// refused by every target, and both keys travel in the plan file.
TEST(Exporters, PrecisionKeysAreExportedOrRefusedByName) {
  Case c{"llama_bf16_moments",
         "llama3-8b",
         "dgx-h100",
         16,
         4096,
         "tp=2,pp=2,mbs=1,gbs=16,zero=1,moments=bf16"};
  Loaded l = load(c);
  const auto f = parse_megatron(run_export(l, ExportFormat::kMegatron).content);
  EXPECT_EQ(f.count("--use-precision-aware-optimizer"), 1u);
  EXPECT_EQ(f.at("--exp-avg-dtype"), "bf16");
  EXPECT_EQ(f.at("--exp-avg-sq-dtype"), "bf16");
  const std::string bridge = run_export(l, ExportFormat::kMegatronBridge).content;
  for (const char* o :
       {"optimizer.use_precision_aware_optimizer=true", "optimizer.exp_avg_dtype=torch.bfloat16",
        "optimizer.exp_avg_sq_dtype=torch.bfloat16", "optimizer.store_param_remainders=false"})
    EXPECT_NE(bridge.find(o), std::string::npos) << o;
  for (ExportFormat t : {ExportFormat::kTorchtitan, ExportFormat::kTorchtitanMain,
                         ExportFormat::kNanotron, ExportFormat::kDeepspeed}) {
    auto e = try_export(l, t);
    ASSERT_FALSE(e.is_ok()) << framework_name(t);
    EXPECT_EQ(e.status().code(), Status::Code::kInvalidInput);
    EXPECT_NE(e.status().message().find("moments=bf16"), std::string::npos) << e.status().message();
  }
  auto back = parse_plan(run_export(l, ExportFormat::kJson).content, "plan.json");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->layout.moments, MomentDtype::kBf16);
  // Without the distributed optimizer.
  c.layout = "tp=2,pp=2,mbs=1,gbs=16,zero=0,moments=bf16";
  Loaded z0 = load(c);
  for (ExportFormat t : {ExportFormat::kMegatron, ExportFormat::kMegatronBridge}) {
    auto e = try_export(z0, t);
    ASSERT_FALSE(e.is_ok());
    EXPECT_NE(e.status().message().find("zero"), std::string::npos) << e.status().message();
  }
  // Without the key, none of the flags.
  c.layout = "tp=2,pp=2,mbs=1,gbs=16,zero=1";
  Loaded plain = load(c);
  EXPECT_EQ(run_export(plain, ExportFormat::kMegatron).content.find("precision-aware"),
            std::string::npos);
  // DeepSeek's activation cache.
  c.layout = "tp=2,pp=2,mbs=1,gbs=16,zero=1,dtype=fp8,act_cache=fp8";
  Loaded ds = load(c);
  for (ExportFormat t :
       {ExportFormat::kMegatron, ExportFormat::kMegatronBridge, ExportFormat::kTorchtitan,
        ExportFormat::kTorchtitanMain, ExportFormat::kNanotron, ExportFormat::kDeepspeed}) {
    auto e = try_export(ds, t);
    ASSERT_FALSE(e.is_ok()) << framework_name(t);
    EXPECT_NE(e.status().message().find("act_cache=fp8"), std::string::npos)
        << e.status().message();
  }
  auto ds_back = parse_plan(run_export(ds, ExportFormat::kJson).content, "plan.json");
  ASSERT_TRUE(ds_back.is_ok()) << ds_back.status().message();
  EXPECT_EQ(ds_back->layout.act_cache, ActCache::kFp8);
}

}  // namespace
}  // namespace scaleplan::planner
