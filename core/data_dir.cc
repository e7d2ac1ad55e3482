#include "core/data_dir.h"

#include <cstdlib>

namespace scaleplan {

std::string data_dir() {
  if (const char* env = std::getenv("SCALEPLAN_DATA_DIR"); env && *env) return env;
  return SCALEPLAN_DATA_DIR;
}

}  // namespace scaleplan
