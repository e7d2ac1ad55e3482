#include "api/sim_inputs.h"

#include <utility>

#include "api/options.h"
#include "export/exporters.h"
#include "models/inductor.h"

namespace scaleplan::api {
namespace {

Result<SimInputs> from_options(const SimInputOptions& o) {
  for (const auto& [value, name] :
       {std::pair{&o.model, "--model"}, {&o.cluster, "--cluster"}, {&o.layout, "--layout"}}) {
    if (value->empty()) return Status::invalid(std::string(name) + " is required (or --plan FILE)");
  }
  SimInputs in;
  Result<models::ModelSpec> model = models::load_model(o.model);
  if (!model) return model.status().with_context("--model");
  in.model = std::move(*model);
  SP_RETURN_IF_ERROR(apply_moe_imbalance(in.model, o.moe_imbalance));
  SP_RETURN_IF_ERROR(apply_moe_dispatcher(in.model, o.moe_dispatcher));
  Result<hw::Cluster> cluster = hw::load_cluster(o.cluster);
  if (!cluster) return cluster.status().with_context("--cluster");
  in.cluster = std::move(*cluster);
  in.cluster_name = o.cluster;
  Result<Layout> layout = parse_layout(o.layout);
  if (!layout) return layout.status().with_context("--layout");
  in.layout = *layout;
  if (o.seq <= 0) return Status::invalid("--seq: must be a positive number of tokens");
  in.seq = o.seq;
  in.gpus = o.gpus;
  SP_ASSIGN_OR_RETURN(in.host_launch, parse_host_launch(o.host_launch));
  if (o.framework.empty()) {
    in.framework = sim::framework(FrameworkId::kMegatron);
  } else {
    SP_ASSIGN_OR_RETURN(in.framework, sim::parse_framework_value(o.framework));
  }
  // A layout that names dtype=bf16 under the fp16-era conventions trains in bf16.
  if (layout_gives(o.layout, "dtype") && in.layout.dtype == DType::kBf16)
    in.framework = sim::with_bf16_named(in.framework);
  in.framework_name = std::string(in.framework.name());
  in.framework = with_host_launch(std::move(in.framework), in.host_launch);
  return in;
}

// A plan file (`plan --emit json`) gives every input the plan was simulated with, so that the
// simulation reproduces its prediction; the options it sets may not be given again.
Result<SimInputs> from_plan(const SimInputOptions& o) {
  for (const auto& [given, name] : {std::pair{!o.model.empty(), "--model"},
                                    {!o.cluster.empty(), "--cluster"},
                                    {!o.layout.empty(), "--layout"},
                                    {o.seq != 0, "--seq"},
                                    {o.gpus != 0, "--gpus"},
                                    {!o.framework.empty(), "--framework"},
                                    {!o.host_launch.empty(), "--host-launch"},
                                    {!o.moe_imbalance.empty(), "--moe-imbalance"},
                                    {!o.moe_dispatcher.empty(), "--moe-dispatcher"}}) {
    if (given)
      return Status::invalid("--plan: " + o.plan + " sets " + (name + 2) + "; drop " + name);
  }
  SP_ASSIGN_OR_RETURN(planner::PlanFile plan, planner::read_plan_file(o.plan));
  SimInputs in;
  in.model = std::move(plan.model);
  Result<hw::Cluster> cluster = hw::load_cluster(plan.cluster);
  if (!cluster) return cluster.status().with_context(o.plan + ": cluster");
  in.cluster = std::move(*cluster);
  in.cluster_name = plan.cluster;
  in.layout = plan.layout;
  in.seq = plan.seq_len;
  in.gpus = plan.gpus;
  in.framework = sim::framework(plan.framework);
  in.framework.ops.tp_comm_overlap = plan.tp_comm_overlap;
  if (Status s = models::set_compile_components(in.framework.ops, plan.compile); !s.is_ok())
    return s.with_context(o.plan);
  in.framework_name = std::string(in.framework.name());
  in.host_launch = plan.host_launch;
  in.framework = with_host_launch(std::move(in.framework), in.host_launch);
  in.plan_iteration_s = plan.predicted_iteration_s;
  return in;
}

}  // namespace

Result<SimInputs> sim_inputs(const SimInputOptions& o) {
  return o.plan.empty() ? from_options(o) : from_plan(o);
}

std::vector<sim::TraceOptions::Entry> run_metadata(const SimInputs& in) {
  return {{"model", in.model.name},
          {"cluster", in.cluster.name},
          {"cluster_source", in.cluster_name},
          {"seq", std::to_string(in.seq), true},
          {"layout", format_layout(in.layout)},
          {"framework", in.framework_name}};
}

}  // namespace scaleplan::api
