#!/usr/bin/env bash
# Installs the Debian packages scaleplan builds with, when any is missing. Idempotent: prints
# nothing and touches nothing when everything is already there. The CUDA toolkit, NCCL, cuBLASLt
# and cuDNN are expected from the machine image (docs/dependencies.md says why each package is here).
set -euo pipefail

packages=(
  cmake ninja-build g++ ccache
  libboost-graph-dev      # hw_profiles: topology graph and routes
  libeigen3-dev           # calibrate: least-squares fits; runtime host backend kernels
  nlohmann-json3-dev      # JSON in and out (HF config.json, profiles, plans, traces)
  libgtest-dev libgmock-dev  # tests
  libbenchmark-dev        # bench/
  libcli11-dev            # the command line
  libfmt-dev              # formatted tables
  libopenmpi-dev openmpi-bin  # runtime: multi-process bootstrap
  python3 python3-yaml    # tests: exports read back as nanotron (PyYAML) and torchtitan (tomllib) read them
  python3-venv python3-dev python3-pip  # the Python package: a fresh venv, the C API headers, pip
  clang libclang-rt-14-dev    # sanitizer builds and libFuzzer targets (docs/reliability.md)
  zlib1g-dev              # sim: gzipped PyTorch profiler traces (compare --measured *.json.gz)
  chromium                # tests (label browser): the HTML reports opened headless
  zsh                     # tests (label install): the zsh completion script parsed and loaded
  protobuf-compiler python3-protobuf  # tests: Chakra traces read back with Chakra's reader (third_party/chakra)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
