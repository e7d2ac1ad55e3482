#include "core/layout.h"

#include "core/enum_names.h"

#include "core/json_util.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <vector>

#include "core/counts.h"
#include "core/layout_keys.h"
#include "core/suggest.h"

namespace scaleplan {
namespace {

std::string key_error(std::string_view key, std::string_view value, std::string_view problem) {
  return "layout: " + text_brief(key) + "='" + text_brief(value) + "' " + std::string(problem);
}

// The value `s` names in an enum's name table (core/enum_names.h), or the error naming `key`, the
// value and the table's names: "layout: place='x' is not one of linear, packed".
template <typename E, size_t N>
Result<E> parse_named(const std::string_view (&names)[N], std::string_view key,
                      std::string_view s) {
  if (auto v = value_in<E>(names, s)) return *v;
  std::string list;
  for (size_t i = 0; i < N; ++i) {
    if (i > 0) list += ", ";
    list += names[i];
  }
  return Status::invalid(key_error(key, s, "is not one of " + list));
}

// A count as core/counts.h reads it (gbs=1k is 1024).
Result<int64_t> parse_int(std::string_view key, std::string_view value, int64_t min, int64_t max) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || ptr != value.data() + value.size()) {
    auto counted = parse_count(value, key);
    if (!counted.is_ok())
      return Status::invalid(
          key_error(key, value, "is not an integer (a count may say 1k = 1024)"));
    v = *counted;
  }
  if (v < min || v > max) {
    return Status::invalid(key_error(
        key, value, "is out of range [" + std::to_string(min) + ", " + std::to_string(max) + "]"));
  }
  return v;
}

std::string num(int64_t v) { return std::to_string(v); }

}  // namespace

constexpr std::string_view kScheduleNames[] = {"afab",     "1f1b",      "interleaved", "zb-h1",
                                               "dualpipe", "dualpipev", "zb-v"};
static_assert(std::ssize(kScheduleNames) == static_cast<int>(Schedule::kZbV) + 1);

std::string_view to_string(Schedule s) { return name_in(kScheduleNames, s); }
constexpr std::string_view kRecomputeNames[] = {"none", "selective", "full"};
static_assert(std::ssize(kRecomputeNames) == static_cast<int>(Recompute::kFull) + 1);

std::string_view to_string(Recompute r) { return name_in(kRecomputeNames, r); }
std::string_view to_string(DType d) {
  return d == DType::kBf16 ? "bf16" : d == DType::kFp8 ? "fp8" : "fp4";
}

Result<Schedule> parse_schedule(std::string_view s) {
  if (auto v = value_in<Schedule>(kScheduleNames, s)) return *v;
  if (s == "gpipe") return Schedule::kAfab;
  return Status::invalid(key_error(
      "schedule", s,
      "is not one of afab, 1f1b, interleaved, zb-h1, dualpipe, dualpipev, zb-v" +
          did_you_mean(s,
                       {"afab", "1f1b", "interleaved", "zb-h1", "dualpipe", "dualpipev", "zb-v"})));
}
Result<Recompute> parse_recompute(std::string_view s) {
  if (auto v = value_in<Recompute>(kRecomputeNames, s)) return *v;
  return Status::invalid(key_error("recompute", s, "is not one of none, selective, full"));
}
namespace {
constexpr std::pair<uint8_t, std::string_view> kModuleNames[] = {
    {kRecomputeCoreAttn, "core_attn"},
    {kRecomputeLayernorm, "layernorm"},
    {kRecomputeMoeAct, "moe_act"},
    {kRecomputeMlaUpProj, "mla_up_proj"},
    {kRecomputeMlp, "mlp"},
    {kRecomputeSharedExperts, "shared_experts"},
    {kRecomputeMoe, "moe"},
};
}  // namespace

std::string format_recompute_modules(uint8_t modules) {
  std::string out;
  for (const auto& [bit, name] : kModuleNames) {
    if ((modules & bit) == 0) continue;
    if (!out.empty()) out += '+';
    out += name;
  }
  return out;
}

Result<uint8_t> parse_recompute_modules(std::string_view s) {
  uint8_t modules = 0;
  size_t pos = 0;
  while (true) {
    const size_t plus = s.find('+', pos);
    const std::string_view name =
        s.substr(pos, plus == std::string_view::npos ? std::string_view::npos : plus - pos);
    uint8_t bit = 0;
    for (const auto& [b, n] : kModuleNames) {
      if (name == n) bit = b;
    }
    if (bit == 0) {
      return Status::invalid(key_error(
          "recompute_modules", s,
          "names '" + std::string(name) +
              "', not one of core_attn, layernorm, moe_act, mla_up_proj, mlp, shared_experts, "
              "moe (joined by '+')"));
    }
    if (modules & bit)
      return Status::invalid(
          key_error("recompute_modules", s, "names '" + std::string(name) + "' twice"));
    modules |= bit;
    if (plus == std::string_view::npos) break;
    pos = plus + 1;
  }
  return modules;
}

constexpr std::string_view kCpCommNames[] = {"p2p", "all_gather", "a2a"};
static_assert(std::ssize(kCpCommNames) == static_cast<int>(CpComm::kA2a) + 1);

std::string_view to_string(CpComm c) { return name_in(kCpCommNames, c); }

Result<CpComm> parse_cp_comm(std::string_view s) {
  return parse_named<CpComm>(kCpCommNames, "cp_comm", s);
}

constexpr std::string_view kPlacementNames[] = {"linear", "packed"};
static_assert(std::ssize(kPlacementNames) == static_cast<int>(Placement::kPacked) + 1);

std::string_view to_string(Placement p) { return name_in(kPlacementNames, p); }

Result<Placement> parse_placement(std::string_view s) {
  return parse_named<Placement>(kPlacementNames, "place", s);
}

Result<DType> parse_dtype(std::string_view s) {
  if (s == "bf16") return DType::kBf16;
  if (s == "fp8") return DType::kFp8;
  return Status::invalid(key_error("dtype", s, "is not one of bf16, fp8"));
}

constexpr std::string_view kMomentDtypeNames[] = {"fp32", "bf16"};
static_assert(std::ssize(kMomentDtypeNames) == static_cast<int>(MomentDtype::kBf16) + 1);

std::string_view to_string(MomentDtype d) { return name_in(kMomentDtypeNames, d); }

Result<MomentDtype> parse_moments(std::string_view s) {
  return parse_named<MomentDtype>(kMomentDtypeNames, "moments", s);
}

constexpr std::string_view kActCacheNames[] = {"default", "fp8"};
static_assert(std::ssize(kActCacheNames) == static_cast<int>(ActCache::kFp8) + 1);

std::string_view to_string(ActCache c) { return name_in(kActCacheNames, c); }

Result<ActCache> parse_act_cache(std::string_view s) {
  return parse_named<ActCache>(kActCacheNames, "act_cache", s);
}

namespace {

// The comma-separated items of a layout string, trimmed of spaces at both ends (the last one
// empty when the string ends with a comma).
std::vector<std::string_view> layout_items(std::string_view text) {
  std::vector<std::string_view> items;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(pos, comma - pos);
    pos = comma + 1;
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    items.push_back(item);
  }
  return items;
}

}  // namespace

bool layout_gives(std::string_view text, std::string_view key) {
  for (std::string_view item : layout_items(text)) {
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) continue;
    std::string_view k = item.substr(0, eq);
    while (!k.empty() && k.back() == ' ') k.remove_suffix(1);
    if (k == key) return true;
  }
  return false;
}

namespace {

constexpr int64_t kMaxDegree = 1 << 20;

Status parse_degree(std::string_view key, std::string_view value, int& field) {
  SP_ASSIGN_OR_RETURN(const int64_t v, parse_int(key, value, 1, kMaxDegree));
  field = static_cast<int>(v);
  return Status::ok();
}
Status parse_opt_degree(std::string_view key, std::string_view value, std::optional<int>& field,
                        int64_t min) {
  SP_ASSIGN_OR_RETURN(const int64_t v, parse_int(key, value, min, kMaxDegree));
  field = static_cast<int>(v);
  return Status::ok();
}
template <typename Flag>
Status parse_on_off(std::string_view key, std::string_view value, Flag& flag) {
  if (value == "on" || value == "true" || value == "1")
    flag = true;
  else if (value == "off" || value == "false" || value == "0")
    flag = false;
  else
    return Status::invalid(key_error(key, value, "is not on or off"));
  return Status::ok();
}
std::string on_off(bool b) { return b ? "on" : "off"; }
std::string or_none(const std::optional<int>& v) { return v ? num(*v) : "none"; }
std::optional<std::string> if_set(const std::optional<int>& v) {
  return v ? std::optional<std::string>(num(*v)) : std::nullopt;
}
std::optional<std::string> if_on(bool b) {
  return b ? std::optional<std::string>("on") : std::nullopt;
}

using Given = std::optional<std::string>;

// The row of an enum key whose field `F` is read by `P` and written by its to_string, left out of
// the canonical string at its default `D`.
template <typename E, E Layout::*F, Result<E> (*P)(std::string_view), E D>
constexpr LayoutKey enum_key(std::string_view name) {
  return {name,
          [](Layout& l, std::string_view v) -> Status {
            SP_ASSIGN_OR_RETURN(l.*F, P(v));
            return Status::ok();
          },
          [](const Layout& l) { return std::string(to_string(l.*F)); },
          [](const Layout& l) -> Given {
            if (l.*F == D) return std::nullopt;
            return std::string(to_string(l.*F));
          }};
}

// DESIGN.md's "Layout string" table, in its order; `given` null: always written, as `value`.
const LayoutKey kLayoutKeys[] = {
    {"tp", [](Layout& l, std::string_view v) { return parse_degree("tp", v, l.tp); },
     [](const Layout& l) { return num(l.tp); }, nullptr},
    {"pp", [](Layout& l, std::string_view v) { return parse_degree("pp", v, l.pp); },
     [](const Layout& l) { return num(l.pp); }, nullptr},
    {"dp", [](Layout& l, std::string_view v) { return parse_opt_degree("dp", v, l.dp, 1); },
     [](const Layout& l) { return l.dp ? num(*l.dp) : ""; },
     [](const Layout& l) { return if_set(l.dp); }},
    {"cp", [](Layout& l, std::string_view v) { return parse_degree("cp", v, l.cp); },
     [](const Layout& l) { return num(l.cp); }, nullptr},
    {"cp_comm",
     [](Layout& l, std::string_view v) -> Status {
       SP_ASSIGN_OR_RETURN(l.cp_comm, parse_cp_comm(v));
       return Status::ok();
     },
     [](const Layout& l) { return std::string(to_string(l.cp_comm_type())); },
     [](const Layout& l) -> Given {
       if (!l.cp_comm) return std::nullopt;
       return std::string(to_string(*l.cp_comm));
     }},
    {"ep", [](Layout& l, std::string_view v) { return parse_degree("ep", v, l.ep); },
     [](const Layout& l) { return num(l.ep); }, nullptr},
    {"etp", [](Layout& l, std::string_view v) { return parse_degree("etp", v, l.etp); },
     [](const Layout& l) { return num(l.etp); }, nullptr},
    {"vpp", [](Layout& l, std::string_view v) { return parse_opt_degree("vpp", v, l.vpp, 1); },
     [](const Layout& l) { return num(l.vpp_degree()); },
     [](const Layout& l) { return if_set(l.vpp); }},
    {"schedule",
     [](Layout& l, std::string_view v) -> Status {
       SP_ASSIGN_OR_RETURN(l.schedule, parse_schedule(v));
       return Status::ok();
     },
     [](const Layout& l) { return std::string(to_string(l.schedule)); }, nullptr},
    {"sp", [](Layout& l, std::string_view v) { return parse_on_off("sp", v, l.sp); },
     [](const Layout& l) { return on_off(l.sequence_parallel()); },
     [](const Layout& l) -> Given {
       if (!l.sp) return std::nullopt;
       return on_off(*l.sp);
     }},
    {"mbs", [](Layout& l, std::string_view v) { return parse_degree("mbs", v, l.mbs); },
     [](const Layout& l) { return num(l.mbs); }, nullptr},
    {"gbs",
     [](Layout& l, std::string_view v) -> Status {
       SP_ASSIGN_OR_RETURN(l.gbs, parse_int("gbs", v, 1, kMaxGlobalBatch));
       return Status::ok();
     },
     [](const Layout& l) { return l.gbs ? num(*l.gbs) : ""; },
     [](const Layout& l) -> Given {
       if (!l.gbs) return std::nullopt;
       return num(*l.gbs);
     }},
    {"zero",
     [](Layout& l, std::string_view v) -> Status {
       SP_ASSIGN_OR_RETURN(const int64_t z, parse_int("zero", v, 0, 3));
       l.zero = static_cast<int>(z);
       return Status::ok();
     },
     [](const Layout& l) { return num(l.zero); }, nullptr},
    {"recompute",
     [](Layout& l, std::string_view v) -> Status {
       SP_ASSIGN_OR_RETURN(l.recompute, parse_recompute(v));
       return Status::ok();
     },
     [](const Layout& l) { return std::string(to_string(l.recompute)); }, nullptr},
    {"recompute_modules",
     [](Layout& l, std::string_view v) -> Status {
       SP_ASSIGN_OR_RETURN(l.recompute_modules, parse_recompute_modules(v));
       return Status::ok();
     },
     [](const Layout& l) {
       const uint8_t m = l.recompute_module_set();
       return m == 0 ? std::string("none") : format_recompute_modules(m);
     },
     [](const Layout& l) -> Given {
       if (!l.recompute_modules) return std::nullopt;
       return format_recompute_modules(*l.recompute_modules);
     }},
    {"dtype",
     [](Layout& l, std::string_view v) -> Status {
       SP_ASSIGN_OR_RETURN(l.dtype, parse_dtype(v));
       return Status::ok();
     },
     [](const Layout& l) { return std::string(to_string(l.dtype)); }, nullptr},
    // Written only when not the default, so that every layout string without them reads as
    // before.
    enum_key<MomentDtype, &Layout::moments, parse_moments, MomentDtype::kFp32>("moments"),
    enum_key<ActCache, &Layout::act_cache, parse_act_cache, ActCache::kDefault>("act_cache"),
    {"pp_first",
     [](Layout& l, std::string_view v) { return parse_opt_degree("pp_first", v, l.pp_first, 0); },
     [](const Layout& l) { return or_none(l.pp_first); },
     [](const Layout& l) { return if_set(l.pp_first); }},
    {"pp_last",
     [](Layout& l, std::string_view v) { return parse_opt_degree("pp_last", v, l.pp_last, 0); },
     [](const Layout& l) { return or_none(l.pp_last); },
     [](const Layout& l) { return if_set(l.pp_last); }},
    {"pp_embedding",
     [](Layout& l, std::string_view v) { return parse_on_off("pp_embedding", v, l.pp_embedding); },
     [](const Layout& l) { return on_off(l.pp_embedding); },
     [](const Layout& l) { return if_on(l.pp_embedding); }},
    {"pp_loss", [](Layout& l, std::string_view v) { return parse_on_off("pp_loss", v, l.pp_loss); },
     [](const Layout& l) { return on_off(l.pp_loss); },
     [](const Layout& l) { return if_on(l.pp_loss); }},
    {"place",
     [](Layout& l, std::string_view v) -> Status {
       SP_ASSIGN_OR_RETURN(l.place, parse_placement(v));
       return Status::ok();
     },
     [](const Layout& l) { return std::string(to_string(l.placement())); },
     [](const Layout& l) -> Given {
       if (!l.place) return std::nullopt;
       return std::string(to_string(*l.place));
     }},
};

}  // namespace

std::span<const LayoutKey> layout_key_table() { return kLayoutKeys; }

const LayoutKey* find_layout_key(std::string_view name) {
  for (const LayoutKey& k : kLayoutKeys)
    if (k.name == name) return &k;
  return nullptr;
}

std::string layout_value(const Layout& l, std::string_view key) {
  const LayoutKey* k = find_layout_key(key);
  return k ? k->value(l) : "";
}

std::optional<std::string> layout_given(const Layout& l, std::string_view key) {
  const LayoutKey* k = find_layout_key(key);
  if (k == nullptr) return std::nullopt;
  return k->given ? k->given(l) : k->value(l);
}

Result<Layout> parse_layout(std::string_view text) {
  Layout l;
  std::set<std::string, std::less<>> seen;
  if (text.empty()) return Status::invalid("layout: empty layout string");
  const std::vector<std::string_view> items = layout_items(text);
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string_view item = items[i];
    if (item.empty()) {
      if (i + 1 == items.size()) break;  // a trailing comma
      return Status::invalid("layout: empty item in '" + text_brief(text) + "'");
    }
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return Status::invalid("layout: '" + text_brief(item) + "' is not key=value");
    }
    std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    if (!seen.insert(std::string(key)).second) {
      return Status::invalid("layout: key '" + text_brief(key) + "' given twice");
    }
    const LayoutKey* k = find_layout_key(key);
    if (k == nullptr) {
      std::vector<std::string> keys;
      std::string known;
      for (const LayoutKey& x : kLayoutKeys) {
        keys.emplace_back(x.name);
        known += (known.empty() ? "" : ", ") + std::string(x.name);
      }
      return Status::invalid("layout: unknown key '" + text_brief(key) + "'" +
                             did_you_mean(key, keys) + " (known: " + known + ")");
    }
    SP_RETURN_IF_ERROR(k->parse(l, value));
  }
  return l;
}

std::string format_layout(const Layout& l) {
  std::string s;
  for (const LayoutKey& k : kLayoutKeys) {
    const std::optional<std::string> v = k.given ? k.given(l) : k.value(l);
    if (v) s += (s.empty() ? "" : ",") + std::string(k.name) + "=" + *v;
  }
  return s;
}

int64_t zero_shard(int64_t dense, int64_t expert, const Layout& l) {
  const int64_t nd = static_cast<int64_t>(l.dp_degree()) * l.cp;
  const int64_t ne = std::max(l.edp_degree(), 1);
  return (dense + nd - 1) / nd + (expert + ne - 1) / ne;
}

Result<int64_t> shard_size(int64_t total, int64_t parts, std::string_view what) {
  if (parts <= 0)
    return Status::invalid(std::string(what) + ": cannot split into " + num(parts) + " parts");
  if (total % parts != 0) {
    return Status::invalid(std::string(what) + ": " + num(total) + " is not divisible by " +
                           num(parts));
  }
  return total / parts;
}

namespace {

// The interleaved schedule's virtual stages when the layout does not say: the fewest, at least 2,
// that cut each stage's layers into equal chunks, as Megatron-LM requires (num_layers divisible by
// pp·vpp; --num-layers-per-virtual-pipeline-stage); 2 where none does (uneven stages) or the layer
// count is unknown.
int default_vpp(int pp, int64_t layers) {
  if (layers <= 0 || pp <= 0 || layers % pp != 0) return 2;
  const int64_t per_stage = layers / pp;
  for (int64_t v = 2; v <= per_stage; ++v) {
    if (per_stage % v == 0) return static_cast<int>(v);
  }
  return 2;
}

}  // namespace

Result<Layout> resolve_layout(const Layout& in, const LayoutConstraints& m, int64_t gpus) {
  Layout l = in;
  if (l.recompute_modules && l.recompute != Recompute::kSelective) {
    return Status::invalid(
        "layout: recompute_modules=" + format_recompute_modules(*l.recompute_modules) +
        " needs recompute=selective (recompute=" + std::string(to_string(l.recompute)) + ")");
  }
  if (l.act_cache == ActCache::kFp8 && l.dtype != DType::kFp8) {
    return Status::invalid(
        "layout: act_cache=fp8 needs dtype=fp8 (dtype=" + std::string(to_string(l.dtype)) + ")");
  }
  if (gpus > kMaxGpus) {
    return Status::invalid("layout: " + num(gpus) + " GPUs, more than the " + num(kMaxGpus) +
                           " scaleplan models");
  }
  if (m.seq_len > kMaxSeqLen) {
    return Status::invalid("layout: sequence length " + num(m.seq_len) + ", more than the " +
                           num(kMaxSeqLen) + " tokens scaleplan models");
  }
  // Each degree is at most 2^20 (parse_layout), so the products below cannot overflow int64; past
  // kMaxGpus they are refused before any int-typed product (edp_degree, gpus) is formed.
  const int64_t model_par = static_cast<int64_t>(l.tp) * l.pp * l.cp;
  if (model_par > kMaxGpus || (l.dp && model_par * *l.dp > kMaxGpus)) {
    return Status::invalid("layout: tp·pp·cp·dp = " + num(model_par * l.dp.value_or(1)) +
                           " GPUs, more than the " + num(kMaxGpus) + " scaleplan models");
  }
  if (!l.dp) {
    // With neither dp nor a GPU count, the layout names all its GPUs: dp = 1.
    if (gpus <= 0) gpus = model_par;
    if (gpus % model_par != 0) {
      return Status::invalid("layout: tp·pp·cp = " + num(l.tp) + "·" + num(l.pp) + "·" + num(l.cp) +
                             " = " + num(model_par) + " does not divide the GPU count " +
                             num(gpus));
    }
    l.dp = static_cast<int>(gpus / model_par);
  } else if (gpus > 0 && model_par * *l.dp != gpus) {
    return Status::invalid("layout: tp·pp·cp·dp = " + num(l.tp) + "·" + num(l.pp) + "·" +
                           num(l.cp) + "·" + num(*l.dp) + " = " + num(model_par * *l.dp) +
                           " does not equal the GPU count " + num(gpus));
  }
  if (!l.vpp) l.vpp = l.schedule == Schedule::kInterleaved ? default_vpp(l.pp, m.num_layers) : 1;
  if (*l.vpp > 1 && l.schedule != Schedule::kInterleaved) {
    return Status::invalid("layout: vpp=" + num(*l.vpp) + " needs schedule=interleaved (schedule=" +
                           std::string(to_string(l.schedule)) + ")");
  }
  if (l.schedule == Schedule::kInterleaved && l.pp == 1) {
    return Status::invalid("layout: schedule=interleaved needs pp > 1 (pp=1)");
  }
  // SP splits each micro-batch's sequence (its 1/cp share) over TP, and Megatron's split asserts
  // that tp divides it (tensor_parallel/mappings.py _split_along_first_dim): unless asked for,
  // SP is on where it can be.
  const bool sp_fits = m.seq_len <= 0 || (m.seq_len / std::max(l.cp, 1)) % l.tp == 0;
  if (!l.sp) l.sp = l.tp > 1 && sp_fits;
  if (*l.sp && l.tp == 1) l.sp = false;  // Megatron silently turns SP off at tp=1
  if (!l.gbs) {
    // The default batch, one micro-batch per DP rank, within the bound a gbs= key has (found by
    // the layout fuzzer: mbs=1647 on 16,384 GPUs defaulted to a gbs that parse_layout refuses).
    const int64_t gbs = static_cast<int64_t>(l.mbs) * *l.dp;
    if (gbs > kMaxGlobalBatch) {
      return Status::invalid("layout: gbs = mbs·dp = " + num(l.mbs) + "·" + num(*l.dp) + " = " +
                             num(gbs) + " sequences, more than the " + num(kMaxGlobalBatch) +
                             " scaleplan models");
    }
    l.gbs = gbs;
  }

  if (m.num_heads % l.tp != 0) {
    return Status::invalid("layout: tp=" + num(l.tp) +
                           " does not divide num_attention_heads=" + num(m.num_heads));
  }
  if (m.num_kv_heads > 0) {
    const bool kv_split = m.num_kv_heads % l.tp == 0;
    const bool kv_replicated = m.num_kv_heads < l.tp && l.tp % m.num_kv_heads == 0;
    if (!kv_split && !kv_replicated) {
      return Status::invalid("layout: tp=" + num(l.tp) + " neither divides num_key_value_heads=" +
                             num(m.num_kv_heads) + " nor is a multiple of it");
    }
  }
  // Ulysses-style CP splits the heads of each TP rank over the cp ranks (Transformer Engine's
  // AttnFuncWithCPAndQKVOA2A asserts that cp divides the query and the key/value heads).
  if (l.cp_comm_type() == CpComm::kA2a && l.cp > 1 && m.num_heads > 0) {
    const int64_t q_heads = m.num_heads / l.tp;
    const int64_t kv_heads = m.num_kv_heads >= l.tp ? m.num_kv_heads / l.tp : 1;
    if (q_heads % l.cp != 0 || kv_heads % l.cp != 0) {
      return Status::invalid("layout: cp_comm=a2a needs cp=" + num(l.cp) +
                             " to divide the query heads (" + num(q_heads) +
                             ") and key/value heads (" + num(kv_heads) + ") of each TP rank");
    }
  }
  if (m.num_experts == 0 && (l.ep > 1 || l.etp > 1)) {
    return Status::invalid("layout: ep=" + num(l.ep) + ", etp=" + num(l.etp) +
                           " need a mixture-of-experts model");
  }
  if (m.num_experts > 0 && m.num_experts % l.ep != 0) {
    return Status::invalid("layout: ep=" + num(l.ep) + " does not divide the expert count " +
                           num(m.num_experts));
  }
  const int64_t dense_grid = static_cast<int64_t>(l.tp) * l.cp * *l.dp;
  if (dense_grid % (static_cast<int64_t>(l.ep) * l.etp) != 0) {
    return Status::invalid("layout: ep·etp = " + num(l.ep) + "·" + num(l.etp) + " = " +
                           num(l.ep * l.etp) + " does not divide tp·cp·dp = " + num(dense_grid));
  }
  const int64_t per_step = static_cast<int64_t>(l.mbs) * *l.dp;
  if (*l.gbs % per_step != 0) {
    return Status::invalid("layout: gbs=" + num(*l.gbs) + " is not divisible by mbs·dp = " +
                           num(l.mbs) + "·" + num(*l.dp) + " = " + num(per_step));
  }
  if (l.cp > 1 && m.seq_len > 0 && m.seq_len % (2 * l.cp) != 0) {
    return Status::invalid("layout: cp=" + num(l.cp) + " needs the sequence length " +
                           num(m.seq_len) + " divisible by 2·cp = " + num(2 * l.cp) +
                           " (zig-zag split)");
  }
  if (*l.sp && !sp_fits) {
    return Status::invalid("layout: sp=on needs tp=" + num(l.tp) +
                           " to divide the sequence each CP rank holds (seq/cp = " +
                           num(m.seq_len / l.cp) + "); use sp=off");
  }
  if (m.num_layers > 0) {
    auto counts = stage_layer_counts(l, m.num_layers);
    if (!counts) return counts.status();
  }
  return l;
}

int Layout::chunks_per_stage() const { return v_shaped(schedule) ? 2 : vpp_degree(); }

int chunks_per_rank(const Layout& l) {
  return two_chunks_per_rank(l.schedule) ? 2 : l.vpp_degree();
}

int stage_of_chunk(const Layout& l, int g) {
  if (two_chunks_per_rank(l.schedule) && g >= l.pp) return 2 * l.pp - 1 - g;
  return g % l.pp;
}

int chunk_of_stage(const Layout& l, int stage, int local) {
  if (two_chunks_per_rank(l.schedule)) return local == 0 ? stage : 2 * l.pp - 1 - stage;
  return local * l.pp + stage;
}

int model_chunk(const Layout& l, int g) {
  return l.schedule == Schedule::kDualPipe && g >= l.pp ? g - l.pp : g;
}

Result<std::vector<int>> stage_layer_counts(const Layout& l, int64_t num_layers) {
  const int vpp = l.chunks_per_stage();
  const int64_t chunks = static_cast<int64_t>(l.pp) * vpp;
  const bool v_shape = v_shaped(l.schedule);
  // Only error messages read it: formatted on demand (the planner calls this for every layout it
  // estimates the memory of, millions for a large MoE job; issue 45).
  auto v_name = [&] { return "schedule=" + std::string(to_string(l.schedule)); };
  // The embedding and the loss count as layers of the split where pp_embedding / pp_loss say so.
  const int64_t units = num_layers + (l.pp_embedding ? 1 : 0) + (l.pp_loss ? 1 : 0);
  if (chunks > units) {
    const std::string counted = units > num_layers ? " layers with the embedding and loss" : "";
    return Status::invalid("layout: " + (v_shape ? v_name() + ": 2·pp" : std::string("pp·vpp")) +
                           " = " + (v_shape ? "2·" + num(l.pp) : num(l.pp) + "·" + num(vpp)) +
                           " = " + num(chunks) + " pipeline chunks is more than the " + num(units) +
                           " layers" + counted);
  }
  std::vector<int> counts(static_cast<size_t>(chunks), 0);
  // DualPipeV's middle chunks in the order that spreads a remainder rank by rank: the down-arm
  // chunks of ranks 1..pp-1, then their up-arm chunks (rank 0 holds chunks 0 and 2pp-1).
  auto v_middle = [&] {
    std::vector<size_t> order;
    const auto pp = static_cast<size_t>(l.pp);
    for (size_t s = 1; s < pp; ++s) order.push_back(s);
    for (size_t s = 1; s < pp; ++s) order.push_back(2 * pp - 1 - s);
    return order;
  };
  if ((l.pp_first || l.pp_last) && (l.pp_embedding || l.pp_loss)) {
    // Megatron-core refuses the two ways together (TransformerConfig.__post_init__).
    return Status::invalid("layout: pp_first/pp_last cannot be combined with pp_embedding/pp_loss");
  }
  if ((l.pp_embedding || l.pp_loss) && chunks == 1) {
    return Status::invalid("layout: pp_embedding/pp_loss need pipeline stages (pp=1)");
  }
  if ((l.pp_first || l.pp_last) && vpp > 1 && !v_shape) {
    // Interleaved: pp_first / pp_last are the first and last stages' layers (Megatron-core's
    // num_layers_in_first/last_pipeline_stage, which it accepts with virtual stages:
    // get_transformer_layer_offset splits each stage's layers over its vpp chunks), as Meta ran
    // Llama 3.1 405B (a layer fewer on the first and last stages, interleaved). Chunk c runs on
    // stage c mod pp. A pinned stage's layers go to its chunks evenly, the earlier chunk taking
    // the remainder; the other stages' chunks share the rest so, earlier chunks first.
    if (l.pp == 1) return Status::invalid("layout: pp_first/pp_last need pp > 1");
    const int64_t pp = l.pp;
    auto pinned = [&](int64_t stage) -> std::optional<int> {
      if (stage == 0 && l.pp_first) return l.pp_first;
      if (stage == pp - 1 && l.pp_last) return l.pp_last;
      return std::nullopt;
    };
    int64_t rest = num_layers, free_chunks = 0;
    for (int64_t s = 0; s < pp; ++s) {
      if (auto n = pinned(s)) {
        if (*n < vpp) {
          return Status::invalid("layout: " + std::string(s == 0 ? "pp_first=" : "pp_last=") +
                                 num(*n) + " is fewer layers than the stage's vpp=" + num(vpp) +
                                 " chunks");
        }
        for (int64_t v = 0; v < vpp; ++v)
          counts[static_cast<size_t>(v * pp + s)] =
              static_cast<int>(*n / vpp + (v < *n % vpp ? 1 : 0));
        rest -= *n;
      } else {
        free_chunks += vpp;
      }
    }
    if (free_chunks == 0 ? rest != 0 : rest < free_chunks) {
      return Status::invalid("layout: pp_first/pp_last leave " + num(rest) + " of the " +
                             num(num_layers) + " layers for " + num(free_chunks) +
                             " other chunks (pp·vpp = " + num(chunks) +
                             "), which need at least one layer each and all the layers");
    }
    int64_t rem = free_chunks > 0 ? rest % free_chunks : 0;
    for (size_t c = 0; c < counts.size(); ++c) {
      if (pinned(static_cast<int64_t>(c) % pp)) continue;
      counts[c] = static_cast<int>(rest / free_chunks + (rem-- > 0 ? 1 : 0));
    }
    return counts;
  }
  if (l.pp_first || l.pp_last) {
    if (l.pp == 1 && !v_shape) return Status::invalid("layout: pp_first/pp_last need pp > 1");
    // pp_first / pp_last pin the first chunk (embedding) and the last (LM head): the first and
    // last stages, or in a V both ends on rank 0. The other chunks share the rest evenly; the
    // remainder goes to earlier stages first, in a V rank by rank.
    int64_t rest = num_layers, free = chunks;
    if (l.pp_first) {
      counts.front() = *l.pp_first;
      rest -= *l.pp_first;
      --free;
    }
    if (l.pp_last) {
      counts.back() = *l.pp_last;
      rest -= *l.pp_last;
      --free;
    }
    if (free == 0 ? rest != 0 : rest < free) {
      const std::string pinned = (l.pp_first ? "pp_first=" + num(*l.pp_first) : "") +
                                 (l.pp_first && l.pp_last ? " and " : "") +
                                 (l.pp_last ? "pp_last=" + num(*l.pp_last) : "");
      const std::string others =
          v_shape ? num(free) + " other chunks of " + v_name() + " (2·pp = " + num(chunks) + ")"
                  : num(free) + " other stages (pp=" + num(l.pp) + ")";
      const bool both = l.pp_first && l.pp_last;
      if (free == 0) {
        return Status::invalid("layout: " + pinned + (both ? " pin " : " pins ") +
                               num(num_layers - rest) + " of the " + num(num_layers) +
                               " layers and no chunk is left for the other " + num(rest) +
                               "; they must add up to " + num(num_layers));
      }
      return Status::invalid("layout: " + pinned + (both ? " leave " : " leaves ") + num(rest) +
                             " of the " + num(num_layers) + " layers for " + others +
                             ", which need at least one layer each");
    }
    std::vector<size_t> order;
    if (v_shape) {
      order = v_middle();
      if (!l.pp_first) order.push_back(0);
      if (!l.pp_last) order.push_back(counts.size() - 1);
    } else {
      for (size_t c = 0; c < counts.size(); ++c) {
        if ((c == 0 && l.pp_first) || (c + 1 == counts.size() && l.pp_last)) continue;
        order.push_back(c);
      }
    }
    int64_t rem = free > 0 ? rest % free : 0;
    for (size_t c : order) counts[c] = static_cast<int>(rest / free + (rem-- > 0 ? 1 : 0));
    return counts;
  }
  const int64_t base = units / chunks;
  int64_t rem = units % chunks;
  for (auto& c : counts) c = static_cast<int>(base);
  // Remainder to the middle chunks first (they carry neither embedding nor LM head), then the
  // first, then the last. DualPipeV's middle chunks go rank by rank (down arm of ranks 1..pp-1,
  // then their up arm), so that no rank takes a second extra layer before every rank has one.
  if (rem > 0) {
    std::vector<size_t> order;
    if (v_shape) {
      order = v_middle();
    } else {
      for (size_t c = 1; c + 1 < counts.size(); ++c) order.push_back(c);
    }
    order.push_back(0);
    if (counts.size() > 1) order.push_back(counts.size() - 1);
    for (size_t i = 0; rem > 0; ++i, --rem) counts[order[i]] += 1;
  }
  // The embedding and the loss take their unit from the first and last chunks' layers.
  if (l.pp_embedding) counts.front() -= 1;
  if (l.pp_loss) counts.back() -= 1;
  return counts;
}

int64_t interleave_group_size(int64_t pp, int64_t microbatches) {
  for (int64_t n = pp; n < microbatches; ++n) {
    const int64_t last = microbatches % n;
    if (last == 0 || last >= pp) return n;
  }
  return std::max(pp, microbatches);
}

}  // namespace scaleplan
