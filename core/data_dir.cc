#include "core/data_dir.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace scaleplan {
namespace fs = std::filesystem;

namespace {

// A folder holds the bundled data when it has the presets; the other folders come with them.
bool holds_data(const fs::path& dir) {
  std::error_code ec;
  return !dir.empty() && fs::is_directory(dir / "models" / "presets", ec);
}

// <directory of the executable>/SCALEPLAN_INSTALL_DATA_REL (GNUInstallDirs' DATADIR/scaleplan
// relative to BINDIR, "../share/scaleplan" by default), whether or not it exists; empty when the
// executable cannot be resolved. /proc/self/exe follows symbolic links (a ~/bin/scaleplan link to
// an installed copy still finds the copy's data).
const fs::path& beside_executable() {
  static const fs::path dir = [] {
    std::error_code ec;
    const fs::path exe = fs::canonical("/proc/self/exe", ec);
    if (ec) return fs::path();
    return (exe.parent_path() / SCALEPLAN_INSTALL_DATA_REL).lexically_normal();
  }();
  return dir;
}

const char* env_dir() {
  const char* env = std::getenv("SCALEPLAN_DATA_DIR");
  return env && *env ? env : nullptr;
}

}  // namespace

std::string data_dir() {
  if (const char* env = env_dir()) return env;
  if (holds_data(beside_executable())) return beside_executable().string();
  return SCALEPLAN_DATA_DIR;
}

std::string describe_data_dir() {
  const std::string missing = holds_data(data_dir()) ? "" : "; it holds no bundled data";
  if (const char* env = env_dir()) return std::string(env) + " (SCALEPLAN_DATA_DIR" + missing + ")";
  if (holds_data(beside_executable()))
    return beside_executable().string() + " (installed beside the executable)";
  return std::string(SCALEPLAN_DATA_DIR) + " (the source tree of the build" + missing + ")";
}

Status check_data_dir() {
  if (holds_data(data_dir())) return Status::ok();
  std::string searched;
  if (const char* env = env_dir()) {
    searched = std::string("SCALEPLAN_DATA_DIR=") + env;
  } else {
    searched = "SCALEPLAN_DATA_DIR (not set), ";
    searched += beside_executable().empty() ? std::string("the executable's folder (unresolved)")
                                            : beside_executable().string();
    searched += ", " + std::string(SCALEPLAN_DATA_DIR);
  }
  return Status::not_found(
      "the bundled data (models/presets, hw_profiles/bundled) was not found; searched " + searched +
      ": install scaleplan (cmake --install) or set SCALEPLAN_DATA_DIR to the folder that holds "
      "models/presets");
}

}  // namespace scaleplan
