#!/usr/bin/env bash
# The reliability suites of docs/reliability.md, each in its own build without CUDA:
#   build-sanitize/ (clang, ASan + UBSan): the whole test suite (ctest label `asan`), then every
#     libFuzzer target on its seeds and past crashers and for SCALEPLAN_FUZZ_SECONDS each
#     (label `fuzz`);
#   build-tsan/ (clang, TSan): the planner's and `validate`'s thread pools (label `tsan`).
# Usage: scripts/sanitize.sh [asan|fuzz|tsan]...   (default: all three)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
suites=("$@")
[ ${#suites[@]} -eq 0 ] && suites=(asan fuzz tsan)
configured() { [ -f "$1/build.ninja" ]; }
for s in "${suites[@]}"; do
  case "$s" in
    asan|fuzz)
      configured build-sanitize || cmake --preset sanitize >/dev/null
      cmake --build --preset sanitize
      ctest --preset "$s"
      ;;
    tsan)
      configured build-tsan || cmake --preset tsan >/dev/null
      cmake --build --preset tsan
      ctest --preset tsan
      ;;
    *)
      echo "sanitize.sh: unknown suite '$s' (expected asan, fuzz or tsan)" >&2
      exit 2
      ;;
  esac
done
