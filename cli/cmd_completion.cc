// `scaleplan completion bash|zsh`: prints a shell completion script generated from the command
// line itself: the CLI11 app's commands, subcommands, options and positionals, walked at run time,
// so a command added later completes without touching this file. Values complete by what the
// option takes:
// - add_choice options (and CLI::IsMember ones) to their choices (cli/options.h option_choices);
// - --model to the bundled presets and files (a config.json), --cluster and a positional named
//   `cluster` to the bundled profiles and files: the option names are the command line's contract
//   (DESIGN.md, "Command line"), the same in every command;
// - validate's FILE and memory --validate to the bundled validation sets and files;
// - files and traces (--out, --trace, --html, --plan, ..., or an option typed FILE) to files;
// - anything else (layouts, sizes, numbers) to nothing.
// The names of presets, profiles and sets are those of the data directory when the script is
// generated (the build generates it for `cmake --install`; cmake/install.cmake).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "api/describe.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"

namespace scaleplan::cli {
namespace {

enum class Kind { kFlag, kText, kFile, kModel, kCluster, kRecords, kChoice };

struct Arg {
  std::vector<std::string> names;  // "--model", "-m"; empty for a positional
  std::string pname;               // a positional's name
  std::string help;                // the first clause of the description
  Kind kind = Kind::kText;
  std::vector<std::string> choices;
  bool repeatable = false;
};

struct Node {
  std::vector<std::string> path;  // command words below `scaleplan`; empty for the root
  std::string help;
  std::vector<Arg> options, positionals;
  std::vector<Node> subs;
};

// The first sentence or clause of a help text, at most 70 characters: what a menu shows. It ends
// at ". ", "; " or ": " outside parentheses (not the ". " of "e.g. ", nor a ": " within the first
// 16 characters, which follows a value's form such as "NAME=PROFILE: ...").
std::string brief(const std::string& help) {
  int depth = 0;
  size_t end = help.size();
  for (size_t i = 0; i + 1 < help.size() && end == help.size(); ++i) {
    const char c = help[i];
    depth += c == '(' ? 1 : c == ')' ? -1 : 0;
    if (depth > 0 || help[i + 1] != ' ') continue;
    const bool abbreviation =
        i >= 3 && (help.compare(i - 3, 3, "e.g") == 0 || help.compare(i - 3, 3, "i.e") == 0);
    if ((c == '.' && !abbreviation) || c == ';' || (c == ':' && i >= 16)) end = i;
  }
  std::string s = help.substr(0, end);
  if (s.size() > 70) {
    s = s.substr(0, s.rfind(' ', 67));
    s += "...";
  }
  return s;
}

Kind kind_of(const CLI::Option& opt, const std::vector<std::string>& path, bool has_choices) {
  if (opt.get_expected_max() == 0) return Kind::kFlag;
  if (has_choices) return Kind::kChoice;
  const std::string cmd = path.empty() ? "" : path.back();
  if (opt.check_lname("model")) return Kind::kModel;
  if (opt.check_lname("cluster") || (!opt.nonpositional() && opt.check_name("cluster")))
    return Kind::kCluster;
  if ((cmd == "validate" && !opt.nonpositional() && opt.check_name("file")) ||
      (cmd == "memory" && opt.check_lname("validate")))
    return Kind::kRecords;
  // Files: an option whose type name says so (->type_name("FILE")), or one of the names the
  // commands use for files and traces they read or write; refit's --profile is a profile file.
  const std::string type = opt.get_type_name();
  if (type.rfind("FILE", 0) == 0 || type.rfind("PATH", 0) == 0 || type.rfind("DIR", 0) == 0)
    return Kind::kFile;
  for (const char* name : {"out", "trace", "html", "plan", "predicted", "measured", "log",
                           "nccl-log", "points", "csv"})
    if (opt.check_lname(name)) return Kind::kFile;
  if (cmd == "refit" && opt.check_lname("profile")) return Kind::kFile;
  return Kind::kText;  // layouts, sizes, numbers: nothing to complete
}

Node walk(CLI::App& app, std::vector<std::string> path) {
  Node n;
  n.path = path;
  n.help = brief(app.get_description());
  for (CLI::Option* opt : app.get_options()) {
    Arg a;
    for (const auto& l : opt->get_lnames()) a.names.push_back("--" + l);
    for (const auto& s : opt->get_snames()) a.names.push_back("-" + s);
    a.help = brief(opt->get_description());
    a.choices = option_choices(*opt);
    a.kind = kind_of(*opt, path, !a.choices.empty());
    a.repeatable = a.kind != Kind::kFlag && opt->get_expected_max() > 1;
    if (a.names.empty()) {
      a.pname = opt->get_name(true);
      n.positionals.push_back(std::move(a));
    } else {
      n.options.push_back(std::move(a));
    }
  }
  for (CLI::App* sub : app.get_subcommands({})) {
    std::vector<std::string> p = path;
    p.push_back(sub->get_name());
    n.subs.push_back(walk(*sub, std::move(p)));
  }
  return n;
}

std::string joined(const std::vector<std::string>& words, const std::string& sep = " ") {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "" : sep) + w;
  return s;
}

template <typename F>
void each_node(const Node& n, F&& f) {
  f(n);
  for (const Node& s : n.subs) each_node(s, f);
}

// --- bash ---

std::string bash_kind(const Arg& a) {
  switch (a.kind) {
    case Kind::kFlag:
      return "flag";
    case Kind::kText:
      return "text";
    case Kind::kFile:
      return "file";
    case Kind::kModel:
      return "model";
    case Kind::kCluster:
      return "cluster";
    case Kind::kRecords:
      return "records";
    case Kind::kChoice:
      return "choice:" + joined(a.choices);
  }
  return "text";
}

std::string bash_script(const Node& root, const std::string& version) {
  std::string s =
      "# bash completion for scaleplan, generated by `scaleplan completion bash` (" + version +
      ").\n"
      "# Install: save as ~/.local/share/bash-completion/completions/scaleplan, or source it from "
      "~/.bashrc:\n"
      "#   source <(scaleplan completion bash)\n\n";
  s += "_scaleplan_presets=" + shell_quote(joined(api::bundled_names().presets)) + "\n";
  s += "_scaleplan_profiles=" + shell_quote(joined(api::bundled_names().profiles)) + "\n";
  s += "_scaleplan_sets=" + shell_quote(joined(api::bundled_names().validation_sets)) + "\n\n";

  s += "# The subcommands below a command path (the words after scaleplan, space-separated).\n"
       "_scaleplan_subcommands() {\n  case \"$1\" in\n";
  each_node(root, [&](const Node& n) {
    std::vector<std::string> names;
    for (const Node& c : n.subs) names.push_back(c.path.back());
    if (!names.empty())
      s += "    " + shell_quote(joined(n.path)) + ") echo " + shell_quote(joined(names)) + " ;;\n";
  });
  s += "  esac\n}\n\n";

  s += "# The options of a command path.\n_scaleplan_options() {\n  case \"$1\" in\n";
  each_node(root, [&](const Node& n) {
    std::vector<std::string> names;
    for (const Arg& a : n.options) names.insert(names.end(), a.names.begin(), a.names.end());
    if (!names.empty())
      s += "    " + shell_quote(joined(n.path)) + ") echo " + shell_quote(joined(names)) + " ;;\n";
  });
  s += "  esac\n}\n\n";

  s += "# What an option's value is: flag (none), text (nothing to complete), file, model, "
       "cluster,\n# records, or choice:WORDS.\n_scaleplan_value() {\n  case \"$1|$2\" in\n";
  each_node(root, [&](const Node& n) {
    for (const Arg& a : n.options) {
      if (a.kind == Kind::kFlag) continue;
      std::vector<std::string> labels;
      for (const auto& name : a.names) labels.push_back(shell_quote(joined(n.path) + "|" + name));
      s += "    " + joined(labels, "|") + ") echo " + shell_quote(bash_kind(a)) + " ;;\n";
    }
  });
  s += "    *) echo flag ;;\n  esac\n}\n\n";

  s += "# What the first positional argument of a command path is.\n"
       "_scaleplan_positional() {\n  case \"$1\" in\n";
  each_node(root, [&](const Node& n) {
    if (!n.positionals.empty())
      s += "    " + shell_quote(joined(n.path)) + ") echo " +
           shell_quote(bash_kind(n.positionals.front())) + " ;;\n";
  });
  s += "  esac\n}\n\n";

  s += R"BASH(_scaleplan_files() {
  compopt -o filenames 2>/dev/null
  local IFS=$'\n'
  COMPREPLY+=($(compgen -f -- "$1"))
}

_scaleplan_complete_value() {
  local kind="$1" cur="$2"
  COMPREPLY=()
  case "$kind" in
    model) COMPREPLY=($(compgen -W "$_scaleplan_presets" -- "$cur")); _scaleplan_files "$cur" ;;
    cluster) COMPREPLY=($(compgen -W "$_scaleplan_profiles" -- "$cur")); _scaleplan_files "$cur" ;;
    records) COMPREPLY=($(compgen -W "$_scaleplan_sets" -- "$cur")); _scaleplan_files "$cur" ;;
    file) _scaleplan_files "$cur" ;;
    choice:*) COMPREPLY=($(compgen -W "${kind#choice:}" -- "$cur")) ;;
  esac
}

_scaleplan() {
  local cur="${COMP_WORDS[COMP_CWORD]}" path="" word kind subs i=1
  # The command path: the words that name (sub)commands, skipping options and their values.
  while (( i < COMP_CWORD )); do
    word="${COMP_WORDS[i]}"
    if [[ "$word" == -* ]]; then
      kind=$(_scaleplan_value "$path" "$word")
      # Its value is the next word, or the one after an = (--model=llama3-8b).
      if [[ "$kind" != flag ]]; then
        [[ "${COMP_WORDS[i+1]}" == = ]] && (( i++ ))
        (( i++ ))
      fi
    else
      subs=" $(_scaleplan_subcommands "$path") "
      [[ "$subs" == *" $word "* ]] && path="${path:+$path }$word"
    fi
    (( i++ ))
  done
  # The value of the option before the word: "--model llama3-", or "--model=llama3-", which bash
  # splits at the = (COMP_WORDBREAKS) into --model, =, llama3-.
  local opt="${COMP_WORDS[COMP_CWORD-1]}"
  [[ "$opt" == = && $COMP_CWORD -gt 2 ]] && opt="${COMP_WORDS[COMP_CWORD-2]}"
  [[ "$cur" == = ]] && { opt="${COMP_WORDS[COMP_CWORD-1]}"; cur=""; }
  if (( COMP_CWORD > 1 )) && [[ "$opt" == -* ]]; then
    kind=$(_scaleplan_value "$path" "$opt")
    if [[ "$kind" != flag ]]; then
      _scaleplan_complete_value "$kind" "$cur"
      return 0
    fi
  fi
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$(_scaleplan_options "$path")" -- "$cur"))
    return 0
  fi
  subs=$(_scaleplan_subcommands "$path")
  if [[ -n "$subs" ]]; then
    COMPREPLY=($(compgen -W "$subs" -- "$cur"))
    return 0
  fi
  kind=$(_scaleplan_positional "$path")
  [[ -n "$kind" ]] && _scaleplan_complete_value "$kind" "$cur"
  return 0
}

complete -F _scaleplan scaleplan
)BASH";
  return s;
}

// --- zsh ---

std::string zsh_function(const std::vector<std::string>& path) {
  std::string f = "_scaleplan_cmd";
  for (const auto& w : path) f += "_" + w;
  std::replace(f.begin(), f.end(), '-', '_');
  return f;
}

// Text inside an _arguments spec's [description] or a value's message.
std::string zsh_text(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '[' || c == ']' || c == ':' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string zsh_action(const Arg& a) {
  switch (a.kind) {
    case Kind::kFlag:
      return "";
    case Kind::kText:
      return " ";
    case Kind::kFile:
      return "_files";
    case Kind::kModel:
      return "_scaleplan_models";
    case Kind::kCluster:
      return "_scaleplan_clusters";
    case Kind::kRecords:
      return "_scaleplan_record_sets";
    case Kind::kChoice:
      return "(" + joined(a.choices) + ")";
  }
  return " ";
}

// One _arguments spec of an option, single-quoted.
std::string zsh_spec(const Arg& a) {
  const std::string value =
      a.kind == Kind::kFlag
          ? ""
          : ":" + zsh_text(a.names.front().substr(a.names.front().find_first_not_of('-'))) + ":" +
                zsh_action(a);
  const std::string body = "[" + zsh_text(a.help) + "]" + value;
  std::string names = a.names.size() == 1 ? a.names.front() : "{" + joined(a.names, ",") + "}";
  std::string prefix = a.repeatable ? "*" : "";
  if (a.names.size() > 1 && !a.repeatable) prefix = "(" + joined(a.names) + ")";
  if (a.names.size() == 1) return shell_quote(prefix + names + body);
  return (prefix.empty() ? "" : shell_quote(prefix)) + names + shell_quote(body);
}

std::string zsh_node(const Node& n) {
  std::string s = zsh_function(n.path) + "() {\n";
  std::vector<std::string> specs;
  for (const Arg& a : n.options) specs.push_back(zsh_spec(a));
  int index = 1;
  if (n.subs.empty()) {
    for (const Arg& p : n.positionals) {
      const std::string pos = p.repeatable ? "*" : std::to_string(index++);
      specs.push_back(shell_quote(pos + ":" + zsh_text(p.pname) + ":" + zsh_action(p)));
    }
  } else {
    specs.push_back(shell_quote("1: :->command"));
    specs.push_back(shell_quote("*:: :->args"));
    s += "  local curcontext=\"$curcontext\" state line\n  typeset -A opt_args\n";
  }
  s += std::string("  _arguments ") + (n.subs.empty() ? "-s" : "-C -s");
  for (const auto& spec : specs) s += " \\\n    " + spec;
  s += "\n";
  if (!n.subs.empty()) {
    s += "  case $state in\n    command)\n      local -a commands=(";
    for (const Node& c : n.subs) s += "\n        " + shell_quote(c.path.back() + ":" + c.help);
    s += "\n      )\n      _describe -t commands command commands ;;\n    args)\n"
         "      case $line[1] in\n";
    for (const Node& c : n.subs)
      s += "        " + shell_quote(c.path.back()) + ") " + zsh_function(c.path) + " ;;\n";
    s += "      esac ;;\n  esac\n";
  }
  s += "}\n\n";
  for (const Node& c : n.subs) s += zsh_node(c);
  return s;
}

std::string zsh_script(const Node& root, const std::string& version) {
  std::string s =
      "#compdef scaleplan\n"
      "# zsh completion for scaleplan, generated by `scaleplan completion zsh` (" +
      version +
      ").\n"
      "# Install: save as _scaleplan in a folder of $fpath (e.g. ~/.zfunc, with fpath+=(~/.zfunc) "
      "before\n# compinit in ~/.zshrc), or source it after compinit: "
      "source <(scaleplan completion zsh)\n\n";
  s += "_scaleplan_models() {\n  _alternative " +
       shell_quote("presets:preset:(" + joined(api::bundled_names().presets) + ")") +
       " 'files:config.json:_files'\n}\n\n";
  s += "_scaleplan_clusters() {\n  _alternative " +
       shell_quote("profiles:profile:(" + joined(api::bundled_names().profiles) + ")") +
       " 'files:profile file:_files'\n}\n\n";
  s += "_scaleplan_record_sets() {\n  _alternative " +
       shell_quote("sets:validation set:(" + joined(api::bundled_names().validation_sets) + ")") +
       " 'files:records file:_files'\n}\n\n";
  s += zsh_node(root);
  s += "if [[ \"$funcstack[1]\" == _scaleplan ]]; then\n  _scaleplan_cmd \"$@\"\nelse\n"
       "  compdef _scaleplan_cmd scaleplan\nfi\n";
  return s;
}

struct CompletionOptions {
  std::string shell, out;
};

SCALEPLAN_COMMAND(
    completion, "completion", "Print a bash or zsh completion script for scaleplan",
    [](CLI::App& sub) -> Runner {
      auto o = std::make_shared<CompletionOptions>();
      add_choice(sub, "shell", o->shell, {"bash", "zsh"}, "the shell")->required();
      sub.add_option("--out,-o", o->out, "write the script to this file instead of stdout");
      sub.footer(
          "bash: source <(scaleplan completion bash)   zsh: source <(scaleplan completion zsh)\n"
          "README.md, \"Install\", has the lines for ~/.bashrc and ~/.zshrc.");
      CLI::App* parent = sub.get_parent();
      return [o, parent]() -> Status {
        const Node root = walk(*parent, {});
        const std::string version = std::string("scaleplan ") + SCALEPLAN_VERSION;
        const std::string script =
            o->shell == "bash" ? bash_script(root, version) : zsh_script(root, version);
        if (!o->out.empty()) return write_output_file(o->out, script);
        std::fwrite(script.data(), 1, script.size(), stdout);
        return Status::ok();
      };
    },
    120);

}  // namespace
}  // namespace scaleplan::cli
