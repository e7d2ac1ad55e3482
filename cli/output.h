// Shared output helpers for subcommands: JSON to stdout, files written atomically.
#pragma once

#include <string>
#include <string_view>

#include "core/json_util.h"
#include "core/status.h"

namespace scaleplan::cli {

// Prints a JSON value to stdout, indented, with a trailing newline.
void print_json(const Json& j);

// The command line as typed (arguments with spaces or quotes are single-quoted), for reports
// that say how they were made (compare --html, plan --html). main() records it.
void set_command_line(int argc, char** argv);
const std::string& command_line();

// `text` in single quotes for a POSIX shell ('' when empty; a quote inside becomes '\'').
std::string shell_quote(std::string_view text);

// Writes a file atomically (no partial file on failure); the error names the path.
Status write_output_file(const std::string& path, std::string_view content);

}  // namespace scaleplan::cli
