#!/usr/bin/env bash
# Installs the Debian packages scaleplan builds with, when any is missing. Idempotent: prints
# nothing and touches nothing when everything is already there. The CUDA toolkit, NCCL, cuBLASLt
# and cuDNN are expected from the machine image; the cuDNN frontend's headers come from PyPI
# (below). docs/dependencies.md says why each package is here.
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
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq >/dev/null
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The cuDNN frontend (header-only C++ graph API over cuDNN 9; the cuda backend's attention through
# cuDNN SDPA, runtime/cuda/cudnn_sdpa.cc). Only where the CUDA toolkit is, since only the cuda
# backend uses it. Debian has no package; NVIDIA publishes the headers in the PyPI wheel
# nvidia-cudnn-frontend (its include/ folder), so pip downloads that wheel (no install, no Python
# extension) and its include/ is unpacked into $CUDNN_FRONTEND_PREFIX/include, where CMake looks
# (runtime/CMakeLists.txt). Pinned: a new frontend can change the graph API. docs/dependencies.md.
cudnn_frontend_version=1.32.0
prefix=${CUDNN_FRONTEND_PREFIX:-/opt/cudnn-frontend}
if { command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; } &&
   ! grep -qs "^$cudnn_frontend_version\$" "$prefix/VERSION"; then
  echo "setup: installing the cuDNN frontend $cudnn_frontend_version headers into $prefix" >&2
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" \
    "nvidia-cudnn-frontend==$cudnn_frontend_version" >/dev/null
  python3 - "$tmp" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/nvidia_cudnn_frontend-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    z.extractall(sys.argv[1] + "/x", [n for n in z.namelist() if n.startswith("include/")])
PY
  $sudo mkdir -p "$prefix"
  $sudo rm -rf "$prefix/include"
  $sudo cp -r "$tmp/x/include" "$prefix/include"
  echo "$cudnn_frontend_version" | $sudo tee "$prefix/VERSION" >/dev/null
fi
