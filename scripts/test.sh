#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite (CTest) and the Python package's pytest suite; then what a user
# without a CUDA toolkit gets, NVRTC from PyPI's wheel, and an ASan/UBSan build of the suite.
# The SM83 suite is read from ../shared/conformance (or -DGBX_CONFORMANCE_ARCHIVE=...);
# absent, that test skips. Two C++ builds in all: build/ and build-asan/.
#   GBX_TEST_REQUIRE_SHARED=1  the suites under ../shared (test ROMs, the SM83 suite, games) are
#                            required (.ci/run sets it): ../shared's three folders must exist,
#                            and a test that would skip for a missing file there fails instead
#                            (C++: tests/skip.h; Python: tests/python/conftest.py)
#   GBX_TEST_ASAN=0          skip the sanitizer build and suite (scripts/build-asan.sh,
#                            scripts/test-asan.sh, which says what it leaves out for time)
#   GBX_TEST_NVRTC_WHEEL=0   skip the NVRTC-wheel job (no network)
#   GBX_TEST_PYBOY=1         also install PyBoy 2.8.1 (~250 MB) and run gbx.pyboy_compat's live
#                            comparison with it (otherwise those tests skip)
#   GBX_TEST_TRAINERS=1      also install torch (the CUDA build, ~3 GB), stable-baselines3 and
#                            pufferlib-core, and run tests/python/test_adapters.py with them
#                            (otherwise those tests skip)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
# 0. Formatting and lint first: seconds, and a failure here needs no build to read.
echo "== test: lint (clang-format, ruff)"
"$root/scripts/lint.sh"
"$root/scripts/build.sh"
build=${GBX_BUILD_DIR:-$root/build}
# Every suite below (ctest, pytest, the ASan run) reads the switch from the environment.
if [ "${GBX_TEST_REQUIRE_SHARED:-0}" = 1 ]; then
  export GBX_TEST_REQUIRE_SHARED=1
  for d in testroms conformance games; do
    if [ ! -d "$root/../shared/$d" ]; then
      echo "test: GBX_TEST_REQUIRE_SHARED=1 but $(cd "$root/.." && pwd)/shared/$d is missing" >&2
      exit 1
    fi
  done
fi
# Tests compile kernels into a cache inside the build dir, never the user's cache.
export GBX_CACHE_DIR="$build/test-cache"
without_toolkit="$root/scripts/without-cuda-toolkit"
step() { echo "== test: $* ($(date -u +%H:%M:%S), ${SECONDS}s)"; }
# Every skipped test case of the last ctest run, with its reason (tests/skip.h), and a count:
# passing suites' output is not shown by --output-on-failure, so their skips would go unseen.
skip_summary() {
  local log="$build/Testing/Temporary/LastTest.log" lines
  lines=$(grep -h '^\[skipped\]' "$log" 2>/dev/null | sort | uniq -c || true)
  echo "skipped test cases in this ctest run: $(grep -c '^\[skipped\]' "$log" 2>/dev/null || true)"
  [ -z "$lines" ] || echo "$lines"
}

# 1. No CUDA toolkit at build time: no binary links libcuda or libnvrtc (both are dlopen()ed),
#    and the configure never looked for a toolkit.
step "binaries link neither libcuda nor libnvrtc"
for exe in "$build"/tools/gbx-run "$build"/tools/gbx-synth "$build"/tests/test_*; do
  [ -x "$exe" ] && [ -f "$exe" ] || continue
  if ldd "$exe" | grep -E 'libcuda\.|libnvrtc'; then
    echo "test: $exe links a CUDA library" >&2
    exit 1
  fi
done
if grep -q '^CUDAToolkit' "$build/CMakeCache.txt"; then
  echo "test: the configure looked for a CUDA toolkit" >&2
  exit 1
fi

# 2. The whole suite as on a machine without the toolkit (hidden by a private mount where
#    allowed): CPU tests pass, NVRTC-compile cases skip saying "CUDA unavailable".
step "suite without the CUDA toolkit"
# The suites on the CUDA driver double compile kernels with NVRTC: they run in step 3.
(cd "$build" && "$without_toolkit" ctest --output-on-failure -j 2 --timeout 1500 \
  -E '^test_(cuda_(backend_on_double(_roms)?|double|specialize_on_double)|step_identity_on_double|state_fuzz_on_double|divergence)$')
skip_summary
step "demo without the CUDA toolkit"
"$without_toolkit" "$root/scripts/demo.sh" >/dev/null

# 3. NVRTC: from PyPI's nvidia-cuda-nvrtc wheel in a venv, toolkit hidden: the NVRTC suites
#    and `gbx-synth compile --stage all --device cuda`. Without the wheel job, the NVRTC
#    suites run with whatever NVRTC this machine has (they skip if none).
nvrtc_tests='^test_(nvrtc|cuda_compile|user_expr)$'
if [ "${GBX_TEST_NVRTC_WHEEL:-1}" != 0 ]; then
  step "NVRTC from the nvidia-cuda-nvrtc wheel"
  venv="$build/nvrtc-venv"
  nvrtc_venv=$venv
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  # A pinned release, so that CI tests GBX and not whatever NVRTC PyPI has that day: ptxas
  # output (registers, spills, the bounds test_cuda_compile holds the kernels to) may change
  # between releases. 13.4.92 is the one the whole NVRTC step last passed with (2026-12-07);
  # 13.5.37 passes the pixel FIFO case too (alone: 8 / 32 B of spill code with either).
  # GBX_TEST_NVRTC_WHEEL_VERSION=X.Y.Z for another.
  wheel_version=${GBX_TEST_NVRTC_WHEEL_VERSION:-13.4.92}
  "$venv/bin/python" -c "import importlib.metadata as m, sys; \
sys.exit(m.version('nvidia-cuda-nvrtc') != '$wheel_version')" 2>/dev/null ||
    "$venv/bin/pip" install -q "nvidia-cuda-nvrtc==$wheel_version"
  wheel_cache=$(mktemp -d)
  trap 'rm -rf "$wheel_cache"' EXIT
  (cd "$build" && VIRTUAL_ENV="$venv" GBX_CACHE_DIR="$wheel_cache/suite" "$without_toolkit" \
    ctest --output-on-failure -j 2 -R "$nvrtc_tests" --timeout 1500)
  skip_summary
  # Must compile, not skip: the wheel is there. The CLI's path to it, on quick compiles
  # (test_cuda_compile above compiled every stage -O3 with the same wheel).
  out=$(VIRTUAL_ENV="$venv" GBX_CACHE_DIR="$wheel_cache/synth" GBX_CUDA_FAST_COMPILE=1 \
    "$without_toolkit" "$build/tools/gbx-synth" compile --stage all --device cuda)
  echo "$out"
  grep -q ' compiled ' <<<"$out" && ! grep -q ' cached ' <<<"$out"
else
  step "NVRTC suites with this machine's NVRTC"
  (cd "$build" && ctest --output-on-failure -R "$nvrtc_tests" --timeout 1500)
fi

# The cuda backend's host code, end to end on the CUDA driver double (tests/cuda_double): it
# compiles kernels with NVRTC, the toolkit's where there is one, else the wheel's.
step "suites on the CUDA driver double"
# The double runs kernels on one thread: -j 2 runs its three entries side by side.
(cd "$build" && VIRTUAL_ENV="${venv:-}" ctest --output-on-failure -j 2 --timeout 1500 \
  -R '^test_(cuda_(backend_on_double(_roms)?|double|specialize_on_double)|step_identity_on_double|state_fuzz_on_double|divergence)$')
skip_summary

# 4. Python: a venv from the running python3, `pip install .` linking the static libraries just
#    built (GBX_PREBUILT_DIR: only the nanobind module is compiled), then pytest, one worker per
#    core (pytest-xdist; GBX_PYTEST_WORKERS=N to choose). The kernel cache is safe to share
#    between processes (each entry is written aside and renamed into place).
step "Python package and pytest"
venv="$build/pyvenv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
extras=test
[ "${GBX_TEST_PYBOY:-0}" = 1 ] && extras=test,pyboy
[ "${GBX_TEST_TRAINERS:-0}" = 1 ] && extras="$extras,trainers"
"$venv/bin/python" -m pip install -q "$root[$extras]" \
  --config-settings=cmake.define.GBX_PREBUILT_DIR="$build" \
  --config-settings=build-dir="$build/python-wheel"
# The tests on the CUDA driver double must run here, not skip: the double was just built and
# NVRTC is the wheel's (or this machine's). -rs prints every skip's reason.
nvrtc_lib=$(ls "${nvrtc_venv:-/nonexistent}"/lib/python3*/site-packages/nvidia/{cu13,cuda_nvrtc}/lib/libnvrtc.so.1[23] \
  2>/dev/null | head -n 1 || true)
pytest_rc=0
(cd "$root/tests/python" && env GBX_TEST_REQUIRE_CUDA_DOUBLE=1 \
  ${nvrtc_lib:+"GBX_NVRTC_LIBRARY=$nvrtc_lib"} \
  GBX_TEST_REQUIRE_MGBA=1 "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider \
  -n "${GBX_PYTEST_WORKERS:-auto}" --dist worksteal .) || pytest_rc=$?
if [ "$pytest_rc" -eq 5 ]; then
  echo "error: pytest collected no tests in tests/python" >&2
  exit 1
fi
[ "$pytest_rc" -eq 0 ] || exit 1

# 5. The docs site, strict (broken links, pages missing from the nav, public names without a
#    docstring), README.md's length, links and suite counts (scripts/docs.sh).
step "docs site"
"$root/scripts/docs.sh" >/dev/null

# 6. ASan/UBSan build of the suite (GBX's own code; JIT-compiled kernels are instrumented only
#    in the crafted-state suites, GBX_JIT_CHECKS):
#    the second C++ build; what it runs and leaves out is in scripts/test-asan.sh.
if [ "${GBX_TEST_ASAN:-1}" != 0 ]; then
  step "ASan/UBSan build"
  "$root/scripts/build-asan.sh"
  step "ASan/UBSan suite"
  # The double's suites find the kernels the normal run compiled (same NVRTC as step 3).
  VIRTUAL_ENV="${nvrtc_venv:-}" GBX_ASAN_KERNEL_CACHE="$build/test-cache" \
    "$root/scripts/test-asan.sh"
fi
step "all passed"
