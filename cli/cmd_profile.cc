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
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "api/profile.h"
#include "cli/command.h"
#include "cli/output.h"

namespace scaleplan::cli {
namespace {

struct ProfileCliOptions {
  api::ProfileRequest request;
  bool json = false;
};

class ProgressBar {
 public:
  ProgressBar() : tty_(isatty(fileno(stderr)) != 0) {}
  void update(int done, int total, const std::string& id) {
    const int width = 30;
    const int filled = total > 0 ? width * done / total : 0;
    if (tty_) {
      pending_ = true;
      std::fprintf(stderr, "\r[%s%s] %d/%d %-48.48s", std::string(filled, '#').c_str(),
                   std::string(width - filled, '.').c_str(), done, total, id.c_str());
      std::fflush(stderr);
    } else if (total > 0 && done * 10 / total != last_decile_) {
      last_decile_ = done * 10 / total;
      std::fprintf(stderr, "profile: %d/%d points (%s)\n", done, total, id.c_str());
    }
  }
  // Ends the bar's line, if one is open.
  void finish() {
    if (pending_) std::fprintf(stderr, "\n");
    pending_ = false;
  }

 private:
  bool tty_;
  bool pending_ = false;
  int last_decile_ = -1;
};

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

Status run(const ProfileCliOptions& cli) {
  ProgressBar bar;
  api::Callbacks<api::ProfileProgress> callbacks;
  callbacks.note = [&bar](const std::string& n) {
    bar.finish();
    std::fprintf(stderr, "profile: %s\n", n.c_str());
  };
  callbacks.progress = [&bar](const api::ProfileProgress& p) { bar.update(p.done, p.total, p.id); };
  Result<api::ProfileOutcome> out = api::profile(cli.request, callbacks);
  bar.finish();
  if (!out) return out.status();
  if (cli.json) {
    print_json(out->to_json());
  } else {
    print_errors(out->calibration, out->seconds);
    fmt::print("\nwrote {}\n", out->request.out);
  }
  return Status::ok();
}

}  // namespace

SCALEPLAN_COMMAND(
    profile, "profile", "Calibrate this machine: measure kernels and collectives, fit cost models",
    [](CLI::App& sub) -> Runner {
      auto o = std::make_shared<ProfileCliOptions>();
      api::ProfileRequest& r = o->request;
      sub.add_option("--backend", r.backend, "host (CPU threads as ranks) or cuda (GPUs, NCCL)")
          ->check(CLI::IsMember({"host", "cuda"}));
      sub.add_option("--out", r.out, "Profile JSON to write")->required();
      sub.add_flag("--quick", r.quick, "Fewer shapes and sizes, shorter measurements");
      sub.add_flag("--resume", r.resume, "Continue from OUT.partial of an interrupted run");
      sub.add_option("--cluster", r.cluster,
                     "Cluster profile the result extends (cuda: default the bundled profile of "
                     "the GPU found, and it must describe that GPU; host: default hgx-h200)");
      sub.add_flag("--force-base", r.force_base,
                   "Extend --cluster (and fit --nccl-log logs) even when its GPU is not the one "
                   "measured");
      sub.add_option(
          "--ranks", r.ranks,
          "host: threads for the collective sweeps (default 4); cuda: GPUs (default all)");
      sub.add_option("--nccl-log", r.nccl_logs,
                     "nccl-tests output to fit with the collective measurements");
      sub.add_flag("--json", o->json, "Machine-readable output on stdout");
      return [o] { return run(*o); };
    },
    70);

}  // namespace scaleplan::cli
