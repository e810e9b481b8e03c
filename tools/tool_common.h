#pragma once
// The only place errors become stderr lines and exit codes.
#include <cstdio>
#include <string>
#include <vector>

#include "gbx/engine/result.h"

namespace gbx::tool {

inline int exit_code(const Error& e) {
  switch (e.kind) {
    case ErrorKind::Usage:
      return 2;
    case ErrorKind::NoDevice:
      return 3;
    default:
      return 1;
  }
}

// One line naming the problem; the detail (compiler log, ...) follows only when asked for.
inline int fail(const Error& e, bool verbose = false) {
  std::fprintf(stderr, "error: %s\n", e.message.c_str());
  if (verbose && !e.detail.empty())
    std::fprintf(stderr, "%s\n", e.detail.c_str());
  else if (e.kind == ErrorKind::Compile && !e.detail.empty())
    std::fprintf(stderr, "%s", e.detail.c_str());
  return exit_code(e);
}

// A run is whole steps: --frames must be a multiple of --frames-per-step (both >= 1), or the
// run would silently do more frames than asked for.
inline Status check_whole_steps(long long frames, long long frames_per_step) {
  if (frames % frames_per_step == 0) return ok_status();
  const long long below = frames / frames_per_step * frames_per_step;
  const long long above = below + frames_per_step;
  return make_error(ErrorKind::Usage,
                    "--frames " + std::to_string(frames) + " is not a multiple of " +
                        "--frames-per-step " + std::to_string(frames_per_step) +
                        " (a run is whole steps): use --frames " +
                        (below > 0 ? std::to_string(below) + " or " : "") + std::to_string(above));
}

inline void print_warnings(const std::vector<std::string>& warnings) {
  for (const auto& w : warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
}

}  // namespace gbx::tool
