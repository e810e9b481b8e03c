// The reward language's one corpus (tests/data/expressions.tsv) against the kernel's checker;
// tests/python/test_expr_corpus.py runs the same rows through Python, which calls this checker.
#include <doctest/doctest.h>

#include <fstream>

#include "gbx/engine/generator.h"
#include "gbx/engine/user_expr.h"
#include "test_util.h"

using namespace gbx;

TEST_CASE("every expression of the corpus: accepted or refused as it says") {
  auto bundle = TemplateBundle::load(TemplateBundle::default_root());
  REQUIRE(bundle.ok());
  auto view = user_expr_view(*bundle);
  REQUIRE(view.ok());
  const UserExprView host =
      restrict_view(*view, {"ram", "ram16", "a", "f", "b", "c", "d", "e", "h", "l", "pc", "sp"});
  std::ifstream f(std::string(GBX_TEST_SOURCE_DIR) + "/data/expressions.tsv");
  REQUIRE(f);
  int rows = 0;
  for (std::string line; std::getline(f, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t t1 = line.find('\t'), t2 = line.find('\t', t1 + 1);
    REQUIRE(t2 != std::string::npos);
    const std::string kind = line.substr(0, t1), verdict = line.substr(t1 + 1, t2 - t1 - 1);
    std::string text = line.substr(t2 + 1);
    for (size_t p; (p = text.find("\\n")) != std::string::npos;) text.replace(p, 2, "\n");
    CAPTURE(line);
    REQUIRE((kind == "kernel" || kind == "host"));
    const auto r = kind == "kernel" ? prepare_user_expr(text, "reward", *view, 2, true, 2)
                                    : prepare_user_expr(text, "expr", host, 0, false, 0);
    // The host evaluator's own refusals (syntax, C++ types) come after this check.
    if (verdict == "ok" || (kind == "host" && (verdict.rfind("unexpected", 0) == 0 ||
                                               verdict.rfind("needs integer", 0) == 0))) {
      CHECK(r.ok());
    } else {
      REQUIRE(!r.ok());
      CHECK(r.error().message.find(verdict) != std::string::npos);
    }
    ++rows;
  }
  CHECK(rows > 40);
}
