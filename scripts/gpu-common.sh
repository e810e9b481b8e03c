# Sourced by scripts/check-gpu, verify-gpu and bench-gpu: one definition of "is there a GPU".
# gbx_gpu_detect (call after setting $root, $build and $run):
#   - no libcuda.so.1 for the loader: prints "skipped: no CUDA device: ..." and exits 0 before
#     building anything;
#   - builds GBX (scripts/build.sh; GBX_SKIP_BUILD=1 skips it, for tests of an existing build);
#   - `gbx-run cuda-info`: exit 0 prints the device and returns; exit 3 (no CUDA device: no
#     driver library or no device) prints "skipped: ..." and exits 0; any other exit is a
#     driver that is present but broken (cuInit failure, missing entry point, ...): prints
#     its error and exits 1, so a broken GPU machine fails instead of passing as skipped;
#   - gbx_gpu_cache_check: a kernel cache carried in $GBX_CACHE_DIR (docs/gpu.md) that will not
#     load (no cache-key, another user's, writable by others) is said before the run starts.

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
  gbx_gpu_cache_check
}

# Kernels compiled ahead elsewhere load only from this user's private cache directory, signed
# with its cache-key (docs/internals/synthesis.md); otherwise they recompile here (minutes of
# CPU on a full_step kernel). gbx-run warns too, but only once a backend is made.
gbx_gpu_cache_check() {
  local dir=${GBX_CACHE_DIR:-}
  [ -n "$dir" ] && [ -d "$dir/kernels" ] || return 0
  if [ ! -f "$dir/cache-key" ]; then
    echo "warning: $dir holds kernels but no cache-key: they will be rejected and recompiled" \
      "(carry the cache with its cache-key, docs/gpu.md)" >&2
  fi
  if [ "$(stat -L -c %u "$dir")" != "$(id -u)" ] || [ -n "$(find -L "$dir" -maxdepth 0 -perm /022)" ]; then
    echo "warning: $dir is not a private directory of this user: the kernel cache will refuse it" \
      "(docs/gpu.md)" >&2
  fi
}
