#pragma once
// Host storage for the state ABI (templates/abi/gbx_abi.h): every SoA array lives in one
// block with a fixed layout, so a device mirror is one allocation and one copy.
#include <cstdint>
#include <string>
#include <vector>

#include "gbx/engine/kernel_builder.h"
#include "gbx/engine/result.h"
#include "gbx/engine/synthesis.h"
#include "gbx/runtime/backends/backend.h"
#include "gbx/runtime/roms/rom.h"
#include "gbx_abi.h"

namespace gbx {

struct StateLayout {
  int num_envs = 0;
  size_t soa_bytes = 0;     // all SoA arrays
  uint32_t mem_stride = 0;  // writable memory bytes per env
  size_t mem_bytes = 0;
  MemLayout mem_layout = MemLayout::EnvMajor;
  uint32_t mem_pitch = 0;  // interleaved: envs per byte row, padded (GBX_MEM_PITCH)
  // Kernels using seen() (SynthParams::seen_bytes): the key set's bytes per env at the end of
  // the per-env memory, from seen_offset (align64 of the machine's own memory: its size when
  // seen_bytes is 0). The "mem" save-state record is the first seen_offset bytes.
  uint32_t seen_offset = 0;
  uint32_t seen_bytes = 0;
  // Points every GbxState array into `base` (host or device address).
  void bind(GbxState& s, uint64_t base) const;
  // Where byte `off` of env's writable memory lives in the memory block (gbx_abi.h): the
  // host's one copy of the kernel's mem_at().
  size_t mem_offset(int env, uint32_t off) const {
    return mem_layout == MemLayout::Interleaved ? (size_t)off * mem_pitch + (size_t)env
                                                : (size_t)env * mem_stride + off;
  }
  // GbxParams::mem_stride for this layout.
  uint32_t kernel_mem_stride() const {
    return mem_layout == MemLayout::Interleaved ? mem_pitch : mem_stride;
  }
};

StateLayout make_layout(int num_envs, MemoryModel mm, uint32_t cart_ram_size,
                        MemLayout layout = MemLayout::EnvMajor, uint32_t seen_bytes = 0);

// Refuses env counts whose state would not fit in this machine's memory (one line naming
// the bytes needed and the bytes available).
Status check_env_count(int num_envs, MemoryModel mm, uint32_t cart_ram_size,
                       size_t extra_bytes_per_env = 0, uint32_t seen_bytes = 0);

// Bytes per env of each GbxState array, in declaration order (GbxState is only pointers), so
// a mirror can copy one env's element of every array without naming the fields.
const std::vector<size_t>& state_field_sizes();

// What the DMG boot ROM leaves in VRAM (Pan Docs "Power Up Sequence"): the logo of the
// cartridge header (0x104-0x133) expanded into tiles 1-24 (each bit doubled, each row twice),
// the (R) tile 25, and the two rows of the tile map that show them, written into `vram`
// (VRAM offsets; the bytes below kBootVramEnd). A ROM without a header leaves the logo tiles
// as they are.
constexpr uint32_t kBootVramEnd = 0x1930;
void boot_vram_image(const std::vector<uint8_t>& rom, uint8_t* vram);

class EnvState {
 public:
  EnvState() = default;
  EnvState(int num_envs, MemoryModel mm, const Rom* rom, MemLayout layout = MemLayout::EnvMajor,
           uint32_t seen_bytes = 0);
  // soa_ points into block_: a copy would point into the original.
  EnvState(const EnvState&) = delete;
  EnvState& operator=(const EnvState&) = delete;
  EnvState(EnvState&&) = default;
  EnvState& operator=(EnvState&&) = default;

  int num_envs() const { return layout_.num_envs; }
  const StateLayout& layout() const { return layout_; }
  GbxState& soa() { return soa_; }
  const GbxState& soa() const { return soa_; }
  // The whole memory block, in the layout's order (layout().mem_offset).
  uint8_t* mem() { return mem_.data(); }
  const uint8_t* mem() const { return mem_.data(); }
  // Byte `off` of env's writable memory (GBX_MEM_* offsets), in either layout.
  uint8_t& mem_at(int env, uint32_t off) { return mem_[layout_.mem_offset(env, off)]; }
  uint8_t mem_at(int env, uint32_t off) const { return mem_[layout_.mem_offset(env, off)]; }
  // n bytes of env's writable memory from offset `off`, copied out / in.
  void read_env_mem(int env, uint32_t off, uint8_t* dst, size_t n) const;
  void write_env_mem(int env, uint32_t off, const uint8_t* src, size_t n);
  std::vector<uint8_t> env_mem(int env) const;  // all layout().mem_stride bytes
  uint8_t* soa_block() { return block_.data(); }
  MemoryModel memory_model() const { return mm_; }
  const Rom* rom() const { return rom_; }

  // Env `dst` becomes a copy of env `src_env` of `src` (every state field and the per-env
  // memory); `src` must have the same memory layout per env. Other envs are untouched.
  void copy_env(int dst, const EnvState& src, int src_env);

  // env's seen() key set emptied (nothing when the layout has none): resets start episodes.
  void clear_seen(int env);

  // DMG post-boot state (Pan Docs "Power Up Sequence", as mGBA's skip-BIOS start).
  void reset_dmg();
  // All zero (memory model flat64k: the conformance runner sets every field).
  void reset_zero();

  CpuState cpu_state(int env) const;
  void set_cpu_state(int env, const CpuState& st);
  // env's bus addresses [lo, hi) into out, through the kernel's own read path (the
  // generated module's read_memory entry point): the memory view (view_read, templates/hw/
  // bus.h: no PPU lock or OAM DMA blanks it), and with `raw` cartridge RAM as held even
  // while disabled. Side-effect free.
  Status read_memory(int env, uint32_t lo, uint32_t hi, bool raw, uint8_t* out) const;
  // One byte of read_memory's memory view (0xFF if no reader can be built).
  uint8_t peek(int env, uint32_t addr) const;
  // The reader read_memory uses: a backend's own kernel; without one, a shared CPU kernel
  // for this memory model is built (or found in the cache) on first use.
  void set_memory_reader(CpuReadMemoryFn fn) { reader_ = fn; }
  // The kernel arguments that describe this state (outputs and step sizes left zero).
  GbxParams kernel_params();

  // Battery-backed cartridge contents: set_battery copies them into every env now and at
  // every reset_dmg; battery(env) reads env's.
  void set_battery(const BatterySave& save);
  BatterySave battery(int env) const;
  std::string serial(int env) const;
  // env's front framebuffer (the last complete frame), unpacked: 160x144 shades, row-major.
  std::vector<uint8_t> screen(int env) const;

 private:
  void write_boot_vram(int env);
  void apply_battery(int env);

  StateLayout layout_;
  MemoryModel mm_ = MemoryModel::Dmg;
  const Rom* rom_ = nullptr;
  std::vector<uint8_t> block_;
  std::vector<uint8_t> mem_;
  GbxState soa_{};
  CpuReadMemoryFn reader_ = nullptr;
  BatterySave battery_;
  bool has_battery_ = false;
};

}  // namespace gbx
