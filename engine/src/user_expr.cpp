#include "gbx/engine/user_expr.h"

#include <algorithm>
#include <cctype>

namespace gbx {
namespace {

constexpr size_t kMaxExprBytes = 4096;

enum class Tok { Number, Name, Op, LParen, RParen };

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

}  // namespace

Result<std::string> prepare_user_expr(const std::string& text, const std::string& what,
                                      const UserExprView& view, int num_tracked,
                                      bool allow_tracked) {
  auto fail = [&](int line, int col, const std::string& why) {
    return make_error(ErrorKind::Usage,
                      "<" + what + ">:" + std::to_string(line) + ":" + std::to_string(col) + ": " +
                          why +
                          " (a reward/done expression may use only numbers, operators, "
                          "parentheses and the view: ram(addr), ram16(addr), registers, val(i), "
                          "prev(i))");
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
  for (size_t k = 0; k < toks.size(); ++k) {
    const Token& t = toks[k];
    if (t.kind == Tok::LParen) ++depth;
    if (t.kind == Tok::RParen && --depth < 0) return fail(t.line, t.col, "unbalanced ')'");
    if (t.kind != Tok::Name) continue;
    const bool called = k + 1 < toks.size() && toks[k + 1].kind == Tok::LParen;
    if (contains(view.functions, t.text)) {
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
