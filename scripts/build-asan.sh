#!/usr/bin/env bash
# Configures and builds GBX with AddressSanitizer and UndefinedBehaviorSanitizer into
# build-asan/ (or $GBX_ASAN_BUILD_DIR). GBX's own code is instrumented; Debian's LLVM, libmgba
# and the kernels JIT-compiled at run time are not (except the crafted-state suites',
# compiled with GBX_JIT_CHECKS=bounds,address: docs/guide/states.md). It builds what
# scripts/test-asan.sh runs: the libraries, tools, ROMs, the CUDA driver double and the suites except test_conformance;
# no Python module. From scratch without ccache it took 1073 CPU-seconds (user + sys), i.e.
# about 9-10 minutes on 2 idle cores (measured 2026-11-23 at load 12-16: 50 min wall).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GBX_ASAN_BUILD_DIR:-$root/build-asan}
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
command -v ccache >/dev/null && gen+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
if [ ! -f "$build/CMakeCache.txt" ]; then
  # -O1 -g1: the usual sanitizer trade-off (readable stacks, a cheaper build than -O2 -g).
  cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DGBX_SANITIZE=address,undefined -DGBX_TESTS_SKIP=test_conformance
fi
cmake --build "$build" -j "$(nproc)"
