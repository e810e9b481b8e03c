#pragma once
// The CLI11 flag of a declared option (gbx/runtime/backends/options.h): its flag, doc, the
// surface's default and its allowed values all come from the declaration. A subcommand binds either
// a variable of its own or a slot of an OptionValues (then apply_options makes BackendConfig).
#include <CLI/CLI.hpp>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "gbx/runtime/backends/options.h"

namespace gbx::tool {

namespace detail {

inline const OptionDecl& declared(Surface s, const char* name) {
  const OptionDecl* d = find_option(name);
  if (!d || !d->on(s) || d->flag.empty())
    throw std::logic_error(std::string("option '") + name + "' is not declared for this command");
  return *d;
}

// A Bool whose default on this surface is true cannot be a flag: it is `FLAG on|off`.
inline bool on_off(const OptionDecl& d, Surface s) {
  return d.type == OptionType::Bool && cli_default(d.default_on(s)) == "true";
}

// Allowed values, checked at parse time: "unknown stage 'x' (a, b)".
inline CLI::Validator choices_check(const OptionDecl& d, std::vector<std::string> allowed) {
  std::string list, desc;
  for (const auto& c : allowed) {
    list += (list.empty() ? "" : ", ") + c;
    desc += (desc.empty() ? "" : ",") + c;
  }
  const std::string what = d.flag.substr(2);
  return CLI::Validator(
      [allowed, list, what](std::string& in) -> std::string {
        for (const auto& c : allowed)
          if (c == in) return "";
        return "unknown " + what + " '" + in + "' (" + list + ")";
      },
      "{" + desc + "}");
}

template <typename T>
CLI::Option* add(CLI::App* c, Surface s, const OptionDecl& d, T& var,
                 std::vector<std::string> also) {
  const std::string def = cli_default(d.default_on(s));
  if constexpr (std::is_same_v<T, bool>) {
    if (!on_off(d, s)) {
      var = false;
      return c->add_flag(d.flag, var, d.doc_on(s));
    }
    var = true;
    return c->add_option(d.flag, var, d.doc_on(s) + " (on | off)")
        ->check(choices_check(d, {"on", "off"}))
        ->default_str("on");
  } else {
    if constexpr (std::is_same_v<T, std::string>)
      var = def;
    else
      var = (T)std::stoll(def);
    CLI::Option* opt = c->add_option(d.flag, var, d.doc_on(s))->capture_default_str();
    if (!d.choices.empty()) {
      std::vector<std::string> allowed = d.choices;
      allowed.insert(allowed.end(), also.begin(), also.end());
      opt->check(choices_check(d, allowed));
    }
    return opt;
  }
}

}  // namespace detail

// The declared option `name` on subcommand c (surface s), bound to var (string, integer or
// bool); `also`: values this command takes beyond the declared ones ("all" stages).
template <typename T>
CLI::Option* add_declared(CLI::App* c, Surface s, const char* name, T& var,
                          std::vector<std::string> also = {}) {
  return detail::add(c, s, detail::declared(s, name), var, std::move(also));
}

// The same bound to values[name], typed by the declaration (int, bool or string).
inline CLI::Option* add_declared(CLI::App* c, Surface s, const char* name, OptionValues& values) {
  const OptionDecl& d = detail::declared(s, name);
  OptionValue& slot = values[d.name];
  switch (d.type) {
    case OptionType::Int:
      slot = int64_t{0};
      return detail::add(c, s, d, std::get<int64_t>(slot), {});
    case OptionType::Bool:
      slot = false;
      return detail::add(c, s, d, std::get<bool>(slot), {});
    default:
      slot = std::string();
      return detail::add(c, s, d, std::get<std::string>(slot), {});
  }
}

}  // namespace gbx::tool
