#include "cli/output.h"

#include <cstdio>
#include <nlohmann/json.hpp>

namespace scaleplan::cli {

void print_json(const Json& j) {
  std::string s = j.dump(2);
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fputc('\n', stdout);
}

Status write_output_file(const std::string& path, std::string_view content) {
  return write_file_atomic(path, content);
}

}  // namespace scaleplan::cli
