// The operator list: GEMM shapes under TP, FLOP consistency with the accounting, passes, comms.
#include "models/operators.h"

#include <gtest/gtest.h>

#include "tests/models/model_fixtures.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <variant>

#include "models/accounting.h"
#include "models/memory_layers.h"
#include "models/model_spec.h"
#include "models/ub_presets.h"

namespace scaleplan::models {
namespace {

using testing::find;
using testing::preset;
using testing::resolved;

TEST(Operators, Llama8bGemmShapesUnderTp2) {
  // Llama-3-8B: h 4096, 32 heads of 128, 8 KV heads, FFN 14336. With tp=2 each rank holds 16 query
  // heads (2048 columns of q_proj), 4 KV heads (512 of k/v), 7168 of gate/up, and 7168 rows of
  // down's input. Q, K and V are one GEMM (Megatron-LM linear_qkv, nanotron qkv_proj) of
  // 2048 + 2·512 = 3072 columns; gate and up one GEMM (linear_fc1, gate_up_proj) of 2·7168.
  // mbs=2, s=1024: m = b·s = 2048 tokens.
  const ModelSpec m = preset("llama3-8b");
  const Layout l = resolved(m, "tp=2,dp=1,mbs=2,gbs=2", 1024, 2);
  auto ops = layer_operators(m, l, 1024, 0);
  ASSERT_TRUE(ops.is_ok()) << ops.status().message();
  auto expect_gemm = [&](const std::string& name, int64_t mm, int64_t n, int64_t k) {
    const Op* op = find(*ops, name);
    ASSERT_NE(op, nullptr) << name;
    ASSERT_NE(op->gemm(), nullptr) << name;
    EXPECT_EQ(op->gemm()->m, mm) << name;
    EXPECT_EQ(op->gemm()->n, n) << name;
    EXPECT_EQ(op->gemm()->k, k) << name;
  };
  expect_gemm("attn.qkv", 2048, 3072, 4096);
  expect_gemm("attn.o", 2048, 4096, 2048);
  expect_gemm("mlp.fc1", 2048, 2 * 7168, 4096);
  expect_gemm("mlp.down", 2048, 4096, 7168);
  for (const char* unfused : {"attn.q", "attn.k", "attn.v", "mlp.gate", "mlp.up"})
    EXPECT_EQ(find(*ops, unfused), nullptr) << unfused;
  // Backward: dgrad (m, k, n) and wgrad (n, k, m) of the forward (m, n, k).
  expect_gemm("attn.qkv.dgrad", 2048, 4096, 3072);
  expect_gemm("attn.qkv.wgrad", 3072, 4096, 2048);
  expect_gemm("mlp.down.wgrad", 4096, 7168, 2048);
  ASSERT_NE(find(*ops, "attn.qkv.wgrad"), nullptr);
  EXPECT_EQ(find(*ops, "attn.qkv.wgrad")->pass, Pass::kBackwardWeight);
  EXPECT_EQ(find(*ops, "attn.qkv.dgrad")->pass, Pass::kBackwardInput);
  // Attention: 16 heads and 4 KV heads per rank, causal over the whole sequence.
  const Op* core = find(*ops, "attn.core");
  ASSERT_NE(core, nullptr);
  EXPECT_EQ(core->attention()->heads, 16);
  EXPECT_EQ(core->attention()->kv_heads, 4);
  EXPECT_EQ(core->attention()->q_len, 1024);
  EXPECT_EQ(core->attention()->kv_len, 1024);
  // SP is on by default with tp>1: an all-gather before and a reduce-scatter after each block,
  // each moving the gathered b·s·h bf16 activations = 2048·4096·2 bytes.
  const Op* ag = find(*ops, "attn.sp_ag");
  const Op* rs = find(*ops, "mlp.sp_rs");
  ASSERT_NE(ag, nullptr);
  ASSERT_NE(rs, nullptr);
  EXPECT_EQ(ag->comm()->kind, CollectiveOp::kAllGather);
  EXPECT_EQ(rs->comm()->kind, CollectiveOp::kReduceScatter);
  EXPECT_EQ(ag->comm()->bytes.value(), 2048 * 4096 * 2);
}

// dtype=fp8: the decoder layers' linears run in fp8 with Transformer Engine's quantization, one
// cast-transpose kernel per bf16 operand: the input before the forward GEMM (read 2 B, write the
// fp8 copy and its transpose, 1 + 1 B: 4 B per element of the m x k input) and the output gradient
// before the backward GEMMs (4 B per element of m x n). The LM head and the MoE router stay bf16,
// with no casts.
TEST(Operators, Fp8LinearsCastTheirOperandsOnce) {
  const ModelSpec m = preset("llama3-8b");
  const Layout l = resolved(m, "tp=2,dp=1,mbs=2,gbs=2,dtype=fp8", 1024, 2);
  auto ops = layer_operators(m, l, 1024, 0);
  ASSERT_TRUE(ops.is_ok()) << ops.status().message();
  int casts = 0;
  for (const char* name : {"attn.qkv", "attn.o", "mlp.fc1", "mlp.down"}) {
    const Op* g = find(*ops, name);
    ASSERT_NE(g, nullptr) << name;
    EXPECT_EQ(g->gemm()->dtype, DType::kFp8) << name;
    const Op* in = find(*ops, std::string(name) + ".fp8_cast");
    const Op* dy = find(*ops, std::string(name) + ".fp8_cast.bwd");
    ASSERT_NE(in, nullptr) << name;
    ASSERT_NE(dy, nullptr) << name;
    EXPECT_EQ(in->pass, Pass::kForward);
    EXPECT_EQ(dy->pass, Pass::kBackwardInput);
    const GemmShape& s = *g->gemm();
    EXPECT_EQ(std::get<MemoryBoundShape>(in->shape).bytes.value(), 4 * s.m * s.k) << name;
    EXPECT_EQ(std::get<MemoryBoundShape>(dy->shape).bytes.value(), 4 * s.m * s.n) << name;
    // Typed as what they compute, so that the executor runs TE's kernel and not a bf16 cast.
    EXPECT_EQ(std::get<MemoryBoundShape>(in->shape).op, MemOp::kFp8CastTranspose) << name;
    EXPECT_EQ(std::get<MemoryBoundShape>(dy->shape).op, MemOp::kFp8CastTranspose) << name;
    casts += 2;
  }
  int all_casts = 0;
  for (const Op& op : *ops) {
    const auto* mb = std::get_if<MemoryBoundShape>(&op.shape);
    all_casts += mb != nullptr && mb->op == MemOp::kFp8CastTranspose;
  }
  EXPECT_EQ(all_casts, casts);
  auto head = head_operators(m, l, 1024);
  ASSERT_TRUE(head.is_ok());
  EXPECT_EQ(find(*head, "head.lm")->gemm()->dtype, DType::kBf16);
  EXPECT_EQ(find(*head, "head.lm.fp8_cast"), nullptr);
  // In bf16 there is nothing to cast.
  auto bf16 = layer_operators(m, resolved(m, "tp=2,dp=1,mbs=2,gbs=2", 1024, 2), 1024, 0);
  ASSERT_TRUE(bf16.is_ok());
  for (const Op& op : *bf16) EXPECT_EQ(op.name.find("fp8_cast"), std::string::npos) << op.name;
}

// Transformer Engine's fp8 linears quantize their input and keep the fp8 copy for the weight
// gradient (linear.py: "Discard row-wise data since it is not needed in backward pass";
// saved_inputmat = inputmat), and under SP they quantize before the all-gather. Llama-3-8B,
// tp=2 with SP, mbs 2, s 1024: 2048 tokens per GEMM, 1024 per sequence shard, h 4096, 16 heads
// of 128 and 7168 FFN columns per rank.
TEST(Operators, Fp8LinearsStoreAndGatherTheirInputsInFp8) {
  const ModelSpec m = preset("llama3-8b");
  const int64_t tokens = 2048, shard = 1024, h = 4096;
  auto fp8 =
      layer_operators(m, resolved(m, "tp=2,dp=1,sp=on,mbs=2,gbs=2,dtype=fp8", 1024, 2), 1024, 0);
  auto bf16 = layer_operators(m, resolved(m, "tp=2,dp=1,sp=on,mbs=2,gbs=2", 1024, 2), 1024, 0);
  ASSERT_TRUE(fp8.is_ok() && bf16.is_ok());
  auto saved = [](const std::vector<Op>& ops, const std::string& name) {
    return find(ops, name)->saved.value();
  };
  // The column-parallel inputs: the sequence shard, 1 B instead of 2 per element.
  EXPECT_EQ(saved(*bf16, "attn.qkv"), 2 * shard * h);
  EXPECT_EQ(saved(*fp8, "attn.qkv"), shard * h);
  EXPECT_EQ(saved(*bf16, "mlp.fc1"), 2 * shard * h);
  EXPECT_EQ(saved(*fp8, "mlp.fc1"), shard * h);
  // The down projection's input, the activation's output.
  EXPECT_EQ(saved(*bf16, "mlp.down"), 2 * tokens * 7168);
  EXPECT_EQ(saved(*fp8, "mlp.down"), tokens * 7168);
  // The output projection reads the attention output, which the attention core keeps in bf16
  // for its own backward: no copy in bf16, an fp8 copy on top of it in fp8.
  EXPECT_EQ(saved(*bf16, "attn.o"), 0);
  EXPECT_EQ(saved(*fp8, "attn.o"), tokens * 16 * 128);
  EXPECT_EQ(saved(*fp8, "attn.core"), saved(*bf16, "attn.core"));
  // The forward all-gathers and the weight gradients' re-gathers move the fp8 copy; the input
  // gradients' reduce-scatters stay bf16.
  auto bytes = [](const std::vector<Op>& ops, const std::string& name) {
    const Op* op = find(ops, name);
    EXPECT_NE(op, nullptr) << name;
    return op == nullptr ? 0 : op->comm()->bytes.value();
  };
  for (const std::string block : {"attn", "mlp"}) {
    EXPECT_EQ(bytes(*bf16, block + ".sp_ag"), 2 * tokens * h) << block;
    EXPECT_EQ(bytes(*fp8, block + ".sp_ag"), tokens * h) << block;
    EXPECT_EQ(bytes(*fp8, block + ".sp_ag.wgrad"), tokens * h) << block;
    EXPECT_EQ(bytes(*fp8, block + ".sp_rs.bwd"), 2 * tokens * h) << block;
  }
  // The LM head runs in bf16, and so does its boundary.
  auto head =
      head_operators(m, resolved(m, "tp=2,dp=1,sp=on,mbs=2,gbs=2,dtype=fp8", 1024, 2), 1024);
  ASSERT_TRUE(head.is_ok());
  EXPECT_EQ(bytes(*head, "head.sp_ag"), 2 * tokens * h);
  EXPECT_EQ(saved(*head, "head.lm"), 2 * shard * h);
  // torchao's float8 linears (torchtitan) save the bf16 input instead.
  const Layout l = resolved(m, "tp=2,dp=1,sp=on,mbs=2,gbs=2,dtype=fp8", 1024, 2);
  ASSERT_TRUE(save_high_precision_linear_inputs(*fp8, m, l, 1024, 0).is_ok());
  EXPECT_EQ(total_saved(*fp8).value(), total_saved(*bf16).value());
  EXPECT_EQ(saved(*fp8, "attn.o"), 0);
}

// A sliding layer's attention kernel computes the windowed part of the causal square: query t
// (1-based) scores min(w, t) keys. gpt-oss-120b, tp = 1, s = 4096, mbs 1: the sliding layer 0
// computes 64 heads · 2·(64 + 64) FLOPs per score over Σ min(128, t) = 128·129/2 + 128·3968
// scores, the full layer 1 over 4096·4097/2; the accounting counts the same keys (its full
// layers s/2 instead of (s+1)/2 per token), and the kernel's mask fraction is Σ/(q·kv).
TEST(Operators, SlidingWindowAttentionComputesOnlyTheWindow) {
  const ModelSpec m = preset("gpt-oss-120b");
  const int64_t s = 4096;
  const Layout l = resolved(m, "tp=1,dp=1,ep=1,mbs=1,gbs=1", s, 1);
  auto sliding = layer_operators(m, l, s, 0);
  auto full = layer_operators(m, l, s, 1);
  ASSERT_TRUE(sliding.is_ok() && full.is_ok());
  const Op* a = find(*sliding, "attn.core");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->attention()->window, 128);
  EXPECT_EQ(find(*full, "attn.core")->attention()->window, 0);
  const double window_scores = 128.0 * 129 / 2 + 128.0 * (s - 128);
  EXPECT_DOUBLE_EQ(a->attention()->mask_fraction(), window_scores / (s * s));
  const double per_score = 2.0 * 64 * (64 + 64);
  EXPECT_DOUBLE_EQ(a->flops.value(), per_score * window_scores);
  EXPECT_DOUBLE_EQ(find(*full, "attn.core")->flops.value(), per_score * s * (s + 1) / 2.0);
  // What it stores for the backward does not depend on the window (Q, K, V, O, log-sum-exp).
  EXPECT_EQ(a->saved.value(), find(*full, "attn.core")->saved.value());
  const FlopsPerToken f = flops_per_token(m, s);
  EXPECT_NEAR(f.attention_forward * s,
              18 * (a->flops.value() + find(*full, "attn.core")->flops.value()),
              f.attention_forward * s / s);
  // A CP-like chunk, the last 1024 queries of 4096 keys, each past the window: 128 keys each.
  AttentionShape chunk{1, 1, 1, 1024, 4096, 64, 64, true, AttentionKernel::kFlash2, 128};
  EXPECT_DOUBLE_EQ(chunk.mask_fraction(), 128.0 / 4096);
  chunk.window = 8192;  // longer than the keys: the causal mask alone
  AttentionShape causal = chunk;
  causal.window = 0;
  EXPECT_DOUBLE_EQ(chunk.mask_fraction(), causal.mask_fraction());
}

TEST(Operators, TpWithoutSpAllReduces) {
  const ModelSpec m = preset("llama3-8b");
  const Layout l = resolved(m, "tp=4,dp=1,sp=off", 2048, 4);
  auto ops = layer_operators(m, l, 2048, 0);
  ASSERT_TRUE(ops.is_ok());
  ASSERT_NE(find(*ops, "attn.tp_ar"), nullptr);
  ASSERT_NE(find(*ops, "mlp.tp_ar.bwd"), nullptr);  // the column-parallel input gradient
  EXPECT_EQ(find(*ops, "attn.sp_ag"), nullptr);
}

TEST(Operators, ForwardFlopsMatchTheAccounting) {
  // One micro-batch on one rank without model parallelism runs every token through every layer
  // and the LM head: the forward FLOPs of the lists, summed, are the accounting's forward FLOPs
  // per token × b·s. The attention kernel counts the causal mask exactly, (s+1)/(2s) of the
  // square, the accounting s/2 per token: they agree to 1/s.
  const ModelSpec m = preset("llama3-8b");
  const int64_t seq = 4096;
  const Layout l = resolved(m, "tp=1,dp=1,mbs=2,gbs=2", seq, 1);
  double fwd = 0;
  for (int64_t layer = 0; layer < m.num_layers; ++layer) {
    auto ops = layer_operators(m, l, seq, layer);
    ASSERT_TRUE(ops.is_ok());
    fwd += total_flops(*ops, Pass::kForward).value();
  }
  auto head = head_operators(m, l, seq);
  ASSERT_TRUE(head.is_ok());
  fwd += total_flops(*head, Pass::kForward).value();
  const double expected = flops_per_token(m, seq).forward * 2.0 * seq;
  EXPECT_NEAR(fwd / expected, 1.0, 1.0 / seq);
  // GEMM backward = 2 × GEMM forward (dgrad + wgrad).
  auto ops = layer_operators(m, l, seq, 0);
  double gemm_fwd = 0, gemm_bwd = 0;
  for (const Op& op : *ops) {
    if (op.kind != OpKind::kGemm) continue;
    (op.pass == Pass::kForward ? gemm_fwd : gemm_bwd) += op.flops.value();
  }
  EXPECT_DOUBLE_EQ(gemm_bwd, 2 * gemm_fwd);
}

TEST(Operators, MoeExpertsAndAllToAll) {
  // Mixtral-8x7B, ep=4: 2 local experts; b·s = 4096 tokens route top-2, 8192 token copies come
  // back to each rank (balanced) and spread over its 2 experts: batch 2 of m = 4096.
  const ModelSpec m = preset("mixtral-8x7b");
  const Layout l = resolved(m, "tp=1,ep=4,dp=4", 4096, 4);
  auto ops = layer_operators(m, l, 4096, 0);
  ASSERT_TRUE(ops.is_ok()) << ops.status().message();
  // Gate and up of each expert are one grouped GEMM (Megatron-Core's experts' linear_fc1).
  const Op* fc1 = find(*ops, "moe.expert.fc1");
  ASSERT_NE(fc1, nullptr);
  EXPECT_EQ(fc1->gemm()->batch, 2);
  EXPECT_EQ(fc1->gemm()->m, 4096);
  EXPECT_EQ(fc1->gemm()->n, 2 * m.moe->expert_ffn);
  const Op* dispatch = find(*ops, "moe.dispatch");
  ASSERT_NE(dispatch, nullptr);
  EXPECT_EQ(dispatch->comm()->kind, CollectiveOp::kAllToAll);
  EXPECT_EQ(dispatch->comm()->bytes.value(), 8192 * m.hidden * 2);
  ASSERT_NE(find(*ops, "moe.router"), nullptr);
}

// The all-to-all delivers each source rank's rows grouped by expert, so with more than one local
// expert the alltoall dispatcher regroups them by expert after the dispatch and back before the
// combine (Megatron-core MoEAlltoAllTokenDispatcher, sort_chunks_by_idxs), each a gather that reads
// and writes the received rows, forward and backward. Mixtral-8x7B at ep=4 holds 2 experts per
// rank and receives 8,192 rows of 4,096 bf16 values: 2 x 8,192 x 4,096 x 2 B per pass. DeepEP's
// dispatch has its one permute (moe.permute); one local expert (ep=8) and ep=1 need no regrouping.
TEST(Operators, AllToAllDispatcherRegroupsReceivedRowsByLocalExpert) {
  ModelSpec m = preset("mixtral-8x7b");
  const Layout l = resolved(m, "tp=1,ep=4,dp=4", 4096, 4);
  auto sorts = [&](const ModelSpec& spec, const Layout& lay) {
    auto ops = layer_operators(spec, lay, 4096, 0);
    EXPECT_TRUE(ops.is_ok()) << ops.status().message();
    std::vector<std::pair<std::string, int64_t>> out;
    for (const Op& op : *ops) {
      const auto* mb = std::get_if<MemoryBoundShape>(&op.shape);
      if (mb != nullptr &&
          (op.name.rfind("moe.sort", 0) == 0 || op.name.rfind("moe.unsort", 0) == 0))
        out.emplace_back(op.name, mb->bytes.value());
    }
    return out;
  };
  const int64_t pass = int64_t{2} * 8192 * m.hidden * 2;
  const auto alltoall = sorts(m, l);
  ASSERT_EQ(alltoall.size(), 4u);  // sort and unsort, forward and backward
  for (const auto& [name, bytes] : alltoall) EXPECT_EQ(bytes, pass) << name;
  // Regrouping happens between the dispatch and the experts' first GEMM, and back before the
  // combine.
  auto ops = layer_operators(m, l, 4096, 0);
  ASSERT_TRUE(ops.is_ok());
  std::vector<std::string> order;
  for (const Op& op : *ops) {
    if (op.name == "moe.dispatch" || op.name == "moe.sort" || op.name == "moe.expert.fc1" ||
        op.name == "moe.expert.down" || op.name == "moe.unsort" || op.name == "moe.combine")
      order.push_back(op.name);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"moe.dispatch", "moe.sort", "moe.expert.fc1",
                                             "moe.expert.down", "moe.unsort", "moe.combine"}));
  ModelSpec deepep = m;
  ASSERT_TRUE(set_moe_dispatcher(deepep, "deepep").is_ok());
  EXPECT_TRUE(sorts(deepep, l).empty());
  EXPECT_TRUE(sorts(m, resolved(m, "tp=1,ep=8,dp=8", 4096, 8)).empty());
  EXPECT_TRUE(sorts(m, resolved(m, "tp=1,ep=1,dp=4", 4096, 4)).empty());
}

// With an imbalance f the simulated rank is the busiest EP rank: it receives f times the mean
// token copies, so its all-to-alls carry and its experts compute f times as many; what it sends
// of its own tokens (the permute before the dispatch, the weighted sum after the combine) does not
// grow, but the probabilities its experts' activation keeps per row do. Mixtral-8x7B, ep=4, f
// = 1.5: 12,288 copies instead of 8,192, 6,144 rows per expert.
TEST(Operators, MoeImbalanceLoadsTheBusiestRank) {
  ModelSpec m = preset("mixtral-8x7b");
  const Layout l = resolved(m, "tp=1,ep=4,dp=4", 4096, 4);
  auto even = layer_operators(m, l, 4096, 0);
  ASSERT_TRUE(set_moe_imbalance(m, 1.5).is_ok());
  auto busy = layer_operators(m, l, 4096, 0);
  ASSERT_TRUE(even.is_ok() && busy.is_ok());
  EXPECT_EQ(find(*busy, "moe.expert.fc1")->gemm()->m, 6144);
  EXPECT_EQ(find(*busy, "moe.expert.down")->gemm()->m, 6144);
  for (const char* name : {"moe.dispatch", "moe.combine"}) {
    EXPECT_EQ(find(*busy, name)->comm()->bytes.value(), 12288 * m.hidden * 2) << name;
  }
  for (const char* name : {"moe.permute", "moe.unpermute", "moe.router"}) {
    EXPECT_EQ(find(*busy, name)->flops.value(), find(*even, name)->flops.value()) << name;
  }
  for (const char* name : {"moe.permute", "moe.router"}) {
    EXPECT_EQ(find(*busy, name)->saved.value(), find(*even, name)->saved.value()) << name;
  }
  // The router probabilities the experts' scaled activation keeps go with the rows it computes:
  // 12,288 x 4 B instead of 8,192 x 4 B.
  EXPECT_EQ(find(*busy, "moe.unpermute")->saved.value(), 12288 * 4);
  EXPECT_EQ(find(*even, "moe.unpermute")->saved.value(), 8192 * 4);
  // Only MoE models take one, and only a max/mean ratio of at least 1.
  ModelSpec dense = preset("llama3-8b");
  EXPECT_FALSE(set_moe_imbalance(dense, 1.2).is_ok());
  EXPECT_FALSE(set_moe_imbalance(m, 0.9).is_ok());
  EXPECT_FALSE(set_moe_imbalance(m, std::nan("")).is_ok());
  EXPECT_FALSE(set_moe_imbalance(m, 1e30).is_ok());  // above the 8 experts: no rank gets more
  EXPECT_TRUE(set_moe_imbalance(m, 8).is_ok());
  EXPECT_TRUE(set_moe_imbalance(m, 1.0).is_ok());
}

// Transformer Engine's GroupedLinear (Megatron-core's TEGroupedMLP) runs one cuBLAS GEMM per
// local expert, round-robin over 4 compute streams; torch._grouped_mm (torchtitan) one kernel for
// all. Qwen3-30B-A3B has 128 experts: at ep=8 each rank holds 16, so Megatron runs each expert
// GEMM (forward, input and weight gradient) as ceil(16 / 4) = 4 kernels of 4 GEMMs side by side,
// with the same FLOPs and the same stored bytes in all; at ep=32 (4 local experts) one kernel.
TEST(Operators, MegatronRunsExpertGemmsFourAtATime) {
  const ModelSpec m = preset("qwen3-30b-a3b");
  const FrameworkOps megatron = framework_ops(FrameworkId::kMegatron);
  const FrameworkOps titan = framework_ops(FrameworkId::kTorchtitan);
  EXPECT_EQ(megatron.expert_gemm_streams, 4);
  EXPECT_EQ(titan.expert_gemm_streams, 0);
  struct Sum {
    int kernels = 0;
    int64_t batch = 0, max_batch = 0;
    double flops = 0, saved = 0;
  };
  auto sum = [](const std::vector<Op>& ops, const std::string& name) {
    Sum s;
    for (const Op& op : ops) {
      if (op.name != name) continue;
      ++s.kernels;
      s.batch += op.gemm()->batch;
      s.max_batch = std::max(s.max_batch, op.gemm()->batch);
      s.flops += op.flops.value();
      s.saved += static_cast<double>(op.saved.value());
    }
    return s;
  };
  for (const auto& [ep, local, kernels] : {std::tuple{8, 16, 4}, std::tuple{32, 4, 1}}) {
    const std::string n = std::to_string(ep);
    const Layout l = resolved(m, "tp=1,dp=" + n + ",ep=" + n, 4096, ep);
    auto meg = framework_layer_operators(m, l, 4096, 0, megatron);
    auto tt = framework_layer_operators(m, l, 4096, 0, titan);
    ASSERT_TRUE(meg.is_ok() && tt.is_ok());
    for (const char* name : {"moe.expert.fc1", "moe.expert.fc1.dgrad", "moe.expert.fc1.wgrad",
                             "moe.expert.down", "moe.expert.down.dgrad", "moe.expert.down.wgrad"}) {
      const Sum a = sum(*meg, name), b = sum(*tt, name);
      EXPECT_EQ(b.kernels, 1) << name;
      EXPECT_EQ(b.batch, local) << name;
      EXPECT_EQ(a.kernels, kernels) << name << " ep=" << ep;
      EXPECT_EQ(a.batch, local) << name;
      EXPECT_EQ(a.max_batch, std::min(local, 4)) << name;
      EXPECT_DOUBLE_EQ(a.flops, b.flops) << name;
      EXPECT_DOUBLE_EQ(a.saved, b.saved) << name;
    }
    // The shared and dense GEMMs are untouched.
    EXPECT_EQ(sum(*meg, "attn.qkv").kernels, 1);
  }
}

// Megatron-core's SequentialMLP (moe_grouped_gemm off; FrameworkOps::expert_gemm_streams = 1)
// calls each local expert's MLP in turn (core_v0.10.0 experts.py:795-801): Mixtral-8x7B at ep=2
// holds 8 / 2 = 4 local experts, so each expert GEMM becomes 4 kernels of one expert each, with
// the FLOPs of the grouped op between them and its stored bytes once; at ep=8 (one local expert)
// nothing changes.
TEST(Operators, SequentialMlpRunsOneExpertGemmAtATime) {
  const ModelSpec m = preset("mixtral-8x7b");
  FrameworkOps sequential = framework_ops(FrameworkId::kMegatron);
  sequential.expert_gemm_streams = 1;
  const FrameworkOps titan = framework_ops(FrameworkId::kTorchtitan);
  for (const auto& [ep, local] : {std::pair{2, 4}, std::pair{8, 1}}) {
    const std::string n = std::to_string(ep);
    const Layout l = resolved(m, "tp=1,dp=" + n + ",ep=" + n, 4096, ep);
    auto seq = framework_layer_operators(m, l, 4096, 0, sequential);
    auto grouped = framework_layer_operators(m, l, 4096, 0, titan);
    ASSERT_TRUE(seq.is_ok() && grouped.is_ok());
    for (const char* name : {"moe.expert.fc1", "moe.expert.fc1.dgrad", "moe.expert.fc1.wgrad",
                             "moe.expert.down", "moe.expert.down.dgrad", "moe.expert.down.wgrad"}) {
      int kernels = 0;
      double flops = 0, saved = 0, grouped_flops = 0, grouped_saved = 0;
      for (const Op& op : *seq) {
        if (op.name != name) continue;
        ++kernels;
        EXPECT_EQ(op.gemm()->batch, 1) << name;
        flops += op.flops.value();
        saved += static_cast<double>(op.saved.value());
      }
      for (const Op& op : *grouped) {
        if (op.name != name) continue;
        EXPECT_EQ(op.gemm()->batch, local) << name;
        grouped_flops += op.flops.value();
        grouped_saved += static_cast<double>(op.saved.value());
      }
      EXPECT_EQ(kernels, local) << name << " ep=" << ep;
      EXPECT_DOUBLE_EQ(flops, grouped_flops) << name;
      EXPECT_DOUBLE_EQ(saved, grouped_saved) << name;
    }
  }
}

// Megatron-core's eager kernels for gpt-oss (operators.h, add_megatron_layer_kernels). Its experts
// carry biases, which TEGroupedMLP adds after linear_fc2 per expert in eager PyTorch
// (experts.py:608-625 at core_r0.16.0): forward b*p (write 2 B), t + b*p (read 4, write 2) and
// the cat (read 2, write 2) per output element; backward grad*p and grad*b (read 2, write 2
// each) with their reductions (read 2 each) and the split's cat (read 2, write 2). Its YaRN
// rotary embedding (factor 32, no mscale pair) has the concentration factor 0.1·ln 32 + 1 ≈ 1.35,
// which sends apply_rotary_pos_emb down the eager path (rope_utils.py:279-284).
TEST(Operators, MegatronRunsGptOssExpertBiasAndYarnRopeEagerly) {
  ModelSpec m = preset("gpt-oss-120b");
  const int64_t s = 4096, h = 2880, rows = s * 4;  // mbs 1, top-4: balanced, rows per EP rank
  const int64_t rotated = s * (64 + 8) * 64;       // q and k: 64 + 8 heads of 64 channels
  const Layout l = resolved(m, "tp=1,dp=8,ep=8,mbs=1,gbs=8", s, 8);
  const FrameworkOps megatron = framework_ops(FrameworkId::kMegatron);
  const FrameworkOps titan = framework_ops(FrameworkId::kTorchtitan);
  auto ops = framework_layer_operators(m, l, s, 1, megatron);
  ASSERT_TRUE(ops.is_ok()) << ops.status().message();
  // The first (or last) op of that name and pass: 16 local experts make each expert GEMM 4
  // kernels (split_grouped_expert_gemms).
  auto index = [&](const std::string& name, Pass pass, bool last = false) {
    int64_t at = -1;
    for (size_t i = 0; i < ops->size(); ++i)
      if ((*ops)[i].name == name && (*ops)[i].pass == pass && (at < 0 || last))
        at = static_cast<int64_t>(i);
    return at;
  };
  auto bytes = [&](const std::string& name) {
    const Op* op = find(*ops, name);
    return op == nullptr ? int64_t{-1} : std::get<MemoryBoundShape>(op->shape).bytes.value();
  };
  EXPECT_EQ(bytes("moe.expert.bias"), (2 + 6 + 4) * rows * h);
  EXPECT_EQ(bytes("moe.expert.bias.bwd"), (6 + 6 + 4) * rows * h);
  // After the experts' output GEMM; its backward before that GEMM's first input-gradient kernel.
  EXPECT_EQ(index("moe.expert.bias", Pass::kForward),
            index("moe.expert.down", Pass::kForward, /*last=*/true) + 1);
  EXPECT_EQ(index("moe.expert.bias.bwd", Pass::kBackwardInput) + 1,
            index("moe.expert.down.dgrad", Pass::kBackwardInput));
  // The eager RoPE moves 24 B per rotated element forward and 26 B backward; the fused kernel
  // (attn.rope) 4 B each way, so the difference is 20 and 22.
  EXPECT_EQ(bytes("attn.rope"), 4 * rotated);
  EXPECT_EQ(bytes("attn.rope_unfused"), 20 * rotated);
  EXPECT_EQ(bytes("attn.rope_unfused.bwd"), 22 * rotated);
  EXPECT_EQ(index("attn.rope_unfused", Pass::kForward), index("attn.rope", Pass::kForward) + 1);
  // torchtitan runs neither; nothing is stored for them.
  auto tt = framework_layer_operators(m, l, s, 1, titan);
  ASSERT_TRUE(tt.is_ok());
  EXPECT_EQ(find(*tt, "moe.expert.bias"), nullptr);
  EXPECT_EQ(find(*tt, "attn.rope_unfused"), nullptr);
  EXPECT_EQ(find(*ops, "moe.expert.bias")->saved.value(), 0);
  // An mscale pair of equal values makes the factor 1: the fused kernel runs.
  m.rope.mscale = m.rope.mscale_all_dim = 1.0;
  auto paired = framework_layer_operators(m, l, s, 1, megatron);
  ASSERT_TRUE(paired.is_ok());
  EXPECT_EQ(find(*paired, "attn.rope_unfused"), nullptr);
  EXPECT_NE(find(*paired, "moe.expert.bias"), nullptr);
  // Experts without biases (Qwen3) and MLA's own rotary path (DeepSeek-V3) are left as they are.
  for (const char* name : {"qwen3-30b-a3b", "deepseek-v3"}) {
    const ModelSpec q = preset(name);
    auto qo = framework_layer_operators(q, resolved(q, "tp=1,dp=8,ep=8", s, 8), s, q.num_layers - 1,
                                        megatron);
    ASSERT_TRUE(qo.is_ok()) << name;
    EXPECT_EQ(find(*qo, "moe.expert.bias"), nullptr) << name;
    EXPECT_EQ(find(*qo, "attn.rope_unfused"), nullptr) << name;
  }
}

// Megatron-core core_r0.10.0's MoE layer (FrameworkOps::moe_core_r010), as dgxc's Grok-1 ran it:
// Mixtral-8x7B (8 experts, top-2, SwiGLU, h 4096, Grok-1's routing) at tp=4 with SP over seq 4096,
// mbs 1: T = 1,024 tokens per rank, T·E = 8,192 logits, R = 2,048 routed rows. Counted from
// core_r0.10.0 moe_utils.py / router.py / token_dispatcher.py (operators.h): 25 router kernels and
// one all-reduce of the 8 int64 counts over TP forward, 13 backward; the permute's index
// kernels; the unpermute's probability product over R·h (read 2, write 2 B) keeping the rows and
// the probabilities in place of the activation's fp32 ones, and no probabilities-gradient kernel
// in the activation's backward.
TEST(Operators, MegatronCoreR010RunsTheEagerRouterAndUnpermuteWithProbabilities) {
  const ModelSpec m = preset("mixtral-8x7b");
  const int64_t s = 4096, t = s / 4, e = 8, te = t * e, r = t * 2, h = 4096;
  const Layout l = resolved(m, "tp=4,dp=2,ep=8,mbs=1,gbs=8", s, 8);
  FrameworkOps fw = framework_ops(FrameworkId::kMegatron);
  auto r016 = framework_layer_operators(m, l, s, 0, fw);
  fw.moe_core_r010 = true;
  auto r010 = framework_layer_operators(m, l, s, 0, fw);
  ASSERT_TRUE(r016.is_ok() && r010.is_ok());
  auto count = [](const std::vector<Op>& ops, Pass pass, std::string_view prefix) {
    int n = 0;
    for (const Op& op : ops)
      if (op.pass == pass && op.name.starts_with(prefix) && op.gemm() == nullptr &&
          op.comm() == nullptr)
        ++n;
    return n;
  };
  EXPECT_EQ(count(*r016, Pass::kForward, "moe.router."), 0);
  EXPECT_EQ(count(*r010, Pass::kForward, "moe.router."), 25);
  EXPECT_EQ(count(*r010, Pass::kBackwardInput, "moe.router."), 13);
  const Op* ar = find(*r010, "moe.router.aux_counts_ar");
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ(ar->comm()->group, GroupKind::kTp);
  EXPECT_EQ(ar->comm()->bytes.value(), e * 8);
  auto bytes = [&](const std::string& name) {
    const Op* op = find(*r010, name);
    return op == nullptr ? int64_t{-1} : std::get<MemoryBoundShape>(op->shape).bytes.value();
  };
  // torch.topk over [T, 8] bf16 logits: reads them, writes R bf16 values and R int64 indices.
  EXPECT_EQ(bytes("moe.router.topk"), te * 2 + r * (2 + 8));
  // The aux loss's softmax in fp32 of the bf16 logits.
  EXPECT_EQ(bytes("moe.router.aux_softmax"), te * (2 + 4));
  // The dispatcher's permute: masked_select of the expanded token indices by the transposed map.
  EXPECT_EQ(bytes("moe.permute.select"), t * 8 + te + r * 8);
  EXPECT_EQ(bytes("moe.unpermute.probs"), r * h * 4);
  EXPECT_EQ(bytes("moe.unpermute.fill"), t * h * 2);
  EXPECT_EQ(bytes("moe.unpermute.probs.bwd"), r * h * 4);
  EXPECT_EQ(bytes("moe.unpermute.probs_grad"), r * h * 6);
  // Stored by the unpermute: the rows (bf16), their probabilities (bf16) and the transposed map.
  EXPECT_EQ(find(*r010, "moe.unpermute")->saved.value(), r * h * 2 + r * 2 + te);
  // core_r0.16.0 weights the rows in the activation and keeps fp32 probabilities per expert row.
  EXPECT_NE(find(*r016, "moe.expert.act.probs_grad"), nullptr);
  EXPECT_EQ(find(*r010, "moe.expert.act.probs_grad"), nullptr);
  // Order: the permute's kernels just before its index_select, the unpermute's product just
  // before its scatter_add_, the router's backward just before the router GEMM's input gradient.
  auto index = [&](const std::string& name, Pass pass) {
    for (size_t i = 0; i < r010->size(); ++i)
      if ((*r010)[i].name == name && (*r010)[i].pass == pass) return static_cast<int64_t>(i);
    return int64_t{-1};
  };
  EXPECT_EQ(index("moe.permute.select", Pass::kForward) + 1, index("moe.permute", Pass::kForward));
  EXPECT_EQ(index("moe.unpermute.fill", Pass::kForward) + 1,
            index("moe.unpermute", Pass::kForward));
  EXPECT_EQ(index("moe.unpermute.probs.bwd", Pass::kBackwardInput),
            index("moe.unpermute.bwd", Pass::kBackwardInput) + 1);
  EXPECT_EQ(index("moe.router.grad_sum", Pass::kBackwardInput) + 1,
            index("moe.router.dgrad", Pass::kBackwardInput));
}

// Megatron-core's router after its GEMM under Megatron-Bridge's options (operators.h,
// add_megatron_router_kernels). Qwen3-30B-A3B, seq 4096, mbs 1, tp 1: T = 4096 tokens route over
// E = 128 experts, te = 4096·128 elements of [T, E], each at the list's 4 B router width. With a
// load-balancing loss (router_aux_loss_coef 0.001), forward: RandomSTE's clone (read + write:
// 8 B per element) and normal_ (write: 4 B); the fused top-k (read the logits, write the probs,
// the 1-byte map and the score function's output: 13 B); the fused aux scores (13 B); the map's
// sum over tokens (1 B per element plus 128 int64 counts); the fused aux loss (reads the scores:
// 4 B); the tracker's division and add (scalars). Backward: the auto-scaler's ones_like and
// product (scalars), the aux loss's gradient (write 4 B), the aux scores' backward (read two,
// write one: 12 B), the top-k's backward (read map, output and gradient, write: 13 B) and the
// sum of the logits' two gradients (12 B). 8 kernels forward and 6 backward, storing nothing.
TEST(Operators, MegatronRouterRunsTransformerEnginesFusedKernels) {
  const ModelSpec m = preset("qwen3-30b-a3b");
  const int64_t s = 4096, te = s * 128;
  FrameworkOps fw = framework_ops(FrameworkId::kMegatron);
  const Layout l = resolved(m, "tp=1,dp=8,ep=8,mbs=1,gbs=8", s, 8);
  auto router_ops = [](const std::vector<Op>& ops, Pass pass) {
    std::vector<const Op*> out;
    for (const Op& op : ops)
      if (op.pass == pass && op.name.starts_with("moe.router.") && op.gemm() == nullptr)
        out.push_back(&op);
    return out;
  };
  // Megatron-LM's defaults: neither option, nothing added.
  auto plain = framework_layer_operators(m, l, s, 0, fw);
  ASSERT_TRUE(plain.is_ok()) << plain.status().message();
  EXPECT_TRUE(router_ops(*plain, Pass::kForward).empty());
  EXPECT_TRUE(router_ops(*plain, Pass::kBackwardInput).empty());
  fw.router_fusion = fw.router_force_balance = true;
  auto ops = framework_layer_operators(m, l, s, 0, fw);
  ASSERT_TRUE(ops.is_ok()) << ops.status().message();
  auto bytes = [](const Op* op) { return std::get<MemoryBoundShape>(op->shape).bytes.value(); };
  auto expect = [&](Pass pass, const std::vector<std::pair<std::string, int64_t>>& want) {
    const std::vector<const Op*> got = router_ops(*ops, pass);
    ASSERT_EQ(got.size(), want.size()) << to_string(pass);
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i]->name, want[i].first) << i;
      EXPECT_EQ(bytes(got[i]), want[i].second) << want[i].first;
      EXPECT_EQ(got[i]->saved.value(), 0) << want[i].first;
    }
  };
  expect(Pass::kForward, {{"moe.router.random_copy", 8 * te},
                          {"moe.router.random", 4 * te},
                          {"moe.router.topk", 13 * te},
                          {"moe.router.aux_scores", 13 * te},
                          {"moe.router.aux_counts", te + 128 * 8},
                          {"moe.router.aux_loss", 4 * te},
                          {"moe.router.aux_log", 16},
                          {"moe.router.aux_log", 16}});
  expect(Pass::kBackwardInput, {{"moe.router.aux_scale.bwd", 16},
                                {"moe.router.aux_scale.bwd", 16},
                                {"moe.router.aux_loss.bwd", 4 * te},
                                {"moe.router.aux_scores.bwd", 12 * te},
                                {"moe.router.topk.bwd", 13 * te},
                                {"moe.router.grad_sum", 12 * te}});
  // Right after the router GEMM, and just before its input gradient.
  auto index = [&](const std::string& name, Pass pass) {
    for (size_t i = 0; i < ops->size(); ++i)
      if ((*ops)[i].name == name && (*ops)[i].pass == pass) return static_cast<int64_t>(i);
    return int64_t{-1};
  };
  EXPECT_EQ(index("moe.router.random_copy", Pass::kForward),
            index("moe.router", Pass::kForward) + 1);
  EXPECT_EQ(index("moe.router.grad_sum", Pass::kBackwardInput) + 1,
            index("moe.router.dgrad", Pass::kBackwardInput));
  // Without a load-balancing loss (Megatron-Bridge's GPT-OSS), only the random logits and the
  // top-k: 3 kernels forward, 1 backward.
  ModelSpec free = m;
  free.moe->aux_loss_coeff = 0;
  auto no_aux = framework_layer_operators(free, l, s, 0, fw);
  ASSERT_TRUE(no_aux.is_ok());
  EXPECT_EQ(router_ops(*no_aux, Pass::kForward).size(), 3u);
  EXPECT_EQ(router_ops(*no_aux, Pass::kBackwardInput).size(), 1u);
  // Under tp 2 with SP each rank routes its 2048 tokens, and the expert counts are all-reduced
  // over the TP group: 128 int64, 1 KiB.
  const Layout l2 = resolved(m, "tp=2,dp=4,ep=8,mbs=1,gbs=8", s, 8);
  auto tp2 = framework_layer_operators(m, l2, s, 0, fw);
  ASSERT_TRUE(tp2.is_ok()) << tp2.status().message();
  const Op* ar = find(*tp2, "moe.router.aux_counts_ar");
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ(ar->comm()->group, GroupKind::kTp);
  EXPECT_EQ(ar->comm()->group_size, 2);
  EXPECT_EQ(ar->comm()->bytes.value(), 128 * 8);
  EXPECT_EQ(bytes(find(*tp2, "moe.router.topk")), 13 * (s / 2) * 128);
  // DeepSeek-V3 (sequence-level loss, sigmoid router with an expert bias) on a MoE layer: the
  // loss's "/ bsz" and its gradient add a scalar kernel each way, and the expert counts one
  // forward kernel over the 256 experts' map (1 B per element plus 256 fp32 counts).
  const ModelSpec d = preset("deepseek-v3");
  const Layout ld = resolved(d, "tp=1,dp=8,ep=8,mbs=1,gbs=8", s, 8);
  auto ds = framework_layer_operators(d, ld, s, d.num_layers - 1, fw);
  ASSERT_TRUE(ds.is_ok()) << ds.status().message();
  EXPECT_EQ(router_ops(*ds, Pass::kForward).size(), 10u);
  EXPECT_EQ(router_ops(*ds, Pass::kBackwardInput).size(), 7u);
  EXPECT_EQ(bytes(find(*ds, "moe.router.expert_counts")), s * 256 + 256 * 4);
  // Its dense first layers have no router.
  auto dense = framework_layer_operators(d, ld, s, 0, fw);
  ASSERT_TRUE(dense.is_ok());
  EXPECT_TRUE(router_ops(*dense, Pass::kForward).empty());
}

// GPT-OSS's clamped gated unit (swiglu_limit 7) under Megatron-core: weighted_bias_quick_geglu_impl
// clamps the halves of linear_fc1's output and concatenates them in eager PyTorch before the fused
// activation (fused_bias_geglu.py:424-432 at core_r0.16.0). Per element of fc1's output, forward:
// each clamp reads and writes its half (2 + 2 B), the cat reads and writes both (2 + 2 B): 8 B.
// Backward (clamp_backward; cat's backward is narrow views): the gate half's le (2 + 1 B) and
// where (1 + 2 + 2 B): 8 B; the linear half's ge and le (3 B each), logical_and_ (2 + 1 B) and
// where (5 B): 14 B; chunk's backward cats the two gradients (2 + 2 B): (8 + 14) / 2 + 4 = 15 B.
// One rank of ep 8 at mbs 1 holds 4,096 · 4 routed rows (balanced) of 2 · 2,880 fc1 outputs.
TEST(Operators, MegatronClampsGptOssGatedUnitEagerly) {
  const ModelSpec m = preset("gpt-oss-120b");
  ASSERT_GT(m.glu_clamp, 0);
  const int64_t s = 4096, rows = s * 4, fc1_out = rows * 2 * 2880;
  const FrameworkOps megatron = framework_ops(FrameworkId::kMegatron);
  auto list = [&](const std::string& layout, const FrameworkOps& fw) {
    auto ops = framework_layer_operators(m, resolved(m, layout, s, 8), s, 1, fw);
    EXPECT_TRUE(ops.is_ok()) << ops.status().message();
    return ops.is_ok() ? *ops : std::vector<Op>{};
  };
  const std::vector<Op> ops = list("tp=1,dp=8,ep=8,mbs=1,gbs=8", megatron);
  auto index = [](const std::vector<Op>& o, const std::string& name, Pass pass) {
    for (size_t i = 0; i < o.size(); ++i)
      if (o[i].name == name && o[i].pass == pass) return static_cast<int64_t>(i);
    return int64_t{-1};
  };
  auto bytes = [&](const std::vector<Op>& o, const std::string& name, Pass pass) {
    const int64_t i = index(o, name, pass);
    return i < 0 ? int64_t{-1}
                 : std::get<MemoryBoundShape>(o[static_cast<size_t>(i)].shape).bytes.value();
  };
  EXPECT_EQ(bytes(ops, "moe.expert.clamp", Pass::kForward), 8 * fc1_out);
  EXPECT_EQ(bytes(ops, "moe.expert.clamp.bwd", Pass::kBackwardInput), 15 * fc1_out);
  // Between fc1 and the fused activation; its backward between the activation's and fc1's.
  EXPECT_EQ(index(ops, "moe.expert.clamp", Pass::kForward) + 1,
            index(ops, "moe.expert.act", Pass::kForward));
  EXPECT_EQ(index(ops, "moe.expert.clamp.bwd", Pass::kBackwardInput),
            index(ops, "moe.expert.act.bwd", Pass::kBackwardInput) + 1);
  EXPECT_EQ(find(ops, "moe.expert.clamp")->saved.value(), 0);
  EXPECT_EQ(index(ops, "moe.expert.clamp", Pass::kRecompute), -1);
  // Inside the moe_act checkpoint it reruns with the activation, just before it.
  const std::vector<Op> rc =
      list("tp=1,dp=8,ep=8,mbs=1,gbs=8,recompute=selective,recompute_modules=moe_act", megatron);
  ASSERT_GE(index(rc, "moe.expert.act", Pass::kRecompute), 0);
  EXPECT_EQ(index(rc, "moe.expert.clamp", Pass::kRecompute) + 1,
            index(rc, "moe.expert.act", Pass::kRecompute));
  EXPECT_EQ(bytes(rc, "moe.expert.clamp", Pass::kRecompute), 8 * fc1_out);
  // Transformer Engine's op fuser fuses the clamp; torchtitan's list has none; nor has a model
  // without a clamp.
  FrameworkOps fused = megatron;
  fused.te_op_fuser = true;
  EXPECT_EQ(find(list("tp=1,dp=8,ep=8,mbs=1,gbs=8", fused), "moe.expert.clamp"), nullptr);
  EXPECT_NE(find(list("tp=1,dp=8,ep=8,mbs=1,gbs=8", fused), "moe.expert.bias"), nullptr);
  EXPECT_EQ(find(list("tp=1,dp=8,ep=8,mbs=1,gbs=8", framework_ops(FrameworkId::kTorchtitan)),
                 "moe.expert.clamp"),
            nullptr);
  const ModelSpec q = preset("qwen3-30b-a3b");
  auto qo = framework_layer_operators(q, resolved(q, "tp=1,dp=8,ep=8", s, 8), s, 0, megatron);
  ASSERT_TRUE(qo.is_ok());
  EXPECT_EQ(find(*qo, "moe.expert.clamp"), nullptr);
}

// The fused activation's bytes per element of its output in bf16, counted from what it reads
// and writes. Megatron-core's gated unit (bias_swiglu_impl -> SwiGLUFunction, core_r0.16.0
// megatron/core/fusions/fused_bias_swiglu.py:147-188, 209-236) runs swiglu_back (:54-69) as one
// Inductor kernel (jit_fuser is torch.compile on PyTorch >= 2.2, megatron/core/jit.py): it reads
// the output gradient g (2 B) and the saved input's halves y1, y2 (2 + 2 B) and writes
// cat(dy1, dy2) (2 + 2 B): 10 B, where the forward reads y1, y2 and writes silu(y1)·y2: 6 B.
// GeGLU's geglu_back (fused_bias_geglu.py:48-65) moves the same. A one-input GELU (GPT-3) reads x
// and writes y forward (4 B), reads g and x and writes dx backward (6 B).
TEST(Operators, GatedUnitsBackwardReadsThreeAndWritesTwo) {
  const FrameworkOps megatron = framework_ops(FrameworkId::kMegatron);
  const int64_t s = 4096;
  auto act = [&](const ModelSpec& m, const std::string& layout, int gpus, Pass pass) {
    auto ops = framework_layer_operators(m, resolved(m, layout, s, gpus), s, 0, megatron);
    EXPECT_TRUE(ops.is_ok()) << ops.status().message();
    if (!ops.is_ok()) return int64_t{-1};
    for (const Op& op : *ops)
      if (op.name == (pass == Pass::kForward ? "mlp.act" : "mlp.act.bwd") && op.pass == pass)
        return std::get<MemoryBoundShape>(op.shape).bytes.value();
    return int64_t{-1};
  };
  // Llama-3-8B (SwiGLU, FFN 14,336) at tp=2 with SP: 4,096 tokens after the all-gather, 7,168
  // FFN columns per rank.
  const ModelSpec llama = preset("llama3-8b");
  const int64_t swiglu = 4096 * 7168;
  EXPECT_EQ(act(llama, "tp=2,dp=1,mbs=1,gbs=1", 2, Pass::kForward), 6 * swiglu);
  EXPECT_EQ(act(llama, "tp=2,dp=1,mbs=1,gbs=1", 2, Pass::kBackwardInput), 10 * swiglu);
  // Gemma-2-9B (GeGLU, FFN 14,336) on one GPU.
  const ModelSpec gemma = preset("gemma2-9b");
  ASSERT_EQ(gemma.ffn_kind, FfnKind::kGeGlu);
  const int64_t geglu = 4096 * 14336;
  EXPECT_EQ(act(gemma, "tp=1,dp=1,mbs=1,gbs=1", 1, Pass::kForward), 6 * geglu);
  EXPECT_EQ(act(gemma, "tp=1,dp=1,mbs=1,gbs=1", 1, Pass::kBackwardInput), 10 * geglu);
  // GPT-3 175B (GELU, FFN 4 · 12,288) at tp=8: 6,144 FFN columns per rank.
  const ModelSpec gpt3 = preset("gpt3-175b");
  ASSERT_EQ(gpt3.ffn_kind, FfnKind::kGelu);
  const int64_t gelu = 4096 * 6144;
  EXPECT_EQ(act(gpt3, "tp=8,dp=1,mbs=1,gbs=1", 8, Pass::kForward), 4 * gelu);
  EXPECT_EQ(act(gpt3, "tp=8,dp=1,mbs=1,gbs=1", 8, Pass::kBackwardInput), 6 * gelu);
}

// Megatron-core's routed experts run the weighted gated unit (weighted_bias_swiglu_impl /
// weighted_bias_quick_geglu_impl, core_r0.16.0 experts.py:690-706), whose backward
// (weighted_swiglu_back, fused_bias_swiglu.py:89-97; weighted_quick_geglu_back,
// fused_bias_geglu.py:239-252) is compiled by torch.compile (megatron/core/jit.py: jit_fuser is
// torch.compile on PyTorch >= 2.2). Per element of the activation's output [rows, ffn] in bf16,
// the input gradient cat((dy1, dy2)) reads the output gradient (2 B) and both input halves
// (4 B) and writes both halves' gradients (4 B): 10 B. The probabilities' gradient
// sum(act(y) * g, -1) is a reduction over [rows, ffn] that Inductor cannot fuse with the
// [rows, 2·ffn] cat, so it reads y and g again: 6 B. The forward stays 6 B (y read, output
// written).
TEST(Operators, MegatronChargesTheWeightedGatedUnitsBackward) {
  const FrameworkOps megatron = framework_ops(FrameworkId::kMegatron);
  auto bytes = [](const std::vector<Op>& o, const std::string& name, Pass pass) {
    for (const Op& op : o)
      if (op.name == name && op.pass == pass)
        return std::get<MemoryBoundShape>(op.shape).bytes.value();
    return int64_t{-1};
  };
  const int64_t s = 4096;
  // Qwen3-30B-A3B: top-8 of 128 experts, expert FFN 768; EP 8: the rank's experts see all
  // s·8 routed rows of its EP group's tokens on average.
  const ModelSpec q = preset("qwen3-30b-a3b");
  auto qo = framework_layer_operators(q, resolved(q, "tp=1,dp=8,ep=8", s, 8), s, 0, megatron);
  ASSERT_TRUE(qo.is_ok()) << qo.status().message();
  const int64_t rows = s * 8, act = rows * 768;
  EXPECT_EQ(bytes(*qo, "moe.expert.act", Pass::kForward), 6 * act);
  EXPECT_EQ(bytes(*qo, "moe.expert.act.bwd", Pass::kBackwardInput), 10 * act);
  EXPECT_EQ(bytes(*qo, "moe.expert.act.probs_grad", Pass::kBackwardInput), 6 * act);
  // The same under torchtitan (its own activation) and under Transformer Engine's op fuser:
  // untouched.
  auto tt = framework_layer_operators(q, resolved(q, "tp=1,dp=8,ep=8", s, 8), s, 0,
                                      framework_ops(FrameworkId::kTorchtitan));
  ASSERT_TRUE(tt.is_ok());
  EXPECT_EQ(bytes(*tt, "moe.expert.act.probs_grad", Pass::kBackwardInput), -1);
  FrameworkOps fused = megatron;
  fused.te_op_fuser = true;
  auto fo = framework_layer_operators(q, resolved(q, "tp=1,dp=8,ep=8", s, 8), s, 0, fused);
  ASSERT_TRUE(fo.is_ok());
  EXPECT_EQ(bytes(*fo, "moe.expert.act.probs_grad", Pass::kBackwardInput), -1);
  // GeGLU experts: Megatron-core fuses only SwiGLU and quick-GEGLU (experts.py:689-710), so no
  // probabilities' gradient kernel; their activation keeps the list's gated backward, 10 B.
  ModelSpec geglu = q;
  geglu.ffn_kind = FfnKind::kGeGlu;
  auto go =
      framework_layer_operators(geglu, resolved(geglu, "tp=1,dp=8,ep=8", s, 8), s, 0, megatron);
  ASSERT_TRUE(go.is_ok()) << go.status().message();
  EXPECT_EQ(bytes(*go, "moe.expert.act.bwd", Pass::kBackwardInput), 10 * act);
  EXPECT_EQ(bytes(*go, "moe.expert.act.probs_grad", Pass::kBackwardInput), -1);
  // A dense layer of a MoE model (DeepSeek-V3's first three) has no routed experts.
  const ModelSpec d = preset("deepseek-v3");
  auto dense = framework_layer_operators(d, resolved(d, "tp=1,dp=64,ep=64", s, 64), s, 0, megatron);
  ASSERT_TRUE(dense.is_ok()) << dense.status().message();
  EXPECT_EQ(bytes(*dense, "moe.expert.act.probs_grad", Pass::kBackwardInput), -1);
}

// DeepEP's network share: a token whose top_k experts are spread evenly over N nodes reaches
// N(1 − (1 − 1/N)^k) of them, (N − 1)/N remote, once each; node-limited routing (the groups are
// the nodes) caps the nodes at topk_group. DeepSeek-V3 on 8 nodes (k = 8, 8 groups, 4 picked):
// 4·(1 − 0.75^8)·7/8 ≈ 3.15 node crossings per token instead of 8·(1 − 0.875^8)·7/8 ≈ 4.60, and
// the plain all-to-all's 8·7/8 = 7 copies.
TEST(Operators, DeepEpCrossesTheNetworkOncePerRemoteNode) {
  const double k = 8;
  EXPECT_NEAR(deepep_network_share(8, 8, 0, 0), 8 * (1 - std::pow(7.0 / 8, k)) * 7 / 8 / k, 1e-12);
  EXPECT_NEAR(deepep_network_share(8, 8, 8, 4), 4 * (1 - std::pow(3.0 / 4, k)) * 7 / 8 / k, 1e-12);
  EXPECT_NEAR(deepep_network_share(8, 8, 16, 4), deepep_network_share(8, 8, 0, 0), 1e-12);
  EXPECT_EQ(deepep_network_share(1, 8, 0, 0), 0);
  // Two nodes, top-8: nearly every token reaches the other node once: 1/8 of its copies.
  EXPECT_NEAR(deepep_network_share(2, 8, 0, 0), (1 - std::pow(0.5, k)) / k, 1e-12);
  // The operator list carries the routing to the dispatch and the combine, forward and backward.
  ModelSpec m = preset("deepseek-v3");
  ASSERT_TRUE(set_moe_dispatcher(m, "deepep").is_ok());
  const Layout l = resolved(m, "tp=1,pp=1,dp=64,ep=64,mbs=1,gbs=64", 4096, 64);
  auto ops = layer_operators(m, l, 4096, m.num_layers - 1);
  ASSERT_TRUE(ops.is_ok()) << ops.status().message();
  int carried = 0;
  for (const Op& op : *ops) {
    const CommShape* c = op.comm();
    if (c == nullptr || c->kind != CollectiveOp::kAllToAll) continue;
    EXPECT_EQ(c->dedup_top_k, 8) << op.name;
    EXPECT_EQ(c->route_groups, 8) << op.name;
    EXPECT_EQ(c->route_group_topk, 4) << op.name;
    ++carried;
  }
  EXPECT_EQ(carried, 4);  // dispatch and combine, forward and backward
  EXPECT_FALSE(set_moe_dispatcher(m, "nccl").is_ok());
  ModelSpec dense = preset("llama3-8b");
  EXPECT_FALSE(set_moe_dispatcher(dense, "deepep").is_ok());
}

// Shared experts read the same tensor as the router (the MoE block's normed input), which is
// stored once: against the same layer without them, a layer with shared experts keeps exactly
// their own activations, SwiGLU's gate and up (2 x width) and the down projection's input
// (width), width = tokens x shared FFN / tp, in bf16.
TEST(Operators, SharedExpertsStoreOnlyTheirOwnActivations) {
  const ModelSpec m = preset("deepseek-v3");
  ASSERT_GT(m.moe->num_shared_experts, 0);
  ModelSpec plain = m;
  plain.moe->num_shared_experts = 0;
  const Layout l = resolved(m, "tp=2,ep=8,dp=8,sp=on", 4096, 16);
  const int64_t layer = m.num_layers - 1;  // a MoE layer
  ASSERT_TRUE(m.is_moe_layer(layer));
  auto with = layer_operators(m, l, 4096, layer);
  auto without = layer_operators(plain, l, 4096, layer);
  ASSERT_TRUE(with.is_ok()) << with.status().message();
  ASSERT_TRUE(without.is_ok()) << without.status().message();
  const int64_t width =
      int64_t{4096} * m.moe->num_shared_experts * m.moe->shared_expert_ffn / 2;  // tp = 2
  EXPECT_EQ((total_saved(*with) - total_saved(*without)).value(), 3 * width * 2);
}

// Megatron-core's MultiTokenPredictionBlock chains D copies of one module: every module's forward
// runs before the loss and the backward passes run in reverse after it, so D modules are D times
// one module's operators with all forward passes first.
TEST(Operators, MtpModulesAreChainedCopiesOfOne) {
  ModelSpec m = preset("deepseek-v3");
  ASSERT_EQ(m.mtp_layers, 1);
  const Layout l = resolved(m, "tp=2,ep=8,dp=8,sp=on", 4096, 16);
  auto one = mtp_operators(m, l, 4096);
  m.mtp_layers = 3;
  auto three = mtp_operators(m, l, 4096);
  ASSERT_TRUE(one.is_ok()) << one.status().message();
  ASSERT_TRUE(three.is_ok()) << three.status().message();
  ASSERT_EQ(three->size(), 3 * one->size());
  auto names = [](const std::vector<Op>& ops, bool forward) {
    std::vector<std::string> out;
    for (const Op& op : ops)
      if ((op.pass == Pass::kForward) == forward) out.push_back(op.name);
    return out;
  };
  const auto fwd_one = names(*one, true), bwd_one = names(*one, false);
  const auto fwd_three = names(*three, true), bwd_three = names(*three, false);
  ASSERT_FALSE(fwd_one.empty());
  ASSERT_FALSE(bwd_one.empty());
  ASSERT_EQ(fwd_three.size(), 3 * fwd_one.size());
  for (size_t i = 0; i < fwd_three.size(); ++i)
    EXPECT_EQ((*three)[i].pass, Pass::kForward) << i << " " << (*three)[i].name;
  for (size_t k = 0; k < 3; ++k) {
    for (size_t i = 0; i < fwd_one.size(); ++i)
      EXPECT_EQ(fwd_three[k * fwd_one.size() + i], fwd_one[i]);
    for (size_t i = 0; i < bwd_one.size(); ++i)
      EXPECT_EQ(bwd_three[k * bwd_one.size() + i], bwd_one[i]);
  }
  EXPECT_EQ(total_saved(*three).value(), 3 * total_saved(*one).value());
}

// Megatron-core's MLA under TP: the down projections (q_a 7168->1536, kv_a 7168->512+64) are
// duplicated on every TP rank; with SP each runs on its 4096/2 = 2048-token shard and the latents
// (1536 + 576 wide) are gathered over TP instead of the 7168-wide hidden states, and re-gathered
// (1536 + 512, what the up projections read) for the weight gradients. Without SP the down
// projections run on all 4096 tokens on both ranks and the input gradient is all-reduced.
TEST(Operators, MlaGathersItsLatentsNotTheHiddenStatesUnderSp) {
  const ModelSpec m = preset("deepseek-v3");
  const Layout sp = resolved(m, "tp=2,ep=8,dp=8,sp=on", 4096, 16);
  auto ops = layer_operators(m, sp, 4096, 0);
  ASSERT_TRUE(ops.is_ok()) << ops.status().message();
  EXPECT_EQ(find(*ops, "attn.q_a")->gemm()->m, 2048);
  EXPECT_EQ(find(*ops, "attn.kv_a_with_mqa")->gemm()->m, 2048);
  EXPECT_EQ(find(*ops, "attn.q_b")->gemm()->m, 4096);
  EXPECT_EQ(find(*ops, "attn.sp_ag"), nullptr);  // no gather of the hidden states
  const Op* latent = find(*ops, "attn.sp_ag_latent");
  ASSERT_NE(latent, nullptr);
  EXPECT_EQ(latent->comm()->bytes.value(), int64_t{4096} * (1536 + 512 + 64) * 2);
  const Op* regather = find(*ops, "attn.sp_ag.wgrad");
  ASSERT_NE(regather, nullptr);
  EXPECT_EQ(regather->comm()->bytes.value(), int64_t{4096} * (1536 + 512) * 2);

  const Layout plain = resolved(m, "tp=2,ep=8,dp=8,sp=off", 4096, 16);
  auto no_sp = layer_operators(m, plain, 4096, 0);
  ASSERT_TRUE(no_sp.is_ok()) << no_sp.status().message();
  EXPECT_EQ(find(*no_sp, "attn.q_a")->gemm()->m, 4096);
  EXPECT_EQ(find(*no_sp, "attn.sp_ag_latent"), nullptr);
  EXPECT_NE(find(*no_sp, "attn.tp_ar.bwd"), nullptr);
}

TEST(Operators, ContextParallelRingAndBalancedWork) {
  // cp=4 on 8192 tokens: a rank holds 2048 queries; K/V pass around the ring in 3 steps; the
  // zig-zag split gives every rank 1/4 of the causal work of the whole sequence.
  const ModelSpec m = preset("llama3-8b");
  const Layout l = resolved(m, "tp=1,cp=4,dp=1", 8192, 4);
  const Layout l1 = resolved(m, "tp=1,dp=1", 8192, 1);
  auto ops = layer_operators(m, l, 8192, 0);
  auto ops1 = layer_operators(m, l1, 8192, 0);
  ASSERT_TRUE(ops.is_ok() && ops1.is_ok());
  const Op* ring = find(*ops, "attn.cp_kv");
  ASSERT_NE(ring, nullptr);
  EXPECT_EQ(ring->comm()->steps, 3);
  const double f4 = find(*ops, "attn.core")->flops.value();
  const double f1 = find(*ops1, "attn.core")->flops.value();
  EXPECT_NEAR(f4 / (f1 / 4), 1.0, 1e-3);
  // The ring runs beside the attention core it feeds, forward and backward (Transformer Engine's
  // AttnFuncWithCPAndKVP2P sends the next K/V chunk while computing on the current one): each
  // transfer is marked to run beside the op after it, and that op is the core. Before 2026-11-27
  // the forward ring ran beside the RoPE kernel before the core and was nearly all exposed.
  for (const char* name : {"attn.cp_kv", "attn.cp_kv.bwd"}) {
    const auto it =
        std::find_if(ops->begin(), ops->end(), [&](const Op& op) { return op.name == name; });
    ASSERT_NE(it, ops->end()) << name;
    ASSERT_NE(it + 1, ops->end()) << name;
    EXPECT_TRUE(it->comm()->overlap_next) << name;
    EXPECT_TRUE((it + 1)->attention() != nullptr) << name << " is followed by " << (it + 1)->name;
  }
}

// Transformer Engine's TP communication overlap (userbuffers, --tp-comm-overlap): every SP
// all-gather and reduce-scatter of the attention and MLP blocks runs beside the GEMM TE's default
// configuration pipelines it with (transformer_engine/pytorch/module/base.py initialize_ub,
// commit d0067d0: ring-exchange qkv_fprop, fc1_fprop, proj_dgrad, fc2_dgrad; pipelined proj_fprop,
// fc2_fprop; bulk qkv_dgrad/qkv_wgrad, fc1_dgrad/fc1_wgrad). The list keeps its ops (same bytes,
// FLOPs and stored activations) and only moves each collective just before its GEMM.
TEST(Operators, TpCommOverlapPairsEachCollectiveWithItsGemm) {
  const ModelSpec m = preset("llama3-8b");
  for (const char* text : {"tp=4,dp=1,mbs=1,gbs=1", "tp=4,dp=1,mbs=1,gbs=1,dtype=fp8",
                           "tp=4,dp=1,mbs=1,gbs=1,recompute=full"}) {
    SCOPED_TRACE(text);
    const Layout l = resolved(m, text, 4096, 4);
    auto plain = layer_operators(m, l, 4096, 0);
    ASSERT_TRUE(plain.is_ok());
    std::vector<Op> ops = *plain;
    apply_tp_comm_overlap(ops, m, l);
    ASSERT_EQ(ops.size(), plain->size());
    EXPECT_EQ(total_saved(ops).value(), total_saved(*plain).value());
    for (Pass p : {Pass::kForward, Pass::kBackwardInput, Pass::kBackwardWeight, Pass::kRecompute})
      EXPECT_EQ(total_flops(ops, p).value(), total_flops(*plain, p).value());
    // Collective -> the GEMM that follows it. Recompute reruns the forward's pairs.
    const std::map<std::string, std::string> partner = {{"attn.sp_ag", "attn.qkv"},
                                                        {"attn.sp_rs", "attn.o"},
                                                        {"mlp.sp_ag", "mlp.fc1"},
                                                        {"mlp.sp_rs", "mlp.down"},
                                                        {"mlp.sp_ag.bwd", "mlp.down.dgrad"},
                                                        {"attn.sp_ag.bwd", "attn.o.dgrad"},
                                                        {"mlp.sp_ag.wgrad", "mlp.fc1.dgrad"},
                                                        {"attn.sp_ag.wgrad", "attn.qkv.dgrad"},
                                                        {"mlp.sp_rs.bwd", "mlp.fc1.wgrad"},
                                                        {"attn.sp_rs.bwd", "attn.qkv.wgrad"}};
    int marked = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      const CommShape* c = ops[i].comm();
      if (c == nullptr || c->group != GroupKind::kTp) continue;
      ASSERT_TRUE(c->overlap_next) << ops[i].name;
      ASSERT_LT(i + 1, ops.size());
      const auto want = partner.find(ops[i].name);
      ASSERT_NE(want, partner.end()) << ops[i].name;
      EXPECT_EQ(ops[i + 1].name, want->second) << ops[i].name;
      // What the method takes from its GEMM (initialize_ub get_default_config; the recipes'
      // bulk presets): a ring exchange (the all-gathers before a GEMM's forward or dgrad) runs on
      // the copy engine, a pipelined reduce-scatter (forward) on 16 SMs its GEMM is launched
      // without, a bulk overlap (the backward's .wgrad / .bwd pairs) shares the SMs.
      const bool bulk = ops[i].name.ends_with(".wgrad") || ops[i].name == "attn.sp_rs.bwd" ||
                        ops[i].name == "mlp.sp_rs.bwd";
      const bool pipeline = !bulk && c->kind == CollectiveOp::kReduceScatter;
      EXPECT_EQ(c->spares_compute, !bulk) << ops[i].name;
      ASSERT_NE(ops[i + 1].gemm(), nullptr) << ops[i].name;
      EXPECT_EQ(ops[i + 1].gemm()->sm_margin, pipeline ? 16 : 0) << ops[i].name;
      ++marked;
    }
    // No other GEMM loses SMs.
    int margined = 0;
    for (const Op& op : ops) margined += op.gemm() != nullptr && op.gemm()->sm_margin > 0;
    EXPECT_EQ(margined, std::string(text).find("full") != std::string::npos ? 4 : 2);
    EXPECT_EQ(marked, std::string(text).find("full") != std::string::npos ? 14 : 10);
  }
  // Without SP (TE's userbuffers need it), at tp = 1 and for MLA nothing changes.
  const Layout no_sp = resolved(m, "tp=4,dp=1,mbs=1,gbs=1,sp=off", 4096, 4);
  auto ops = *layer_operators(m, no_sp, 4096, 0);
  apply_tp_comm_overlap(ops, m, no_sp);
  for (const Op& op : ops) EXPECT_FALSE(op.comm() != nullptr && op.comm()->overlap_next);
}

// A recipe's userbuffers preset in place of TE's defaults (models/ub_presets.h). NeMo 2.2's
// 405B H100 bf16 preset (userbuffers.py:132-143): ring exchange with aggregate=True, so the
// forward all-gathers' GEMMs run as tp/2 = 4 GEMMs of two chunks (TE split_overlap_ag's
// aggregate loop of _tp_size / 2 steps); proj_fprop pipelined on num_sm 24 and fc2_fprop on 8,
// both with set_sm_margin, so attn.o loses 24 SMs and mlp.down 8; bulk qkv/fc1 dgrad/wgrad with
// set_sm_margin False: whole, every SM, sharing them. Megatron-Bridge v0.3.0's fp8 H100 preset
// (comm_overlap.py:108-119) runs proj/fc2 fprop as a ring exchange with num_sm 1 and
// set_sm_margin True: tp chunks, one SM lost, the transfer on the copy engine (it spares
// compute), and one reduction of the tp partial outputs after the GEMM, which reads the
// unreduced buffer (the reduce-scatter's bytes) and writes 1/tp of it.
TEST(Operators, TpCommOverlapRunsEachGemmAsTheRecipesPresetSays) {
  const ModelSpec m = preset("llama3-8b");
  const Layout l = resolved(m, "tp=8,dp=1,mbs=1,gbs=1", 4096, 8);
  auto plain = layer_operators(m, l, 4096, 0);
  ASSERT_TRUE(plain.is_ok());
  auto next_of = [](const std::vector<Op>& ops, const std::string& name, Pass pass) {
    for (size_t i = 0; i + 1 < ops.size(); ++i)
      if (ops[i].name == name && ops[i].pass == pass) return i;
    return ops.size();
  };
  const UbPreset* nemo =
      find_ub_preset("nemo-2.2/userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192");
  ASSERT_NE(nemo, nullptr);
  std::vector<Op> ops = *plain;
  apply_tp_comm_overlap(ops, m, l, *nemo);
  ASSERT_EQ(ops.size(), plain->size());  // no ring-exchange reduce-scatter: nothing added
  struct Want {
    const char* comm;
    Pass pass;
    const char* gemm;
    int chunks, margin;
    bool spares;
  };
  const Want nemo_want[] = {
      {"attn.sp_ag", Pass::kForward, "attn.qkv", 4, 0, true},
      {"mlp.sp_ag", Pass::kForward, "mlp.fc1", 4, 0, true},
      {"attn.sp_rs", Pass::kForward, "attn.o", 4, 24, true},
      {"mlp.sp_rs", Pass::kForward, "mlp.down", 4, 8, true},
      {"attn.sp_ag.bwd", Pass::kBackwardInput, "attn.o.dgrad", 4, 0, true},
      {"attn.sp_ag.wgrad", Pass::kBackwardWeight, "attn.qkv.dgrad", 1, 0, false},
  };
  for (const Want& w : nemo_want) {
    const size_t i = next_of(ops, w.comm, w.pass);
    ASSERT_LT(i, ops.size()) << w.comm;
    EXPECT_EQ(ops[i + 1].name, w.gemm) << w.comm;
    EXPECT_EQ(ops[i].comm()->partner_chunks, w.chunks) << w.comm;
    EXPECT_EQ(ops[i].comm()->spares_compute, w.spares) << w.comm;
    ASSERT_NE(ops[i + 1].gemm(), nullptr) << w.comm;
    EXPECT_EQ(ops[i + 1].gemm()->sm_margin, w.margin) << w.comm;
  }

  const UbPreset* bridge =
      find_ub_preset("mbridge-0.3/userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192");
  ASSERT_NE(bridge, nullptr);
  ops = *plain;
  apply_tp_comm_overlap(ops, m, l, *bridge);
  // Two forward reduce-scatters, each followed by its GEMM and then the reduction.
  ASSERT_EQ(ops.size(), plain->size() + 2);
  using Pair = std::pair<const char*, const char*>;
  for (const auto& [rs, gemm] : {Pair{"attn.sp_rs", "attn.o"}, Pair{"mlp.sp_rs", "mlp.down"}}) {
    const size_t i = next_of(ops, rs, Pass::kForward);
    ASSERT_LT(i + 2, ops.size()) << rs;
    const CommShape& c = *ops[i].comm();
    EXPECT_TRUE(c.spares_compute) << rs;
    EXPECT_EQ(c.partner_chunks, 8) << rs;  // tp, not the pipeline's 4
    EXPECT_EQ(ops[i + 1].name, gemm) << rs;
    EXPECT_EQ(ops[i + 1].gemm()->sm_margin, 1) << rs;
    EXPECT_EQ(ops[i + 2].name, std::string(gemm) + ".ub_reduce") << rs;
    const auto* red = std::get_if<MemoryBoundShape>(&ops[i + 2].shape);
    ASSERT_NE(red, nullptr) << rs;
    EXPECT_EQ(red->op, MemOp::kAdd);
    EXPECT_EQ(red->bytes.value(), c.bytes.value() + c.bytes.value() / 8) << rs;
    EXPECT_EQ(ops[i + 2].saved.value(), 0) << rs;
  }
  // Its all-gathers do not aggregate: tp chunks.
  EXPECT_EQ(ops[next_of(ops, "attn.sp_ag", Pass::kForward)].comm()->partner_chunks, 8);
}

// TE's defaults as the table holds them (transformer_engine/pytorch/module/base.py:350-396 at
// d0067d0, get_default_config): ring exchange num_sm 1 without margin for the four all-gathers,
// pipeline num_sm 16 with margin and 4 splits for proj/fc2 fprop, bulk num_sm 16 (its margin
// kept False: docs/simulator.md). Every row names a source with a line.
TEST(UbPresets, TheTableHoldsTesDefaultsAndASourcePerRow) {
  const UbPreset& d = te_default_ub_preset();
  for (UbGemm g : {UbGemm::kQkvFprop, UbGemm::kFc1Fprop, UbGemm::kProjDgrad, UbGemm::kFc2Dgrad}) {
    EXPECT_EQ(d[g].method, UbMethod::kRingExchange) << to_string(g);
    EXPECT_EQ(d[g].num_sm, 1);
    EXPECT_FALSE(d[g].set_sm_margin);
  }
  for (UbGemm g : {UbGemm::kProjFprop, UbGemm::kFc2Fprop}) {
    EXPECT_EQ(d[g].method, UbMethod::kPipeline) << to_string(g);
    EXPECT_EQ(d[g].num_sm, 16);
    EXPECT_TRUE(d[g].set_sm_margin);
    EXPECT_EQ(d[g].num_splits, 4);
  }
  for (UbGemm g : {UbGemm::kQkvDgrad, UbGemm::kFc1Dgrad, UbGemm::kQkvWgrad, UbGemm::kFc1Wgrad})
    EXPECT_EQ(d[g].method, UbMethod::kBulk) << to_string(g);
  for (const UbPreset& p : ub_presets()) {
    EXPECT_EQ(find_ub_preset(p.name), &p);
    EXPECT_NE(p.source.find(':'), std::string_view::npos) << p.name;
    for (const UbGemmConfig& c : p.gemms) EXPECT_FALSE(c.atomic_gemm) << p.name;
  }
  EXPECT_EQ(find_ub_preset("userbuffers_no_such_preset"), nullptr);
}

// The other K/V exchanges of context parallelism (Megatron-core --cp-comm-type), llama3-8b
// (32 heads, 8 KV heads of 128), cp=4, 8192 tokens, 2048 per rank. all_gather: K and V of every
// rank gathered before the attention (4 x the rank's 2048·8·256·2 B), gathered again before its
// backward and their gradients reduce-scattered, no ring; the same zig-zag work. a2a (Ulysses):
// Q, K, V all-to-all'd into 8 query and 2 KV heads of the whole sequence, the output back; the
// attention is the whole sequence's causal square on a quarter of the heads, the same work, and
// stores the same bytes.
TEST(Operators, ContextParallelAllGatherAndUlysses) {
  const ModelSpec m = preset("llama3-8b");
  auto ops_of = [&](const std::string& comm) {
    auto ops = layer_operators(m, resolved(m, "tp=1,cp=4,dp=1,cp_comm=" + comm, 8192, 4), 8192, 0);
    EXPECT_TRUE(ops.is_ok()) << ops.status().message();
    return *ops;
  };
  const auto ring = ops_of("p2p"), ag = ops_of("all_gather"), a2a = ops_of("a2a");
  const int64_t kv_chunk = int64_t{2048} * 8 * 256 * 2, q = int64_t{2048} * 32 * 128 * 2;
  EXPECT_EQ(find(ag, "attn.cp_kv"), nullptr);
  EXPECT_EQ(find(ag, "attn.cp_ag")->comm()->bytes.value(), 4 * kv_chunk);
  EXPECT_EQ(find(ag, "attn.cp_ag.bwd")->comm()->bytes.value(), 4 * kv_chunk);
  EXPECT_EQ(find(ag, "attn.cp_rs.bwd")->comm()->kind, CollectiveOp::kReduceScatter);
  EXPECT_EQ(find(a2a, "attn.cp_kv"), nullptr);
  EXPECT_EQ(find(a2a, "attn.cp_a2a_qkv")->comm()->bytes.value(), q + kv_chunk);
  EXPECT_EQ(find(a2a, "attn.cp_a2a_o")->comm()->bytes.value(), q);  // O: 32 heads of 128
  EXPECT_EQ(find(a2a, "attn.cp_a2a_o")->comm()->kind, CollectiveOp::kAllToAll);
  const AttentionShape& u = *find(a2a, "attn.core")->attention();
  EXPECT_EQ(u.heads, 8);
  EXPECT_EQ(u.kv_heads, 2);
  EXPECT_EQ(u.q_len, 8192);
  EXPECT_EQ(u.kv_len, 8192);
  const double work = find(ring, "attn.core")->flops.value();
  EXPECT_NEAR(find(ag, "attn.core")->flops.value() / work, 1.0, 1e-9);
  EXPECT_NEAR(find(a2a, "attn.core")->flops.value() / work, 1.0, 1e-3);
  EXPECT_EQ(total_saved(a2a).value(), total_saved(ring).value());
  EXPECT_EQ(total_saved(ag).value(), total_saved(ring).value());
}

TEST(Operators, RecomputeModesRerunForwardOps) {
  const ModelSpec m = preset("llama3-8b");
  auto count = [&](const std::string& layout) {
    const Layout l = resolved(m, layout, 2048, 1);
    auto ops = layer_operators(m, l, 2048, 0);
    int n = 0;
    for (const Op& op : *ops) n += op.pass == Pass::kRecompute ? 1 : 0;
    return n;
  };
  EXPECT_EQ(count("dp=1,recompute=none"), 0);
  EXPECT_EQ(count("dp=1,recompute=selective"), 1);  // the attention core
  EXPECT_GT(count("dp=1,recompute=full"), 8);       // the whole forward
}

// Each recompute module frees what Megatron-core's --recompute-modules frees, derived from the
// shapes, and reruns its forward ops before the backward. DeepSeek-V3 (h 7168, 128 heads, MLA q
// 192 = 128 + 64 rope / v 128, 256 experts of FFN 2048 top-8, one shared expert of 2048, first 3
// layers dense with FFN 18432), tp = 2 with SP, ep = 8, s = 4096, mbs 1: T = 4096 tokens, a
// 2048-token sequence shard, 64 heads per rank.
TEST(Operators, RecomputeModulesFreeWhatTheyRecompute) {
  const ModelSpec m = preset("deepseek-v3");
  const std::string base = "tp=2,ep=8,dp=8,sp=on,recompute=selective";
  auto saved = [&](const std::string& modules, int64_t layer, int* reruns = nullptr,
                   std::vector<std::string>* names = nullptr) {
    const std::string text = base + (modules.empty() ? "" : ",recompute_modules=" + modules);
    const Layout l = resolved(m, text, 4096, 16);
    auto ops = layer_operators(m, l, 4096, layer);
    EXPECT_TRUE(ops.is_ok()) << ops.status().message();
    if (reruns) *reruns = 0;
    for (const Op& op : *ops) {
      if (op.pass != Pass::kRecompute) continue;
      if (reruns) ++*reruns;
      if (names) names->push_back(op.name);
    }
    return total_saved(*ops).value();
  };
  const int64_t moe = m.num_layers - 1, dense = 0;
  ASSERT_TRUE(m.is_moe_layer(moe));
  ASSERT_FALSE(m.is_moe_layer(dense));
  int core = 0;
  const int64_t attn_only = saved("", moe, &core);
  EXPECT_EQ(core, 1);  // the default: the attention core alone
  EXPECT_EQ(saved("core_attn", moe), attn_only);
  // layernorm: both pre-norms' outputs, 2048 x 7168 x 2 B each.
  std::vector<std::string> names;
  EXPECT_EQ(attn_only - saved("core_attn+layernorm", moe, nullptr, &names),
            2 * int64_t{2048} * 7168 * 2);
  EXPECT_NE(std::find(names.begin(), names.end(), "attn.norm"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "mlp.norm"), names.end());
  // moe_act: the experts' activation output, the down projection's input: the 2048-token shard
  // x top-8 = 16384 token copies come back to this EP rank (balanced), x 2048 x 2 B.
  EXPECT_EQ(attn_only - saved("core_attn+moe_act", moe), int64_t{16384} * 2048 * 2);
  // mla_up_proj: Q (64 heads x 192) and K, V (64 heads x (192 + 128)) for 4096 tokens, 2 B.
  EXPECT_EQ(attn_only - saved("core_attn+mla_up_proj", moe),
            int64_t{4096} * 64 * (192 + 192 + 128) * 2);
  // shared_experts: its gate and up (2 x 4096 x 1024 on this TP rank) and the down projection's
  // input (4096 x 1024), 2 B; its input is the router's and stays.
  EXPECT_EQ(attn_only - saved("core_attn+shared_experts", moe), int64_t{3} * 4096 * 1024 * 2);
  // mlp on a dense layer: FFN 18432 / 2 per rank, likewise.
  EXPECT_EQ(saved("", dense) - saved("core_attn+mlp", dense), int64_t{3} * 4096 * 9216 * 2);
  // moe: the whole block but its input: the router's fp32 probabilities (2048 x 256 x 4 B),
  // the 16384 dispatched token copies (x 7168), the experts' gate and up and down input
  // (16384 x 3 x 2048) and the shared experts' intermediates (4096 x 3 x 1024), 2 B each, and the
  // per-copy probabilities the experts' scaled activation keeps (16384 x 4 B; Megatron-core
  // weights the copies there, so the weighted sum keeps no expert outputs).
  EXPECT_EQ(attn_only - saved("core_attn+moe", moe),
            int64_t{2048} * 256 * 4 + int64_t{16384} * 4 +
                2 * (int64_t{16384} * 7168 + int64_t{16384} * 3 * 2048 + int64_t{4096} * 3 * 1024));
  // Without the attention core the LSE stays stored: 4096 x 64 heads x 4 B more.
  EXPECT_EQ(saved("layernorm", moe) - saved("core_attn+layernorm", moe), int64_t{4096} * 64 * 4);
}

TEST(Operators, BadLayoutNamesTheDimension) {
  const ModelSpec m = preset("llama3-8b");
  Layout l;
  l.tp = 3;
  l.dp = 1;
  l.gbs = 1;
  auto ops = layer_operators(m, l, 2048, 0);
  ASSERT_FALSE(ops.is_ok());
  EXPECT_NE(ops.status().message().find("num_attention_heads"), std::string::npos);
}

}  // namespace
}  // namespace scaleplan::models

namespace scaleplan::models {
namespace {

int64_t mem_bytes(const std::vector<Op>& ops, const std::string& name) {
  const Op* op = find(ops, name);
  EXPECT_NE(op, nullptr) << name;
  return op ? std::get<MemoryBoundShape>(op->shape).bytes.value() : -1;
}

TEST(Operators, NanotronKernelsBytes) {
  // Llama-3-8B (h 4096, 32 q heads and 8 KV heads of 128, FFN 14336), tp=2, mbs=2, s=1024:
  // T = 2048 tokens, local q width 2048, k = v width 512, FFN width 7168.
  const ModelSpec m = preset("llama3-8b");
  const Layout l = resolved(m, "tp=2,pp=1,mbs=2,gbs=2,sp=on", 1024, 2);
  auto ops = layer_operators(m, l, 1024, 0);
  ASSERT_TRUE(ops.is_ok());
  ASSERT_TRUE(add_nanotron_layer_kernels(*ops, m, l, 1024).is_ok());
  // qkv permute copy 2·T·(2048 + 2·512)·2 = 25,165,824; K/V cat + permute 4·T·(2·512)·2 =
  // 16,777,216.
  EXPECT_EQ(mem_bytes(*ops, "attn.qkv_layout"), 25'165'824 + 16'777'216);
  EXPECT_EQ(mem_bytes(*ops, "attn.qkv_layout.bwd"), 25'165'824 + 16'777'216);
  // mbs > 1: the transposed attention output copied, 2·T·2048·2 = 16,777,216.
  EXPECT_EQ(mem_bytes(*ops, "attn.out_layout"), 16'777'216);
  // GLU: width T·7168 = 14,680,064 elements. GLUActivation's eager kernels, per element in
  // bf16: forward SiLU (read gate, write: 4 B) and the product (read two, write one: 6 B), 10 B;
  // backward the product's two gradients (read the gradient and the other factor, write: 2 × 6 B),
  // SiLU's (read the gradient and the gate, write: 6 B) and split's backward, a cat of the two
  // halves (read 4, write 4 B): 26 B. The list's fused activation and these kernels together.
  const int64_t f = 14'680'064;
  EXPECT_EQ(mem_bytes(*ops, "mlp.act") + mem_bytes(*ops, "mlp.glu_unfused"), 10 * f);
  EXPECT_EQ(mem_bytes(*ops, "mlp.act.bwd") + mem_bytes(*ops, "mlp.glu_unfused.bwd"),
            (2 * 6 + 6 + 8) * f);

  // Head: vocab 128,256 / 2 = 64,128 per rank; logits T·64,128 = 131,334,144. Cross entropy
  // beyond loss.ce: 16 B per logit forward, 4 B backward.
  auto head = head_operators(m, l, 1024);
  ASSERT_TRUE(head.is_ok());
  ASSERT_TRUE(add_nanotron_head_kernels(*head, m, l, 1024).is_ok());
  EXPECT_EQ(mem_bytes(*head, "loss.ce_unfused"), 16 * int64_t{131'334'144});
  EXPECT_EQ(mem_bytes(*head, "loss.ce_unfused.bwd"), 4 * int64_t{131'334'144});
}

// The gradient accumulation kernel of a framework without accumulation fusion: one elementwise
// pass over the micro-batch's weight gradients, after them.
TEST(Operators, GradAccumulationMovesItsBytesPerParameter) {
  // Llama-3-8B layer at tp=2: q 2048·4096 + k, v 2·512·4096 + o 4096·2048 + gate, up
  // 2·7168·4096 + down 4096·7168 + norms 2·4096 = 109,060,096 local parameters; nanotron's fp32
  // accumulator moves 10 B each (read fp32 4 + bf16 2, write fp32 4).
  const Op op = grad_accumulation(109'060'096, 10);
  EXPECT_EQ(op.name, "grad_accum");
  EXPECT_EQ(op.pass, Pass::kBackwardWeight);
  EXPECT_EQ(op.kind, OpKind::kMemoryBound);
  EXPECT_EQ(std::get<MemoryBoundShape>(op.shape).bytes.value(), 10 * int64_t{109'060'096});
}

TEST(Operators, TorchtitanMoeLayerRunsItsEagerKernels) {
  // Qwen3-30B-A3B (h 2048, 128 experts of FFN 768, top 8), tp=1, dp=8, ep=8, mbs=1, s=4096:
  // T = 4096 tokens, N = 8·T = 32,768 routed copies, 16 local experts receiving N rows when
  // balanced. torchtitan b5bcd76c6 (models/common/moe.py, token_dispatcher.py).
  const ModelSpec m = preset("qwen3-30b-a3b");
  const int64_t s = 4096;
  const Layout l = resolved(m, "tp=1,pp=1,dp=8,ep=8,mbs=1,gbs=8", s, 8);
  auto ops = framework_layer_operators(m, l, s, 0, framework_ops(FrameworkId::kTorchtitan));
  ASSERT_TRUE(ops.is_ok());
  const int64_t t = 4096, h = 2048, e = 128, k = 8, n = t * k, f = n * 768;
  // GroupedExperts: F.silu(grouped_mm(x, w1)) * grouped_mm(x, w3): SiLU (read, write: 4 B per
  // element of the activation's output) and the product (read two, write one: 6 B) forward;
  // backward the product's two gradients (2 × 6 B) and SiLU's (read gradient and input, write:
  // 6 B). The list's fused unit moves 6 and 10.
  EXPECT_EQ(mem_bytes(*ops, "moe.expert.act") + mem_bytes(*ops, "moe.expert.swiglu_unfused"),
            10 * f);
  EXPECT_EQ(
      mem_bytes(*ops, "moe.expert.act.bwd") + mem_bytes(*ops, "moe.expert.swiglu_unfused.bwd"),
      18 * f);
  // The router: the gate's bf16 input cast to fp32 by autocast(float32) (read 2, write 4 B per
  // T·h element) and the fp32 gradient back (4 + 2); over the fp32 [T, E] scores: softmax (read,
  // write: 8 B; backward reads output and gradient, writes: 12 B), the load-balancing bias
  // (8 B), topk (reads 4 B; writes K fp32 values and int64 indices per token), the one-hot map
  // and its sum over tokens (bool: 1 + 1 B); the gather's backward zero-fills the fp32 [T, E]
  // gradient (4 B).
  EXPECT_EQ(mem_bytes(*ops, "moe.router.to_fp32"), 6 * t * h);
  EXPECT_EQ(find(*ops, "moe.router.to_fp32")->saved.value(), (4 - 2) * t * h);
  EXPECT_EQ(mem_bytes(*ops, "moe.router.to_fp32.bwd"), 6 * t * h);
  EXPECT_EQ(mem_bytes(*ops, "moe.router.scores"), 8 * t * e);
  EXPECT_EQ(mem_bytes(*ops, "moe.router.scores.bwd"), 12 * t * e);
  EXPECT_EQ(mem_bytes(*ops, "moe.router.bias"), 8 * t * e);
  EXPECT_EQ(mem_bytes(*ops, "moe.router.topk"), 4 * t * e + t * k * (4 + 8));
  EXPECT_EQ(mem_bytes(*ops, "moe.router.counts"), 2 * t * e);
  EXPECT_EQ(mem_bytes(*ops, "moe.router.gather.bwd"), 4 * t * e);
  // combine: zeros_like(x) (2 B per T·h), routed.to(float32) (2 + 4 B per N·h), the product
  // with the broadcast scores (4 + 4 B), .to(bf16) (4 + 2 B); the product keeps its fp32
  // operand (4 B per N·h). Backward 6 + 8 + 12 + 4 + 6 B per N·h.
  EXPECT_EQ(mem_bytes(*ops, "moe.combine.zeros"), 2 * t * h);
  EXPECT_EQ(mem_bytes(*ops, "moe.combine.to_fp32"), 6 * n * h);
  EXPECT_EQ(mem_bytes(*ops, "moe.combine.score"), 8 * n * h);
  EXPECT_EQ(find(*ops, "moe.combine.score")->saved.value(), 4 * n * h);
  EXPECT_EQ(mem_bytes(*ops, "moe.combine.to_bf16"), 6 * n * h);
  // The deterministic scatter_add: out-of-place, it copies out (2 + 2 B per T·h), then one
  // index_put_(accumulate=True) reads the N rows (2 B) and reads and writes each of the T
  // destination rows once (4 B).
  EXPECT_EQ(mem_bytes(*ops, "moe.combine.out_copy"), 4 * t * h);
  EXPECT_EQ(mem_bytes(*ops, "moe.unpermute"), 2 * n * h + 4 * t * h);
  // The gathers' backward: a zero-filled gradient (2 B per source element), then the same
  // accumulating index_put_: x[token_indices] gathers each of the T tokens K times; under EP the
  // received rows' regrouping (moe.sort) is a permutation of the N rows received (balanced).
  EXPECT_EQ(mem_bytes(*ops, "moe.permute.grad_fill"), 2 * t * h);
  EXPECT_EQ(mem_bytes(*ops, "moe.permute.bwd"), 2 * n * h + 4 * t * h);
  EXPECT_EQ(mem_bytes(*ops, "moe.sort.grad_fill"), 2 * n * h);
  EXPECT_EQ(mem_bytes(*ops, "moe.sort.bwd"), (2 + 4) * n * h);
  int64_t combine_bwd = 0;
  for (const char* name :
       {"moe.combine.to_bf16.bwd", "moe.combine.score.bwd", "moe.combine.score_grad.bwd",
        "moe.combine.score_sum.bwd", "moe.combine.to_fp32.bwd"})
    combine_bwd += mem_bytes(*ops, name);
  EXPECT_EQ(combine_bwd, (6 + 8 + 12 + 4 + 6) * n * h);
  // In the order they run: the cast before the gate, the routing after it; the weighting
  // before the scatter (the list's unpermute) and its backward after the scatter's gather.
  auto at = [&](const std::string& name, Pass pass) {
    for (size_t i = 0; i < ops->size(); ++i)
      if ((*ops)[i].name == name && (*ops)[i].pass == pass) return static_cast<int64_t>(i);
    return int64_t{-1};
  };
  const Pass fw = Pass::kForward, bw = Pass::kBackwardInput;
  EXPECT_EQ(at("moe.router.to_fp32", fw) + 1, at("moe.router", fw));
  EXPECT_EQ(at("moe.router", fw) + 1, at("moe.router.scores", fw));
  EXPECT_EQ(at("moe.router.topk", fw) + 1, at("moe.router.counts", fw));
  EXPECT_EQ(at("moe.combine.out_copy", fw) + 1, at("moe.unpermute", fw));
  EXPECT_EQ(at("moe.combine.zeros", fw) + 3, at("moe.combine.to_bf16", fw));
  EXPECT_EQ(at("moe.unpermute.bwd", bw) + 1, at("moe.combine.to_bf16.bwd", bw));
  EXPECT_EQ(at("moe.permute.grad_fill", bw) + 1, at("moe.permute.bwd", bw));
  EXPECT_EQ(at("moe.combine.to_bf16.bwd", bw) + 4, at("moe.combine.to_fp32.bwd", bw));
  EXPECT_EQ(at("moe.router.scores.bwd", bw) + 1, at("moe.router.dgrad", bw));
  EXPECT_EQ(at("moe.router.dgrad", bw) + 1, at("moe.router.to_fp32.bwd", bw));
  // The casts run on PyTorch's kernels: bf16 -> fp32 on the dynamic-casting loop, the product
  // with a broadcast operand on the legacy strided loop.
  auto path = [&](const std::string& name) {
    return std::get<MemoryBoundShape>(find(*ops, name)->shape).path;
  };
  EXPECT_EQ(path("moe.router.to_fp32"), MemPath::kCastLoop);
  EXPECT_EQ(path("moe.combine.to_fp32"), MemPath::kCastLoop);
  EXPECT_EQ(path("moe.combine.score"), MemPath::kStrided);
  EXPECT_EQ(path("moe.combine.to_bf16"), MemPath::kVectorized);
  // Megatron-core's list has none of these: it weights inside the fused activation.
  auto megatron = framework_layer_operators(m, l, s, 0, framework_ops(FrameworkId::kMegatron));
  ASSERT_TRUE(megatron.is_ok());
  for (const char* name : {"moe.expert.swiglu_unfused", "moe.combine.score", "moe.router.to_fp32",
                           "moe.permute.grad_fill"})
    EXPECT_EQ(find(*megatron, name), nullptr) << name;
  EXPECT_EQ(mem_bytes(*megatron, "moe.unpermute"), 4 * n * h);
}

TEST(Operators, TorchtitanRunsEveryFfnOfAnMoeModelAsSeparateSiluAndProduct) {
  // DeepSeek-V3's first three layers are dense FeedForwards and its MoE layers have one shared
  // expert (FeedForward too): both run SiLU and the product apart under torchtitan, 4 B more
  // forward and 8 B more backward per element of their activation's output. Megatron-core
  // fuses them.
  const ModelSpec d = preset("deepseek-v3");
  const int64_t s = 4096;
  const Layout l = resolved(d, "tp=1,pp=1,dp=64,ep=64,mbs=1,gbs=64", s, 64);
  const FrameworkOps titan = framework_ops(FrameworkId::kTorchtitan);
  auto dense = framework_layer_operators(d, l, s, 0, titan);
  auto moe = framework_layer_operators(d, l, s, 3, titan);
  ASSERT_TRUE(dense.is_ok());
  ASSERT_TRUE(moe.is_ok());
  ASSERT_TRUE(d.moe && !d.is_moe_layer(0) && d.is_moe_layer(3));
  const int64_t dense_f = 4096 * d.ffn, shared_f = 4096 * d.moe->shared_expert_ffn;
  EXPECT_EQ(mem_bytes(*dense, "mlp.swiglu_unfused"), 4 * dense_f);
  EXPECT_EQ(mem_bytes(*dense, "mlp.swiglu_unfused.bwd"), 8 * dense_f);
  EXPECT_EQ(mem_bytes(*moe, "moe.shared.swiglu_unfused"), 4 * shared_f);
  EXPECT_EQ(mem_bytes(*moe, "moe.shared.swiglu_unfused.bwd"), 8 * shared_f);
  // The dense layer has no router: nothing of the MoE block.
  EXPECT_EQ(find(*dense, "moe.router.to_fp32"), nullptr);
  // The gate keeps its fp32 input (4 B per T·h) on top of the bf16 input, which the shared
  // expert's w1 and w3 keep (the list counts it once, 2 B).
  EXPECT_EQ(find(*moe, "moe.router.to_fp32")->saved.value(), 4 * 4096 * d.hidden);
  // The memory model keeps act(gate) for the product's backward, half of what each unit's
  // activation stores (gate and up), on every unit that runs apart.
  EXPECT_EQ(
      memory_layers::unfused_glu_half(*moe).value(),
      (find(*moe, "moe.expert.act")->saved.value() + find(*moe, "moe.shared.act")->saved.value()) /
          2);
  auto mega = framework_layer_operators(d, l, s, 3, framework_ops(FrameworkId::kMegatron));
  ASSERT_TRUE(mega.is_ok());
  EXPECT_EQ(memory_layers::unfused_glu_half(*mega).value(), 0);
}

TEST(Operators, TorchtitanSelectiveCheckpointingSavesEverySecondMatmul) {
  // torchtitan's "op" policy on Llama-3-8B, tp=2 with SP, mbs=2, s=1024 (T = 2048, 1024 per rank
  // on the sequence shard; local q width 2048, k = v width 512, FFN 7168, 16 q heads): saved are
  // the block input (1024·4096·2 B), wq and wv (2048·(2048 + 512)·2), SDPA's output and
  // log-sum-exp (2048·2048·2 + 2048·16·4), w1 (2048·7168·2) and w2 (2048·4096·2).
  const ModelSpec m = preset("llama3-8b");
  const Layout l = resolved(m, "tp=2,pp=1,mbs=2,gbs=2,sp=on,recompute=selective", 1024, 2);
  auto ops = layer_operators(m, l, 1024, 0);
  ASSERT_TRUE(ops.is_ok());
  apply_torchtitan_selective_ac(*ops, m, l, 1024, 0);
  const int64_t expected = 1024 * 4096 * 2 + 2048 * (2048 + 512) * 2 + 2048 * 2048 * 2 +
                           2048 * 16 * 4 + 2048 * 7168 * 2 + 2048 * 4096 * 2;
  EXPECT_EQ(total_saved(*ops).value(), expected);
  // Rerun before the backward: wk (the fused projection's 512 k columns), wo, w3 (7168 columns),
  // the TP all-gathers and the memory-bound ops; not the attention core, wq/wv/w1/w2 or the
  // reduce-scatters (saved). Reruns sit between the forward and the backward.
  std::map<std::string, const Op*> rerun;
  bool backward_seen = false;
  for (const Op& op : *ops) {
    if (op.pass == Pass::kRecompute) {
      EXPECT_FALSE(backward_seen) << op.name;
      rerun[op.name] = &op;
    } else if (op.pass != Pass::kForward) {
      backward_seen = true;
    }
  }
  ASSERT_TRUE(rerun.count("attn.qkv.k"));
  EXPECT_EQ(rerun["attn.qkv.k"]->gemm()->n, 512);
  ASSERT_TRUE(rerun.count("mlp.fc1.up"));
  EXPECT_EQ(rerun["mlp.fc1.up"]->gemm()->n, 7168);
  for (const char* name : {"attn.o", "attn.norm", "attn.rope", "mlp.act", "mlp.norm",
                           "attn.residual", "attn.sp_ag", "mlp.sp_ag"})
    EXPECT_TRUE(rerun.count(name)) << name;
  for (const char* name : {"attn.core", "attn.qkv", "mlp.fc1", "mlp.down", "attn.sp_rs"})
    EXPECT_FALSE(rerun.count(name)) << name;
  // Other recompute modes are the list's own.
  const Layout full = resolved(m, "tp=2,pp=1,mbs=2,gbs=2,sp=on,recompute=full", 1024, 2);
  auto a = layer_operators(m, full, 1024, 0);
  auto b = layer_operators(m, full, 1024, 0);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  apply_torchtitan_selective_ac(*b, m, full, 1024, 0);
  EXPECT_EQ(total_saved(*a).value(), total_saved(*b).value());
  EXPECT_EQ(a->size(), b->size());
}

TEST(Operators, TorchtitanEagerKernelsBytes) {
  // Llama-3-8B, tp=2 with SP, mbs=2, s=1024: T = 2048 tokens (1024 per rank on the sequence
  // shard), 16 local q heads and 4 KV heads of 128, FFN width 7168. Per element: composite
  // RMSNorm 40 B forward, 60 B backward, where the list's norm moves 4 and 6; complex RoPE 20 B
  // where the list moves 4 (forward and backward); repeat_kv reads the KV width and writes the q
  // width of K and V (2 B each); SwiGLU's separate SiLU and product 10 B forward, 18 B backward,
  // where the list's fused unit moves 6 and 10.
  const ModelSpec m = preset("llama3-8b");
  const Layout l = resolved(m, "tp=2,pp=1,mbs=2,gbs=2,sp=on", 1024, 2);
  auto ops = layer_operators(m, l, 1024, 0);
  ASSERT_TRUE(ops.is_ok());
  ASSERT_TRUE(add_torchtitan_layer_kernels(*ops, m, l, 1024, /*composite_rmsnorm=*/true).is_ok());
  const int64_t norm_elements = 1024 * 4096;  // sequence shard x h
  EXPECT_EQ(mem_bytes(*ops, "attn.norm_composite"), 36 * norm_elements);
  EXPECT_EQ(mem_bytes(*ops, "attn.norm_composite.bwd"), 54 * norm_elements);
  EXPECT_EQ(mem_bytes(*ops, "mlp.norm_composite"), 36 * norm_elements);
  // RoPE's three kernels: .float() (read 2, write 4), the complex64 product (4 + 4, the list's
  // rope op moving 4 of it) and type_as (4 + 2): 20 B, the backward the same.
  const int64_t rope_elements = 2048 * (16 + 4) * 128;
  int64_t rope_fwd = mem_bytes(*ops, "attn.rope"), rope_bwd = mem_bytes(*ops, "attn.rope.bwd");
  for (const char* extra : {"attn.rope_to_fp32", "attn.rope_complex", "attn.rope_to_bf16"}) {
    rope_fwd += mem_bytes(*ops, extra);
    rope_bwd += mem_bytes(*ops, std::string(extra) + ".bwd");
  }
  EXPECT_EQ(rope_fwd, 20 * rope_elements);
  EXPECT_EQ(rope_bwd, 20 * rope_elements);
  EXPECT_EQ(mem_bytes(*ops, "attn.rope_to_fp32"), 6 * rope_elements);
  EXPECT_EQ(mem_bytes(*ops, "attn.rope_to_bf16.bwd"), 6 * rope_elements);
  EXPECT_EQ(mem_bytes(*ops, "attn.repeat_kv"), 2 * 2048 * (4 + 16) * 128 * 2);
  // F.silu(w1(x)) * w3(x) per FFN element in bf16: forward SiLU (read gate, write: 4 B) and the
  // product (6 B); backward the product's two gradients (2 × 6 B) and SiLU's (read the gradient
  // and the gate, write: 6 B). w1 and w3 are two linears: no cat joins their gradients.
  const int64_t f = 2048 * 7168;
  EXPECT_EQ(mem_bytes(*ops, "mlp.act") + mem_bytes(*ops, "mlp.swiglu_unfused"), (4 + 6) * f);
  EXPECT_EQ(mem_bytes(*ops, "mlp.act.bwd") + mem_bytes(*ops, "mlp.swiglu_unfused.bwd"),
            (2 * 6 + 6) * f);
  // Each sits next to the op it completes: the copy of K and V right before the attention core.
  for (size_t i = 0; i + 1 < ops->size(); ++i) {
    if ((*ops)[i].name == "attn.repeat_kv") {
      EXPECT_EQ((*ops)[i + 1].name, "attn.core");
    }
  }
  // MHA has nothing to repeat.
  const ModelSpec mha = preset("llama-tiny");
  ModelSpec full = mha;
  full.num_kv_heads = full.num_heads;
  const Layout lt = resolved(full, "tp=1,pp=1,mbs=1,gbs=1", 256, 1);
  auto tiny = layer_operators(full, lt, 256, 0);
  ASSERT_TRUE(tiny.is_ok());
  ASSERT_TRUE(add_torchtitan_layer_kernels(*tiny, full, lt, 256, true).is_ok());
  EXPECT_EQ(find(*tiny, "attn.repeat_kv"), nullptr);

  auto head = head_operators(m, l, 1024);
  ASSERT_TRUE(head.is_ok());
  ASSERT_TRUE(add_torchtitan_head_kernels(*head, m, l, 1024, true).is_ok());
  EXPECT_EQ(mem_bytes(*head, "head.norm_composite"), 36 * norm_elements);
  EXPECT_EQ(mem_bytes(*head, "head.norm_composite.bwd"), 54 * norm_elements);

  // PyTorch >= 2.9 runs nn.RMSNorm as one fused kernel: the list's norm, nothing added; the
  // other eager kernels stay.
  auto fused = layer_operators(m, l, 1024, 0);
  ASSERT_TRUE(fused.is_ok());
  ASSERT_TRUE(
      add_torchtitan_layer_kernels(*fused, m, l, 1024, /*composite_rmsnorm=*/false).is_ok());
  EXPECT_EQ(find(*fused, "attn.norm_composite"), nullptr);
  EXPECT_EQ(find(*fused, "mlp.norm_composite.bwd"), nullptr);
  EXPECT_EQ(mem_bytes(*fused, "attn.rope_complex"), 4 * rope_elements);
  EXPECT_EQ(fused->size() + 4, ops->size());
  auto fused_head = head_operators(m, l, 1024);
  ASSERT_TRUE(fused_head.is_ok());
  const size_t plain = fused_head->size();
  ASSERT_TRUE(add_torchtitan_head_kernels(*fused_head, m, l, 1024, false).is_ok());
  EXPECT_EQ(fused_head->size(), plain);
}

}  // namespace
}  // namespace scaleplan::models

namespace scaleplan::models {
namespace {

// The optimizer step's passes over the local parameters (operators.h): gradient-norm read (4 B),
// fused Adam (read grad, master, m, v; write master, m, v: 28 B), bf16 refresh from the masters
// (read 4, write 2) and the zeroing of the fp32 gradient buffer (4): 42 B per parameter.
TEST(Operators, OptimizerStepMovesFortyTwoBytesPerParameter) {
  const int64_t params = 1'000'000;
  int64_t bytes = 0;
  for (const Op& op : optimizer_operators(params)) {
    EXPECT_EQ(op.kind, OpKind::kMemoryBound) << op.name;
    EXPECT_EQ(op.pass, Pass::kOptimizer) << op.name;
    bytes += std::get<MemoryBoundShape>(op.shape).bytes.value();
  }
  EXPECT_EQ(bytes, 42 * params);
}

// fp16 with a dynamic loss scale adds the unscale-and-check pass (Megatron-LM
// _unscale_main_grads_and_check_for_nan: read and write each fp32 gradient, 8 B), first.
TEST(Operators, Fp16LossScaleUnscalesTheGradientsFirst) {
  const int64_t params = 1'000'000;
  const std::vector<Op> ops = optimizer_operators(params, /*fp16_loss_scale=*/true);
  ASSERT_FALSE(ops.empty());
  EXPECT_EQ(ops.front().name, "optim.unscale");
  EXPECT_EQ(std::get<MemoryBoundShape>(ops.front().shape).bytes.value(), 8 * params);
  int64_t bytes = 0;
  for (const Op& op : ops) bytes += std::get<MemoryBoundShape>(op.shape).bytes.value();
  EXPECT_EQ(bytes, 50 * params);
}

// fp16 main gradients (Megatron-LM --fp16 without --accumulate-allreduce-grads-in-fp32): the step
// first copies them to fp32 (_copy_model_grads_to_main_grads: read 2, write 4), and zeroing the
// fp16 buffer writes 2 B instead of 4: 50 + 6 − 2 = 54 B per parameter.
TEST(Operators, Fp16MainGradientsAreCopiedToFp32First) {
  const int64_t params = 1'000'000;
  const std::vector<Op> ops =
      optimizer_operators(params, /*fp16_loss_scale=*/true, /*main_grad_bytes=*/2);
  ASSERT_GE(ops.size(), 2u);
  EXPECT_EQ(ops[0].name, "optim.grad_to_fp32");
  EXPECT_EQ(std::get<MemoryBoundShape>(ops[0].shape).bytes.value(), 6 * params);
  EXPECT_EQ(ops[1].name, "optim.unscale");
  int64_t bytes = 0;
  for (const Op& op : ops) bytes += std::get<MemoryBoundShape>(op.shape).bytes.value();
  EXPECT_EQ(bytes, 54 * params);
}

}  // namespace
}  // namespace scaleplan::models

namespace scaleplan::models {
namespace {

// torch.autocast over fp32 parameters (torchtitan without FSDP). Llama-3-8B cut to 4 layers:
// per layer the matrices wq 4096x4096, wk and wv 1024x4096, wo 4096x4096, w1 and w3 14336x4096,
// w2 4096x14336 = 4096 * (4096 + 2 * 1024 + 4096) + 3 * 14336 * 4096 = 218,103,808 cast to bf16;
// the two RMSNorm vectors (2 * 4096) are not. The LM head 128256 x 4096 = 525,336,576 is; the
// embedding (the same size) is not.
TEST(Operators, AutocastCastsEveryMatrixButNotNormsOrTheEmbedding) {
  ModelSpec m = preset("llama3-8b");
  m.num_layers = 4;
  const Layout l = resolved(m, "tp=1,pp=1,dp=1,mbs=1,gbs=4", 4096, 1);
  const AutocastParams p = autocast_cast_params(m, l);
  ASSERT_EQ(p.layer.size(), 4u);
  for (int64_t n : p.layer) EXPECT_EQ(n, 218'103'808);
  EXPECT_EQ(p.head, 525'336'576);
  EXPECT_EQ(p.total(), 4 * 218'103'808LL + 525'336'576);

  // Per block: the forward cast reads fp32 and writes bf16 (6 B per cast parameter), its
  // backward the reverse (6 B), and AccumulateGrad reads the fp32 gradient and the new one and
  // writes the sum (12 B per parameter, the norms' included) from the second micro-batch on.
  const int64_t params = 218'103'808 + 2 * 4096;
  const std::vector<Op> ops = autocast_weight_ops(218'103'808, params);
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(mem_bytes(ops, "autocast.cast"), 6 * 218'103'808LL);
  EXPECT_EQ(ops[0].pass, Pass::kForward);
  EXPECT_EQ(mem_bytes(ops, "autocast.cast.bwd"), 6 * 218'103'808LL);
  EXPECT_EQ(mem_bytes(ops, "autocast.accumulate_grad"), 12 * params);
  EXPECT_TRUE(ops[2].skips_first_microbatch);
  EXPECT_FALSE(ops[0].skips_first_microbatch);
  // The embedding: the zero-filled fp32 gradient of the whole table, then the accumulation.
  const std::vector<Op> embed = autocast_embedding_ops(525'336'576);
  EXPECT_EQ(mem_bytes(embed, "embed.grad_fill"), 4 * 525'336'576LL);
  EXPECT_EQ(mem_bytes(embed, "autocast.accumulate_grad"), 12 * 525'336'576LL);
  EXPECT_EQ(find(embed, "autocast.cast"), nullptr);

  // The fp32 residual stream of one layer, E = 4096 tokens x 4096 elements. Forward: two fp32
  // norms (4 B more each), five casts of a norm output to bf16, one per reading linear (wq, wk, wv,
  // w1, w3: 6 B), two fp32 residual adds (4 B more): 46 B per element. Backward: the five casts'
  // gradients to fp32 and the two residual gradients to bf16 (7 x 6 B), three sums of the
  // projections' fp32 input gradients (3 x 12 B) and the two residual sums in fp32 (2 x 6 B more),
  // two fp32 norm backwards (2 x 6 B more): 102 B per element.
  const int64_t e = 4096LL * 4096;
  int64_t fwd = 0, bwd = 0;
  for (const Op& op : autocast_stream_ops(m, l, 4096, 0)) {
    const int64_t b = std::get<MemoryBoundShape>(op.shape).bytes.value();
    (op.pass == Pass::kForward ? fwd : bwd) += b;
  }
  EXPECT_EQ(fwd, 46 * e);
  EXPECT_EQ(bwd, 102 * e);
  EXPECT_EQ(mem_bytes(autocast_stream_ops(m, l, 4096, 0), "autocast.stream_cast"), 5 * 6 * e);

  // Where torchtitan runs it (maybe_enable_amp): ZeRO-0 without TP, PP or CP; FSDP (ZeRO-1/2/3)
  // casts in its gathers instead, and TP or PP without FSDP turns mixed precision off.
  const FrameworkOps titan = framework_ops(FrameworkId::kTorchtitan);
  EXPECT_TRUE(runs_autocast(titan, l));
  EXPECT_TRUE(runs_autocast(titan, resolved(m, "tp=1,pp=1,dp=8,mbs=1,gbs=8", 4096, 8)));
  EXPECT_FALSE(runs_autocast(titan, resolved(m, "tp=1,pp=1,dp=8,mbs=1,gbs=8,zero=3", 4096, 8)));
  EXPECT_FALSE(runs_autocast(titan, resolved(m, "tp=2,pp=1,dp=1,mbs=1,gbs=1", 4096, 2)));
  EXPECT_FALSE(runs_autocast(titan, resolved(m, "tp=1,pp=2,dp=1,mbs=1,gbs=2", 4096, 2)));
  EXPECT_FALSE(runs_autocast(framework_ops(FrameworkId::kMegatron), l));
}

// nn.RMSNorm's backward on PyTorch >= 2.9 (_fused_rms_norm_backward) is two kernels: the input
// gradient, which the list's norm backward counts, and the weight gradient
// (GammaBetaBackwardCUDAKernel), which reads the norm's input and the output gradient again: 2
// bf16 operands per element (the fp32 stream's autocast doubles them in the builder, whose
// lists alone depend on ZeRO and PP:
// Simulate.TorchtitanAutocastCastsWeightsAndAccumulatesGradients). Llama-3-8B, seq 4096, one
// sequence: 4096 x 4096 elements per norm, two per layer and the final norm. The composite norm of
// PyTorch <= 2.8 and Megatron-core's fused norms add nothing.
TEST(Operators, TorchtitanRmsNormBackwardReadsInputAndGradientAgainForTheWeight) {
  ModelSpec m = preset("llama3-8b");
  m.num_layers = 4;
  const int64_t e = 4096LL * 4096;
  const FrameworkOps titan = framework_ops(FrameworkId::kTorchtitan);
  const Layout autocast = resolved(m, "tp=1,pp=1,dp=1,mbs=1,gbs=4", 4096, 1);
  const Layout fsdp = resolved(m, "tp=1,pp=1,dp=8,mbs=1,gbs=8,zero=3", 4096, 8);
  ASSERT_TRUE(runs_autocast(titan, autocast));
  ASSERT_FALSE(runs_autocast(titan, fsdp));
  for (auto [layout, operand] : {std::pair{autocast, 2}, {fsdp, 2}}) {
    auto layer = framework_layer_operators(m, layout, 4096, 0, titan);
    auto head = framework_head_operators(m, layout, 4096, titan);
    ASSERT_TRUE(layer.is_ok() && head.is_ok());
    for (const char* name : {"attn.norm_weight.bwd", "mlp.norm_weight.bwd"}) {
      EXPECT_EQ(mem_bytes(*layer, name), 2 * operand * e) << name;
      EXPECT_EQ(std::get<MemoryBoundShape>(find(*layer, name)->shape).path, MemPath::kRowNorm);
      EXPECT_EQ(find(*layer, name)->pass, Pass::kBackwardInput);
    }
    EXPECT_EQ(mem_bytes(*head, "head.norm_weight.bwd"), 2 * operand * e);
  }
  for (FrameworkId id : {FrameworkId::kTorchtitan2025, FrameworkId::kMegatron}) {
    auto layer = framework_layer_operators(m, autocast, 4096, 0, framework_ops(id));
    ASSERT_TRUE(layer.is_ok());
    EXPECT_EQ(find(*layer, "attn.norm_weight.bwd"), nullptr);
  }
}

// Which of PyTorch's kernel implementations each torchtitan op runs (CUDALoops.cuh gpu_kernel_impl,
// Copy.cu direct_copy_kernel_cuda): a copy to bf16 has a vectorized kernel of its own, a copy to
// fp32 and an add of an fp32 and a bf16 operand need dynamic casting and take the unrolled loop;
// nn.RMSNorm is _fused_rms_norm's row reduction; fused AdamW is multi_tensor_apply. The same ops
// under Megatron-core stay on the vectorized (fused) path.
TEST(Operators, TorchtitanOpsRunOnPyTorchsKernelImplementations) {
  ModelSpec m = preset("llama3-8b");
  m.num_layers = 4;
  const Layout l = resolved(m, "tp=1,pp=1,dp=1,mbs=1,gbs=4", 4096, 1);
  auto path = [](const std::vector<Op>& ops, const std::string& name, Pass pass) {
    for (const Op& op : ops) {
      if (op.name == name && op.pass == pass) return std::get<MemoryBoundShape>(op.shape).path;
    }
    ADD_FAILURE() << name;
    return MemPath::kVectorized;
  };
  const std::vector<Op> weights = autocast_weight_ops(1000, 1000);
  EXPECT_EQ(path(weights, "autocast.cast", Pass::kForward), MemPath::kVectorized);
  EXPECT_EQ(path(weights, "autocast.cast.bwd", Pass::kBackwardWeight), MemPath::kCastLoop);
  EXPECT_EQ(path(weights, "autocast.accumulate_grad", Pass::kBackwardWeight), MemPath::kVectorized);

  // The stream: the five norm-output casts widen their gradients (cast loop) and the two residual
  // gradients narrow to bf16 (vectorized): 7 x 6 B per element as before, in two ops.
  const std::vector<Op> stream = autocast_stream_ops(m, l, 4096, 0);
  const int64_t e = 4096LL * 4096;
  EXPECT_EQ(path(stream, "autocast.stream_norm", Pass::kForward), MemPath::kRowNorm);
  EXPECT_EQ(path(stream, "autocast.stream_cast", Pass::kForward), MemPath::kVectorized);
  EXPECT_EQ(path(stream, "autocast.stream_residual", Pass::kForward), MemPath::kCastLoop);
  EXPECT_EQ(path(stream, "autocast.stream_cast.bwd", Pass::kBackwardInput), MemPath::kCastLoop);
  EXPECT_EQ(mem_bytes(stream, "autocast.stream_cast.bwd"), 5 * 6 * e);
  EXPECT_EQ(path(stream, "autocast.stream_narrow.bwd", Pass::kBackwardInput), MemPath::kVectorized);
  EXPECT_EQ(mem_bytes(stream, "autocast.stream_narrow.bwd"), 2 * 6 * e);
  EXPECT_EQ(path(stream, "autocast.stream_residual.bwd", Pass::kBackwardInput),
            MemPath::kVectorized);
  EXPECT_EQ(path(stream, "autocast.stream_norm.bwd", Pass::kBackwardInput), MemPath::kRowNorm);

  const FrameworkOps titan = framework_ops(FrameworkId::kTorchtitan);
  const FrameworkOps megatron = framework_ops(FrameworkId::kMegatron);
  auto layer = framework_layer_operators(m, l, 4096, 0, titan);
  auto mlayer = framework_layer_operators(m, l, 4096, 0, megatron);
  auto head = framework_head_operators(m, l, 4096, titan);
  auto mhead = framework_head_operators(m, l, 4096, megatron);
  ASSERT_TRUE(layer.is_ok() && mlayer.is_ok() && head.is_ok() && mhead.is_ok());
  EXPECT_EQ(path(*layer, "attn.norm", Pass::kForward), MemPath::kRowNorm);
  EXPECT_EQ(path(*layer, "mlp.norm.bwd", Pass::kBackwardInput), MemPath::kRowNorm);
  EXPECT_EQ(path(*mlayer, "attn.norm", Pass::kForward), MemPath::kVectorized);
  EXPECT_EQ(path(*head, "head.norm", Pass::kForward), MemPath::kRowNorm);
  // RoPE's widening copies (xq.float() forward, type_as's gradient backward) are bf16 -> fp32:
  // the casting loop; its narrowing copies and the complex product are not.
  EXPECT_EQ(path(*layer, "attn.rope_to_fp32", Pass::kForward), MemPath::kCastLoop);
  EXPECT_EQ(path(*layer, "attn.rope_to_fp32.bwd", Pass::kBackwardInput), MemPath::kVectorized);
  EXPECT_EQ(path(*layer, "attn.rope_to_bf16", Pass::kForward), MemPath::kVectorized);
  EXPECT_EQ(path(*layer, "attn.rope_to_bf16.bwd", Pass::kBackwardInput), MemPath::kCastLoop);
  // The complex product, both ways, is the legacy strided elementwise_kernel<128, 2> (freqs_cis
  // broadcast over the heads); repeat_kv copies an expanded (stride-0) tensor in the strided
  // elementwise_kernel<128, 4> and sums it back in a reduce_kernel.
  for (const char* name : {"attn.rope", "attn.rope_complex"}) {
    EXPECT_EQ(path(*layer, name, Pass::kForward), MemPath::kStrided) << name;
    EXPECT_EQ(path(*layer, std::string(name) + ".bwd", Pass::kBackwardInput), MemPath::kStrided)
        << name;
  }
  EXPECT_EQ(path(*layer, "attn.repeat_kv", Pass::kForward), MemPath::kStridedCopy);
  EXPECT_EQ(path(*layer, "attn.repeat_kv.bwd", Pass::kBackwardInput), MemPath::kReduce);
  EXPECT_EQ(path(*mlayer, "attn.rope", Pass::kForward), MemPath::kVectorized);
  EXPECT_EQ(path(*head, "loss.cast_fp32", Pass::kForward), MemPath::kCastLoop);
  EXPECT_EQ(path(*head, "loss.cast_fp32.bwd", Pass::kBackwardInput), MemPath::kVectorized);
  EXPECT_EQ(path(*mhead, "loss.cast_fp32", Pass::kForward), MemPath::kVectorized);

  EXPECT_EQ(path(optimizer_operators(1000, false, 4, /*fp32_params=*/true), "optim.adam",
                 Pass::kOptimizer),
            MemPath::kMultiTensor);
  EXPECT_EQ(path(optimizer_operators(1000), "optim.adam", Pass::kOptimizer), MemPath::kVectorized);
}

// torchtitan's embedding backward is PyTorch's embedding_dense_backward: after the zero fill
// (autocast_embedding_ops), compute_grad_weight reads each token's fp32 gradient row (4 B) and
// writes a partial sum (4 B), sum_and_scatter reads it (4 B) and writes the row (4 B): 16 B per
// token and hidden element under autocast, 4096 x 4096 of them here (EmbeddingBackwardKernel.cu).
// It runs on its own implementation (kSegmentSum) under every torchtitan layout; off autocast
// (bf16 gradients under FSDP) its bytes stay the list's; other frameworks keep the list's op.
TEST(Operators, TorchtitanEmbeddingBackwardIsSegmentSumsOverAnFp32Gradient) {
  ModelSpec m = preset("llama3-8b");
  m.num_layers = 4;
  const FrameworkOps titan = framework_ops(FrameworkId::kTorchtitan);
  const Layout autocast = resolved(m, "tp=1,pp=1,dp=1,mbs=1,gbs=4", 4096, 1);
  const Layout fsdp = resolved(m, "tp=1,pp=1,dp=8,mbs=1,gbs=8,zero=3", 4096, 8);
  ASSERT_TRUE(runs_autocast(titan, autocast));
  ASSERT_FALSE(runs_autocast(titan, fsdp));
  const int64_t e = 4096LL * 4096;
  auto list = embedding_operators(m, autocast, 4096);
  ASSERT_TRUE(list.is_ok());
  const int64_t bf16_bytes = mem_bytes(*list, "embed.lookup.wgrad");
  std::vector<Op> amp = *list, sharded = *list;
  apply_torchtitan_embedding_kernels(amp, m, autocast, 4096, runs_autocast(titan, autocast));
  apply_torchtitan_embedding_kernels(sharded, m, fsdp, 4096, runs_autocast(titan, fsdp));
  EXPECT_EQ(mem_bytes(amp, "embed.lookup.wgrad"), 16 * e);
  EXPECT_EQ(mem_bytes(sharded, "embed.lookup.wgrad"), bf16_bytes);
  for (const std::vector<Op>* ops : {&amp, &sharded})
    EXPECT_EQ(std::get<MemoryBoundShape>(find(*ops, "embed.lookup.wgrad")->shape).path,
              MemPath::kSegmentSum);
  EXPECT_EQ(std::get<MemoryBoundShape>(find(*list, "embed.lookup.wgrad")->shape).path,
            MemPath::kVectorized);
  // The forward lookup is untouched.
  EXPECT_EQ(mem_bytes(amp, "embed.lookup"), mem_bytes(*list, "embed.lookup"));
}

// torchtitan's unfused SiLU and product compute the SwiGLU, and _fused_rms_norm_backward's weight
// gradient is the norm's backward: their ops carry those kinds (a profiler trace files SiLU,
// silu_backward and the bf16 mul under swiglu, GammaBetaBackward under the rms_norm op), so that
// `compare` sets them beside the measured kernels of the same kind.
TEST(Operators, TorchtitanExtraKernelsCarryTheKindOfWhatTheyCompute) {
  ModelSpec m = preset("llama3-8b");
  m.num_layers = 4;
  const Layout l = resolved(m, "tp=1,pp=1,dp=1,mbs=1,gbs=4", 4096, 1);
  auto layer = framework_layer_operators(m, l, 4096, 0, framework_ops(FrameworkId::kTorchtitan));
  auto head = framework_head_operators(m, l, 4096, framework_ops(FrameworkId::kTorchtitan));
  ASSERT_TRUE(layer.is_ok() && head.is_ok());
  auto kind = [](const std::vector<Op>& ops, const char* name) {
    const Op* op = find(ops, name);
    return op == nullptr ? MemOp::kElementwise : std::get<MemoryBoundShape>(op->shape).op;
  };
  EXPECT_EQ(kind(*layer, "mlp.swiglu_unfused"), MemOp::kSwiglu);
  EXPECT_EQ(kind(*layer, "mlp.swiglu_unfused.bwd"), MemOp::kSwiglu);
  EXPECT_EQ(kind(*layer, "attn.norm_weight.bwd"), MemOp::kRmsNorm);
  EXPECT_EQ(kind(*layer, "mlp.norm_weight.bwd"), MemOp::kRmsNorm);
  EXPECT_EQ(kind(*head, "head.norm_weight.bwd"), MemOp::kRmsNorm);
  // No torchtitan op is left on the catch-all kind.
  for (const std::vector<Op>* ops : {&*layer, &*head})
    for (const Op& op : *ops)
      if (const auto* s = std::get_if<MemoryBoundShape>(&op.shape))
        EXPECT_NE(s->op, MemOp::kElementwise) << op.name;
}

// With the fp32 parameters as the masters (torchtitan) the step is the gradient norm (read 4 B)
// and Adam (28 B) only: no bf16 copy to refresh, and zero_grad sets the gradients to None.
TEST(Operators, Fp32ParameterStepHasNoCopyAndNoZeroFill) {
  int64_t bytes = 0;
  std::vector<std::string> names;
  for (const Op& op : optimizer_operators(1'000'000, false, 4, /*fp32_params=*/true)) {
    bytes += std::get<MemoryBoundShape>(op.shape).bytes.value();
    names.push_back(op.name);
  }
  EXPECT_EQ(bytes, 32 * 1'000'000);
  EXPECT_EQ(names, (std::vector<std::string>{"optim.grad_norm", "optim.adam"}));
}

// torchtitan's loss without TP is PyTorch's cross_entropy over fp32 logits: the backward zero-fills
// an fp32 gradient (4 B per logit, nll_loss_backward) and _log_softmax_backward_data moves 16 B
// per logit (read the gradient for the row sum, then the gradient and the output; write).
TEST(Operators, TorchtitanLossBackwardIsPyTorchsCrossEntropy) {
  const ModelSpec m = preset("llama3-8b");
  const Layout l = resolved(m, "tp=1,pp=1,dp=1,mbs=1,gbs=1", 4096, 1);
  auto head = head_operators(m, l, 4096);
  ASSERT_TRUE(head.is_ok());
  ASSERT_TRUE(add_torchtitan_head_kernels(*head, m, l, 4096, false).is_ok());
  const int64_t logits = 4096LL * 128256;
  EXPECT_EQ(mem_bytes(*head, "loss.nll_grad_fill"), 4 * logits);
  EXPECT_EQ(mem_bytes(*head, "loss.ce.bwd"), 16 * logits);
  EXPECT_EQ(mem_bytes(*head, "loss.ce"), 16 * logits);  // max, sum of exp, write: 3 reads + 1
}

// A framework's extra kernels go next to an op of the list; a list without that op is an error
// that names it (the kernel is not silently appended at the end).
TEST(Operators, FrameworkKernelMissingAnchorIsError) {
  const ModelSpec m = preset("llama3-8b");
  const Layout l = resolved(m, "tp=2,pp=1,mbs=2,gbs=2,sp=on", 1024, 2);
  auto head = head_operators(m, l, 1024);
  ASSERT_TRUE(head.is_ok());
  std::erase_if(*head, [](const Op& op) { return op.name == "loss.ce"; });
  const size_t before = head->size();
  const Status st = add_nanotron_head_kernels(*head, m, l, 1024);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("'loss.ce'"), std::string::npos) << st.message();
  EXPECT_EQ(head->size(), before);  // nothing appended

  auto ops = layer_operators(m, l, 1024, 0);
  ASSERT_TRUE(ops.is_ok());
  std::erase_if(*ops, [](const Op& op) { return op.name == "mlp.act.bwd"; });
  const Status layer = add_torchtitan_layer_kernels(*ops, m, l, 1024, false);
  EXPECT_FALSE(layer.is_ok());
  EXPECT_NE(layer.message().find("'mlp.act.bwd'"), std::string::npos) << layer.message();
}

}  // namespace
}  // namespace scaleplan::models
