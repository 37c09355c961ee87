/*
 * Legacy HIP virtual memory management in plain C99, against the C API only: this file would build
 * unchanged against AMD's own <hip/hip_runtime_api.h>.
 *
 * Two physical allocations are mapped side by side into one reserved range, one hipMemSetAccess call
 * opens both, and a copy crosses the seam between them. Then everything is undone in the order the
 * API requires: unmap, release, free.
 */
#include <hip/hip_runtime_api.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                          \
  do {                                                                                       \
    hipError_t check_error_ = (call);                                                        \
    if (check_error_ != hipSuccess) {                                                        \
      fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call,              \
              hipGetErrorName(check_error_), hipGetErrorString(check_error_));               \
      exit(EXIT_FAILURE);                                                                    \
    }                                                                                        \
  } while (0)

static int expect(int ok, const char* what) {
  if (!ok) fprintf(stderr, "FAIL: %s\n", what);
  return ok ? 0 : 1;
}

int main(void) {
  int device_count = 0;
  int failures = 0;
  hipMemAllocationProp prop;
  hipMemAccessDesc access;
  hipMemLocation location;
  hipMemGenericAllocationHandle_t handles[2];
  hipMemGenericAllocationHandle_t retained;
  size_t granularity = 0;
  size_t size = 0;
  size_t i = 0;
  unsigned long long flags = 0;
  void* base = NULL;
  char* second = NULL;
  unsigned char* host = NULL;

  CHECK(hipInit(0));
  CHECK(hipGetDeviceCount(&device_count));
  printf("%d device(s)\n", device_count);
  CHECK(hipSetDevice(0));

  memset(&prop, 0, sizeof prop);
  prop.type = hipMemAllocationTypePinned;
  prop.location.type = hipMemLocationTypeDevice;
  prop.location.id = 0;
  CHECK(hipMemGetAllocationGranularity(&granularity, &prop, hipMemAllocationGranularityMinimum));
  size = 4 * granularity; /* each allocation; sizes must be multiples of the granularity */
  printf("granularity %zu bytes, two allocations of %zu bytes\n", granularity, size);

  /* Address space for both, then the physical memory, then one into each half. */
  CHECK(hipMemAddressReserve(&base, 2 * size, 0, NULL, 0));
  second = (char*)base + size;
  CHECK(hipMemCreate(&handles[0], size, &prop, 0));
  CHECK(hipMemCreate(&handles[1], size, &prop, 0));
  CHECK(hipMemMap(base, size, 0, handles[0], 0));
  CHECK(hipMemMap(second, size, 0, handles[1], 0));
  printf("reserved %p, mapped two allocations at %p and %p\n", base, base, (void*)second);

  /* A new mapping grants nothing; one call may open several adjacent mappings. */
  memset(&access, 0, sizeof access);
  access.location.type = hipMemLocationTypeDevice;
  access.location.id = 0;
  access.flags = hipMemAccessFlagsProtReadWrite;
  CHECK(hipMemSetAccess(base, 2 * size, &access, 1));
  location = access.location;
  CHECK(hipMemGetAccess(&flags, &location, second));
  failures += expect(flags == hipMemAccessFlagsProtReadWrite, "hipMemGetAccess reports read-write");

  /* Fill everything, then copy a pattern across the seam between the two allocations. */
  host = (unsigned char*)malloc(2 * size);
  if (host == NULL) return EXIT_FAILURE;
  CHECK(hipMemset(base, 0xAB, 2 * size));
  for (i = 0; i < granularity; ++i) host[i] = (unsigned char)(i * 7 + 1);
  CHECK(hipMemcpy(second - granularity / 2, host, granularity, hipMemcpyHostToDevice));
  memset(host, 0, 2 * size);
  CHECK(hipMemcpy(host, base, 2 * size, hipMemcpyDeviceToHost));
  for (i = 0; i < 2 * size; ++i) {
    const size_t seam_start = size - granularity / 2;
    const unsigned char want = (i >= seam_start && i < seam_start + granularity)
                                   ? (unsigned char)((i - seam_start) * 7 + 1)
                                   : (unsigned char)0xAB;
    if (host[i] != want) {
      fprintf(stderr, "FAIL: byte %zu is 0x%02x, expected 0x%02x\n", i, host[i], want);
      ++failures;
      break;
    }
  }
  printf("memset + memcpy across the seam: %s\n", failures == 0 ? "read back correctly" : "MISMATCH");

  /* Any address inside a mapping finds its allocation; the retained handle is released separately. */
  CHECK(hipMemRetainAllocationHandle(&retained, second + 123));
  failures += expect(retained == handles[1], "retained handle is the second allocation's");
  printf("retained the allocation behind %p: %s\n", (void*)(second + 123),
         retained == handles[1] ? "the second one" : "WRONG ONE");
  CHECK(hipMemRelease(retained));

  /* Undo in order: unmap, release the physical memory, free the address range. */
  CHECK(hipMemUnmap(base, size));
  CHECK(hipMemUnmap(second, size));
  CHECK(hipMemRelease(handles[0]));
  CHECK(hipMemRelease(handles[1]));
  CHECK(hipMemAddressFree(base, 2 * size));
  free(host);

  if (failures != 0) {
    printf("%d check(s) FAILED\n", failures);
    return EXIT_FAILURE;
  }
  printf("OK\n");
  return EXIT_SUCCESS;
}
