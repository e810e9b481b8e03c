// User reward/done/track expressions: the checker, and their injection by the generator.
#include <doctest/doctest.h>

#include "gbx/engine/cuda_kernel_builder.h"
#include "gbx/engine/generator.h"
#include "gbx/engine/user_expr.h"
#include "nvrtc_available.h"

using namespace gbx;

namespace {

const UserExprView kView{
    {"ram", "ram16"}, {"a", "f", "b", "c", "d", "e", "h", "l", "pc", "sp"}, {"val", "prev"}};

std::string check_error(const std::string& text, int tracked = 0, bool allow = true) {
  auto r = prepare_user_expr(text, "reward", kView, tracked, allow);
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
  p.reward_expr = "val(0) - prev(0) + (a & 1) / 3";
  p.done_expr = "prev(1) == val(1)";
  NvrtcOptions opts;
  opts.archs = {"sm_90"};
  KernelCache cache;
  auto k = build_cuda_kernel(bundle.value(), p, cache, opts);
  REQUIRE_MESSAGE(k.ok(), (k.ok() ? "" : k.error().message + "\n" + k.error().detail));
  CHECK(k.value().archs.size() == 1);
}
