// Calibration sections with mistyped fields (docs/reliability.md): an invalid-input error naming
// the field, where nlohmann's type_error used to surface as exit 1.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "calibrate/calibration.h"

namespace scaleplan::calibrate {
namespace {

nlohmann::json section() {
  nlohmann::json coef = {{"overhead_s", 0},
                         {"seconds_per_flop", 1e-12},
                         {"seconds_per_padded_flop", 0},
                         {"seconds_per_byte", 0},
                         {"seconds_per_row", 0}};
  nlohmann::json fit = {{"coefficients", coef}, {"samples", 8}};
  return {{"format", 1},
          {"gemm", fit},
          {"attention_forward", fit},
          {"attention_backward", fit},
          {"memory_bound", fit},
          {"collectives",
           {{{"op", "all_reduce"},
             {"ranks", 8},
             {"placement", "intra_node"},
             {"latency_s", 3e-5},
             {"seconds_per_byte", 1e-11}}}}};
}

std::string error_of(const nlohmann::json& j) {
  auto c = calibration_from_json(j, "p.json");
  EXPECT_FALSE(c.is_ok()) << j.dump();
  if (c.is_ok()) return "";
  EXPECT_EQ(c.status().code(), Status::Code::kInvalidInput);
  return c.status().message();
}

TEST(CalibrationInput, MistypedFieldsNameTheField) {
  ASSERT_TRUE(calibration_from_json(section(), "p.json").is_ok());
  auto j = section();
  j["gemm"]["cv_error"] = {{"median", "low"}};
  EXPECT_EQ(error_of(j),
            "p.json: calibration: gemm: cv_error: median: expected a number, got \"low\"");
  j = section();
  j["gemm"]["samples"] = "8";
  EXPECT_EQ(error_of(j), "p.json: calibration: gemm: samples: expected an integer, got \"8\"");
  j = section();
  j["collectives"][0]["busbw_GBps"] = "fast";
  EXPECT_EQ(error_of(j),
            "p.json: calibration: collectives[0]: busbw_GBps: expected a number, got \"fast\"");
  j = section();
  j["collectives"][0]["latency_s"] = -1;
  EXPECT_NE(error_of(j).find("latency_s: -1 is not between 0 and 3600 seconds"), std::string::npos);
  j = section();
  j["collectives"] = 5;
  EXPECT_EQ(error_of(j), "p.json: calibration: collectives: expected an array, got 5");
}

TEST(CalibrationInput, MeasurementsOfAPartialProfileAreChecked) {
  // `profile --resume` reads these from OUT.partial, written by an interrupted run or by hand.
  auto m = measurements_from_json(nlohmann::json::parse(R"({"kernels": {"a": 1}})"), "p.partial");
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().message(),
            "p.partial: measurements: kernels: expected an array, got {\"a\":1}");
  m = measurements_from_json(nlohmann::json::parse(R"({"collectives": [{"op": "all_reduce",
      "ranks": 8, "placement": "intra_node", "bytes": 1024, "time_s": 1e9}]})"),
                             "p.partial");
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("time_s: 1000000000.0 is not between 0 and 3600"),
            std::string::npos)
      << m.status().message();
}

}  // namespace
}  // namespace scaleplan::calibrate
