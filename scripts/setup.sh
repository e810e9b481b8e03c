#!/usr/bin/env bash
# Installs the Debian packages GBX builds and tests with. Idempotent: installs only what is missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git zstd
  llvm-14-dev libclang-14-dev libclang-cpp14-dev clang-14
  nlohmann-json3-dev doctest-dev libcli11-dev libssl-dev libpng-dev
  libmgba-dev python3 python3-matplotlib python3-dev python3-venv
  sdcc
  libretro-gambatte
)
# libretro-gambatte: Gambatte as a libretro core, `gbx-run verify --ref gambatte`'s second
# reference; dlopen()ed at run time, so GBX builds and tests (they skip) without it. Debian
# makes it depend on retroarch.
# No CUDA toolkit: GBX loads the NVIDIA driver and NVRTC at run time (from a toolkit if one is
# installed, else from PyPI's wheel: `pip install nvidia-cuda-nvrtc`), and builds without
# either. scripts/test.sh installs the wheel into build/nvrtc-venv.

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
