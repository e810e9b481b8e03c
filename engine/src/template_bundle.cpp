#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "gbx/engine/cache.h"
#include "gbx/engine/generator.h"

namespace gbx {
namespace fs = std::filesystem;

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  if (!s.empty() && s.back() == sep) out.emplace_back();
  return out;
}

// A tab-separated table's rows ('#' comments, blank lines and the column-name line skipped):
// row(cols, bad) for each, bad(why) making the error "PATH:LINE: why"; stops at an error.
template <typename Row>
Status for_each_row(const std::string& text, const std::string& path, Row&& row) {
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  bool header_seen = false;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line[0] == '#') continue;
    if (!header_seen) {  // column names
      header_seen = true;
      continue;
    }
    auto bad = [&](const std::string& why) {
      return make_error(ErrorKind::Template, path + ":" + std::to_string(lineno) + ": " + why);
    };
    if (Status st = row(split(line, '\t'), bad); !st) return st;
  }
  return ok_status();
}

Result<std::vector<OpcodeEntry>> parse_opcode_table(const std::string& text,
                                                    const std::string& path) {
  std::vector<OpcodeEntry> out;
  Status rows = for_each_row(
      text, path, [&](const std::vector<std::string>& cols, const auto& bad) -> Status {
        if (cols.size() != 9)
          return bad("expected 9 tab-separated columns, got " + std::to_string(cols.size()));
        OpcodeEntry e;
        if (cols[0] != "base" && cols[0] != "cb") return bad("table must be base or cb");
        e.cb = cols[0] == "cb";
        try {
          e.code = std::stoi(cols[1], nullptr, 16);
          e.length = std::stoi(cols[3]);
          e.cycles = std::stoi(cols[4]);
          e.cycles_not_taken = cols[5] == "-" ? 0 : std::stoi(cols[5]);
        } catch (const std::exception&) {
          return bad("bad number");
        }
        if (e.code < 0 || e.code > 0xFF) return bad("code out of range");
        e.mnemonic = cols[2];
        e.family = cols[6];
        if (cols[7] != "-") {
          for (const auto& tok : split(cols[7], ' ')) {
            if (tok.empty()) continue;
            const auto eq = tok.find('=');
            if (eq == std::string::npos) return bad("operand '" + tok + "' is not NAME=value");
            e.operands.emplace_back(tok.substr(0, eq), tok.substr(eq + 1));
          }
        }
        e.flags = cols[8];
        out.push_back(std::move(e));
        return ok_status();
      });
  if (!rows) return rows.take_error();
  for (bool cb : {false, true}) {
    std::vector<int> seen(256, 0);
    for (const auto& e : out)
      if (e.cb == cb) seen[e.code]++;
    for (int c = 0; c < 256; ++c)
      if (seen[c] != 1) {
        std::ostringstream m;
        m << path << ": " << (cb ? "cb" : "base") << " opcode " << std::hex << c << " appears "
          << std::dec << seen[c] << " times (each of the 256 must appear once)";
        return make_error(ErrorKind::Template, m.str());
      }
  }
  return out;
}

// The family -> role table (manifest "family_roles"); every family the opcode table uses must
// have a row, so a new control-flow family cannot pass as straight-line code.
Status assign_roles(std::vector<OpcodeEntry>& ops, const std::string& text, const std::string& path,
                    const std::string& table_path) {
  std::map<std::string, FlowRole> roles;
  Status rows = for_each_row(
      text, path, [&](const std::vector<std::string>& cols, const auto& bad) -> Status {
        if (cols.size() != 2)
          return bad("expected 2 tab-separated columns (family, role), got " +
                     std::to_string(cols.size()));
        FlowRole r = FlowRole::Plain;
        bool known = false;
        for (FlowRole c : {FlowRole::Plain, FlowRole::Jump, FlowRole::Branch, FlowRole::EndAfter,
                           FlowRole::Excluded})
          if (cols[1] == to_string(c)) r = c, known = true;
        if (!known)
          return bad("unknown role '" + cols[1] +
                     "' (one of plain, jump, branch, end_after, excluded)");
        if (!roles.emplace(cols[0], r).second) return bad("family " + cols[0] + " listed twice");
        return ok_status();
      });
  if (!rows) return rows;
  for (auto& e : ops) {
    auto it = roles.find(e.family);
    if (it == roles.end()) {
      char where[32];
      std::snprintf(where, sizeof where, "%s opcode %02X", e.cb ? "cb" : "base", e.code);
      return make_error(ErrorKind::Template,
                        table_path + ": " + where + " (" + e.mnemonic + "): family " + e.family +
                            " has no control-flow role: declare it in " + path +
                            " (plain, jump, branch, end_after or excluded)");
    }
    e.role = it->second;
  }
  return ok_status();
}

}  // namespace

const char* to_string(FlowRole r) {
  switch (r) {
    case FlowRole::Plain:
      return "plain";
    case FlowRole::Jump:
      return "jump";
    case FlowRole::Branch:
      return "branch";
    case FlowRole::EndAfter:
      return "end_after";
    case FlowRole::Excluded:
      return "excluded";
  }
  return "?";
}

namespace {
std::mutex g_root_mutex;
fs::path g_root_override;
}  // namespace

void TemplateBundle::set_default_root(const fs::path& root) {
  std::lock_guard<std::mutex> lock(g_root_mutex);
  g_root_override = root;
}

fs::path TemplateBundle::default_root() {
  if (const char* env = std::getenv("GBX_TEMPLATE_DIR"); env && *env) return env;
  {
    std::lock_guard<std::mutex> lock(g_root_mutex);
    if (!g_root_override.empty()) return g_root_override;
  }
  std::error_code ec;
  if (fs::exists(fs::path(GBX_SOURCE_TEMPLATE_DIR) / "manifest.json", ec))
    return GBX_SOURCE_TEMPLATE_DIR;
  return GBX_INSTALL_TEMPLATE_DIR;
}

Result<TemplateBundle> TemplateBundle::load(const fs::path& root) {
  TemplateBundle b;
  b.root_ = root;
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    return make_error(ErrorKind::Template, "template directory " + root.string() + " not found");
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    std::ifstream f(it->path(), std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    b.files_.emplace_back(fs::relative(it->path(), root).generic_string(), ss.str());
  }
  if (ec) return make_error(ErrorKind::Template, "cannot read templates: " + ec.message());
  std::sort(b.files_.begin(), b.files_.end());
  // The bundle hash covers every path and byte, length-prefixed, in path order.
  std::string all;
  for (const auto& [path, body] : b.files_) {
    all += std::to_string(path.size()) + ":" + path + std::to_string(body.size()) + ":" + body;
  }
  b.hash_ = sha256_hex(all);
  auto manifest = b.file("manifest.json");
  if (!manifest) return manifest.take_error();
  nlohmann::json m = nlohmann::json::parse(manifest.value(), nullptr, false);
  if (m.is_discarded() || !m.is_object())
    return make_error(ErrorKind::Template, "templates/manifest.json is not valid JSON");
  const std::string table_path = m.value("opcode_table", "");
  auto table = b.file(table_path);
  if (!table) return table.take_error();
  auto ops = parse_opcode_table(table.value(), "templates/" + table_path);
  if (!ops) return ops.take_error();
  const std::string roles_path = m.value("family_roles", "");
  if (roles_path.empty())
    return make_error(ErrorKind::Template, "templates/manifest.json names no family_roles");
  auto roles = b.file(roles_path);
  if (!roles) return roles.take_error();
  if (auto st = assign_roles(ops.value(), roles.value(), "templates/" + roles_path,
                             "templates/" + table_path);
      !st)
    return st.take_error();
  b.opcodes_ = std::move(ops.value());
  return b;
}

Result<std::string> TemplateBundle::file(const std::string& rel) const {
  auto it = std::lower_bound(files_.begin(), files_.end(), rel,
                             [](const auto& p, const std::string& k) { return p.first < k; });
  if (it == files_.end() || it->first != rel)
    return make_error(ErrorKind::Template, "template file templates/" + rel + " not found");
  return it->second;
}

}  // namespace gbx
