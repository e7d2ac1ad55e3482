// The GEMM dims of an aten op from record_shapes' "Input Dims" (sim/kineto_ops.h), by PyTorch's
// argument order (aten/src/ATen/native/native_functions.yaml): mm(self, mat2),
// addmm(self, mat1, mat2), bmm(self, mat2), _scaled_mm(self, mat2, ...).
#include <array>
#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "sim/kineto_ops.h"

namespace scaleplan::sim {
namespace {

using Dims = std::array<int64_t, 4>;

TEST(KinetoOps, GemmDimsFollowEachOpsArguments) {
  // [8, 16] · [16, 4]: m 8, n 4, k 16.
  EXPECT_EQ(aten_gemm_dims("aten::mm", Json{{"Input Dims", {{8, 16}, {16, 4}}}}),
            (Dims{8, 4, 16, 1}));
  // addmm's first input is the bias.
  size_t input = 9;
  EXPECT_EQ(aten_gemm_dims("aten::addmm", Json{{"Input Dims", {{4}, {8, 16}, {16, 4}}}}, &input),
            (Dims{8, 4, 16, 1}));
  EXPECT_EQ(input, 1u);
  EXPECT_EQ(aten_gemm_dims("aten::bmm", Json{{"Input Dims", {{3, 8, 16}, {3, 16, 4}}}}),
            (Dims{8, 4, 16, 3}));
  EXPECT_EQ(aten_gemm_dims("aten::_scaled_mm", Json{{"Input Dims", {{8, 16}, {16, 4}, {}, {}}}}),
            (Dims{8, 4, 16, 1}));
}

TEST(KinetoOps, DimsThatDoNotMakeAGemmAreNone) {
  const Dims none{};
  // Inner dims differ; batch differs; a negative or zero dim (a malformed trace); not a GEMM op;
  // no dims recorded.
  EXPECT_EQ(aten_gemm_dims("aten::mm", Json{{"Input Dims", {{8, 16}, {15, 4}}}}), none);
  EXPECT_EQ(aten_gemm_dims("aten::bmm", Json{{"Input Dims", {{3, 8, 16}, {2, 16, 4}}}}), none);
  EXPECT_EQ(aten_gemm_dims("aten::mm", Json{{"Input Dims", {{-8, 16}, {16, 4}}}}), none);
  EXPECT_EQ(aten_gemm_dims("aten::mm", Json{{"Input Dims", {{8, 16}, {16, 0}}}}), none);
  EXPECT_EQ(aten_gemm_dims("aten::add", Json{{"Input Dims", {{8, 16}, {16, 4}}}}), none);
  EXPECT_EQ(aten_gemm_dims("aten::mm", Json::object()), none);
}

}  // namespace
}  // namespace scaleplan::sim
