// Looking the driver's entry points up in libcuda, for both lists (cuda_driver.hpp).
#pragma once

#include <dlfcn.h>

#include <string>

namespace hipxx::backend::cuda {

// Sets `slot` to the symbol `name` of `library`, or adds `name` to the comma-separated `missing`.
template <class Function>
void resolve_entry_point(void* library, const char* name, Function& slot, std::string& missing) {
  if (void* symbol = dlsym(library, name); symbol != nullptr) {
    slot = reinterpret_cast<Function>(symbol);
    return;
  }
  missing += (missing.empty() ? "" : ", ") + std::string{name};
}

}  // namespace hipxx::backend::cuda
