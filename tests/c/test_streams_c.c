/* C99 conformance test of streams, events and the stream-ordered allocator through
 * <hip/hip_runtime_api.h>: creation and destruction, query and synchronize, callbacks, wait and
 * write value, events and their timing, hipMallocAsync/hipFreeAsync, pools with their
 * attributes and trimming, host functions (hipLaunchHostFunc), copies between devices
 * (hipMemcpyPeer/Async) and hipMemGetInfo. Every success is checked by its effect (data read back, a callback
 * that ran, a stream held and then released), every refusal by its exact hipError_t. One line per
 * check, then "N passed, M failed"; exits nonzero on any failure. Built with -std=c99 -pedantic.
 *
 * Refusals whose code the library and shared/seeds/stream-and-mempool-hip.txt disagree on are left
 * out on purpose (a destroyed stream given to hipMallocAsync, hipFreeAsync or the wait/write value
 * calls; hipStreamAddCallback with a null callback or nonzero flags; hipStreamWaitEvent with
 * nonzero flags): the library answers with a code those calls do not document. */
#define _POSIX_C_SOURCE 200809L

#include <hip/hip_runtime_api.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "c_checks.h"

/* The callback type as shared/spec/hip-abi.md gives it. Two declarations of one object with
 * incompatible types do not compile, so this pins hipStreamCallback_t's parameters and result
 * (the abi tests check only its size). Never defined: nothing uses it. */
extern hipStreamCallback_t callback_type_check;
extern void (*callback_type_check)(hipStream_t stream, hipError_t status, void* userData);

/* What a callback saw. Written on the stream's thread, read only after hipStreamSynchronize, which
 * orders the two. */
struct callback_record {
  hipStream_t stream;
  hipError_t status;
  int calls;
  int order;
  unsigned char seen; /* first byte of `watched` when the callback ran */
  const unsigned char* watched;
  int* sequence; /* shared by the callbacks of one stream, which run one at a time */
};

static void record_callback(hipStream_t stream, hipError_t status, void* user_data) {
  struct callback_record* record = (struct callback_record*)user_data;
  record->stream = stream;
  record->status = status;
  record->calls += 1;
  if (record->sequence != NULL) record->order = ++*record->sequence;
  if (record->watched != NULL) record->seen = record->watched[0];
}

static void fill_pattern(unsigned char* bytes, size_t count, unsigned seed) {
  size_t i;
  for (i = 0; i < count; ++i) bytes[i] = (unsigned char)((i * 37 + seed * 11 + 1) & 0xff);
}

static int all_equal(const unsigned char* bytes, size_t count, unsigned char value) {
  size_t i;
  for (i = 0; i < count; ++i)
    if (bytes[i] != value) return 0;
  return 1;
}

/* A word of signal memory that holds a stream (hipStreamWaitValue32 >= 1) until the test opens it
 * with hipStreamWriteValue32 from a stream of its own. */
struct gate {
  void* word;
  hipStream_t opener;
};

static int gate_make(struct gate* gate) {
  gate->word = NULL;
  gate->opener = NULL;
  if (hipExtMallocWithFlags(&gate->word, sizeof(uint64_t), hipMallocSignalMemory) != hipSuccess) return 0;
  if (hipMemset(gate->word, 0, sizeof(uint64_t)) != hipSuccess) return 0;
  return hipStreamCreateWithFlags(&gate->opener, hipStreamNonBlocking) == hipSuccess;
}

static void gate_open(struct gate* gate) {
  CHECK_RESULT(hipStreamWriteValue32(gate->opener, gate->word, 1, 0), hipSuccess);
  CHECK_RESULT(hipStreamSynchronize(gate->opener), hipSuccess);
}

static void gate_free(struct gate* gate) {
  CHECK_RESULT(hipStreamDestroy(gate->opener), hipSuccess);
  CHECK_RESULT(hipFree(gate->word), hipSuccess);
}

static void test_stream_lifecycle(void) {
  hipStream_t stream = NULL;
  hipStream_t nonblocking = NULL;
  hipStream_t prioritized = NULL;
  hipStream_t destroyed = NULL;
  hipStream_t const sentinel = (hipStream_t)(uintptr_t)0xdead0;
  hipStream_t unchanged = sentinel;
  hipEvent_t event = NULL;
  struct callback_record record;
  void* word = NULL;
  void* pooled = NULL;
  hipMemPool_t pool = NULL;
  uint64_t written = 99;
  unsigned flags = 77;
  int least = 99;
  int greatest = 99;
  int priority = 77;

  CHECK_RESULT(hipStreamCreate(&stream), hipSuccess);
  CHECK(stream != NULL);
  CHECK_RESULT(hipStreamQuery(stream), hipSuccess); /* nothing queued yet */
  CHECK_RESULT(hipStreamSynchronize(stream), hipSuccess);
  CHECK_RESULT(hipStreamGetFlags(stream, &flags), hipSuccess);
  CHECK(flags == hipStreamDefault);

  CHECK_RESULT(hipStreamCreateWithFlags(&nonblocking, hipStreamNonBlocking), hipSuccess);
  CHECK(nonblocking != NULL && nonblocking != stream);
  CHECK_RESULT(hipStreamGetFlags(nonblocking, &flags), hipSuccess);
  CHECK(flags == hipStreamNonBlocking);

  /* Priorities outside [greatest, least] are clamped into it, as documented. */
  CHECK_RESULT(hipDeviceGetStreamPriorityRange(&least, &greatest), hipSuccess);
  CHECK(greatest <= least);
  CHECK_RESULT(hipStreamCreateWithPriority(&prioritized, hipStreamNonBlocking, greatest), hipSuccess);
  CHECK_RESULT(hipStreamGetPriority(prioritized, &priority), hipSuccess);
  CHECK(priority == greatest);
  CHECK_RESULT(hipStreamGetFlags(prioritized, &flags), hipSuccess);
  CHECK(flags == hipStreamNonBlocking);
  CHECK_RESULT(hipStreamDestroy(prioritized), hipSuccess);
  CHECK_RESULT(hipStreamCreateWithPriority(&prioritized, hipStreamDefault, least + 100), hipSuccess);
  CHECK_RESULT(hipStreamGetPriority(prioritized, &priority), hipSuccess);
  CHECK(priority == least);
  CHECK_RESULT(hipStreamDestroy(prioritized), hipSuccess);
  CHECK_RESULT(hipStreamCreateWithPriority(&prioritized, hipStreamDefault, greatest - 100), hipSuccess);
  CHECK_RESULT(hipStreamGetPriority(prioritized, &priority), hipSuccess);
  CHECK(priority == greatest);
  CHECK_RESULT(hipStreamDestroy(prioritized), hipSuccess);

  /* Creation refusals leave the out parameter alone. */
  CHECK_RESULT(hipStreamCreate(NULL), hipErrorInvalidValue);
  CHECK_RESULT(hipStreamCreateWithFlags(NULL, hipStreamDefault), hipErrorInvalidValue);
  CHECK_RESULT(hipStreamCreateWithFlags(&unchanged, 0x2), hipErrorInvalidValue);
  CHECK_RESULT(hipStreamCreateWithFlags(&unchanged, 0xFFFFFFFFu), hipErrorInvalidValue);
  CHECK_RESULT(hipStreamCreateWithPriority(NULL, hipStreamDefault, 0), hipErrorInvalidValue);
  CHECK_RESULT(hipStreamCreateWithPriority(&unchanged, 0x4, 0), hipErrorInvalidValue);
  CHECK(unchanged == sentinel);
  CHECK(hipGetLastError() == hipErrorInvalidValue);
  CHECK(hipGetLastError() == hipSuccess);

  /* A destroyed stream is refused by the calls that document hipErrorInvalidHandle; no callback
   * queued on it ever runs. */
  CHECK_RESULT(hipStreamCreate(&destroyed), hipSuccess);
  CHECK_RESULT(hipStreamDestroy(destroyed), hipSuccess);
  CHECK_RESULT(hipEventCreate(&event), hipSuccess);
  memset(&record, 0, sizeof record);
  CHECK_RESULT(hipStreamDestroy(destroyed), hipErrorInvalidHandle);
  CHECK_RESULT(hipStreamQuery(destroyed), hipErrorInvalidHandle);
  CHECK_RESULT(hipStreamSynchronize(destroyed), hipErrorInvalidHandle);
  CHECK_RESULT(hipStreamAddCallback(destroyed, record_callback, &record, 0), hipErrorInvalidHandle);
  CHECK_RESULT(hipStreamWaitEvent(destroyed, event, 0), hipErrorInvalidHandle);
  CHECK_RESULT(hipStreamGetFlags(destroyed, &flags), hipErrorInvalidHandle);
  CHECK_RESULT(hipStreamGetPriority(destroyed, &priority), hipErrorInvalidHandle);
  CHECK_RESULT(hipStreamGetFlags(stream, NULL), hipErrorInvalidValue);
  CHECK_RESULT(hipStreamGetPriority(stream, NULL), hipErrorInvalidValue);
  /* ...and by those that document hipErrorInvalidValue and not hipErrorInvalidHandle with that code:
   * stream wait and write value and the stream-ordered allocator. Nothing of them runs. */
  CHECK_RESULT(hipExtMallocWithFlags(&word, sizeof(uint64_t), hipMallocSignalMemory), hipSuccess);
  CHECK_RESULT(hipMemset(word, 0, sizeof(uint64_t)), hipSuccess);
  CHECK_RESULT(hipStreamWaitValue32(destroyed, word, 1, hipStreamWaitValueEq, 0xFFFFFFFFu), hipErrorInvalidValue);
  CHECK_RESULT(hipStreamWaitValue64(destroyed, word, 1, hipStreamWaitValueEq, ~(uint64_t)0), hipErrorInvalidValue);
  CHECK_RESULT(hipStreamWriteValue32(destroyed, word, 1, 0), hipErrorInvalidValue);
  CHECK_RESULT(hipStreamWriteValue64(destroyed, word, 1, 0), hipErrorInvalidValue);
  CHECK_RESULT(hipMallocAsync(&pooled, 256, destroyed), hipErrorInvalidValue);
  CHECK(pooled == NULL);
  CHECK_RESULT(hipDeviceGetDefaultMemPool(&pool, 0), hipSuccess);
  CHECK_RESULT(hipMallocFromPoolAsync(&pooled, 256, pool, destroyed), hipErrorInvalidValue);
  CHECK(pooled == NULL);
  CHECK_RESULT(hipMallocAsync(&pooled, 256, NULL), hipSuccess);
  CHECK_RESULT(hipFreeAsync(pooled, destroyed), hipErrorInvalidValue);
  CHECK_RESULT(hipFreeAsync(pooled, NULL), hipSuccess);
  CHECK_RESULT(hipDeviceSynchronize(), hipSuccess);
  CHECK(record.calls == 0);
  CHECK_RESULT(hipMemcpy(&written, word, sizeof written, hipMemcpyDefault), hipSuccess);
  CHECK(written == 0);
  CHECK_RESULT(hipFree(word), hipSuccess);

  CHECK_RESULT(hipEventDestroy(event), hipSuccess);
  CHECK_RESULT(hipStreamDestroy(nonblocking), hipSuccess);
  CHECK_RESULT(hipStreamDestroy(stream), hipSuccess);
}

/* Copies, a fill and callbacks on one stream run in the order queued. */
static void test_stream_order_and_callbacks(void) {
  enum { kBytes = 4096 };
  static unsigned char sent[kBytes];
  static unsigned char back[kBytes];
  struct callback_record first;
  struct callback_record second;
  int sequence = 0;
  hipStream_t stream = NULL;
  void* device = NULL;
  hipStreamCallback_t callback = record_callback;
  size_t i;
  int ok = 1;

  fill_pattern(sent, kBytes, 1);
  memset(back, 0, kBytes);
  memset(&first, 0, sizeof first);
  memset(&second, 0, sizeof second);
  first.sequence = &sequence;
  second.sequence = &sequence;
  first.watched = &back[100];
  first.seen = 0;
  first.status = hipErrorUnknown;

  CHECK_RESULT(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking), hipSuccess);
  CHECK_RESULT(hipMalloc(&device, kBytes), hipSuccess);
  CHECK_RESULT(hipMemcpyAsync(device, sent, kBytes, hipMemcpyHostToDevice, stream), hipSuccess);
  CHECK_RESULT(hipMemsetAsync((char*)device + 100, 0xE7, 50, stream), hipSuccess);
  CHECK_RESULT(hipMemcpyAsync(back, device, kBytes, hipMemcpyDeviceToHost, stream), hipSuccess);
  CHECK_RESULT(hipStreamAddCallback(stream, callback, &first, 0), hipSuccess);
  CHECK_RESULT(hipStreamAddCallback(stream, record_callback, &second, 0), hipSuccess);
  CHECK_RESULT(hipStreamSynchronize(stream), hipSuccess);
  CHECK_RESULT(hipStreamQuery(stream), hipSuccess);

  CHECK(first.calls == 1 && second.calls == 1);
  CHECK(first.stream == stream && second.stream == stream);
  CHECK(first.status == hipSuccess && second.status == hipSuccess);
  CHECK(first.order == 1 && second.order == 2);
  CHECK(first.seen == 0xE7); /* the callback ran after the copy before it had finished */
  for (i = 0; i < kBytes; ++i) {
    unsigned char expected = (i >= 100 && i < 150) ? 0xE7 : sent[i];
    if (back[i] != expected) ok = 0;
  }
  CHECK(ok);

  CHECK_RESULT(hipFree(device), hipSuccess);
  CHECK_RESULT(hipStreamDestroy(stream), hipSuccess);
}

/* What a host function saw: its calls, and where it came among a stream's host work. */
struct host_function_record {
  int calls;
  int order;
  int* sequence;
};

static void record_host_function(void* user_data) {
  struct host_function_record* record = (struct host_function_record*)user_data;
  record->calls += 1;
  record->order = ++*record->sequence;
}

/* The driver-style spellings: hipDeviceGet, hipMemcpyHtoD/DtoH/DtoD and their Async forms,
 * hipMemsetD8 and its Async form, each the same call as the hipMemcpy/hipMemset it names. */
static void test_driver_style_copies(void) {
  enum { kBytes = 4096 };
  static unsigned char sent[kBytes];
  static unsigned char back[kBytes];
  hipDevice_t device = -1;
  int count = 0;
  hipStream_t stream = NULL;
  hipDeviceptr_t first = NULL;
  hipDeviceptr_t second = NULL;

  CHECK_RESULT(hipGetDeviceCount(&count), hipSuccess);
  CHECK_RESULT(hipDeviceGet(&device, 0), hipSuccess);
  CHECK(device == 0);
  CHECK_RESULT(hipDeviceGet(&device, count), hipErrorInvalidDevice);
  CHECK_RESULT(hipDeviceGet(&device, -1), hipErrorInvalidDevice);
  CHECK(device == 0);
  CHECK_RESULT(hipDeviceGet(NULL, 0), hipErrorInvalidValue);

  fill_pattern(sent, kBytes, 11);
  CHECK_RESULT(hipMalloc(&first, kBytes), hipSuccess);
  CHECK_RESULT(hipMalloc(&second, kBytes), hipSuccess);
  CHECK_RESULT(hipMemcpyHtoD(first, sent, kBytes), hipSuccess);
  CHECK_RESULT(hipMemcpyDtoD(second, first, kBytes), hipSuccess);
  memset(back, 0, kBytes);
  CHECK_RESULT(hipMemcpyDtoH(back, second, kBytes), hipSuccess);
  CHECK(memcmp(back, sent, kBytes) == 0);
  CHECK_RESULT(hipMemsetD8(first, 0x5c, kBytes), hipSuccess);
  CHECK_RESULT(hipMemcpyDtoH(back, first, kBytes), hipSuccess);
  CHECK(all_equal(back, kBytes, 0x5c));

  CHECK_RESULT(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking), hipSuccess);
  fill_pattern(sent, kBytes, 12);
  CHECK_RESULT(hipMemcpyHtoDAsync(first, sent, kBytes, stream), hipSuccess);
  CHECK_RESULT(hipMemcpyDtoDAsync(second, first, kBytes, stream), hipSuccess);
  CHECK_RESULT(hipMemsetD8Async(first, 0x17, kBytes / 2, stream), hipSuccess);
  CHECK_RESULT(hipMemcpyDtoHAsync(back, second, kBytes, stream), hipSuccess);
  CHECK_RESULT(hipStreamSynchronize(stream), hipSuccess);
  CHECK(memcmp(back, sent, kBytes) == 0);
  CHECK_RESULT(hipMemcpyDtoH(back, first, kBytes), hipSuccess);
  CHECK(all_equal(back, kBytes / 2, 0x17));
  CHECK(memcmp(back + kBytes / 2, sent + kBytes / 2, kBytes / 2) == 0);

  /* Refused as the calls they name refuse them. */
  CHECK_RESULT(hipMemcpyHtoD(NULL, sent, kBytes), hipErrorInvalidValue);
  CHECK_RESULT(hipMemsetD8(NULL, 0, kBytes), hipErrorInvalidValue);
  CHECK_RESULT(hipMemcpyDtoHAsync(back, first, kBytes, (hipStream_t)(uintptr_t)0x7777), hipErrorInvalidHandle);
  CHECK_RESULT(hipStreamDestroy(stream), hipSuccess);
  CHECK_RESULT(hipFree(first), hipSuccess);
  CHECK_RESULT(hipFree(second), hipSuccess);
}

static void test_host_functions_and_peer_copies(void) {
  enum { kBytes = 8192 };
  static unsigned char sent[kBytes];
  static unsigned char back[kBytes];
  struct callback_record callback;
  struct host_function_record before;
  struct host_function_record after;
  int sequence = 0;
  int count = 0;
  hipStream_t stream = NULL;
  void* source = NULL;
  void* target = NULL;
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  size_t device_total = 0;
  hipHostFn_t host_function = record_host_function;

  memset(&callback, 0, sizeof callback);
  memset(&before, 0, sizeof before);
  memset(&after, 0, sizeof after);
  callback.sequence = &sequence;
  before.sequence = &sequence;
  after.sequence = &sequence;
  fill_pattern(sent, kBytes, 7);
  memset(back, 0, kBytes);
  CHECK_RESULT(hipGetDeviceCount(&count), hipSuccess);
  CHECK_RESULT(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking), hipSuccess);
  CHECK_RESULT(hipMalloc(&source, kBytes), hipSuccess);
  CHECK_RESULT(hipMalloc(&target, kBytes), hipSuccess);

  /* Host functions run once each, in stream order with callbacks and after the copies before them. */
  CHECK_RESULT(hipMemcpyAsync(source, sent, kBytes, hipMemcpyHostToDevice, stream), hipSuccess);
  CHECK_RESULT(hipLaunchHostFunc(stream, host_function, &before), hipSuccess);
  CHECK_RESULT(hipStreamAddCallback(stream, record_callback, &callback, 0), hipSuccess);
  CHECK_RESULT(hipMemcpyPeerAsync(target, 0, source, 0, kBytes, stream), hipSuccess);
  CHECK_RESULT(hipMemcpyAsync(back, target, kBytes, hipMemcpyDeviceToHost, stream), hipSuccess);
  CHECK_RESULT(hipLaunchHostFunc(stream, record_host_function, &after), hipSuccess);
  CHECK_RESULT(hipStreamSynchronize(stream), hipSuccess);
  CHECK(before.calls == 1 && callback.calls == 1 && after.calls == 1);
  CHECK(before.order == 1 && callback.order == 2 && after.order == 3);
  CHECK(memcmp(back, sent, kBytes) == 0);
  CHECK_RESULT(hipLaunchHostFunc(stream, NULL, &before), hipErrorInvalidValue);
  CHECK_RESULT(hipStreamSynchronize(stream), hipSuccess);
  CHECK(before.calls == 1);

  /* The synchronous form, and device ordinals checked before anything moves. */
  CHECK_RESULT(hipMemset(target, 0, kBytes), hipSuccess);
  CHECK_RESULT(hipMemcpyPeer(target, 0, source, 0, kBytes), hipSuccess);
  CHECK_RESULT(hipMemcpy(back, target, kBytes, hipMemcpyDeviceToHost), hipSuccess);
  CHECK(memcmp(back, sent, kBytes) == 0);
  CHECK_RESULT(hipMemset(target, 0, kBytes), hipSuccess);
  CHECK_RESULT(hipMemcpyPeer(target, count, source, 0, kBytes), hipErrorInvalidDevice);
  CHECK_RESULT(hipMemcpyPeer(target, 0, source, -1, kBytes), hipErrorInvalidDevice);
  CHECK_RESULT(hipMemcpyPeerAsync(target, -1, source, 0, kBytes, stream), hipErrorInvalidDevice);
  CHECK_RESULT(hipMemcpyPeerAsync(target, 0, source, count, kBytes, stream), hipErrorInvalidDevice);
  CHECK_RESULT(hipStreamSynchronize(stream), hipSuccess);
  CHECK_RESULT(hipMemcpy(back, target, kBytes, hipMemcpyDeviceToHost), hipSuccess);
  CHECK(all_equal(back, kBytes, 0));

  /* Peer access: a device is not its own peer, flags are reserved, and nothing enabled cannot be
   * disabled. (Pairs of devices are tested where there are two, in test_devices.) */
  CHECK_RESULT(hipDeviceEnablePeerAccess(0, 0), hipErrorInvalidDevice);
  CHECK_RESULT(hipDeviceEnablePeerAccess(count, 0), hipErrorInvalidDevice);
  CHECK_RESULT(hipDeviceEnablePeerAccess(0, 1), hipErrorInvalidValue);
  CHECK_RESULT(hipDeviceDisablePeerAccess(0), hipErrorInvalidDevice);
  CHECK_RESULT(hipDeviceDisablePeerAccess(-1), hipErrorInvalidDevice);

  /* Memory info of the current device: the total is the device's, what is free fits in it. */
  CHECK_RESULT(hipMemGetInfo(&free_bytes, &total_bytes), hipSuccess);
  CHECK_RESULT(hipDeviceTotalMem(&device_total, 0), hipSuccess);
  CHECK(total_bytes == device_total);
  CHECK(free_bytes > 0 && free_bytes <= total_bytes);
  CHECK_RESULT(hipMemGetInfo(NULL, &total_bytes), hipErrorInvalidValue);
  CHECK_RESULT(hipMemGetInfo(&free_bytes, NULL), hipErrorInvalidValue);

  CHECK_RESULT(hipFree(source), hipSuccess);
  CHECK_RESULT(hipFree(target), hipSuccess);
  CHECK_RESULT(hipStreamDestroy(stream), hipSuccess);
}

/* A stream held on a wait value: query, events and a stream waiting on its event see the hold;
 * a write value from another stream lets it go. */
static void test_wait_write_value_and_events(void) {
  enum { kBytes = 8192 };
  static unsigned char back[kBytes];
  struct gate gate;
  struct callback_record held_callback;
  hipStream_t held = NULL;
  hipStream_t waiter = NULL;
  hipEvent_t before = NULL;
  hipEvent_t after = NULL;
  void* buffer = NULL;
  void* word = NULL;
  uint32_t value = 0;
  float ms = 42.0f;

  if (!gate_make(&gate)) {
    CHECK(!"signal memory and a stream for the gate");
    return;
  }
  memset(&held_callback, 0, sizeof held_callback);
  memset(back, 0, kBytes);
  CHECK_RESULT(hipStreamCreateWithFlags(&held, hipStreamNonBlocking), hipSuccess);
  CHECK_RESULT(hipStreamCreateWithFlags(&waiter, hipStreamNonBlocking), hipSuccess);
  CHECK_RESULT(hipEventCreate(&before), hipSuccess);
  CHECK_RESULT(hipEventCreateWithFlags(&after, hipEventBlockingSync), hipSuccess);
  CHECK_RESULT(hipMalloc(&buffer, kBytes), hipSuccess);
  CHECK_RESULT(hipMemset(buffer, 0, kBytes), hipSuccess);

  CHECK_RESULT(hipEventRecord(before, held), hipSuccess);
  CHECK_RESULT(hipStreamWaitValue32(held, gate.word, 1, hipStreamWaitValueGte, 0xFFFFFFFFu), hipSuccess);
  CHECK_RESULT(hipMemsetAsync(buffer, 0x5A, kBytes, held), hipSuccess);
  CHECK_RESULT(hipStreamAddCallback(held, record_callback, &held_callback, 0), hipSuccess);
  CHECK_RESULT(hipEventRecord(after, held), hipSuccess);
  CHECK_RESULT(hipStreamWaitEvent(waiter, after, 0), hipSuccess);
  CHECK_RESULT(hipMemcpyAsync(back, buffer, kBytes, hipMemcpyDeviceToHost, waiter), hipSuccess);

  /* Nothing behind the wait can have run: the word is still 0. */
  CHECK_RESULT(hipEventSynchronize(before), hipSuccess);
  CHECK_RESULT(hipEventQuery(before), hipSuccess);
  CHECK_RESULT(hipStreamQuery(held), hipErrorNotReady);
  CHECK_RESULT(hipEventQuery(after), hipErrorNotReady);
  CHECK_RESULT(hipEventElapsedTime(&ms, before, after), hipErrorNotReady);
  CHECK(ms == 42.0f);
  CHECK_RESULT(hipStreamQuery(waiter), hipErrorNotReady);
  CHECK(held_callback.calls == 0);

  gate_open(&gate);
  CHECK_RESULT(hipEventSynchronize(after), hipSuccess);
  CHECK_RESULT(hipEventQuery(after), hipSuccess);
  CHECK_RESULT(hipStreamSynchronize(held), hipSuccess);
  CHECK(held_callback.calls == 1 && held_callback.status == hipSuccess && held_callback.stream == held);
  CHECK_RESULT(hipStreamSynchronize(waiter), hipSuccess);
  CHECK(all_equal(back, kBytes, 0x5A)); /* the waiter's copy came after the held stream's memset */
  CHECK_RESULT(hipEventElapsedTime(&ms, before, after), hipSuccess);
  CHECK(ms >= 0.0f);
  CHECK_RESULT(hipMemcpy(&value, gate.word, sizeof value, hipMemcpyDeviceToHost), hipSuccess);
  CHECK(value == 1);

  /* Conditions that already hold let the stream through; the masks apply as documented. */
  CHECK_RESULT(hipStreamWaitValue32(held, gate.word, 1, hipStreamWaitValueEq, 0xFFFFFFFFu), hipSuccess);
  CHECK_RESULT(hipStreamWaitValue32(held, gate.word, 0x3, hipStreamWaitValueAnd, 0xFFFFFFFFu), hipSuccess);
  CHECK_RESULT(hipStreamWaitValue32(held, gate.word, 1, hipStreamWaitValueEq, 0x0F), hipSuccess);
  CHECK_RESULT(hipStreamWaitValue32(held, gate.word, 0, hipStreamWaitValueNor, 0xFFFFFFFFu), hipSuccess);
  CHECK_RESULT(hipStreamSynchronize(held), hipSuccess);

  /* Write value stores into any device memory, in stream order after earlier work. */
  CHECK_RESULT(hipMalloc(&word, sizeof(uint32_t)), hipSuccess);
  CHECK_RESULT(hipMemsetAsync(word, 0xFF, sizeof(uint32_t), held), hipSuccess);
  CHECK_RESULT(hipStreamWriteValue32(held, word, 0xC0FFEEu, 0), hipSuccess);
  CHECK_RESULT(hipStreamSynchronize(held), hipSuccess);
  value = 0;
  CHECK_RESULT(hipMemcpy(&value, word, sizeof value, hipMemcpyDeviceToHost), hipSuccess);
  CHECK(value == 0xC0FFEEu);

  /* Refusals: nothing is queued, nothing written. */
  CHECK_RESULT(hipStreamWaitValue32(held, gate.word, 0, 4, 0xFFFFFFFFu), hipErrorInvalidValue);
  CHECK_RESULT(hipStreamWaitValue32(held, gate.word, 0, 0xFFFFFFFFu, 0xFFFFFFFFu), hipErrorInvalidValue);
  CHECK_RESULT(hipStreamWaitValue32(held, NULL, 0, hipStreamWaitValueGte, 0xFFFFFFFFu), hipErrorInvalidValue);
  CHECK_RESULT(hipStreamWaitValue32(held, (char*)gate.word + 1, 0, hipStreamWaitValueGte, 0xFFFFFFFFu),
               hipErrorInvalidValue);
  CHECK_RESULT(hipStreamWriteValue32(held, NULL, 7, 0), hipErrorInvalidValue);
  CHECK_RESULT(hipStreamWriteValue32(held, (char*)word + 2, 7, 0), hipErrorInvalidValue);
  CHECK_RESULT(hipStreamQuery(held), hipSuccess);
  CHECK_RESULT(hipMemcpy(&value, word, sizeof value, hipMemcpyDeviceToHost), hipSuccess);
  CHECK(value == 0xC0FFEEu);

  CHECK_RESULT(hipFree(word), hipSuccess);
  CHECK_RESULT(hipFree(buffer), hipSuccess);
  CHECK_RESULT(hipEventDestroy(before), hipSuccess);
  CHECK_RESULT(hipEventDestroy(after), hipSuccess);
  CHECK_RESULT(hipStreamDestroy(waiter), hipSuccess);
  CHECK_RESULT(hipStreamDestroy(held), hipSuccess);
  gate_free(&gate);
}

static void test_events(void) {
  hipEvent_t start = NULL;
  hipEvent_t stop = NULL;
  hipEvent_t untimed = NULL;
  hipEvent_t never = NULL;
  hipEvent_t destroyed = NULL;
  hipEvent_t const sentinel = (hipEvent_t)(uintptr_t)0xbeef0;
  hipEvent_t unchanged = sentinel;
  hipStream_t stream = NULL;
  void* device = NULL;
  float ms = -1.0f;

  CHECK_RESULT(hipStreamCreate(&stream), hipSuccess);
  CHECK_RESULT(hipMalloc(&device, 1 << 20), hipSuccess);
  CHECK_RESULT(hipEventCreate(&start), hipSuccess);
  CHECK_RESULT(hipEventCreateWithFlags(&stop, hipEventBlockingSync), hipSuccess);
  CHECK_RESULT(hipEventCreateWithFlags(&untimed, hipEventDisableTiming), hipSuccess);
  CHECK_RESULT(hipEventCreateWithFlags(&never, hipEventDefault), hipSuccess);
  CHECK(start != NULL && stop != NULL && untimed != NULL && never != NULL);
  CHECK(start != stop && stop != untimed && untimed != never);
  /* Never recorded: complete, and synchronize returns at once. */
  CHECK_RESULT(hipEventQuery(never), hipSuccess);
  CHECK_RESULT(hipEventSynchronize(never), hipSuccess);

  CHECK_RESULT(hipEventRecord(start, stream), hipSuccess);
  CHECK_RESULT(hipMemsetAsync(device, 0x11, 1 << 20, stream), hipSuccess);
  CHECK_RESULT(hipEventRecord(untimed, stream), hipSuccess);
  CHECK_RESULT(hipEventRecord(stop, stream), hipSuccess);
  CHECK_RESULT(hipEventSynchronize(stop), hipSuccess);
  CHECK_RESULT(hipEventQuery(start), hipSuccess);
  CHECK_RESULT(hipEventQuery(untimed), hipSuccess);
  CHECK_RESULT(hipEventElapsedTime(&ms, start, stop), hipSuccess);
  CHECK(ms >= 0.0f);
  CHECK_RESULT(hipEventElapsedTime(&ms, start, start), hipSuccess);
  CHECK(ms == 0.0f);
  /* Recorded on the null stream (the C caller passes it explicitly: no default argument). */
  CHECK_RESULT(hipEventRecord(stop, NULL), hipSuccess);
  CHECK_RESULT(hipEventSynchronize(stop), hipSuccess);
  CHECK_RESULT(hipEventElapsedTime(&ms, start, stop), hipSuccess);
  CHECK(ms >= 0.0f);

  /* Elapsed time: not recorded and timing disabled are hipErrorInvalidHandle; a null result
   * pointer is hipErrorInvalidValue; none of them writes the result. */
  ms = 42.0f;
  CHECK_RESULT(hipEventElapsedTime(&ms, start, never), hipErrorInvalidHandle);
  CHECK_RESULT(hipEventElapsedTime(&ms, never, stop), hipErrorInvalidHandle);
  CHECK_RESULT(hipEventElapsedTime(&ms, start, untimed), hipErrorInvalidHandle);
  CHECK_RESULT(hipEventElapsedTime(&ms, untimed, stop), hipErrorInvalidHandle);
  CHECK(ms == 42.0f);
  CHECK_RESULT(hipEventElapsedTime(NULL, start, stop), hipErrorInvalidValue);

  /* Creation refusals. */
  CHECK_RESULT(hipEventCreate(NULL), hipErrorInvalidValue);
  CHECK_RESULT(hipEventCreateWithFlags(NULL, hipEventDefault), hipErrorInvalidValue);
  CHECK_RESULT(hipEventCreateWithFlags(&unchanged, 0x8), hipErrorInvalidValue);
  CHECK_RESULT(hipEventCreateWithFlags(&unchanged, hipEventInterprocess), hipErrorInvalidValue); /* needs DisableTiming */
  CHECK(unchanged == sentinel);

  /* A destroyed event is refused by every call that takes one. */
  CHECK_RESULT(hipEventCreate(&destroyed), hipSuccess);
  CHECK_RESULT(hipEventRecord(destroyed, stream), hipSuccess);
  CHECK_RESULT(hipEventDestroy(destroyed), hipSuccess);
  CHECK_RESULT(hipEventRecord(destroyed, stream), hipErrorInvalidHandle);
  CHECK_RESULT(hipEventQuery(destroyed), hipErrorInvalidHandle);
  CHECK_RESULT(hipEventSynchronize(destroyed), hipErrorInvalidHandle);
  CHECK_RESULT(hipEventElapsedTime(&ms, start, destroyed), hipErrorInvalidHandle);
  CHECK_RESULT(hipStreamWaitEvent(stream, destroyed, 0), hipErrorInvalidHandle);
  CHECK_RESULT(hipStreamWaitEvent(stream, NULL, 0), hipErrorInvalidHandle);
  CHECK_RESULT(hipStreamSynchronize(stream), hipSuccess); /* the refusals left the stream working */

  CHECK_RESULT(hipEventDestroy(start), hipSuccess);
  CHECK_RESULT(hipEventDestroy(stop), hipSuccess);
  CHECK_RESULT(hipEventDestroy(untimed), hipSuccess);
  CHECK_RESULT(hipEventDestroy(never), hipSuccess);
  CHECK_RESULT(hipFree(device), hipSuccess);
  CHECK_RESULT(hipStreamDestroy(stream), hipSuccess);
}

static void test_malloc_async(void) {
  enum { kBytes = 3000 };
  static unsigned char sent[kBytes];
  static unsigned char back[kBytes];
  hipStream_t stream = NULL;
  void* ptr = NULL;
  void* linear = NULL;
  size_t i;
  int ok = 1;

  fill_pattern(sent, kBytes, 2);
  memset(back, 0, kBytes);
  CHECK_RESULT(hipStreamCreate(&stream), hipSuccess);
  CHECK_RESULT(hipMallocAsync(&ptr, kBytes, stream), hipSuccess);
  CHECK(ptr != NULL);
  CHECK_RESULT(hipMemcpyAsync(ptr, sent, kBytes, hipMemcpyHostToDevice, stream), hipSuccess);
  CHECK_RESULT(hipMemsetAsync((char*)ptr + kBytes - 10, 0x3C, 10, stream), hipSuccess);
  CHECK_RESULT(hipMemcpyAsync(back, ptr, kBytes, hipMemcpyDeviceToHost, stream), hipSuccess);
  CHECK_RESULT(hipFreeAsync(ptr, stream), hipSuccess);
  CHECK_RESULT(hipStreamSynchronize(stream), hipSuccess);
  for (i = 0; i < kBytes; ++i) {
    unsigned char expected = i >= kBytes - 10 ? 0x3C : sent[i];
    if (back[i] != expected) ok = 0;
  }
  CHECK(ok);

  /* Refusals, each hipErrorInvalidValue. */
  CHECK_RESULT(hipMallocAsync(NULL, 256, stream), hipErrorInvalidValue);
  CHECK_RESULT(hipFreeAsync(NULL, stream), hipErrorInvalidValue);
  CHECK_RESULT(hipFreeAsync(ptr, stream), hipErrorInvalidValue); /* freed above */
  CHECK_RESULT(hipMalloc(&linear, 4096), hipSuccess);
  CHECK_RESULT(hipFreeAsync(linear, stream), hipErrorInvalidValue); /* not stream-ordered memory */
  CHECK_RESULT(hipFree(linear), hipSuccess);
  CHECK_RESULT(hipMallocAsync(&ptr, 4096, stream), hipSuccess);
  CHECK_RESULT(hipFreeAsync((char*)ptr + 256, stream), hipErrorInvalidValue); /* not the start */
  CHECK_RESULT(hipFreeAsync(ptr, stream), hipSuccess);
  CHECK_RESULT(hipStreamSynchronize(stream), hipSuccess);
  CHECK_RESULT(hipStreamDestroy(stream), hipSuccess);
}

static hipMemPoolProps pool_props(void) {
  hipMemPoolProps props;
  memset(&props, 0, sizeof props); /* reserved must be zero */
  props.allocType = hipMemAllocationTypePinned;
  props.handleTypes = hipMemHandleTypeNone;
  props.location.type = hipMemLocationTypeDevice;
  props.location.id = 0;
  return props;
}

/* hipMemPoolGetAttribute writes exactly the documented value type: int for the reuse policies,
 * uint64_t for the others. A wider write would overrun a C caller's variable. */
static void check_attribute_width(hipMemPool_t pool, hipMemPoolAttr attr, size_t width) {
  unsigned char bytes[16];
  memset(bytes, 0xAA, sizeof bytes);
  CHECK_RESULT(hipMemPoolGetAttribute(pool, attr, bytes), hipSuccess);
  CHECK(all_equal(bytes + width, sizeof bytes - width, 0xAA));
}

static uint64_t get_u64(hipMemPool_t pool, hipMemPoolAttr attr) {
  uint64_t value = 0xDEADBEEF;
  if (hipMemPoolGetAttribute(pool, attr, &value) != hipSuccess) return 0xDEADBEEF;
  return value;
}

static void test_pools(void) {
  enum { kBytes = 1 << 20 };
  static unsigned char sent[kBytes];
  static unsigned char back[kBytes];
  hipMemPoolProps props = pool_props();
  hipMemPool_t pool = NULL;
  hipMemPool_t default_pool = NULL;
  hipMemPool_t const sentinel = (hipMemPool_t)(uintptr_t)0xfeed0;
  hipMemPool_t unchanged = sentinel;
  hipStream_t stream = NULL;
  void* ptr = NULL;
  uint64_t big = UINT64_MAX;
  uint64_t u64 = 0;
  int value = -7;
  int policy;
  int bad = 2;

  CHECK_RESULT(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking), hipSuccess);
  CHECK_RESULT(hipMemPoolCreate(&pool, &props), hipSuccess);
  CHECK(pool != NULL);

  /* Attributes: the reuse policies default to enabled and round-trip 0/1; the release threshold
   * defaults to 0 and round-trips any uint64_t. */
  for (policy = hipMemPoolReuseFollowEventDependencies; policy <= hipMemPoolReuseAllowInternalDependencies; ++policy) {
    hipMemPoolAttr attr = (hipMemPoolAttr)policy;
    value = -7;
    CHECK_RESULT(hipMemPoolGetAttribute(pool, attr, &value), hipSuccess);
    CHECK(value == 1);
    value = 0;
    CHECK_RESULT(hipMemPoolSetAttribute(pool, attr, &value), hipSuccess);
    value = -7;
    CHECK_RESULT(hipMemPoolGetAttribute(pool, attr, &value), hipSuccess);
    CHECK(value == 0);
    CHECK_RESULT(hipMemPoolSetAttribute(pool, attr, &bad), hipErrorInvalidValue);
    value = 1;
    CHECK_RESULT(hipMemPoolSetAttribute(pool, attr, &value), hipSuccess);
    check_attribute_width(pool, attr, sizeof(int));
  }
  CHECK(get_u64(pool, hipMemPoolAttrReleaseThreshold) == 0);
  CHECK_RESULT(hipMemPoolSetAttribute(pool, hipMemPoolAttrReleaseThreshold, &big), hipSuccess);
  CHECK(get_u64(pool, hipMemPoolAttrReleaseThreshold) == UINT64_MAX);
  check_attribute_width(pool, hipMemPoolAttrReleaseThreshold, sizeof(uint64_t));
  check_attribute_width(pool, hipMemPoolAttrReservedMemCurrent, sizeof(uint64_t));
  check_attribute_width(pool, hipMemPoolAttrUsedMemHigh, sizeof(uint64_t));

  /* Allocation from the pool: data round trip, and the pool's books follow it. */
  fill_pattern(sent, kBytes, 3);
  memset(back, 0, kBytes);
  CHECK_RESULT(hipMallocFromPoolAsync(&ptr, kBytes, pool, stream), hipSuccess);
  CHECK(ptr != NULL);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemCurrent) >= kBytes);
  CHECK_RESULT(hipMemcpyAsync(ptr, sent, kBytes, hipMemcpyHostToDevice, stream), hipSuccess);
  CHECK_RESULT(hipMemcpyAsync(back, ptr, kBytes, hipMemcpyDeviceToHost, stream), hipSuccess);
  CHECK_RESULT(hipFreeAsync(ptr, stream), hipSuccess);
  CHECK_RESULT(hipStreamSynchronize(stream), hipSuccess);
  CHECK(memcmp(sent, back, kBytes) == 0);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemCurrent) == 0);
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemHigh) >= kBytes);
  /* The threshold keeps the freed memory reserved; trimming to 0 gives it all back. */
  CHECK(get_u64(pool, hipMemPoolAttrReservedMemCurrent) >= kBytes);
  CHECK_RESULT(hipMemPoolTrimTo(pool, 0), hipSuccess);
  CHECK(get_u64(pool, hipMemPoolAttrReservedMemCurrent) == 0);
  u64 = 0;
  CHECK_RESULT(hipMemPoolSetAttribute(pool, hipMemPoolAttrUsedMemHigh, &u64), hipSuccess); /* reset */
  CHECK(get_u64(pool, hipMemPoolAttrUsedMemHigh) == 0);

  /* Attribute refusals. */
  u64 = 1;
  CHECK_RESULT(hipMemPoolSetAttribute(pool, hipMemPoolAttrUsedMemCurrent, &u64), hipErrorInvalidValue);
  CHECK_RESULT(hipMemPoolSetAttribute(pool, hipMemPoolAttrReservedMemCurrent, &u64), hipErrorInvalidValue);
  CHECK_RESULT(hipMemPoolSetAttribute(pool, hipMemPoolAttrUsedMemHigh, &u64), hipErrorInvalidValue);
  CHECK_RESULT(hipMemPoolGetAttribute(pool, (hipMemPoolAttr)0, &u64), hipErrorInvalidValue);
  CHECK_RESULT(hipMemPoolSetAttribute(pool, (hipMemPoolAttr)9, &u64), hipErrorInvalidValue);
  CHECK_RESULT(hipMemPoolGetAttribute(pool, hipMemPoolAttrReleaseThreshold, NULL), hipErrorInvalidValue);
  CHECK_RESULT(hipMemPoolSetAttribute(pool, hipMemPoolAttrReleaseThreshold, NULL), hipErrorInvalidValue);
  CHECK_RESULT(hipMemPoolGetAttribute(NULL, hipMemPoolAttrReleaseThreshold, &u64), hipErrorInvalidValue);
  CHECK(get_u64(pool, hipMemPoolAttrReleaseThreshold) == UINT64_MAX);

  /* Creation refusals leave the out parameter alone. */
  CHECK_RESULT(hipMemPoolCreate(NULL, &props), hipErrorInvalidValue);
  CHECK_RESULT(hipMemPoolCreate(&unchanged, NULL), hipErrorInvalidValue);
  props = pool_props();
  props.allocType = hipMemAllocationTypeInvalid;
  CHECK_RESULT(hipMemPoolCreate(&unchanged, &props), hipErrorInvalidValue);
  props = pool_props();
  props.location.type = hipMemLocationTypeInvalid;
  CHECK_RESULT(hipMemPoolCreate(&unchanged, &props), hipErrorInvalidValue);
  props = pool_props();
  props.reserved[sizeof props.reserved - 1] = 1;
  CHECK_RESULT(hipMemPoolCreate(&unchanged, &props), hipErrorInvalidValue);
  props = pool_props();
  props.handleTypes = hipMemHandleTypeWin32;
  CHECK_RESULT(hipMemPoolCreate(&unchanged, &props), hipErrorNotSupported);
  CHECK(unchanged == sentinel);

  /* Other refusals. */
  CHECK_RESULT(hipMallocFromPoolAsync(NULL, 256, pool, stream), hipErrorInvalidValue);
  ptr = NULL;
  CHECK_RESULT(hipMallocFromPoolAsync(&ptr, 256, NULL, stream), hipErrorInvalidValue);
  CHECK(ptr == NULL);
  CHECK_RESULT(hipMemPoolTrimTo(NULL, 0), hipErrorInvalidValue);
  CHECK_RESULT(hipDeviceGetDefaultMemPool(&default_pool, 0), hipSuccess);
  CHECK(default_pool != NULL && default_pool != pool);
  CHECK_RESULT(hipMemPoolDestroy(default_pool), hipErrorInvalidValue); /* a default pool stays */
  CHECK_RESULT(hipMemPoolDestroy(NULL), hipErrorInvalidValue);

  /* A destroyed pool is refused by every pool call. */
  CHECK_RESULT(hipMemPoolDestroy(pool), hipSuccess);
  CHECK_RESULT(hipMemPoolDestroy(pool), hipErrorInvalidValue);
  CHECK_RESULT(hipMallocFromPoolAsync(&ptr, 256, pool, stream), hipErrorInvalidValue);
  CHECK(ptr == NULL);
  CHECK_RESULT(hipMemPoolGetAttribute(pool, hipMemPoolAttrReleaseThreshold, &u64), hipErrorInvalidValue);
  CHECK_RESULT(hipMemPoolSetAttribute(pool, hipMemPoolAttrReleaseThreshold, &u64), hipErrorInvalidValue);
  CHECK_RESULT(hipMemPoolTrimTo(pool, 0), hipErrorInvalidValue);

  CHECK_RESULT(hipStreamDestroy(stream), hipSuccess);
}

int main(void) {
  int count = 0;

  /* Layout facts a C caller of these calls depends on (the rest are in tests/abi). */
  CHECK(sizeof(hipStream_t) == sizeof(void*));
  CHECK(sizeof(hipMemPoolAttr) == sizeof(int));

  CHECK_RESULT(hipInit(0), hipSuccess);
  CHECK_RESULT(hipGetDeviceCount(&count), hipSuccess);
  CHECK(count >= 1);

  test_stream_lifecycle();
  test_stream_order_and_callbacks();
  test_wait_write_value_and_events();
  test_events();
  test_malloc_async();
  test_pools();
  test_host_functions_and_peer_copies();
  test_driver_style_copies();

  CHECK_RESULT(hipDeviceSynchronize(), hipSuccess);
  return checks_summary();
}
