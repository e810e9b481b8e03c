#include "gbx/runtime/states/env_state.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "gbx/runtime/states/memory_reader.h"
#include "gbx/runtime/states/state_fields.h"

namespace gbx {
namespace {

#define GBX_COUNT_FIELD(name, size) +1
static_assert(sizeof(GbxState) == (0 GBX_STATE_FIELDS(GBX_COUNT_FIELD)) * sizeof(void*),
              "GBX_STATE_FIELDS must list every GbxState array");

size_t align64(size_t v) { return (v + 63) & ~size_t(63); }

// DMG I/O registers after the boot ROM (Pan Docs "Power Up Sequence", as mGBA reads them:
// unused bits read 1, wave RAM holds the DMG power-on pattern); 0xFF = unmapped.
constexpr uint8_t kIoReset[0x80] = {
    0xCF, 0x00, 0x7E, 0xFF, 0xAB, 0x00, 0x00, 0xF8, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xE1,
    0x80, 0xBF, 0xF3, 0xFF, 0xBF, 0xFF, 0x3F, 0x00, 0xFF, 0xBF, 0x7F, 0xFF, 0x9F, 0xFF, 0xBF, 0xFF,
    0xFF, 0x00, 0x00, 0xBF, 0x77, 0xF3, 0xF1, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
    0x00, 0xFF, 0x00, 0xFF, 0x00, 0xFF, 0x00, 0xFF, 0x00, 0xFF, 0x00, 0xFF, 0x00, 0xFF, 0x00, 0xFF,
    0x91, 0x85, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFC, 0xFF, 0xFF, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF,
    0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
    0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
    0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
};
// The 16-bit system counter right after the boot ROM (DIV reads its high byte, 0xAB), as a
// DMG ABC / MGB leaves it: mooneye boot_div-dmgABCmgb (verified on those models) reads DIV
// just after it turns 0xAC at its 14th M-cycle from 0x0100, which puts the counter in
// 0xABCB-0xABCE; boot_sclk_align-dmgABCmgb (the serial clock divided from this counter)
// narrows it to 0xABCC-0xABCE; 0xABCC is also Gambatte's. mGBA's skip-BIOS state has 0xABC0;
// hardware wins (docs/machine/accuracy.md).
constexpr int64_t kDivCounterAtReset = 0xABCC;
// Where the PPU is in its frame (dots since line 0, dot 0) right after the boot ROM: 60 dots
// before line 0 starts. gbmicrotest's poweron_* ROMs (aappleby/gbmicrotest, verified on a
// DMG-CPU-08) read STAT, LY, OAM and VRAM at every M-cycle from 0x0150: STAT shows line 153's
// mode 1 for the first 6 M-cycles of delay, line 0's OAM scan from the 7th, mode 3 from the
// 27th; with this model's read point (1 dot into the M-cycle) and line-turn rule (ppu.h) that
// is 60 dots. mGBA's skip-BIOS state hands over 56 dots before line 0 (one M-cycle later in
// the frame); hardware wins (docs/machine/accuracy.md).
constexpr int64_t kPpuDotsAtReset = 70224 - 60;

}  // namespace

void boot_vram_image(const std::vector<uint8_t>& rom, uint8_t* vram) {
  if (rom.size() >= 0x134) {
    uint32_t addr = 0x0010;
    for (uint32_t i = 0; i < 48; ++i) {
      const uint8_t b = rom[0x104 + i];
      for (int nib : {b >> 4, b & 0xF}) {
        uint8_t v = 0;
        for (int bit = 0; bit < 4; ++bit)
          if (nib & (1 << bit)) v |= (uint8_t)(3 << (2 * bit));
        vram[addr] = v;
        vram[addr + 2] = v;
        addr += 4;
      }
    }
  }
  const uint8_t registered[8] = {0x3C, 0x42, 0xB9, 0xA5, 0xB9, 0xA5, 0x42, 0x3C};
  for (int i = 0; i < 8; ++i) vram[0x0190 + 2 * i] = registered[i];
  for (int i = 0; i < 12; ++i) {
    vram[0x1904 + i] = (uint8_t)(1 + i);
    vram[0x1924 + i] = (uint8_t)(13 + i);
  }
  vram[0x1910] = 0x19;
}

// Only the ranges boot_vram_image writes: the rest of VRAM is already zero after reset_zero.
void EnvState::write_boot_vram(int env) {
  uint8_t image[kBootVramEnd] = {};
  boot_vram_image(rom_ ? rom_->bytes : std::vector<uint8_t>{}, image);
  write_env_mem(env, GBX_MEM_VRAM + 0x0010, image + 0x0010, 0x01A0 - 0x0010);
  write_env_mem(env, GBX_MEM_VRAM + 0x1904, image + 0x1904, kBootVramEnd - 0x1904);
}

namespace {

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (b >= 1024 && u < 5) b /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", b, units[u]);
  return buf;
}

}  // namespace

StateLayout make_layout(int num_envs, MemoryModel mm, uint32_t cart_ram_size, MemLayout layout,
                        uint32_t seen_bytes) {
  StateLayout l;
  l.num_envs = num_envs;
  size_t off = 0;
#define GBX_ADD_FIELD(name, size) off = align64(off + (size_t)(size) * (size_t)num_envs);
  GBX_STATE_FIELDS(GBX_ADD_FIELD)
#undef GBX_ADD_FIELD
  l.soa_bytes = off;
  l.seen_offset = mm == MemoryModel::Flat64k
                      ? GBX_MEM_FLAT_SIZE
                      : (uint32_t)align64(GBX_MEM_FIXED_SIZE + cart_ram_size);
  l.seen_bytes = seen_bytes;
  l.mem_stride = seen_bytes ? (uint32_t)align64((size_t)l.seen_offset + seen_bytes) : l.seen_offset;
  l.mem_layout = layout;
  if (layout == MemLayout::Interleaved) {
    l.mem_pitch = GBX_MEM_PITCH(num_envs);
    l.mem_bytes = (size_t)l.mem_stride * (size_t)l.mem_pitch;
  } else {
    l.mem_bytes = (size_t)l.mem_stride * (size_t)num_envs;
  }
  return l;
}

void StateLayout::bind(GbxState& s, uint64_t base) const {
  size_t off = 0;
#define GBX_BIND_FIELD(name, size)                         \
  s.name = reinterpret_cast<decltype(s.name)>(base + off); \
  off = align64(off + (size_t)(size) * (size_t)num_envs);
  GBX_STATE_FIELDS(GBX_BIND_FIELD)
#undef GBX_BIND_FIELD
}

Status check_env_count(int num_envs, MemoryModel mm, uint32_t cart_ram_size,
                       size_t extra_bytes_per_env, uint32_t seen_bytes) {
  if (num_envs < 1)
    return make_error(ErrorKind::Usage,
                      "--envs must be at least 1 (got " + std::to_string(num_envs) + ")");
  // Layout arithmetic for one env times the count, so huge counts cannot overflow.
  const StateLayout one = make_layout(1, mm, cart_ram_size, MemLayout::EnvMajor, seen_bytes);
  const double need =
      (double)(one.soa_bytes + one.mem_bytes + extra_bytes_per_env) * (double)num_envs;
  double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGE_SIZE);
  std::string where = "this machine has " + human_bytes(have) + " of memory";
  // A process limit below that (ulimit -v, -d) is where an allocation fails first
  // (std::bad_alloc), so the env state is checked against it.
  for (const int limit : {RLIMIT_AS, RLIMIT_DATA}) {
    rlimit rl{};
    if (getrlimit(limit, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (double)rl.rlim_cur < have) {
      have = (double)rl.rlim_cur;
      where = "this process may allocate " + human_bytes(have) + " (ulimit -v / -d)";
    }
  }
  if (need > 0.8 * have)
    return make_error(ErrorKind::Usage, "--envs " + std::to_string(num_envs) + " needs " +
                                            human_bytes(need) + " of env state; " + where);
  return ok_status();
}

EnvState::EnvState(int num_envs, MemoryModel mm, const Rom* rom, MemLayout layout,
                   uint32_t seen_bytes)
    : layout_(make_layout(num_envs, mm, rom ? rom->header.ram_size : 0, layout, seen_bytes)),
      mm_(mm),
      rom_(rom) {
  block_.assign(layout_.soa_bytes, 0);
  mem_.assign(layout_.mem_bytes, 0);
  layout_.bind(soa_, reinterpret_cast<uint64_t>(block_.data()));
}

void EnvState::set_battery(const BatterySave& save) {
  battery_ = save;
  has_battery_ = true;
  for (int i = 0; i < num_envs(); ++i) apply_battery(i);
}

void EnvState::apply_battery(int env) {
  if (!has_battery_ || mm_ != MemoryModel::Dmg) return;
  const size_t n = std::min<size_t>(battery_.ram.size(), rom_ ? rom_->header.ram_size : 0);
  write_env_mem(env, GBX_MEM_CART_RAM, battery_.ram.data(), n);
  // The clock registers hold only their bits (S, M: 6; H: 5; DL: 8; DH: 0xC1; Pan Docs
  // "MBC3"): a save file's wider values land as the registers would keep them, which is also
  // what a save state's check demands (state_rules.cpp).
  static const uint8_t bits[5] = {0x3F, 0x3F, 0x1F, 0xFF, 0xC1};
  uint8_t* rtc = soa_.rtc_regs + (size_t)env * GBX_RTC_BYTES;
  for (int i = 0; i < 5; ++i) {
    rtc[i] = (uint8_t)(battery_.rtc_live[i] & bits[i]);
    rtc[5 + i] = (uint8_t)(battery_.rtc_latched[i] & bits[i]);
  }
  soa_.rtc_second_start[env] = soa_.cycle_count[env];  // a loaded clock starts a new second
}

BatterySave EnvState::battery(int env) const {
  BatterySave b;
  const uint32_t n = rom_ ? rom_->header.ram_size : 0;
  b.ram.resize(n);
  read_env_mem(env, GBX_MEM_CART_RAM, b.ram.data(), n);
  b.has_rtc = rom_ && rom_->header.has_rtc;
  std::memcpy(b.rtc_live, soa_.rtc_regs + (size_t)env * GBX_RTC_BYTES, 5);
  std::memcpy(b.rtc_latched, soa_.rtc_regs + (size_t)env * GBX_RTC_BYTES + 5, 5);
  return b;
}

void EnvState::clear_seen(int env) {
  if (!layout_.seen_bytes) return;
  if (layout_.mem_layout == MemLayout::EnvMajor) {
    std::memset(mem_.data() + layout_.mem_offset(env, layout_.seen_offset), 0,
                layout_.mem_stride - layout_.seen_offset);
    return;
  }
  for (uint32_t i = layout_.seen_offset; i < layout_.mem_stride; ++i) mem_at(env, i) = 0;
}

void EnvState::reset_zero() {
  std::memset(block_.data(), 0, block_.size());
  std::memset(mem_.data(), 0, mem_.size());
}

void EnvState::reset_dmg() {
  reset_zero();
  for (int i = 0; i < num_envs(); ++i) {
    CpuState st;
    st.pc = 0x0100;
    st.sp = 0xFFFE;
    st.a = 0x01;
    st.f = 0xB0;
    st.b = 0x00;
    st.c = 0x13;
    st.d = 0x00;
    st.e = 0xD8;
    st.h = 0x01;
    st.l = 0x4D;
    set_cpu_state(i, st);
    soa_.cycle_count[i] = 0;
    soa_.div_epoch[i] = -kDivCounterAtReset;
    soa_.timer_synced[i] = 0;
    soa_.ppu_epoch[i] = -kPpuDotsAtReset;
    soa_.serial_event[i] = INT64_MAX;
    soa_.mbc_rom_bank[i] = 1;
    apply_battery(i);
    write_env_mem(i, GBX_MEM_IO, kIoReset, sizeof kIoReset);
    mem_at(i, GBX_MEM_IO + 0xFF) = 0x00;  // IE
    write_boot_vram(i);
  }
}

void EnvState::copy_env(int dst, const EnvState& src, int src_env) {
#define GBX_COPY_FIELD(name, size)                                                                \
  std::memcpy(reinterpret_cast<uint8_t*>(soa_.name) + (size_t)dst * (size_t)(size),               \
              reinterpret_cast<const uint8_t*>(src.soa_.name) + (size_t)src_env * (size_t)(size), \
              (size_t)(size));
  GBX_STATE_FIELDS(GBX_COPY_FIELD)
#undef GBX_COPY_FIELD
  if (layout_.mem_layout == MemLayout::EnvMajor && src.layout_.mem_layout == MemLayout::EnvMajor) {
    std::memcpy(mem_.data() + layout_.mem_offset(dst, 0),
                src.mem_.data() + src.layout_.mem_offset(src_env, 0), layout_.mem_stride);
    return;
  }
  for (uint32_t i = 0; i < layout_.mem_stride; ++i) mem_at(dst, i) = src.mem_at(src_env, i);
}

void EnvState::read_env_mem(int env, uint32_t off, uint8_t* dst, size_t n) const {
  if (layout_.mem_layout == MemLayout::EnvMajor) {
    std::memcpy(dst, mem_.data() + layout_.mem_offset(env, off), n);
    return;
  }
  for (size_t i = 0; i < n; ++i) dst[i] = mem_at(env, off + (uint32_t)i);
}

void EnvState::write_env_mem(int env, uint32_t off, const uint8_t* src, size_t n) {
  if (layout_.mem_layout == MemLayout::EnvMajor) {
    std::memcpy(mem_.data() + layout_.mem_offset(env, off), src, n);
    return;
  }
  for (size_t i = 0; i < n; ++i) mem_at(env, off + (uint32_t)i) = src[i];
}

std::vector<uint8_t> EnvState::env_mem(int env) const {
  std::vector<uint8_t> out(layout_.mem_stride);
  read_env_mem(env, 0, out.data(), out.size());
  return out;
}

CpuState EnvState::cpu_state(int env) const {
  CpuState st;
  st.pc = soa_.pc[env];
  st.sp = soa_.sp[env];
  st.a = soa_.a[env];
  st.f = soa_.f[env];
  st.b = soa_.b[env];
  st.c = soa_.c[env];
  st.d = soa_.d[env];
  st.e = soa_.e[env];
  st.h = soa_.h[env];
  st.l = soa_.l[env];
  st.ime = soa_.ime[env];
  st.run_state = soa_.run_state[env];
  st.cycle_count = soa_.cycle_count[env];
  st.instr_count = soa_.instr_count[env];
  st.trap_kind = soa_.trap_kind[env];
  st.trap_pc = soa_.trap_pc[env];
  st.trap_opcode = soa_.trap_opcode[env];
  return st;
}

void EnvState::set_cpu_state(int env, const CpuState& st) {
  soa_.pc[env] = st.pc;
  soa_.sp[env] = st.sp;
  soa_.a[env] = st.a;
  soa_.f[env] = st.f;
  soa_.b[env] = st.b;
  soa_.c[env] = st.c;
  soa_.d[env] = st.d;
  soa_.e[env] = st.e;
  soa_.h[env] = st.h;
  soa_.l[env] = st.l;
  soa_.ime[env] = st.ime;
  soa_.run_state[env] = st.run_state;
}

GbxParams EnvState::kernel_params() {
  GbxParams p{};
  p.s = soa_;
  p.rom = rom_ && !rom_->bytes.empty() ? rom_->bytes.data() : nullptr;
  p.rom_size = rom_ ? (unsigned)rom_->bytes.size() : 0;
  p.mbc = rom_ ? (unsigned)rom_->header.mbc : 0;
  p.mem = mem_.data();
  p.mem_stride = layout_.kernel_mem_stride();
  p.cart_ram_size = rom_ ? rom_->header.ram_size : 0;
  p.num_envs = num_envs();
  return p;
}

Status EnvState::read_memory(int env, uint32_t lo, uint32_t hi, bool raw, uint8_t* out) const {
  if (env < 0 || env >= num_envs())
    return make_error(ErrorKind::Usage, "env " + std::to_string(env) + " out of range");
  if (lo >= hi || hi > 0x10000)
    return make_error(ErrorKind::Usage, "memory range must satisfy lo < hi <= 0x10000");
  CpuReadMemoryFn fn = reader_;
  if (!fn) {
    auto shared = shared_memory_reader(mm_, layout_.mem_layout);
    if (!shared) return shared.take_error();
    fn = shared.value();
  }
  // The kernel only reads through these pointers (the read entry point is side-effect free).
  const GbxParams p = const_cast<EnvState*>(this)->kernel_params();
  fn(&p, env, lo, hi, raw ? 1u : 0u, out);
  return ok_status();
}

uint8_t EnvState::peek(int env, uint32_t addr) const {
  uint8_t v = 0xFF;
  addr &= 0xFFFF;
  (void)read_memory(env, addr, addr + 1, false, &v);
  return v;
}

std::string EnvState::serial(int env) const {
  const uint32_t n = std::min<uint32_t>(soa_.serial_len[env], GBX_SERIAL_CAPACITY);
  const auto* p = soa_.serial_buf + (size_t)env * GBX_SERIAL_CAPACITY;
  return std::string(reinterpret_cast<const char*>(p), n);
}

const std::vector<size_t>& state_field_sizes() {
  static const std::vector<size_t> sizes = {
#define GBX_FIELD_SIZE(name, size) (size_t)(size),
      GBX_STATE_FIELDS(GBX_FIELD_SIZE)
#undef GBX_FIELD_SIZE
  };
  return sizes;
}

std::vector<uint8_t> EnvState::screen(int env) const {
  const int front = soa_.lcd_flags[env] & 1;  // GBX_LCD_FLAG_FRONT (templates/hw/lcd.h)
  const uint8_t* fb = soa_.lcd_fb + ((size_t)env * 2 + (size_t)front) * GBX_FRAMEBUFFER_BYTES;
  std::vector<uint8_t> out((size_t)GBX_SCREEN_W * GBX_SCREEN_H);
  for (size_t i = 0; i < out.size(); ++i) out[i] = (uint8_t)((fb[i / 4] >> (6 - 2 * (i % 4))) & 3);
  return out;
}

}  // namespace gbx
