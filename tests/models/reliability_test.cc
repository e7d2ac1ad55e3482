// Input bounds of the model config and the validation-record checks (docs/reliability.md); each
// case is a reproducer of issue 33's mutation campaign.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "models/accounting.h"
#include "models/model_spec.h"
#include "models/run_records.h"

namespace scaleplan::models {
namespace {

nlohmann::json llama() {
  return {{"model_type", "llama"},  {"hidden_size", 256},       {"intermediate_size", 768},
          {"num_hidden_layers", 4}, {"num_attention_heads", 8}, {"num_key_value_heads", 4},
          {"vocab_size", 1024}};
}

std::string error_of(const nlohmann::json& cfg) {
  auto r = model_from_config(cfg, "m", "config.json");
  EXPECT_FALSE(r.is_ok());
  if (r.is_ok()) return "";
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidInput);
  return r.status().message();
}

TEST(ModelBounds, AbsurdSizesAreRefusedWithTheLimit) {
  // vocab_size 2^62 gave 0 embedding parameters (overflow) and "fits".
  auto cfg = llama();
  cfg["vocab_size"] = int64_t{1} << 62;
  EXPECT_EQ(error_of(cfg),
            "config.json: vocab_size: 4611686018427387904 is too large (at most 2147483647)");
  cfg["vocab_size"] = 1 << 25;
  EXPECT_EQ(error_of(cfg),
            "config.json: vocab_size: 33554432 is more than the 16777216 scaleplan models (several "
            "times any published model's)");
  // num_hidden_layers 10^6 took 4 GB in simulate; 2*10^8 ended in bad_alloc.
  cfg = llama();
  cfg["num_hidden_layers"] = 1000000;
  EXPECT_EQ(error_of(cfg), "config.json: num_hidden_layers: 1000000 is too large (at most 4096)");
  // num_nextn_predict_layers 1072 took 37 s per record in the validation_records fuzzer and
  // 4096 took 100 s in `memory` (the modules were merged one by one, quadratic); a plan memory-
  // checks tens of thousands of layouts, each with every module.
  cfg = llama();
  cfg["num_nextn_predict_layers"] = 65;
  EXPECT_EQ(error_of(cfg),
            "config.json: num_nextn_predict_layers: 65 is more than the 64 scaleplan models "
            "(several times any published model's)");
  // 2^32 wrapped to 0 in an int somewhere downstream.
  cfg = llama();
  cfg["hidden_size"] = int64_t{1} << 32;
  EXPECT_NE(error_of(cfg).find("hidden_size"), std::string::npos);
  // Every field within its bound, but the product past 100T parameters.
  cfg = llama();
  cfg["hidden_size"] = 1 << 18;
  cfg["intermediate_size"] = 1 << 20;
  cfg["num_hidden_layers"] = 4096;
  cfg["num_attention_heads"] = 1 << 10;
  cfg["num_key_value_heads"] = 1 << 10;
  EXPECT_NE(error_of(cfg).find("parameters, more than the 100T"), std::string::npos);
}

TEST(ModelBounds, TheLargestPublishedModelsStayWithinThem) {
  for (const char* preset : {"llama3.1-405b", "deepseek-v3", "gpt3-175b", "qwen3-235b-a22b"}) {
    auto m = load_model(preset);
    ASSERT_TRUE(m.is_ok()) << preset << ": " << m.status().message();
    EXPECT_GT(count_params(*m).total, 0);
  }
}

std::string records_error(const std::string& text) {
  const Status st = check_records(nlohmann::json::parse(text), "runs.json");
  EXPECT_FALSE(st.is_ok()) << text;
  EXPECT_EQ(st.code(), Status::Code::kInvalidInput);
  return st.message();
}

TEST(ValidationRecords, MistypedFieldsNameTheRecordAndTheField) {
  // `validate` on [{"id": 5}] or [{"measured": 5}] threw nlohmann's type_error in a worker thread
  // and aborted; a record without "model" read a missing key through const operator[] (UB).
  EXPECT_EQ(records_error(R"([{"id": 5, "model": {}}])"),
            "runs.json: records[0]: id: expected a string, got 5");
  EXPECT_EQ(records_error(R"([{"model": {}, "measured": 5}])"),
            "runs.json: records[0]: measured: expected an object, got 5");
  EXPECT_EQ(records_error(R"([{"id": "a"}])"),
            "runs.json: records[0]: model: expected the model's config.json object, got nothing");
  EXPECT_EQ(records_error(R"([{"model": {}}, {"model": {}, "gpus": "8"}])"),
            "runs.json: records[1]: gpus: expected an integer, got \"8\"");
  EXPECT_EQ(records_error(R"([{"model": {}, "measured": {"mfu": "high"}}])"),
            "runs.json: records[0]: measured: mfu: expected a number, got \"high\"");
  EXPECT_EQ(records_error(R"([{"model": {}, "measured": {"status": "done"}}])"),
            "runs.json: records[0]: measured: status: expected ok, oom or failed, got \"done\"");
  EXPECT_EQ(records_error(R"([{"model": {}, "cluster": null}])"),
            "runs.json: records[0]: cluster: null; leave the key out instead");
  EXPECT_EQ(records_error(R"({"model": {}})"), "runs.json: expected a JSON array of run records");
  EXPECT_EQ(records_error(R"([3])"), "runs.json: records[0]: expected a JSON object");
}

TEST(ValidationRecords, LongIdsAreRefusedWithoutEchoingThem) {
  // A 50,000-character id overflowed the stack in std::regex (`--match`).
  nlohmann::json rec = {{"id", std::string(50000, 'x')}, {"model", llama()}};
  const Status st = check_records(nlohmann::json::array({rec}), "runs.json");
  EXPECT_EQ(st.message(), "runs.json: records[0]: id: 50000 characters, at most 256");
}

TEST(ValidationRecords, NullMetricsMeanTheSourceDoesNotSay) {
  // The schema's null ("the source does not say") stays valid, as do records of both shipped files.
  EXPECT_TRUE(check_records(nlohmann::json::parse(
                                R"([{"id": "a", "model": {}, "gpus": 8, "seq_len": 2048,
                                     "measured": {"status": "ok", "mfu": null, "sec_per_iter": 1.5}}])"),
                            "runs.json")
                  .is_ok());
}

}  // namespace
}  // namespace scaleplan::models
