// Memory-model validation against published runs; conventions in memory_validation.h.
#include "models/memory_validation.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/json_util.h"
#include "core/layout.h"
#include "models/memory.h"

namespace scaleplan::models {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::optional<double> number(const Json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_number()) return std::nullopt;
  return obj[key].get<double>();
}

void summarize(const std::vector<std::pair<double, std::string>>& errs, int& n, double& median,
               double& worst, std::string& worst_id) {
  n = static_cast<int>(errs.size());
  if (errs.empty()) return;
  std::vector<double> v;
  for (const auto& [e, id] : errs) v.push_back(e);
  std::sort(v.begin(), v.end());
  median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  const auto it = std::max_element(errs.begin(), errs.end());
  worst = it->first;
  worst_id = it->second;
}

}  // namespace

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

std::vector<int> nanotron_chunk_layers(const ModelSpec& m, int pp) {
  const double d_qkv = static_cast<double>(m.hidden / m.num_heads);
  const double layer_cost =
      4.0 * static_cast<double>(m.num_heads) * d_qkv * static_cast<double>(m.hidden) +
      3.0 * static_cast<double>(m.ffn) * static_cast<double>(m.hidden);
  const double head_cost = static_cast<double>(m.vocab) * static_cast<double>(m.hidden);
  const double total = layer_cost * static_cast<double>(m.num_layers) + head_cost;
  std::vector<int> counts(static_cast<size_t>(pp), 0);
  int rank = 0;
  double cumulative = 0;  // the embedding block costs 0 and sits on rank 0
  for (int64_t layer = 0; layer < m.num_layers; ++layer) {
    cumulative += layer_cost;
    ++counts[static_cast<size_t>(rank)];
    const double threshold = total * static_cast<double>(rank + 1) / static_cast<double>(pp);
    if (cumulative > threshold && rank + 1 < pp) ++rank;
  }
  return counts;
}

Result<MemoryValidation> validate_memory(const Json& records, const GpuMemoryLookup& gpu_memory,
                                         std::string_view framework_filter) {
  SP_RETURN_IF_ERROR(check_records(records, "validation file"));
  MemoryValidation v;
  std::vector<std::pair<double, std::string>> alloc_errs, res_errs;
  const std::string filter = lower(framework_filter);
  for (const Json& rec : records) {
    const std::string id = rec.value("id", std::string("?"));
    const std::string framework = lower(rec.value("framework", std::string()));
    const Json measured = rec.value("measured", Json::object());
    const std::string status = measured.value("status", std::string());
    auto skip = [&](const std::string& why) {
      ++v.skipped;
      if (!why.empty()) v.skip_reasons.push_back(id + ": " + why);
    };
    if ((!filter.empty() && framework.find(filter) == std::string::npos) ||
        rec.value("incomplete", false) || (status != "ok" && status != "oom")) {
      skip("");
      continue;
    }
    // The framework's memory conventions; frameworks the model does not know use Megatron's.
    const bool nanotron = classify_run_framework(rec.value("framework", std::string())).family ==
                          FrameworkFamily::kNanotron;
    const FrameworkId conventions = nanotron ? FrameworkId::kNanotron : FrameworkId::kMegatron;
    const std::optional<double> alloc = number(measured, "peak_memory_gib");
    const std::optional<double> reserved = number(measured, "peak_reserved_gib");
    if (status == "ok" && !alloc && !reserved) {
      skip("");
      continue;
    }
    Result<ModelSpec> m = model_from_config(rec.value("model", Json::object()), id, id + ": model");
    if (!m) {
      skip(m.status().message());
      continue;
    }
    const int64_t seq = rec.value("seq_len", int64_t{0});
    const int64_t gpus = rec.value("gpus", int64_t{0});
    Result<Layout> parsed = parse_layout(rec.value("layout", std::string()));
    if (!parsed) {
      skip(parsed.status().message());
      continue;
    }
    Result<Layout> layout = resolve_layout(*parsed, layout_constraints(*m, seq), gpus);
    if (!layout) {
      skip(layout.status().message());
      continue;
    }
    Result<Bytes> capacity = gpu_memory(rec.value("cluster", std::string()));
    if (!capacity) {
      skip(capacity.status().message());
      continue;
    }
    MemoryOptions opt;
    opt.framework = framework_memory(conventions);
    opt.ops = framework_ops(conventions);
    opt.gpu_memory = *capacity;
    if (nanotron && layout->vpp_degree() == 1)
      opt.chunk_layers = nanotron_chunk_layers(*m, layout->pp);
    Result<MemoryResult> mem = estimate_memory(*m, *layout, seq, opt);
    if (!mem) {
      skip(mem.status().message());
      continue;
    }
    const StageMemory& first = mem->stages.front();
    MemoryRecordCheck row;
    row.id = id;
    row.status = status;
    row.layout = format_layout(*layout);
    row.predicted_fits = mem->fits;
    row.predicted_allocated_gib = to_gib(nanotron ? first.step_peak : first.total);
    row.predicted_reserved_gib = to_gib(first.reserved);
    row.predicted_peak_reserved_gib = to_gib(mem->peak_reserved);
    if (status == "ok") {
      row.measured_allocated_gib = alloc;
      row.measured_reserved_gib = reserved;
      ++v.ok_rows;
      if (!mem->fits) ++v.ok_called_oom;
      if (alloc && *alloc > 0) {
        alloc_errs.emplace_back(std::abs(row.predicted_allocated_gib - *alloc) / *alloc, id);
      }
      if (reserved && *reserved > 0) {
        res_errs.emplace_back(std::abs(row.predicted_reserved_gib - *reserved) / *reserved, id);
      }
    } else {
      ++v.oom_rows;
      if (!mem->fits) ++v.oom_called_oom;
    }
    v.rows.push_back(std::move(row));
  }
  summarize(alloc_errs, v.allocated_compared, v.allocated_median_error, v.allocated_worst_error,
            v.allocated_worst_id);
  summarize(res_errs, v.reserved_compared, v.reserved_median_error, v.reserved_worst_error,
            v.reserved_worst_id);
  return v;
}

}  // namespace scaleplan::models
