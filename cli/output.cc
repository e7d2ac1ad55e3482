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

std::string csv_field(const Json& v) {
  if (v.is_null()) return "";
  if (!v.is_string()) return v.dump();
  const std::string s = v.get<std::string>();
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

void print_csv(const std::vector<std::string>& columns, const Json& rows) {
  std::string out;
  for (size_t i = 0; i < columns.size(); ++i) out += (i ? "," : "") + columns[i];
  out += '\n';
  for (const Json& r : rows) {
    for (size_t i = 0; i < columns.size(); ++i) {
      if (i) out += ',';
      if (r.contains(columns[i])) out += csv_field(r[columns[i]]);
    }
    out += '\n';
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
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
