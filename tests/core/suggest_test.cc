// "Did you mean": a slip of one or two characters finds the name; anything else finds none.
#include "core/suggest.h"

#include <gtest/gtest.h>

namespace scaleplan {
namespace {

TEST(Suggest, SlipsFindTheName) {
  const std::vector<std::string> presets = {"llama3-70b", "llama3-8b", "mixtral-8x7b"};
  EXPECT_EQ(closest_name("llama3-8", presets), "llama3-8b");
  EXPECT_EQ(closest_name("Llama3-8B", presets), "llama3-8b");  // the case differs
  EXPECT_EQ(closest_name("lama3-70b", presets), "llama3-70b");
  EXPECT_EQ(closest_name("mixtral", presets), "mixtral-8x7b");  // a prefix
  const std::vector<std::string> keys = {"tp", "pp", "dp", "cp", "ep", "gbs", "mbs"};
  EXPECT_EQ(closest_name("tpp", keys), "tp");
  EXPECT_EQ(closest_name("gsb", keys), std::nullopt);  // two edits in three letters
  const std::vector<std::string> commands = {"model", "memory", "simulate", "plan"};
  EXPECT_EQ(closest_name("smulate", commands), "simulate");
  EXPECT_EQ(closest_name("run", commands), std::nullopt);
  EXPECT_EQ(did_you_mean("interleave", {"afab", "1f1b", "interleaved"}),
            " (did you mean 'interleaved'?)");
  EXPECT_EQ(did_you_mean("xyz", {"afab"}), "");
}

}  // namespace
}  // namespace scaleplan
