// The memory-bound ops as the executor launches them: the bytes each call moves against what the
// simulator charges for the op it stands for, in f32 and in bf16 storage.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "hw_profiles/cluster.h"
#include "models/model_spec.h"
#include "models/operators.h"
#include "runtime/backend.h"
#include "runtime/launch.h"
#include "sim/simulate.h"

namespace scaleplan::runtime {
namespace {

// Bytes of one call counted from its operands (memory_operands), not from memory_shape's table:
// each operand read or written once, the operands an op updates in place (AdamW's param and
// moments) read and written; an embedding reads the `rows` table rows it looks up, which
// memory_args_for makes the whole table (vocab = rows).
int64_t operand_bytes(const MemOpArgs& a) {
  const MemOperands o = memory_operands(a);
  int64_t total = 0;
  for (const MemOperand* m : {&o.x, &o.y, &o.w, &o.b, &o.index, &o.out, &o.out2, &o.out_index})
    total += m->count * element_size(m->type);
  if (a.op == MemOp::kAdamW) total += (o.x.count + o.w.count + o.b.count) * 4;
  return total;
}

MemOpArgs one_row(MemOpArgs a) {
  a.rows = 1;
  if (a.op == MemOp::kEmbedding) a.p.vocab = 1;
  return a;
}

TEST(MemoryOps, EachCallMovesWhatItsOperandsHold) {
  for (int i = 0; i < kNumMemOps; ++i) {
    for (ElemType t : {ElemType::kF32, ElemType::kBf16}) {
      for (bool bwd : {false, true}) {
        const MemOp op = static_cast<MemOp>(i);
        const MemOpArgs a = memory_args_for({Bytes(48 << 20), Flops(0), op}, t, bwd);
        EXPECT_EQ(memory_shape(a).bytes.value(), operand_bytes(a))
            << to_string(op) << " " << to_string(t) << (bwd ? " backward" : "");
      }
    }
  }
}

// In bf16 an op of the same bytes holds twice the elements of its f32 form where every operand
// is an activation: RoPE's 2·n·2 B against 2·n·4 B. A cast reads f32 and writes the act type:
// 6 B per element in bf16, 8 in f32 (the f32 copy of a rounded value). AdamW works on the fp32
// states: 28 B per parameter either way.
TEST(MemoryOps, StorageSetsTheElementsOfTheChargedBytes) {
  const Bytes b(1024 * 840);  // 840: divisible by every per-element byte count below
  auto elems = [&](MemOp op, ElemType t, bool bwd = false) {
    const MemOpArgs a = memory_args_for({b, Flops(0), op}, t, bwd);
    return a.rows * a.cols;
  };
  EXPECT_EQ(elems(MemOp::kRope, ElemType::kF32), b.value() / 8);
  EXPECT_EQ(elems(MemOp::kRope, ElemType::kBf16), b.value() / 4);
  EXPECT_EQ(elems(MemOp::kCast, ElemType::kBf16), b.value() / 6);
  EXPECT_EQ(elems(MemOp::kCast, ElemType::kF32), b.value() / 8);
  EXPECT_EQ(elems(MemOp::kAdamW, ElemType::kBf16), b.value() / 28);
  // Transformer Engine's fp8 cast-transpose reads the bf16 tensor and writes two e4m3 copies:
  // 2 + 1 + 1 B per element (4 + 1 + 1 with f32 activations), and 8 B per call (scale, amax),
  // which rounds away within a row.
  EXPECT_EQ(elems(MemOp::kFp8CastTranspose, ElemType::kBf16), b.value() / 4);
  EXPECT_EQ(elems(MemOp::kFp8CastTranspose, ElemType::kF32), b.value() / 6);
  // SwiGLU's backward reads gate, up and dy and writes dgate and dup: 5 activations per output
  // element against the forward's 3.
  EXPECT_EQ(elems(MemOp::kSwiglu, ElemType::kBf16), b.value() / 6);
  EXPECT_EQ(elems(MemOp::kSwiglu, ElemType::kBf16, true), b.value() / 10);
}

// Every memory-bound op of a torchtitan and a Megatron step of llama-tiny, in bf16 and in fp8, as
// the executor sizes it (bf16 activations, f32 over the states, the backward form in the
// backward passes), moves the bytes the simulator charged for it, to within one row of the call,
// and runs the op the Program names: under dtype=fp8 the decoder linears' operand casts are
// Transformer Engine's quantization by recipe and GPU (four linears, one of the input and one of
// the output gradient each, per layer and micro-batch), not autocast's cast.
TEST(MemoryOps, EveryProgramOpMovesTheBytesTheSimulatorCharges) {
  auto model = models::load_model("llama-tiny");
  ASSERT_TRUE(model.is_ok());
  // Each fp8 recipe on the GPU it runs on: its quantization kinds, one per GEMM operand (the
  // amax pass of current scaling beside its cast); Blackwell's casts write no transpose.
  struct Case {
    const char* framework;
    const char* cluster;
    bool fp8;
    models::Fp8Recipe recipe;
    std::vector<MemOp> quantize;
  };
  using models::Fp8Recipe;
  const Case cases[] = {
      {"torchtitan", "dgx-h100", false, Fp8Recipe::kDelayed, {}},
      {"megatron", "dgx-h100", false, Fp8Recipe::kDelayed, {}},
      {"megatron", "dgx-h100", true, Fp8Recipe::kDelayed, {MemOp::kFp8CastTranspose}},
      {"megatron",
       "dgx-h100",
       true,
       Fp8Recipe::kTensorwise,
       {MemOp::kAmax, MemOp::kFp8CastTranspose}},
      {"megatron", "dgx-b200", true, Fp8Recipe::kDelayed, {MemOp::kFp8Cast}},
      {"megatron", "dgx-b200", true, Fp8Recipe::kMxfp8, {MemOp::kMxfp8Quantize}},
  };
  for (const Case& c : cases) {
    const std::string what = std::string(c.framework) + " " + c.cluster + " " +
                             (c.fp8 ? std::string(to_string(c.recipe)) : "bf16");
    auto cluster = hw::load_cluster(c.cluster);
    ASSERT_TRUE(cluster.is_ok());
    sim::SimulateOptions so;
    so.keep_program = true;
    auto fw = sim::parse_framework_value(c.framework);
    ASSERT_TRUE(fw.is_ok());
    so.framework = *fw;
    so.framework.ops.fp8_recipe = c.recipe;
    auto layout =
        parse_layout(c.fp8 ? "tp=1,pp=1,dp=1,mbs=1,gbs=2,dtype=fp8" : "tp=1,pp=1,dp=1,mbs=1,gbs=2");
    ASSERT_TRUE(layout.is_ok());
    auto r = sim::simulate(*model, *cluster, 256, *layout, so);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    const sim::Program& p = *r->program;
    int checked = 0;
    std::map<MemOp, int> quantize;
    for (sim::OpId id = 0; id < p.num_ops(); ++id) {
      const auto* k = std::get_if<sim::KernelPayload>(&p.payload(id));
      if (k == nullptr || k->kind != KernelKind::kMemoryBound) continue;
      const auto& shape = std::get<MemoryBoundShape>(k->shape);
      const sim::Phase ph = p.op(id).phase;
      const bool states = ph == sim::Phase::kOptimizer || ph == sim::Phase::kBackwardWeight;
      const bool bwd = ph == sim::Phase::kBackward || ph == sim::Phase::kBackwardInput;
      const MemOpArgs a = memory_args_for(shape, states ? ElemType::kF32 : ElemType::kBf16, bwd);
      const int64_t moved = memory_shape(a).bytes.value();
      const int64_t row = memory_shape(one_row(a)).bytes.value();
      EXPECT_LE(std::abs(moved - shape.bytes.value()), row)
          << what << " " << p.label(id).name << ": charged " << shape.bytes.value() << " B, moves "
          << moved << " B";
      EXPECT_EQ(a.op, shape.op) << p.label(id).name;
      for (MemOp q :
           {MemOp::kFp8CastTranspose, MemOp::kFp8Cast, MemOp::kAmax, MemOp::kMxfp8Quantize}) {
        if (a.op == q) ++quantize[q];
      }
      if (a.op == MemOp::kFp8CastTranspose || a.op == MemOp::kMxfp8Quantize)
        EXPECT_EQ(memory_operands(a).out2.type, ElemType::kFp8E4m3);
      ++checked;
    }
    EXPECT_GT(checked, 10) << what;
    // Two micro-batches (gbs 2, mbs 1, dp 1), each through every layer: 8 operands per layer.
    std::map<MemOp, int> expected;
    for (MemOp q : c.quantize) expected[q] = 2 * 8 * static_cast<int>(model->num_layers);
    EXPECT_EQ(quantize, expected) << what;
  }
}

// The host computes in f32 and says so when handed bf16 activations.
TEST(MemoryOps, HostRefusesBf16ActivationsNamingTheType) {
  const Status st = run_host_ranks(1, [](Backend& be) -> Status {
    MemOpArgs a;
    a.op = MemOp::kAdd;
    a.rows = 1;
    a.cols = 8;
    a.storage = ElemType::kBf16;
    return be.memory_op(a);
  });
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("bf16"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace scaleplan::runtime
