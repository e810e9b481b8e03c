#include "gbx/engine/user_expr.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <optional>

namespace gbx {
namespace {

constexpr size_t kMaxExprBytes = 4096;

enum class Tok { Number, Name, Op, LParen, RParen, Comma };

struct Token {
  Tok kind;
  std::string text;
  int line, col;
};

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Longest match first; everything not listed (=, ++, %, ',', '.', ...) is refused.
const char* const kOps[] = {"<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "+", "-", "*",
                            "/",  "&",  "|",  "^",  "~",  "!",  "<",  ">",  "?", ":"};

// An integer literal as C++ reads it (decimal, 0x hex, leading-0 octal, u/U suffix); nullopt
// for floats or values past 32 bits.
std::optional<uint64_t> int_literal(const std::string& t) {
  std::string s = t;
  while (!s.empty() && (s.back() == 'u' || s.back() == 'U')) s.pop_back();
  int base = 10;
  size_t i = 0;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    i = 2;
  } else if (s.size() > 1 && s[0] == '0') {
    base = 8;
    i = 1;
  }
  if (i >= s.size()) return s == "0" ? std::optional<uint64_t>(0) : std::nullopt;
  uint64_t v = 0;
  for (; i < s.size(); ++i) {
    const unsigned char c = (unsigned char)s[i];
    const int d = std::isdigit(c) ? c - '0' : std::isxdigit(c) ? std::tolower(c) - 'a' + 10 : 99;
    if (d >= base) return std::nullopt;
    v = v * (uint64_t)base + (uint64_t)d;
    if (v > 0xFFFFFFFFull) return std::nullopt;
  }
  return v;
}

std::string hex4(uint64_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%04llX", (unsigned long long)v);
  return buf;
}

}  // namespace

UserExprView restrict_view(const UserExprView& full, const std::vector<std::string>& only) {
  auto keep = [&](const std::vector<std::string>& names) {
    std::vector<std::string> out;
    for (const auto& n : names)
      if (std::find(only.begin(), only.end(), n) != only.end()) out.push_back(n);
    return out;
  };
  UserExprView v;
  v.functions = keep(full.functions);
  v.values = keep(full.values);
  v.tracked = full.tracked;  // refused by name: "val(i) is only available in reward and done"
  v.hint = " (a host expression may use only numbers, operators, parentheses and the view: ";
  for (const auto& f : v.functions) v.hint += f + "(addr), ";
  v.hint += "registers";
  for (const auto& r : v.values) v.hint += " " + r;
  v.hint += ")";
  return v;
}

bool expr_names(const std::string& text, const std::string& name) {
  auto word = [](char c) { return std::isalnum((unsigned char)c) || c == '_'; };
  for (size_t pos = text.find(name); pos != std::string::npos; pos = text.find(name, pos + 1)) {
    const bool start = pos == 0 || !word(text[pos - 1]);
    const size_t end = pos + name.size();
    if (start && (end == text.size() || !word(text[end]))) return true;
  }
  return false;
}

Result<std::string> prepare_user_expr(const std::string& text, const std::string& what,
                                      const UserExprView& view, int num_tracked, bool allow_tracked,
                                      int num_hooks) {
  auto fail = [&](int line, int col, const std::string& why) {
    return make_error(
        ErrorKind::Usage,
        "<" + what + ">:" + std::to_string(line) + ":" + std::to_string(col) + ": " + why +
            (!view.hint.empty() ? view.hint
                                : " (a reward/done expression may use only numbers, operators, "
                                  "parentheses and the view: ram(addr), ram16(addr), registers, "
                                  "val(i), prev(i), popcount(lo, hi), sum(lo, hi), bcd(addr, n), "
                                  "seen(key), seen_count(), hit(i))"));
  };
  if (text.size() > kMaxExprBytes)
    return fail(1, 1, "expression longer than " + std::to_string(kMaxExprBytes) + " bytes");
  std::vector<Token> toks;
  int line = 1, col = 1;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    const int tl = line, tc = col;
    auto advance = [&](size_t n) {
      for (size_t k = 0; k < n; ++k, ++i) {
        if (text[i] == '\n') {
          ++line;
          col = 1;
        } else {
          ++col;
        }
      }
    };
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      advance(1);
      continue;
    }
    if (std::isdigit((unsigned char)c) ||
        (c == '.' && i + 1 < text.size() && std::isdigit((unsigned char)text[i + 1]))) {
      size_t j = i;
      if (c == '0' && j + 1 < text.size() && (text[j + 1] == 'x' || text[j + 1] == 'X')) {
        j += 2;
        while (j < text.size() && std::isxdigit((unsigned char)text[j])) ++j;
        if (j == i + 2) return fail(tl, tc, "hex literal without digits");
      } else {
        while (j < text.size() && (std::isdigit((unsigned char)text[j]) || text[j] == '.')) ++j;
        if (j < text.size() && (text[j] == 'e' || text[j] == 'E')) {
          ++j;
          if (j < text.size() && (text[j] == '+' || text[j] == '-')) ++j;
          while (j < text.size() && std::isdigit((unsigned char)text[j])) ++j;
        }
      }
      while (j < text.size() &&
             (text[j] == 'u' || text[j] == 'U' || text[j] == 'f' || text[j] == 'F'))
        ++j;
      if (j < text.size() && (std::isalnum((unsigned char)text[j]) || text[j] == '_'))
        return fail(tl, tc, "malformed number '" + text.substr(i, j + 1 - i) + "'");
      toks.push_back({Tok::Number, text.substr(i, j - i), tl, tc});
      advance(j - i);
      continue;
    }
    if (std::isalpha((unsigned char)c) || c == '_') {
      size_t j = i;
      while (j < text.size() && (std::isalnum((unsigned char)text[j]) || text[j] == '_')) ++j;
      toks.push_back({Tok::Name, text.substr(i, j - i), tl, tc});
      advance(j - i);
      continue;
    }
    if (c == ',') {
      toks.push_back({Tok::Comma, ",", tl, tc});
      advance(1);
      continue;
    }
    if (c == '(' || c == ')') {
      toks.push_back({c == '(' ? Tok::LParen : Tok::RParen, std::string(1, c), tl, tc});
      advance(1);
      continue;
    }
    if (text.compare(i, 2, "//") == 0 || text.compare(i, 2, "/*") == 0)
      return fail(tl, tc, "comments are not allowed");
    const char* op = nullptr;
    for (const char* o : kOps)
      if (text.compare(i, std::char_traits<char>::length(o), o) == 0) {
        op = o;
        break;
      }
    // An operator followed by '=' would be an assignment ("+=", "<<="), as would '=' alone.
    const size_t oplen = op ? std::char_traits<char>::length(op) : 0;
    if (!op || (i + oplen < text.size() && text[i + oplen] == '=') ||
        ((c == '+' || c == '-') && i + 1 < text.size() && text[i + 1] == c))
      return fail(tl, tc, std::string("'") + c + "' is not allowed here");
    toks.push_back({Tok::Op, op, tl, tc});
    advance(oplen);
  }
  if (toks.empty()) return fail(1, 1, "empty expression");

  // Names: each must be a view name used in its own form.
  int depth = 0;
  std::vector<bool> comma_ok(toks.size(), false);
  for (size_t k = 0; k < toks.size(); ++k) {
    const Token& t = toks[k];
    if (t.kind == Tok::LParen) ++depth;
    if (t.kind == Tok::RParen && --depth < 0) return fail(t.line, t.col, "unbalanced ')'");
    if (t.kind == Tok::Comma && !comma_ok[k])
      return fail(t.line, t.col,
                  "',' is not allowed here (only between the literal arguments of popcount, sum "
                  "and bcd)");
    if (t.kind != Tok::Name) continue;
    const bool called = k + 1 < toks.size() && toks[k + 1].kind == Tok::LParen;
    if (contains(view.literal_calls, t.text)) {
      const bool bcd = t.text == "bcd";
      const std::string usage = bcd ? "bcd(addr, n)" : t.text + "(lo, hi)";
      const bool shape = k + 5 < toks.size() && called && toks[k + 2].kind == Tok::Number &&
                         toks[k + 3].kind == Tok::Comma && toks[k + 4].kind == Tok::Number &&
                         toks[k + 5].kind == Tok::RParen;
      const auto x = shape ? int_literal(toks[k + 2].text) : std::nullopt;
      const auto y = shape ? int_literal(toks[k + 4].text) : std::nullopt;
      if (!x || !y) return fail(t.line, t.col, t.text + " takes two integer literals: " + usage);
      if (bcd) {
        if (*x > 0xFFFF)
          return fail(t.line, t.col, "bcd address " + hex4(*x) + " is outside 0x0000-0xFFFF");
        if (*y < 1 || *y > (uint64_t)kBcdMaxBytes)
          return fail(t.line, t.col,
                      "bcd byte count " + std::to_string(*y) + " is outside 1.." +
                          std::to_string(kBcdMaxBytes));
        if (*x + *y - 1 > 0xFFFF)
          return fail(t.line, t.col,
                      "bcd(" + hex4(*x) + ", " + std::to_string(*y) + ") reads past 0xFFFF");
      } else {
        if (*x > 0xFFFF || *y > 0xFFFF)
          return fail(t.line, t.col,
                      t.text + "(" + hex4(*x) + ", " + hex4(*y) +
                          "): the range is outside the address space 0x0000-0xFFFF");
        if (*x > *y)
          return fail(t.line, t.col,
                      t.text + "(" + hex4(*x) + ", " + hex4(*y) +
                          "): lo > hi (the range is inclusive: lo <= hi)");
      }
      comma_ok[k + 3] = true;
    } else if (contains(view.hooks, t.text)) {
      const bool literal = k + 3 < toks.size() && called && toks[k + 2].kind == Tok::Number &&
                           toks[k + 3].kind == Tok::RParen;
      const auto idx = literal ? int_literal(toks[k + 2].text) : std::nullopt;
      if (!idx) return fail(t.line, t.col, t.text + " takes an integer literal: " + t.text + "(0)");
      if (*idx >= (uint64_t)num_hooks)
        return fail(t.line, t.col,
                    t.text + "(" + std::to_string(*idx) + "): only " + std::to_string(num_hooks) +
                        " hook(s) given (hooks=[...])");
    } else if (contains(view.functions, t.text)) {
      if (!called) return fail(t.line, t.col, t.text + " must be called: " + t.text + "(addr)");
    } else if (contains(view.values, t.text)) {
      if (called) return fail(t.line, t.col, t.text + " is a value, not a function");
    } else if (contains(view.tracked, t.text)) {
      if (!allow_tracked)
        return fail(t.line, t.col, t.text + "(i) is only available in reward and done");
      const bool literal = k + 3 < toks.size() && called && toks[k + 2].kind == Tok::Number &&
                           toks[k + 3].kind == Tok::RParen;
      int idx = -1;
      if (literal) {
        const std::string& n = toks[k + 2].text;
        if (n.find_first_not_of("0123456789") == std::string::npos && n.size() < 4)
          idx = std::stoi(n);
      }
      if (idx < 0)
        return fail(t.line, t.col, t.text + " takes an integer literal: " + t.text + "(0)");
      if (idx >= num_tracked)
        return fail(t.line, t.col,
                    t.text + "(" + std::to_string(idx) + "): only " + std::to_string(num_tracked) +
                        " tracked value(s) given (track=[...])");
    } else {
      return fail(t.line, t.col, "unknown name '" + t.text + "'");
    }
  }
  if (depth != 0) return fail(toks.back().line, toks.back().col, "unbalanced '('");

  // Emit with the snippet's own line breaks, so #line 1 "<what>" maps compiler errors back.
  std::string out;
  int out_line = 1;
  for (const Token& t : toks) {
    while (out_line < t.line) {
      out += '\n';
      ++out_line;
    }
    out += t.text;
    out += t.text == "/" ? " (float)" : " ";
  }
  return out;
}

}  // namespace gbx
