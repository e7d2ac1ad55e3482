// `profile` as a library call; contract in profile.h.
#include "api/profile.h"

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string_view>

#include "hw_profiles/cluster.h"
#include "hw_profiles/gpu_identity.h"
#include "hw_profiles/nccl_tests.h"
#include "runtime/profile.h"

namespace scaleplan::api {
namespace {

Json state_json(const runtime::ProfileState& s, const ProfileRequest& o) {
  return Json{{"backend", o.backend},
              {"quick", o.quick},
              {"device", s.device},
              {"done", std::vector<std::string>(s.done.begin(), s.done.end())},
              {"measurements", calibrate::to_json(s.measurements)}};
}

Result<runtime::ProfileState> load_partial(const std::string& path, const ProfileRequest& o) {
  SP_ASSIGN_OR_RETURN(const Json j, read_json_file(path));
  SP_ASSIGN_OR_RETURN(const std::string backend, json_string(j, "backend", path));
  SP_ASSIGN_OR_RETURN(const bool quick, json_bool(j, "quick", path));
  if (backend != o.backend || quick != o.quick) {
    return Status::invalid(path + ": was measured with --backend " + backend +
                           (quick ? " --quick" : "") +
                           "; resume with the same options or delete it");
  }
  runtime::ProfileState s;
  SP_ASSIGN_OR_RETURN(s.measurements,
                      calibrate::measurements_from_json(
                          json_has(j, "measurements") ? j["measurements"] : Json::object(), path));
  if (json_has(j, "done")) {
    if (!j["done"].is_array())
      return Status::invalid(path + ": done: expected an array of point names, got " +
                             json_brief(j["done"]));
    for (const auto& id : j["done"]) {
      if (!id.is_string())
        return Status::invalid(path + ": done: expected point names, got " + json_brief(id));
      s.done.insert(id.get<std::string>());
    }
  }
  SP_ASSIGN_OR_RETURN(s.device, json_string(j, "device", path, std::string()));
  return s;
}

Status add_nccl_log(const std::string& path, const hw::Cluster& base, bool force,
                    calibrate::Measurements& m, const Callbacks<ProfileProgress>& callbacks) {
  SP_ASSIGN_OR_RETURN(const std::string text, read_text_file(path));
  SP_ASSIGN_OR_RETURN(const hw::NcclTestLog log, hw::parse_nccl_tests_log(text, path));
  if (Status gpu = hw::check_log_gpu(log, base, "the base " + base.name, path); !gpu.is_ok()) {
    if (!force) return gpu.with_context("--nccl-log");
    callbacks.notify("warning: " + gpu.message() + " (--force-base)");
  }
  if (!log.op) return Status::invalid(path + ": the log does not name its collective");
  if (log.ranks <= 0)
    return Status::invalid(path + ": the log has no '# Rank' lines (ranks unknown)");
  const std::string placement(hw::measured_placement(log));
  for (const hw::NcclTestRow& row : log.rows) {
    if (row.time <= Duration::zero()) continue;
    m.collectives.push_back({std::string(to_string(*log.op)), log.ranks, placement, row.size,
                             row.time, 0.0, "nccl-tests:" + path});
  }
  return Status::ok();
}

}  // namespace

Json ProfileOutcome::to_json() const {
  Json j = calibrate::to_json(calibration);
  j["profile"] = request.out;
  j["seconds"] = seconds;
  return j;
}

Result<ProfileOutcome> profile(const ProfileRequest& o,
                               const Callbacks<ProfileProgress>& callbacks) {
  SP_ASSIGN_OR_RETURN(const runtime::BackendKind kind, runtime::parse_backend_kind(o.backend));
  if (o.out.empty()) return Status::invalid("--out: required (the profile to write)");
  const bool host = kind == runtime::BackendKind::kHost;
  // cuda: the base is the bundled profile of the GPU found, or --cluster when it is that GPU's
  // (--force-base otherwise); host: --cluster or hgx-h200, for the topology fields only.
  SP_ASSIGN_OR_RETURN(const hw::ProfileBase chosen,
                      runtime::profile_base(kind, o.cluster, o.force_base, runtime::cuda_devices));
  // The base's note is written for the command line ("profile: ..."); a note is what follows.
  constexpr std::string_view kPrefix = "profile: ";
  callbacks.notify(chosen.note.rfind(kPrefix, 0) == 0 ? chosen.note.substr(kPrefix.size())
                                                      : chosen.note);
  const std::string base = chosen.cluster;
  SP_ASSIGN_OR_RETURN(const hw::Cluster cluster, hw::load_cluster(base));
  const std::string partial = o.out + ".partial";

  runtime::ProfileState state;
  std::error_code exists_ec;  // a name too long or a link loop: nothing to resume, not a throw
  if (o.resume && std::filesystem::exists(partial, exists_ec)) {
    SP_ASSIGN_OR_RETURN(state, load_partial(partial, o));
    if (!host && !state.device.empty() && state.device != chosen.device.name)
      return Status::invalid(partial + ": was measured on " + state.device + ", not on this " +
                             chosen.device.name + "; delete it or resume on that machine");
    callbacks.notify("resuming from " + partial + " (" + std::to_string(state.done.size()) +
                     " points done)");
  }
  runtime::ProfileOptions po{kind, o.ranks >= 0 ? o.ranks : (host ? 4 : 0), o.quick};
  auto last_save = std::chrono::steady_clock::now();
  runtime::ProfileCallbacks cb;
  if (callbacks.progress) {
    cb.on_point = [&callbacks](int done, int total, const std::string& id) {
      callbacks.progress(ProfileProgress{done, total, id});
    };
  }
  cb.checkpoint = [&](const runtime::ProfileState& s) -> Status {
    // Atomic (temporary file + rename): an interrupted run never leaves a torn partial file.
    // At most every 0.5 s, so that a sweep of fast points does not spend its time writing JSON.
    const auto now = std::chrono::steady_clock::now();
    if (now - last_save < std::chrono::milliseconds(500)) return Status::ok();
    last_save = now;
    return write_file_atomic(partial, state_json(s, o).dump() + "\n").with_context("--out");
  };
  const auto start = std::chrono::steady_clock::now();
  Status st = runtime::run_profile(po, state, cb);
  if (!state.done.empty()) {
    SP_RETURN_IF_ERROR(write_file_atomic(partial, state_json(state, o).dump() + "\n"));
  }
  if (!st.is_ok() && state.done.empty()) return st;
  if (!st.is_ok()) {
    return st.with_context("profile interrupted (" + std::to_string(state.done.size()) +
                           " points saved in " + partial + "; rerun with --resume)");
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  calibrate::Measurements m = state.measurements;
  for (const std::string& log : o.nccl_logs)
    SP_RETURN_IF_ERROR(add_nccl_log(log, cluster, o.force_base, m, callbacks));
  const calibrate::TileParams tiles{host ? 1 : 128, host ? 1 : cluster.gpu.sm_count};
  SP_ASSIGN_OR_RETURN(calibrate::Calibration c, calibrate::fit_calibration(m, tiles));
  c.backend = o.backend;
  c.device = state.device;
  Json section = calibrate::to_json(c);
  section["measurements"] = calibrate::to_json(m);
  const Json profile = {
      {"extends", base},
      {"name", cluster.name + "-calibrated"},
      {"description", cluster.description +
                          " (kernels and collectives calibrated by scaleplan profile --backend " +
                          o.backend + " on " + c.device + ")"},
      {"calibration", section}};
  SP_RETURN_IF_ERROR(write_file_atomic(o.out, profile.dump(2) + "\n"));
  std::error_code ec;
  std::filesystem::remove(partial, ec);
  ProfileOutcome out;
  out.request = o;
  out.calibration = std::move(c);
  out.seconds = seconds;
  return out;
}

}  // namespace scaleplan::api
