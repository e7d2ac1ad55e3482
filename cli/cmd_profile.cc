// `scaleplan profile`: calibrate this machine.
//   profile --backend host|cuda --out F [--quick] [--resume] [--cluster BASE] [--force-base]
//           [--ranks N] [--nccl-log LOG ...] [--json]
// Runs the kernel, collective and overlap sweeps (runtime/profile.h) with a progress bar on
// stderr, saving the measurements after every point to F.partial (atomically) so that an
// interrupted run continues with --resume; fits the cost models (calibrate/calibration.h) with
// cross-validation; and writes F, a profile that extends the cluster BASE with a "calibration"
// section. With the cuda backend BASE is the bundled profile of the GPU found (a --cluster of
// another GPU is refused unless --force-base; no GPU: "no GPU visible", exit 2). nccl-tests logs
// given with --nccl-log join the collective measurements before the fit.
#include <fmt/core.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "calibrate/calibration.h"
#include "cli/command.h"
#include "cli/output.h"
#include "core/json_util.h"
#include "hw_profiles/cluster.h"
#include "hw_profiles/gpu_identity.h"
#include "hw_profiles/nccl_tests.h"
#include "runtime/profile.h"

namespace scaleplan::cli {
namespace {

struct ProfileCliOptions {
  std::string backend = "host", out, cluster;
  bool quick = false, resume = false, json = false, force_base = false;
  int ranks = -1;
  std::vector<std::string> nccl_logs;
};

class ProgressBar {
 public:
  ProgressBar() : tty_(isatty(fileno(stderr)) != 0) {}
  void update(int done, int total, const std::string& id) {
    const int width = 30;
    const int filled = total > 0 ? width * done / total : 0;
    if (tty_) {
      std::fprintf(stderr, "\r[%s%s] %d/%d %-48.48s", std::string(filled, '#').c_str(),
                   std::string(width - filled, '.').c_str(), done, total, id.c_str());
      std::fflush(stderr);
    } else if (total > 0 && done * 10 / total != last_decile_) {
      last_decile_ = done * 10 / total;
      std::fprintf(stderr, "profile: %d/%d points (%s)\n", done, total, id.c_str());
    }
  }
  void finish() {
    if (tty_) std::fprintf(stderr, "\n");
  }

 private:
  bool tty_;
  int last_decile_ = -1;
};

Json state_json(const runtime::ProfileState& s, const ProfileCliOptions& o) {
  return Json{{"backend", o.backend},
              {"quick", o.quick},
              {"device", s.device},
              {"done", std::vector<std::string>(s.done.begin(), s.done.end())},
              {"measurements", calibrate::to_json(s.measurements)}};
}

Result<runtime::ProfileState> load_partial(const std::string& path, const ProfileCliOptions& o) {
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
                    calibrate::Measurements& m) {
  SP_ASSIGN_OR_RETURN(const std::string text, read_text_file(path));
  SP_ASSIGN_OR_RETURN(const hw::NcclTestLog log, hw::parse_nccl_tests_log(text, path));
  if (Status gpu = hw::check_log_gpu(log, base, "the base " + base.name, path); !gpu.is_ok()) {
    if (!force) return gpu.with_context("--nccl-log");
    std::fprintf(stderr, "profile: warning: %s (--force-base)\n", gpu.message().c_str());
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

void print_errors(const calibrate::Calibration& c, double seconds) {
  fmt::print("calibrated {} ({}) in {:.1f} s\n\n", c.device, c.backend, seconds);
  fmt::print("{:<20} {:>7} {:>10} {:>10} {:>12} {:>12}\n", "kernel model", "samples", "cv median",
             "cv p90", "holdout med", "holdout max");
  const std::pair<const char*, const calibrate::ModelFit*> fits[] = {
      {"gemm", &c.gemm},
      {"attention_forward", &c.attention_forward},
      {"attention_backward", &c.attention_backward},
      {"memory_bound", &c.memory_bound}};
  for (const auto& [name, f] : fits) {
    auto pct = [](double x, int n) {
      return n > 0 ? fmt::format("{:.1f}%", 100 * x) : std::string("-");
    };
    fmt::print("{:<20} {:>7} {:>10} {:>10} {:>12} {:>12}\n", name, f->samples,
               pct(f->cv.median, f->cv.n), pct(f->cv.p90, f->cv.n),
               pct(f->holdout.median, f->holdout.n), pct(f->holdout.max, f->holdout.n));
  }
  fmt::print("overlap slowdown     {:.3f}\n", c.overlap_slowdown);
  if (!c.memory_families.empty()) {
    fmt::print("\n{:<16} {:>7} {:>12} {:>14}\n", "memory op", "samples", "overhead", "bandwidth");
    for (const auto& f : c.memory_families) {
      fmt::print("{:<16} {:>7} {:>12} {:>14}\n", f.family, f.samples, format_duration(f.overhead),
                 f.seconds_per_byte > 0 ? format_bandwidth(BytesPerSecond(1.0 / f.seconds_per_byte))
                                        : std::string("-"));
    }
  }
  if (c.collectives.empty()) return;
  fmt::print("\n{:<16} {:>5} {:<11} {:>8} {:>14} {:>12} {:>10}\n", "collective", "ranks",
             "placement", "samples", "latency", "busbw GB/s", "cv median");
  for (const auto& f : c.collectives) {
    fmt::print("{:<16} {:>5} {:<11} {:>8} {:>14} {:>12.2f} {:>10}\n", f.op, f.ranks, f.placement,
               f.samples, format_duration(f.latency), f.busbw_gbps,
               f.cv.n > 0 ? fmt::format("{:.1f}%", 100 * f.cv.median) : std::string("-"));
  }
}

Status run(const ProfileCliOptions& o) {
  SP_ASSIGN_OR_RETURN(const runtime::BackendKind kind, runtime::parse_backend_kind(o.backend));
  if (o.out.empty()) return Status::invalid("--out: required (the profile to write)");
  const bool host = kind == runtime::BackendKind::kHost;
  // cuda: the base is the bundled profile of the GPU found, or --cluster when it is that GPU's
  // (--force-base otherwise); host: --cluster or hgx-h200, for the topology fields only.
  SP_ASSIGN_OR_RETURN(const hw::ProfileBase chosen,
                      runtime::profile_base(kind, o.cluster, o.force_base, runtime::cuda_devices));
  std::fprintf(stderr, "%s\n", chosen.note.c_str());
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
    std::fprintf(stderr, "profile: resuming from %s (%zu points done)\n", partial.c_str(),
                 state.done.size());
  }
  runtime::ProfileOptions po{kind, o.ranks >= 0 ? o.ranks : (host ? 4 : 0), o.quick};
  ProgressBar bar;
  auto last_save = std::chrono::steady_clock::now();
  runtime::ProfileCallbacks cb;
  cb.on_point = [&](int done, int total, const std::string& id) { bar.update(done, total, id); };
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
  bar.finish();
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
    SP_RETURN_IF_ERROR(add_nccl_log(log, cluster, o.force_base, m));
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
  SP_RETURN_IF_ERROR(write_output_file(o.out, profile.dump(2) + "\n"));
  std::error_code ec;
  std::filesystem::remove(partial, ec);
  if (o.json) {
    Json j = calibrate::to_json(c);
    j["profile"] = o.out;
    j["seconds"] = seconds;
    print_json(j);
  } else {
    print_errors(c, seconds);
    fmt::print("\nwrote {}\n", o.out);
  }
  return Status::ok();
}

}  // namespace

SCALEPLAN_COMMAND(
    profile, "profile", "Calibrate this machine: measure kernels and collectives, fit cost models",
    [](CLI::App& sub) -> Runner {
      auto o = std::make_shared<ProfileCliOptions>();
      sub.add_option("--backend", o->backend, "host (CPU threads as ranks) or cuda (GPUs, NCCL)")
          ->check(CLI::IsMember({"host", "cuda"}));
      sub.add_option("--out", o->out, "Profile JSON to write")->required();
      sub.add_flag("--quick", o->quick, "Fewer shapes and sizes, shorter measurements");
      sub.add_flag("--resume", o->resume, "Continue from OUT.partial of an interrupted run");
      sub.add_option("--cluster", o->cluster,
                     "Cluster profile the result extends (cuda: default the bundled profile of "
                     "the GPU found, and it must describe that GPU; host: default hgx-h200)");
      sub.add_flag("--force-base", o->force_base,
                   "Extend --cluster (and fit --nccl-log logs) even when its GPU is not the one "
                   "measured");
      sub.add_option(
          "--ranks", o->ranks,
          "host: threads for the collective sweeps (default 4); cuda: GPUs (default all)");
      sub.add_option("--nccl-log", o->nccl_logs,
                     "nccl-tests output to fit with the collective measurements");
      sub.add_flag("--json", o->json, "Machine-readable output on stdout");
      return [o] { return run(*o); };
    },
    70);

}  // namespace scaleplan::cli
