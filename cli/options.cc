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

CLI::Option* add_choice(CLI::App& sub, const std::string& name, std::string& target,
                        const std::vector<std::string>& choices, const std::string& help) {
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
  return sub.add_option(name, target, help + " (one of " + list + ")")
      ->check(CLI::Validator(
          [choices, list](std::string& value) -> std::string {
            for (const auto& c : choices)
              if (value == c) return "";
            return "'" + value + "' is not one of " + list + did_you_mean(value, choices);
          },
          "CHOICE"));
}

}  // namespace scaleplan::cli
