#!/usr/bin/env bash
# Installs the Debian packages GBX builds and tests with. Idempotent: installs only what is missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git zstd
  llvm-14-dev libclang-14-dev libclang-cpp14-dev clang-14
  nlohmann-json3-dev doctest-dev libcli11-dev libssl-dev libpng-dev
  libmgba-dev python3 python3-matplotlib python3-dev python3-venv
  sdcc xvfb clang-format
)
# No CUDA toolkit: GBX loads the NVIDIA driver and NVRTC at run time (from a toolkit if one is
# installed, else from PyPI's wheel: `pip install nvidia-cuda-nvrtc`), and builds without
# either. scripts/test.sh installs the wheel into build/nvrtc-venv.

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# Gambatte as a libretro core: `gbx-run verify --ref gambatte`'s second reference, dlopen()ed
# at run time (GBX builds, and its tests skip, without it). Only the core's library is unpacked
# from Debian's libretro-gambatte, to the path the package installs it at: the package depends
# on the RetroArch frontend (Qt, GTK, Wayland, ...), which GBX, its own frontend, never loads.
gambatte_core=/usr/lib/x86_64-linux-gnu/libretro/gambatte_libretro.so
[ "$(dpkg --print-architecture)" = amd64 ] || gambatte_core=

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    sudo=(sudo -n)
  elif [ ${#missing[@]} -gt 0 ] || { [ -n "$gambatte_core" ] && [ ! -e "$gambatte_core" ]; }; then
    echo "setup: missing packages (${missing[*]:-the Gambatte core}); run as root: sudo scripts/setup.sh" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
else
  echo "setup: installing ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ -n "$gambatte_core" ] && [ ! -e "$gambatte_core" ]; then
  echo "setup: unpacking the Gambatte libretro core (libretro-gambatte) to $gambatte_core"
  deb_dir=$(mktemp -d)
  (cd "$deb_dir" && { apt-get download -qq libretro-gambatte 2>/dev/null ||
    { "${sudo[@]}" apt-get update -qq && apt-get download -qq libretro-gambatte; }; })
  dpkg-deb -x "$deb_dir"/libretro-gambatte_*.deb "$deb_dir/root"
  "${sudo[@]}" install -D -m 644 "$deb_dir/root$gambatte_core" "$gambatte_core"
  rm -rf "$deb_dir"
fi
