// The divergence meter's weights: each dispatch unit's instruction count in the kernel's PTX
// (docs/internals/divergence.md "Weights"). NVVM lowers a switch to a tree of compares on the
// switch value (no jump table in PTX); walking that tree with the set of values each edge
// allows finds every case's first block. A case costs the instructions of the tree nodes on
// its path (lanes of different cases part there) plus the blocks reachable from its first
// block without passing a tree node, less those every case reaches (the loop top and all
// after it, which the lanes run together).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <queue>
#include <regex>
#include <set>
#include <sstream>

#include "gbx/measure/bench/divergence.h"

namespace gbx {

namespace {

struct Block {
  std::string label;
  std::vector<std::string> instrs;
  std::vector<int> succ;
  // Marks of the uniform path ("gbx-part 3", "gbx-path end": inline-asm comments of
  // sm83/uniform.h), at the instruction index they stand before.
  std::vector<std::pair<size_t, std::string>> marks;
};

struct Func {
  std::string name;
  std::vector<Block> blocks;
};

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// Functions with bodies, their blocks and edges. Instructions are the lines ending in ';'
// that are not directives (.reg, .loc, .param, ...).
std::vector<Func> parse_ptx(const std::string& ptx) {
  std::vector<Func> funcs;
  std::istringstream in(ptx);
  std::string line, pending_name;
  bool in_body = false;
  Func cur;
  std::map<std::string, std::vector<std::string>> tables;  // .branchtargets lists
  static const std::regex header(
      R"(^(\.visible |\.weak |\.extern )*\.(entry|func)\b.*?([A-Za-z_$][\w$]*)\()");
  while (std::getline(in, line)) {
    const std::string t = trim(line);
    if (!in_body) {
      std::smatch m;
      if (std::regex_search(line, m, header)) pending_name = m[3];
      if (!pending_name.empty() && t == "{") {
        in_body = true;
        cur = Func{pending_name, {}};
        cur.blocks.push_back(Block{"", {}, {}, {}});
        pending_name.clear();
      } else if (!pending_name.empty() && !t.empty() && t.back() == ';') {
        pending_name.clear();  // a prototype
      }
      continue;
    }
    if (line == "}") {
      funcs.push_back(std::move(cur));
      in_body = false;
      continue;
    }
    if (t.rfind("// gbx-", 0) == 0) {
      cur.blocks.back().marks.emplace_back(cur.blocks.back().instrs.size(), t.substr(3));
      continue;
    }
    if (t.empty() || t[0] == '.' || t[0] == '{' || t[0] == '}' || t.rfind("//", 0) == 0) continue;
    if (t.back() == ':') {
      cur.blocks.push_back(Block{t.substr(0, t.size() - 1), {}, {}, {}});
      continue;
    }
    const size_t colon = t.find(':');
    if (colon != std::string::npos && t.find(".branchtargets") != std::string::npos) {
      std::string rest = t.substr(t.find(".branchtargets") + 14);
      std::vector<std::string> targets;
      std::stringstream ss(rest);
      std::string item;
      while (std::getline(ss, item, ',')) {
        item = trim(item);
        if (!item.empty() && item.back() == ';') item.pop_back();
        targets.push_back(trim(item));
      }
      tables[t.substr(0, colon)] = targets;
      continue;
    }
    if (t.back() != ';') continue;
    cur.blocks.back().instrs.push_back(t);
    // A branch ends the block; what follows starts an unnamed one.
    const std::string op = t[0] == '@' ? trim(t.substr(t.find_first_of(" \t"))) : t;
    if (op.rfind("bra", 0) == 0 || op.rfind("ret", 0) == 0 || op.rfind("exit", 0) == 0 ||
        op.rfind("brx.idx", 0) == 0)
      cur.blocks.push_back(Block{"", {}, {}, {}});
  }
  // Edges.
  for (Func& f : funcs) {
    std::map<std::string, int> at;
    for (size_t i = 0; i < f.blocks.size(); ++i)
      if (!f.blocks[i].label.empty()) at[f.blocks[i].label] = (int)i;
    for (size_t i = 0; i < f.blocks.size(); ++i) {
      Block& b = f.blocks[i];
      const std::string last = b.instrs.empty() ? "" : b.instrs.back();
      const bool pred = !last.empty() && last[0] == '@';
      const std::string op = pred ? trim(last.substr(last.find_first_of(" \t"))) : last;
      auto target = [&](const std::string& s) {
        const auto it = at.find(trim(s.substr(0, s.find(';'))));
        if (it != at.end()) b.succ.push_back(it->second);
      };
      bool falls = true;
      if (op.rfind("brx.idx", 0) == 0) {
        const std::string name = trim(op.substr(op.rfind(',') + 1));
        for (const auto& t : tables[name.substr(0, name.find(';'))]) target(t);
        falls = false;
      } else if (op.rfind("bra", 0) == 0) {
        target(trim(op.substr(op.find_first_of(" \t"))));
        falls = pred;
      } else if (op.rfind("ret", 0) == 0 || op.rfind("exit", 0) == 0) {
        falls = pred;
      }
      if (falls && i + 1 < f.blocks.size()) b.succ.push_back((int)i + 1);
    }
  }
  return funcs;
}

// A conditional branch on a compare of the switch value: (value + offset) CMP imm.
struct Test {
  std::string cmp;
  int bits = 32;
  bool is_signed = false;
  int64_t offset = 0, imm = 0;
  bool negate = false;  // @!%p
  int taken = -1;
  bool holds(int64_t v) const {
    const uint64_t mask = bits >= 64 ? ~0ull : ((1ull << bits) - 1);
    const uint64_t u = (uint64_t)(v + offset) & mask, k = (uint64_t)imm & mask;
    int64_t s = (int64_t)u, sk = (int64_t)k;
    if (is_signed && bits < 64 && (u >> (bits - 1))) s -= (int64_t)1 << bits;
    if (is_signed && bits < 64 && (k >> (bits - 1))) sk -= (int64_t)1 << bits;
    bool r = false;
    if (cmp == "eq") r = u == k;
    if (cmp == "ne") r = u != k;
    if (cmp == "lt") r = is_signed ? s < sk : u < k;
    if (cmp == "le") r = is_signed ? s <= sk : u <= k;
    if (cmp == "gt") r = is_signed ? s > sk : u > k;
    if (cmp == "ge") r = is_signed ? s >= sk : u >= k;
    if (cmp == "lo") r = u < k;
    if (cmp == "ls") r = u <= k;
    if (cmp == "hi") r = u > k;
    if (cmp == "hs") r = u >= k;
    return r != negate;
  }
};

int64_t parse_imm(const std::string& s) {
  return (int64_t)std::strtoll(s.c_str(), nullptr, s.rfind("0x", 0) == 0 ? 16 : 10);
}

// The switch of one function: the register compared with the most immediates, its copies
// (mov, cvt, and 255) and offsets (add imm), and each block's test on them, if any.
struct Switch {
  std::map<std::string, int64_t> alias;  // register -> offset added to the switch value
  std::map<int, Test> tests;             // block -> its closing test
  int root = -1;                         // the tree's root where a mark says (else found)
};

Switch find_switch(const Func& f) {
  static const std::regex setp(
      R"(^setp\.(\w+)\.([sub])(\d+)\s+(%p\d+),\s*(%\w+),\s*(-?(?:0x)?[0-9A-Fa-f]+);)");
  static const std::regex copy(
      R"(^(?:mov|cvt(?:\.\w+)*|and)\.?\w*\s+(%\w+),\s*(%\w+)(?:,\s*255)?;)");
  static const std::regex add(R"(^add\.[su]\d+\s+(%\w+),\s*(%\w+),\s*(-?\d+);)");
  std::map<std::string, int> counts;
  for (const Block& b : f.blocks)
    for (const std::string& i : b.instrs) {
      std::smatch m;
      if (std::regex_search(i, m, setp)) ++counts[m[5]];
    }
  Switch sw;
  if (counts.empty()) return sw;
  auto top = std::max_element(counts.begin(), counts.end(),
                              [](const auto& a, const auto& b) { return a.second < b.second; });
  // A uniform-dispatch kernel marks its opcode switch ("// gbx-path switch", sm83/uniform.h):
  // the register of the first compare after the mark, whatever else has more compares (its
  // switch has ~90 cases, fewer than an inlined I/O register switch may have).
  for (size_t b0 = 0; b0 < f.blocks.size(); ++b0)
    for (const auto& [pos0, mark] : f.blocks[b0].marks) {
      if (mark != "gbx-path switch") continue;
      std::set<int> seen{(int)b0};
      std::vector<std::pair<int, size_t>> todo{{(int)b0, pos0}};
      std::string reg;
      while (!todo.empty() && reg.empty()) {
        const auto [b, from] = todo.front();
        todo.erase(todo.begin());
        for (size_t i = from; i < f.blocks[b].instrs.size() && reg.empty(); ++i) {
          std::smatch m;
          if (std::regex_search(f.blocks[b].instrs[i], m, setp)) {
            reg = m[5];
            sw.root = b;
          }
        }
        for (int s : f.blocks[b].succ)
          if (seen.insert(s).second) todo.push_back({s, 0});
      }
      if (counts.count(reg)) top = counts.find(reg);
    }
  if (top->second < 2) return sw;
  sw.alias[top->first] = 0;
  for (bool grew = true; grew;) {  // copies and offsets of the value, to a fixed point
    grew = false;
    for (const Block& b : f.blocks)
      for (const std::string& i : b.instrs) {
        std::smatch m;
        if (std::regex_search(i, m, copy) && sw.alias.count(m[2]) && !sw.alias.count(m[1])) {
          sw.alias[m[1]] = sw.alias[m[2]];
          grew = true;
        } else if (std::regex_search(i, m, add) && sw.alias.count(m[2]) && !sw.alias.count(m[1])) {
          sw.alias[m[1]] = sw.alias[m[2]] + parse_imm(m[3]);
          grew = true;
        }
      }
  }
  std::map<std::string, int> label_at;
  for (size_t i = 0; i < f.blocks.size(); ++i) label_at[f.blocks[i].label] = (int)i;
  for (size_t bi = 0; bi < f.blocks.size(); ++bi) {
    const Block& b = f.blocks[bi];
    if (b.instrs.empty() || b.instrs.back()[0] != '@') continue;
    const std::string& br = b.instrs.back();
    const bool neg = br[1] == '!';
    const std::string pred = br.substr(neg ? 2 : 1, br.find_first_of(" \t") - (neg ? 2 : 1));
    for (auto it = b.instrs.rbegin() + 1; it != b.instrs.rend(); ++it) {
      std::smatch m;
      if (!std::regex_search(*it, m, setp) || m[4] != pred) continue;
      if (!sw.alias.count(m[5])) break;
      Test t;
      t.cmp = m[1];
      t.is_signed = m[2] == "s";
      t.bits = std::atoi(m[3].str().c_str());
      t.offset = sw.alias[m[5]];
      t.imm = parse_imm(m[6]);
      t.negate = neg;
      const std::string target = trim(br.substr(br.rfind(' ') + 1));
      const auto at = label_at.find(target.substr(0, target.find(';')));
      if (at == label_at.end()) break;
      t.taken = at->second;
      sw.tests[(int)bi] = t;
      break;
    }
  }
  return sw;
}

struct Cases {
  std::map<int64_t, int> entry;    // value -> first block of its case
  std::map<int64_t, double> path;  // value -> instructions of the tree nodes on its path
  std::set<int> tree;              // the tree's blocks
};

// Walks the tree from its root with the values 0..domain-1.
Cases walk(const Func& f, const Switch& sw, int64_t domain) {
  Cases c;
  if (sw.tests.empty()) return c;
  std::set<int> targets;
  for (const auto& [b, t] : sw.tests) {
    targets.insert(t.taken);
    for (int s : f.blocks[b].succ) targets.insert(s);
  }
  int root = sw.tests.count(sw.root) ? sw.root : -1;
  for (const auto& [b, t] : sw.tests)
    if (root < 0 && !targets.count(b)) {
      root = b;
      break;
    }
  if (root < 0) return c;
  std::vector<int64_t> all(domain);
  for (int64_t v = 0; v < domain; ++v) all[v] = v;
  struct Item {
    int block;
    std::vector<int64_t> values;
    double cost;
  };
  std::vector<Item> stack{{root, all, 0}};
  size_t steps = 0;
  while (!stack.empty()) {
    Item it = std::move(stack.back());
    stack.pop_back();
    if (it.values.empty()) continue;
    const Block& b = f.blocks[it.block];
    const auto t = sw.tests.find(it.block);
    // A block of nothing but a branch passes the values on.
    const bool trampoline = b.instrs.size() == 1 && b.instrs[0].rfind("bra", 0) == 0;
    if (t == sw.tests.end() && !trampoline) {
      for (int64_t v : it.values) {
        c.entry[v] = it.block;
        c.path[v] = it.cost;
      }
      continue;
    }
    if (++steps > 100000) break;  // a malformed tree: what was found so far
    c.tree.insert(it.block);
    const double cost = it.cost + (double)b.instrs.size();
    if (trampoline) {
      stack.push_back({b.succ.empty() ? it.block : b.succ[0], it.values, cost});
      if (b.succ.empty()) c.tree.erase(it.block);
      continue;
    }
    std::vector<int64_t> yes, no;
    for (int64_t v : it.values) (t->second.holds(v) ? yes : no).push_back(v);
    int fall = -1;
    for (int s : b.succ)
      if (s != t->second.taken) fall = s;
    stack.push_back({t->second.taken, yes, cost});
    if (fall >= 0) stack.push_back({fall, no, cost});
  }
  return c;
}

std::set<int> reach(const Func& f, int from, const std::set<int>& stop) {
  std::set<int> seen{from};
  std::vector<int> todo{from};
  while (!todo.empty()) {
    const int b = todo.back();
    todo.pop_back();
    for (int s : f.blocks[b].succ)
      if (!stop.count(s) && seen.insert(s).second) todo.push_back(s);
  }
  return seen;
}

// value -> cost of its case. common: drop the blocks every case reaches (gbx_step's loop);
// else a case keeps all it reaches (a function's return path runs once per call).
std::map<int64_t, double> case_costs(const Func& f, int64_t domain, bool common, double* loop_top) {
  const Switch sw = find_switch(f);
  const Cases c = walk(f, sw, domain);
  std::map<int, std::set<int>> reached;
  for (const auto& [v, e] : c.entry)
    if (!reached.count(e)) reached[e] = reach(f, e, c.tree);
  // Shared: the blocks more than half the cases reach. Not all: the cases that trap (illegal
  // opcodes) leave the loop and never reach its top.
  std::set<int> shared;
  if (common) {
    std::map<int, size_t> hits;
    for (const auto& [e, r] : reached)
      for (int b : r) ++hits[b];
    for (const auto& [b, n] : hits)
      if (2 * n > reached.size()) shared.insert(b);
  }
  std::map<int64_t, double> out;
  for (const auto& [v, e] : c.entry) {
    double n = c.path.at(v);
    for (int b : reached[e])
      if (!shared.count(b)) n += (double)f.blocks[b].instrs.size();
    out[v] = n;
  }
  if (loop_top && common) {
    // The loop top: the fewest instructions from where a case joins the shared blocks back
    // to the tree's root (Dijkstra over block sizes), what every iteration runs.
    std::map<int, double> dist;
    using QI = std::pair<double, int>;
    std::priority_queue<QI, std::vector<QI>, std::greater<QI>> q;
    for (const auto& [e, r] : reached)
      for (int b : r)
        if (!shared.count(b))
          for (int s : f.blocks[b].succ)
            if (shared.count(s) && !dist.count(s)) {
              dist[s] = (double)f.blocks[s].instrs.size();
              q.push({dist[s], s});
            }
    double best = -1;
    while (!q.empty()) {
      const auto [d, b] = q.top();
      q.pop();
      if (d > dist[b]) continue;
      for (int s : f.blocks[b].succ) {
        if (c.tree.count(s)) {
          if (best < 0 || d < best) best = d;
          continue;
        }
        const double nd = d + (double)f.blocks[s].instrs.size();
        if (!dist.count(s) || nd < dist[s]) {
          dist[s] = nd;
          q.push({nd, s});
        }
      }
    }
    *loop_top = best < 0 ? 0 : best;
  }
  return out;
}

// Instructions of the region from mark `open` to mark `close` (sm83/uniform.h): the open
// mark's block from the mark on, then every block reachable from it, each up to a close mark
// (where the region ends on that path). -1 when the function has no `open` mark. Where NVVM
// duplicated the code (more than one `open`), the costliest copy.
double region_cost(const Func& f, const std::string& open, const std::string& close) {
  double best = -1;
  for (size_t b0 = 0; b0 < f.blocks.size(); ++b0)
    for (const auto& [pos0, mark] : f.blocks[b0].marks) {
      if (mark != open) continue;
      double n = 0;
      std::set<int> seen;
      std::vector<std::pair<int, size_t>> todo{{(int)b0, pos0}};
      while (!todo.empty()) {
        const auto [b, from] = todo.back();
        todo.pop_back();
        const Block& blk = f.blocks[b];
        size_t to = blk.instrs.size();
        bool closed = false;
        for (const auto& [pos, m] : blk.marks)
          if (m == close && pos >= from && pos <= to) {
            to = pos;
            closed = true;
          }
        n += (double)(to - from);
        if (closed) continue;
        for (int s : blk.succ)
          if (seen.insert(s).second) todo.push_back({s, 0});
      }
      best = std::max(best, n);
    }
  return best;
}

const Func* find_func(const std::vector<Func>& funcs, const std::regex& name) {
  for (const Func& f : funcs)
    if (std::regex_search(f.name, name)) return &f;
  return nullptr;
}

}  // namespace

Result<UnitWeights> ptx_weights(const std::string& ptx, const std::string& source_cu) {
  const std::vector<Func> funcs = parse_ptx(ptx);
  const Func* step = find_func(funcs, std::regex("^gbx_step$"));
  if (!step) return make_error(ErrorKind::Input, "the PTX has no gbx_step entry");
  UnitWeights w;
  const auto ops = case_costs(*step, 256, true, &w.loop_top);
  if (ops.size() < 200)
    return make_error(ErrorKind::Input, "gbx_step's opcode switch was not found in the PTX (" +
                                            std::to_string(ops.size()) + " of 256 cases)");
  // A uniform-dispatch kernel's table (sm83/uniform.h): its opcodes have no case, only the
  // tree's way out, so they stay out of the median the loop-top paths are priced at.
  std::set<int64_t> uniform_ops;
  if (const size_t at = source_cu.find("gbx_uniform_base[256] = {"); at != std::string::npos) {
    const char* p = source_cu.c_str() + source_cu.find('{', at) + 1;
    for (int64_t v = 0; v < 256; ++v) {
      char* end = nullptr;
      if (std::strtoul(p, &end, 0)) uniform_ops.insert(v);
      if (end == p || !(p = std::strchr(end, ','))) break;
      ++p;
    }
  }
  std::vector<double> sorted;
  for (const auto& [v, n] : ops) {
    w.cost[kTraceOp + (uint32_t)v] = n;
    if (!uniform_ops.count(v)) sorted.push_back(n);
  }
  std::sort(sorted.begin(), sorted.end());
  w.fallback = sorted[sorted.size() / 2];
  // The uniform path (dispatch=uniform): its parts, then the path less them.
  std::string uniform_note;
  const double path = region_cost(*step, "gbx-path begin", "gbx-path end");
  if (path >= 0) {
    double parts = 0;
    int found = 0;
    for (uint32_t k = 0; k < kTraceParts; ++k) {
      const double n =
          region_cost(*step, "gbx-part " + std::to_string(k), "gbx-part-end " + std::to_string(k));
      w.cost[kTracePart + k] = std::max(0.0, n);  // a part the source lacks is never traced
      if (n < 0) continue;
      parts += n;
      ++found;
    }
    w.cost[kTraceUniform] = std::max(0.0, path - parts);
    char ubuf[96];
    std::snprintf(ubuf, sizeof ubuf, "; uniform path %.0f, %d parts %.0f", path - parts, found,
                  parts);
    uniform_note = ubuf;
  }
  // warp_majority kernels: a lane that waits runs no unit (its loop top, the vote in it, is
  // what it executes); the vote's own instructions are named in the source note.
  w.cost[kTraceWait] = 0;
  if (const double vote = region_cost(*step, "gbx-path vote", "gbx-path vote end"); vote >= 0) {
    char vbuf[64];
    std::snprintf(vbuf, sizeof vbuf, "; warp vote %.0f in the loop top", vote);
    uniform_note += vbuf;
  }
  std::string cb_note = "CB from execute_cb";
  if (const Func* cb = find_func(funcs, std::regex("execute_cb"))) {
    const auto cbs = case_costs(*cb, 256, false, nullptr);
    for (const auto& [v, n] : cbs) w.cost[kTraceCb + (uint32_t)v] = n + w.at(kTraceOp + 0xCB);
  } else {
    cb_note = "CB at the median";
  }
  // Specialized blocks: "GBX_TRACE_BLOCK + Ku); ... return spec_fn_F(E, ..." in the source.
  static const std::regex call(
      R"(GBX_TRACE_BLOCK \+ (\d+)u\);[^\n]*\n\s*return spec_fn_(\d+)\((\d+),)");
  std::map<int, std::map<int64_t, double>> fn_costs;
  size_t blocks = 0, named = 0;
  for (auto it = std::sregex_iterator(source_cu.begin(), source_cu.end(), call);
       it != std::sregex_iterator(); ++it) {
    ++named;
    const uint32_t index = (uint32_t)std::stoul((*it)[1]);
    const int fn = std::stoi((*it)[2]);
    const int64_t entry = std::stoll((*it)[3]);
    if (!fn_costs.count(fn)) {
      const Func* f = find_func(funcs, std::regex("spec_fn_" + std::to_string(fn) + "\\D"));
      if (!f) continue;
      auto costs = case_costs(*f, 64, false, nullptr);
      if (costs.empty()) {  // one entry, no switch: the whole function
        double n = 0;
        for (const Block& b : f->blocks) n += (double)b.instrs.size();
        costs[0] = n;
      }
      fn_costs[fn] = std::move(costs);
    }
    const auto& costs = fn_costs[fn];
    const auto c = costs.find(entry);
    if (c == costs.end()) continue;
    w.cost[kTraceBlock + index] = c->second;
    ++blocks;
  }
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "ptx (%zu opcode cases, median %.0f, loop top %.0f; %s; %zu of %zu blocks%s; "
                "other blocks and loop-top paths at the median)",
                ops.size(), w.fallback, w.loop_top, cb_note.c_str(), blocks, named,
                uniform_note.c_str());
  w.source = buf;
  return w;
}

}  // namespace gbx
