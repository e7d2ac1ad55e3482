#include "core/framework.h"

#include "core/enum_names.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace scaleplan {

constexpr std::string_view kFrameworkIdNames[] = {"megatron", "megatron-2022", "deepspeed-2021",
                                                  "nanotron", "torchtitan",    "torchtitan-2025"};
static_assert(std::ssize(kFrameworkIdNames) == kNumFrameworks);

std::string_view to_string(FrameworkId f) { return name_in(kFrameworkIdNames, f); }

Result<FrameworkId> parse_framework(std::string_view name) {
  if (name == "megatron-lm" || name == "Megatron-LM") return FrameworkId::kMegatron;
  if (auto f = value_in<FrameworkId>(kFrameworkIdNames, name)) return *f;
  return Status::invalid("framework: '" + std::string(name) +
                         "' is not one of megatron, megatron-2022, deepspeed-2021, nanotron, "
                         "torchtitan, torchtitan-2025");
}

bool same_family(FrameworkId a, FrameworkId b) {
  auto family = [](FrameworkId f) {
    if (f == FrameworkId::kMegatron2022) return FrameworkId::kMegatron;
    if (f == FrameworkId::kTorchtitan2025) return FrameworkId::kTorchtitan;
    return f;
  };
  return family(a) == family(b);
}

RunFramework classify_run_framework(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  auto has = [&](std::string_view s) { return lower.find(s) != std::string::npos; };
  RunFramework r;
  if (has("nanotron")) {
    r.family = FrameworkFamily::kNanotron;
  } else if (lower.starts_with("megatron")) {
    r.family = FrameworkFamily::kMegatron;
  } else if (has("torchtitan")) {
    r.family = FrameworkFamily::kTorchtitan;
    r.compiled = has("compile");
  } else if (has("deepspeed")) {
    r.family = FrameworkFamily::kDeepspeed;
  }
  if (has("megatron-bridge")) {
    r.recipes = RunRecipes::kMegatronBridge;
  } else if (has("nemo")) {
    r.recipes = has("nemo 2 scripts") ? RunRecipes::kNemo2 : RunRecipes::kNemo;
  }
  r.megatron_bridge_first = lower.starts_with("megatron-bridge");
  r.dgxc = has("dgxc-benchmarking");
  r.year_2021 = has("(2021)");
  return r;
}

RunConventions resolve_run_framework(const RunFramework& run, std::optional<int> month) {
  auto before = [&](int year, int month_index) {
    return month && *month < year * 12 + month_index;
  };
  // torchtitan's conventions by date: PyTorch 2.9 (October 2025) fused RMSNorm.
  const FrameworkId torchtitan =
      before(2025, 9) ? FrameworkId::kTorchtitan2025 : FrameworkId::kTorchtitan;
  switch (run.family) {
    case FrameworkFamily::kNanotron:
      return {FrameworkId::kNanotron, std::nullopt};
    case FrameworkFamily::kTorchtitan:
      if (run.compiled) return {FrameworkId::kMegatron, torchtitan};
      return {torchtitan, std::nullopt};
    case FrameworkFamily::kDeepspeed:
      if (before(2021, 6)) return {FrameworkId::kDeepspeed2021, std::nullopt};
      break;
    case FrameworkFamily::kMegatron:
    case FrameworkFamily::kOther:
      break;
  }
  if (before(2023, 0)) return {FrameworkId::kMegatron2022, std::nullopt};
  return {FrameworkId::kMegatron, std::nullopt};
}

}  // namespace scaleplan
