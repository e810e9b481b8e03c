#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite: CTest (C++), then the Python
# package installed with pip into a venv and its pytest suite. The SM83 suite is read from
# ../shared/conformance (or -DGBX_CONFORMANCE_ARCHIVE=...); absent, that test skips.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
build=${GBX_BUILD_DIR:-$root/build}
# Tests compile kernels into a cache inside the build dir, never the user's cache.
export GBX_CACHE_DIR="$build/test-cache"

ctest_rc=0
(cd "$build" && ctest --output-on-failure -j 2 --timeout 1500) || ctest_rc=$?

# Python: a venv from the running python3, `pip install .` linking the static libraries just
# built (GBX_PREBUILT_DIR: only the nanobind module is compiled), then pytest.
venv="$build/pyvenv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q "$root[test]" \
  --config-settings=cmake.define.GBX_PREBUILT_DIR="$build" \
  --config-settings=build-dir="$build/python-wheel"
pytest_rc=0
(cd "$root/tests/python" && "$venv/bin/python" -m pytest -q -p no:cacheprovider .) || pytest_rc=$?
if [ "$pytest_rc" -eq 5 ]; then
  echo "error: pytest collected no tests in tests/python" >&2
fi

if [ "$ctest_rc" -ne 0 ] || [ "$pytest_rc" -ne 0 ]; then
  echo "error: tests failed (ctest exit $ctest_rc, pytest exit $pytest_rc)" >&2
  exit 1
fi
