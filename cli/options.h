// Option helpers shared by the subcommands, so that one kind of value is read and reported one
// way everywhere: counts with suffixes (core/counts.h), and choices whose list is the same in
// --help and in the error.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "api/fields.h"
#include "core/counts.h"

namespace scaleplan::cli {

// A count option: "--seq 4k", "--gbs 1k", "--train-tokens 15T" (parse_count; the help says what
// a suffix means). `target` is any arithmetic type CLI11 reads.
template <typename T>
CLI::Option* add_count(CLI::App& sub, const std::string& name, T& target, const std::string& help,
                       CountSuffix suffix = CountSuffix::kBinary);

// A choice option (--framework, ...): `choices` is the one list the help shows and an error names,
// with the closest choice when the value is a slip.
CLI::Option* add_choice(CLI::App& sub, const std::string& name, std::string& target,
                        const std::vector<std::string>& choices, const std::string& help);

// The choices of an option made by add_choice, or of one checked with CLI::IsMember (its type
// name lists them); empty for any other option. Shell completion offers them (cmd_completion.cc).
std::vector<std::string> option_choices(const CLI::Option& opt);

// The --framework choices (api/fields.h).
using api::kFrameworks;
using api::kFrameworksWithHistoric;

// Registers each field of a request's table (api/fields.h) as an option: text and lists as
// options, counts with add_count, choices with add_choice, flags as flags; returns the options by
// field name, for what ties two together (excludes).
std::map<std::string, CLI::Option*> add_fields(CLI::App& sub, std::span<const api::Field> fields);

// --- implementation ---

CLI::Validator count_validator(CountSuffix suffix);

template <typename T>
CLI::Option* add_count(CLI::App& sub, const std::string& name, T& target, const std::string& help,
                       CountSuffix suffix) {
  return sub.add_option(name, target, help + " (a count; " + count_example(suffix) + ")")
      ->transform(count_validator(suffix));
}

}  // namespace scaleplan::cli
