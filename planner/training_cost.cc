#include "planner/training_cost.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace scaleplan::planner {
namespace {

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

std::optional<TrainingCost> training_cost(double tokens_per_s_per_gpu, int64_t gpus,
                                          double train_tokens,
                                          std::optional<double> gpu_hour_cost) {
  if (train_tokens <= 0 || tokens_per_s_per_gpu <= 0 || gpus <= 0) return std::nullopt;
  TrainingCost c;
  c.seconds = train_tokens / (tokens_per_s_per_gpu * static_cast<double>(gpus));
  c.days = c.seconds / kSecondsPerDay;
  c.gpu_hours = static_cast<double>(gpus) * c.seconds / 3600;
  if (gpu_hour_cost) c.cost = c.gpu_hours * *gpu_hour_cost;
  return c;
}

Result<std::optional<double>> check_budget_options(double train_tokens,
                                                   std::string_view gpu_hour_cost) {
  if (train_tokens < 0 || !std::isfinite(train_tokens))
    return Status::invalid("--train-tokens: must be positive, got " + fixed(train_tokens, 0));
  if (gpu_hour_cost.empty()) return std::optional<double>();
  double price = 0;
  const char* end = gpu_hour_cost.data() + gpu_hour_cost.size();
  auto [p, ec] = std::from_chars(gpu_hour_cost.data(), end, price);
  if (ec != std::errc() || p != end || !std::isfinite(price))
    return Status::invalid("--gpu-hour-cost: '" + std::string(gpu_hour_cost) +
                           "' is not a number (a price per GPU-hour, e.g. 2.5)");
  if (price < 0)
    return Status::invalid("--gpu-hour-cost: must not be negative, got " +
                           std::string(gpu_hour_cost));
  if (train_tokens <= 0)
    return Status::invalid("--gpu-hour-cost " + std::string(gpu_hour_cost) +
                           ": needs --train-tokens (the cost is of training that many tokens)");
  return std::optional<double>(price);
}

Result<double> parse_wall_time(std::string_view text, std::string_view what) {
  const std::string shown(text);
  auto bad = [&](const std::string& why) {
    return Status::invalid(std::string(what) + ": '" + shown + "' " + why);
  };
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  double v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p == text.data() || !std::isfinite(v))
    return bad("is not a duration (a number with a unit: 60d, 1.5w, 1440h, 90m, 3600s)");
  std::string_view unit(p, static_cast<size_t>(end - p));
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  double scale = 0;
  if (unit == "s")
    scale = 1;
  else if (unit == "m" || unit == "min")
    scale = 60;
  else if (unit == "h")
    scale = 3600;
  else if (unit == "d")
    scale = kSecondsPerDay;
  else if (unit == "w")
    scale = 7 * kSecondsPerDay;
  else
    return bad("has no unit of time: write s, m (minutes), h, d or w, e.g. 60d");
  if (v <= 0) return bad("must be positive");
  return v * scale;
}

std::string format_wall_time(double seconds) {
  if (seconds >= 2 * kSecondsPerDay) return fixed(seconds / kSecondsPerDay, 1) + " days";
  if (seconds >= 2 * 3600) return fixed(seconds / 3600, 1) + " hours";
  return fixed(seconds / 60, 1) + " minutes";
}

}  // namespace scaleplan::planner
