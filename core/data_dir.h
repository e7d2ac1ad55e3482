// Where bundled data lives (model presets under models/presets/, cluster profiles under
// hw_profiles/bundled/). The environment variable SCALEPLAN_DATA_DIR overrides the build-time
// default, which is the source tree, so a build works without installing.
#pragma once

#include <string>

namespace scaleplan {

std::string data_dir();

}  // namespace scaleplan
