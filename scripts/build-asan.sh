#!/usr/bin/env bash
# Configures and builds GBX with AddressSanitizer and UndefinedBehaviorSanitizer into
# build-asan/ (or $GBX_ASAN_BUILD_DIR). GBX's own code is instrumented; Debian's LLVM, libmgba
# and the kernels JIT-compiled at run time are not (except the crafted-state suites',
# compiled with GBX_JIT_CHECKS=bounds,address: docs/guide/states.md). It builds what
# scripts/test-asan.sh runs: the libraries, tools, ROMs, the CUDA driver double and the suites it runs (below);
# no Python module. From scratch without ccache it took 1073 CPU-seconds (user + sys), i.e.
# about 9-10 minutes on 2 idle cores (measured 2026-11-23 at load 12-16: 50 min wall).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GBX_ASAN_BUILD_DIR:-$root/build-asan}
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
command -v ccache >/dev/null && gen+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
# Suites scripts/test-asan.sh does not run are not built (each is a minute or more of
# sanitized compiling on 2 cores): test_conformance (the SM83 suite through the JIT-ed,
# uninstrumented kernel); suites whose minutes go to JIT-compiling and running kernels, not to
# GBX's host code, which the suites run here cover too (2026-11-27, normal run in a fresh clone:
# test_pixels 410 s, test_orc_profile 190 s, test_bench 166 s, test_arrows 148 s;
# test_step_identity, 2,400 frames of every game in eight configurations); and suites whose
# only run is on the CUDA driver double where test-asan.sh leaves them out (test_divergence, the
# warp-mode double; test_cuda_specialize, whose tier-up state machine test_specialize covers).
skip='test_conformance;test_pixels;test_orc_profile;test_bench;test_arrows;test_step_identity'
skip="$skip;test_divergence;test_cuda_specialize"
if [ ! -f "$build/CMakeCache.txt" ]; then
  # -O1 -g1: the usual sanitizer trade-off (readable stacks, a cheaper build than -O2 -g).
  # The suites' own code and the tools' command-line glue build at -O0 (tests/ and tools/
  # CMakeLists.txt: 2.6-2.9x faster to compile under ASan, and they are not what is tested).
  cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DGBX_SANITIZE=address,undefined "-DGBX_TESTS_SKIP=$skip"
else
  cmake "$build" "-DGBX_TESTS_SKIP=$skip" >/dev/null
fi
cmake --build "$build" -j "$(nproc)"
