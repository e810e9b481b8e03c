#!/usr/bin/env bash
# Runs the test suite of build-asan/ (scripts/build-asan.sh) under ASan/UBSan: any report
# fails the test that triggered it (UBSan does not recover; ASan aborts). The tools the suites
# start are sanitized too. The toolkit is hidden (scripts/without-cuda-toolkit), so NVRTC
# compiles skip: they spend minutes inside the uninstrumented libnvrtc, and the host code
# around them is the same code the normal suite runs with NVRTC. Also left out, for time:
#   test_conformance  the SM83 suite (500 opcodes x 1000 cases) through the JIT-ed,
#                     uninstrumented kernel: minutes of non-sanitized work
# Pass extra ctest arguments to override (e.g. -R test_cache).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GBX_ASAN_BUILD_DIR:-$root/build-asan}
export GBX_CACHE_DIR="$build/test-cache"
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(-E '^test_conformance$')
cd "$build"
"$root/scripts/without-cuda-toolkit" ctest --output-on-failure -j 2 --timeout 1500 "${args[@]}"
