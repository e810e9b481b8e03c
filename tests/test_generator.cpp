// Generator: placeholders, keys, determinism, #line mapping, table/family checks.
#include <doctest/doctest.h>

#include <fstream>
#include <set>

#include "gbx/engine/generator.h"
#include "gbx/engine/kernel_builder.h"
#include "gbx_abi.h"
#include "test_util.h"

using namespace gbx;

namespace {

TemplateBundle load_bundle(const std::filesystem::path& root = TemplateBundle::default_root()) {
  auto b = TemplateBundle::load(root);
  REQUIRE_MESSAGE(b.ok(), (b.ok() ? "" : b.error().message));
  return b.value();
}

// A copy of the templates that a test may break.
struct TemplateCopy {
  test::TempDir dir;
  std::filesystem::path root;
  TemplateCopy() : root(dir.path / "templates") {
    std::filesystem::copy(TemplateBundle::default_root(), root,
                          std::filesystem::copy_options::recursive);
  }
  void replace(const std::string& rel, const std::string& from, const std::string& to) {
    std::ifstream in(root / rel);
    std::string s((std::istreambuf_iterator<char>(in)), {});
    const auto pos = s.find(from);
    REQUIRE_MESSAGE(pos != std::string::npos, from << " not in " << rel);
    s.replace(pos, from.size(), to);
    std::ofstream(root / rel, std::ios::trunc) << s;
  }
};

SynthParams params(Stage st, Device d, MemoryModel m = MemoryModel::Dmg) {
  SynthParams p;
  p.stage = st;
  p.device = d;
  p.memory_model = m;
  return p;
}

}  // namespace

TEST_CASE("opcode table has every base and CB opcode once with sane lengths and cycles") {
  const auto bundle = load_bundle();
  int base = 0, cb = 0, illegal = 0;
  for (const auto& e : bundle.opcodes()) {
    (e.cb ? cb : base)++;
    if (e.family == "illegal") ++illegal;
    CHECK(e.length >= 1);
    CHECK(e.length <= 3);
    CHECK(e.cycles % 4 == 0);
    CHECK(e.cycles_not_taken % 4 == 0);
    if (e.cb) CHECK(e.length == 2);
  }
  CHECK(base == 256);
  CHECK(cb == 256);
  CHECK(illegal == 11);
}

TEST_CASE("every synthesis parameter set generates source without placeholders") {
  const auto bundle = load_bundle();
  for (Device d : {Device::Cpu, Device::Cuda})
    for (MemoryModel m : {MemoryModel::Dmg, MemoryModel::Flat64k})
      for (Stage st : all_stages()) {
        auto src = generate(bundle, params(st, d, m));
        REQUIRE_MESSAGE(src.ok(), (src.ok() ? "" : src.error().message));
        CHECK(src->source.find("{{") == std::string::npos);
        CHECK(src->source.find("#line") != std::string::npos);
        CHECK(src->source.find("templates/sm83/family/alu.tmpl") != std::string::npos);
        if (d == Device::Cuda) {
          CHECK(src->source.find("__global__") != std::string::npos);
          CHECK(src->file_name == "source.cu");
        } else {
          CHECK(src->file_name == "source.cpp");
        }
      }
}

TEST_CASE("4 stages x 2 devices give 8 distinct keys; generation is deterministic") {
  const auto bundle = load_bundle();
  std::set<std::string> keys;
  for (Device d : {Device::Cpu, Device::Cuda})
    for (Stage st : all_stages()) {
      auto a = generate(bundle, params(st, d));
      auto b = generate(bundle, params(st, d));
      REQUIRE(a.ok());
      REQUIRE(b.ok());
      CHECK(a->source == b->source);
      keys.insert(compute_cache_key(make_key_inputs(bundle, a.value(), "compiler", {"-O2"}, {})));
    }
  CHECK(keys.size() == 8);
}

TEST_CASE("stages inject exactly their epilogs") {
  const auto bundle = load_bundle();
  auto has = [&](Stage st, const char* needle) {
    auto s = generate(bundle, params(st, Device::Cpu));
    REQUIRE(s.ok());
    return s->source.find(needle) != std::string::npos;
  };
  CHECK_FALSE(has(Stage::EmulateOnly, "p.reward[env]"));
  CHECK_FALSE(has(Stage::EmulateOnly, "p.obs +"));
  CHECK(has(Stage::RewardOnly, "p.reward[env]"));
  CHECK_FALSE(has(Stage::RewardOnly, "p.obs +"));
  CHECK(has(Stage::ObsOnly, "p.obs +"));
  CHECK_FALSE(has(Stage::ObsOnly, "p.reward[env]"));
  CHECK(has(Stage::FullStep, "p.obs +"));
  CHECK(has(Stage::FullStep, "p.reward[env]"));
}

TEST_CASE("each case carries a #line back to its family template") {
  const auto bundle = load_bundle();
  auto src = generate(bundle, params(Stage::EmulateOnly, Device::Cpu));
  REQUIRE(src.ok());
  const auto pos = src->source.find("case 0x41: GBX_OP_LABEL(41) {  // LD B,C");
  REQUIRE(pos != std::string::npos);
  const auto next = src->source.substr(pos, 200);
  CHECK(next.find("#line 3 \"templates/sm83/family/ld_r_src.tmpl\"") != std::string::npos);
  CHECK(next.find("cpu.b = cpu.c;") != std::string::npos);
}

TEST_CASE("generator errors: unknown operand value, undeclared placeholder, missing family") {
  SUBCASE("unknown operand value") {
    TemplateCopy t;
    t.replace("sm83/opcodes.tsv", "LD B,C\t1\t4\t-\tld_r_src\tDST=B SRC=C",
              "LD B,C\t1\t4\t-\tld_r_src\tDST=B SRC=Q");
    auto src = generate(load_bundle(t.root), params(Stage::FullStep, Device::Cpu));
    REQUIRE_FALSE(src.ok());
    CHECK(src.error().message.find("unknown operand value SRC=Q") != std::string::npos);
  }
  SUBCASE("unknown operand name") {
    TemplateCopy t;
    t.replace("sm83/opcodes.tsv", "DST=B SRC=C", "DST=B SRC=C EXTRA=1");
    auto src = generate(load_bundle(t.root), params(Stage::FullStep, Device::Cpu));
    REQUIRE_FALSE(src.ok());
    CHECK(src.error().message.find("unknown operand EXTRA") != std::string::npos);
  }
  SUBCASE("placeholder that is not a declared operand") {
    TemplateCopy t;
    t.replace("sm83/family/ld_r_src.tmpl", "{{DST}} = {{SRC}};", "{{DST}} = {{SRCX}};");
    auto src = generate(load_bundle(t.root), params(Stage::FullStep, Device::Cpu));
    REQUIRE_FALSE(src.ok());
    CHECK(src.error().message.find("{{SRCX}}") != std::string::npos);
  }
  SUBCASE("unknown injection site in the skeleton") {
    TemplateCopy t;
    t.replace("kernel/step.tmpl", "{{POST_STEP_DISPATCH}}", "{{POST_STEP_DISPATCHX}}");
    auto src = generate(load_bundle(t.root), params(Stage::FullStep, Device::Cpu));
    REQUIRE_FALSE(src.ok());
    CHECK(src.error().message.find("unknown injection site") != std::string::npos);
  }
  SUBCASE("missing family template") {
    TemplateCopy t;
    std::filesystem::remove(t.root / "sm83/family/daa.tmpl");
    auto src = generate(load_bundle(t.root), params(Stage::FullStep, Device::Cpu));
    REQUIRE_FALSE(src.ok());
    CHECK(src.error().message.find("sm83/family/daa.tmpl") != std::string::npos);
  }
  SUBCASE("duplicate opcode row") {
    TemplateCopy t;
    t.replace("sm83/opcodes.tsv", "base\t01\t", "base\t00\t");
    auto bundle = TemplateBundle::load(t.root);
    REQUIRE_FALSE(bundle.ok());
    CHECK(bundle.error().message.find("appears") != std::string::npos);
  }
}

namespace {

// The control-flow classification the specializer made from family names before the roles
// were declared in templates/sm83/families.tsv: the declared roles must reproduce it.
FlowRole role_by_family_name(const std::string& f) {
  if (f == "jr" || f == "jp" || f == "jp_hl" || f == "ret" || f == "reti" || f == "rst" ||
      f == "call")
    return FlowRole::Jump;
  if (f == "jr_cc" || f == "jp_cc" || f == "call_cc" || f == "ret_cc") return FlowRole::Branch;
  if (f == "ei" || f == "di") return FlowRole::EndAfter;
  if (f == "halt" || f == "stop" || f == "illegal") return FlowRole::Excluded;
  return FlowRole::Plain;
}

}  // namespace

TEST_CASE("every opcode's declared control-flow role is the one its family name gave") {
  const auto bundle = load_bundle();
  int transfers = 0;
  for (const auto& e : bundle.opcodes()) {
    INFO((e.cb ? "cb " : "base ") << e.code << " " << e.mnemonic << " (" << e.family << ")");
    CHECK(std::string(to_string(e.role)) == to_string(role_by_family_name(e.family)));
    if (e.role == FlowRole::Jump || e.role == FlowRole::Branch) ++transfers;
  }
  // JR, JP, JP HL, CALL, RET, RETI; RST x8; the 4 conditions of JR, JP, CALL and RET.
  CHECK(transfers == 6 + 8 + 16);
}

TEST_CASE("a family without a declared control-flow role is a template error") {
  struct Break {
    const char* file;
    const char* from;
    const char* to;
    const char* error;  // part of the load error
  };
  const Break breaks[] = {
      {"sm83/families.tsv", "jr_cc\tbranch\n", "",
       "base opcode 20 (JR NZ,e8): family jr_cc has no control-flow role: declare it in "
       "templates/sm83/families.tsv"},
      // A new family in the opcode table, with no role.
      {"sm83/opcodes.tsv", "\tjp_hl\t", "\tjp_hl2\t", "family jp_hl2 has no control-flow role"},
      {"sm83/families.tsv", "jr_cc\tbranch\n", "jr_cc\tloop\n", "unknown role 'loop'"},
      {"manifest.json", "\"family_roles\"", "\"family_roles_x\"", "names no family_roles"},
  };
  for (const Break& b : breaks) {
    CAPTURE(b.error);
    TemplateCopy t;
    t.replace(b.file, b.from, b.to);
    auto bundle = TemplateBundle::load(t.root);
    REQUIRE_FALSE(bundle.ok());
    CHECK(bundle.error().message.find(b.error) != std::string::npos);
  }
}

TEST_CASE("a broken template snippet gives a clang error naming the template file and line") {
  TemplateCopy t;
  t.replace("sm83/family/daa.tmpl", "cpu.a = (u8)a;", "cpu.a = (u8)a +;");
  test::TempDir cache_dir;
  KernelCache cache(cache_dir.path);
  auto k = build_cpu_kernel(load_bundle(t.root), params(Stage::EmulateOnly, Device::Cpu), cache);
  REQUIRE_FALSE(k.ok());
  CHECK(k.error().kind == ErrorKind::Compile);
  CHECK(k.error().message.find("templates/sm83/family/daa.tmpl:") != std::string::npos);
  CHECK(cache.list().empty());  // nothing published for a failed compile
}

TEST_CASE("the opcode grid renders 16 rows of mnemonics") {
  const auto bundle = load_bundle();
  const std::string grid = render_opcode_grid(bundle, false);
  CHECK(test::count_lines(grid) == 17);
  CHECK(grid.find("LD B,C") != std::string::npos);
  CHECK(render_opcode_grid(bundle, true).find("SET 7,A") != std::string::npos);
}

TEST_CASE("templates declaring another state ABI are refused before anything is compiled") {
  TemplateCopy t;
  t.replace("abi/gbx_abi.h", "#define GBX_ABI_VERSION " + std::to_string(GBX_ABI_VERSION),
            "#define GBX_ABI_VERSION 999");
  test::TempDir cache_dir;
  KernelCache cache(cache_dir.path);
  auto k = build_cpu_kernel(load_bundle(t.root), params(Stage::EmulateOnly, Device::Cpu), cache);
  REQUIRE_FALSE(k.ok());
  CHECK(k.error().kind == ErrorKind::Template);
  CHECK(k.error().message.find("state ABI v999") != std::string::npos);
  CHECK(cache.list().empty());
}
