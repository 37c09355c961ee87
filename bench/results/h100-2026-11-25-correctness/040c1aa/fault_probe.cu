#include <hipxx/hip_runtime_api.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <unistd.h>
__global__ void trap_now() { asm volatile("trap;"); }
__global__ void nothing() {}
#define STAGE(...) do { std::printf(__VA_ARGS__); std::printf("\n"); std::fflush(stdout); } while (0)
int main(int argc, char** argv) {
  const bool with_wait = argc > 1 && std::strcmp(argv[1], "wait") == 0;
  nothing<<<1, 1>>>();
  STAGE("warm-up %d", (int)cudaDeviceSynchronize());
  void* gate = nullptr;
  STAGE("malloc %d", (int)hipMalloc(&gate, 4));
  STAGE("memset %d", (int)hipMemset(gate, 0, 4));
  hipStream_t stream = nullptr; hipEvent_t event = nullptr;
  STAGE("stream %d", (int)hipStreamCreateWithFlags(&stream, hipStreamNonBlocking));
  STAGE("event %d", (int)hipEventCreate(&event));
  if (with_wait) STAGE("wait value %d", (int)hipStreamWaitValue32(stream, gate, 1, hipStreamWaitValueEq, 0xFFFFFFFFu));
  else STAGE("memset async %d", (int)hipMemsetAsync(gate, 3, 4, stream));
  STAGE("record %d", (int)hipEventRecord(event, stream));
  trap_now<<<1, 1>>>();
  STAGE("launched %d", (int)cudaGetLastError());
  STAGE("cudaStreamSynchronize(legacy) %d", (int)cudaStreamSynchronize(cudaStreamLegacy));
  for (int i = 0; i < 3; ++i) {
    STAGE("hipStreamQuery %d", (int)hipStreamQuery(stream));
    STAGE("hipEventQuery %d", (int)hipEventQuery(event));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  STAGE("hipStreamSynchronize %d", (int)hipStreamSynchronize(stream));
  STAGE("hipEventSynchronize %d", (int)hipEventSynchronize(event));
  STAGE("hipDeviceSynchronize %d", (int)hipDeviceSynchronize());
  STAGE("returning");
  return 0;
}
