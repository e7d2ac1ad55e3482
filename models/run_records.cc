// Validation records checked field by field; the schema is in run_records.h.
#include "models/run_records.h"

#include <nlohmann/json.hpp>

#include "core/json_util.h"
#include "core/layout.h"
#include "models/model_spec.h"

namespace scaleplan::models {

Status check_records(const Json& records, std::string_view file) {
  if (!records.is_array())
    return Status::invalid(std::string(file) + ": expected a JSON array of run records");
  for (size_t i = 0; i < records.size(); ++i) {
    const Json& rec = records[i];
    const std::string ctx = std::string(file) + ": records[" + std::to_string(i) + "]";
    if (!rec.is_object()) return Status::invalid(ctx + ": expected a JSON object");
    if (!rec.contains("model") || !rec["model"].is_object())
      return Status::invalid(ctx + ": model: expected the model's config.json object, got " +
                             (rec.contains("model") ? json_brief(rec["model"]) : "nothing"));
    // The readers take these with nlohmann's value(), which throws on null: null is refused here.
    for (const char* key : {"id", "source", "framework", "cluster", "layout", "notes", "gpus",
                            "seq_len", "incomplete", "no_profile", "measured"}) {
      if (rec.contains(key) && rec[key].is_null())
        return Status::invalid(ctx + ": " + key + ": null; leave the key out instead");
    }
    for (const char* key : {"id", "source", "framework", "cluster", "layout", "notes"}) {
      SP_ASSIGN_OR_RETURN(const std::string text, json_string(rec, key, ctx, ""));
      if (std::string_view(key) == "id" && text.size() > kMaxRecordIdChars)
        return Status::invalid(ctx + ": id: " + std::to_string(text.size()) +
                               " characters, at most " + std::to_string(kMaxRecordIdChars));
    }
    SP_RETURN_IF_ERROR(json_int(rec, "gpus", ctx, 1, true, kMaxGpus).status());
    SP_RETURN_IF_ERROR(json_int(rec, "seq_len", ctx, 1, true, kMaxSeqLen).status());
    for (const char* key : {"incomplete", "no_profile"})
      SP_RETURN_IF_ERROR(json_bool(rec, key, ctx, false).status());
    if (!json_has(rec, "measured")) continue;
    const Json& measured = rec["measured"];
    const std::string mctx = ctx + ": measured";
    if (!measured.is_object())
      return Status::invalid(mctx + ": expected an object, got " + json_brief(measured));
    for (const char* key : {"status", "timing_valid"}) {
      if (measured.contains(key) && measured[key].is_null())
        return Status::invalid(mctx + ": " + key + ": null; leave the key out instead");
    }
    SP_ASSIGN_OR_RETURN(const std::string status, json_string(measured, "status", mctx, "ok"));
    if (status != "ok" && status != "oom" && status != "failed")
      return Status::invalid(mctx + ": status: expected ok, oom or failed, got " +
                             json_brief(measured["status"]));
    SP_RETURN_IF_ERROR(json_bool(measured, "timing_valid", mctx, true).status());
    for (const char* key : {"sec_per_iter", "tokens_per_s_per_gpu", "mfu", "tflops_per_gpu", "hfu",
                            "peak_memory_gib", "peak_reserved_gib"})
      SP_RETURN_IF_ERROR(json_number(measured, key, mctx, 0.0).status());
  }
  return Status::ok();
}

}  // namespace scaleplan::models
