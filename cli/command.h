// Subcommand registration for the `scaleplan` executable.
//
// Each subcommand lives in its own cli/cmd_<name>.cc and registers itself at static-initialization
// time with SCALEPLAN_COMMAND. Its setup function adds the subcommand's options to a CLI11 App and
// returns the function that runs it. The runner returns a Status: ok -> exit 0; invalid input or
// not found -> the message on stderr, exit 2; internal -> exit 1. Runners print their results to
// stdout (a table, or JSON with --json) and never exit the process themselves.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/status.h"

namespace CLI {
class App;
}

namespace scaleplan::cli {

using Runner = std::function<Status()>;
using Setup = std::function<Runner(CLI::App& sub)>;

struct CommandDef {
  std::string name;
  std::string help;
  Setup setup;
  int order = 100;  // position in --help
};

bool register_command(CommandDef def);
const std::vector<CommandDef>& registered_commands();

// Before parsing: the first argument must name a command and, for a command made of subcommands
// (cluster), the second one of those; otherwise an invalid-input error that names the word, the
// closest name ("did you mean"), and the choices.
Status check_command_names(CLI::App& app, int argc, char** argv);

}  // namespace scaleplan::cli

#define SCALEPLAN_COMMAND(ident, ...)       \
  static const bool scaleplan_cmd_##ident = \
      ::scaleplan::cli::register_command(::scaleplan::cli::CommandDef{__VA_ARGS__})
