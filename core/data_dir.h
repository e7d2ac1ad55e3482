// Where bundled data lives (model presets under models/presets/, cluster profiles under
// hw_profiles/bundled/, the exporters' framework definitions under export/frameworks/, the
// validation sets under validation/). In order: the environment variable SCALEPLAN_DATA_DIR; the
// installed copy beside the executable, <bindir>/../share/scaleplan (`cmake --install`, the Python
// wheel); the source tree the build was configured from, so that a build works uninstalled
// (docs/architecture.md, "Bundled data").
#pragma once

#include <string>

#include "core/status.h"

namespace scaleplan {

std::string data_dir();

// data_dir() and where it came from, e.g. "/usr/local/share/scaleplan (installed beside the
// executable)", for `scaleplan --version`.
std::string describe_data_dir();

// Ok when data_dir() holds the bundled data (models/presets); otherwise a not-found error that
// names every place searched and how to point at the data.
Status check_data_dir();

}  // namespace scaleplan
