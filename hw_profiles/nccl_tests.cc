#include "hw_profiles/nccl_tests.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/json_util.h"
#include "hw_profiles/gpu_identity.h"

namespace scaleplan::hw {
namespace {

std::vector<std::string> split_ws(std::string_view line) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : line) {
    if (ch == ' ' || ch == '\t' || ch == '\r') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

bool to_i64(const std::string& s, int64_t* v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size();
}
bool to_f64(const std::string& s, double* v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size();
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// `ranks` spread evenly over `nodes` hosts (mpirun -N k), as nccl-tests runs them.
GroupPlacement spread(const Cluster& c, int ranks, int nodes) {
  GroupPlacement g = GroupPlacement::packed(c, ranks);
  if (nodes > 1) {
    g.nodes = nodes;
    g.ranks_per_node = (ranks + nodes - 1) / nodes;
    const int nodes_per_domain = std::max(1, c.gpus_per_domain() / c.gpus_per_node);
    g.domains = (nodes + nodes_per_domain - 1) / nodes_per_domain;
    g.ranks_per_domain = std::min(ranks, g.ranks_per_node * nodes_per_domain);
    g.in_nvlink_domain = g.domains == 1;
  }
  return g;
}

}  // namespace

Result<NcclTestLog> parse_nccl_tests_log(std::string_view text, std::string_view what) {
  NcclTestLog log;
  std::set<std::string> hosts;
  bool has_root = false;
  int lineno = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++lineno;
    auto tok = split_ws(line);
    if (tok.empty()) continue;
    if (tok[0].starts_with("#")) {
      // "# Collective test starting: all_reduce_perf"
      if (auto p = line.find("test starting:"); p != std::string_view::npos) {
        auto name = split_ws(line.substr(p + 14));
        if (!name.empty()) {
          auto op = parse_collective_op(name[0]);
          if (op) log.op = *op;
        }
      }
      // "#  Rank  0 Group  0 Pid  1234 on  host1 device  0 [0x07] NVIDIA H100 80GB HBM3"
      auto it = std::find(tok.begin(), tok.end(), "Rank");
      if (it != tok.end()) {
        auto on = std::find(tok.begin(), tok.end(), "on");
        if (on != tok.end() && on + 1 != tok.end()) {
          log.ranks++;
          hosts.insert(*(on + 1));
          // The device's name follows its bus id: "device  0 [0x1b] NVIDIA H100 80GB HBM3".
          std::string gpu;
          if (auto d = line.find(" device "); d != std::string_view::npos) {
            if (auto b = line.find(']', d); b != std::string_view::npos) {
              std::string_view rest = line.substr(b + 1);
              while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t'))
                rest.remove_prefix(1);
              while (!rest.empty() &&
                     (rest.back() == ' ' || rest.back() == '\r' || rest.back() == '\t'))
                rest.remove_suffix(1);
              gpu = std::string(rest);
            }
          }
          if (log.ranks == 1) {
            log.gpu = gpu;
          } else if (gpu != log.gpu) {
            log.gpus_differ = true;
          }
        }
      }
      if (std::find(tok.begin(), tok.end(), "redop") != tok.end() &&
          std::find(tok.begin(), tok.end(), "size") != tok.end()) {
        has_root = std::find(tok.begin(), tok.end(), "root") != tok.end();
      }
      continue;
    }
    int64_t size = 0, count = 0;
    if (tok.size() < 4 || !to_i64(tok[0], &size) || !to_i64(tok[1], &count))
      continue;  // other output
    NcclTestRow row;
    row.size = Bytes(size);
    row.count = count;
    row.type = tok[2];
    row.redop = tok[3];
    size_t i = 4 + (has_root ? 1 : 0);
    auto need = [&](size_t k) { return tok.size() >= i + k; };
    double t = 0, a = 0, b = 0;
    if (!need(3) || !to_f64(tok[i], &t) || !to_f64(tok[i + 1], &a) || !to_f64(tok[i + 2], &b)) {
      return Status::invalid(std::string(what) + ": line " + std::to_string(lineno) +
                             ": expected 'size count type redop [root] time algbw busbw ...'");
    }
    // A row that no run can print (nan, inf, a negative or zero size or time, a time past an
    // hour) is refused: a fit to it would write a profile that does not load back.
    const std::string at = std::string(what) + ": line " + std::to_string(lineno);
    if (size <= 0 || size > kMaxParsedBytes || count < 0) {
      return Status::invalid(at + ": size " + text_brief(tok[0]) + " and count " +
                             text_brief(tok[1]) + ": the size must be positive and at most 1 EiB");
    }
    if (!std::isfinite(t) || !std::isfinite(a) || !std::isfinite(b) || t <= 0 || a < 0 || b < 0 ||
        t > kMaxParsedSeconds * 1e6 || a > 1e9 || b > 1e9) {
      return Status::invalid(at + ": time " + text_brief(tok[i]) + " us, algbw " +
                             text_brief(tok[i + 1]) + ", busbw " + text_brief(tok[i + 2]) +
                             ": expected a positive time of at most an hour and finite, "
                             "non-negative bandwidths");
    }
    row.time = Duration::microseconds(t);
    row.algbw_gbps = a;
    row.busbw_gbps = b;
    i += 4;  // time algbw busbw #wrong
    double t2 = 0, b2 = 0, a2 = 0;
    if (need(3) && to_f64(tok[i], &t2) && to_f64(tok[i + 1], &a2) && to_f64(tok[i + 2], &b2) &&
        t2 > 0 && t2 <= kMaxParsedSeconds * 1e6 && b2 >= 0 && b2 <= 1e9) {
      row.time_in_place = Duration::microseconds(t2);
      row.busbw_in_place_gbps = b2;
    }
    log.rows.push_back(std::move(row));
  }
  log.nodes = static_cast<int>(hosts.size());
  if (log.rows.empty())
    return Status::invalid(std::string(what) + ": no nccl-tests result rows found");
  return log;
}

Status check_log_gpu(const NcclTestLog& log, const Cluster& cluster, std::string_view profile,
                     std::string_view source, bool* unchecked) {
  if (unchecked != nullptr) *unchecked = log.gpu.empty();
  if (log.gpus_differ)
    return Status::invalid(std::string(source) +
                           ": its ranks name different GPUs; one fit describes one GPU model");
  if (log.gpu.empty()) return Status::ok();
  Status same = check_same_gpu(DeviceIdentity{log.gpu}, cluster.gpu, profile);
  if (same.is_ok()) return same;
  return Status::invalid(std::string(source) + ": " + same.message() +
                         "; its collectives would calibrate another machine (import it onto a "
                         "profile of that GPU, or pass --force-base)");
}

std::string_view measured_placement(const NcclTestLog& log) {
  if (log.nodes <= 1) return "intra_node";
  return log.ranks == log.nodes ? "inter_node" : "multi_node";
}

Result<NcclFit> fit_to_nccl_log(const Cluster& cluster, const NcclTestLog& log,
                                std::string_view source) {
  if (!log.op)
    return Status::invalid(std::string(source) +
                           ": the collective is not named in the log; give --op");
  if (log.ranks < 2)
    return Status::invalid(std::string(source) + ": the number of ranks is unknown; give --ranks");
  NcclFit fit{cluster, "", {}};
  Cluster& c = fit.cluster;
  const CollectiveOp op = *log.op;
  const GroupPlacement g = spread(c, log.ranks, log.nodes);
  auto largest =
      std::max_element(log.rows.begin(), log.rows.end(),
                       [](const NcclTestRow& a, const NcclTestRow& b) { return a.size < b.size; });
  std::ostringstream rep;

  // 1. Efficiency: of the fabric that limits the group, so that busbw at the largest size matches.
  const char* eff_name = "nvlink_efficiency";
  double* eff = &c.cost.nvlink_efficiency;
  {
    const CollectiveModel m(c, CollectiveModel::Measured::kModelOnly);
    const auto e = m.estimate(op, largest->size, g);
    const double nic_node =
        c.network.nics_per_node * c.network.nic_bandwidth.value() * c.cost.network_efficiency;
    const double nv = c.node.nvlink_bandwidth.value() * c.cost.nvlink_efficiency;
    if (e.algorithm.starts_with("nvls")) {
      eff = &c.cost.nvls_efficiency;
      eff_name = "nvls_efficiency";
    } else if (g.domains > 1 &&
               (nic_node * (g.ranks_per_domain / std::max(1, g.ranks_per_node)) < nv ||
                g.ranks_per_domain == 1)) {
      eff = &c.cost.network_efficiency;
      eff_name = "network_efficiency";
    }
  }
  const double eff_before = *eff;
  auto fit_efficiency = [&] {
    for (int iter = 0; iter < 3; ++iter) {
      const CollectiveModel m(c, CollectiveModel::Measured::kModelOnly);
      const double model =
          busbw(op, g.size, largest->size, m.estimate(op, largest->size, g).time).value() / 1e9;
      if (model <= 0 || largest->busbw_gbps <= 0) return;
      *eff = std::clamp(*eff * largest->busbw_gbps / model, 0.01, 1.0);
    }
  };

  // 2. Base latency: the mean gap between measured and modelled time over the sizes <= 64 KiB.
  int small = 0;
  for (const auto& row : log.rows) small += row.size <= 64_KiB ? 1 : 0;
  const Duration latency_before = c.cost.base_latency;
  auto fit_latency = [&] {
    if (small == 0) return;
    const CollectiveModel m(c, CollectiveModel::Measured::kModelOnly);
    double gap = 0;
    for (const auto& row : log.rows)
      if (row.size <= 64_KiB)
        gap += row.time.to_seconds() - m.estimate(op, row.size, g).time.to_seconds();
    c.cost.base_latency = Duration::seconds(
        std::clamp(c.cost.base_latency.to_seconds() + gap / small, 0.5e-6, kMaxParsedSeconds));
  };

  // 3. Ramp: the pipeline fill of the Simple protocol, which sets how fast busbw climbs to the
  // asymptote. The ramp that minimises the squared log error of the time over the sizes the
  // model runs with Simple, up to half the largest (below, LL and LL128 run and the ramp barely
  // enters; at the largest, the efficiency decides), on a log grid from 64 KiB to 1 GiB. Logs
  // with fewer than two such sizes keep the profile's ramp.
  std::vector<const NcclTestRow*> mid;
  {
    const CollectiveModel m(c, CollectiveModel::Measured::kModelOnly);
    for (const auto& row : log.rows)
      if (row.size.value() * 2 <= largest->size.value() && row.time.to_seconds() > 0 &&
          m.estimate(op, row.size, g).algorithm.ends_with("Simple"))
        mid.push_back(&row);
  }
  const Bytes ramp_before = c.cost.ramp_bytes;
  auto fit_ramp = [&] {
    if (mid.size() < 2) return;
    auto error = [&](Bytes ramp) {
      Cluster trial = c;
      trial.cost.ramp_bytes = ramp;
      const CollectiveModel m(trial, CollectiveModel::Measured::kModelOnly);
      double sum = 0;
      for (const NcclTestRow* row : mid) {
        const double d =
            std::log(m.estimate(op, row->size, g).time.to_seconds() / row->time.to_seconds());
        sum += d * d;
      }
      return sum;
    };
    Bytes best = c.cost.ramp_bytes;
    double best_error = error(best);
    for (double r = 64.0 * 1024; r <= 1024.0 * 1024 * 1024; r *= std::pow(2.0, 0.125)) {
      const Bytes ramp(static_cast<int64_t>(r));
      if (const double e = error(ramp); e < best_error) {
        best_error = e;
        best = ramp;
      }
    }
    c.cost.ramp_bytes = best;
  };

  // Each term moves the others a little (the ramp costs at the largest size, the latency at the
  // middle ones): alternate until they settle.
  for (int round = 0; round < 4; ++round) {
    fit_efficiency();
    fit_latency();
    fit_ramp();
  }
  fit_efficiency();
  fit_latency();

  // Fits to doubt: a parameter fitted from one size, or moved by more than 10x.
  auto moved = [&](const char* name, double before, double after, const std::string& shown) {
    if (before > 0 && after > 0 && (after / before > 10 || before / after > 10))
      fit.warnings.push_back(std::string(name) + " moved more than 10x (" + shown +
                             "): check that the log is of this cluster's fabric and group");
  };
  std::set<int64_t> sizes;
  for (const auto& row : log.rows) sizes.insert(row.size.value());
  if (sizes.size() == 1) {
    fit.warnings.push_back("the log has a single message size: " + std::string(eff_name) +
                           " and base_latency are each fitted from that one point (run "
                           "nccl-tests with -b 8 -e 8G -f 2 for a sweep)");
  } else if (small == 1) {
    fit.warnings.push_back(
        "base_latency is fitted from a single size of at most 64 KiB (run "
        "nccl-tests from -b 8 for more)");
  }
  moved(eff_name, eff_before, *eff, fmt("%.3f", eff_before) + " -> " + fmt("%.3f", *eff));
  if (small > 0)
    moved("base_latency", latency_before.to_seconds(), c.cost.base_latency.to_seconds(),
          fmt("%.2f us", latency_before.to_microseconds()) + " -> " +
              fmt("%.2f us", c.cost.base_latency.to_microseconds()));
  if (mid.size() >= 2)
    moved("ramp_bytes", static_cast<double>(ramp_before.value()),
          static_cast<double>(c.cost.ramp_bytes.value()),
          fmt("%.2f MiB", ramp_before.value() / 1048576.0) + " -> " +
              fmt("%.2f MiB", c.cost.ramp_bytes.value() / 1048576.0));

  rep << eff_name << ": " << fmt("%.3f", eff_before) << " -> " << fmt("%.3f", *eff)
      << " (busbw at the largest size " << fmt("%.1f", largest->busbw_gbps) << " GB/s)\n";
  if (small > 0)
    rep << "base_latency: " << fmt("%.2f", latency_before.to_microseconds()) << " us -> "
        << fmt("%.2f", c.cost.base_latency.to_microseconds()) << " us (mean gap over " << small
        << " sizes <= 64 KiB)\n";
  if (mid.size() >= 2)
    rep << "ramp_bytes: " << fmt("%.2f", ramp_before.value() / 1048576.0) << " MiB -> "
        << fmt("%.2f", c.cost.ramp_bytes.value() / 1048576.0) << " MiB (least squares over "
        << mid.size() << " Simple-protocol sizes up to half the largest)\n";
  c.cost.calibrated_from = "nccl-tests " + std::string(to_string(op)) + " log " +
                           std::string(source) + ", " + std::to_string(log.ranks) + " ranks on " +
                           std::to_string(std::max(1, log.nodes)) + " node(s)";
  fit.report = rep.str();
  return fit;
}

Result<NcclFit> fit_network_scaling(const Cluster& cluster,
                                    const std::vector<MeasuredBusbw>& points,
                                    std::string_view source) {
  const std::string src(source);
  // Points by (op, nodes), and all ops pooled under "" for the collectives without a table.
  std::map<std::pair<std::string, int>, std::vector<const MeasuredBusbw*>> groups;
  for (const auto& p : points) {
    if (p.nodes < 1 || p.ranks_per_node < 1 || p.bytes.value() <= 0 || !(p.busbw_gbps > 0))
      return Status::invalid(src + ": a point needs nodes >= 1, ranks_per_node >= 1, bytes > 0 " +
                             "and busbw_gbps > 0");
    if (p.nodes < 2) continue;
    groups[{std::string(to_string(p.op)), p.nodes}].push_back(&p);
    groups[{std::string(), p.nodes}].push_back(&p);
  }
  if (groups.empty())
    return Status::invalid(src + ": no point spans more than one node; nothing to fit");
  NcclFit fit{cluster, "", {}};
  Cluster& c = fit.cluster;
  c.cost.network_scaling.clear();
  auto model_busbw = [](const Cluster& cl, const MeasuredBusbw& p) {
    const GroupPlacement g = spread(cl, p.nodes * p.ranks_per_node, p.nodes);
    const CollectiveModel m(cl, CollectiveModel::Measured::kModelOnly);
    return busbw(p.op, g.size, p.bytes, m.estimate(p.op, p.bytes, g).time + p.copy_time).value() /
           1e9;
  };
  // Mean log(model / measured) over one group's points, with `at` as the profile's only scaling.
  auto log_gap = [&](const NetworkScalingPoint& at, const std::vector<const MeasuredBusbw*>& pts) {
    Cluster trial = cluster;
    trial.cost.network_scaling = {at};
    double sum = 0;
    for (const MeasuredBusbw* p : pts) sum += std::log(model_busbw(trial, *p) / p->busbw_gbps);
    return sum / static_cast<double>(pts.size());
  };
  const double f_max = 1.0 / c.cost.network_efficiency;
  std::ostringstream rep;
  for (const auto& group : groups) {
    // Named, not a structured binding: clang 14 (the fuzz build) cannot capture bindings.
    const auto& key = group.first;
    const auto& pts = group.second;
    NetworkScalingPoint pt{key.first, key.second, 1.0};
    // Model busbw rises with the fraction: bisect on log f, within 1% .. the line rate.
    double lo = std::log(0.01), hi = std::log(f_max);
    auto gap_at = [&](double log_f) {
      pt.fraction = std::exp(log_f);
      return log_gap(pt, pts);
    };
    if (gap_at(hi) <= 0) {
      lo = hi;  // even the line rate is slower than measured: keep the line rate
    } else if (gap_at(lo) >= 0) {
      hi = lo;
    }
    for (int it = 0; it < 50 && hi - lo > 1e-5; ++it) {
      const double mid = 0.5 * (lo + hi);
      (gap_at(mid) > 0 ? hi : lo) = mid;
    }
    pt.fraction = std::exp(0.5 * (lo + hi));
    c.cost.network_scaling.push_back(pt);
    rep << (pt.op.empty() ? "other collectives" : pt.op) << " over " << pt.nodes
        << " nodes: network fraction " << fmt("%.3f", pt.fraction) << "\n";
  }
  // Every point, one node included, before and after.
  for (const auto& p : points) {
    rep << "  " << to_string(p.op) << " " << p.nodes << "x" << p.ranks_per_node << " "
        << fmt("%.0f", p.bytes.value() / 1048576.0) << " MiB: measured "
        << fmt("%.1f", p.busbw_gbps) << " GB/s, model " << fmt("%.1f", model_busbw(cluster, p))
        << " -> " << fmt("%.1f", model_busbw(c, p)) << " GB/s\n";
  }
  c.cost.calibrated_from =
      (cluster.cost.calibrated_from.empty() ? "" : cluster.cost.calibrated_from + "; ") +
      "network_scaling from " + std::to_string(points.size()) + " measured busbw points (" + src +
      ")";
  fit.report = rep.str();
  return fit;
}

Result<std::vector<MeasuredBusbw>> parse_measured_busbw(std::string_view json_text,
                                                        std::string_view what) {
  const std::string w(what);
  SP_ASSIGN_OR_RETURN(const Json j, parse_json(std::string(json_text), w));
  if (!j.is_object() || !j.contains("points") || !j["points"].is_array())
    return Status::invalid(w + ": points: expected an array of measured points");
  std::vector<MeasuredBusbw> out;
  for (size_t i = 0; i < j["points"].size(); ++i) {
    const Json& p = j["points"][i];
    const std::string at = w + ": points[" + std::to_string(i) + "]";
    MeasuredBusbw m;
    SP_ASSIGN_OR_RETURN(const std::string op, json_string(p, "op", at));
    auto parsed = parse_collective_op(op);
    if (!parsed) return Status::invalid(at + ": op: " + parsed.status().message());
    m.op = *parsed;
    SP_ASSIGN_OR_RETURN(const int64_t nodes, json_int(p, "nodes", at));
    SP_ASSIGN_OR_RETURN(const int64_t rpn, json_int(p, "ranks_per_node", at, 8));
    if (nodes < 1 || nodes > 1'000'000)
      return Status::invalid(at + ": nodes: must be at least 1, got " + std::to_string(nodes));
    if (rpn < 1 || rpn > 1024)
      return Status::invalid(at + ": ranks_per_node: must be in [1, 1024], got " +
                             std::to_string(rpn));
    m.nodes = static_cast<int>(nodes);
    m.ranks_per_node = static_cast<int>(rpn);
    SP_ASSIGN_OR_RETURN(m.bytes, json_bytes(p, "bytes", at));
    SP_ASSIGN_OR_RETURN(m.busbw_gbps, json_number(p, "busbw_gbps", at));
    if (m.bytes.value() <= 0) return Status::invalid(at + ": bytes: must be positive");
    if (!(m.busbw_gbps > 0))
      return Status::invalid(at + ": busbw_gbps: must be positive, got " +
                             std::to_string(m.busbw_gbps));
    SP_ASSIGN_OR_RETURN(m.copied, json_bytes(p, "copied_bytes", at, Bytes(0)));
    out.push_back(m);
  }
  return out;
}

}  // namespace scaleplan::hw
