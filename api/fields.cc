// A request's fields described once; contract in fields.h.
#include "api/fields.h"

#include "core/enum_names.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/suggest.h"

namespace scaleplan::api {
namespace {

FieldType deduced_type(const FieldTarget& t) {
  static constexpr FieldType kByIndex[] = {FieldType::kText,    FieldType::kCount,
                                           FieldType::kInteger, FieldType::kNumber,
                                           FieldType::kFlag,    FieldType::kList};
  return kByIndex[t.index()];
}

constexpr std::string_view kFieldTypeNames[] = {"text", "count", "integer", "number",
                                                "flag", "list",  "choice"};
static_assert(std::ssize(kFieldTypeNames) == static_cast<int>(FieldType::kChoice) + 1);

std::string_view type_name(FieldType t) { return name_in(kFieldTypeNames, t); }

Status bad(const Field& f, const Json& v, std::string_view what) {
  return Status::invalid(f.option() + ": expected " + std::string(what) + ", got " + json_brief(v));
}

Status read_one(const Field& f, const Json& v) {
  return std::visit(
      [&](auto* p) -> Status {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::string>) {
          if (!v.is_string()) return bad(f, v, "a string");
          std::string s = v.get<std::string>();
          if (f.type == FieldType::kChoice) {
            bool known = false;
            std::string list;
            for (const auto& c : f.choices) {
              known = known || c == s;
              list += (list.empty() ? "" : ", ") + c;
            }
            if (!known)
              return Status::invalid(f.option() + ": '" + s + "' is not one of " + list +
                                     did_you_mean(s, f.choices));
          }
          *p = std::move(s);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          if (v.is_string()) {
            SP_ASSIGN_OR_RETURN(*p, parse_count(v.get<std::string>(), f.option(), f.suffix));
          } else if (v.is_number_integer()) {
            *p = v.get<int64_t>();
          } else if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() &&
                     std::fabs(v.get<double>()) <= static_cast<double>(kMaxCount)) {
            *p = static_cast<int64_t>(v.get<double>());
          } else {
            return bad(f, v, "a count (a whole number, or a string such as \"4k\")");
          }
        } else if constexpr (std::is_same_v<T, int>) {
          if (!v.is_number_integer()) return bad(f, v, "an integer");
          const int64_t n = v.get<int64_t>();
          if (n < std::numeric_limits<int>::min() || n > std::numeric_limits<int>::max())
            return bad(f, v, "an integer in range");
          *p = static_cast<int>(n);
        } else if constexpr (std::is_same_v<T, double>) {
          if (f.type == FieldType::kCount && v.is_string()) {
            SP_ASSIGN_OR_RETURN(const int64_t n,
                                parse_count(v.get<std::string>(), f.option(), f.suffix));
            *p = static_cast<double>(n);
          } else if (!v.is_number()) {
            return bad(f, v, "a number");
          } else {
            *p = v.get<double>();
          }
        } else if constexpr (std::is_same_v<T, bool>) {
          if (!v.is_boolean()) return bad(f, v, "True or False");
          *p = v.get<bool>();
        } else {
          if (v.is_string()) {
            *p = {v.get<std::string>()};
            return Status::ok();
          }
          if (!v.is_array()) return bad(f, v, "a list of strings");
          std::vector<std::string> out;
          for (const Json& e : v) {
            if (!e.is_string()) return bad(f, v, "a list of strings");
            out.push_back(e.get<std::string>());
          }
          *p = std::move(out);
        }
        return Status::ok();
      },
      f.target);
}

}  // namespace

Field::Field(std::string name_, FieldTarget target_, std::string help_)
    : name(std::move(name_)),
      target(target_),
      help(std::move(help_)),
      type(deduced_type(target_)) {}

Field& Field::one_of(const std::vector<std::string>& c) {
  type = FieldType::kChoice;
  choices = c;
  return *this;
}

Field& Field::counted(CountSuffix s) {
  type = FieldType::kCount;
  suffix = s;
  return *this;
}

Field& Field::short_option(std::string a) {
  alias = std::move(a);
  return *this;
}

Field& Field::required_option() {
  required = true;
  return *this;
}

std::string Field::option() const {
  std::string o = "--" + name;
  for (char& c : o) c = c == '_' ? '-' : c;
  return o;
}

Status read_fields(const Json& request, std::span<const Field> fields) {
  if (!request.is_object())
    return Status::invalid("request: expected an object of fields, got " + json_brief(request));
  std::vector<std::string> names;
  for (const Field& f : fields) names.push_back(f.name);
  for (const auto& [key, value] : request.items()) {
    const Field* field = nullptr;
    for (const Field& f : fields)
      if (f.name == key) field = &f;
    if (field == nullptr)
      return Status::invalid("request: '" + key + "' is not a field" + did_you_mean(key, names));
    if (!value.is_null()) SP_RETURN_IF_ERROR(read_one(*field, value));
  }
  return Status::ok();
}

Json fields_json(std::span<const Field> fields) {
  Json out = Json::array();
  for (const Field& f : fields) {
    Json j = {{"name", f.name},
              {"option", f.option()},
              {"type", type_name(f.type)},
              {"help", f.help},
              {"default", std::visit([](auto* p) { return Json(*p); }, f.target)}};
    if (f.type == FieldType::kChoice) j["choices"] = f.choices;
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace scaleplan::api
