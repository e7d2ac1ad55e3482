#include "sim/kineto_ops.h"

#include <nlohmann/json.hpp>

namespace scaleplan::sim {

std::vector<int64_t> aten_input_dims(const Json& args, size_t i) {
  std::vector<int64_t> d;
  const auto it = args.find("Input Dims");
  if (it == args.end() || !it->is_array() || i >= it->size() || !(*it)[i].is_array()) return d;
  for (const Json& x : (*it)[i]) {
    if (!x.is_number_integer()) return {};
    d.push_back(x.get<int64_t>());
  }
  return d;
}

std::array<int64_t, 4> aten_gemm_dims(std::string_view op, const Json& args, size_t* input) {
  // Argument order from PyTorch's aten/src/ATen/native/native_functions.yaml: mm(self, mat2),
  // addmm(self, mat1, mat2, ...), bmm(self, mat2), _scaled_mm(self, mat2, scale_a, ...).
  const bool batched = op == "aten::bmm";
  if (op != "aten::mm" && op != "aten::addmm" && !batched && op != "aten::_scaled_mm") return {};
  const size_t a = op == "aten::addmm" ? 1 : 0;
  if (input != nullptr) *input = a;
  const std::vector<int64_t> x = aten_input_dims(args, a), w = aten_input_dims(args, a + 1);
  const size_t rank = batched ? 3 : 2;
  if (x.size() != rank || w.size() != rank || x[rank - 1] != w[rank - 2] ||
      (batched && x[0] != w[0]))
    return {};
  for (const int64_t d : x)
    if (d <= 0) return {};  // an empty or malformed matrix is no GEMM
  if (w[rank - 1] <= 0) return {};
  return {x[rank - 2], w[rank - 1], x[rank - 1], batched ? x[0] : 1};
}

}  // namespace scaleplan::sim
