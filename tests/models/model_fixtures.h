// Helpers shared by the models tests: a bundled preset and a resolved layout, each failing the
// calling test (not crashing it) when the input is wrong, and an op of a list by name.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/layout.h"
#include "models/model_spec.h"
#include "models/operators.h"

namespace scaleplan::models::testing {

inline ModelSpec preset(const std::string& name) {
  auto m = load_model(name);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return m.is_ok() ? *m : ModelSpec{};
}

inline Layout resolved(const ModelSpec& m, const std::string& text, int64_t seq, int64_t gpus) {
  auto parsed = parse_layout(text);
  EXPECT_TRUE(parsed.is_ok()) << parsed.status().message();
  if (!parsed.is_ok()) return Layout{};
  auto l = resolve_layout(*parsed, layout_constraints(m, seq), gpus);
  EXPECT_TRUE(l.is_ok()) << l.status().message();
  return l.is_ok() ? *l : *parsed;
}

// The op named `name` in `ops`, nullptr if none is.
inline const Op* find(const std::vector<Op>& ops, const std::string& name) {
  for (const Op& op : ops) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

}  // namespace scaleplan::models::testing
