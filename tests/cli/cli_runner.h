// Runs the scaleplan binary for CLI tests and captures stdout, stderr and the exit code.
//
// ctest runs every test case as its own process, two at a time, so each call writes stderr to its
// own mkstemp file: a shared fixed path would let one test read another's stderr.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

namespace scaleplan::testing {

struct RunResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

inline RunResult run_scaleplan(const std::string& args) {
  std::string err_path = ::testing::TempDir() + "/scaleplan_cli_stderr_XXXXXX";
  int fd = mkstemp(err_path.data());
  if (fd >= 0) close(fd);
  const std::string cmd = std::string(SCALEPLAN_BINARY) + " " + args + " 2>" + err_path;
  RunResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  r.err.assign(std::istreambuf_iterator<char>(err), std::istreambuf_iterator<char>());
  std::remove(err_path.c_str());
  return r;
}

// A path in the test temp directory that no concurrently running test process shares.
inline std::string unique_temp_path(const std::string& name) {
  return ::testing::TempDir() + "/scaleplan_" + std::to_string(getpid()) + "_" + name;
}

}  // namespace scaleplan::testing
