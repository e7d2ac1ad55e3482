// The scaleplan command line: dispatches to the registered subcommands and maps their Status to
// the exit code (0 ok, 2 bad input, 1 internal failure).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <memory>
#include <vector>

#include "cli/command.h"
#include "cli/output.h"
#include "core/data_dir.h"
#include "core/suggest.h"
#include "scaleplan_version.h"

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

namespace {

std::vector<std::string> names_of(const std::vector<CLI::App*>& apps) {
  std::vector<std::string> out;
  for (const CLI::App* a : apps) out.push_back(a->get_name());
  return out;
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

Status check_command_names(CLI::App& app, int argc, char** argv) {
  const std::vector<std::string> commands = names_of(app.get_subcommands({}));
  if (argc < 2)
    return Status::invalid("a command is required: " + joined(commands) + " (scaleplan --help)");
  const std::string first = argv[1];
  if (first.empty() || first[0] == '-') return Status::ok();
  if (std::find(commands.begin(), commands.end(), first) == commands.end())
    return Status::invalid("'" + first + "' is not a command" + did_you_mean(first, commands) +
                           "; commands: " + joined(commands));
  CLI::App* cmd = app.get_subcommand(first);
  const std::vector<std::string> subs = names_of(cmd->get_subcommands({}));
  if (subs.empty() || cmd->get_require_subcommand_min() == 0) return Status::ok();
  if (argc < 3 || (argv[2][0] == '-' && std::string(argv[2]) != "-")) {
    const std::string a = argc < 3 ? "" : argv[2];
    if (a == "--help" || a == "-h") return Status::ok();
    return Status::invalid(first + ": a subcommand is required: " + joined(subs));
  }
  const std::string second = argv[2];
  if (std::find(subs.begin(), subs.end(), second) == subs.end())
    return Status::invalid("'" + first + " " + second + "' is not a command" +
                           did_you_mean(second, subs) + "; " + first + " takes " + joined(subs));
  return Status::ok();
}

}  // namespace scaleplan::cli

int main(int argc, char** argv) {
  using namespace scaleplan;
#if defined(__GLIBC__)
  // Each simulation allocates and frees its program and timeline (tens of MB for a long
  // pipeline); glibc gives blocks above its mmap threshold, and the heap's free top above its trim
  // threshold, back to the kernel every time, and the next simulation faults them in again. A
  // search runs hundreds of simulations: keeping freed memory for reuse cut the system time of
  // `plan` on llama3-70b at 256 GPUs from 0.28 s to 0.03 s (of 1.2 s), with the same peak memory
  // (docs/planner.md, "Performance"). 32 MiB is the largest mmap threshold glibc accepts.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
  cli::set_command_line(argc, argv);
  CLI::App app{
      "scaleplan: profile a GPU cluster, simulate training iterations, and plan the fastest "
      "parallel layout that fits in memory."};
  app.require_subcommand(1);
  // The release, the commit it was built from (cli/version.cmake) and where the bundled data is
  // read from (core/data_dir.h).
  app.set_version_flag("--version", std::string("scaleplan ") + SCALEPLAN_VERSION + " (git " +
                                        SCALEPLAN_GIT_COMMIT + ")\ndata: " + describe_data_dir());

  auto defs = cli::registered_commands();
  std::stable_sort(
      defs.begin(), defs.end(),
      [](const cli::CommandDef& a, const cli::CommandDef& b) { return a.order < b.order; });
  std::vector<std::pair<CLI::App*, cli::Runner>> runners;
  for (const auto& def : defs) {
    CLI::App* sub = app.add_subcommand(def.name, def.help);
    runners.emplace_back(sub, def.setup(*sub));
  }

  // A command that is not one: name it with the closest, rather than CLI11's "A subcommand is
  // required" or "The following arguments were not expected".
  if (Status st = cli::check_command_names(app, argc, argv); !st.is_ok()) {
    std::fprintf(stderr, "scaleplan: error: %s\n", st.message().c_str());
    return 2;
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
