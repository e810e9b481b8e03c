// User reward/done/track expressions: the checker, and their injection by the generator.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <random>

#include "gbx/engine/cuda_kernel_builder.h"
#include "gbx/engine/generator.h"
#include "gbx/engine/kernel_builder.h"
#include "gbx/engine/user_expr.h"
#include "gbx/runtime/roms/rom.h"
#include "gbx/runtime/states/env_state.h"
#include "nvrtc_available.h"

using namespace gbx;

namespace {

const UserExprView kView{{"ram", "ram16", "seen", "seen_count"},
                         {"a", "f", "b", "c", "d", "e", "h", "l", "pc", "sp"},
                         {"val", "prev"},
                         {"popcount", "sum", "bcd"},
                         {"hit"},
                         ""};

std::string check_error(const std::string& text, int tracked = 0, bool allow = true,
                        int hooks = 0) {
  auto r = prepare_user_expr(text, "reward", kView, tracked, allow, hooks);
  REQUIRE_FALSE(r.ok());
  return r.error().message;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("accepted expressions keep their line breaks and make division float") {
  auto r =
      prepare_user_expr("ram16(0xC0A0) - prev(0)\n  + a / 2 > 1.5e1f", "reward", kView, 1, true);
  REQUIRE(r.ok());
  CHECK(r.value() == "ram16 ( 0xC0A0 ) - prev ( 0 ) \n+ a / (float)2 > 1.5e1f ");
}

TEST_CASE("everything outside the view and the operators is refused, with line and column") {
  CHECK(contains(check_error("a = 1"), "<reward>:1:3: '=' is not allowed"));
  CHECK(contains(check_error("a\n += 1"), "<reward>:2:2:"));
  CHECK(contains(check_error("a++"), "'+' is not allowed"));
  CHECK(contains(check_error("a--"), "'-' is not allowed"));
  CHECK(contains(check_error("a, b"), "',' is not allowed"));
  CHECK(contains(check_error("a; b"), "';' is not allowed"));
  CHECK(contains(check_error("x + 1"), "unknown name 'x'"));
  CHECK(contains(check_error("a[0]"), "'[' is not allowed"));
  CHECK(contains(check_error("p.reward"), "'.' is not allowed"));
  CHECK(contains(check_error("a % 2"), "'%' is not allowed"));
  CHECK(contains(check_error("a // c"), "comments"));
  CHECK(contains(check_error("#define x"), "'#' is not allowed"));
  CHECK(contains(check_error("ram"), "ram must be called"));
  CHECK(contains(check_error("pc(1)"), "pc is a value"));
  CHECK(contains(check_error("prev(0)"), "only 0 tracked value"));
  CHECK(contains(check_error("prev(8)", 8), "only 8 tracked value"));
  CHECK(contains(check_error("val(a)", 1), "integer literal"));
  CHECK(contains(check_error("val(0)", 1, false), "only available in reward and done"));
  CHECK(contains(check_error("((a)"), "unbalanced '('"));
  CHECK(contains(check_error("a)"), "unbalanced ')'"));
  CHECK(contains(check_error("   "), "empty expression"));
  CHECK(contains(check_error("0x"), "hex literal"));
  CHECK(contains(check_error(std::string(5000, '1')), "longer than"));
}

TEST_CASE("builtins: literal arguments checked, commas only inside them") {
  auto ok = [](const std::string& t, int hooks = 0) {
    auto r = prepare_user_expr(t, "reward", kView, 0, true, hooks);
    INFO(t);
    CHECK_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  };
  ok("popcount(0xD747, 0xD886) + sum(0xC000, 0xC000) + bcd(0xD347, 3)");
  ok("seen(ram(0xD35E) << 16 | ram(0xD361) << 8 | ram(0xD362)) + seen_count()");
  ok("hit(1) > hit(0)", 2);
  CHECK(contains(check_error("popcount(0xC010, 0xC000)"), "lo > hi"));
  CHECK(contains(check_error("sum(0xC000, 0x10000)"), "outside the address space"));
  CHECK(contains(check_error("popcount(a, 0xC000)"), "takes two integer literals"));
  CHECK(contains(check_error("popcount(0xC000)"), "takes two integer literals"));
  CHECK(contains(check_error("sum(0xC000, 1.5)"), "takes two integer literals"));
  CHECK(contains(check_error("popcount(0xC000, 0xC001, 3)"), "takes two integer literals"));
  CHECK(contains(check_error("bcd(0xC000, 0)"), "byte count 0 is outside 1..8"));
  CHECK(contains(check_error("bcd(0xC000, 9)"), "byte count 9 is outside 1..8"));
  CHECK(contains(check_error("bcd(0xFFFE, 3)"), "reads past 0xFFFF"));
  CHECK(contains(check_error("seen(a, b)"), "',' is not allowed here"));
  CHECK(contains(check_error("hit(0)"), "only 0 hook(s) given"));
  CHECK(contains(check_error("hit(2)", 0, true, 2), "only 2 hook(s) given"));
  CHECK(contains(check_error("hit(a)", 0, true, 2), "integer literal"));
  CHECK(expr_names("1 + seen_count()", "seen_count"));
  CHECK_FALSE(expr_names("1 + seen_count()", "seen"));
  CHECK_FALSE(expr_names("unseen(1)", "seen"));
}

namespace {

// A CPU kernel whose stage epilog runs the given expressions; each env's WRAM set, the epilog
// run alone (env_frames 0: no emulation), the tracked values and flags read back.
struct ExprRun {
  Rom rom;
  SynthParams params;
  CpuKernel kernel;
  EnvState state;
  std::vector<float> obs;
  std::vector<float> reward;
  std::vector<uint8_t> done;
  std::vector<int32_t> frames;

  ExprRun(SynthParams p, int envs) : params(std::move(p)) {
    auto r = load_rom("builtin:ARROWS");
    REQUIRE(r.ok());
    rom = r.value();
    auto bundle = TemplateBundle::load(TemplateBundle::default_root());
    REQUIRE(bundle.ok());
    KernelCache cache;
    auto k = build_cpu_kernel(bundle.value(), params, cache);
    REQUIRE_MESSAGE(k.ok(), (k.ok() ? "" : k.error().message + "\n" + k.error().detail));
    kernel = std::move(k.value());
    state = EnvState(envs, MemoryModel::Dmg, &rom, MemLayout::EnvMajor, params.seen_bytes());
    state.reset_dmg();
    obs.assign((size_t)envs * 32, 0.0f);
    reward.assign(envs, 0.0f);
    done.assign(envs, 0);
    frames.assign(envs, 0);
  }
  void epilog() {
    GbxParams p = state.kernel_params();
    p.env_frames = frames.data();
    p.obs = obs.data();
    p.obs_dim = 32;
    p.reward = reward.data();
    p.done = done.data();
    kernel.step(&p, 0, state.num_envs());
  }
  void set_wram(int env, uint16_t addr, const std::vector<uint8_t>& bytes) {
    state.write_env_mem(env, GBX_MEM_WRAM + (addr - 0xC000u), bytes.data(), bytes.size());
  }
  float tracked(int env, int i) const {
    return state.soa().user_prev[env * GBX_USER_TRACK_MAX + i];
  }
};

// The reference: written from the documented semantics, not from the template.
uint32_t ref_popcount(const std::vector<uint8_t>& m, size_t lo, size_t hi) {
  uint32_t n = 0;
  for (size_t a = lo; a <= hi; ++a) n += (uint32_t)__builtin_popcount(m[a]);
  return n;
}
uint32_t ref_sum(const std::vector<uint8_t>& m, size_t lo, size_t hi) {
  uint32_t n = 0;
  for (size_t a = lo; a <= hi; ++a) n += m[a];
  return n;
}
int64_t ref_bcd(const std::vector<uint8_t>& m, size_t at, int n) {
  int64_t v = 0;
  for (int i = 0; i < n; ++i) v = v * 100 + (m[at + i] >> 4) * 10 + (m[at + i] & 15);
  return v;
}

}  // namespace

TEST_CASE("compiled popcount / sum / bcd equal a reference over random RAM") {
  SynthParams p;
  // WRAM offsets: popcount over 0xC000-0xC12B (300 bytes, event flags), sum over one page,
  // bcd of 3 and of 8 bytes (the 8-byte value compared exactly in done: past float's 2^24).
  p.track = {"popcount(0xC000, 0xC12B)", "sum(0xC200, 0xC2FF)", "bcd(0xC300, 3)",
             "popcount(0xC400, 0xC400)"};
  const int envs = 16;
  std::mt19937 rng(1234);
  std::vector<std::vector<uint8_t>> wram(envs, std::vector<uint8_t>(0x2000));
  std::vector<std::string> want8(envs);
  for (int e = 0; e < envs; ++e) {
    for (auto& b : wram[e]) b = (uint8_t)rng();
    for (int i = 0; i < 8; ++i)  // packed BCD digits at 0xC500
      wram[e][0x500 + i] = (uint8_t)((rng() % 10) << 4 | (rng() % 10));
    if (e == 3) std::fill_n(wram[e].begin() + 0x500, 8, 0x99);  // the largest: 16 nines
  }
  // done: env e's 8-byte value equals the reference of env (e / 2) * 2 (even envs match).
  std::string done = "";
  for (int e = 0; e < envs; e += 2) {
    const int64_t v = ref_bcd(wram[e], 0x500, 8);
    done +=
        (done.empty() ? "" : " || ") + std::string("bcd(0xC500, 8) == ") + std::to_string(v) + "u";
  }
  p.done_expr = done;
  p.reward_expr = "bcd(0xC500, 8) / 10000000000.0";
  ExprRun run(p, envs);
  for (int e = 0; e < envs; ++e) run.set_wram(e, 0xC000, wram[e]);
  run.epilog();
  int matched = 0;
  for (int e = 0; e < envs; ++e) {
    INFO("env " << e);
    CHECK(run.tracked(e, 0) == (float)ref_popcount(wram[e], 0x000, 0x12B));
    CHECK(run.tracked(e, 1) == (float)ref_sum(wram[e], 0x200, 0x2FF));
    CHECK(run.tracked(e, 2) == (float)ref_bcd(wram[e], 0x300, 3));
    CHECK(run.tracked(e, 3) == (float)ref_popcount(wram[e], 0x400, 0x400));
    CHECK(run.reward[e] == doctest::Approx((double)ref_bcd(wram[e], 0x500, 8) / 1e10));
    // Even envs' values are in the list; an odd env matches only if its value equals one.
    bool in_list = false;
    for (int o = 0; o < envs; o += 2)
      in_list |= ref_bcd(wram[o], 0x500, 8) == ref_bcd(wram[e], 0x500, 8);
    CHECK(run.done[e] == (in_list ? 1 : 0));
    matched += run.done[e];
  }
  CHECK(matched >= envs / 2);
  CHECK(ref_bcd(wram[3], 0x500, 8) == 9999999999999999LL);
}

TEST_CASE("compiled seen(): exact up to its capacity, key 0 included, cleared with the memory") {
  SynthParams p;
  p.seen_capacity = 5;
  p.track = {"seen_count()"};  // evaluated before the reward: the count before this step's key
  p.reward_expr = "seen(ram(0xC000) | ram(0xC001) << 8 | ram(0xC002) << 16 | ram(0xC003) << 24)";
  REQUIRE(p.uses_seen());
  CHECK(p.canonical().find(";seen=5") != std::string::npos);
  SynthParams q = p;
  q.seen_capacity = 6;
  CHECK(q.canonical() != p.canonical());
  ExprRun run(p, 2);
  CHECK(run.state.layout().seen_bytes == seen_table_bytes(5));
  CHECK(seen_table_slots(5) == 8);
  // Env 0 sees a key sequence; env 1 always key 7 (its own set).
  const uint32_t keys[] = {0x12345678u, 0u, 0x12345678u, 0u, 1u, 0xFFFFFFFFu, 9u, 10u, 1u, 9u};
  // A Python-like reference set, bounded by the capacity.
  std::vector<uint32_t> set;
  for (size_t i = 0; i < std::size(keys); ++i) {
    const uint32_t k = keys[i];
    run.set_wram(0, 0xC000,
                 {(uint8_t)k, (uint8_t)(k >> 8), (uint8_t)(k >> 16), (uint8_t)(k >> 24)});
    run.set_wram(1, 0xC000, {7, 0, 0, 0});
    const size_t before = set.size();
    const bool fresh = std::find(set.begin(), set.end(), k) == set.end() && set.size() < 5;
    if (fresh) set.push_back(k);
    run.epilog();
    INFO("step " << i << " key " << k);
    CHECK(run.tracked(0, 0) == (float)before);
    CHECK(run.reward[0] == (fresh ? 1.0f : 0.0f));
    CHECK(run.reward[1] == (i == 0 ? 1.0f : 0.0f));
  }
  CHECK(set.size() == 5);  // the capacity was reached: 10 was refused
  run.state.clear_seen(0);
  run.set_wram(0, 0xC000, {10, 0, 0, 0});
  run.epilog();
  CHECK(run.tracked(0, 0) == 0.0f);
  CHECK(run.reward[0] == 1.0f);
  CHECK(run.reward[1] == 0.0f);
}

TEST_CASE("seen capacity is checked, and kernels without seen() have no set") {
  auto bundle = TemplateBundle::load(TemplateBundle::default_root());
  REQUIRE(bundle.ok());
  SynthParams p;
  p.reward_expr = "seen(a)";
  p.seen_capacity = 0;
  auto g = generate(bundle.value(), p);
  REQUIRE_FALSE(g.ok());
  CHECK(contains(g.error().message, "seen_capacity must be 1..65536 (got 0)"));
  p.seen_capacity = kSeenCapacityMax + 1;
  REQUIRE_FALSE(generate(bundle.value(), p).ok());
  SynthParams plain;
  plain.reward_expr = "ram(0xC000)";
  plain.seen_capacity = 4096;  // ignored: nothing uses it
  CHECK(plain.seen_bytes() == 0);
  CHECK(plain.canonical().find("seen") == std::string::npos);
  auto g2 = generate(bundle.value(), plain);
  REQUIRE(g2.ok());
  CHECK_FALSE(contains(g2.value().source, "#define GBX_SEEN_SLOTS"));
  CHECK(make_layout(4, MemoryModel::Dmg, 0x2000).mem_stride ==
        make_layout(4, MemoryModel::Dmg, 0x2000, MemLayout::EnvMajor, 0).mem_stride);
}

TEST_CASE(
    "the generator injects the expressions with #line pseudo files, and they change the "
    "source") {
  auto bundle = TemplateBundle::load(TemplateBundle::default_root());
  REQUIRE(bundle.ok());
  SynthParams plain;
  SynthParams user = plain;
  user.track = {"ram16(0xC000)"};
  user.reward_expr = "val(0) - prev(0)";
  user.done_expr = "a == 0";
  auto g0 = generate(bundle.value(), plain);
  auto g1 = generate(bundle.value(), user);
  REQUIRE(g0.ok());
  REQUIRE_MESSAGE(g1.ok(), (g1.ok() ? "" : g1.error().message));
  CHECK(contains(g1.value().source, "#line 1 \"<reward>\""));
  CHECK(contains(g1.value().source, "#line 1 \"<done>\""));
  CHECK(contains(g1.value().source, "#line 1 \"<track[0]>\""));
  // A user reward replaces reward_v0.
  CHECK(contains(g0.value().source, "templates/epilogs/reward_v0.tmpl"));
  CHECK_FALSE(contains(g1.value().source, "templates/epilogs/reward_v0.tmpl"));
  CHECK(g0.value().params.canonical() != g1.value().params.canonical());
  SynthParams other = user;
  other.reward_expr = "val(0)";
  CHECK(other.canonical() != user.canonical());

  SynthParams bad = plain;
  bad.reward_expr = "a = 1";
  auto g2 = generate(bundle.value(), bad);
  REQUIRE_FALSE(g2.ok());
  CHECK(g2.error().kind == ErrorKind::Usage);
}

TEST_CASE("the user epilog compiles for CUDA too (NVRTC, no GPU needed)") {
  GBX_REQUIRE_NVRTC();
  auto bundle = TemplateBundle::load(TemplateBundle::default_root());
  REQUIRE(bundle.ok());
  SynthParams p;
  p.device = Device::Cuda;
  p.track = {"ram16(0xC000)", "pc"};
  p.reward_expr =
      "val(0) - prev(0) + (a & 1) / 3 + seen(ram(0xC000) << 8 | ram(0xC001)) + seen_count() + "
      "popcount(0xC000, 0xC12B) + sum(0xC000, 0xC0FF) + bcd(0xC0A0, 3) + hit(1)";
  p.done_expr = "prev(1) == val(1)";
  p.seen_capacity = 1024;
  p.hooks = {{-1, 0x0150}, {1, 0x4000}};
  NvrtcOptions opts;
  opts.archs = {"sm_90"};
  KernelCache cache;
  auto k = build_cuda_kernel(bundle.value(), p, cache, opts);
  REQUIRE_MESSAGE(k.ok(), (k.ok() ? "" : k.error().message + "\n" + k.error().detail));
  CHECK(k.value().archs.size() == 1);
}
