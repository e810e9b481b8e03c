# Sourced by scripts/check-gpu, verify-gpu and bench-gpu: one definition of "is there a GPU".
# gbx_gpu_detect (call after setting $root, $build and $run):
#   - no libcuda.so.1 for the loader: prints "skipped: no CUDA device: ..." and exits 0 before
#     building anything;
#   - builds GBX (scripts/build.sh; GBX_SKIP_BUILD=1 skips it, for tests of an existing build);
#   - `gbx-run cuda-info`: exit 0 prints the device and returns; exit 3 (no CUDA device: no
#     driver library or no device) prints "skipped: ..." and exits 0; any other exit is a
#     driver that is present but broken (cuInit failure, missing entry point, ...): prints
#     its error and exits 1, so a broken GPU machine fails instead of passing as skipped.

gbx_have_libcuda() {
  ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 ' && return 0
  local d
  local IFS=:
  for d in ${LD_LIBRARY_PATH:-}; do [ -n "$d" ] && [ -e "$d/libcuda.so.1" ] && return 0; done
  return 1
}

gbx_gpu_detect() {
  local name=${1:-$(basename "$0")}
  if ! gbx_have_libcuda; then
    echo "skipped: no CUDA device: libcuda.so.1 not found (no NVIDIA driver installed)"
    exit 0
  fi
  if [ "${GBX_SKIP_BUILD:-0}" != 1 ]; then
    "$root/scripts/build.sh"
  fi
  local info rc
  set +e
  info=$("$run" cuda-info 2>&1)
  rc=$?
  set -e
  if [ "$rc" -eq 3 ]; then
    echo "skipped: ${info#error: }"
    exit 0
  fi
  if [ "$rc" -ne 0 ]; then
    echo "$info" >&2
    echo "$name: FAILED: the CUDA driver is present but unusable (gbx-run cuda-info exit $rc)" >&2
    exit 1
  fi
  echo "$info"
}
