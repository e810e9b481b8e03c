#include "gbx/engine/cuda_env_copy.h"

#include <algorithm>

#include "gbx/engine/cuda_kernel_builder.h"

namespace gbx {

namespace {

// Mirrors EnvCopyParams (all 64-bit words, so the host and NVRTC agree on every offset). One
// thread per (env, word) of a region, blockIdx.y = region; the word is the widest of 8, 4, 2
// and 1 bytes that divides every address, stride and size, so the copies of the big per-env
// memory slice move 8 bytes a thread and neighbouring threads touch neighbouring words.
const char* kSource = R"(// GBX masked per-env copy kernel (gbx/engine/cuda_env_copy.h).
typedef unsigned long long gbx_u64;
struct GbxCopyRegion { gbx_u64 dst, src, bytes, dst_stride, src_stride, dst_pitch, src_pitch; };
#define GBX_COPY_MAX_REGIONS 64
struct GbxCopyParams {
  gbx_u64 mask, envs, dst_first, src_first, num_regions;
  GbxCopyRegion regions[GBX_COPY_MAX_REGIONS];
};
extern "C" __global__ void gbx_copy_envs(const GbxCopyParams p) {
  if (blockIdx.y >= p.num_regions) return;
  const GbxCopyRegion g = p.regions[blockIdx.y];
  if (g.dst_pitch | g.src_pitch) {
    // Interleaved memory: byte by byte, env fastest, so neighbouring threads write
    // neighbouring bytes of an interleaved destination.
    const gbx_u64 dp = g.dst_pitch ? g.dst_pitch : 1, sp = g.src_pitch ? g.src_pitch : 1;
    const gbx_u64 total = g.bytes * p.envs;
    const unsigned char* mask = (const unsigned char*)p.mask;
    for (gbx_u64 k = (gbx_u64)blockIdx.x * blockDim.x + threadIdx.x; k < total;
         k += (gbx_u64)gridDim.x * blockDim.x) {
      const gbx_u64 at = k / p.envs, env = k - at * p.envs;
      if (mask && !mask[env]) continue;
      unsigned char* d = (unsigned char*)(g.dst + (p.dst_first + env) * g.dst_stride + at * dp);
      *d = g.src ? *(const unsigned char*)(g.src + (p.src_first + env) * g.src_stride + at * sp) : 0;
    }
    return;
  }
  const gbx_u64 align = g.dst | g.src | g.bytes | g.dst_stride | g.src_stride;
  const gbx_u64 unit = (align & 7) == 0 ? 8 : (align & 3) == 0 ? 4 : (align & 1) == 0 ? 2 : 1;
  const gbx_u64 words = g.bytes / unit, total = words * p.envs;
  const unsigned char* mask = (const unsigned char*)p.mask;
  for (gbx_u64 k = (gbx_u64)blockIdx.x * blockDim.x + threadIdx.x; k < total;
       k += (gbx_u64)gridDim.x * blockDim.x) {
    const gbx_u64 env = k / words, at = (k - env * words) * unit;
    if (mask && !mask[env]) continue;
    unsigned char* d = (unsigned char*)(g.dst + (p.dst_first + env) * g.dst_stride + at);
    const unsigned char* s =
        g.src ? (const unsigned char*)(g.src + (p.src_first + env) * g.src_stride + at) : 0;
    if (unit == 8) *(gbx_u64*)d = s ? *(const gbx_u64*)s : 0;
    else if (unit == 4) *(unsigned*)d = s ? *(const unsigned*)s : 0;
    else if (unit == 2) *(unsigned short*)d = s ? *(const unsigned short*)s : 0;
    else *d = s ? *s : 0;
  }
}
)";

static_assert(sizeof(EnvCopyRegion) == 56 && sizeof(EnvCopyParams) == 40 + 56 * kEnvCopyMaxRegions,
              "EnvCopyParams mirrors GbxCopyParams word for word");

}  // namespace

const std::string& env_copy_kernel_source() {
  static const std::string s = kSource;
  return s;
}

EnvCopyGrid env_copy_grid(const EnvCopyParams& p) {
  EnvCopyGrid g;
  uint64_t most = 1;
  for (uint64_t i = 0; i < p.num_regions && i < (uint64_t)kEnvCopyMaxRegions; ++i)
    most = std::max<uint64_t>(most, p.regions[i].bytes * p.envs);
  // The kernel strides over what one grid row does not cover; 1024 blocks of 128 fill any GPU.
  g.grid_x = (unsigned)std::min<uint64_t>(1024, (most + g.block - 1) / g.block);
  g.grid_y = (unsigned)std::max<uint64_t>(1, p.num_regions);
  return g;
}

Result<EnvCopyKernel> build_env_copy_kernel(int sm, KernelCache& cache) {
  auto target = select_cuda_target(sm, nvrtc_supported_archs());
  if (!target) return target.take_error();
  NvrtcOptions opts;
  opts.archs = {target->arch};
  opts.line_info = false;
  std::string key_text = "gbx-env-copy/1\n" + cuda_compiler_identity(opts) + "\n";
  for (const std::string& o : cuda_key_options(opts)) key_text += o + "\n";
  for (const auto& [name, value] : nvrtc_compiler_environment())
    key_text += name + "=" + value + "\n";
  key_text += kSource;
  EnvCopyKernel k;
  k.key = sha256_hex(key_text);
  k.cubin = target->cubin;
  const std::string image_file = target->cubin ? "module." + target->arch + ".cubin" : "module.ptx";
  std::vector<std::string> warnings;
  if (auto hit = cache.lookup(k.key, &warnings)) {
    if (auto image = hit->read(image_file)) {
      k.image = std::move(*image);
      k.cached = true;
      return k;
    }
  }
  auto out = nvrtc_compile(kSource, "source.cu", opts);
  if (!out) return out.take_error();
  const NvrtcArchOutput* arch = out->find(target->arch);
  if (!arch) return make_error(ErrorKind::Runtime, "NVRTC gave no image for " + target->arch);
  // The entry's shape is that of a generated kernel's (source.cu, module images, entry
  // point), so tools that read the cache (the CUDA driver double among them) treat it alike;
  // params_type/params_bytes name its parameter block, which is not GbxParams.
  nlohmann::json meta = {
      {"kind", "gbx env copy kernel"},     {"key", k.key},
      {"entry_point", kEnvCopyEntryPoint}, {"source_file", "source.cu"},
      {"params_type", "GbxCopyParams"},    {"params_bytes", sizeof(EnvCopyParams)},
      {"nvrtc_version", nvrtc_version()},  {"archs", opts.archs},
      {"ptx_arch", out->ptx_arch}};
  const std::string image = target->cubin ? arch->cubin : out->ptx;
  cache.publish(k.key, {{"source.cu", kSource}, {image_file, image}, {"compile.log", out->log}},
                std::move(meta), &warnings);
  k.image = image;
  return k;
}

}  // namespace gbx
