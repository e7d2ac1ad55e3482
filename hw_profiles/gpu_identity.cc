// GPU identity checks; contract in gpu_identity.h.
#include "hw_profiles/gpu_identity.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <optional>

namespace scaleplan::hw {
namespace {

std::vector<std::string> upper_tokens(std::string_view name) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : name) {
    if (std::isalnum(static_cast<unsigned char>(ch))) {
      cur += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    } else if (!cur.empty()) {
      out.push_back(cur);
      cur.clear();
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

// What a GPU's name says: its model ("H100": letters then 2-3 digits, an optional letter;
// GB200/GH200 keep their prefix), form factor and memory size where it says them.
struct NameFacts {
  std::string model;
  std::string form;  // "SXM", "PCIE", "NVL" or ""
  int memory_gb = 0;
};

NameFacts facts_of(std::string_view name) {
  NameFacts f;
  for (const std::string& t : upper_tokens(name)) {
    size_t letters = 0;
    while (letters < t.size() && std::isalpha(static_cast<unsigned char>(t[letters]))) ++letters;
    size_t digits = letters;
    while (digits < t.size() && std::isdigit(static_cast<unsigned char>(t[digits]))) ++digits;
    const size_t n_digits = digits - letters;
    if (f.model.empty() && letters >= 1 && letters <= 2 && n_digits >= 2 && n_digits <= 3 &&
        t.size() - digits <= 1 && t != "HBM2" && t != "HBM3") {
      f.model = t;
    } else if (t.starts_with("SXM")) {
      f.form = "SXM";
    } else if (t == "PCIE") {
      f.form = "PCIE";
    } else if (t == "NVL") {
      f.form = "NVL";
    } else if (letters == 0 && t.ends_with("GB") && digits + 2 == t.size()) {
      f.memory_gb = std::stoi(t.substr(0, digits));
    }
  }
  return f;
}

std::string gib(Bytes b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", to_gib(b));
  return buf;
}

std::string spec_description(const GpuSpec& s) {
  return s.name + " (" + std::to_string(s.sm_count) + " SMs, " + gib(s.memory) + ")";
}

}  // namespace

std::string describe(const DeviceIdentity& d) {
  std::string extra;
  if (d.sm_count > 0) extra += std::to_string(d.sm_count) + " SMs";
  if (d.memory.value() > 0) extra += (extra.empty() ? "" : ", ") + gib(d.memory);
  return d.name + (extra.empty() ? "" : " (" + extra + ")");
}

Status check_same_gpu(const DeviceIdentity& d, const GpuSpec& spec, std::string_view profile) {
  const NameFacts have = facts_of(d.name), want = facts_of(spec.name);
  std::string why;
  if (have.model.empty() || want.model.empty()) {
    why = "the GPU model cannot be read from the names";
  } else if (have.model != want.model) {
    why = "the model is " + have.model + ", not " + want.model;
  } else if (!have.form.empty() && !want.form.empty() && have.form != want.form) {
    why = "the " + have.form + " form factor is not the " + want.form + " one";
  } else if (have.memory_gb > 0 && want.memory_gb > 0 && have.memory_gb != want.memory_gb) {
    why = std::to_string(have.memory_gb) + " GB is not " + std::to_string(want.memory_gb) + " GB";
  } else if (d.sm_count > 0 && spec.sm_count > 0 && d.sm_count != spec.sm_count) {
    why = std::to_string(d.sm_count) + " SMs are not " + std::to_string(spec.sm_count);
  } else if (d.memory.value() > 0 && spec.memory.value() > 0 &&
             std::abs(to_gib(d.memory) / to_gib(spec.memory) - 1.0) > 0.05) {
    why = gib(d.memory) + " of memory is not " + gib(spec.memory);
  }
  if (why.empty()) return Status::ok();
  return Status::invalid("the GPU measured is " + describe(d) + ", but " + std::string(profile) +
                         " describes " + spec_description(spec) + ": " + why);
}

std::vector<std::string> bundled_clusters_for(const DeviceIdentity& d) {
  std::vector<std::string> out;
  for (const std::string& name : bundled_cluster_names()) {
    auto c = load_cluster(name);
    if (c.is_ok() && check_same_gpu(d, c->gpu, name).is_ok()) out.push_back(name);
  }
  return out;
}

Result<ProfileBase> choose_profile_base(const std::vector<DeviceIdentity>& devices,
                                        const std::string& requested, bool force) {
  if (devices.empty())
    return Status::invalid(
        "no GPU visible: profile --backend cuda measures the GPUs of this "
        "machine (check CUDA_VISIBLE_DEVICES and nvidia-smi)");
  const DeviceIdentity& d = devices.front();
  for (const DeviceIdentity& other : devices) {
    if (other.name != d.name || other.sm_count != d.sm_count)
      return Status::invalid("the visible GPUs differ (" + describe(d) + ", " + describe(other) +
                             "): profile one kind at a time (CUDA_VISIBLE_DEVICES)");
  }
  ProfileBase base;
  base.device = d;
  if (!requested.empty()) {
    SP_ASSIGN_OR_RETURN(const Cluster c, load_cluster(requested));
    Status same = check_same_gpu(d, c.gpu, "--cluster " + requested);
    base.cluster = requested;
    if (same.is_ok()) {
      base.note = "profile: " + describe(d) + ", base " + requested;
      return base;
    }
    if (!force)
      return Status::invalid(same.message() +
                             "; the calibrated profile would pair this GPU's kernels with that "
                             "profile's peaks and memory (pass --force-base to do it anyway)");
    base.note = "profile: warning: " + same.message() + " (--force-base)";
    return base;
  }
  const std::vector<std::string> matches = bundled_clusters_for(d);
  if (matches.empty())
    return Status::invalid("no bundled profile has this GPU (" + describe(d) +
                           "): give --cluster with a profile that describes it "
                           "(docs/hw_profiles.md), or --cluster C --force-base to extend C anyway");
  base.cluster = matches.front();
  base.note = "profile: " + describe(d) + ", base " + base.cluster + " (its bundled profile";
  for (size_t i = 1; i < matches.size(); ++i) base.note += (i == 1 ? "; also " : ", ") + matches[i];
  base.note += "; --cluster chooses another)";
  return base;
}

}  // namespace scaleplan::hw
