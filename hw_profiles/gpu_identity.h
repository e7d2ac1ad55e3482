// Which GPU a measurement was taken on, and whether a cluster profile describes that GPU.
//
// A calibrated profile pairs measured kernels and collectives with a profile's topology, peaks and
// memory; pairing them across GPU models (H100 kernels on an A100 profile, an A100 nccl-tests log
// on an H100 cluster) gives predictions that are wrong without any error. `profile` and
// `cluster import-nccl` check the GPU they measured (a DeviceIdentity: the CUDA device, or the
// device name an nccl-tests log prints on its "# Rank" lines) against the profile with
// check_same_gpu, and `profile` picks its base among the bundled profiles with
// choose_profile_base. Pure functions of their inputs (the bundled profiles are read from the
// data dir); thread-safe.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "hw_profiles/cluster.h"

namespace scaleplan::hw {

struct DeviceIdentity {
  std::string name;  // as the driver names it: "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
  Bytes memory{0};   // cudaDeviceProp::totalGlobalMem; 0: unknown (a log names only the GPU)
  int sm_count = 0;  // cudaDeviceProp::multiProcessorCount; 0: unknown
};

// "NVIDIA H100 80GB HBM3 (132 SMs, 79.6 GiB)", leaving out what is unknown.
std::string describe(const DeviceIdentity& device);

// OK when `device` is the GPU `spec` describes: the same model (A100, H100, H200, H800, B200,
// GB200, ... as both names spell it), the same form factor where both names say it (SXM, PCIe,
// NVL), the same memory size where both names say it, and, where known, the same SM count and
// memory within 5% (the driver reports slightly less than the datasheet). Otherwise an
// invalid-input error saying what differs, naming `profile`.
Status check_same_gpu(const DeviceIdentity& device, const GpuSpec& spec, std::string_view profile);

// The bundled profiles (bundled_cluster_names order) whose GPU is `device`.
std::vector<std::string> bundled_clusters_for(const DeviceIdentity& device);

struct ProfileBase {
  std::string cluster;    // the profile the calibrated one extends
  std::string note;       // one line for stderr: what was detected and why this base
  DeviceIdentity device;  // the GPU measured (empty name for the host backend)
};

// The base of `scaleplan profile --backend cuda` for the visible `devices`: `requested`
// (--cluster) when its GPU is theirs, or with `force` (--force-base) whatever it is, with a
// warning in the note; without `requested`, the first bundled profile of their GPU. Errors: no
// device ("no GPU visible"), devices of different kinds, a requested profile of another GPU
// without `force`, no bundled profile of this GPU.
Result<ProfileBase> choose_profile_base(const std::vector<DeviceIdentity>& devices,
                                        const std::string& requested, bool force);

}  // namespace scaleplan::hw
