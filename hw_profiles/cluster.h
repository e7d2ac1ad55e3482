// Cluster: what one kind of GPU cluster is made of, read from a profile JSON.
//
// A profile describes one node type (its GPU, the NVLink fabric inside the node or rack) and the
// scale-out network that joins the nodes, plus a `cost_model` section with the efficiency and
// latency parameters of the collective cost model (hw_profiles/collectives.h), which calibration
// may overwrite. Every field, its unit, default and source is documented in docs/hw_profiles.md;
// the bundled profiles (hw_profiles/bundled/*.json) cite the datasheet of each number.
//
// Bandwidths are per direction: NVLink "900 GB/s" on a datasheet is bidirectional, 450 GB/s each
// way, and the profile stores 450 GB/s. Network rates are per NIC per direction ("400Gb/s").
//
// A Cluster is a plain value: cheap to copy, immutable once loaded, safe to share between threads.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/layout.h"
#include "core/status.h"
#include "core/units.h"
#include "hw_profiles/calibration.h"
#include "hw_profiles/sm_clock.h"

namespace scaleplan::hw {

// The efficiency curve of one fused attention kernel: e_attn = ceiling · factor(head dim) ·
// kv/(kv + half_tokens) (calibrate/roofline.h). The defaults are FlashAttention-2's on H100.
struct AttentionCurve {
  double ceiling = 0.343;       // e_attn at head dim 128
  double half_tokens = 552;     // kv_half
  double head_dim_half = 23.4;  // d_half: head-dim scaling of e_attn
  // The backward's own curve where it was measured apart from the forward; 0: the forward's.
  double backward_ceiling = 0;
  double backward_half_tokens = 0;
  bool operator==(const AttentionCurve&) const = default;
};

// Fractions of HBM peak that memory-bound kernels sustain by implementation (MemPath); 0: the
// roofline's e_mem (0.80). The profile's gpu.efficiency.memory; sources in docs/hw_profiles.md.
struct MemoryPathEfficiency {
  double vectorized = 0;
  // PyTorch's unrolled dynamic-casting loop: 0.724 of the H100 PCIe's 2.0 TB/s (fp32 -> fp16 copy
  // of 536,870,912 elements, 2.225 ms before pytorch/pytorch PR #137053 vectorized that direction).
  double cast_loop = 0.724;
  double row_norm = 0;
  double multi_tensor = 0;
  double strided = 0;       // legacy strided elementwise_kernel (RoPE's complex product)
  double strided_copy = 0;  // elementwise_kernel copy of an expanded tensor (repeat_kv)
  double reduce = 0;        // reduce_kernel (repeat_kv's backward sum)
  double segment_sum = 0;   // embedding_dense_backward beyond its zero fill
  bool operator==(const MemoryPathEfficiency&) const = default;
};

// How close a GPU's kernels come to its datasheet peaks: the profile's `gpu.efficiency`, each value
// a published measurement that the bundled profiles cite (docs/hw_profiles.md, "gpu.efficiency").
// The defaults, for a profile that gives none, are the H100's.
struct GpuEfficiency {
  double gemm_bf16 = 0.803;  // best cuBLAS bf16 matmul / bf16_dense (mamf-finder)
  double gemm_fp8 = 0.709;   // best fp8 matmul / fp8_dense (bf16's where fp8_dense is 0)
  double gemm_fp4 = 0;       // best NVFP4 matmul / fp4_dense; 0: none measured, gemm_fp8's
  AttentionCurve flash2;     // FlashAttention-2, causal, head dim 128, fwd+bwd
  AttentionCurve cudnn{0.556, 552, 42.6};  // cuDNN fused attention (Transformer Engine, SDPA)
  MemoryPathEfficiency memory;             // memory-bound kernels by implementation
  // The SM clock each clock-bound figure above was measured at, the GPU's maximum and its
  // power-limit ends (hw_profiles/sm_clock.h); absent (max_hz 0): times do not depend on the step.
  SmClock sm_clock;
  bool operator==(const GpuEfficiency&) const = default;
};

struct GpuSpec {
  std::string name;                 // "H100-SXM5-80GB"
  FlopsPerSecond bf16_dense;        // dense (non-sparse) bf16 tensor-core peak
  FlopsPerSecond fp8_dense;         // dense fp8 tensor-core peak; 0 where the GPU has none (A100)
  FlopsPerSecond fp4_dense;         // dense NVFP4 (e2m1, E4M3 scale per 16) peak; 0: none (Hopper)
  Bytes memory;                     // device memory as the driver reports it (nvidia-smi total)
  BytesPerSecond memory_bandwidth;  // HBM bandwidth, datasheet peak
  int sm_count = 0;                 // streaming multiprocessors
  // CUDA compute capability as major·10 + minor (profile "compute_capability": "9.0" -> 90); 0 when
  // the profile does not say.
  int compute_capability = 0;
  GpuEfficiency efficiency;
};

// The fabric inside a node (or inside a rack-scale NVLink domain such as GB200 NVL72).
struct NodeSpec {
  std::string nvlink_generation;    // "NVLink4"; "none" for PCIe-only nodes
  BytesPerSecond nvlink_bandwidth;  // per GPU, per direction
  int nvlink_domain_gpus = 8;       // GPUs that reach each other over NVLink (8 per DGX; 72 NVL72)
  int nvswitches = 0;               // NVSwitch chips serving one NVLink domain (0: direct links)
  bool nvls = false;                // NVLink SHARP: in-switch reduction (NVSwitch gen 3+)
  Duration nvlink_latency;          // one GPU->NVSwitch->GPU hop
  BytesPerSecond pcie_bandwidth;    // GPU<->NIC PCIe link, per direction
};

// The scale-out network between nodes.
struct NetworkSpec {
  std::string fabric;             // "InfiniBand NDR", "RoCE", "EFA"
  int nics_per_node = 0;          // compute NICs (not storage/management)
  BytesPerSecond nic_bandwidth;   // per NIC, per direction
  bool rail_optimized = true;     // NIC i of every node on the leaf switch of rail i
  int switch_tiers = 2;           // 1: one leaf layer; 2: leaf+spine; 3: +core
  int nodes_per_leaf = 32;        // nodes under one leaf switch (per rail when rail-optimized)
  double oversubscription = 1.0;  // leaf downlink / uplink bandwidth; 1 = non-blocking
  Duration nic_latency;           // NIC + PCIe injection, one side
  Duration switch_latency;        // per switch traversed
  bool sharp = false;             // in-network reduction (InfiniBand SHARP) available
};

// The network bandwidth a group achieves as a fraction of what the cost model otherwise gives,
// by the number of nodes the group spans: shared or oversubscribed fabrics (and some NIC
// transports) deliver less per node as a collective spans more nodes. Fitted from measured
// bus bandwidths at several node counts (`scaleplan cluster import-scaling`). A point with an
// `op` (nccl-tests name, "all_reduce") applies to that collective only; points without one apply
// to every collective that has none of its own, and to pipeline sends.
struct NetworkScalingPoint {
  std::string op;  // empty: every collective
  int nodes = 2;
  double fraction = 1.0;
  bool operator==(const NetworkScalingPoint&) const = default;
};

// The fraction at `nodes` from points of one op sorted by nodes: interpolated in log(nodes) and
// log(fraction) between two points, held at the nearest point's value outside them; 1 if empty.
double interpolate_network_fraction(const std::vector<NetworkScalingPoint>& sorted, int nodes);

// Parameters of the collective cost model; defaults come from documented NCCL behaviour (see
// docs/hw_profiles.md, "cost_model"), calibration or an nccl-tests import may overwrite them.
struct CostModelParams {
  double nvlink_efficiency = 0.82;      // achieved / line rate on NVLink, Simple protocol
  double nvls_efficiency = 0.61;        // NVLS all-reduce algbw / NVLink line rate
  double network_efficiency = 0.94;     // achieved / line rate per NIC, Simple protocol
  Duration base_latency;                // launch + synchronisation per collective (Simple)
  Duration nvlink_step_latency;         // per ring step over NVLink (Simple)
  Duration network_step_latency;        // per ring step over the network (Simple)
  Bytes ramp_bytes;                     // message size at which Simple reaches half its peak rate
  double ll_bandwidth_fraction = 0.25;  // LL protocol: fraction of Simple's rate
  double ll128_bandwidth_fraction = 0.92;  // LL128: fraction of Simple's rate
  bool ll128_enabled = true;               // LL128 is used by default on NVLink/IB (sm80+)
  // Measured fraction by node count (see NetworkScalingPoint), nodes strictly increasing within
  // each op; empty: 1 everywhere.
  std::vector<NetworkScalingPoint> network_scaling;
  std::string calibrated_from;  // provenance when fitted ("nccl-tests log ...")

  // The points that apply to `op` (its own, else the op-less ones), in order.
  std::vector<NetworkScalingPoint> network_scaling_for(std::string_view op) const;
};

// A collective measured on this cluster, per (op, ranks, placement), from the profile's
// calibration section that `scaleplan profile` writes: the measured (size, time) points
// (calibration.measurements.collectives) and the latency-bandwidth fit to them (t = latency +
// size · seconds_per_byte, nccl-tests size; calibrate::CollectiveFit). The collective model scales
// its own estimate by measured / modelled at this group (hw::CollectiveModel, docs/calibration.md
// "Measured collectives in the simulator").
struct MeasuredCollective {
  std::string op;  // nccl-tests name, validated ("all_reduce")
  int ranks = 2;
  // "intra_node" (ranks on consecutive GPUs of one node; "host" on the host backend),
  // "inter_node" (one rank per node) or "multi_node" (ranks packed gpus_per_node to a node over
  // several nodes, as nccl-tests runs under mpirun -N <gpus per node>).
  std::string placement;
  Duration latency;  // the fit; both 0 when only points were given
  double seconds_per_byte = 0;
  // The measurements, ascending in size, one per size (the geometric mean of repeats); empty: the
  // fit alone.
  std::vector<std::pair<Bytes, Duration>> points;
  bool operator==(const MeasuredCollective&) const = default;
};

struct Cluster {
  std::string name;         // "dgx-h100"
  std::string description;  // one line
  std::string path;         // file it was read from
  GpuSpec gpu;
  int gpus_per_node = 8;
  NodeSpec node;
  NetworkSpec network;
  CostModelParams cost;
  // The "calibration" section that `scaleplan profile` writes (fitted kernel and collective
  // models; docs/calibration.md), parsed and checked once, when the profile is read; nullopt when
  // the profile has none. The simulator prefers its kernel models to the roofline model
  // (calibrate::kernel_cost_model_for).
  std::optional<Calibration> calibration;
  // That section as it was read, which cluster_to_json writes back (it also holds the
  // measurements the fits came from); nothing reads it. Empty when none.
  std::string calibration_section;
  // Its collective fits (calibration.collectives), parsed and checked; empty when none.
  std::vector<MeasuredCollective> measured_collectives;

  // NVLink domains never straddle a node boundary partially: a domain is a whole number of nodes
  // (NVL72: 18 trays of 4) or one node.
  int gpus_per_domain() const { return node.nvlink_domain_gpus; }
  // Network bandwidth one GPU gets when every GPU of the node sends at once.
  BytesPerSecond nic_bandwidth_per_gpu() const {
    return network.nic_bandwidth * (static_cast<double>(network.nics_per_node) / gpus_per_node);
  }
};

// Loads a bundled profile by name (data_dir()+"/hw_profiles/bundled/<name>.json") or a profile
// file by path. A profile may say `"extends": "<bundled name or path>"` and give only the keys it
// changes (objects merge key by key). Errors read `file: key: problem` (kInvalidInput), or name the
// profile and the bundled names when it is not found (kNotFound).
Result<Cluster> load_cluster(const std::string& name_or_path);

// Ok when the cluster's GPU runs `dtype` on its tensor cores; for fp8 on a GPU without fp8
// (gpu.fp8_dense = 0, e.g. A100) an error that names the GPU. `what` prefixes the message
// ("layout", "--fix").
Status check_dtype_supported(const Cluster& cluster, DType dtype, std::string_view what);

// The GPU's CUDA compute capability as major·10 + minor (A100 80, H100/H200/H800 90, B200/GB200
// 100): the profile's gpu.compute_capability, 0 when it gives none. Frameworks pick kernels by it
// (sim::framework_attention).
inline int sm_version(const GpuSpec& gpu) { return gpu.compute_capability; }

// Parses a profile from JSON text; `file` names it in errors. `extends` resolves relative to the
// bundled directory or the current directory.
Result<Cluster> parse_cluster(const std::string& json_text, const std::string& file);

// Names of the bundled profiles, sorted.
std::vector<std::string> bundled_cluster_names();

// The profile as JSON text with unit strings (the inverse of parse_cluster); used by
// `cluster show --json` and by `cluster import-nccl` to write a calibrated profile.
std::string cluster_to_json(const Cluster& c, int indent = 2);

}  // namespace scaleplan::hw
