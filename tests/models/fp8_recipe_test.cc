// Transformer Engine's fp8 recipes in the operator list: each GEMM operand's quantization kernels
// and their bytes, from what TE's quantizers read and write (models::Fp8Recipe cites them).
#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

#include "models/operators.h"
#include "tests/models/model_fixtures.h"

namespace scaleplan::models {
namespace {

using testing::find;
using testing::preset;
using testing::resolved;

struct Kernel {
  MemOp op;
  int64_t bytes;
  bool operator==(const Kernel&) const = default;
};

// The memory-bound kernels named `name` and `name`.amax, in list order.
std::vector<Kernel> quantization(const std::vector<Op>& ops, const std::string& name) {
  std::vector<Kernel> out;
  for (const Op& op : ops) {
    if (op.name != name && op.name != name + ".amax") continue;
    const auto& s = std::get<MemoryBoundShape>(op.shape);
    out.push_back({s.op, s.bytes.value()});
  }
  return out;
}

// Llama-3-8B, tp=1, mbs 1, seq 1024, Megatron-core's conventions. The forward input of attn.qkv
// has e = m·k bf16 elements (1024 tokens × 4096) and the output gradient of mlp.down e = m·n.
// Per bf16 element: delayed scaling's cast-transpose reads 2 B and writes 1 + 1 (4 B); without
// the transpose (Blackwell) 3 B; current scaling adds an amax pass reading the 2 B first;
// MXFP8 writes both usages with one E8M0 byte per 32 elements of each (4 B + 2/32 B).
TEST(Fp8Recipe, EachRecipeQuantizesAnOperandAsTransformerEngineDoes) {
  const ModelSpec m = preset("llama3-8b");
  const Layout l = resolved(m, "tp=1,dp=1,mbs=1,gbs=1,dtype=fp8", 1024, 1);
  FrameworkOps fw = framework_ops(FrameworkId::kMegatron);
  auto run = [&](Fp8Recipe r, bool any_layout) {
    fw.fp8_recipe = r;
    fw.fp8_gemm_any_layout = any_layout;
    auto ops = framework_layer_operators(m, l, 1024, 0, fw);
    EXPECT_TRUE(ops.is_ok()) << ops.status().message();
    return *ops;
  };
  const std::vector<Op> base = run(Fp8Recipe::kDelayed, false);
  const GemmShape& qkv = *find(base, "attn.qkv")->gemm();
  const GemmShape& down = *find(base, "mlp.down")->gemm();
  const int64_t e = qkv.m * qkv.k, g = down.m * down.n;
  using V = std::vector<Kernel>;
  EXPECT_EQ(quantization(base, "attn.qkv.fp8_cast"), (V{{MemOp::kFp8CastTranspose, 4 * e}}));
  EXPECT_EQ(quantization(base, "mlp.down.fp8_cast.bwd"), (V{{MemOp::kFp8CastTranspose, 4 * g}}));

  const std::vector<Op> blackwell = run(Fp8Recipe::kDelayed, true);
  EXPECT_EQ(quantization(blackwell, "attn.qkv.fp8_cast"), (V{{MemOp::kFp8Cast, 3 * e}}));

  const std::vector<Op> current = run(Fp8Recipe::kTensorwise, false);
  EXPECT_EQ(quantization(current, "attn.qkv.fp8_cast"),
            (V{{MemOp::kAmax, 2 * e}, {MemOp::kFp8CastTranspose, 4 * e}}));
  EXPECT_EQ(quantization(current, "mlp.down.fp8_cast.bwd"),
            (V{{MemOp::kAmax, 2 * g}, {MemOp::kFp8CastTranspose, 4 * g}}));
  const std::vector<Op> current_b = run(Fp8Recipe::kTensorwise, true);
  EXPECT_EQ(quantization(current_b, "attn.qkv.fp8_cast"),
            (V{{MemOp::kAmax, 2 * e}, {MemOp::kFp8Cast, 3 * e}}));

  const std::vector<Op> mx = run(Fp8Recipe::kMxfp8, true);
  EXPECT_EQ(quantization(mx, "attn.qkv.fp8_cast"),
            (V{{MemOp::kMxfp8Quantize, 4 * e + 2 * e / 32}}));

  // Nothing else changes: the amax passes are the only added ops, one per cast (8 per layer:
  // the input and the output gradient of four linears), and the GEMMs are the same.
  EXPECT_EQ(current.size(), base.size() + 8);
  EXPECT_EQ(mx.size(), base.size());
  for (const Op& op : base) {
    if (op.gemm() == nullptr) continue;
    const Op* same = find(mx, op.name);
    ASSERT_NE(same, nullptr) << op.name;
    EXPECT_EQ(same->flops.value(), op.flops.value()) << op.name;
  }
}

// NVFP4 (TE NVFP4BlockScaling): every GEMM the fp8 recipes quantize for runs in e2m1 (fprop,
// dgrad and wgrad), the bf16 ones (attention core) stay bf16, the FLOPs do not change; each
// operand gets an amax pass reading its e bf16 elements (2e B) and one quantize pass writing both
// usages, half a byte per element and one E4M3 byte per 16 elements of each: 2e + e + e/8 B.
TEST(Fp8Recipe, Nvfp4RunsTheFp8LinearsInFp4WithTheirQuantizePasses) {
  const ModelSpec m = preset("llama3-8b");
  const Layout l = resolved(m, "tp=1,dp=1,mbs=1,gbs=1,dtype=fp8", 1024, 1);
  FrameworkOps fw = framework_ops(FrameworkId::kMegatron);
  fw.fp8_gemm_any_layout = true;
  fw.fp8_recipe = Fp8Recipe::kMxfp8;
  auto mx = framework_layer_operators(m, l, 1024, 0, fw);
  fw.fp8_recipe = Fp8Recipe::kNvfp4;
  auto nv = framework_layer_operators(m, l, 1024, 0, fw);
  ASSERT_TRUE(mx.is_ok() && nv.is_ok());
  int fp4 = 0;
  for (const Op& op : *mx) {
    if (op.gemm() == nullptr) continue;
    const Op* same = find(*nv, op.name);
    ASSERT_NE(same, nullptr) << op.name;
    EXPECT_EQ(same->flops.value(), op.flops.value()) << op.name;
    const DType want = op.gemm()->dtype == DType::kFp8 ? DType::kFp4 : op.gemm()->dtype;
    EXPECT_EQ(same->gemm()->dtype, want) << op.name;
    fp4 += want == DType::kFp4;
  }
  EXPECT_EQ(fp4, 12);  // qkv, proj, up (fc1), down: fprop, dgrad and wgrad each
  const GemmShape& qkv = *find(*nv, "attn.qkv")->gemm();
  const int64_t e = qkv.m * qkv.k;
  ASSERT_EQ(e % 16, 0);
  using V = std::vector<Kernel>;
  EXPECT_EQ(quantization(*nv, "attn.qkv.fp8_cast"),
            (V{{MemOp::kAmax, 2 * e}, {MemOp::kMxfp8Quantize, 2 * e + e + 2 * (e / 16)}}));
  EXPECT_EQ(nv->size(), mx->size() + 8);  // one amax pass per quantized operand
}

// A recipe only changes fp8 linears: a bf16 layout's list is the same under any.
TEST(Fp8Recipe, Bf16ListsHaveNothingToQuantize) {
  const ModelSpec m = preset("llama3-8b");
  const Layout l = resolved(m, "tp=1,dp=1,mbs=1,gbs=1", 1024, 1);
  FrameworkOps fw = framework_ops(FrameworkId::kMegatron);
  auto plain = framework_layer_operators(m, l, 1024, 0, fw);
  fw.fp8_recipe = Fp8Recipe::kTensorwise;
  fw.fp8_gemm_any_layout = true;
  auto recipe = framework_layer_operators(m, l, 1024, 0, fw);
  ASSERT_TRUE(plain.is_ok() && recipe.is_ok());
  EXPECT_EQ(plain->size(), recipe->size());
}

// Megatron-core's names; the error names the option and lists them.
TEST(Fp8Recipe, ParsesMegatronsNamesAndRefusesOthersNamingTheOption) {
  EXPECT_EQ(*parse_fp8_recipe("delayed"), Fp8Recipe::kDelayed);
  EXPECT_EQ(*parse_fp8_recipe("tensorwise"), Fp8Recipe::kTensorwise);
  EXPECT_EQ(*parse_fp8_recipe("mxfp8"), Fp8Recipe::kMxfp8);
  EXPECT_EQ(*parse_fp8_recipe("nvfp4"), Fp8Recipe::kNvfp4);
  for (Fp8Recipe r :
       {Fp8Recipe::kDelayed, Fp8Recipe::kTensorwise, Fp8Recipe::kMxfp8, Fp8Recipe::kNvfp4})
    EXPECT_EQ(*parse_fp8_recipe(to_string(r)), r);
  auto bad = parse_fp8_recipe("blockwise");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("fp8_recipe"), std::string::npos);
  EXPECT_NE(bad.status().message().find("blockwise"), std::string::npos);
}

}  // namespace
}  // namespace scaleplan::models
