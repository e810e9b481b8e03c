#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite (CTest). The SM83 suite is
# read from ../shared/conformance (or -DGBX_CONFORMANCE_ARCHIVE=...); absent, that test skips.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
build=${GBX_BUILD_DIR:-$root/build}
# Tests compile kernels into a cache inside the build dir, never the user's cache.
export GBX_CACHE_DIR="$build/test-cache"
cd "$build"
ctest --output-on-failure -j 2 --timeout 1500
