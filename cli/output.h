// Shared output helpers for subcommands: JSON to stdout, files written atomically.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/json_util.h"
#include "core/status.h"

namespace scaleplan::cli {

// Prints a JSON value to stdout, indented, with a trailing newline.
void print_json(const Json& j);

// Prints a table as CSV (RFC 4180) to stdout: a header of `columns`, then one line per object of
// `rows` with its value of each column (strings quoted where they hold a comma, a quote or a line
// break; numbers as JSON writes them; a missing key or null left empty). `plan --csv`, `sweep
// --csv`.
void print_csv(const std::vector<std::string>& columns, const Json& rows);

// The command line as typed (arguments with spaces or quotes are single-quoted), for reports
// that say how they were made (compare --html, plan --html). main() records it.
void set_command_line(int argc, char** argv);
const std::string& command_line();

// `text` in single quotes for a POSIX shell ('' when empty; a quote inside becomes '\'').
std::string shell_quote(std::string_view text);

// Writes a file atomically (no partial file on failure); the error names the path.
Status write_output_file(const std::string& path, std::string_view content);

}  // namespace scaleplan::cli
