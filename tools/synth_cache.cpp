// gbx-synth cache list / show / path / clear: inspect or clear the kernel cache.
#include <cstdio>

#include "commands.h"
#include "synth_common.h"

namespace gbx::tool {
namespace {

struct CacheOptions {
  bool json = false;
  std::string prefix;
};

uint64_t entry_bytes(const CacheEntry& e) {
  uint64_t n = 0;
  if (auto f = e.meta.find("files"); f != e.meta.end() && f->is_object())
    for (const auto& rec : *f) n += rec.value("size", uint64_t{0});
  return n;
}

std::string meta_str(const json& meta, const char* a, const char* b = nullptr) {
  const json* j = &meta;
  for (const char* k : {a, b}) {
    if (!k) break;
    auto it = j->find(k);
    if (it == j->end()) return "?";
    j = &*it;
  }
  return j->is_string() ? j->get<std::string>() : j->dump();
}

std::string entry_target(const json& meta) {
  if (auto a = meta.find("archs"); a != meta.end() && a->is_array()) {
    std::string s;
    for (const auto& x : *a) s += (s.empty() ? "" : ",") + x.get<std::string>();
    return s;
  }
  return meta_str(meta, "device");
}

int cmd_cache_list(const CacheOptions& o) {
  KernelCache cache;
  const auto entries = cache.list();
  if (o.json) {
    json out = json::array();
    for (const CacheEntry& e : entries)
      out.push_back({{"key", e.key},
                     {"dir", e.dir.string()},
                     {"device", e.meta.value("device", "")},
                     {"synthesis", e.meta.value("synthesis", json::object())},
                     {"compiler_identity", e.meta.value("compiler_identity", "")},
                     {"archs", e.meta.value("archs", json::array())},
                     {"created", e.meta.value("created", "")},
                     {"bytes", entry_bytes(e)}});
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%-16s  %-6s %-13s %-8s %-12s %-12s %10s  %s\n", "KEY", "DEVICE", "STAGE", "MEMORY",
              "RUN MODE", "TARGET", "BYTES", "CREATED");
  for (const CacheEntry& e : entries)
    std::printf("%-16s  %-6s %-13s %-8s %-12s %-12s %10llu  %s\n", e.key.substr(0, 16).c_str(),
                meta_str(e.meta, "device").c_str(), meta_str(e.meta, "synthesis", "stage").c_str(),
                meta_str(e.meta, "synthesis", "memory_model").c_str(),
                meta_str(e.meta, "synthesis", "run_mode").c_str(), entry_target(e.meta).c_str(),
                (unsigned long long)entry_bytes(e), meta_str(e.meta, "created").c_str());
  std::printf("%zu entries in %s\n", entries.size(), cache.root().string().c_str());
  return 0;
}

int cmd_cache_show(const CacheOptions& o) {
  KernelCache cache;
  auto e = cache.find_prefix(o.prefix);
  if (!e) return fail(e.error());
  const json& m = e->meta;
  std::printf("key        %s\n", e->key.c_str());
  std::printf("dir        %s\n", e->dir.string().c_str());
  std::printf("synthesis  %s\n", meta_str(m, "synthesis", "canonical").c_str());
  std::printf("compiler   %s\n", meta_str(m, "compiler_identity").c_str());
  std::string opts;
  for (const auto& x : m.value("options", json::array())) opts += " " + x.get<std::string>();
  std::printf("options   %s\n", opts.c_str());
  std::printf("created    %s\n", meta_str(m, "created").c_str());
  std::printf("timings    %s\n", m.value("timings_ms", json::object()).dump().c_str());
  for (const CudaArchInfo& a : cuda_arch_info_from_meta(m))
    std::printf("%-10s %s, shared %d B, const %d B, cubin %zu B, compiled in %.0f ms\n",
                a.arch.c_str(), usage_line(a.usage).c_str(), a.usage.shared_bytes,
                a.usage.const_bytes, a.cubin_bytes, a.compile_ms);
  std::printf("files\n");
  if (auto f = m.find("files"); f != m.end() && f->is_object())
    for (auto it = f->begin(); it != f->end(); ++it)
      std::printf("  %s (%llu bytes)\n", (e->dir / it.key()).string().c_str(),
                  (unsigned long long)it.value().value("size", uint64_t{0}));
  std::printf("  %s\n", (e->dir / "meta.json").string().c_str());
  return 0;
}

}  // namespace

void register_cache(CLI::App& app, Commands& cmds) {
  static CacheOptions cache;
  auto* ca = app.add_subcommand("cache", "inspect or clear the kernel cache");
  ca->require_subcommand(1);
  auto* ls = ca->add_subcommand("list", "one line per entry");
  ls->add_flag("--json", cache.json, "JSON array instead of a table");
  cmds.emplace_back(ls, [] { return cmd_cache_list(cache); });
  auto* show = ca->add_subcommand("show", "an entry's meta.json summary and artifact paths");
  show->add_option("key", cache.prefix, "key or unique key prefix")->required();
  cmds.emplace_back(show, [] { return cmd_cache_show(cache); });
  auto* path = ca->add_subcommand("path", "print the cache root");
  cmds.emplace_back(path, [] {
    std::printf("%s\n", KernelCache().root().string().c_str());
    return 0;
  });
  auto* clear = ca->add_subcommand("clear", "delete every cached kernel");
  cmds.emplace_back(clear, [] {
    KernelCache kc;
    if (Status st = kc.clear(); !st) return fail(st.error());
    std::printf("cleared %s\n", kc.root().string().c_str());
    return 0;
  });
}

}  // namespace gbx::tool
