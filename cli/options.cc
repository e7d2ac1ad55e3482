// Shared option helpers; contract in options.h.
#include "cli/options.h"

#include "core/suggest.h"

namespace scaleplan::cli {

CLI::Validator count_validator(CountSuffix suffix) {
  return CLI::Validator(
      [suffix](std::string& value) -> std::string {
        auto n = parse_count(value, "", suffix);
        if (!n.is_ok()) {
          std::string msg = n.status().message();
          if (msg.rfind(": ", 0) == 0) msg.erase(0, 2);  // CLI11 prefixes the option's name
          return msg;
        }
        value = std::to_string(*n);
        return "";
      },
      "COUNT");
}

namespace {

// The validator add_choice attaches is named kChoicePrefix + the choices joined by '\n', so that
// the option itself carries its list (option_choices reads it back).
constexpr std::string_view kChoicePrefix = "choice\n";

}  // namespace

CLI::Option* add_choice(CLI::App& sub, const std::string& name, std::string& target,
                        const std::vector<std::string>& choices, const std::string& help) {
  std::string list, tag(kChoicePrefix);
  for (const auto& c : choices) {
    list += (list.empty() ? "" : ", ") + c;
    tag += c + "\n";
  }
  return sub.add_option(name, target, help + " (one of " + list + ")")
      ->check(CLI::Validator(
          [choices, list](std::string& value) -> std::string {
            for (const auto& c : choices)
              if (value == c) return "";
            return "'" + value + "' is not one of " + list + did_you_mean(value, choices);
          },
          "CHOICE", tag));
}

std::map<std::string, CLI::Option*> add_fields(CLI::App& sub, std::span<const api::Field> fields) {
  std::map<std::string, CLI::Option*> added;
  for (const api::Field& f : fields) {
    const std::string name = f.option() + (f.alias.empty() ? "" : "," + f.alias);
    CLI::Option* opt = std::visit(
        [&](auto* p) -> CLI::Option* {
          using T = std::remove_pointer_t<decltype(p)>;
          if constexpr (std::is_same_v<T, bool>) {
            return sub.add_flag(name, *p, f.help);
          } else if constexpr (std::is_same_v<T, std::string>) {
            if (f.type == api::FieldType::kChoice)
              return add_choice(sub, name, *p, f.choices, f.help);
            return sub.add_option(name, *p, f.help);
          } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double>) {
            if (f.type == api::FieldType::kCount) return add_count(sub, name, *p, f.help, f.suffix);
            return sub.add_option(name, *p, f.help);
          } else {
            return sub.add_option(name, *p, f.help);
          }
        },
        f.target);
    if (f.required) opt->required();
    added[f.name] = opt;
  }
  return added;
}

std::vector<std::string> option_choices(const CLI::Option& opt) {
  std::vector<std::string> out;
  auto& o = const_cast<CLI::Option&>(opt);  // CLI11 2.1's get_validator is not const
  for (int i = 0;; ++i) {
    const CLI::Validator* v = nullptr;
    try {
      v = o.get_validator(i);
    } catch (const CLI::OptionNotFound&) {
      break;
    }
    const std::string& tag = v->get_name();
    if (tag.rfind(kChoicePrefix, 0) != 0) continue;
    for (size_t b = kChoicePrefix.size(), e; (e = tag.find('\n', b)) != std::string::npos;
         b = e + 1)
      out.push_back(tag.substr(b, e - b));
    return out;
  }
  // CLI::IsMember({"host", "cuda"}): the type name ends in ":{host,cuda}".
  const std::string type = opt.get_type_name();
  const size_t open = type.find(":{");
  if (open == std::string::npos || type.back() != '}') return out;
  const std::string items = type.substr(open + 2, type.size() - open - 3);
  for (size_t b = 0, e;; b = e + 1) {
    e = items.find(',', b);
    out.push_back(items.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
  }
  return out;
}

}  // namespace scaleplan::cli
