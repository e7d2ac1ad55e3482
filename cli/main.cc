// The scaleplan command line: dispatches to the registered subcommands and maps their Status to
// the exit code (0 ok, 2 bad input, 1 internal failure).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <vector>

#include "cli/command.h"

namespace scaleplan::cli {

static std::vector<CommandDef>& registry() {
  static std::vector<CommandDef> defs;
  return defs;
}

bool register_command(CommandDef def) {
  registry().push_back(std::move(def));
  return true;
}

const std::vector<CommandDef>& registered_commands() { return registry(); }

}  // namespace scaleplan::cli

int main(int argc, char** argv) {
  using namespace scaleplan;
  CLI::App app{
      "scaleplan: profile a GPU cluster, simulate training iterations, and plan the fastest "
      "parallel layout that fits in memory."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "scaleplan 0.1.0");

  auto defs = cli::registered_commands();
  std::stable_sort(
      defs.begin(), defs.end(),
      [](const cli::CommandDef& a, const cli::CommandDef& b) { return a.order < b.order; });
  std::vector<std::pair<CLI::App*, cli::Runner>> runners;
  for (const auto& def : defs) {
    CLI::App* sub = app.add_subcommand(def.name, def.help);
    runners.emplace_back(sub, def.setup(*sub));
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "scaleplan: error: %s\n", e.what());
    std::fprintf(stderr, "Run with --help for usage.\n");
    return 2;
  }

  for (auto& [sub, run] : runners) {
    if (!sub->parsed()) continue;
    Status st;
    try {
      st = run();
    } catch (const std::exception& e) {
      st = Status::internal(std::string("unexpected failure: ") + e.what());
    }
    if (st.is_ok()) return 0;
    std::fprintf(stderr, "scaleplan %s: error: %s\n", sub->get_name().c_str(),
                 st.message().c_str());
    return st.code() == Status::Code::kInternal ? 1 : 2;
  }
  return 2;
}
