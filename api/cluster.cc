// `cluster` as library calls; contract in cluster.h.
#include "api/cluster.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "calibrate/kernel_model.h"
#include "calibrate/roofline.h"
#include "core/units.h"

namespace scaleplan::api {
namespace {

// Writes the profile that extends `base` with the fitted cost_model.
Result<ClusterFitOutcome> write_fit(const ClusterFitRequest& o, const hw::Cluster& base,
                                    hw::NcclFit fit) {
  SP_ASSIGN_OR_RETURN(Json full, parse_json(hw::cluster_to_json(fit.cluster), "cluster"));
  Json profile = {{"extends", o.cluster},
                  {"name", o.name.empty() ? base.name + "-calibrated" : o.name},
                  {"description", base.description + " (cost model fitted to " + o.source + ")"},
                  {"cost_model", full["cost_model"]}};
  SP_RETURN_IF_ERROR(write_file_atomic(o.out, profile.dump(2) + "\n"));
  ClusterFitOutcome out;
  out.request = o;
  out.fit = std::move(fit);
  out.cost_model = full["cost_model"];
  return out;
}

}  // namespace

Json ClusterList::to_json() const {
  Json out = Json::array();
  for (const ClusterSummary& c : clusters)
    out.push_back({{"name", c.name},
                   {"gpu", c.gpu},
                   {"gpus_per_node", c.gpus_per_node},
                   {"description", c.description}});
  return Json{{"clusters", out}};
}

Result<ClusterList> cluster_list() {
  ClusterList list;
  for (const auto& n : hw::bundled_cluster_names()) {
    auto c = hw::load_cluster(n);
    if (!c) return Status::internal("bundled profile " + n + ": " + c.status().message());
    list.clusters.push_back({n, c->gpu.name, c->description, c->gpus_per_node});
  }
  return list;
}

Result<Json> ClusterShow::to_json() const {
  SP_ASSIGN_OR_RETURN(Json j, parse_json(hw::cluster_to_json(cluster), "cluster"));
  j["path"] = cluster.path;
  return j;
}

Result<ClusterShow> cluster_show(const std::string& cluster) {
  SP_ASSIGN_OR_RETURN(hw::Cluster c, hw::load_cluster(cluster));
  return ClusterShow{std::move(c)};
}

Json ClusterFitOutcome::to_json() const {
  return Json{{"profile", request.out},
              {"report", fit.report},
              {"warnings", fit.warnings},
              {"cost_model", cost_model}};
}

Result<ClusterFitOutcome> cluster_import_nccl(const ClusterFitRequest& o,
                                              const Callbacks<int>& callbacks) {
  if (o.source.empty()) return Status::invalid("--log: required (an nccl-tests output file)");
  if (o.out.empty()) return Status::invalid("--out: required (the profile to write)");
  SP_ASSIGN_OR_RETURN(hw::Cluster c, hw::load_cluster(o.cluster));
  SP_ASSIGN_OR_RETURN(std::string text, read_text_file(o.source));
  SP_ASSIGN_OR_RETURN(hw::NcclTestLog log, hw::parse_nccl_tests_log(text, o.source));
  if (!o.op.empty()) {
    SP_ASSIGN_OR_RETURN(log.op, parse_collective_op(o.op));
  }
  if (o.ranks > 0) log.ranks = o.ranks;
  bool unchecked = false;
  if (Status gpu = hw::check_log_gpu(log, c, o.cluster, o.source, &unchecked); !gpu.is_ok()) {
    if (!o.force_base) return gpu;
    callbacks.notify("warning: " + gpu.message() + " (--force-base)");
  }
  SP_ASSIGN_OR_RETURN(hw::NcclFit fit, hw::fit_to_nccl_log(c, log, o.source));
  if (unchecked)
    fit.warnings.push_back("the log names no GPU on its '# Rank' lines: that it was measured on " +
                           c.gpu.name + " is not checked");
  for (const std::string& w : fit.warnings) callbacks.notify("warning: " + w);
  return write_fit(o, c, std::move(fit));
}

Result<ClusterFitOutcome> cluster_import_scaling(const ClusterFitRequest& o) {
  if (o.source.empty())
    return Status::invalid("--points: required (a JSON file of measured busbw)");
  if (o.out.empty()) return Status::invalid("--out: required (the profile to write)");
  SP_ASSIGN_OR_RETURN(hw::Cluster c, hw::load_cluster(o.cluster));
  SP_ASSIGN_OR_RETURN(std::string text, read_text_file(o.source));
  SP_ASSIGN_OR_RETURN(auto points, hw::parse_measured_busbw(text, o.source));
  // A point's extra device copy (a list-form call's flatten or copy-out) at the kernel model's
  // memory-bound rate, the rate every other copy of a simulated step gets.
  const calibrate::RooflineCostModel kernels(calibrate::peaks_of(c));
  for (auto& p : points)
    if (p.copied.value() > 0)
      p.copy_time = kernels.memory_bound({p.copied, Flops(0), MemOp::kCopy, MemPath::kVectorized});
  SP_ASSIGN_OR_RETURN(hw::NcclFit fit, hw::fit_network_scaling(c, points, o.source));
  return write_fit(o, c, std::move(fit));
}

}  // namespace scaleplan::api
