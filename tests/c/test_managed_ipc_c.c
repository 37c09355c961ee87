/* C99 conformance test of managed memory and legacy IPC through <hip/hip_runtime_api.h>:
 * hipMallocManaged and host access, advice read back through range attributes, stream-ordered
 * prefetches, hipStreamAttachMemAsync, hipIpcGetMemHandle/OpenMemHandle/CloseMemHandle across
 * a fork()ed child, and interprocess event handles within this process. One line per check, then "N passed, M failed";
 * exits nonzero on any failure. Built with -std=c99 -pedantic.
 *
 * Left out on purpose, because the library and the documentation disagree on them: attaching
 * system-allocated (malloc) memory with hipStreamAttachMemAsync, which the docs allow and the
 * library refuses; hipIpcOpenMemHandle with flags 0, which the docs forbid and the library accepts;
 * and the exact code of IPC refusals (the library answers hipErrorInvalidValue, AMD's header lists
 * hipErrorInvalidHandle), so those are checked as refusals without their code. */
#define _POSIX_C_SOURCE 200809L /* fork, pipe, waitpid, sysconf */

#include <hip/hip_runtime_api.h>

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_checks.h"

static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

static int range_int(hipMemRangeAttribute which, const void* ptr, size_t count) {
  int value = -100;
  if (hipMemRangeGetAttribute(&value, sizeof value, which, ptr, count) != hipSuccess) return -100;
  return value;
}

static unsigned char pattern_byte(size_t i, unsigned seed) { return (unsigned char)((i * 53 + seed * 7 + 3) & 0xff); }

static int matches_pattern(const unsigned char* bytes, size_t count, unsigned seed) {
  size_t i;
  for (i = 0; i < count; ++i)
    if (bytes[i] != pattern_byte(i, seed)) return 0;
  return 1;
}

static void test_managed_allocation(void) {
  enum { kWords = 3000 }; /* not a whole number of pages */
  static uint32_t copy[kWords];
  uint32_t* words = NULL;
  void* ptr = NULL;
  void* host_attached = NULL;
  void* const sentinel = (void*)(uintptr_t)0x1000;
  void* unchanged = sentinel;
  size_t i;
  int ok = 1;

  CHECK_RESULT(hipMallocManaged(&ptr, kWords * sizeof(uint32_t), hipMemAttachGlobal), hipSuccess);
  CHECK(ptr != NULL);
  words = (uint32_t*)ptr;
  /* Written by the host through the pointer, read by hipMemcpy... */
  for (i = 0; i < kWords; ++i) words[i] = (uint32_t)(i * 3 + 1);
  memset(copy, 0, sizeof copy);
  CHECK_RESULT(hipMemcpy(copy, ptr, sizeof copy, hipMemcpyDeviceToHost), hipSuccess);
  for (i = 0; i < kWords; ++i)
    if (copy[i] != (uint32_t)(i * 3 + 1)) ok = 0;
  CHECK(ok);
  /* ...and the other way: written by hipMemcpy and hipMemset, read by the host. */
  for (i = 0; i < kWords; ++i) copy[i] = (uint32_t)(100000 + i);
  CHECK_RESULT(hipMemcpy(ptr, copy, sizeof copy, hipMemcpyHostToDevice), hipSuccess);
  CHECK(words[0] == 100000 && words[kWords - 1] == 100000 + kWords - 1);
  CHECK_RESULT(hipMemset(words + 10, 0xAB, 2 * sizeof(uint32_t)), hipSuccess);
  CHECK(words[9] == 100009 && words[10] == 0xABABABABu && words[11] == 0xABABABABu && words[12] == 100012);

  /* hipMemAttachHost memory is as usable from the host. */
  CHECK_RESULT(hipMallocManaged(&host_attached, 64, hipMemAttachHost), hipSuccess);
  CHECK(host_attached != NULL && host_attached != ptr);
  memset(host_attached, 0x42, 64);
  memset(copy, 0, 64);
  CHECK_RESULT(hipMemcpy(copy, host_attached, 64, hipMemcpyDefault), hipSuccess);
  CHECK(memcmp(copy, host_attached, 64) == 0 && ((unsigned char*)copy)[63] == 0x42);

  /* Flags other than hipMemAttachGlobal or hipMemAttachHost, no size, no out pointer. */
  CHECK_RESULT(hipMallocManaged(&unchanged, 64, 0), hipErrorInvalidValue);
  CHECK_RESULT(hipMallocManaged(&unchanged, 64, hipMemAttachSingle), hipErrorInvalidValue);
  CHECK_RESULT(hipMallocManaged(&unchanged, 64, hipMemAttachGlobal | hipMemAttachHost), hipErrorInvalidValue);
  CHECK_RESULT(hipMallocManaged(&unchanged, 0, hipMemAttachGlobal), hipErrorInvalidValue);
  CHECK_RESULT(hipMallocManaged(NULL, 64, hipMemAttachGlobal), hipErrorInvalidValue);
  CHECK(unchanged == sentinel);

  CHECK_RESULT(hipFree(host_attached), hipSuccess);
  CHECK_RESULT(hipFree(ptr), hipSuccess);
  CHECK_RESULT(hipFree(ptr), hipErrorInvalidValue);
}

static void test_advice(int device_count) {
  const size_t page = page_size();
  const size_t size = 4 * page;
  void* ptr = NULL;
  void* device = NULL;
  char* bytes;
  int ids[4] = {12345, 12345, 12345, 12345};
  unsigned char wide[8];

  CHECK_RESULT(hipMallocManaged(&ptr, size, hipMemAttachGlobal), hipSuccess);
  bytes = (char*)ptr;

  /* A fresh allocation has no advice: -2 (hipInvalidDeviceId) where a location has no answer. */
  CHECK(range_int(hipMemRangeAttributeReadMostly, ptr, size) == 0);
  CHECK(range_int(hipMemRangeAttributePreferredLocation, ptr, size) == hipInvalidDeviceId);
  CHECK(range_int(hipMemRangeAttributeLastPrefetchLocation, ptr, size) == hipInvalidDeviceId);
  CHECK(range_int(hipMemRangeAttributeCoherencyMode, ptr, size) == hipMemRangeCoherencyModeFineGrain);
  CHECK_RESULT(hipMemRangeGetAttribute(ids, sizeof ids, hipMemRangeAttributeAccessedBy, ptr, size), hipSuccess);
  CHECK(ids[0] == hipInvalidDeviceId && ids[3] == hipInvalidDeviceId);
  /* An int attribute writes one int and no more. */
  memset(wide, 0xAA, sizeof wide);
  CHECK_RESULT(hipMemRangeGetAttribute(wide, sizeof(int), hipMemRangeAttributeReadMostly, ptr, size), hipSuccess);
  CHECK(wide[sizeof(int)] == 0xAA && wide[sizeof wide - 1] == 0xAA);

  CHECK_RESULT(hipMemAdvise(ptr, size, hipMemAdviseSetReadMostly, 0), hipSuccess);
  CHECK(range_int(hipMemRangeAttributeReadMostly, ptr, size) == 1);
  CHECK_RESULT(hipMemAdvise(ptr, size, hipMemAdviseUnsetReadMostly, 0), hipSuccess);
  CHECK(range_int(hipMemRangeAttributeReadMostly, ptr, size) == 0);

  CHECK_RESULT(hipMemAdvise(ptr, size, hipMemAdviseSetPreferredLocation, 0), hipSuccess);
  CHECK(range_int(hipMemRangeAttributePreferredLocation, ptr, size) == 0);
  CHECK_RESULT(hipMemAdvise(ptr, size, hipMemAdviseSetPreferredLocation, hipCpuDeviceId), hipSuccess);
  CHECK(range_int(hipMemRangeAttributePreferredLocation, ptr, size) == hipCpuDeviceId);
  CHECK_RESULT(hipMemAdvise(ptr, size, hipMemAdviseUnsetPreferredLocation, 0), hipSuccess);
  CHECK(range_int(hipMemRangeAttributePreferredLocation, ptr, size) == hipInvalidDeviceId);

  CHECK_RESULT(hipMemAdvise(ptr, size, hipMemAdviseSetAccessedBy, 0), hipSuccess);
  CHECK_RESULT(hipMemRangeGetAttribute(ids, sizeof ids, hipMemRangeAttributeAccessedBy, ptr, size), hipSuccess);
  CHECK(ids[0] == 0 && ids[1] == hipInvalidDeviceId);
  CHECK_RESULT(hipMemAdvise(ptr, size, hipMemAdviseUnsetAccessedBy, 0), hipSuccess);
  CHECK_RESULT(hipMemRangeGetAttribute(ids, sizeof ids, hipMemRangeAttributeAccessedBy, ptr, size), hipSuccess);
  CHECK(ids[0] == hipInvalidDeviceId);

  CHECK_RESULT(hipMemAdvise(ptr, size, hipMemAdviseSetCoarseGrain, 0), hipSuccess);
  CHECK(range_int(hipMemRangeAttributeCoherencyMode, ptr, size) == hipMemRangeCoherencyModeCoarseGrain);
  CHECK_RESULT(hipMemAdvise(ptr, size, hipMemAdviseUnsetCoarseGrain, 0), hipSuccess);
  CHECK(range_int(hipMemRangeAttributeCoherencyMode, ptr, size) == hipMemRangeCoherencyModeFineGrain);

  /* ROCm 7's hipMemLocation forms: a device, and the host (with NUMA node 0, which every machine has). */
  {
    hipMemLocation where;
    where.type = hipMemLocationTypeDevice;
    where.id = 0;
    CHECK_RESULT(hipMemAdvise_v2(ptr, size, hipMemAdviseSetPreferredLocation, where), hipSuccess);
    CHECK(range_int(hipMemRangeAttributePreferredLocation, ptr, size) == 0);
    CHECK_RESULT(hipMemPrefetchAsync_v2(ptr, size, where, 0, NULL), hipSuccess);
    where.type = hipMemLocationTypeHostNuma;
    CHECK_RESULT(hipMemAdvise_v2(ptr, size, hipMemAdviseSetPreferredLocation, where), hipSuccess);
    CHECK(range_int(hipMemRangeAttributePreferredLocation, ptr, size) == hipCpuDeviceId);
    CHECK_RESULT(hipMemPrefetchAsync_v2(ptr, page, where, 0, NULL), hipSuccess);
    CHECK_RESULT(hipStreamSynchronize(NULL), hipSuccess);
    CHECK(range_int(hipMemRangeAttributeLastPrefetchLocation, ptr, page) == hipCpuDeviceId);
    CHECK(range_int(hipMemRangeAttributeLastPrefetchLocation, bytes + page, page) == 0);
    CHECK_RESULT(hipMemPrefetchAsync_v2(ptr, page, where, 1, NULL), hipErrorInvalidValue);
    where.type = hipMemLocationTypeInvalid;
    CHECK_RESULT(hipMemAdvise_v2(ptr, size, hipMemAdviseSetPreferredLocation, where), hipErrorInvalidValue);
    CHECK_RESULT(hipMemPrefetchAsync_v2(ptr, page, where, 0, NULL), hipErrorInvalidValue);
    CHECK(range_int(hipMemRangeAttributePreferredLocation, ptr, size) == hipCpuDeviceId);
    CHECK_RESULT(hipMemAdvise(ptr, size, hipMemAdviseUnsetPreferredLocation, 0), hipSuccess);
  }

  /* A range inside one page is rounded out to that whole page, and no further. */
  CHECK_RESULT(hipMemAdvise(bytes + page + 100, 10, hipMemAdviseSetReadMostly, 0), hipSuccess);
  CHECK(range_int(hipMemRangeAttributeReadMostly, bytes + page, page) == 1);
  CHECK(range_int(hipMemRangeAttributeReadMostly, bytes, page) == 0);
  CHECK(range_int(hipMemRangeAttributeReadMostly, bytes + 2 * page, page) == 0);
  CHECK(range_int(hipMemRangeAttributeReadMostly, ptr, size) == 0); /* 1 only where every page is */

  /* Advice refusals: unknown advice, a device that does not exist, memory that is not managed. */
  CHECK_RESULT(hipMalloc(&device, page), hipSuccess);
  CHECK_RESULT(hipMemAdvise(ptr, size, (hipMemoryAdvise)0, 0), hipErrorInvalidValue);
  CHECK_RESULT(hipMemAdvise(ptr, size, (hipMemoryAdvise)7, 0), hipErrorInvalidValue);
  CHECK_RESULT(hipMemAdvise(ptr, size, hipMemAdviseSetPreferredLocation, device_count), hipErrorInvalidValue);
  CHECK_RESULT(hipMemAdvise(ptr, size, hipMemAdviseSetAccessedBy, device_count), hipErrorInvalidValue);
  CHECK_RESULT(hipMemAdvise(NULL, size, hipMemAdviseSetReadMostly, 0), hipErrorInvalidValue);
  CHECK_RESULT(hipMemAdvise(device, page, hipMemAdviseSetReadMostly, 0), hipErrorInvalidValue);
  CHECK_RESULT(hipMemAdvise(ptr, size + 1, hipMemAdviseSetReadMostly, 0), hipErrorInvalidValue);
  CHECK(range_int(hipMemRangeAttributePreferredLocation, ptr, size) == hipInvalidDeviceId);

  /* Range query refusals: a size that does not fit the attribute, no buffer, unknown attribute,
   * memory that is not managed, a range past the allocation. */
  CHECK_RESULT(hipMemRangeGetAttribute(wide, 2, hipMemRangeAttributeReadMostly, ptr, size), hipErrorInvalidValue);
  CHECK_RESULT(hipMemRangeGetAttribute(wide, 8, hipMemRangeAttributePreferredLocation, ptr, size),
               hipErrorInvalidValue);
  CHECK_RESULT(hipMemRangeGetAttribute(ids, 3, hipMemRangeAttributeAccessedBy, ptr, size), hipErrorInvalidValue);
  CHECK_RESULT(hipMemRangeGetAttribute(NULL, sizeof(int), hipMemRangeAttributeReadMostly, ptr, size),
               hipErrorInvalidValue);
  CHECK_RESULT(hipMemRangeGetAttribute(wide, sizeof(int), (hipMemRangeAttribute)5, ptr, size), hipErrorInvalidValue);
  CHECK_RESULT(hipMemRangeGetAttribute(wide, sizeof(int), hipMemRangeAttributeReadMostly, device, page),
               hipErrorInvalidValue);
  CHECK_RESULT(hipMemRangeGetAttribute(wide, sizeof(int), hipMemRangeAttributeReadMostly, ptr, size + 1),
               hipErrorInvalidValue);

  CHECK_RESULT(hipFree(device), hipSuccess);
  CHECK_RESULT(hipFree(ptr), hipSuccess);
  /* Freed: no longer managed memory. */
  CHECK_RESULT(hipMemAdvise(ptr, size, hipMemAdviseSetReadMostly, 0), hipErrorInvalidValue);
}

static void test_prefetch_and_attach(int device_count) {
  const size_t page = page_size();
  const size_t size = 2 * page + 8;
  hipStream_t stream = NULL;
  void* ptr = NULL;
  void* device = NULL;
  unsigned char back[64];

  CHECK_RESULT(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking), hipSuccess);
  CHECK_RESULT(hipMallocManaged(&ptr, size, hipMemAttachGlobal), hipSuccess);
  CHECK_RESULT(hipMalloc(&device, page), hipSuccess);

  /* Prefetches are stream work: their location shows once the stream has run them. */
  CHECK_RESULT(hipMemPrefetchAsync(ptr, size, 0, stream), hipSuccess);
  CHECK_RESULT(hipStreamSynchronize(stream), hipSuccess);
  CHECK(range_int(hipMemRangeAttributeLastPrefetchLocation, ptr, size) == 0);
  CHECK_RESULT(hipMemPrefetchAsync(ptr, size, hipCpuDeviceId, NULL), hipSuccess);
  CHECK_RESULT(hipStreamSynchronize(NULL), hipSuccess);
  CHECK(range_int(hipMemRangeAttributeLastPrefetchLocation, ptr, size) == hipCpuDeviceId);
  /* Prefetching changes no advice. */
  CHECK(range_int(hipMemRangeAttributePreferredLocation, ptr, size) == hipInvalidDeviceId);

  CHECK_RESULT(hipMemPrefetchAsync(NULL, page, 0, stream), hipErrorInvalidValue);
  CHECK_RESULT(hipMemPrefetchAsync(ptr, size, device_count, stream), hipErrorInvalidValue);
  CHECK_RESULT(hipMemPrefetchAsync(ptr, size, hipInvalidDeviceId, stream), hipErrorInvalidValue);
  CHECK_RESULT(hipMemPrefetchAsync(device, page, 0, stream), hipErrorInvalidValue);
  CHECK_RESULT(hipStreamSynchronize(stream), hipSuccess);
  CHECK(range_int(hipMemRangeAttributeLastPrefetchLocation, ptr, size) == hipCpuDeviceId);

  /* Attach with each documented flag, the whole allocation (length 0 or its size). */
  CHECK_RESULT(hipStreamAttachMemAsync(stream, ptr, 0, hipMemAttachSingle), hipSuccess);
  CHECK_RESULT(hipStreamAttachMemAsync(stream, ptr, size, hipMemAttachHost), hipSuccess);
  CHECK_RESULT(hipStreamAttachMemAsync(stream, ptr, 0, hipMemAttachGlobal), hipSuccess);
  CHECK_RESULT(hipStreamAttachMemAsync(NULL, ptr, 0, hipMemAttachSingle), hipSuccess);
  CHECK_RESULT(hipStreamSynchronize(stream), hipSuccess);
  CHECK_RESULT(hipStreamSynchronize(NULL), hipSuccess);
  /* The memory stays usable from the host and by copies after attaching. */
  memset(ptr, 0x5C, size);
  memset(back, 0, sizeof back);
  CHECK_RESULT(hipMemcpy(back, (char*)ptr + size - sizeof back, sizeof back, hipMemcpyDefault), hipSuccess);
  CHECK(back[0] == 0x5C && back[sizeof back - 1] == 0x5C);

  CHECK_RESULT(hipStreamAttachMemAsync(stream, ptr, 0, 0), hipErrorInvalidValue);
  CHECK_RESULT(hipStreamAttachMemAsync(stream, ptr, 0, 0x8), hipErrorInvalidValue);
  CHECK_RESULT(hipStreamAttachMemAsync(stream, NULL, 0, hipMemAttachSingle), hipErrorInvalidValue);
  CHECK_RESULT(hipStreamAttachMemAsync(stream, device, 0, hipMemAttachSingle), hipErrorInvalidValue);
  CHECK_RESULT(hipStreamQuery(stream), hipSuccess);

  /* A destroyed stream is an invalid value to both calls: neither documents hipErrorInvalidHandle. */
  CHECK_RESULT(hipStreamDestroy(stream), hipSuccess);
  CHECK_RESULT(hipMemPrefetchAsync(ptr, size, 0, stream), hipErrorInvalidValue);
  CHECK_RESULT(hipStreamAttachMemAsync(stream, ptr, 0, hipMemAttachSingle), hipErrorInvalidValue);
  CHECK_RESULT(hipDeviceSynchronize(), hipSuccess);
  CHECK(range_int(hipMemRangeAttributeLastPrefetchLocation, ptr, size) == hipCpuDeviceId);

  CHECK_RESULT(hipFree(device), hipSuccess);
  CHECK_RESULT(hipFree(ptr), hipSuccess);
}

/* ---- IPC across a fork()ed child ------------------------------------------------------------
 * The child is forked before this process makes any HIP call, so it starts its own runtime
 * rather than inheriting one mid-flight (a GPU runtime does not survive fork). The parent sends
 * the handle down a pipe; the child opens it, checks the parent's data, writes its own, closes,
 * and reports through its exit status: 0, or the number of the step that failed. */

enum { kIpcBytes = 3 * 4096 + 100, kParentSeed = 1, kChildSeed = 2 };

static int read_all(int fd, void* buffer, size_t count) {
  char* at = (char*)buffer;
  while (count > 0) {
    ssize_t got = read(fd, at, count);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return 0;
    at += got;
    count -= (size_t)got;
  }
  return 1;
}

static int write_all(int fd, const void* buffer, size_t count) {
  const char* at = (const char*)buffer;
  while (count > 0) {
    ssize_t put = write(fd, at, count);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return 0;
    at += put;
    count -= (size_t)put;
  }
  return 1;
}

static int child_step(int step, hipError_t got, hipError_t expected) {
  if (got == expected) return 0;
  fprintf(stderr, "child: step %d: got %s, expected %s\n", step, hipGetErrorName(got), hipGetErrorName(expected));
  return step;
}

static int ipc_child(int from_parent) {
  static unsigned char bytes[kIpcBytes];
  hipIpcMemHandle_t handle;
  hipIpcMemHandle_t garbage;
  void* mapped = NULL;
  void* refused = NULL;
  size_t i;
  int status;

  if (!read_all(from_parent, &handle, sizeof handle)) return 1; /* the parent gave up before sending */
  if ((status = child_step(2, hipInit(0), hipSuccess)) != 0) return status;
  /* Refused: no out pointer, and flags other than hipIpcMemLazyEnablePeerAccess. */
  if (hipIpcOpenMemHandle(NULL, handle, hipIpcMemLazyEnablePeerAccess) == hipSuccess) return 12;
  if (hipIpcOpenMemHandle(&refused, handle, 0x2) == hipSuccess || refused != NULL) return 13;
  if ((status = child_step(3, hipIpcOpenMemHandle(&mapped, handle, hipIpcMemLazyEnablePeerAccess), hipSuccess)) != 0)
    return status;
  if (mapped == NULL) return 4;
  if ((status = child_step(5, hipMemcpy(bytes, mapped, kIpcBytes, hipMemcpyDeviceToHost), hipSuccess)) != 0)
    return status;
  if (!matches_pattern(bytes, kIpcBytes, kParentSeed)) return 6;
  for (i = 0; i < kIpcBytes; ++i) bytes[i] = pattern_byte(i, kChildSeed);
  if ((status = child_step(7, hipMemcpy(mapped, bytes, kIpcBytes, hipMemcpyHostToDevice), hipSuccess)) != 0)
    return status;
  /* Imported memory is not the importer's to hipFree; it ends with hipIpcCloseMemHandle, once. */
  if (hipFree(mapped) == hipSuccess) return 8;
  if ((status = child_step(9, hipIpcCloseMemHandle(mapped), hipSuccess)) != 0) return status;
  if (hipIpcCloseMemHandle(mapped) == hipSuccess) return 10;
  /* A handle no process exported opens nothing. */
  memset(&garbage, 0x5A, sizeof garbage);
  if (hipIpcOpenMemHandle(&refused, garbage, hipIpcMemLazyEnablePeerAccess) == hipSuccess) return 11;
  return 0;
}

static void test_ipc(pid_t child, int to_child) {
  static unsigned char bytes[kIpcBytes];
  hipIpcMemHandle_t handle;
  hipIpcMemHandle_t again;
  void* device = NULL;
  void* managed = NULL;
  size_t i;
  int status = -1;
  int sent = 0;

  CHECK(child > 0);
  CHECK_RESULT(hipMalloc(&device, kIpcBytes), hipSuccess);
  for (i = 0; i < kIpcBytes; ++i) bytes[i] = pattern_byte(i, kParentSeed);
  CHECK_RESULT(hipMemcpy(device, bytes, kIpcBytes, hipMemcpyHostToDevice), hipSuccess);
  memset(&handle, 0, sizeof handle);
  memset(&again, 0xFF, sizeof again);
  CHECK_RESULT(hipIpcGetMemHandle(&handle, device), hipSuccess);
  CHECK_RESULT(hipIpcGetMemHandle(&again, device), hipSuccess); /* may be called again */

  if (child > 0) {
    sent = write_all(to_child, &again, sizeof again);
    CHECK(sent);
  }
  close(to_child); /* unsent: the child reads end of file and stops */
  if (child > 0) {
    CHECK(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    if (WIFEXITED(status)) {
      printf("child exit status %d\n", WEXITSTATUS(status));
      CHECK(WEXITSTATUS(status) == 0);
    }
  }
  /* What the child wrote through its mapping is in the exporter's memory. */
  memset(bytes, 0, sizeof bytes);
  CHECK_RESULT(hipMemcpy(bytes, device, kIpcBytes, hipMemcpyDeviceToHost), hipSuccess);
  CHECK(matches_pattern(bytes, kIpcBytes, kChildSeed));

  /* Refusals. Only the base of hipMalloc memory can be exported; only what
   * hipIpcOpenMemHandle returned can be closed. */
  CHECK(hipIpcGetMemHandle(NULL, device) != hipSuccess);
  CHECK(hipIpcGetMemHandle(&handle, NULL) != hipSuccess);
  CHECK(hipIpcGetMemHandle(&handle, (char*)device + 1) != hipSuccess);
  CHECK(hipIpcGetMemHandle(&handle, bytes) != hipSuccess);
  CHECK_RESULT(hipMallocManaged(&managed, 4096, hipMemAttachGlobal), hipSuccess);
  CHECK(hipIpcGetMemHandle(&handle, managed) != hipSuccess);
  CHECK_RESULT(hipFree(managed), hipSuccess);
  CHECK(hipIpcCloseMemHandle(NULL) != hipSuccess);
  CHECK(hipIpcCloseMemHandle(device) != hipSuccess);

  CHECK_RESULT(hipFree(device), hipSuccess);
  CHECK(hipIpcGetMemHandle(&handle, device) != hipSuccess); /* freed */
}

/* Interprocess events from C, within this process: what a handle is exported from, and the
 * documented codes of the refusals (test_ipc.cpp opens them in another process). */
static void test_ipc_event(void) {
  hipEvent_t interprocess = NULL;
  hipEvent_t plain = NULL;
  hipEvent_t opened = NULL;
  hipIpcEventHandle_t handle;

  memset(&handle, 0, sizeof handle);
  CHECK(hipEventCreateWithFlags(&interprocess, hipEventInterprocess) != hipSuccess); /* timing must be off */
  CHECK_RESULT(hipEventCreateWithFlags(&interprocess, hipEventInterprocess | hipEventDisableTiming), hipSuccess);
  CHECK_RESULT(hipEventCreateWithFlags(&plain, hipEventDisableTiming), hipSuccess);
  CHECK_RESULT(hipIpcGetEventHandle(&handle, plain), hipErrorInvalidConfiguration);
  CHECK_RESULT(hipIpcGetEventHandle(NULL, interprocess), hipErrorInvalidValue);
  CHECK_RESULT(hipIpcGetEventHandle(&handle, interprocess), hipSuccess);
  CHECK_RESULT(hipIpcOpenEventHandle(NULL, handle), hipErrorInvalidValue);
  CHECK_RESULT(hipIpcOpenEventHandle(&opened, handle), hipErrorInvalidContext);
  CHECK(opened == NULL);
  CHECK_RESULT(hipEventRecord(interprocess, NULL), hipSuccess);
  CHECK_RESULT(hipEventSynchronize(interprocess), hipSuccess);
  CHECK_RESULT(hipEventQuery(interprocess), hipSuccess);
  CHECK_RESULT(hipEventDestroy(plain), hipSuccess);
  CHECK_RESULT(hipEventDestroy(interprocess), hipSuccess);
}

int main(void) {
  int to_child[2] = {-1, -1};
  pid_t child = -1;
  int count = 0;

  /* Before anything is printed, so that the child inherits no buffered output. */
  if (pipe(to_child) == 0) {
    child = fork();
    if (child == 0) {
      int status;
      close(to_child[1]);
      status = ipc_child(to_child[0]);
      close(to_child[0]);
      exit(status);
    }
    close(to_child[0]);
  }

  /* Layout facts a C caller depends on. */
  CHECK(sizeof(hipIpcMemHandle_t) == 64);
  CHECK(sizeof(((hipIpcMemHandle_t*)0)->reserved) == HIP_IPC_HANDLE_SIZE);
  CHECK(sizeof(((hipIpcMemHandle_t*)0)->reserved[0]) == 1);
  CHECK(sizeof(hipIpcEventHandle_t) == 64);
  CHECK(sizeof(hipMemoryAdvise) == sizeof(int) && sizeof(hipMemRangeAttribute) == sizeof(int));
  CHECK(hipMemAttachGlobal == 1 && hipMemAttachHost == 2 && hipMemAttachSingle == 4);
  CHECK(hipCpuDeviceId == -1 && hipInvalidDeviceId == -2);

  CHECK_RESULT(hipInit(0), hipSuccess);
  CHECK_RESULT(hipGetDeviceCount(&count), hipSuccess);
  CHECK(count >= 1);

  test_managed_allocation();
  test_advice(count);
  test_prefetch_and_attach(count);
  test_ipc(child, to_child[1]);
  test_ipc_event();

  return checks_summary();
}
