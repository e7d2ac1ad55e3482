#include "core/layout.h"

#include <gtest/gtest.h>

#include "core/layout_keys.h"

#include <map>
#include <set>
#include <string>

namespace scaleplan {
namespace {

LayoutConstraints llama8b(int64_t seq = 8192) {
  // Llama-3-8B: 32 layers, 32 heads, 8 KV heads, dense.
  return {.num_layers = 32, .num_heads = 32, .num_kv_heads = 8, .num_experts = 0, .seq_len = seq};
}

TEST(Layout, ParsesDesignExampleAndRoundTrips) {
  const std::string text =
      "tp=8,pp=4,dp=16,cp=1,ep=1,vpp=2,schedule=interleaved,sp=on,mbs=1,gbs=1024,zero=1,"
      "recompute=selective,dtype=bf16";
  auto l = parse_layout(text);
  ASSERT_TRUE(l.is_ok()) << l.status().message();
  EXPECT_EQ(l->tp, 8);
  EXPECT_EQ(l->pp, 4);
  EXPECT_EQ(*l->dp, 16);
  EXPECT_EQ(*l->vpp, 2);
  EXPECT_EQ(l->schedule, Schedule::kInterleaved);
  EXPECT_EQ(l->zero, 1);
  EXPECT_EQ(l->recompute, Recompute::kSelective);
  auto again = parse_layout(format_layout(*l));
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(*again, *l);
}

// recompute_modules (Megatron-core's --recompute-modules) picks what selective recompute reruns:
// '+'-joined, any order, written back in one canonical order; the attention core alone unless
// given; an error naming the key and the value for an unknown or repeated module, and for
// modules without recompute=selective.
TEST(Layout, RecomputeModulesRoundTripAndNeedSelective) {
  auto l = parse_layout("tp=2,recompute=selective,recompute_modules=moe_act+layernorm+core_attn");
  ASSERT_TRUE(l.is_ok()) << l.status().message();
  EXPECT_EQ(*l->recompute_modules, kRecomputeCoreAttn | kRecomputeLayernorm | kRecomputeMoeAct);
  EXPECT_NE(format_layout(*l).find(",recompute_modules=core_attn+layernorm+moe_act,"),
            std::string::npos);
  EXPECT_EQ(*parse_layout(format_layout(*l)), *l);
  EXPECT_TRUE(l->recomputes(kRecomputeMoeAct));
  EXPECT_FALSE(l->recomputes(kRecomputeMlp));

  auto plain = parse_layout("tp=2,recompute=selective");
  ASSERT_TRUE(plain.is_ok());
  EXPECT_FALSE(plain->recompute_modules.has_value());
  EXPECT_EQ(format_layout(*plain).find("recompute_modules"), std::string::npos);
  EXPECT_TRUE(plain->recomputes(kRecomputeCoreAttn));  // the default: the attention core
  EXPECT_FALSE(plain->recomputes(kRecomputeLayernorm));
  auto none = parse_layout("tp=2,recompute=none");
  EXPECT_EQ(none->recompute_module_set(), 0);

  auto unknown = parse_layout("recompute=selective,recompute_modules=core_attn+attention");
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("recompute_modules='core_attn+attention'"),
            std::string::npos);
  EXPECT_NE(unknown.status().message().find("'attention'"), std::string::npos);
  EXPECT_FALSE(parse_layout("recompute=selective,recompute_modules=mlp+mlp").is_ok());
  EXPECT_FALSE(parse_layout("recompute=selective,recompute_modules=").is_ok());
  auto full =
      resolve_layout(*parse_layout("tp=2,recompute=full,recompute_modules=mlp"), llama8b(), 2);
  ASSERT_FALSE(full.is_ok());
  EXPECT_NE(full.status().message().find("needs recompute=selective (recompute=full)"),
            std::string::npos);
}

TEST(Layout, DefaultsFollowDesign) {
  auto l = resolve_layout(*parse_layout("tp=2,pp=2"), llama8b(), 16);
  ASSERT_TRUE(l.is_ok()) << l.status().message();
  EXPECT_EQ(l->dp_degree(), 4);         // 16 / (2·2·1)
  EXPECT_TRUE(l->sequence_parallel());  // on when tp > 1
  EXPECT_EQ(l->vpp_degree(), 1);
  EXPECT_EQ(l->global_batch(), 4);  // mbs·dp, no accumulation
  auto inter = resolve_layout(*parse_layout("tp=1,pp=4,schedule=interleaved"), llama8b(), 8);
  ASSERT_TRUE(inter.is_ok());
  EXPECT_EQ(inter->vpp_degree(), 2);  // 2 when interleaved (32 layers: 8 per stage, 4 per chunk)
  EXPECT_FALSE(inter->sequence_parallel());
  // The fewest virtual stages (at least 2) that cut a stage's layers evenly, as Megatron-LM
  // requires: the 530B GPT (105 layers) on pp = 35 has 3 layers per stage, so vpp = 3 (its
  // authors' --num-layers-per-virtual-pipeline-stage 1); 60 layers on pp = 4, 15 per stage: 3.
  LayoutConstraints gpt{.num_layers = 105, .num_heads = 128, .num_kv_heads = 128};
  auto v3 = resolve_layout(*parse_layout("tp=8,pp=35,schedule=interleaved"), gpt, 280);
  ASSERT_TRUE(v3.is_ok()) << v3.status().message();
  EXPECT_EQ(v3->vpp_degree(), 3);
  gpt.num_layers = 60;
  EXPECT_EQ(resolve_layout(*parse_layout("tp=8,pp=4,schedule=interleaved"), gpt, 32)->vpp_degree(),
            3);
  // Layers that pp does not divide have no even chunks: 2, with uneven stages.
  gpt.num_layers = 61;
  EXPECT_EQ(resolve_layout(*parse_layout("tp=8,pp=4,schedule=interleaved"), gpt, 32)->vpp_degree(),
            2);
}

TEST(Layout, WithoutGpuCountDpDefaultsToOne) {
  // Neither dp nor a GPU count: the layout's tp·pp·cp GPUs are the whole job.
  auto l = resolve_layout(*parse_layout("tp=2,pp=2,gbs=8"), llama8b(), 0);
  ASSERT_TRUE(l.is_ok()) << l.status().message();
  EXPECT_EQ(l->dp_degree(), 1);
  EXPECT_EQ(l->gpus(), 4);
  EXPECT_EQ(l->num_microbatches(), 8);
}

TEST(Layout, MicrobatchesFromGlobalBatch) {
  // gbs 1024 over dp 16 with mbs 2: 1024 / 32 = 32 micro-batches.
  auto l = resolve_layout(*parse_layout("tp=4,pp=2,mbs=2,gbs=1024"), llama8b(), 128);
  ASSERT_TRUE(l.is_ok()) << l.status().message();
  EXPECT_EQ(l->num_microbatches(), 32);
}

void expect_error(std::string_view layout, const LayoutConstraints& m, int64_t gpus,
                  std::initializer_list<std::string_view> needles) {
  auto parsed = parse_layout(layout);
  Status st = parsed.is_ok() ? resolve_layout(*parsed, m, gpus).status() : parsed.status();
  ASSERT_FALSE(st.is_ok()) << layout;
  EXPECT_EQ(st.code(), Status::Code::kInvalidInput);
  for (auto n : needles) EXPECT_NE(st.message().find(n), std::string::npos) << st.message();
}

// Counts take the suffixes of core/counts.h: gbs=1k is 1024 sequences.
TEST(Layout, CountsTakeSuffixes) {
  auto l = parse_layout("tp=8,mbs=1,gbs=1k");
  ASSERT_TRUE(l.is_ok()) << l.status().message();
  EXPECT_EQ(l->gbs, 1024);
  expect_error("gbs=1.1k", llama8b(), 8, {"gbs='1.1k'", "not an integer"});
}

TEST(Layout, ErrorsNameKeyAndNumbers) {
  expect_error("tp=3", llama8b(), 3, {"tp=3", "num_attention_heads=32"});
  expect_error("tp=2,pp=2,dp=3", llama8b(), 16, {"12", "16"});
  expect_error("tp=2,bogus=1", llama8b(), 16, {"unknown key 'bogus'"});
  expect_error("tpp=2", llama8b(), 2, {"unknown key 'tpp' (did you mean 'tp'?)"});
  expect_error("pp=2,schedule=interleave", llama8b(), 2, {"did you mean 'interleaved'?"});
  expect_error("tp=x", llama8b(), 16, {"tp='x'", "not an integer"});
  expect_error("zero=4", llama8b(), 16, {"zero='4'"});
  expect_error("tp=1,mbs=2,gbs=10", llama8b(), 4, {"gbs=10", "mbs·dp"});
  expect_error("pp=8,vpp=8,schedule=interleaved", llama8b(), 8, {"64", "32 layers"});
  expect_error("cp=3", llama8b(8192), 3, {"cp=3", "8192"});
  expect_error("ep=2", llama8b(), 2, {"mixture-of-experts"});
  expect_error("tp=2,tp=4", llama8b(), 2, {"twice"});
}

// SP splits each CP rank's share of the sequence over TP, which Megatron's split asserts tp
// divides: sp=on is refused where it does not, and an unset sp falls back to off there.
TEST(Layout, SequenceParallelNeedsTpToDivideTheSequence) {
  expect_error("tp=8,sp=on", llama8b(4100), 8, {"sp=on", "tp=8", "4100", "sp=off"});
  expect_error("tp=8,cp=2,sp=on", llama8b(8200), 16, {"seq/cp = 4100"});
  auto fallback = resolve_layout(*parse_layout("tp=8"), llama8b(4100), 8);
  ASSERT_TRUE(fallback.is_ok()) << fallback.status().message();
  EXPECT_FALSE(fallback->sequence_parallel());
  auto on = resolve_layout(*parse_layout("tp=8,cp=2"), llama8b(8192), 16);
  ASSERT_TRUE(on.is_ok()) << on.status().message();
  EXPECT_TRUE(on->sequence_parallel());
}

TEST(Layout, KvHeadsReplicatedWhenFewerThanTp) {
  // 8 KV heads, tp=16: each rank holds one replicated KV head; 128 heads divide by 16.
  LayoutConstraints m{
      .num_layers = 126, .num_heads = 128, .num_kv_heads = 8, .num_experts = 0, .seq_len = 8192};
  EXPECT_TRUE(resolve_layout(*parse_layout("tp=16"), m, 16).is_ok());
  // 8 KV heads with tp=12: 12 neither divides 8 nor is a multiple of it (and 128 % 12 != 0 too).
  LayoutConstraints m2{
      .num_layers = 32, .num_heads = 24, .num_kv_heads = 8, .num_experts = 0, .seq_len = 8192};
  expect_error("tp=12", m2, 12, {"num_key_value_heads=8"});
}

TEST(Layout, ExpertGridMustDivideDenseGrid) {
  LayoutConstraints moe{
      .num_layers = 32, .num_heads = 32, .num_kv_heads = 8, .num_experts = 8, .seq_len = 4096};
  EXPECT_TRUE(resolve_layout(*parse_layout("tp=2,ep=8"), moe, 16).is_ok());  // 8 | 2·1·8
  expect_error("tp=1,ep=8", moe, 4, {"ep·etp", "tp·cp·dp = 4"});
  expect_error("ep=3", moe, 3, {"ep=3", "8"});
}

TEST(Layout, UnevenStagesPutRemainderInTheMiddle) {
  // 30 layers on 4 stages: 7 each with 2 left over, given to the two middle stages.
  Layout l = *resolve_layout(*parse_layout("pp=4"),
                             {.num_layers = 30, .num_heads = 8, .num_kv_heads = 8}, 4);
  auto c = stage_layer_counts(l, 30);
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(*c, (std::vector<int>{7, 8, 8, 7}));
  // Megatron-style pinned ends: first 5, last 5, middle two share 20.
  Layout p = *parse_layout("pp=4,pp_first=5,pp_last=5");
  auto pc = stage_layer_counts(p, 30);
  ASSERT_TRUE(pc.is_ok());
  EXPECT_EQ(*pc, (std::vector<int>{5, 10, 10, 5}));
}

// Llama 3 405B as Meta trained it (Dubey et al. 2024 §3.3.2: pp = 16, vpp = 8, the embedding and
// the output each count as a layer): 126 layers + 2 = 128 units on 128 chunks of one unit, so the
// first chunk holds the embedding alone and the last the LM head and loss alone (Megatron-core's
// --account-for-embedding/loss-in-pipeline-split, get_num_layers_to_build). On pp = 8, vpp = 8,
// NeMo's recipe: 128 units on 64 chunks of two, one layer each on the two end chunks.
TEST(Layout, EmbeddingAndLossCountAsPipelineLayers) {
  const LayoutConstraints m405{.num_layers = 126, .num_heads = 128, .num_kv_heads = 8};
  auto meta = resolve_layout(
      *parse_layout("tp=8,pp=16,vpp=8,schedule=interleaved,pp_embedding=on,pp_loss=on"), m405,
      8 * 16 * 8);
  ASSERT_TRUE(meta.is_ok()) << meta.status().message();
  auto c = stage_layer_counts(*meta, 126);
  ASSERT_TRUE(c.is_ok());
  std::vector<int> want(128, 1);
  want.front() = 0;
  want.back() = 0;
  EXPECT_EQ(*c, want);
  auto nemo = stage_layer_counts(
      *parse_layout("pp=8,vpp=8,schedule=interleaved,pp_embedding=on,pp_loss=on"), 126);
  ASSERT_TRUE(nemo.is_ok());
  std::vector<int> two(64, 2);
  two.front() = 1;
  two.back() = 1;
  EXPECT_EQ(*nemo, two);
  // Without the keys 128 chunks are more than the 126 layers.
  expect_error("tp=8,pp=16,vpp=8,schedule=interleaved", m405, 1024,
               {"pp·vpp = 16·8 = 128", "126 layers"});
  // Only the embedding counted: 127 units on pp = 4 chunks: 32, 32, 32, 31 before the embedding
  // takes its unit from the first chunk.
  auto first = stage_layer_counts(*parse_layout("pp=4,pp_embedding=on"), 126);
  ASSERT_TRUE(first.is_ok());
  EXPECT_EQ(*first, (std::vector<int>{31, 32, 32, 31}));
  // The keys round-trip, and Megatron-core's refusal of the two ways together is an error.
  EXPECT_EQ(*parse_layout(format_layout(*meta)), *meta);
  expect_error("pp=4,pp_first=30,pp_embedding=on", m405, 4, {"pp_first/pp_last", "pp_embedding"});
  expect_error("pp_loss=maybe", m405, 1, {"pp_loss", "maybe"});
}

// issue 44: the optimizer moments' dtype and the activation cache are layout keys (what a run
// did, which plan files and exports carry), written only when not the default so that every
// layout string without them reads and prints as before.
TEST(Layout, MomentsAndActivationCacheRoundTripAndRefuseBadValues) {
  const LayoutConstraints m{.num_layers = 8, .num_heads = 8, .num_kv_heads = 8};
  auto plain = parse_layout("tp=2,dtype=fp8");
  ASSERT_TRUE(plain.is_ok());
  EXPECT_EQ(plain->moments, MomentDtype::kFp32);
  EXPECT_EQ(plain->act_cache, ActCache::kDefault);
  EXPECT_EQ(format_layout(*plain).find("moments"), std::string::npos);
  EXPECT_EQ(format_layout(*plain).find("act_cache"), std::string::npos);
  EXPECT_EQ(layout_value(*plain, "moments"), "fp32");
  EXPECT_EQ(layout_value(*plain, "act_cache"), "default");
  auto ds = parse_layout("tp=2,dtype=fp8,moments=bf16,act_cache=fp8");
  ASSERT_TRUE(ds.is_ok());
  EXPECT_EQ(ds->moments, MomentDtype::kBf16);
  EXPECT_EQ(ds->act_cache, ActCache::kFp8);
  EXPECT_EQ(*parse_layout(format_layout(*ds)), *ds);
  EXPECT_TRUE(resolve_layout(*ds, m, 2).is_ok());
  expect_error("moments=fp16", m, 1, {"moments", "fp16", "fp32, bf16"});
  expect_error("act_cache=e5m6", m, 1, {"act_cache", "e5m6", "default, fp8"});
  // DeepSeek's caching is of an fp8 run's activations: with bf16 linears there is no fp8 copy.
  expect_error("act_cache=fp8", m, 1, {"act_cache=fp8", "dtype=fp8", "bf16"});
  // fp4 names the NVFP4 recipe's GEMM operands (--fp8-recipe nvfp4 under dtype=fp8), never a
  // layout's dtype.
  EXPECT_EQ(to_string(DType::kFp4), "fp4");
  expect_error("dtype=fp4", m, 1, {"dtype", "fp4", "bf16, fp8"});
}

// issue 44: pinned first and last stages with interleaving, as Megatron-core accepts them
// (num_layers_in_first/last_pipeline_stage with virtual stages; get_transformer_layer_offset splits
// each stage's layers over its vpp chunks). 126 layers, pp = 16, vpp = 2 (32 chunks; chunk c on
// stage c mod 16): pp_first = pp_last = 6 give stage 0's chunks 0 and 16 three layers each, and
// stage 15's chunks 15 and 31 the same; the other 28 chunks share 126 - 12 = 114 = 28·4 + 2, so
// the two earliest of them (chunks 1 and 2) take a fifth layer.
TEST(Layout, PinnedEndStagesWithInterleaving) {
  const LayoutConstraints m405{.num_layers = 126, .num_heads = 128, .num_kv_heads = 8};
  auto l = resolve_layout(
      *parse_layout("tp=8,pp=16,vpp=2,schedule=interleaved,pp_first=6,pp_last=6"), m405, 8 * 16);
  ASSERT_TRUE(l.is_ok()) << l.status().message();
  auto c = stage_layer_counts(*l, 126);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  std::vector<int> want(32, 4);
  want[0] = want[16] = want[15] = want[31] = 3;
  want[1] = want[2] = 5;
  EXPECT_EQ(*c, want);
  // An odd stage total splits with the earlier chunk taking the remainder: 7 = 4 + 3.
  auto odd = stage_layer_counts(
      *parse_layout("pp=16,vpp=2,schedule=interleaved,pp_first=7,pp_last=7"), 126);
  ASSERT_TRUE(odd.is_ok()) << odd.status().message();
  EXPECT_EQ((*odd)[0] + (*odd)[16], 7);
  EXPECT_EQ((*odd)[0], 4);
  EXPECT_EQ((*odd)[15] + (*odd)[31], 7);
  // A pinned stage needs a layer per chunk.
  expect_error("tp=8,pp=16,vpp=2,schedule=interleaved,pp_first=1", m405, 128, {"pp_first=1"});
}

TEST(Layout, DualPipeVCutsTheLayersInTwoChunksPerRank) {
  // 36 layers on pp = 4 in a V: 8 chunks of 4 with 4 left over. Rank s runs chunks s and 7-s, so
  // the extra layers go one per rank to ranks 1, 2, 3 (chunks 1, 2, 3), then to rank 1's up-arm
  // chunk 6; rank 0, which holds the embedding and the LM head, keeps 4 + 4.
  Layout l = *resolve_layout(*parse_layout("pp=4,schedule=dualpipev"),
                             {.num_layers = 36, .num_heads = 8, .num_kv_heads = 8}, 4);
  EXPECT_EQ(l.vpp_degree(), 1);
  EXPECT_EQ(l.chunks_per_stage(), 2);
  auto c = stage_layer_counts(l, 36);
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(*c, (std::vector<int>{4, 5, 5, 5, 4, 4, 5, 4}));
  auto again = parse_layout(format_layout(l));
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->schedule, Schedule::kDualPipeV);
  // pp_first / pp_last pin the V's two ends, both on rank 0; the 6 other chunks share 32 layers
  // rank by rank (ranks 1 and 2 take the two extra ones).
  Layout pinned = l;
  pinned.pp_first = 2;
  pinned.pp_last = 2;
  auto pc = stage_layer_counts(pinned, 36);
  ASSERT_TRUE(pc.is_ok()) << pc.status().message();
  EXPECT_EQ(*pc, (std::vector<int>{2, 6, 6, 5, 5, 5, 5, 2}));
  pinned.pp_first = 30;
  expect_error(format_layout(pinned), {.num_layers = 36, .num_heads = 8, .num_kv_heads = 8}, 4,
               {"pp_first=30 and pp_last=2 leave 4 of the 36 layers", "6 other chunks", "dualpipev",
                "at least one layer each"});
  // pp = 2 with both stages pinned: the pins must add up to the layers.
  expect_error("pp=2,pp_first=2,pp_last=2", {.num_layers = 36, .num_heads = 8, .num_kv_heads = 8},
               2, {"pp_first=2 and pp_last=2 pin 4 of the 36 layers", "must add up to 36"});
  // 2·pp chunks must not exceed the layers; the error names the schedule and the numbers.
  expect_error("pp=4,schedule=dualpipev", {.num_layers = 6, .num_heads = 8, .num_kv_heads = 8}, 4,
               {"dualpipev", "2·4 = 8", "6 layers"});
  expect_error("pp=4,schedule=dualpipev,vpp=2", llama8b(), 4, {"vpp=2", "interleaved"});
}

// The chunk-to-stage map every user shares (builder, memory model, bound). Megatron's interleaving
// puts chunk v·pp + s on stage s; a V (DualPipeV, ZB-V) runs chunks s and 2·pp-1-s on rank s, so
// rank 0 holds the first and the last chunk; DualPipe's second copy runs stage j of its pipeline
// (model chunk j) on rank pp-1-j. On every schedule each rank runs chunks_per_rank chunks, each
// chunk runs on exactly one rank, and chunk_of_stage inverts stage_of_chunk.
TEST(Layout, ChunkToStageMapIsOneBijection) {
  auto at = [](const char* text) {
    auto l = parse_layout(text);
    EXPECT_TRUE(l.is_ok()) << text;
    return *l;
  };
  const Layout inter = at("pp=4,vpp=3,schedule=interleaved");
  EXPECT_EQ(chunks_per_rank(inter), 3);
  EXPECT_EQ(stage_of_chunk(inter, 9), 1);  // 9 = 2·4 + 1
  EXPECT_EQ(chunk_of_stage(inter, 1, 2), 9);
  const Layout v = at("pp=4,schedule=dualpipev");
  EXPECT_EQ(stage_of_chunk(v, 0), 0);
  EXPECT_EQ(stage_of_chunk(v, 7), 0);  // the last chunk: back on rank 0
  EXPECT_EQ(stage_of_chunk(v, 4), 3);  // rank pp-1 turns the V
  const Layout dual = at("pp=4,schedule=dualpipe");
  EXPECT_EQ(chunks_per_rank(dual), 2);
  EXPECT_EQ(chunk_of_stage(dual, 1, 1), 6);  // rank 1's second copy: chunk 2·4-1-1
  EXPECT_EQ(model_chunk(dual, 6), 2);        // ... which is stage 2 of the other pipeline
  EXPECT_EQ(model_chunk(v, 6), 6);           // a V has one copy
  for (const char* text :
       {"pp=4,vpp=3,schedule=interleaved", "pp=4,schedule=1f1b", "pp=4,schedule=dualpipe",
        "pp=4,schedule=dualpipev", "pp=3,schedule=zb-v", "pp=1,schedule=zb-v"}) {
    const Layout l = at(text);
    const int chunks = l.pp * chunks_per_rank(l);
    std::vector<int> on_stage(static_cast<size_t>(l.pp), 0);
    for (int g = 0; g < chunks; ++g) {
      const int s = stage_of_chunk(l, g);
      ASSERT_GE(s, 0) << text;
      ASSERT_LT(s, l.pp) << text;
      ++on_stage[static_cast<size_t>(s)];
    }
    for (int s = 0; s < l.pp; ++s) {
      EXPECT_EQ(on_stage[static_cast<size_t>(s)], chunks_per_rank(l)) << text;
      for (int c = 0; c < chunks_per_rank(l); ++c)
        EXPECT_EQ(stage_of_chunk(l, chunk_of_stage(l, s, c)), s) << text << " stage " << s;
    }
  }
}

// ZeRO shards the dense states over dp·cp and the experts' over the expert data-parallel group,
// each rank holding the ceiling (Megatron pads its buffers): tp=2, dp=3, ep=2 gives edp =
// 2·3/2 = 3, so 10 dense and 10 expert elements are ceil(10/3) + ceil(10/3) = 8 per GPU; with
// cp=2, dp=4 and ep=8 at tp=1 the dense group is 8 and the experts' 1 (edp = 8/8), so they stay
// whole.
TEST(Layout, ZeroShardRoundsUpPerGroup) {
  Layout a = *parse_layout("tp=2,dp=3,ep=2");
  EXPECT_EQ(zero_shard(10, 10, a), 8);
  Layout b = *parse_layout("tp=1,cp=2,dp=4,ep=8");
  EXPECT_EQ(zero_shard(80, 10, b), 10 + 10);
  EXPECT_EQ(zero_shard(81, 0, b), 11);
}

TEST(Layout, ShardSizeChecksDivisibility) {
  EXPECT_EQ(*shard_size(14336, 8, "ffn"), 1792);
  auto bad = shard_size(14336, 3, "intermediate_size");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("intermediate_size: 14336 is not divisible by 3"),
            std::string::npos);
}

// cp_comm picks how context parallelism exchanges K/V (Megatron-core's --cp-comm-type): p2p
// (the ring, default), all_gather, a2a; it round-trips, names a bad value, and a2a needs cp to
// divide each TP rank's query and key/value heads (32 and 8 at tp=1 here; 8 and 2 at tp=4).
// Megatron-core accepts a micro-batch group n in [pp, m] whose last group m mod n is 0 or at least
// pp (schedules.py); the smallest such n. pp = 8: m = 16 keeps 8; m = 10 leaves 2 at n = 8 and 1
// at 9, so n = 10; m = 17 leaves 1 at 8 and 8 at 9, so 9; m = 20 leaves 4, 2, then 0 at 10; m = 14
// leaves 6, 5, 4, 3, 2, 1 at n = 8..13, so 14; m = 9 is one group.
TEST(Layout, InterleaveGroupIsTheSmallestMegatronAccepts) {
  EXPECT_EQ(interleave_group_size(8, 16), 8);
  EXPECT_EQ(interleave_group_size(8, 10), 10);
  EXPECT_EQ(interleave_group_size(8, 17), 9);
  EXPECT_EQ(interleave_group_size(8, 20), 10);
  EXPECT_EQ(interleave_group_size(8, 14), 14);
  EXPECT_EQ(interleave_group_size(8, 9), 9);
  EXPECT_EQ(interleave_group_size(4, 6), 6);
  EXPECT_EQ(interleave_group_size(4, 7), 7);
  // pp = 4, m = 37 leaves 1, 2, 1, 2 at n = 4..7 and 5 >= 4 at n = 8.
  EXPECT_EQ(interleave_group_size(4, 37), 8);
}

TEST(Layout, CpCommPicksTheKvExchange) {
  auto l = parse_layout("tp=1,cp=4,cp_comm=a2a");
  ASSERT_TRUE(l.is_ok());
  EXPECT_EQ(l->cp_comm_type(), CpComm::kA2a);
  EXPECT_EQ(*parse_layout(format_layout(*l)), *l);
  EXPECT_EQ(parse_layout("cp=2")->cp_comm_type(), CpComm::kP2p);
  auto bad = parse_layout("cp=2,cp_comm=ring");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("cp_comm"), std::string::npos);
  LayoutConstraints m;
  m.num_layers = 32;
  m.num_heads = 32;
  m.num_kv_heads = 8;
  m.seq_len = 8192;
  EXPECT_TRUE(resolve_layout(*parse_layout("tp=1,cp=8,cp_comm=a2a"), m, 8).is_ok());
  EXPECT_TRUE(resolve_layout(*parse_layout("tp=4,cp=2,cp_comm=a2a"), m, 8).is_ok());
  auto heads = resolve_layout(*parse_layout("tp=4,cp=4,cp_comm=a2a"), m, 16);
  ASSERT_FALSE(heads.is_ok());
  EXPECT_NE(heads.status().message().find("key/value heads (2)"), std::string::npos)
      << heads.status().message();
}

// Whether a layout string names a key itself or leaves it to its default (validate reads an
// explicit dtype=bf16 of an fp16-era record as a bf16 run).
TEST(Layout, GivesTellsAnExplicitKeyFromADefault) {
  EXPECT_TRUE(layout_gives("tp=8, dtype=bf16", "dtype"));
  EXPECT_TRUE(layout_gives("dtype =fp8", "dtype"));
  EXPECT_FALSE(layout_gives("tp=8,pp=2", "dtype"));
  EXPECT_FALSE(layout_gives("tp=8,dp=2", "p"));
  EXPECT_FALSE(layout_gives("", "tp"));
}

// The key table (core/layout.h LayoutKey) is the one description of the keys: each key parses,
// is printed back as given by format_layout, and an unknown key's error lists them all.
TEST(Layout, EveryKeyOfTheTableParsesAndPrintsBackAsGiven) {
  // One non-default value per key, as format_layout writes it.
  const std::map<std::string, std::string> sample = {
      {"tp", "2"},       {"pp", "2"},           {"dp", "3"},
      {"cp", "2"},       {"cp_comm", "a2a"},    {"ep", "2"},
      {"etp", "2"},      {"vpp", "3"},          {"schedule", "interleaved"},
      {"sp", "off"},     {"mbs", "2"},          {"gbs", "64"},
      {"zero", "1"},     {"recompute", "full"}, {"recompute_modules", "core_attn"},
      {"dtype", "fp8"},  {"moments", "bf16"},   {"act_cache", "fp8"},
      {"pp_first", "3"}, {"pp_last", "3"},      {"pp_embedding", "on"},
      {"pp_loss", "on"}, {"place", "packed"}};
  std::set<std::string> names;
  std::string all;
  for (const LayoutKey& k : layout_key_table()) {
    const std::string name(k.name);
    names.insert(name);
    ASSERT_TRUE(sample.count(name)) << "no sample value for the new key " << name;
    const std::string item = name + "=" + sample.at(name);
    auto l = parse_layout(item);
    ASSERT_TRUE(l) << item << ": " << l.status().message();
    EXPECT_EQ(layout_given(*l, name), sample.at(name)) << item;
    EXPECT_NE(("," + format_layout(*l) + ",").find("," + item + ","), std::string::npos)
        << format_layout(*l);
    all += (all.empty() ? "" : ",") + item;
  }
  EXPECT_EQ(names.size(), sample.size());
  // All keys at once: the canonical string reads back to itself.
  auto every = parse_layout(all);
  ASSERT_TRUE(every) << every.status().message();
  auto again = parse_layout(format_layout(*every));
  ASSERT_TRUE(again);
  EXPECT_EQ(format_layout(*again), format_layout(*every));
  auto unknown = parse_layout("tp=2,tpp=4");
  ASSERT_FALSE(unknown);
  for (const std::string& n : names)
    EXPECT_NE(unknown.status().message().find(n), std::string::npos) << n;
  EXPECT_EQ(find_layout_key("tpp"), nullptr);
  EXPECT_EQ(layout_value(*every, "tpp"), "");
}

}  // namespace
}  // namespace scaleplan
