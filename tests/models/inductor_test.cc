// torchtitan under torch.compile (models/inductor.h): the fused kernels' bytes are the tensors
// each reads and writes once, counted here from the block's shapes.
#include "models/inductor.h"

#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

#include "models/memory.h"
#include "models/operators.h"
#include "tests/models/model_fixtures.h"

namespace scaleplan::models {
namespace {

using testing::preset;
using testing::resolved;

int64_t bytes_of(const std::vector<Op>& ops, const std::string& name) {
  for (const Op& op : ops) {
    if (op.name == name) return std::get<MemoryBoundShape>(op.shape).bytes.value();
  }
  ADD_FAILURE() << "no op " << name;
  return -1;
}

FrameworkOps torchtitan_compiled(const std::string& components) {
  FrameworkOps fw = framework_ops(FrameworkId::kTorchtitan);
  EXPECT_TRUE(set_compile_components(fw, components).is_ok());
  return fw;
}

// Llama-3-8B's block on one GPU (autocast over fp32 parameters: an fp32 residual stream): T 4096
// tokens, hidden 4096, 32 query heads and 8 key/value heads of 128, FFN 14336.
TEST(Inductor, FusedKernelsReadTheirInputsAndWriteTheirOutputsOnce) {
  const ModelSpec m = preset("llama3-8b");
  const Layout l = resolved(m, "tp=1,pp=1,dp=1,mbs=1,gbs=4", 4096, 1);
  const FrameworkOps eager_fw = framework_ops(FrameworkId::kTorchtitan);
  auto eager = framework_layer_operators(m, l, 4096, 0, eager_fw);
  auto ops = framework_layer_operators(m, l, 4096, 0, torchtitan_compiled("model"));
  ASSERT_TRUE(eager.is_ok() && ops.is_ok());
  const int64_t T = 4096, h = T * 4096, q = T * 32 * 128, kv = T * 8 * 128, f = T * 14336;
  const int64_t fp32 = 4, bf16 = 2;
  // Forward. attention_norm: x (fp32) in, its one bf16 output (read by wq, wk, wv) out.
  EXPECT_EQ(bytes_of(*ops, "compiled.attn_norm"), (fp32 + bf16) * h);
  EXPECT_EQ(bytes_of(*ops, "compiled.rope_q"), bf16 * q + bf16 * q);
  // K in, K repeated to the 32 query heads out; V the same without the rotation.
  EXPECT_EQ(bytes_of(*ops, "compiled.rope_k"), bf16 * kv + bf16 * q);
  EXPECT_EQ(bytes_of(*ops, "compiled.repeat_v"), bf16 * kv + bf16 * q);
  // x and wo's output in; the new stream and ffn_norm's bf16 output out.
  EXPECT_EQ(bytes_of(*ops, "compiled.residual_norm"), (fp32 + bf16) * h + (fp32 + bf16) * h);
  EXPECT_EQ(bytes_of(*ops, "compiled.mlp.act"), 2 * bf16 * f + bf16 * f);
  EXPECT_EQ(bytes_of(*ops, "compiled.residual"), (fp32 + bf16) * h + fp32 * h);
  // Backward. The stream gradient narrowed for w2's backward.
  EXPECT_EQ(bytes_of(*ops, "compiled.residual.bwd"), fp32 * h + bf16 * h);
  // d(product), gate and up in; d(gate), d(up) out.
  EXPECT_EQ(bytes_of(*ops, "compiled.mlp.act.bwd"), 3 * bf16 * f + 2 * bf16 * f);
  // w1's and w3's input gradients, the saved stream and the residual gradient in; the stream
  // gradient and its bf16 copy (for wo's backward) out. The weight gradient reads the same
  // input gradients and the stream.
  EXPECT_EQ(bytes_of(*ops, "compiled.ffn_norm.bwd"),
            2 * bf16 * h + fp32 * h + fp32 * h + fp32 * h + bf16 * h);
  EXPECT_EQ(bytes_of(*ops, "compiled.ffn_norm.wgrad"), 2 * bf16 * h + fp32 * h);
  EXPECT_EQ(bytes_of(*ops, "compiled.repeat_v.bwd"), bf16 * q + bf16 * kv);
  EXPECT_EQ(bytes_of(*ops, "compiled.rope_k.bwd"), bf16 * q + bf16 * kv);
  EXPECT_EQ(bytes_of(*ops, "compiled.rope_q.bwd"), bf16 * q + bf16 * q);
  // wq's, wk's and wv's input gradients, x and the stream gradient in; x's gradient out.
  EXPECT_EQ(bytes_of(*ops, "compiled.attn_norm.bwd"),
            3 * bf16 * h + fp32 * h + fp32 * h + fp32 * h);
  EXPECT_EQ(bytes_of(*ops, "compiled.attn_norm.wgrad"), 3 * bf16 * h + fp32 * h);

  // Nothing eager is left between the extern kernels, which are the eager list's, in its order;
  // what the list stores is unchanged (the eager SiLU output is the memory model's extra, not the
  // list's).
  std::vector<std::string> eager_extern, compiled_extern;
  int64_t eager_saved = 0, compiled_saved = 0;
  for (const Op& op : *eager) {
    if (op.kind != OpKind::kMemoryBound) eager_extern.push_back(op.name);
    eager_saved += op.saved.value();
  }
  for (const Op& op : *ops) {
    if (op.kind != OpKind::kMemoryBound)
      compiled_extern.push_back(op.name);
    else
      EXPECT_TRUE(op.name.starts_with("compiled.")) << op.name;
    compiled_saved += op.saved.value();
  }
  EXPECT_EQ(compiled_extern, eager_extern);
  EXPECT_EQ(compiled_saved, eager_saved);
}

// Under FSDP2 (ZeRO-3) the block computes in bf16: a bf16 stream, no narrowing cast.
TEST(Inductor, WithoutAutocastTheStreamIsBf16) {
  const ModelSpec m = preset("llama3-8b");
  const Layout l = resolved(m, "tp=1,pp=1,dp=8,mbs=1,gbs=8,zero=3", 4096, 8);
  auto ops = framework_layer_operators(m, l, 4096, 0, torchtitan_compiled("model"));
  ASSERT_TRUE(ops.is_ok());
  const int64_t h = 4096LL * 4096, bf16 = 2;
  EXPECT_EQ(bytes_of(*ops, "compiled.attn_norm"), 2 * bf16 * h);
  EXPECT_EQ(bytes_of(*ops, "compiled.residual"), 3 * bf16 * h);
  for (const Op& op : *ops) EXPECT_NE(op.name, "compiled.residual.bwd");
}

// torch.compile(cross_entropy(pred.float())): one pass over the bf16 logits forward, one kernel
// reading them and writing their bf16 gradient backward, before the LM head's backward.
TEST(Inductor, CompiledLossReadsTheLogitsOnceEachWay) {
  const ModelSpec m = preset("llama3-8b");
  const Layout l = resolved(m, "tp=1,pp=1,dp=1,mbs=1,gbs=1", 4096, 1);
  auto head = framework_head_operators(m, l, 4096, torchtitan_compiled("loss"));
  ASSERT_TRUE(head.is_ok());
  const int64_t logits = 4096LL * 128256;
  EXPECT_EQ(bytes_of(*head, "compiled.loss"), 2 * logits);
  EXPECT_EQ(bytes_of(*head, "compiled.loss.bwd"), 2 * logits + 2 * logits);
  size_t loss_bwd = head->size(), lm_dgrad = head->size();
  for (size_t i = 0; i < head->size(); ++i) {
    const Op& op = (*head)[i];
    EXPECT_FALSE(op.kind == OpKind::kMemoryBound && op.name.starts_with("loss.")) << op.name;
    if (op.name == "compiled.loss.bwd") loss_bwd = i;
    if (op.name == "head.lm.dgrad") lm_dgrad = i;
  }
  EXPECT_LT(loss_bwd, lm_dgrad);
}

// What the compiled block stores less than the eager one, per layer and micro-batch: the SiLU
// output of the eager product (Inductor recomputes it in the fused backward) and the three extra
// bf16 casts of the norm outputs that wq, wk, wv and w1, w3 each keep under eager autocast (one
// cast per norm after CSE).
TEST(Inductor, CompiledBlockStoresOneCastPerNormAndNoSiluOutput) {
  ModelSpec m = preset("llama3-8b");
  m.num_layers = 4;
  MemoryOptions opt;
  opt.framework = framework_memory(FrameworkId::kTorchtitan);
  opt.ops = framework_ops(FrameworkId::kTorchtitan);
  const Layout l = resolved(m, "tp=1,pp=1,dp=1,mbs=1,gbs=4", 4096, 1);
  const StageMemory eager = estimate_memory(m, l, 4096, opt).value().stages.front();
  ASSERT_TRUE(set_compile_components(opt.ops, "model").is_ok());
  const StageMemory compiled = estimate_memory(m, l, 4096, opt).value().stages.front();
  const int64_t T = 4096, h = 4096, f = 14336, bf16 = 2;
  EXPECT_EQ(eager.activations.value() - compiled.activations.value(),
            4 * (bf16 * T * f + 3 * bf16 * T * h));
  EXPECT_EQ(compiled.autocast_weight_cache, eager.autocast_weight_cache);
}

TEST(Inductor, CompileIsTorchtitansOption) {
  FrameworkOps megatron = framework_ops(FrameworkId::kMegatron);
  const Status st = set_compile_components(megatron, "model,loss");
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("--compile"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("torchtitan"), std::string::npos) << st.message();

  FrameworkOps fw = framework_ops(FrameworkId::kTorchtitan);
  const Status bad = set_compile_components(fw, "model,graph");
  EXPECT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("'model,graph'"), std::string::npos) << bad.message();
  ASSERT_TRUE(set_compile_components(fw, "loss,model").is_ok());
  EXPECT_EQ(compile_components(fw), "model,loss");
  ASSERT_TRUE(set_compile_components(fw, "").is_ok());  // torchtitan's default: off
  EXPECT_EQ(compile_components(fw), "");
}

TEST(Inductor, RefusesBlocksItDoesNotModel) {
  const ModelSpec m = preset("llama3-8b");
  const Status tp = check_compile(m, resolved(m, "tp=2,pp=1,dp=1,mbs=1,gbs=1", 4096, 2));
  EXPECT_FALSE(tp.is_ok());
  EXPECT_NE(tp.message().find("tp=2"), std::string::npos) << tp.message();
  const ModelSpec moe = preset("mixtral-8x7b");
  const Status st = check_compile(moe, resolved(moe, "tp=1,pp=1,dp=8,mbs=1,gbs=8", 4096, 8));
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("MoE"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace scaleplan::models
