#include "cli/output.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

namespace scaleplan::cli {

void print_json(const Json& j) {
  std::string s = j.dump(2);
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fputc('\n', stdout);
}

namespace {
std::string& command_line_storage() {
  static std::string s;
  return s;
}
}  // namespace

void set_command_line(int argc, char** argv) {
  std::string s = "scaleplan";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    s += ' ';
    s += a.find_first_of(" \t'\"$`\\") == std::string::npos && !a.empty() ? a : shell_quote(a);
  }
  command_line_storage() = std::move(s);
}

std::string shell_quote(std::string_view text) {
  std::string s = "'";
  for (char c : text) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return s + "'";
}

const std::string& command_line() { return command_line_storage(); }

Status write_output_file(const std::string& path, std::string_view content) {
  return write_file_atomic(path, content);
}

}  // namespace scaleplan::cli
