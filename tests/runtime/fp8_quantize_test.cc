// The quantizations of Transformer Engine's other fp8 recipes on the host backend (the oracles of
// runtime/cuda/fp8_quantize.cu): current scaling's amax pass, the cast without a transpose, and
// MXFP8's two block-scaled copies; and the bytes each moves, derived from what it reads and
// writes.
#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "runtime/host/fp8.h"
#include "runtime/launch.h"

namespace scaleplan::runtime {
namespace {

using host::e4m3_to_float;
using host::e8m0_to_float;
using host::float_to_e4m3;
using host::float_to_e8m0_up;

// A rows × cols call of `op` with every operand memory_operands names allocated and `x` uploaded.
Result<MemOpArgs> prepared(Backend& be, MemOp op, int64_t rows, int64_t cols,
                           const std::vector<float>& x) {
  MemOpArgs a;
  a.op = op;
  a.rows = rows;
  a.cols = cols;
  const MemOperands o = memory_operands(a);
  const std::pair<Buffer*, MemOperand> operands[] = {
      {&a.x, o.x}, {&a.w, o.w}, {&a.b, o.b}, {&a.out, o.out}, {&a.out2, o.out2}};
  for (const auto& [buf, m] : operands) {
    if (m.count == 0) continue;
    SP_ASSIGN_OR_RETURN(*buf, be.allocate(m.count, m.type));
  }
  SP_RETURN_IF_ERROR(be.upload(a.x, x.data()));
  return a;
}

// OCP MX v1.0 §5.4.1: E8M0 is 2^(e - 127). TE rounds a block's amax / 448 up to a power of two:
// 0.125 is one (e = 124), 0.2232 rounds up to 0.25 (125), 1 stays 1 (127), 0 gives 0.
TEST(Mxfp8, ScaleExponentRoundsUpToAPowerOfTwo) {
  EXPECT_EQ(float_to_e8m0_up(0.125f), 124);
  EXPECT_EQ(float_to_e8m0_up(100.0f / 448.0f), 125);
  EXPECT_EQ(float_to_e8m0_up(1.0f), 127);
  EXPECT_EQ(float_to_e8m0_up(0.0f), 0);
  EXPECT_EQ(e8m0_to_float(125), 0.25f);
  EXPECT_TRUE(std::isnan(e8m0_to_float(0xff)));
}

// Current scaling's amax pass overwrites the amax with max |x| (TE zeroes it first), and the cast
// without a transpose writes the same bytes as the cast-transpose's row-wise copy.
TEST(Fp8Quantize, AmaxOverwritesAndTheCastMatchesTheCastTransposesCopy) {
  const int64_t R = 3, C = 5;
  std::vector<float> x(R * C);
  for (int64_t i = 0; i < R * C; ++i) x[i] = 0.41f * static_cast<float>(i % 7) - 1.3f;
  x[8] = -9.5f;
  float amax = -1, cast_amax = -1;
  std::vector<uint8_t> cast(R * C), ct(R * C);
  const Status st = run_host_ranks(1, [&](Backend& be) -> Status {
    SP_ASSIGN_OR_RETURN(MemOpArgs a, prepared(be, MemOp::kAmax, R, C, x));
    const float stale = 100.0f;  // what an earlier tensor left: overwritten, not kept
    SP_RETURN_IF_ERROR(be.upload(a.out, &stale));
    SP_RETURN_IF_ERROR(be.memory_op(a));
    SP_RETURN_IF_ERROR(be.download(a.out, &amax));
    for (MemOp op : {MemOp::kFp8Cast, MemOp::kFp8CastTranspose}) {
      SP_ASSIGN_OR_RETURN(MemOpArgs c, prepared(be, op, R, C, x));
      const float scale = 448.0f / 9.5f, zero = 0;
      SP_RETURN_IF_ERROR(be.upload(c.w, &scale));
      SP_RETURN_IF_ERROR(be.upload(c.b, &zero));
      SP_RETURN_IF_ERROR(be.memory_op(c));
      SP_RETURN_IF_ERROR(be.download(c.out, op == MemOp::kFp8Cast ? cast.data() : ct.data()));
      if (op == MemOp::kFp8Cast) SP_RETURN_IF_ERROR(be.download(c.b, &cast_amax));
    }
    return Status::ok();
  });
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(amax, 9.5f);
  EXPECT_EQ(cast_amax, 9.5f);
  EXPECT_EQ(cast, ct);
  EXPECT_EQ(e4m3_to_float(cast[8]), -448.0f);  // the amax lands on e4m3's largest value
}

// MXFP8 on 2 × 40 values: a row has a 32-element block and a ragged 8-element one; each column
// one 2-element block. Row 0's first block holds 100 (amax 100: scale 2^-2 up from 0.2232, so
// 100 · 4 = 400, halfway between 384 and 416, rounds to even 384, i.e. 96 back); everything else
// is 1 or -1, except row 1 column 35 holding 3. Column 0's block holds 100 and 1: the same scale
// as row 0's block. Column 35's block holds 1 and 3: 3/448 rounds up to 2^-7 (e = 120), and 3 ·
// 128 = 384 exactly.
TEST(Mxfp8, HostWritesRowAndColumnCopiesWithTheirBlockScales) {
  const int64_t R = 2, C = 40;
  std::vector<float> x(R * C);
  for (int64_t i = 0; i < R * C; ++i) x[i] = (i % 3 == 0) ? -1.0f : 1.0f;
  x[0] = 100.0f;
  x[C + 35] = 3.0f;
  std::vector<uint8_t> rows(R * C), cols(R * C), rs(R * 2), cs(C);
  const Status st = run_host_ranks(1, [&](Backend& be) -> Status {
    SP_ASSIGN_OR_RETURN(MemOpArgs a, prepared(be, MemOp::kMxfp8Quantize, R, C, x));
    if (a.w.count != R * 2 || a.b.count != C) return Status::internal("scale counts");
    SP_RETURN_IF_ERROR(be.memory_op(a));
    SP_RETURN_IF_ERROR(be.download(a.out, rows.data()));
    SP_RETURN_IF_ERROR(be.download(a.out2, cols.data()));
    SP_RETURN_IF_ERROR(be.download(a.w, rs.data()));
    return be.download(a.b, cs.data());
  });
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(rs[0], 125);  // row 0, columns 0-31: amax 100
  EXPECT_EQ(e4m3_to_float(rows[0]) * e8m0_to_float(rs[0]), 96.0f);
  EXPECT_EQ(e4m3_to_float(rows[1]) * e8m0_to_float(rs[0]), x[1]);  // ±1 · 4 is exact
  // Blocks of ±1: amax/448 = 2^-8.8 rounds up to 2^-8 (e = 119); ±1 · 256 = ±256, exact.
  EXPECT_EQ(rs[1], 119);  // row 0, columns 32-39
  EXPECT_EQ(rs[2], 119);  // row 1, columns 0-31
  EXPECT_EQ(rs[3], 120);  // row 1, columns 32-39: amax 3
  EXPECT_EQ(e4m3_to_float(rows[C + 35]) * e8m0_to_float(rs[3]), 3.0f);
  EXPECT_EQ(cs[0], 125);
  EXPECT_EQ(cs[35], 120);
  EXPECT_EQ(cs[1], 119);
  EXPECT_EQ(e4m3_to_float(cols[0]) * e8m0_to_float(cs[0]), 96.0f);
  EXPECT_EQ(e4m3_to_float(cols[C + 35]) * e8m0_to_float(cs[35]), 3.0f);
}

// Bytes per element as each kernel reads and writes them, bf16 activations (2 B), 64 × 64:
// the amax pass reads x and writes one f32 (2n + 4); the cast writes one e4m3 copy beside the
// scale and amax (3n + 8), the cast-transpose two (4n + 8); MXFP8 two copies and one E8M0 scale
// per 32 elements of each (2n + 2n + 2 · n/32).
TEST(Fp8Quantize, EachKindMovesWhatItReadsAndWrites) {
  const int64_t n = 64 * 64;
  auto bytes = [](MemOp op) {
    MemOpArgs a;
    a.op = op;
    a.rows = a.cols = 64;
    a.storage = ElemType::kBf16;
    return memory_shape(a).bytes.value();
  };
  EXPECT_EQ(bytes(MemOp::kAmax), 2 * n + 4);
  EXPECT_EQ(bytes(MemOp::kFp8Cast), 3 * n + 8);
  EXPECT_EQ(bytes(MemOp::kFp8CastTranspose), 4 * n + 8);
  EXPECT_EQ(bytes(MemOp::kMxfp8Quantize), 4 * n + 2 * n / 32);
}

// E8M0 scales are moved like e4m3 and never reduced.
TEST(Mxfp8, CollectivesRefuseToReduceBlockScales) {
  const Status st = run_host_ranks(2, [](Backend& be) -> Status {
    SP_ASSIGN_OR_RETURN(Buffer b, be.allocate(4, ElemType::kE8m0));
    const Status sum = be.collective(be.world(), {CollectiveOp::kAllReduce, b, b, 4});
    if (sum.is_ok() || sum.message().find("e8m0") == std::string::npos)
      return Status::internal("all_reduce over e8m0 not refused: " + sum.message());
    return Status::ok();
  });
  EXPECT_TRUE(st.is_ok()) << st.message();
}

}  // namespace
}  // namespace scaleplan::runtime
