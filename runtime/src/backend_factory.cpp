#include "gbx/runtime/backend.h"

namespace gbx {
Result<std::unique_ptr<Backend>> make_backend(const std::string& name, const Rom&,
                                              const BackendConfig&) {
  return make_error(ErrorKind::Usage, "unknown backend '" + name + "'");
}
}  // namespace gbx
