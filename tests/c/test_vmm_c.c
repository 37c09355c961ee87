/* C99 conformance test of the VMM entry points through <hip/hip_runtime_api.h>: the whole
 * lifecycle and a set of refusals, one line per check, then "N passed, M failed". Exits nonzero
 * on any failure. Built with -std=c99 -pedantic. */
#define _POSIX_C_SOURCE 200809L /* close() */

#include <hip/hip_runtime_api.h>
#include <hipxx/hipxx_ext.h>

#include <unistd.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "c_checks.h"

static int same_books(const hipxxBookCounts* a, const hipxxBookCounts* b) {
  return a->reservations == b->reservations && a->mappings == b->mappings && a->allocations == b->allocations &&
         a->linearAllocations == b->linearAllocations;
}

static hipxxBookCounts books(void) {
  hipxxBookCounts counts;
  memset(&counts, 0xff, sizeof counts);
  if (hipxxGetBookCounts(&counts) != hipSuccess) memset(&counts, 0xff, sizeof counts);
  return counts;
}

static void* offset_of(void* base, size_t offset) { return (char*)base + offset; }

int main(void) {
  hipMemAllocationProp prop;
  hipMemAllocationProp round_trip;
  hipMemAccessDesc desc;
  hipMemLocation location;
  hipMemGenericAllocationHandle_t handle = NULL;
  hipMemGenericAllocationHandle_t retained = NULL;
  hipMemGenericAllocationHandle_t imported = NULL;
  hipxxBookCounts start;
  hipxxBookCounts now;
  size_t granularity = 0;
  size_t recommended = 0;
  size_t size;
  void* base = NULL;
  void* view = NULL;
  void* unchanged = NULL;
  unsigned long long flags = 0;
  unsigned char out[256];
  unsigned char in[256];
  int fd = -1;
  int count = 0;
  int value = 0;
  size_t i;

  /* Layout facts a C caller depends on. */
  CHECK(sizeof(hipError_t) == sizeof(int));
  CHECK(offsetof(hipMemAccessDesc, flags) == sizeof(hipMemLocation));
  CHECK(offsetof(hipMemAllocationProp, location) == 2 * sizeof(int));
  CHECK(hipMemAccessFlagsProtReadWrite == 3);
  CHECK(hipMemHandleTypePosixFileDescriptor == 1);

  CHECK_RESULT(hipInit(0), hipSuccess);
  CHECK_RESULT(hipGetDeviceCount(&count), hipSuccess);
  CHECK(count >= 1);
  CHECK_RESULT(hipDeviceGetAttribute(&value, hipDeviceAttributeVirtualMemoryManagementSupported, 0), hipSuccess);
  CHECK(value == 1);
  start = books();

  memset(&prop, 0, sizeof prop);
  prop.type = hipMemAllocationTypePinned;
  prop.requestedHandleType = hipMemHandleTypePosixFileDescriptor;
  prop.location.type = hipMemLocationTypeDevice;
  prop.location.id = 0;
  CHECK_RESULT(hipMemGetAllocationGranularity(&granularity, &prop, hipMemAllocationGranularityMinimum), hipSuccess);
  CHECK_RESULT(hipMemGetAllocationGranularity(&recommended, &prop, hipMemAllocationGranularityRecommended),
               hipSuccess);
  CHECK(granularity > 0 && recommended % granularity == 0);
  size = 2 * granularity;

  /* Lifecycle: reserve, create, map, set access, copy, retain, export/import, unmap, release, free. */
  CHECK_RESULT(hipMemAddressReserve(&base, 4 * granularity, 0, NULL, 0), hipSuccess);
  CHECK(base != NULL && (uintptr_t)base % granularity == 0);
  CHECK_RESULT(hipMemCreate(&handle, size, &prop, 0), hipSuccess);
  CHECK_RESULT(hipMemGetAllocationPropertiesFromHandle(&round_trip, handle), hipSuccess);
  CHECK(round_trip.type == hipMemAllocationTypePinned);
  CHECK(round_trip.requestedHandleType == hipMemHandleTypePosixFileDescriptor);
  CHECK(round_trip.location.type == hipMemLocationTypeDevice && round_trip.location.id == 0);
  CHECK_RESULT(hipMemMap(base, size, 0, handle, 0), hipSuccess);

  location.type = hipMemLocationTypeDevice;
  location.id = 0;
  CHECK_RESULT(hipMemGetAccess(&flags, &location, base), hipSuccess);
  CHECK(flags == hipMemAccessFlagsProtNone);
  for (i = 0; i < sizeof in; ++i) in[i] = (unsigned char)(i * 7 + 3);
  CHECK_RESULT(hipMemcpy(base, in, sizeof in, hipMemcpyHostToDevice), hipErrorInvalidValue);

  desc.location = location;
  desc.flags = hipMemAccessFlagsProtReadWrite;
  CHECK_RESULT(hipMemSetAccess(base, size, &desc, 1), hipSuccess);
  CHECK_RESULT(hipMemGetAccess(&flags, &location, offset_of(base, size - 1)), hipSuccess);
  CHECK(flags == hipMemAccessFlagsProtReadWrite);
  CHECK_RESULT(hipMemcpy(offset_of(base, granularity - 100), in, sizeof in, hipMemcpyHostToDevice), hipSuccess);
  memset(out, 0, sizeof out);
  CHECK_RESULT(hipMemcpy(out, offset_of(base, granularity - 100), sizeof out, hipMemcpyDeviceToHost), hipSuccess);
  CHECK(memcmp(in, out, sizeof in) == 0);

  CHECK_RESULT(hipMemRetainAllocationHandle(&retained, offset_of(base, granularity + 1)), hipSuccess);
  CHECK(retained == handle);
  CHECK_RESULT(hipMemRelease(retained), hipSuccess);

  CHECK_RESULT(hipMemExportToShareableHandle(&fd, handle, hipMemHandleTypePosixFileDescriptor, 0), hipSuccess);
  CHECK(fd >= 0);
  CHECK_RESULT(hipMemImportFromShareableHandle(&imported, (void*)(uintptr_t)fd, hipMemHandleTypePosixFileDescriptor),
               hipSuccess);
  CHECK(close(fd) == 0); /* the caller owns the exported descriptor; the import keeps its own */
  CHECK_RESULT(hipMemAddressReserve(&view, size, 0, NULL, 0), hipSuccess);
  CHECK_RESULT(hipMemMap(view, size, 0, imported, 0), hipSuccess);
  desc.flags = hipMemAccessFlagsProtRead;
  CHECK_RESULT(hipMemSetAccess(view, size, &desc, 1), hipSuccess);
  memset(out, 0, sizeof out);
  CHECK_RESULT(hipMemcpy(out, offset_of(view, granularity - 100), sizeof out, hipMemcpyDeviceToHost), hipSuccess);
  CHECK(memcmp(in, out, sizeof in) == 0);
  CHECK_RESULT(hipMemcpy(view, in, 1, hipMemcpyHostToDevice), hipErrorInvalidValue); /* read-only */
  CHECK_RESULT(hipMemUnmap(view, size), hipSuccess);
  CHECK_RESULT(hipMemRelease(imported), hipSuccess);
  CHECK_RESULT(hipMemAddressFree(view, size), hipSuccess);

  /* Refusals: each leaves the books as they were. */
  now = books();
  unchanged = base;
  CHECK_RESULT(hipMemAddressReserve(&unchanged, granularity + 1, 0, NULL, 0), hipErrorInvalidValue);
  CHECK_RESULT(hipMemAddressReserve(&unchanged, granularity, 0, NULL, 1), hipErrorInvalidValue);
  CHECK_RESULT(hipMemAddressReserve(&unchanged, granularity, 3 * granularity, NULL, 0), hipErrorInvalidValue);
  CHECK(unchanged == base);
  CHECK_RESULT(hipMemAddressFree(base, 4 * granularity), hipErrorInvalidValue); /* still mapped */
  CHECK_RESULT(hipMemAddressFree(base, 2 * granularity), hipErrorInvalidValue); /* wrong size */
  CHECK_RESULT(hipMemMap(offset_of(base, granularity), size, 0, handle, 0), hipErrorInvalidValue); /* overlap */
  CHECK_RESULT(hipMemMap(offset_of(base, 2 * granularity), size, granularity, handle, 0), hipErrorInvalidValue);
  CHECK_RESULT(hipMemMap(offset_of(base, 2 * granularity), granularity, 0, handle, 0), hipErrorInvalidValue);
  CHECK_RESULT(hipMemMap(offset_of(base, 3 * granularity), size, 0, handle, 0), hipErrorInvalidValue); /* past end */
  CHECK_RESULT(hipMemUnmap(base, granularity), hipErrorInvalidValue);                      /* cuts the mapping */
  CHECK_RESULT(hipMemUnmap(offset_of(base, size), granularity), hipErrorInvalidValue);     /* not mapped */
  CHECK_RESULT(hipMemSetAccess(base, 3 * granularity, &desc, 1), hipErrorInvalidValue);    /* runs into a gap */
  desc.flags = (hipMemAccessFlags)2;
  CHECK_RESULT(hipMemSetAccess(base, size, &desc, 1), hipErrorInvalidValue);
  desc.flags = hipMemAccessFlagsProtRead;
  desc.location.id = count; /* no such device */
  CHECK_RESULT(hipMemSetAccess(base, size, &desc, 1), hipErrorInvalidValue);
  CHECK_RESULT(hipMemGetAccess(&flags, &location, offset_of(base, size)), hipErrorInvalidValue);
  CHECK_RESULT(hipMemRetainAllocationHandle(&retained, offset_of(base, size)), hipErrorInvalidValue);
  prop.requestedHandleType = hipMemHandleTypeWin32;
  CHECK_RESULT(hipMemCreate(&retained, granularity, &prop, 0), hipErrorNotSupported);
  prop.requestedHandleType = hipMemHandleTypeNone;
  CHECK_RESULT(hipMemCreate(&retained, 0, &prop, 0), hipErrorInvalidValue);
  prop.type = hipMemAllocationTypeInvalid;
  CHECK_RESULT(hipMemCreate(&retained, granularity, &prop, 0), hipErrorInvalidValue);
  CHECK_RESULT(hipMemExportToShareableHandle(&fd, handle, hipMemHandleTypeWin32Kmt, 0), hipErrorNotSupported);
  CHECK_RESULT(hipMemMapArrayAsync(NULL, 0, NULL), hipErrorNotSupported);
  CHECK_RESULT(hipMemcpy(out, base, sizeof out, (hipMemcpyKind)17), hipErrorInvalidMemcpyDirection);
  CHECK_RESULT(hipMemcpy(NULL, base, sizeof out, hipMemcpyDeviceToHost), hipErrorInvalidValue);
  CHECK(hipGetLastError() == hipErrorInvalidValue);
  CHECK(hipGetLastError() == hipSuccess);
  {
    hipxxBookCounts after = books();
    CHECK(same_books(&now, &after));
  }
  memset(out, 0, sizeof out);
  CHECK_RESULT(hipMemcpy(out, offset_of(base, granularity - 100), sizeof out, hipMemcpyDeviceToHost), hipSuccess);
  CHECK(memcmp(in, out, sizeof in) == 0); /* the data survived every refusal */

  /* Deferred release: releasing the mapped handle keeps the memory until the unmap. */
  CHECK_RESULT(hipMemRelease(handle), hipSuccess);
  now = books();
  CHECK(now.allocations == start.allocations + 1);
  CHECK_RESULT(hipMemRelease(handle), hipErrorInvalidValue);
  memset(out, 0, sizeof out);
  CHECK_RESULT(hipMemcpy(out, offset_of(base, granularity - 100), sizeof out, hipMemcpyDeviceToHost), hipSuccess);
  CHECK(memcmp(in, out, sizeof in) == 0);
  CHECK_RESULT(hipMemUnmap(base, size), hipSuccess);
  now = books();
  CHECK(now.allocations == start.allocations);
  CHECK_RESULT(hipMemAddressFree(base, 4 * granularity), hipSuccess);
  CHECK_RESULT(hipMemAddressFree(base, 4 * granularity), hipErrorInvalidValue);

  /* hipMalloc from C. */
  {
    void* linear = NULL;
    CHECK_RESULT(hipMalloc(&linear, 100), hipSuccess);
    CHECK_RESULT(hipMemset(linear, 0x21, 100), hipSuccess);
    memset(out, 0, sizeof out);
    CHECK_RESULT(hipMemcpy(out, linear, 100, hipMemcpyDefault), hipSuccess);
    CHECK(out[0] == 0x21 && out[99] == 0x21);
    CHECK_RESULT(hipMemcpy(out, linear, 101, hipMemcpyDefault), hipErrorInvalidValue);
    CHECK_RESULT(hipFree(linear), hipSuccess);
    CHECK_RESULT(hipFree(linear), hipErrorInvalidValue);
  }

  CHECK(strcmp(hipGetErrorName(hipErrorNotSupported), "hipErrorNotSupported") == 0);
  CHECK(strcmp(hipGetErrorName((hipError_t)12345), "hipErrorUnknown") == 0);
  now = books();
  CHECK(same_books(&start, &now));

  return checks_summary();
}
