// A request's fields described once: each field's name, type, help and the member it sets, so that
// the command line's options (cli/options.h add_fields), the JSON a binding passes (read_fields)
// and the description a binding derives its keyword arguments from (fields_json) all come from
// one table. Adding an option to a command is one row in its table (e.g. simulate_fields in
// api/simulate.h) plus its printing.
//
// A table is a function of a request that returns its fields bound to that request's members:
// the pointers are valid as long as the request is. A field's default is the member's value in a
// default-constructed request.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/counts.h"
#include "core/json_util.h"
#include "core/status.h"

namespace scaleplan::api {

// The --framework choices: plan and sweep, of current frameworks; memory, simulate, validate and
// run also re-simulate 2021-2022 code (megatron-2022, deepspeed-2021).
inline const std::vector<std::string> kFrameworks = {"megatron", "nanotron", "torchtitan",
                                                     "torchtitan-2025"};
inline const std::vector<std::string> kFrameworksWithHistoric = {
    "megatron", "megatron-2022", "deepspeed-2021", "nanotron", "torchtitan", "torchtitan-2025"};

enum class FieldType {
  kText,     // a string
  kCount,    // a count, with a suffix on the command line and as a string ("4k", "15T")
  kInteger,  // a plain integer
  kNumber,   // a real number
  kFlag,     // true / false; a flag on the command line
  kList,     // strings; a repeatable option
  kChoice,   // one of `choices`
};

using FieldTarget =
    std::variant<std::string*, int64_t*, int*, double*, bool*, std::vector<std::string>*>;

struct Field {
  // The key a binding passes, snake_case ("moe_imbalance"); the command line's option is the same
  // in kebab-case ("--moe-imbalance").
  std::string name;
  FieldTarget target;
  std::string help;
  // Deduced from the target (string: text, int64_t: count, int: integer, double: number, bool:
  // flag, strings: list) unless set.
  FieldType type = FieldType::kText;
  std::vector<std::string> choices;  // kChoice
  CountSuffix suffix = CountSuffix::kBinary;
  std::string alias;      // a short option on the command line ("-m"); empty: none
  bool required = false;  // the command line requires it (the request checks it too)

  Field(std::string name, FieldTarget target, std::string help);
  // A text field whose value must be one of `choices`.
  Field& one_of(const std::vector<std::string>& choices);
  // A count field (an int64_t or a double member) read with this suffix meaning.
  Field& counted(CountSuffix suffix);
  // A short option on the command line ("-m").
  Field& short_option(std::string alias);
  // Required on the command line.
  Field& required_option();

  // "--moe-imbalance".
  std::string option() const;
};

// Sets the fields `request` names (a JSON object; null values are not given). Counts take a number
// or a string with a suffix; errors name the option as the command line spells it ("--seq: ...");
// a key that is no field is an error.
Status read_fields(const Json& request, std::span<const Field> fields);

// The description of the fields, for bindings: [{"name", "option", "type", "help", "default",
// "choices" (choice fields)}], in table order, with the defaults the fields hold now.
Json fields_json(std::span<const Field> fields);

}  // namespace scaleplan::api
