#include <algorithm>
#include <cstdlib>
#include <fstream>
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

Result<std::vector<OpcodeEntry>> parse_opcode_table(const std::string& text,
                                                    const std::string& path) {
  std::vector<OpcodeEntry> out;
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
    const auto cols = split(line, '\t');
    auto bad = [&](const std::string& why) {
      return make_error(ErrorKind::Template, path + ":" + std::to_string(lineno) + ": " + why);
    };
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
  }
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

}  // namespace

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
