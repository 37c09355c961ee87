// hipxx's own entry points (include/hipxx/hipxx_ext.h).
#include "api/guard.hpp"

#include <hipxx/hipxx_ext.h>

using hipxx::api::guarded;
using hipxx::core::Runtime;

extern "C" {

const char* hipxxGetBackendName(void) {
  try {
    Runtime& runtime = Runtime::instance();
    return runtime.status() == hipSuccess ? runtime.backend().name().data() : nullptr;
  } catch (...) {
    return nullptr;
  }
}

const char* hipxxGetBackendError(void) {
  try {
    return Runtime::instance().selection_error().c_str();
  } catch (...) {
    return "the runtime could not start";
  }
}

const char* hipxxGetStreamEngine(void) {
  try {
    Runtime& runtime = Runtime::instance();
    return runtime.status() == hipSuccess ? runtime.stream_engine().c_str() : nullptr;
  } catch (...) {
    return nullptr;
  }
}

hipError_t hipxxGetBookCounts(hipxxBookCounts* counts) {
  return guarded([&](Runtime& runtime) {
    if (counts == nullptr) return hipErrorInvalidValue;
    const hipxx::core::BookCounts books = runtime.counts();
    *counts = {books.reservations, books.mappings, books.allocations, books.linear_allocations};
    return hipSuccess;
  });
}

hipError_t hipxxGetReservationMappingCount(void* base, size_t* count) {
  return guarded([&](Runtime& runtime) { return runtime.reservation_mapping_count(base, count); });
}

}  // extern "C"
