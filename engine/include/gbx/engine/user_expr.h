#pragma once
// User reward / done / tracked-value expressions. They are compiled into the kernel and run
// inside the user's process, so before anything is generated each one is tokenized and
// checked: an expression over a read-only view of the machine, nothing else.
//
// Allowed: integer and float literals (decimal, 0x hex, suffixes u U f F), the names the
// template bundle's view declares (manifest "user_expressions.view": registers, ram(addr),
// ram16(addr), val(i), prev(i), seen(key), seen_count(), hit(i), and the literal-argument
// builtins popcount(lo, hi), sum(lo, hi), bcd(addr, n)), parentheses and the operators
//   + - * / & | ^ ~ ! << >> < > <= >= == != && || ?:
// Not allowed: assignment, ++/--, commas, braces, brackets, member access, strings, comments,
// preprocessor, `%`, and any other name. val(i) / prev(i) take an integer literal below the
// number of tracked values, and only reward/done may use them; hit(i) an integer literal below
// the number of hooks. popcount/sum take two integer literals lo <= hi <= 0xFFFF (an inclusive
// address range), bcd an address and a byte count 1..8 (addr + n - 1 <= 0xFFFF); commas are
// allowed only there.
// `/` always divides as float (the generator casts its right operand), so a division by zero
// gives inf instead of a trap that would kill the process.
#include <string>
#include <vector>

#include "gbx/engine/result.h"

namespace gbx {

struct UserExprView {
  std::vector<std::string> functions;  // called as name(expr): "ram", "ram16"
  std::vector<std::string> values;     // plain names: "a", "pc", ...
  std::vector<std::string> tracked;    // called with an integer literal: "val", "prev"
  // Called with two integer literals, checked by name: "popcount", "sum" (lo, hi), "bcd".
  std::vector<std::string> literal_calls;
  std::vector<std::string> hooks;  // called with an integer literal below num_hooks: "hit"
  // What an error adds about the names allowed; "" = the kernel's (every builtin).
  std::string hint;
};

constexpr int kBcdMaxBytes = 8;

// Checks `text` (what = "reward", "done" or "track[i]": the pseudo file name in errors) and
// returns the C++ to inject. An error names the snippet line and column.
Result<std::string> prepare_user_expr(const std::string& text, const std::string& what,
                                      const UserExprView& view, int num_tracked, bool allow_tracked,
                                      int num_hooks = 0);

// The view the template bundle's manifest declares ("user_expressions"); generator.cpp.
class TemplateBundle;
Result<UserExprView> user_expr_view(const TemplateBundle& bundle);

// The view restricted to the names in `only` (gbx.expressions' host evaluator: registers, ram,
// ram16), its hint listing them; val/prev stay, to be refused as outside reward and done.
UserExprView restrict_view(const UserExprView& full, const std::vector<std::string>& only);

// Whether `text` holds the identifier `name` (a whole word): which builtins an expression uses.
bool expr_names(const std::string& text, const std::string& name);

}  // namespace gbx
