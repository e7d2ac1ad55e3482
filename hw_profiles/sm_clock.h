// The SM clock of a GPU held at its power limit, per training step (docs/hw_profiles.md,
// "GH100 under its 700 W limit").
//
// A step that keeps a GPU at its power limit runs it at the clock where the limit is met, and
// every kernel whose speed is set by the SM clock (tensor-core GEMMs and attention, PyTorch's
// casting loop) runs at that clock. Held at the limit, the dynamic power averaged over the step's
// kernels is constant:
//     f^alpha · (d + (1 − d)·r) = f_1^alpha
// with f the SM clock, d the share of the busy kernel time in tensor-core kernels, r the power of
// the other kernels relative to theirs at equal clock, f_1 the clock of a run of tensor-core
// kernels only (d = 1) and alpha the exponent of dynamic power in the clock (P = C·V²·f with the
// voltage rising in proportion to the clock: alpha = 3). The profile gives two measured ends: f_1,
// and the clock f_0 of a step with tensor share d_0; they fix
// r = ((f_1/f_0)^alpha − d_0)/(1 − d_0). No step runs above the GPU's maximum clock.
//
// Each clock-bound efficiency of the profile was measured at some clock (measured_at); a kernel's
// clock-bound time at the step's clock f is its time at that clock times f_measured / f.
//
// Plain values; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace scaleplan::hw {

struct SmClock {
  double max_hz = 0;  // the GPU's maximum SM clock; 0: no clock model (no time moves)
  // The power-limit ends: a step of tensor share `tensor_share` ran at `mixed_hz`; tensor-core
  // kernels back to back at `tensor_bound_hz`. 0: the GPU does not reach its limit (always max_hz).
  double tensor_share = 0;
  double mixed_hz = 0;
  double tensor_bound_hz = 0;
  double exponent = 3;  // alpha
  // The clocks the efficiencies were measured at (0: max_hz): gemm_bf16 and gemm_fp8, the
  // attention curves, memory.cast_loop.
  double gemm_hz = 0;
  double attention_hz = 0;
  double cast_loop_hz = 0;
  bool operator==(const SmClock&) const = default;

  bool enabled() const { return max_hz > 0; }
  bool power_limited() const { return tensor_bound_hz > 0; }
  double gemm_at() const { return gemm_hz > 0 ? gemm_hz : max_hz; }
  double attention_at() const { return attention_hz > 0 ? attention_hz : max_hz; }
  double cast_loop_at() const { return cast_loop_hz > 0 ? cast_loop_hz : max_hz; }
  // r of the header comment, from the two measured ends.
  double other_power() const;
};

// The checks a profile's sm_clock passes (ctx names it in the message): clocks positive and at
// most max_hz, f_1 <= f_0, 0 < d_0 < 1, 1 <= alpha <= 4, and 0 <= r < 1.
Status validate(const SmClock& c, const std::string& ctx);

// The clock of a step whose busy kernel time at clock f is tensor_cycles/f (tensor-core kernels:
// their time at the clock they were measured at times that clock), other_cycles/f (other kernels
// bound by the SM clock) and fixed_seconds (kernels bound by memory bandwidth). max_hz when the
// clock model is off or the step does not reach the limit.
double step_clock(const SmClock& c, double tensor_cycles, double other_cycles,
                  double fixed_seconds);

// A clock as profiles write it: "1980MHz", "1.98GHz", "1980000000Hz". Errors name `what`.
Result<double> parse_clock(std::string_view text, std::string_view what);
std::string format_clock(double hz);  // "1980MHz"

}  // namespace scaleplan::hw
