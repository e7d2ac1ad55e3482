// Helpers shared by the libFuzzer targets (fuzz/README in docs/reliability.md).
//
// Every target feeds one parser the bytes libFuzzer gives it and checks the contract of
// docs/reliability.md: the parser returns a value or an invalid-input Status (never an internal
// one, never an exception, never a crash), and what it accepts, the rest of the library can use.
// A broken contract aborts, which libFuzzer records as a crash with its input.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "core/status.h"

namespace scaleplan::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A Status from user input must be ok or name bad input; an internal failure is a finding.
inline void check_contract(const Status& st, const char* what) {
  if (st.is_ok() || st.code() != Status::Code::kInternal) return;
  std::fprintf(stderr, "%s: internal failure on fuzz input: %s\n", what, st.message().c_str());
  std::abort();
}

// A property the library promises (e.g. a written profile loads back) did not hold.
[[noreturn]] inline void broken(const char* what, const std::string& detail) {
  std::fprintf(stderr, "%s: %s\n", what, detail.c_str());
  std::abort();
}

}  // namespace scaleplan::fuzz

// SCALEPLAN_FUZZ_TARGET(name) { body using data, size }: defines the target's function
// scaleplan_fuzz_<name>, and libFuzzer's entry point calling it unless SCALEPLAN_FUZZ_NO_MAIN is
// defined (tests/fuzz_replay links every target into one GoogleTest binary that replays the seed
// corpora and the minimized crashers of tests/data/fuzz/ in the ordinary build).
#ifdef SCALEPLAN_FUZZ_NO_MAIN
#define SCALEPLAN_FUZZ_TARGET(name) int scaleplan_fuzz_##name(const uint8_t* data, size_t size)
#else
#define SCALEPLAN_FUZZ_TARGET(name)                                         \
  int scaleplan_fuzz_##name(const uint8_t* data, size_t size);              \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { \
    return scaleplan_fuzz_##name(data, size);                               \
  }                                                                         \
  int scaleplan_fuzz_##name(const uint8_t* data, size_t size)
#endif
