/* hipxx's own C entry points beside HIP's: which backend runs, and what the books hold. */
#ifndef HIPXX_HIPXX_EXT_H
#define HIPXX_HIPXX_EXT_H

#include <hipxx/hip_runtime_api.h>

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Counts of what the runtime's books hold right now; tests use them to prove nothing leaked. */
typedef struct hipxxBookCounts {
  size_t reservations;
  size_t mappings;
  size_t allocations;       /* physical allocations still alive, mapped or held */
  size_t linearAllocations; /* hipMalloc allocations */
} hipxxBookCounts;

/* "host", "rocr" or "cuda"; NULL when no backend could start. */
HIPXX_API const char* hipxxGetBackendName(void);
/* Why no backend started (for example a bad HIPXX_BACKEND value); "" when one did. */
HIPXX_API const char* hipxxGetBackendError(void);
HIPXX_API hipError_t hipxxGetBookCounts(hipxxBookCounts* counts);
/* Where stream work runs: "device queues" (the backend's own, CUDA streams on the CUDA backend), or
   "host threads: " and the reason; NULL when no backend could start. */
HIPXX_API const char* hipxxGetStreamEngine(void);
/* How many mappings the reservation that starts at `base` holds right now: hipMemMap calls into it
   not yet undone by hipMemUnmap. hipErrorInvalidValue where `base` does not start a reservation.
   hipxx::VirtualRange asks this rather than counting its own Mappings. */
HIPXX_API hipError_t hipxxGetReservationMappingCount(void* base, size_t* count);

#ifdef __cplusplus
}
#endif

#endif /* HIPXX_HIPXX_EXT_H */
