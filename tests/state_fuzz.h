#pragma once
// Crafted save states for the fuzz tests (tests/test_state_fuzz.cpp on the cpu backend,
// tests/test_cuda_backend/state_fuzz.cpp on the cuda backend and its driver double): seeds,
// structured and random cases, and the run that loads each into env 1 beside the seed in env 0.
// What each checks: test_state_fuzz.cpp's head comment.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "gbx/runtime/states/save_state.h"
#include "gbx_abi.h"
#include "test_reference_util.h"

namespace state_fuzz {

using namespace gbx;
using namespace gbx::test;

constexpr int kFrames = 2;  // frames each crafted state runs

struct Seed {
  std::string label;
  Rom rom;
  std::vector<uint8_t> blob;
};

struct Counts {
  int tried = 0, refused = 0, ran = 0, crashed = 0;
};

// The case in progress, for the line a crash prints (a fixed buffer: the handler only writes).
inline char g_case[256] = "none";
inline void on_crash(int sig);
// Prints the case in progress on a crash (ASan's own report does that under ASan).
inline void report_crashes() {
#if !defined(__SANITIZE_ADDRESS__)
  std::signal(SIGSEGV, on_crash);
  std::signal(SIGBUS, on_crash);
  std::signal(SIGILL, on_crash);  // a kernel's bounds check (GBX_JIT_CHECKS=bounds) traps
#endif
}
inline void on_crash(int sig) {
  const char head[] = "test_state_fuzz: crashed in case ";
  (void)!write(2, head, sizeof head - 1);
  (void)!write(2, g_case, strlen(g_case));
  (void)!write(2, "\n", 1);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

inline std::vector<SaveStateRecord> records(const Seed& s) {
  auto parsed = read_save_state(s.blob, s.rom, MemoryModel::Dmg, SaveStateKind::Kernel);
  REQUIRE_MESSAGE(parsed.ok(), (parsed ? "" : parsed.error().message));
  return parsed->records;
}

inline SaveStateRecord& rec(std::vector<SaveStateRecord>& recs, const std::string& name) {
  for (SaveStateRecord& r : recs)
    if (r.name == name) return r;
  FAIL("no record ", name);
  return recs.front();
}

inline void put(SaveStateRecord& r, size_t off, uint64_t v, size_t width) {
  for (size_t k = 0; k < width && off + k < r.bytes.size(); ++k)
    r.bytes[off + k] = (uint8_t)(v >> (8 * k));
}

inline int64_t get64(std::vector<SaveStateRecord>& recs, const std::string& name) {
  int64_t v = 0;
  std::memcpy(&v, rec(recs, name).bytes.data(), 8);
  return v;
}

struct Crafted {
  std::string label;
  std::vector<uint8_t> blob;
  std::string refused_by;  // non-empty: the load must be refused, naming a field that starts so
};

// Element widths of the fields the structured cases write (the rest: bytes).
inline size_t width_of(const std::string& name, size_t size) {
  if (size == 2 || size == 4 || size == 8) return size;
  if (name == "apu_length") return 2;
  if (name == "user_prev") return 4;
  return 1;
}

// An LcdFifo (templates/hw/ppu_fifo.h) made active: offset -> value, or every byte 0xFF.
struct Odd {
  const char* what;
  std::vector<std::pair<int, int>> bytes;
  bool all_ff = false;
};
constexpr int kFifoLine = 40;

inline const std::vector<Odd>& odd_fifos() {
  static const std::vector<Odd> t = {
      {"x 0 shifted", {{6, 8}, {16, 0}, {18, 0x08}}},
      {"obj_next 0 fetching", {{6, 8}, {19, 0}, {18, 0x10}, {20, 3}}},
      {"obj_next 200 fetching", {{6, 8}, {19, 200}, {18, 0x10}, {20, 3}}},
      {"obj_next 10 fetching early", {{6, 8}, {19, 10}, {18, 0x50}, {20, 0}}},
      {"x 159 shifted", {{6, 8}, {16, 159}, {18, 0x08}}},
      {"x 255", {{16, 255}}},
      {"dot 65535", {{2, 0xFF}, {3, 0xFF}}},
      {"dot 300 x 1", {{2, 44}, {3, 1}, {16, 1}}},
      {"bg_n 255 discard 255", {{6, 255}, {17, 255}}},
      {"everything 0xFF", {}, true},
      {"stall 13 at dot 0", {{20, 13}}},
      {"window fetching fx 31", {{18, 0x03}, {12, 31}, {11, 6}}},
  };
  return t;
}

// `base` with ppu_epoch moved so the PPU is 100 dots into line kFifoLine at cycle_count, the
// LCD on, and lcd_fifo active on that line with `o`'s bytes.
inline std::vector<SaveStateRecord> fifo_on_line(std::vector<SaveStateRecord> r, const Odd& o) {
  const int64_t c = get64(r, "cycle_count");
  put(rec(r, "ppu_epoch"), 0, (uint64_t)(c - (kFifoLine * 456 + 100)), 8);
  rec(r, "mem").bytes[GBX_MEM_IO + 0x40] |= 0x80;
  SaveStateRecord& f = rec(r, "lcd_fifo");
  std::fill(f.bytes.begin(), f.bytes.end(), o.all_ff ? 0xFF : 0);
  for (auto [at, v] : o.bytes) f.bytes[(size_t)at] = (uint8_t)v;
  f.bytes[0] = 1;
  f.bytes[1] = (uint8_t)kFifoLine;
  return r;
}

// Each field at 0, 1, its maximum, 0x80.. and 0x7F.. (element 0, the last element, and
// every element of the small arrays), and the probe's values (docs/guide/states.md).
inline std::vector<Crafted> structured(const Seed& s) {
  std::vector<Crafted> out;
  auto add = [&](const std::string& label, const std::vector<SaveStateRecord>& recs) {
    out.push_back({s.label + ": " + label,
                   write_save_state(s.rom, MemoryModel::Dmg, SaveStateKind::Kernel, recs), ""});
  };
  auto base = records(s);
  for (const SaveStateRecord& field : base) {
    const size_t w = width_of(field.name, field.bytes.size());
    const size_t n = field.bytes.size() / w;
    std::vector<size_t> elems = {0, n - 1};
    if (n <= 32)
      for (size_t i = 1; i + 1 < n; ++i) elems.push_back(i);
    const uint64_t top = w == 8 ? ~0ull : (1ull << (8 * w)) - 1;
    const uint64_t vals[] = {0, 1, 2, top, top - 1, top >> 1, (top >> 1) + 1, 0x55, 0xAA};
    for (size_t e : elems)
      for (uint64_t v : vals) {
        auto recs = base;
        put(rec(recs, field.name), e * w, v, w);
        add(field.name + "[" + std::to_string(e) + "]=" + std::to_string(v), recs);
      }
  }
  // The pixel FIFO active on the line the PPU is on, with odd fields (the probe:
  // x 0 with the shift flag, obj_next 0 and 200 with an object fetch, and more). Steps end on
  // the CPU's frame grid, often in VBlank: ppu_epoch moves so that the PPU is 100 dots into
  // line 40 (a visible line, mode 3), and the record then claims line 40 (the renderer resumes
  // it: runs when its fields are in range). Active on another line than LY (41, 0, 143) or
  // with the LCD off, it is a record no kernel leaves: refused, naming lcd_fifo.line/.active
  // (or a field of the odd record, whose rule comes first).
  for (const Odd& o : odd_fifos()) {
    for (int line : {kFifoLine, kFifoLine + 1, 0, 143}) {
      auto r = fifo_on_line(base, o);
      rec(r, "lcd_fifo").bytes[1] = (uint8_t)line;
      add(std::string("lcd_fifo active on line ") + std::to_string(line) + ", " + o.what, r);
      if (line != kFifoLine) out.back().refused_by = "lcd_fifo.";  // .line, or an odd field
    }
    auto off = fifo_on_line(base, o);
    rec(off, "mem").bytes[GBX_MEM_IO + 0x40] &= 0x7F;
    add(std::string("lcd_fifo active on line 40 with the LCD off, ") + o.what, off);
    out.back().refused_by = "lcd_fifo.";  // .active, or an odd field
  }
  // Every LcdFifo byte at values around its rules' edges, the FIFO active on the PPU's line.
  const Odd plain = {"plain", {{6, 8}}};
  for (int at = 0; at < (int)GBX_LCD_FIFO_BYTES; ++at)
    for (int v : {0, 1, 2, 6, 7, 8, 9, 10, 13, 14, 21, 22, 31, 32, 143, 159, 160, 161, 200, 255}) {
      auto r = fifo_on_line(base, plain);
      rec(r, "lcd_fifo").bytes[(size_t)at] = (uint8_t)v;
      add("lcd_fifo active, byte " + std::to_string(at) + "=" + std::to_string(v), r);
    }
  const int64_t c = get64(base, "cycle_count");
  for (int64_t v : {INT64_MAX, INT64_MIN, int64_t{1} << 62, c + (int64_t{1} << 40)}) {
    for (const char* name : {"cycle_count", "ppu_epoch", "div_epoch", "timer_synced", "tima_reload",
                             "apu_synced", "serial_event", "dma_end", "rtc_second_start"}) {
      auto r = base;
      put(rec(r, name), 0, (uint64_t)v, 8);
      add(std::string(name) + "=" + std::to_string(v), r);
    }
  }
  return out;
}

// Seeded byte flips and random values in the records' bytes (mem included).
inline std::vector<Crafted> random_cases(const Seed& s, uint32_t seed, int count) {
  std::vector<Crafted> out;
  std::mt19937 rng(seed);
  const auto base = records(s);
  for (int i = 0; i < count; ++i) {
    auto recs = base;
    const int edits = 1 + (int)(rng() % 4);
    std::string label = s.label + ": random " + std::to_string(seed) + "/" + std::to_string(i);
    for (int k = 0; k < edits; ++k) {
      SaveStateRecord& r = recs[rng() % recs.size()];
      if (r.bytes.empty()) continue;
      const size_t at = rng() % r.bytes.size();
      if (rng() & 1)
        r.bytes[at] ^= (uint8_t)(1u << (rng() % 8));
      else
        r.bytes[at] = (uint8_t)rng();
    }
    out.push_back(
        {label, write_save_state(s.rom, MemoryModel::Dmg, SaveStateKind::Kernel, recs), ""});
  }
  return out;
}

inline std::unique_ptr<Backend> make(const std::string& name, const Rom& rom, PpuModel ppu) {
  BackendConfig cfg;
  cfg.num_envs = 2;
  cfg.threads = 1;
  cfg.render = true;
  cfg.ppu = ppu;
  cfg.frames_per_step = kFrames;
  auto b = make_backend(name, rom, cfg);
  REQUIRE_MESSAGE(b.ok(), name, ": ", (b.ok() ? "" : b.error().message));
  return std::move(b.value());
}

// Seeds: a state of each game present, after 150 frames with input (past title screens),
// and PPU_BENCH's after 30.
inline std::vector<Seed> seeds() {
  std::vector<Seed> out;
  auto add = [&](const std::string& label, const std::string& spec, int frames) {
    auto rom = load_rom(spec);
    REQUIRE_MESSAGE(rom.ok(), (rom ? "" : rom.error().message));
    auto b = make("cpu", *rom, PpuModel::Fifo);
    REQUIRE(b->reset(0).ok());
    for (int f = 0; f < frames; f += kFrames)
      REQUIRE(b->step({(f / 16) % 2 ? 0x01 : 0x08, 0}).ok());  // A and Start in turn
    auto blob = b->save_state(0);
    REQUIRE(blob.ok());
    out.push_back({label, std::move(rom.value()), std::move(*blob)});
  };
  const fs::path games =
      fs::path(GBX_TEST_SOURCE_DIR).parent_path().parent_path() / "shared" / "games";
  for (const char* g : {"libbet.gb", "tobutobugirl.gb", "2048.gb"})
    if (fs::exists(games / g)) add(g, (games / g).string(), 150);
  add("PPU_BENCH", "builtin:PPU_BENCH", 30);
  return out;
}

// Loads every case into env 1 next to the seed in env 0 and steps.
// `seed_limit`: the first this many seeds (the games first, PPU_BENCH last) and PPU_BENCH;
// `stride`: every stride-th structured case, and the odd active FIFOs (odd_fifos()).
inline Counts run_cases(const std::string& backend, PpuModel ppu, bool random_too,
                        size_t seed_limit = 99, size_t stride = 1) {
  Counts n;
  auto all = seeds();
  if (all.size() > seed_limit + 1) all.erase(all.begin() + (long)seed_limit, all.end() - 1);
  for (const Seed& s : all) {
    CAPTURE(s.label);
    auto b = make(backend, s.rom, ppu);
    // env 0 alone: what it must be after every case's step.
    REQUIRE(b->load_state(0, s.blob).ok());
    REQUIRE(b->load_state(1, s.blob).ok());
    REQUIRE(b->step({0, 0}).ok());
    const auto want = b->save_state(0).value();
    std::vector<Crafted> cases;
    size_t i = 0;
    for (Crafted& c : structured(s))
      if (i++ % stride == 0 || c.label.find("lcd_fifo active on line") != std::string::npos)
        cases.push_back(std::move(c));
    if (random_too) {
      auto r = random_cases(s, 0x5EED0000u + (uint32_t)s.label.size(), 150);
      cases.insert(cases.end(), r.begin(), r.end());
    }
    for (const Crafted& c : cases) {
      std::snprintf(g_case, sizeof g_case, "%s", c.label.c_str());
      ++n.tried;
      Status st = b->load_state(1, c.blob);
      if (!st) {
        ++n.refused;
        const std::string& m = st.error().message;
        CHECK_MESSAGE(m.find('\n') == std::string::npos, c.label, ": ", m);
        if (!c.refused_by.empty())
          CHECK_MESSAGE(m.find("'" + c.refused_by) != std::string::npos, c.label, ": ", m);
        continue;
      }
      CHECK_MESSAGE(c.refused_by.empty(), c.label, ": loaded, but ", c.refused_by,
                    "'s rule must refuse it");
      REQUIRE(b->load_state(0, s.blob).ok());
      Status step = b->step({0, 0});
      if (!step) {
        ++n.crashed;
        FAIL_CHECK(c.label, ": step failed: ", step.error().message);
        continue;
      }
      ++n.ran;
      CHECK_MESSAGE(b->save_state(0).value() == want, c.label, ": env 0 changed");
      const auto reached = b->save_state(1).value();
      Status again = b->load_state(1, reached);
      CHECK_MESSAGE(again.ok(), c.label,
                    ": the state it reached is refused: ", (again ? "" : again.error().message));
    }
  }
  std::snprintf(g_case, sizeof g_case, "none");
  return n;
}

inline void report(const std::string& what, const Counts& n) {
  // CTest runs the fuzz with checked kernels (tests/CMakeLists.txt): out-of-bounds accesses
  // trap instead of passing unseen.
  const char* checks = std::getenv("GBX_JIT_CHECKS");
  std::printf("state fuzz %s: %d tried, %d refused, %d ran, %d crashed (kernels checked: %s)\n",
              what.c_str(), n.tried, n.refused, n.ran, n.crashed,
              checks && *checks ? checks : "no");
  CHECK_MESSAGE((checks && *checks), "GBX_JIT_CHECKS unset: the kernels ran unchecked");
  CHECK(n.crashed == 0);
  CHECK(n.refused > 0);
  CHECK(n.ran > 0);
}

}  // namespace state_fuzz
