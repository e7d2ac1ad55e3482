// Time and cost to train: how long a run of `train_tokens` takes at a planned throughput, how many
// GPU-hours it uses and what they cost.
//
// One source for the arithmetic that `plan --train-tokens`, `sweep` and `plan --deadline` report:
//   seconds   = train_tokens / (tokens/s/GPU · GPUs)          (steady-state throughput, no
//   restarts,
//                                                             no evaluation or checkpoint pauses)
//   days      = seconds / 86,400
//   GPU-hours = GPUs · seconds / 3,600                        (= train_tokens / (tokens/s/GPU ·
//   3,600):
//                                                             independent of the GPU count at equal
//                                                             per-GPU throughput)
//   cost      = GPU-hours · price per GPU-hour               (currency-agnostic: the user's unit)
// Wall-clock durations (a deadline of weeks) are plain seconds as doubles: the simulated clock
// (core/units.h `Duration`, picoseconds in int64) saturates at ~106 days.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace scaleplan::planner {

inline constexpr double kSecondsPerDay = 86400;

struct TrainingCost {
  double seconds = 0;          // wall clock
  double days = 0;             // seconds / 86,400
  double gpu_hours = 0;        // GPUs · seconds / 3,600
  std::optional<double> cost;  // gpu_hours · price, when a price was given
};

// The time and cost of `train_tokens` tokens on `gpus` GPUs at `tokens_per_s_per_gpu`; nullopt
// when there is nothing to report (no tokens or no throughput).
std::optional<TrainingCost> training_cost(double tokens_per_s_per_gpu, int64_t gpus,
                                          double train_tokens, std::optional<double> gpu_hour_cost);

// The budget options of `plan` and `sweep`, checked together: --train-tokens (0: not given) must be
// finite and non-negative; --gpu-hour-cost (a price per GPU-hour, e.g. "2.5"; empty: not given) a
// finite non-negative number, and only with --train-tokens. Returns the price.
Result<std::optional<double>> check_budget_options(double train_tokens,
                                                   std::string_view gpu_hour_cost);

// A wall-clock duration as a user writes a deadline: a number with a unit, "60d", "1.5w", "1440h",
// "90m" (minutes), "3600s"; w = 7 days. Returns seconds; errors name `what` and the text.
Result<double> parse_wall_time(std::string_view text, std::string_view what);

// "60.0 days", "36.2 hours" or "12.5 minutes": the unit that keeps the number readable.
std::string format_wall_time(double seconds);

}  // namespace scaleplan::planner
