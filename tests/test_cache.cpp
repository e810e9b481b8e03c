// On-disk kernel cache: key recipe, publish/lookup, corruption, races between processes,
// unwritable roots and root resolution. Every case works in its own temp dir, never in the
// user's cache.
// Processes, unwritable roots, list/clear and root resolution: test_cache/processes_and_roots.cpp.
#include <doctest/doctest.h>

#include "test_cache/common.h"

TEST_CASE("sha256_hex matches the FIPS 180-2 test vectors") {
  CHECK(gbx::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(gbx::sha256_hex("abc") ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(gbx::sha256_hex(std::string("a\0b", 3)) != gbx::sha256_hex("a"));
}

TEST_CASE("cache key: deterministic, follows the documented recipe, covers every field") {
  const CacheKeyInputs base = base_inputs();
  const std::string key = gbx::compute_cache_key(base);
  CHECK(key.size() == 64);
  CHECK(gbx::compute_cache_key(base_inputs()) == key);
  CHECK(key == reference_key(base));

  using Mutator = std::function<void(CacheKeyInputs&)>;
  const std::vector<std::pair<const char*, Mutator>> mutators = {
      {"engine_id", [](CacheKeyInputs& in) { in.engine_id += "+"; }},
      {"abi_version", [](CacheKeyInputs& in) { in.abi_version += 1; }},
      {"template_hash", [](CacheKeyInputs& in) { in.template_hash[0] ^= 1; }},
      {"source", [](CacheKeyInputs& in) { in.source += " "; }},
      {"device", [](CacheKeyInputs& in) { in.device = "cuda"; }},
      {"compiler_identity", [](CacheKeyInputs& in) { in.compiler_identity += ";+avx512f"; }},
      {"options: value", [](CacheKeyInputs& in) { in.options[0] = "-O3"; }},
      {"options: order", [](CacheKeyInputs& in) { std::swap(in.options[0], in.options[1]); }},
      {"options: extra", [](CacheKeyInputs& in) { in.options.push_back("-g"); }},
      {"options: extra empty", [](CacheKeyInputs& in) { in.options.push_back(""); }},
      {"options: fewer", [](CacheKeyInputs& in) { in.options.pop_back(); }},
      {"environment: value", [](CacheKeyInputs& in) { in.environment[0].second = "/usr"; }},
      {"environment: name", [](CacheKeyInputs& in) { in.environment[1].first = "LLVM_EN"; }},
      {"environment: order",
       [](CacheKeyInputs& in) { std::swap(in.environment[0], in.environment[1]); }},
      {"environment: extra",
       [](CacheKeyInputs& in) {
         in.environment.push_back({"", ""});
       }},
  };
  std::set<std::string> seen = {key};
  for (const auto& [name, mutate] : mutators) {
    CAPTURE(name);
    CacheKeyInputs in = base_inputs();
    mutate(in);
    const std::string k = gbx::compute_cache_key(in);
    CHECK(k != key);
    CHECK(k == reference_key(in));
    seen.insert(k);
  }
  CHECK(seen.size() == mutators.size() + 1);
}

TEST_CASE("cache key: length and count prefixes keep field boundaries unambiguous") {
  auto key_with = [](const std::function<void(CacheKeyInputs&)>& f) {
    CacheKeyInputs in = base_inputs();
    f(in);
    return gbx::compute_cache_key(in);
  };
  CHECK(key_with([](CacheKeyInputs& in) { in.source = "ab", in.device = "c"; }) !=
        key_with([](CacheKeyInputs& in) { in.source = "a", in.device = "bc"; }));
  CHECK(key_with([](CacheKeyInputs& in) {
          in.options = {"ab", "c"};
        }) != key_with([](CacheKeyInputs& in) {
          in.options = {"a", "bc"};
        }));
  CHECK(key_with([](CacheKeyInputs& in) { in.options = {"abc"}; }) !=
        key_with([](CacheKeyInputs& in) {
          in.options = {"a", "bc"};
        }));
  CHECK(key_with([](CacheKeyInputs& in) { in.options = {}; }) !=
        key_with([](CacheKeyInputs& in) { in.options = {""}; }));
  CHECK(key_with([](CacheKeyInputs& in) {
          in.environment = {{"ab", "c"}};
        }) != key_with([](CacheKeyInputs& in) {
          in.environment = {{"a", "bc"}};
        }));
  // The same string moved from the end of the options to the start of the environment.
  CHECK(key_with([](CacheKeyInputs& in) { in.options = {"X"}, in.environment = {}; }) !=
        key_with([](CacheKeyInputs& in) {
          in.options = {}, in.environment = {{"X", ""}};
        }));
}

TEST_CASE("publish then lookup is a hit with identical bytes and a complete meta.json") {
  TempDir t;
  KernelCache cache(t.path);
  const std::string key = gbx::sha256_hex("publish-lookup");
  const auto files = sample_files("a");
  std::vector<std::string> warnings;

  CHECK_FALSE(cache.lookup(key, &warnings).has_value());
  CHECK(warnings.empty());

  CacheEntry pub = cache.publish(key, files, json{{"device", "cpu"}}, &warnings);
  CHECK(warnings.empty());
  CHECK_FALSE(pub.in_memory());
  CHECK(pub.dir == t.path / "kernels" / "v1" / key.substr(0, 2) / key);
  CHECK(pub.dir == cache.entry_dir(key));
  check_entry_matches(pub, files);

  auto hit = cache.lookup(key, &warnings);
  REQUIRE(hit.has_value());
  CHECK(warnings.empty());
  CHECK(hit->key == key);
  CHECK_FALSE(hit->in_memory());
  check_entry_matches(*hit, files);
  CHECK(hit->meta["key"] == key);
  CHECK(hit->meta["device"] == "cpu");
  const std::string created = hit->meta["created"].get<std::string>();
  CHECK(created.size() == 20);  // YYYY-MM-DDTHH:MM:SSZ
  CHECK(created[10] == 'T');
  CHECK(created.back() == 'Z');
  CHECK(json::parse(read_bytes(pub.dir / "meta.json")) == hit->meta);
  CHECK(json::parse(hit->read("meta.json").value()) == hit->meta);
  CHECK_FALSE(hit->read("module.s").ok());
  CHECK(no_leftovers(tmp_root(cache)));

  SUBCASE("publishing an existing key keeps the valid entry") {
    CacheEntry again = cache.publish(key, files, json{{"device", "other"}}, &warnings);
    CHECK(warnings.empty());
    CHECK(again.dir == pub.dir);
    CHECK(again.meta["device"] == "cpu");
    CHECK(no_leftovers(tmp_root(cache)));
  }
  SUBCASE("a key that is not lowercase hex never touches the disk") {
    CacheEntry bad = cache.publish("../" + key, files, json::object(), &warnings);
    CHECK(bad.in_memory());
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find("invalid key") != std::string::npos);
    CHECK_FALSE(cache.lookup("../" + key, &warnings).has_value());
  }
}

TEST_CASE("a corrupt entry is a miss with a warning, is removed, and can be republished") {
  TempDir t;
  KernelCache cache(t.path);
  const std::string key = gbx::sha256_hex("corrupt");
  const auto files = sample_files("c");
  std::vector<std::string> warnings;
  const CacheEntry pub = cache.publish(key, files, json::object(), &warnings);
  REQUIRE(warnings.empty());
  REQUIRE_FALSE(pub.in_memory());
  const fs::path obj = pub.dir / "module.o";
  std::string expect_in_warning;

  SUBCASE("truncated module.o") {
    fs::resize_file(obj, 100);
    expect_in_warning = "module.o: size 100, expected 4096";
  }
  SUBCASE("flipped byte in module.o") {
    std::string bytes = read_bytes(obj);
    bytes[1234] = static_cast<char>(bytes[1234] ^ 0x40);
    write_bytes(obj, bytes);
    expect_in_warning = "module.o: sha256 mismatch";
  }
  SUBCASE("deleted source.cpp") {
    fs::remove(pub.dir / "source.cpp");
    expect_in_warning = "source.cpp: No such file";
  }
  SUBCASE("garbage meta.json") {
    write_bytes(pub.dir / "meta.json", "{\"key\": \"" + key + "\", garbage");
    expect_in_warning = "meta.json: not valid JSON";
  }
  SUBCASE("meta.json of another key") {
    json meta = json::parse(read_bytes(pub.dir / "meta.json"));
    meta["key"] = gbx::sha256_hex("other");
    write_bytes(pub.dir / "meta.json", meta.dump());
    expect_in_warning = "meta.json: key does not match";
  }
  SUBCASE("missing meta.json") {
    fs::remove(pub.dir / "meta.json");
    expect_in_warning = "meta.json: No such file";
  }

  auto miss = cache.lookup(key, &warnings);
  CHECK_FALSE(miss.has_value());
  REQUIRE(warnings.size() == 1);
  CAPTURE(warnings[0]);
  CHECK(starts_with(warnings[0], "cache: entry " + key.substr(0, 12) + " corrupt ("));
  CHECK(warnings[0].find(expect_in_warning) != std::string::npos);
  CHECK(ends_with(warnings[0], "); recompiling"));
  CHECK_FALSE(fs::exists(pub.dir));
  CHECK(no_leftovers(tmp_root(cache)));

  warnings.clear();
  CHECK_FALSE(cache.lookup(key, &warnings).has_value());  // gone: a plain miss now
  CHECK(warnings.empty());

  CacheEntry again = cache.publish(key, files, json::object(), &warnings);
  CHECK(warnings.empty());
  CHECK_FALSE(again.in_memory());
  auto hit = cache.lookup(key, &warnings);
  REQUIRE(hit.has_value());
  CHECK(warnings.empty());
  check_entry_matches(*hit, files);
}

TEST_CASE("publish over a corrupt entry that nobody looked up replaces it") {
  TempDir t;
  KernelCache cache(t.path);
  const std::string key = gbx::sha256_hex("replace");
  std::vector<std::string> warnings;
  const auto old_files = sample_files("old");
  CacheEntry pub = cache.publish(key, old_files, json::object(), &warnings);
  REQUIRE_FALSE(pub.in_memory());
  fs::resize_file(pub.dir / "module.o", 1);

  const auto files = sample_files("new", 8192);
  CacheEntry again = cache.publish(key, files, json::object(), &warnings);
  CHECK_FALSE(again.in_memory());
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("corrupt (module.o: size 1, expected 4096)") != std::string::npos);
  warnings.clear();
  auto hit = cache.lookup(key, &warnings);
  REQUIRE(hit.has_value());
  CHECK(warnings.empty());
  check_entry_matches(*hit, files);
  CHECK(no_leftovers(tmp_root(cache)));
}
