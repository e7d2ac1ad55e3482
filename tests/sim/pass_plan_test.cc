// The pass plan (sim/pass_plan.h): the one description of an iteration that the program builder
// emits and the planner's bound sums. Its chunk map must be core/layout.h's, its parameters must
// add up to the model's, and the program the builder emits must run exactly its passes in its
// order on the stages it names.
#include "sim/pass_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "calibrate/kernel_model.h"
#include "hw_profiles/cluster.h"
#include "hw_profiles/collectives.h"
#include "models/model_spec.h"
#include "models/tensors.h"
#include "sim/builder.h"
#include "sim/framework.h"

namespace scaleplan::sim {
namespace {

constexpr int64_t kSeq = 256;

Layout resolved(const models::ModelSpec& model, const std::string& text, int64_t gpus) {
  auto parsed = parse_layout(text);
  EXPECT_TRUE(parsed.is_ok()) << text;
  auto l = resolve_layout(*parsed, models::layout_constraints(model, kSeq), gpus);
  EXPECT_TRUE(l.is_ok()) << text << ": " << l.status().message();
  return l.is_ok() ? *l : Layout{};
}

PassPlan plan_of(const models::ModelSpec& model, const Layout& l) {
  auto p = pass_plan(model, l, kSeq, framework(FrameworkId::kMegatron).timing,
                     std::make_shared<const ParamShards>(param_shards(model, l.tp, l.ep, l.etp)));
  EXPECT_TRUE(p.is_ok()) << format_layout(l) << ": " << p.status().message();
  return p.is_ok() ? std::move(*p) : PassPlan{};
}

// The one-rank-per-stage program of `l` under Megatron-core's conventions on DGX H100 nodes.
Result<Program> program_of(const models::ModelSpec& model, const Layout& l) {
  static const hw::Cluster cluster = *hw::load_cluster("dgx-h100");
  static const std::unique_ptr<calibrate::KernelCostModel> kernels = [] {
    auto k = calibrate::kernel_cost_model_for(cluster);
    return std::move(*k);
  }();
  static const hw::CollectiveModel collectives(cluster);
  const BuildOptions o = build_options(framework(FrameworkId::kMegatron), l, cluster.gpu);
  BuildInputs in{&model, &l, kSeq, &cluster, kernels.get(), &collectives, nullptr};
  return build_program(in, o);
}

struct Case {
  const char* model;
  const char* layout;
  int64_t gpus;
};

const Case kCases[] = {
    {"llama-tiny", "tp=2,pp=2,dp=2,gbs=16", 8},
    {"llama-tiny", "tp=1,pp=2,dp=2,vpp=2,schedule=interleaved,gbs=16,zero=1", 4},
    {"llama-tiny", "pp=4,dp=2,gbs=16,schedule=zb-h1", 8},
    {"llama-tiny", "pp=2,dp=4,gbs=32,schedule=dualpipe", 8},
    {"llama-tiny", "pp=2,dp=4,gbs=32,schedule=dualpipev", 8},
    {"llama-tiny", "pp=2,dp=4,gbs=32,schedule=zb-v,zero=3", 8},
    {"mixtral-tiny", "tp=2,pp=2,dp=4,ep=4,gbs=32,zero=1", 16},
    {"deepseek-tiny", "pp=2,dp=4,ep=4,gbs=32,zero=2", 8},
    // Tied embeddings (a copy on the last stage) and DeepSeek's MTP modules (on the last stage).
    {"gemma2-9b", "pp=2,dp=4,gbs=8", 8},
    {"deepseek-v3", "pp=2,dp=4,gbs=8", 8},
};

// Calls check(case, layout, plan, program) for every case.
template <class F>
void for_each_built(F check) {
  for (const Case& c : kCases) {
    auto model = models::load_model(c.model);
    ASSERT_TRUE(model.is_ok());
    const Layout l = resolved(*model, c.layout, c.gpus);
    auto prog = program_of(*model, l);
    ASSERT_TRUE(prog.is_ok()) << c.layout << ": " << prog.status().message();
    check(c, l, plan_of(*model, l), *prog);
  }
}

TEST(PassPlan, ChunksFollowTheLayoutsChunkToStageMap) {
  for (const Case& c : kCases) {
    auto model = models::load_model(c.model);
    ASSERT_TRUE(model.is_ok());
    const Layout l = resolved(*model, c.layout, c.gpus);
    const PassPlan p = plan_of(*model, l);
    const std::string what = c.layout;
    ASSERT_EQ(p.chunks.size(), static_cast<size_t>(l.pp * chunks_per_rank(l))) << what;
    const int copies = l.schedule == Schedule::kDualPipe ? 2 : 1;
    int embeddings = 0, heads = 0;
    int64_t layers = 0;
    for (size_t g = 0; g < p.chunks.size(); ++g) {
      const ChunkPlan& ch = p.chunks[g];
      EXPECT_EQ(ch.stage, stage_of_chunk(l, static_cast<int>(g))) << what << " chunk " << g;
      EXPECT_EQ(p.global_chunk(ch.stage, ch.local), static_cast<int>(g)) << what;
      embeddings += ch.embedding;
      heads += ch.head;
      layers += ch.layers;
    }
    // Every copy of the model runs each layer once, the embedding and the head once.
    EXPECT_EQ(layers, copies * model->num_layers) << what;
    EXPECT_EQ(embeddings, copies) << what;
    EXPECT_EQ(heads, copies) << what;
    // The order is sim/schedule.h's for the layout.
    auto order = pipeline_schedule(l.schedule, l.pp, l.vpp_degree(), l.num_microbatches());
    ASSERT_TRUE(order.is_ok());
    EXPECT_EQ(p.order, *order) << what;
  }
}

TEST(PassPlan, StageParametersAddUpToTheModel) {
  // Without TP or EP every GPU holds whole tensors: the stages' parameters together are the
  // model's (models::tensor_table), plus the embedding's copy on the last stage where the
  // pipeline's ends are apart, once per copy of the model.
  int compared = 0, copied = 0, mtp = 0;
  for (const Case& c : kCases) {
    auto model = models::load_model(c.model);
    ASSERT_TRUE(model.is_ok());
    Layout l = resolved(*model, c.layout, c.gpus);
    if (l.tp != 1 || l.ep != 1) continue;
    const PassPlan p = plan_of(*model, l);
    int64_t table = 0;
    for (const auto& t : models::tensor_table(*model)) table += t.numel();
    for (const auto& t : models::mtp_tensor_table(*model)) table += t.numel();
    const int copies = l.schedule == Schedule::kDualPipe ? 2 : 1;
    int64_t stages = 0;
    for (int s = 0; s < l.pp; ++s) stages += p.stage_dense_params(s) + p.stage_expert_params(s);
    EXPECT_EQ(stages, copies * (table + (p.embedding_copy_on_last ? p.tied_shard : 0))) << c.layout;
    ++compared;
    copied += p.embedding_copy_on_last;
    mtp += p.params().mtp_expert > 0;
  }
  EXPECT_GE(compared, 7);
  EXPECT_GE(copied, 2);  // gemma2's tied head and DeepSeek-V3's MTP embedding
  EXPECT_EQ(mtp, 1);
}

TEST(PassPlan, TheBuilderRunsItsPassesInItsOrder) {
  // Each forward pass allocates its activations (one op per pass, tagged with its micro-batch and
  // local chunk): on every stage their sequence is the plan's forwards, in the plan's order.
  for_each_built([&](const Case& c, const Layout& l, const PassPlan& p, const Program& prog) {
    std::map<int, std::vector<std::pair<int, int>>> built;  // stage -> (micro-batch, chunk)
    for (OpId i = 0; i < prog.num_ops(); ++i) {
      const Op& op = prog.op(i);
      if (op.kind != OpKind::kAlloc) continue;
      built[prog.ranks()[op.rank].stage].push_back({op.microbatch, op.chunk});
    }
    for (int s = 0; s < l.pp; ++s) {
      std::vector<std::pair<int, int>> planned;
      for (const Pass& pass : p.order[static_cast<size_t>(s)]) {
        if (pass.kind == PassKind::kForward) planned.push_back({pass.microbatch, pass.chunk});
      }
      EXPECT_FALSE(planned.empty()) << c.layout << " stage " << s;
      EXPECT_EQ(built[s], planned) << c.layout << " stage " << s;
    }
  });
}

TEST(PassPlan, TheStepRunsTheOptimizerOverTheStagesParameters) {
  // The step pass (the builder's emit_step): on every stage, the optimizer's kernels are
  // models::optimizer_operators over the stage's parameters in the plan, ZeRO-sharded (zero_shard),
  // in order: the Adam kernel reads and writes 28 bytes per parameter of the shard.
  const Framework fw = framework(FrameworkId::kMegatron);
  for_each_built([&](const Case& c, const Layout& l, const PassPlan& p, const Program& prog) {
    std::map<int, std::vector<std::pair<std::string, int64_t>>> built;  // stage -> (name, bytes)
    for (OpId i = 0; i < prog.num_ops(); ++i) {
      const OpLabel& label = prog.label(i);
      if (label.name.rfind("optim.", 0) != 0) continue;
      const auto& k = std::get<KernelPayload>(label.payload);
      built[prog.ranks()[prog.op(i).rank].stage].push_back(
          {label.name, std::get<MemoryBoundShape>(k.shape).bytes.value()});
    }
    for (int s = 0; s < l.pp; ++s) {
      const int64_t dense = p.stage_dense_params(s), expert = p.stage_expert_params(s);
      const int64_t shard = l.zero >= 1 ? zero_shard(dense, expert, l) : dense + expert;
      std::vector<std::pair<std::string, int64_t>> expected;
      for (const models::Op& op :
           models::optimizer_operators(shard, fw.timing.fp16_loss_scale, fw.timing.dp_grad_bytes))
        expected.push_back({op.name, std::get<MemoryBoundShape>(op.shape).bytes.value()});
      EXPECT_EQ(built[s], expected) << c.layout << " stage " << s;
      const auto adam = std::find_if(built[s].begin(), built[s].end(),
                                     [](const auto& e) { return e.first == "optim.adam"; });
      ASSERT_NE(adam, built[s].end()) << c.layout << " stage " << s;
      EXPECT_EQ(adam->second, 28 * shard) << c.layout << " stage " << s;
    }
  });
}

TEST(DpBuckets, CloseWhenTheGradientsReachTheCapAndTheLastTakesTheRest) {
  // Megatron-LM's DDP buckets: layers' gradients (backward order) fill a bucket until it holds at
  // least the cap; the parameters beyond the layers (embedding, head) go in the last one.
  const std::vector<int64_t> dense = {30, 30, 30, 50}, expert = {0, 0, 10, 0};
  const auto by_size = dp_buckets(dense, expert, 7, 3, Bucketing::kBySize, 40);
  ASSERT_EQ(by_size.size(), 4u);
  EXPECT_EQ(by_size[0].dense, 60);  // 30 + 30 reaches 40 at layer 1
  EXPECT_EQ(by_size[0].after, 1u);
  EXPECT_EQ(by_size[1].dense, 30);  // 30 + 10 experts reach 40 at layer 2
  EXPECT_EQ(by_size[1].expert, 10);
  EXPECT_EQ(by_size[1].after, 2u);
  EXPECT_EQ(by_size[2].dense, 50);
  EXPECT_EQ(by_size[2].after, 3u);
  EXPECT_EQ(by_size[3].dense, 7);  // the extras alone, after the pass
  EXPECT_EQ(by_size[3].expert, 3);
  EXPECT_EQ(by_size[3].after, dense.size());

  const auto per_layer = dp_buckets(dense, expert, 7, 3, Bucketing::kPerLayer, 40);
  ASSERT_EQ(per_layer.size(), 5u);
  for (size_t i = 0; i < dense.size(); ++i) EXPECT_EQ(per_layer[i].dense, dense[i]);

  const auto one = dp_buckets(dense, expert, 7, 3, Bucketing::kOne, 40);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].dense, 147);
  EXPECT_EQ(one[0].expert, 13);
  EXPECT_EQ(one[0].after, dense.size());
}

}  // namespace
}  // namespace scaleplan::sim
