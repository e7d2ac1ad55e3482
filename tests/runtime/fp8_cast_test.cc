// Transformer Engine's fp8 cast-transpose on the host backend (the oracle of the GPU kernel):
// e4m3 rounding and saturation against the values of the OCP FP8 specification, the amax, the
// scale and the transpose's layout; and the op's role through the executor's byte table.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/host/fp8.h"
#include "runtime/launch.h"

namespace scaleplan::runtime {
namespace {

using host::e4m3_to_float;
using host::float_to_e4m3;

// OCP 8-bit Floating Point Specification (OFP8) rev. 1.0, §4.1 table 1 (E4M3, bias 7): the
// encodings written out as S.EEEE.MMM.
TEST(Fp8E4m3, EncodesTheSpecificationsNamedValues) {
  EXPECT_EQ(float_to_e4m3(448.0f), 0b0'1111'110);  // max normal: 1.75 · 2^8
  EXPECT_EQ(float_to_e4m3(-448.0f), 0b1'1111'110);
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.0f, -6)), 0b0'0001'000);           // min normal
  EXPECT_EQ(float_to_e4m3(0.875f * std::ldexp(1.0f, -6)), 0b0'0000'111);  // max subnormal
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.0f, -9)), 0b0'0000'001);           // min subnormal
  EXPECT_EQ(float_to_e4m3(1.0f), 0b0'0111'000);
  EXPECT_EQ(float_to_e4m3(0.0f), 0x00);
  EXPECT_EQ(float_to_e4m3(-0.0f), 0x80);
  EXPECT_EQ(float_to_e4m3(std::nanf("")), 0b0'1111'111);   // S.1111.111: NaN
  EXPECT_EQ(float_to_e4m3(-std::nanf("")), 0b0'1111'111);  // canonical, as CUDA's cast
  // Decoding is the inverse on every finite encoding.
  for (int v = 0; v < 256; ++v) {
    if ((v & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(e4m3_to_float(static_cast<uint8_t>(v))));
      continue;
    }
    EXPECT_EQ(float_to_e4m3(e4m3_to_float(static_cast<uint8_t>(v))), v) << v;
  }
}

// Round to nearest, ties to even (OFP8 §5): 1 + 1/16 lies halfway between 1 (mantissa 000) and
// 1.125 (001): even is 1. 1 + 3/16 between 1.125 (001) and 1.25 (010): 1.25. Below the min
// subnormal, 2^-10 is halfway between 0 and 2^-9: 0; 1.5 · 2^-10 rounds up to 2^-9.
// Saturating conversion (§5, TE's SATFINITE): 464 = 448 + half an ulp is a tie with the NaN
// encoding's magnitude 480, and goes to 448 (mantissa 110, even); beyond it, and infinity, 448.
TEST(Fp8E4m3, RoundsHalfToEvenAndSaturates) {
  EXPECT_EQ(e4m3_to_float(float_to_e4m3(1.0625f)), 1.0f);
  EXPECT_EQ(e4m3_to_float(float_to_e4m3(1.1875f)), 1.25f);
  EXPECT_EQ(e4m3_to_float(float_to_e4m3(1.07f)), 1.125f);
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.0f, -10)), 0x00);
  EXPECT_EQ(float_to_e4m3(1.5f * std::ldexp(1.0f, -10)), 0x01);
  // 15.5/8 · 2^3 = 15.5 lies between 15 (1.875 · 8) and 16 (the next binade): even is 16.
  EXPECT_EQ(e4m3_to_float(float_to_e4m3(15.5f)), 16.0f);
  for (float v : {464.0f, 465.0f, 1e6f, 3e38f, INFINITY}) EXPECT_EQ(float_to_e4m3(v), 0x7e) << v;
  EXPECT_EQ(float_to_e4m3(-INFINITY), 0xfe);
}

// The host op: rows × cols of x, scale 8, amax starting at 0.5 (what an earlier tensor of the
// step left): out[r, c] = e4m3(8 · x[r, c]), out2[c, r] the same byte, amax = max(0.5, max |x|)
// over the unscaled x, exactly.
TEST(Fp8CastTranspose, HostWritesTheCopyItsTransposeAndTheAmax) {
  const int64_t R = 5, C = 7;
  std::vector<float> x(R * C);
  for (int64_t i = 0; i < R * C; ++i) x[i] = 0.37f * static_cast<float>(i % 11) - 1.9f;
  x[17] = -63.0f;  // the largest magnitude, negative; 8 · 63 = 504 saturates to -448
  std::vector<uint8_t> out(R * C), out_t(R * C);
  float amax = 0;
  const Status st = run_host_ranks(1, [&](Backend& be) -> Status {
    MemOpArgs a;
    a.op = MemOp::kFp8CastTranspose;
    a.rows = R;
    a.cols = C;
    const MemOperands o = memory_operands(a);
    SP_ASSIGN_OR_RETURN(a.x, be.allocate(o.x.count, o.x.type));
    SP_ASSIGN_OR_RETURN(a.w, be.allocate(o.w.count, o.w.type));
    SP_ASSIGN_OR_RETURN(a.b, be.allocate(o.b.count, o.b.type));
    SP_ASSIGN_OR_RETURN(a.out, be.allocate(o.out.count, o.out.type));
    SP_ASSIGN_OR_RETURN(a.out2, be.allocate(o.out2.count, o.out2.type));
    const float scale = 8.0f, amax0 = 0.5f;
    SP_RETURN_IF_ERROR(be.upload(a.x, x.data()));
    SP_RETURN_IF_ERROR(be.upload(a.w, &scale));
    SP_RETURN_IF_ERROR(be.upload(a.b, &amax0));
    SP_RETURN_IF_ERROR(be.memory_op(a));
    SP_RETURN_IF_ERROR(be.download(a.out, out.data()));
    SP_RETURN_IF_ERROR(be.download(a.out2, out_t.data()));
    return be.download(a.b, &amax);
  });
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(amax, 63.0f);
  EXPECT_EQ(out[17], 0xfe);  // -448
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t c = 0; c < C; ++c) {
      EXPECT_EQ(out[r * C + c], float_to_e4m3(8.0f * x[r * C + c])) << r << "," << c;
      EXPECT_EQ(out_t[c * R + r], out[r * C + c]) << r << "," << c;
    }
  }
  // 0.37 · 3 - 1.9 = -0.79: 8 · -0.79 = -6.32 rounds to -6.5 (binade [4, 8), quantum 0.5); x is
  // the float nearest -0.79, off by far less than the quarter-quantum margin.
  EXPECT_EQ(e4m3_to_float(out[3]), -6.5f);
}

// A reduction over e4m3 is refused naming the op; an all-gather moves the bytes.
TEST(Fp8CastTranspose, CollectivesMoveE4m3ButDoNotReduceIt) {
  const Status st = run_host_ranks(2, [](Backend& be) -> Status {
    SP_ASSIGN_OR_RETURN(Buffer send, be.allocate(4, ElemType::kFp8E4m3));
    SP_ASSIGN_OR_RETURN(Buffer recv, be.allocate(8, ElemType::kFp8E4m3));
    const uint8_t mine[4] = {static_cast<uint8_t>(be.rank()), 1, 2, 0x7e};
    SP_RETURN_IF_ERROR(be.upload(send, mine));
    SP_RETURN_IF_ERROR(be.collective(be.world(), {CollectiveOp::kAllGather, send, recv, 4}));
    uint8_t got[8];
    SP_RETURN_IF_ERROR(be.download(recv, got));
    if (got[0] != 0 || got[4] != 1 || got[7] != 0x7e) return Status::internal("gathered wrong");
    const Status sum = be.collective(be.world(), {CollectiveOp::kAllReduce, send, send, 4});
    if (sum.is_ok() || sum.message().find("all_reduce") == std::string::npos ||
        sum.message().find("e4m3") == std::string::npos)
      return Status::internal("all_reduce over e4m3 not refused: " + sum.message());
    return Status::ok();
  });
  EXPECT_TRUE(st.is_ok()) << st.message();
}

}  // namespace
}  // namespace scaleplan::runtime
