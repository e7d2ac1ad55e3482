// The op-for-op match of a prediction against a PyTorch profiler trace (sim/op_match.h), on a
// hand-written pair of traces whose pairs are evident by construction: 2 micro-batches of a
// 2-layer model; the Program writes Q, K, V as one GEMM where PyTorch runs three, has an
// elementwise op PyTorch does not run, and PyTorch zero-fills a buffer the Program does not
// write.
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim/op_match.h"
#include "sim/recorded.h"

namespace scaleplan::sim {
namespace {

using nlohmann::json;

// One side's op: name, class or aten op, dims, duration (us); `kernel` names the measured kernel.
struct FixtureOp {
  std::string name;                        // Program op name, or aten op
  std::string cls;                         // predicted: args.class; measured: the kernel's name
  std::string mem_op;                      // predicted memory-bound kind
  std::vector<std::vector<int64_t>> dims;  // measured: Input Dims; predicted: {{m, n, k}}
  std::string dtype = "c10::BFloat16";
  double us = 1;
  bool backward = false;
};

// The predicted layer (forward, then backward in time order) and the measured one.
std::vector<FixtureOp> predicted_layer(bool backward) {
  if (!backward)
    return {{"attn.norm", "memory_bound", "rmsnorm", {}, "", 10},
            {"attn.qkv", "gemm", "", {{8, 24, 16}}, "", 30},
            {"attn.core", "attention_fwd", "", {}, "", 20},
            {"attn.extra", "memory_bound", "elementwise", {}, "", 3},
            {"attn.o", "gemm", "", {{8, 16, 16}}, "", 15},
            {"attn.residual", "memory_bound", "add", {}, "", 5}};
  return {{"attn.residual.bwd", "memory_bound", "add", {}, "", 5, true},
          {"attn.o.dgrad", "gemm", "", {{8, 16, 16}}, "", 15, true},
          {"attn.o.wgrad", "gemm", "", {{16, 16, 8}}, "", 15, true},
          {"attn.core.bwd", "attention_bwd", "", {}, "", 50, true},
          {"attn.qkv.dgrad", "gemm", "", {{8, 16, 24}}, "", 30, true},
          {"attn.qkv.wgrad", "gemm", "", {{24, 16, 8}}, "", 30, true},
          {"attn.norm.bwd", "memory_bound", "rmsnorm", {}, "", 12, true}};
}

std::vector<FixtureOp> measured_layer(bool backward) {
  const std::string gemm = "sm90_xmma_gemm_bf16bf16_bf16f32";
  if (!backward)
    return {{"aten::_fused_rms_norm", "vectorized_layer_norm_kernel", "", {{8, 16}}, "float", 12},
            {"aten::mm", gemm, "", {{8, 16}, {16, 16}}, "c10::BFloat16", 14},
            {"aten::mm", gemm, "", {{8, 16}, {16, 4}}, "c10::BFloat16", 6},
            {"aten::mm", gemm, "", {{8, 16}, {16, 4}}, "c10::BFloat16", 6},
            {"aten::_flash_attention_forward", "flash_fwd_kernel", "", {}, "c10::BFloat16", 22},
            {"aten::mm", gemm, "", {{8, 16}, {16, 16}}, "c10::BFloat16", 16},
            {"aten::add", "vectorized_elementwise_kernel", "", {{8, 16}, {8, 16}}, "float", 5}};
  return {{"aten::add", "vectorized_elementwise_kernel", "", {{8, 16}, {8, 16}}, "float", 5, true},
          {"aten::mm", gemm, "", {{8, 16}, {16, 16}}, "c10::BFloat16", 14, true},  // o dgrad
          {"aten::mm", gemm, "", {{16, 8}, {8, 16}}, "c10::BFloat16", 14, true},   // o wgrad
          {"aten::_flash_attention_backward",
           "flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel",
           "",
           {},
           "c10::BFloat16",
           55,
           true},
          {"aten::mm", gemm, "", {{8, 4}, {4, 16}}, "c10::BFloat16", 5, true},     // v dgrad
          {"aten::mm", gemm, "", {{4, 8}, {8, 16}}, "c10::BFloat16", 5, true},     // v wgrad
          {"aten::mm", gemm, "", {{8, 4}, {4, 16}}, "c10::BFloat16", 5, true},     // k dgrad
          {"aten::mm", gemm, "", {{4, 8}, {8, 16}}, "c10::BFloat16", 5, true},     // k wgrad
          {"aten::mm", gemm, "", {{8, 16}, {16, 16}}, "c10::BFloat16", 14, true},  // q dgrad
          {"aten::mm", gemm, "", {{16, 8}, {8, 16}}, "c10::BFloat16", 14, true},   // q wgrad
          {"aten::_fused_rms_norm_backward",
           "vectorized_layer_norm_kernel",
           "",
           {{8, 16}},
           "float",
           11,
           true}};
}

// The whole step of one side: per micro-batch the embedding, the layers, the head and loss,
// then the backward in reverse, then the optimizer.
std::vector<FixtureOp> step(bool measured, int microbatches, int layers) {
  std::vector<FixtureOp> out;
  const auto add = [&](const std::vector<FixtureOp>& v) {
    out.insert(out.end(), v.begin(), v.end());
  };
  for (int mb = 0; mb < microbatches; ++mb) {
    if (measured) {
      add({{"aten::embedding", "indexSelectLargeIndex", "", {{32, 16}, {8}}, "float", 4}});
    } else {
      add({{"embed.lookup", "memory_bound", "embedding", {}, "", 4}});
    }
    for (int l = 0; l < layers; ++l) add(measured ? measured_layer(false) : predicted_layer(false));
    if (measured) {
      add({{"aten::_fused_rms_norm", "vectorized_layer_norm_kernel", "", {{8, 16}}, "float", 10},
           {"aten::mm", "sm90_xmma_gemm_bf16", "", {{8, 16}, {16, 32}}, "c10::BFloat16", 44},
           {"aten::fill_", "vectorized_elementwise_kernel", "", {{8, 32}}, "float", 2, true},
           {"aten::mm", "sm90_xmma_gemm_bf16", "", {{8, 32}, {32, 16}}, "c10::BFloat16", 44, true},
           {"aten::mm", "sm90_xmma_gemm_bf16", "", {{32, 8}, {8, 16}}, "c10::BFloat16", 44, true},
           {"aten::_fused_rms_norm_backward",
            "vectorized_layer_norm_kernel",
            "",
            {{8, 16}},
            "float",
            11,
            true}});
    } else {
      add({{"head.norm", "memory_bound", "rmsnorm", {}, "", 10},
           {"head.lm", "gemm", "", {{8, 32, 16}}, "", 40},
           {"head.lm.dgrad", "gemm", "", {{8, 16, 32}}, "", 40, true},
           {"head.lm.wgrad", "gemm", "", {{32, 16, 8}}, "", 40, true},
           {"head.norm.bwd", "memory_bound", "rmsnorm", {}, "", 12, true}});
    }
    for (int l = 0; l < layers; ++l) add(measured ? measured_layer(true) : predicted_layer(true));
  }
  return out;
}

// A scaleplan trace of the predicted step (rank 0, one stream), micro-batch by micro-batch.
std::string predicted_trace(int microbatches, int layers) {
  json events = json::array();
  events.push_back(
      {{"ph", "M"}, {"name", "process_name"}, {"pid", 0}, {"args", {{"name", "rank 0"}}}});
  double ts = 0;
  int mb = 0;
  const size_t per_mb = step(false, 1, layers).size();
  const std::vector<FixtureOp> ops = step(false, microbatches, layers);
  for (size_t i = 0; i < ops.size(); ++i) {
    mb = static_cast<int>(i / per_mb);
    const FixtureOp& o = ops[i];
    json args = {
        {"phase", o.backward ? "backward_input" : "forward"}, {"class", o.cls}, {"microbatch", mb}};
    if (!o.mem_op.empty()) args["mem_op"] = o.mem_op;
    if (!o.dims.empty())
      args["shape"] = "m=" + std::to_string(o.dims[0][0]) + " n=" + std::to_string(o.dims[0][1]) +
                      " k=" + std::to_string(o.dims[0][2]) + " batch=1 dtype=bf16";
    events.push_back({{"ph", "X"},
                      {"name", o.name},
                      {"pid", 0},
                      {"tid", 0},
                      {"ts", ts},
                      {"dur", o.us},
                      {"args", args}});
    ts += o.us;
  }
  events.push_back(
      {{"ph", "X"},
       {"name", "optim.adam"},
       {"pid", 0},
       {"tid", 0},
       {"ts", ts},
       {"dur", 7},
       {"args", {{"phase", "optimizer"}, {"class", "optimizer"}, {"mem_op", "adamw"}}}});
  return json({{"otherData", {{"generator", "scaleplan simulate"}}}, {"traceEvents", events}})
      .dump();
}

// A Kineto trace of the measured step: forward ops on CPU thread 1, backward ops inside
// autograd's evaluate_function nodes on thread 2, the optimizer inside its annotation; one
// kernel per op on stream 7, launched (cudaLaunchKernel, correlation) inside ProfilerStep#1.
std::string measured_trace(int microbatches, int layers) {
  json events = json::array();
  double cpu = 0, gpu = 0;
  int64_t id = 1;
  const auto op = [&](const FixtureOp& o) {
    const int tid = o.backward ? 2 : 1;
    if (o.backward)
      events.push_back({{"ph", "X"},
                        {"cat", "cpu_op"},
                        {"pid", 1},
                        {"tid", tid},
                        {"name", "autograd::engine::evaluate_function: XBackward0"},
                        {"ts", cpu},
                        {"dur", 9},
                        {"args", {{"External id", id++}}}});
    json types = json::array(), dims = json::array();
    for (const auto& d : o.dims) {
      types.push_back(o.dtype);
      dims.push_back(d);
    }
    const int64_t ext = id++;
    events.push_back(
        {{"ph", "X"},
         {"cat", "cpu_op"},
         {"pid", 1},
         {"tid", tid},
         {"name", o.name},
         {"ts", cpu + 1},
         {"dur", 7},
         {"args", {{"External id", ext}, {"Input Dims", dims}, {"Input type", types}}}});
    events.push_back({{"ph", "X"},
                      {"cat", "cuda_runtime"},
                      {"pid", 1},
                      {"tid", tid},
                      {"name", "cudaLaunchKernel"},
                      {"ts", cpu + 2},
                      {"dur", 1},
                      {"args", {{"correlation", ext}, {"External id", ext}}}});
    gpu = std::max(gpu, cpu + 3);
    events.push_back({{"ph", "X"},
                      {"cat", "kernel"},
                      {"pid", 0},
                      {"tid", 7},
                      {"name", o.cls},
                      {"ts", gpu},
                      {"dur", o.us},
                      {"args", {{"correlation", ext}, {"External id", ext}, {"stream", 7}}}});
    gpu += o.us;
    cpu += 10;
  };
  for (const FixtureOp& o : step(true, microbatches, layers)) op(o);
  events.push_back({{"ph", "X"},
                    {"cat", "user_annotation"},
                    {"pid", 1},
                    {"tid", 1},
                    {"name", "Optimizer.step#AdamW.step"},
                    {"ts", cpu},
                    {"dur", 10}});
  op({"aten::_fused_adamw_", "multi_tensor_apply_kernel", "", {{16}}, "float", 8});
  events.push_back({{"ph", "X"},
                    {"cat", "user_annotation"},
                    {"pid", 1},
                    {"tid", 1},
                    {"name", "ProfilerStep#1"},
                    {"ts", -1},
                    {"dur", cpu + 2}});
  return json({{"traceEvents", events}}).dump();
}

struct Fixture {
  RecordedTimeline predicted, measured;
};

Fixture load(int microbatches, int layers) {
  Fixture f;
  auto p = parse_scaleplan_trace(predicted_trace(microbatches, layers), "predicted");
  EXPECT_TRUE(p.is_ok()) << p.status().message();
  f.predicted = std::move(*p);
  const Status s =
      parse_kineto_trace(measured_trace(microbatches, layers), "measured", 0, f.measured);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return f;
}

TEST(OpMatch, FindsMicroBatchesAndLayersOnBothSides) {
  const Fixture f = load(2, 2);
  const StructuredMatch m = match_by_structure(f.predicted, f.measured);
  EXPECT_EQ(m.microbatches_predicted, 2);
  EXPECT_EQ(m.microbatches_measured, 2);
  EXPECT_EQ(m.layers_predicted, 2);
  EXPECT_EQ(m.layers_measured, 2);
}

TEST(OpMatch, FusedGemmsMatchThePartsThatAddUpToThem) {
  const Fixture f = load(2, 2);
  const StructuredMatch m = match_by_structure(f.predicted, f.measured);
  // attn.qkv and its two gradients, per layer and micro-batch: each one predicted GEMM to the
  // three measured ones (q, k, v) whose third dims add up to its own (16 + 4 + 4 = 24).
  int fused = 0, single = 0;
  for (const OpGroup& g : m.groups) {
    if (g.cls != OpClass::kGemm) continue;
    if (g.how == "fused shape") {
      ++fused;
      EXPECT_EQ(g.predicted.size(), 1u);
      EXPECT_EQ(g.measured.size(), 3u);
      EXPECT_TRUE(g.predicted_name.starts_with("attn.qkv")) << g.predicted_name;
      EXPECT_EQ(g.segment.layer >= 0 && g.segment.layer < 2, true);
    } else {
      EXPECT_EQ(g.how, "shape");
      ++single;
    }
  }
  EXPECT_EQ(fused, 2 * 2 * 3);
  // attn.o forward and its two gradients per layer, the LM head and its two gradients.
  EXPECT_EQ(single, 2 * (2 * 3 + 3));
  for (const UnmatchedOp& u : m.unmatched) EXPECT_NE(u.cls, OpClass::kGemm) << u.name;
}

TEST(OpMatch, AttentionOpsPairOneToOneInOrder) {
  const Fixture f = load(2, 2);
  const StructuredMatch m = match_by_structure(f.predicted, f.measured);
  std::map<std::pair<int, int>, int> seen;  // (micro-batch, layer) -> attention groups
  for (const OpGroup& g : m.groups) {
    if (g.cls != OpClass::kAttentionFwd && g.cls != OpClass::kAttentionBwd) continue;
    EXPECT_EQ(g.how, "in order");
    EXPECT_EQ(g.measured.size(), 1u);
    // Forward 20 us predicted against 22 measured; backward 50 against 55.
    EXPECT_EQ(g.measured_time.count() * 10, g.predicted_time.count() * 11);
    ++seen[{g.segment.microbatch, g.segment.layer}];
  }
  EXPECT_EQ(seen.size(), 4u);
  for (const auto& [k, n] : seen) EXPECT_EQ(n, 2) << k.first << " " << k.second;
}

TEST(OpMatch, UnmatchedOpsCarryTheirReason) {
  const Fixture f = load(2, 2);
  const StructuredMatch m = match_by_structure(f.predicted, f.measured);
  // attn.extra: an elementwise op PyTorch does not run, once per layer and micro-batch;
  // aten::fill_: a zero-fill the Program does not write, once per micro-batch.
  EXPECT_EQ(m.predicted_only, 2 * 2);
  EXPECT_EQ(m.measured_only, 2);
  for (const UnmatchedOp& u : m.unmatched) {
    if (u.predicted) {
      EXPECT_EQ(u.name, "attn.extra");
      EXPECT_EQ(u.reason, "no measured memory_bound elementwise op here");
    } else {
      EXPECT_EQ(u.name, "aten::fill_ (float)");
      EXPECT_EQ(u.reason, "no predicted memory_bound fill op here");
    }
  }
  ASSERT_EQ(m.reasons.size(), 2u);
  EXPECT_EQ(m.reasons[0].count + m.reasons[1].count, 6);
}

TEST(OpMatch, TimePerLayerAndMicroBatchSideBySide) {
  const Fixture f = load(2, 2);
  const StructuredMatch m = match_by_structure(f.predicted, f.measured);
  const auto us = [](Duration d) { return d.to_seconds() * 1e6; };
  std::map<std::string, std::pair<double, double>> layer, mb;
  for (const SegmentRow& r : m.layers)
    layer[to_string(r.segment, 2)] = {us(r.predicted), us(r.measured)};
  for (const SegmentRow& r : m.microbatches)
    mb[to_string(r.segment, 2)] = {us(r.predicted), us(r.measured)};
  // Layer 0's forward: norm, Q/K/V, attention, extra, o (10+30+20+3+15 predicted; 12+14+6+6+22+16
  // measured), per micro-batch; layer 1 also opens with layer 0's residual add (5 and 5).
  EXPECT_NEAR(layer["forward layer 0"].first, 2 * 78, 1e-6);
  EXPECT_NEAR(layer["forward layer 0"].second, 2 * 76, 1e-6);
  EXPECT_NEAR(layer["forward layer 1"].first, 2 * 83, 1e-6);
  EXPECT_NEAR(layer["forward layer 1"].second, 2 * 81, 1e-6);
  EXPECT_NEAR(layer["forward below the layers"].first, 2 * 4, 1e-6);
  // A micro-batch's forward: embedding, two layers, the last residual add, head norm and GEMM.
  EXPECT_NEAR(mb["mb 1 forward"].first, 4 + 2 * 83 + 10 + 40, 1e-6);
  EXPECT_NEAR(mb["mb 1 forward"].second, 4 + 2 * 81 + 10 + 44, 1e-6);
  EXPECT_NEAR(mb["optimizer"].first, 7, 1e-6);
  EXPECT_NEAR(mb["optimizer"].second, 8, 1e-6);
}

TEST(OpMatch, DifferentLayerCountsMatchThePassAsOneSegment) {
  Fixture f = load(1, 2);
  const Fixture three = load(1, 3);
  f.measured = three.measured;
  const StructuredMatch m = match_by_structure(f.predicted, f.measured);
  EXPECT_EQ(m.layers_predicted, 2);
  EXPECT_EQ(m.layers_measured, 3);
  for (const OpGroup& g : m.groups) EXPECT_EQ(g.segment.layer, -1);
  // Two predicted attention ops per pass beside three measured: one group each.
  int attention = 0;
  for (const OpGroup& g : m.groups)
    if (g.cls == OpClass::kAttentionFwd) {
      ++attention;
      EXPECT_EQ(g.how, "as a group");
      EXPECT_EQ(g.measured.size(), 3u);
    }
  EXPECT_EQ(attention, 1);
}

}  // namespace
}  // namespace scaleplan::sim
