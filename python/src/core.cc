// scaleplan._core: the commands of api/ for Python (nanobind). Each function takes its request as
// a JSON object text (the keyword arguments of the Python wrapper, python/scaleplan/__init__.py),
// runs the api call with the GIL released, and returns the outcome's to_json() as JSON text, the
// object `scaleplan <command> --json` prints; the wrapper builds the typed results from it. A
// Status that is not ok raises _core.Error(message, code), which the wrapper turns into
// scaleplan.ScaleplanError. An optional progress callable gets a dict per progress event or note;
// it is called with the GIL held, and the first exception it raises is re-raised when the call
// returns (the native call is not interrupted; later events are dropped).
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "api/cluster.h"
#include "api/collective.h"
#include "api/compare.h"
#include "api/describe.h"
#include "api/fields.h"
#include "api/memory.h"
#include "api/model.h"
#include "api/plan.h"
#include "api/profile.h"
#include "api/refit.h"
#include "api/run.h"
#include "api/simulate.h"
#include "api/sweep.h"
#include "api/validate.h"
#include "core/counts.h"
#include "core/json_util.h"
#include "core/layout.h"
#include "models/model_spec.h"

namespace nb = nanobind;
using scaleplan::Json;
using scaleplan::Result;
using scaleplan::Status;
using scaleplan::api::Field;

namespace {

// A failed call: the Status's message and code name ("invalid", "not_found", "internal").
struct NativeError : std::runtime_error {
  NativeError(const std::string& message, std::string code_name)
      : std::runtime_error(message), code(std::move(code_name)) {}
  std::string code;
};

// Indexed by Status::Code (kOk, kInvalidInput, kNotFound, kInternal).
constexpr std::array<const char*, 4> kCodeNames = {"ok", "invalid", "not_found", "internal"};

std::string code_name(Status::Code c) {
  const auto i = static_cast<size_t>(c);
  return i < kCodeNames.size() ? kCodeNames[i] : "internal";
}

[[noreturn]] void raise(const Status& s) { throw NativeError(s.message(), code_name(s.code())); }

template <typename T>
T take(Result<T> r) {
  if (!r.is_ok()) raise(r.status());
  return std::move(r).value();
}

// The request object the wrapper passes (JSON text).
Json parse_request(const std::string& text) {
  Result<Json> j = scaleplan::parse_json(text, "request");
  if (!j.is_ok() || !j->is_object()) raise(Status::internal("request: not a JSON object"));
  return std::move(*j);
}

// Reads a request with a field table (api/fields.h: simulate's and sweep's; the binding's own for
// run, compare, refit and profile), so that the keys, their
// types and their errors are the command line's options. A number given for a text field (a value
// with an optional unit: moe_imbalance=1.2, gpu_hour_cost=2.5) is taken as its JSON text, as
// Fields::get takes it for the commands without a table.
void read_table(const std::string& text, std::span<const Field> fields) {
  Json j = parse_request(text);
  for (const Field& f : fields) {
    auto it = j.find(f.name);
    if (it != j.end() && it->is_number() && !it->is_boolean() &&
        std::holds_alternative<std::string*>(f.target))
      *it = it->dump();
  }
  if (Status s = scaleplan::api::read_fields(j, fields); !s.is_ok()) raise(s);
}

// A table of the binding's own (run, compare, refit, profile): name and member, the help being the
// command line's.
std::vector<Field> binding_fields(
    std::initializer_list<std::pair<const char*, scaleplan::api::FieldTarget>> rows) {
  std::vector<Field> fields;
  for (const auto& [name, target] : rows) fields.emplace_back(name, target, "");
  return fields;
}

// The rows of `fields` that set members of `part`, an object inside the request they are bound to
// (simulate's job inputs, which run takes too).
template <typename Part>
std::vector<Field> rows_into(std::vector<Field> fields, const Part& part) {
  const auto* begin = reinterpret_cast<const char*>(&part);
  std::erase_if(fields, [&](const Field& f) {
    const char* p = std::visit([](auto* t) { return reinterpret_cast<const char*>(t); }, f.target);
    return p < begin || p >= begin + sizeof(Part);
  });
  return fields;
}

// Reads the request object; a wrong type names the option as the command line spells it.
class Fields {
 public:
  explicit Fields(const std::string& text) : j_(parse_request(text)) {}
  // A string, or a number given for a value the command line reads as text with an optional
  // unit ("--gpu-hour-cost 2.5", "--moe-imbalance 1.2", "--bytes 1024"): its JSON text.
  void get(const char* key, std::string& out) const {
    if (const Json* v = find(key)) {
      if (v->is_number() && !v->is_boolean()) {
        out = v->dump();
        return;
      }
      if (!v->is_string()) bad(key, *v, "a string");
      out = v->get<std::string>();
    }
  }
  template <typename Int>
  requires std::is_integral_v<Int> &&
      (!std::is_same_v<Int, bool>)void get(const char* key, Int& out) const {
    if (const Json* v = find(key)) {
      if (!v->is_number_integer()) bad(key, *v, "an integer");
      const int64_t n = v->get<int64_t>();
      if (n < std::numeric_limits<Int>::min() || n > std::numeric_limits<Int>::max())
        bad(key, *v, "an integer in range");
      out = static_cast<Int>(n);
    }
  }
  void get(const char* key, double& out) const {
    if (const Json* v = find(key)) {
      if (!v->is_number()) bad(key, *v, "a number");
      out = v->get<double>();
    }
  }
  // A count as the command line takes it (core/counts.h): an integer or a string with a suffix
  // ("4k", "15T"); both are read by parse_count, so a value means and fails the same as the
  // option's. A whole float (1e12) is taken as its integer.
  template <typename Number>
  void count(const char* key, Number& out,
             scaleplan::CountSuffix suffix = scaleplan::CountSuffix::kBinary) const {
    const Json* v = find(key);
    if (v == nullptr) return;
    std::string text;
    if (v->is_string()) {
      text = v->get<std::string>();
    } else if (v->is_number_integer()) {
      text = std::to_string(v->get<int64_t>());
    } else if (v->is_number_float()) {
      text = v->dump();
    } else {
      bad(key, *v, "a count (an integer or a string such as \"4k\")");
    }
    const int64_t n = take(scaleplan::parse_count(text, option(key), suffix));
    if constexpr (std::is_integral_v<Number>) {
      if (std::cmp_greater(n, std::numeric_limits<Number>::max())) bad(key, *v, "a count in range");
    }
    out = static_cast<Number>(n);
  }
  void get(const char* key, bool& out) const {
    if (const Json* v = find(key)) {
      if (!v->is_boolean()) bad(key, *v, "True or False");
      out = v->get<bool>();
    }
  }
  void get(const char* key, std::vector<std::string>& out) const {
    if (const Json* v = find(key)) {
      if (v->is_string()) {
        out = {v->get<std::string>()};
        return;
      }
      if (!v->is_array()) bad(key, *v, "a list of strings");
      out.clear();
      for (const Json& e : *v) {
        if (!e.is_string()) bad(key, *v, "a list of strings");
        out.push_back(e.get<std::string>());
      }
    }
  }

 private:
  const Json* find(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  // The option as the command line spells it: "max_gpus" -> "--max-gpus".
  static std::string option(const char* key) {
    std::string option = std::string("--") + key;
    for (char& c : option) c = c == '_' ? '-' : c;
    return option;
  }
  [[noreturn]] static void bad(const char* key, const Json& v, const char* what) {
    raise(
        Status::invalid(option(key) + ": expected " + what + ", got " + scaleplan::json_brief(v)));
  }
  Json j_;
};

// The Python progress callable, called with the GIL held; its first exception is kept and
// re-raised after the native call.
class Progress {
 public:
  explicit Progress(nb::object callable) : callable_(std::move(callable)) {}
  bool active() const { return !callable_.is_none(); }
  void call(const Json& event) {
    nb::gil_scoped_acquire gil;
    if (error_) return;
    try {
      nb::module_ json = nb::module_::import_("json");
      callable_(json.attr("loads")(event.dump()));
    } catch (nb::python_error& e) {
      error_.emplace(std::move(e));
    }
  }
  // After the call, with the GIL held.
  void rethrow() {
    if (error_) {
      nb::python_error e = std::move(*error_);
      error_.reset();
      throw e;
    }
  }

 private:
  nb::object callable_;
  std::optional<nb::python_error> error_;
};

template <typename P>
scaleplan::api::Callbacks<P> note_callbacks(Progress& progress) {
  scaleplan::api::Callbacks<P> c;
  if (progress.active()) {
    c.note = [&progress](const std::string& n) { progress.call({{"phase", "note"}, {"note", n}}); };
  }
  return c;
}

// The notes and, with a callable, each progress event as `to_event` turns it into the dict the
// callable gets.
template <typename P, typename ToEvent>
scaleplan::api::Callbacks<P> with_progress(Progress& progress, ToEvent to_event) {
  auto c = note_callbacks<P>(progress);
  if (progress.active())
    c.progress = [&progress, to_event](const P& p) { progress.call(to_event(p)); };
  return c;
}

// Runs `f` (returning Result<Outcome>) without the GIL, then the callback's exception, then the
// outcome's JSON text.
template <typename F>
std::string run(Progress& progress, F&& f) {
  std::optional<decltype(f())> r;
  {
    nb::gil_scoped_release release;
    r.emplace(f());
  }
  progress.rethrow();
  if (!r->is_ok()) raise(r->status());
  return (*r)->to_json().dump();
}

std::string plan(const std::string& request, nb::object progress_fn) {
  const Fields f(request);
  scaleplan::api::PlanRequest o;
  f.get("model", o.model);
  f.get("cluster", o.cluster);
  f.count("gpus", o.gpus);
  f.count("seq", o.seq);
  f.count("gbs", o.gbs);
  f.get("top", o.top);
  f.get("emit", o.emit);
  f.get("out", o.out);
  f.get("explain", o.explain);
  f.get("memory_margin", o.memory_margin);
  f.get("fix", o.fixes);
  f.get("framework", o.framework);
  f.get("moe_imbalance", o.moe_imbalance);
  f.get("moe_dispatcher", o.moe_dispatcher);
  f.get("host_launch", o.host_launch);
  f.get("threads", o.threads);
  f.count("max_simulations", o.max_simulations, scaleplan::CountSuffix::kDecimal);
  f.count("train_tokens", o.train_tokens, scaleplan::CountSuffix::kDecimal);
  f.get("gpu_hour_cost", o.gpu_hour_cost);
  f.get("deadline", o.deadline);
  f.count("max_gpus", o.max_gpus);
  f.get("allow_cross_node_tp", o.allow_cross_node_tp);
  f.get("tp_comm_overlap", o.tp_comm_overlap);
  f.get("compile", o.compile);
  bool no_robustness = false;
  f.get("no_robustness", no_robustness);
  o.robustness = !no_robustness;
  Progress progress(std::move(progress_fn));
  auto callbacks = note_callbacks<scaleplan::planner::Progress>(progress);
  if (progress.active()) {
    callbacks.progress = [&progress](const scaleplan::planner::Progress& p) {
      progress.call({{"phase", p.phase},
                     {"candidates", p.candidates},
                     {"seen", p.seen},
                     {"fitting", p.fitting},
                     {"simulated", p.simulated},
                     {"bounded", p.bounded},
                     {"best_tokens_per_s_per_gpu", p.best_tokens_per_s_per_gpu},
                     {"best_layout", p.best_layout}});
    };
  }
  // An export asked for with nothing to export is an error, as on the command line.
  return run(progress, [&]() -> Result<scaleplan::api::PlanOutcome> {
    SP_ASSIGN_OR_RETURN(scaleplan::api::PlanOutcome out, scaleplan::api::plan(o, callbacks));
    SP_RETURN_IF_ERROR(out.export_status());
    return out;
  });
}

std::string simulate(const std::string& request, nb::object progress_fn) {
  scaleplan::api::SimulateRequest o;
  read_table(request, scaleplan::api::simulate_fields(o));
  Progress progress(std::move(progress_fn));
  auto callbacks = with_progress<std::string_view>(progress, [](std::string_view what) -> Json {
    return {{"phase", std::string(what)}};
  });
  return run(progress, [&] { return scaleplan::api::simulate(o, callbacks); });
}

std::string model(const std::string& request) {
  const Fields f(request);
  scaleplan::api::ModelRequest o;
  f.get("model", o.model);
  f.count("seq", o.seq);
  Progress none{nb::none()};
  return run(none, [&] { return scaleplan::api::model(o); });
}

std::string model_list() {
  Progress none{nb::none()};
  return run(none, [] { return scaleplan::api::model_list(); });
}

std::string collective(const std::string& request, nb::object progress_fn) {
  const Fields f(request);
  scaleplan::api::CollectiveRequest o;
  f.get("cluster", o.cluster);
  f.get("op", o.op);
  f.count("ranks", o.ranks);
  f.get("bytes", o.bytes);
  f.get("sweep", o.sweep);
  f.get("algo", o.algo);
  f.get("ranks_per_node", o.ranks_per_node);
  f.get("concurrent", o.concurrent);
  f.get("nccl_log", o.nccl_log);
  f.get("force_base", o.force_base);
  Progress progress(std::move(progress_fn));
  auto callbacks = note_callbacks<int>(progress);
  return run(progress, [&] { return scaleplan::api::collective(o, callbacks); });
}

std::string memory(const std::string& request) {
  const Fields f(request);
  scaleplan::api::MemoryRequest o;
  f.get("model", o.model);
  f.get("cluster", o.cluster);
  f.get("gpu_memory", o.gpu_memory);
  f.get("layout", o.layout);
  f.count("seq", o.seq);
  f.count("gpus", o.gpus);
  f.get("framework", o.framework);
  f.get("moe_imbalance", o.moe_imbalance);
  f.get("margin", o.margin);
  Progress none{nb::none()};
  return run(none, [&] { return scaleplan::api::memory(o); });
}

std::string validate(const std::string& request, nb::object progress_fn) {
  const Fields f(request);
  scaleplan::api::ValidateRequest o;
  f.get("file", o.file);
  f.get("threads", o.threads);
  f.get("profile", o.profiles);
  f.get("match", o.match);
  f.get("group", o.groups);
  f.get("framework", o.framework);
  f.get("how_sure", o.how_sure);
  f.get("host_launch", o.host_launch);
  Progress progress(std::move(progress_fn));
  auto callbacks = with_progress<scaleplan::api::ValidateProgress>(
      progress, [](const scaleplan::api::ValidateProgress& p) -> Json {
        return {{"phase", "simulate"}, {"done", p.done}, {"total", p.total}};
      });
  return run(progress, [&] { return scaleplan::api::validate(o, callbacks); });
}

std::string sweep(const std::string& request, nb::object progress_fn) {
  scaleplan::api::SweepRequest o;
  read_table(request, scaleplan::api::sweep_fields(o));
  Progress progress(std::move(progress_fn));
  auto callbacks = with_progress<scaleplan::api::SweepProgress>(
      progress, [](const scaleplan::api::SweepProgress& p) -> Json {
        return {{"phase", "point"},
                {"done", p.index + 1},
                {"total", p.total},
                {"point", scaleplan::api::sweep_point_json(p.point)}};
      });
  return run(progress, [&] { return scaleplan::api::sweep(o, callbacks); });
}

std::string run_layout(const std::string& request, nb::object progress_fn) {
  // The job's inputs are simulate's (the rows of its table that set them), then run's own.
  scaleplan::api::SimulateRequest sim;
  std::vector<Field> fields = rows_into(scaleplan::api::simulate_fields(sim), sim.inputs);
  scaleplan::api::RunRequest o;
  std::vector<Field> own = binding_fields({{"backend", &o.backend},
                                           {"trace", &o.trace},
                                           {"steps", &o.steps},
                                           {"warmup", &o.warmup},
                                           {"timeout", &o.timeout_s}});
  fields.insert(fields.end(), own.begin(), own.end());
  read_table(request, fields);
  o.inputs = sim.inputs;
  Progress progress(std::move(progress_fn));
  auto callbacks = with_progress<scaleplan::api::RunProgress>(
      progress, [](const scaleplan::api::RunProgress& p) -> Json {
        const char* phase =
            p.phase == scaleplan::api::RunProgress::kExecuting ? "executing" : "step";
        return {{"phase", phase}, {"done", p.done}, {"total", p.total}};
      });
  return run(progress, [&] { return scaleplan::api::run(o, callbacks); });
}

std::string compare(const std::string& request) {
  scaleplan::api::CompareRequest o;
  read_table(request,
             binding_fields(
                 {{"predicted", &o.predicted}, {"measured", &o.measured}, {"trace", &o.trace}}));
  Progress none{nb::none()};
  return run(none, [&]() -> Result<scaleplan::api::CompareOutcome> {
    SP_ASSIGN_OR_RETURN(scaleplan::api::CompareOutcome out, scaleplan::api::compare(o));
    SP_RETURN_IF_ERROR(out.write_files(""));
    return out;
  });
}

std::string refit(const std::string& request) {
  scaleplan::api::RefitRequest o;
  read_table(request, binding_fields({{"profile", &o.profile},
                                      {"measured", &o.measured},
                                      {"out", &o.out},
                                      {"holdout", &o.holdout}}));
  Progress none{nb::none()};
  return run(none, [&] { return scaleplan::api::refit(o); });
}

std::string profile(const std::string& request, nb::object progress_fn) {
  scaleplan::api::ProfileRequest o;
  read_table(request, binding_fields({{"backend", &o.backend},
                                      {"out", &o.out},
                                      {"cluster", &o.cluster},
                                      {"quick", &o.quick},
                                      {"resume", &o.resume},
                                      {"ranks", &o.ranks},
                                      {"force_base", &o.force_base},
                                      {"nccl_log", &o.nccl_logs}}));
  Progress progress(std::move(progress_fn));
  auto callbacks = with_progress<scaleplan::api::ProfileProgress>(
      progress, [](const scaleplan::api::ProfileProgress& p) -> Json {
        return {{"phase", "measure"}, {"done", p.done}, {"total", p.total}, {"point", p.id}};
      });
  return run(progress, [&] { return scaleplan::api::profile(o, callbacks); });
}

std::string cluster_list() {
  Progress none{nb::none()};
  return run(none, [] { return scaleplan::api::cluster_list(); });
}

// `cluster show C --json`: the profile with unit strings and the path it came from.
std::string cluster_show(const std::string& name_or_path) {
  scaleplan::api::ClusterShow shown = take(scaleplan::api::cluster_show(name_or_path));
  return take(shown.to_json()).dump();
}

// The field table of a described command (api/describe.h): what its keyword arguments are.
std::string fields(const std::string& command) {
  return take(scaleplan::api::command_fields(command)).dump();
}

// A layout string in its canonical form (DESIGN.md "Layout string").
std::string parse_layout(const std::string& text) {
  scaleplan::Layout l = take(scaleplan::parse_layout(text));
  return scaleplan::format_layout(l);
}

// Defines `name` (a literal), which returns the JSON text of `scaleplan <name> --json` (an
// underscore a space: "model_list" is `model list`): it takes the request's JSON text and, when
// `fn` does, a progress callable; or nothing (the lists).
template <typename... Args>
void def_command(nb::module_& m, const char* name, std::string (*fn)(Args...)) {
  std::string command = name;
  for (char& c : command) c = c == '_' ? ' ' : c;
  const std::string returns = " -> JSON text of `scaleplan " + command + " --json`";
  if constexpr (sizeof...(Args) == 2) {
    const std::string doc = std::string(name) + "(request_json, progress=None)" + returns;
    m.def(name, fn, nb::arg("request"), nb::arg("progress").none() = nb::none(), doc.c_str());
  } else if constexpr (sizeof...(Args) == 1) {
    m.def(name, fn, nb::arg("request"), (std::string(name) + "(request_json)" + returns).c_str());
  } else {
    m.def(name, fn, (std::string(name) + "()" + returns).c_str());
  }
}

// def_command of each (name, function) pair.
inline void def_commands(nb::module_&) {}
template <typename F, typename... Rest>
void def_commands(nb::module_& m, const char* name, F fn, Rest... rest) {
  def_command(m, name, fn);
  def_commands(m, rest...);
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() =
      "scaleplan's C++ core (api/): requests and results as JSON text; use the scaleplan "
      "package, not this module";
  // Error(message, code): a Status that is not ok.
  static PyObject* error = PyErr_NewException("scaleplan._core.Error", PyExc_ValueError, nullptr);
  m.attr("Error") = nb::borrow(error);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const NativeError& e) {
      nb::object args = nb::make_tuple(e.what(), e.code);
      PyErr_SetObject(error, args.ptr());
    }
  });
  def_commands(m, "plan", &plan, "simulate", &simulate, "model", &model, "model_list", &model_list,
               "memory", &memory, "collective", &collective, "validate", &validate, "sweep", &sweep,
               "run", &run_layout, "compare", &compare, "refit", &refit, "profile", &profile,
               "cluster_list", &cluster_list);
  m.def("cluster_show", &cluster_show, nb::arg("name_or_path"),
        "cluster_show(name_or_path) -> JSON text of `scaleplan cluster show C --json`");
  m.def("fields", &fields, nb::arg("command"),
        "fields(command) -> JSON text of the command's fields (api::command_fields)");
  m.def("parse_layout", &parse_layout, nb::arg("text"),
        "parse_layout(text) -> the layout string in canonical form");
}
