#!/usr/bin/env bash
# Installs the Debian packages GBX builds and tests with. Idempotent: installs only what is missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git zstd
  llvm-14-dev libclang-14-dev libclang-cpp14-dev clang-14
  nlohmann-json3-dev doctest-dev libcli11-dev libssl-dev libpng-dev
  libmgba-dev python3 python3-matplotlib
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
else
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
      sudo=(sudo -n)
    else
      echo "setup: missing packages (${missing[*]}); run as root: sudo scripts/setup.sh" >&2
      exit 1
    fi
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -e /usr/local/cuda/include/nvrtc.h ] && ! command -v nvcc >/dev/null; then
  echo "setup: the CUDA toolkit (NVRTC headers and library) is expected at /usr/local/cuda" >&2
  exit 1
fi
