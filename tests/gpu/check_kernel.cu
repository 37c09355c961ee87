// gpu-kernel-check: memory reserved, created, mapped and opened through hipxx's HIP C API on the CUDA
// backend is real device memory that a CUDA kernel reads and writes, in both directions:
//   1. a kernel writes a pattern into the mapped range; hipMemcpy brings it back intact;
//   2. hipMemset fills the range; a kernel checks every byte (counting mismatches in hipMalloc memory);
//   3. revoking access (hipMemSetAccess to none: unmap and re-map inside the backend) and granting it
//      again keeps the contents, and a kernel can write the range again afterwards;
//   4. where the device exports POSIX fds: the allocation, exported and imported again, mapped at a
//      second address, shows a kernel the same bytes.
// With two or more devices:
//   5. access granted to device 1 lets its kernels read and write device 0's mapped memory; revoking
//      it makes the books refuse device 1's copies while device 0 keeps the data;
//   6. two processes on two GPUs: this program starts itself again (fork + exec: CUDA cannot continue
//      in a forked child) on device 1, which opens a hipMalloc allocation of device 0 through a legacy
//      IPC handle and imports the mapped allocation through its fd (sent with SCM_RIGHTS), checks both
//      with kernels on device 1 and overwrites them; the first process sees the new bytes.
// And on one device:
//   7. stream waits that the driver's own waits cannot express (Gte above half the 32-bit range, which
//      the driver's GEQ would take as met; Eq under a partial mask) hold the stream on the device:
//      a hipMemsetAsync queued behind one has not run while the gate is closed, a device-wide
//      synchronisation from another thread does not return until it opens, and it opens when another
//      stream writes the word.
//   8. synchronous hipMemset and hipMemcpy wait for the legacy default stream, not for a non-blocking
//      stream of the application's own: a CUDA kernel spinning there until the host lets it go does
//      not hold them (a guard thread lets it go after 10 s, and that counts as a failure).
//   9. a fault that spoils the context (a trapping kernel of the application's own, in a second
//      process, since the context is gone for good) while a hipxx stream is held on the device:
//      hipStreamQuery and hipEventQuery of its work report the fault, as hipStreamSynchronize does,
//      rather than hipErrorNotReady for ever. The process starts the CUDA runtime and loads its
//      kernels first (CUDA_MODULE_LOADING=EAGER): done at the trap's launch, that would wait for the
//      held stream.
// Exits 77 (skipped, for meson) only where the CUDA runtime itself sees no device; if it sees one and
// hipxx does not, that is a failure.
#include <hipxx/hip_runtime_api.h>
#include <hipxx/hipxx_ext.h>

#include <cuda_runtime.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int kSkip = 77;

bool ok = true;

bool check_hip(hipError_t result, const char* call, int line) {
  if (result == hipSuccess) return true;
  std::fprintf(stderr, "line %d: %s -> %s\n", line, call, hipGetErrorName(result));
  ok = false;
  return false;
}

bool check_cuda(cudaError_t result, const char* call, int line) {
  if (result == cudaSuccess) return true;
  std::fprintf(stderr, "line %d: %s -> %s\n", line, call, cudaGetErrorName(result));
  ok = false;
  return false;
}

#define HIP(call) check_hip((call), #call, __LINE__)
#define CUDA(call) check_cuda((call), #call, __LINE__)
#define EXPECT(condition)                                                    \
  do {                                                                       \
    if (!(condition)) {                                                      \
      std::fprintf(stderr, "line %d: expected %s\n", __LINE__, #condition);  \
      ok = false;                                                            \
    }                                                                        \
  } while (0)

__host__ __device__ std::uint32_t pattern(std::size_t index, std::uint32_t seed) {
  return seed ^ static_cast<std::uint32_t>(index * 2654435761u);
}

__global__ void write_pattern(std::uint32_t* words, std::size_t count, std::uint32_t seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    words[i] = pattern(i, seed);
  }
}

__global__ void count_mismatches(const unsigned char* bytes, std::size_t count, unsigned char expected,
                                 unsigned long long* mismatches) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    if (bytes[i] != expected) atomicAdd(mismatches, 1ULL);
  }
}

constexpr unsigned kBlocks = 120;
constexpr unsigned kThreads = 256;

// Whether hipMemcpy (from the current device) brings back the pattern of `seed`.
void expect_pattern(const void* va, std::size_t size, std::uint32_t seed) {
  const std::size_t count = size / sizeof(std::uint32_t);
  std::vector<std::uint32_t> host(count, 0);
  if (!HIP(hipMemcpy(host.data(), va, size, hipMemcpyDeviceToHost))) return;
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) wrong += host[i] != pattern(i, seed) ? 1 : 0;
  if (wrong != 0) std::fprintf(stderr, "kernel pattern (seed %#x): %zu of %zu words wrong\n", seed, wrong, count);
  EXPECT(wrong == 0);
}

// Writes the pattern with a kernel on the current device and checks it through hipMemcpy.
void kernel_writes(void* va, std::size_t size, std::uint32_t seed) {
  write_pattern<<<kBlocks, kThreads>>>(static_cast<std::uint32_t*>(va), size / sizeof(std::uint32_t), seed);
  CUDA(cudaGetLastError());
  CUDA(cudaDeviceSynchronize());
  expect_pattern(va, size, seed);
}

// Counts, with a kernel, the bytes of [va, va + size) that are not `expected`.
unsigned long long kernel_mismatches(const void* va, std::size_t size, unsigned char expected,
                                     unsigned long long* counter) {
  unsigned long long mismatches = ~0ULL;
  if (!HIP(hipMemset(counter, 0, sizeof *counter))) return mismatches;
  count_mismatches<<<kBlocks, kThreads>>>(static_cast<const unsigned char*>(va), size, expected, counter);
  CUDA(cudaGetLastError());
  CUDA(cudaDeviceSynchronize());
  HIP(hipMemcpy(&mismatches, counter, sizeof mismatches, hipMemcpyDeviceToHost));
  return mismatches;
}

bool use_device(int device) { return HIP(hipSetDevice(device)) && CUDA(cudaSetDevice(device)); }

// What the first process sends the second: a legacy IPC handle, the sizes, and an fd alongside.
struct PeerMessage {
  hipIpcMemHandle_t ipc{};
  std::size_t ipc_bytes = 0;
  std::size_t mapped_bytes = 0;
};

bool send_message(int socket, const PeerMessage& message, int fd) {
  iovec data{const_cast<PeerMessage*>(&message), sizeof message};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr header{};
  header.msg_iov = &data;
  header.msg_iovlen = 1;
  header.msg_control = control;
  header.msg_controllen = sizeof control;
  cmsghdr* rights = CMSG_FIRSTHDR(&header);
  rights->cmsg_level = SOL_SOCKET;
  rights->cmsg_type = SCM_RIGHTS;
  rights->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(rights), &fd, sizeof fd);
  return sendmsg(socket, &header, 0) == static_cast<ssize_t>(sizeof message);
}

bool receive_message(int socket, PeerMessage* message, int* fd) {
  iovec data{message, sizeof *message};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr header{};
  header.msg_iov = &data;
  header.msg_iovlen = 1;
  header.msg_control = control;
  header.msg_controllen = sizeof control;
  if (recvmsg(socket, &header, MSG_CMSG_CLOEXEC) != static_cast<ssize_t>(sizeof *message)) return false;
  const cmsghdr* rights = CMSG_FIRSTHDR(&header);
  if (rights == nullptr || rights->cmsg_type != SCM_RIGHTS) return false;
  std::memcpy(fd, CMSG_DATA(rights), sizeof *fd);
  return true;
}

// The second process of step 6, on device 1.
int run_peer(int socket) {
  if (!use_device(1)) return 1;
  PeerMessage message;
  int fd = -1;
  if (!receive_message(socket, &message, &fd)) {
    std::fprintf(stderr, "peer: no message\n");
    return 1;
  }
  unsigned long long* counter = nullptr;
  if (!HIP(hipMalloc(reinterpret_cast<void**>(&counter), sizeof *counter))) return 1;

  void* opened = nullptr;
  if (HIP(hipIpcOpenMemHandle(&opened, message.ipc, hipIpcMemLazyEnablePeerAccess))) {
    EXPECT(kernel_mismatches(opened, message.ipc_bytes, 0x42, counter) == 0);
    HIP(hipMemset(opened, 0x43, message.ipc_bytes));
    HIP(hipDeviceSynchronize());
    HIP(hipIpcCloseMemHandle(opened));
  }

  hipMemGenericAllocationHandle_t imported{};
  void* va = nullptr;
  const hipMemAccessDesc device1{{hipMemLocationTypeDevice, 1}, hipMemAccessFlagsProtReadWrite};
  if (HIP(hipMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)),
                                          hipMemHandleTypePosixFileDescriptor)) &&
      HIP(hipMemAddressReserve(&va, message.mapped_bytes, 0, nullptr, 0))) {
    if (HIP(hipMemMap(va, message.mapped_bytes, 0, imported, 0))) {
      HIP(hipMemSetAccess(va, message.mapped_bytes, &device1, 1));
      EXPECT(kernel_mismatches(va, message.mapped_bytes, 0x3c, counter) == 0);
      HIP(hipMemset(va, 0x3d, message.mapped_bytes));
      HIP(hipMemUnmap(va, message.mapped_bytes));
    }
    HIP(hipMemAddressFree(va, message.mapped_bytes));
    HIP(hipMemRelease(imported));
  }
  close(fd);
  HIP(hipFree(counter));
  const char done = ok ? 'k' : 'x';
  if (write(socket, &done, 1) != 1) return 1;
  return ok ? 0 : 1;
}

// Step 6 in the first process: start the peer on device 1 and check what it wrote.
void two_processes(void* mapped, std::size_t mapped_bytes, hipMemGenericAllocationHandle_t handle,
                   unsigned long long* counter) {
  const std::size_t ipc_bytes = std::size_t{1} << 20;
  void* shared = nullptr;
  PeerMessage message;
  int fd = -1;
  if (!HIP(hipMalloc(&shared, ipc_bytes)) || !HIP(hipMemset(shared, 0x42, ipc_bytes)) ||
      !HIP(hipIpcGetMemHandle(&message.ipc, shared)) ||
      !HIP(hipMemExportToShareableHandle(&fd, handle, hipMemHandleTypePosixFileDescriptor, 0))) {
    return;
  }
  HIP(hipMemset(mapped, 0x3c, mapped_bytes));
  message.ipc_bytes = ipc_bytes;
  message.mapped_bytes = mapped_bytes;
  int sockets[2] = {-1, -1};
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sockets) != 0) {
    std::perror("socketpair");
    ok = false;
    return;
  }
  const pid_t child = fork();
  if (child == 0) {
    close(sockets[0]);
    const std::string socket_arg = std::to_string(sockets[1]);
    execl("/proc/self/exe", "gpu-kernel-check", "--peer", socket_arg.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(sockets[1]);
  EXPECT(send_message(sockets[0], message, fd));
  close(fd);
  char done = 0;
  EXPECT(read(sockets[0], &done, 1) == 1 && done == 'k');
  int status = 0;
  EXPECT(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  close(sockets[0]);
  EXPECT(kernel_mismatches(shared, ipc_bytes, 0x43, counter) == 0);
  EXPECT(kernel_mismatches(mapped, mapped_bytes, 0x3d, counter) == 0);
  HIP(hipFree(shared));
}

// Step 5: device 1 works on device 0's memory while it has access, and is refused once it has none.
void second_device(void* va, std::size_t size, const hipMemAccessDesc& device0) {
  const hipMemAccessDesc both[2] = {device0, {{hipMemLocationTypeDevice, 1}, hipMemAccessFlagsProtReadWrite}};
  const hipMemAccessDesc revoke{{hipMemLocationTypeDevice, 1}, hipMemAccessFlagsProtNone};
  HIP(hipMemSetAccess(va, size, both, 2));
  HIP(hipMemset(va, 0x5a, size));
  if (!use_device(1)) return;
  unsigned long long* counter = nullptr;
  if (HIP(hipMalloc(reinterpret_cast<void**>(&counter), sizeof *counter))) {
    EXPECT(kernel_mismatches(va, size, 0x5a, counter) == 0);
    kernel_writes(va, size, 0xd1ce0001u);
    HIP(hipFree(counter));
  }
  HIP(hipMemSetAccess(va, size, &revoke, 1));
  unsigned char probe = 0;
  EXPECT(hipMemcpy(&probe, va, 1, hipMemcpyDeviceToHost) == hipErrorInvalidValue);  // device 1 has no access
  use_device(0);
  expect_pattern(va, size, 0xd1ce0001u);
}

// Step 7, for one condition: `closed` keeps the gate shut, `opening` opens it.
void device_wait(unsigned flags, std::uint32_t value, std::uint32_t mask, std::uint32_t closed, std::uint32_t opening,
                 unsigned long long* counter) {
  constexpr std::size_t kBytes = 4096;
  void* word = nullptr;
  void* buffer = nullptr;
  hipStream_t gated = nullptr;
  hipStream_t writer = nullptr;
  if (!HIP(hipExtMallocWithFlags(&word, sizeof(std::uint64_t), hipMallocSignalMemory)) ||
      !HIP(hipMalloc(&buffer, kBytes)) || !HIP(hipStreamCreateWithFlags(&gated, hipStreamNonBlocking)) ||
      !HIP(hipStreamCreateWithFlags(&writer, hipStreamNonBlocking))) {
    return;
  }
  HIP(hipMemset(buffer, 0, kBytes));
  HIP(hipMemcpy(word, &closed, sizeof closed, hipMemcpyHostToDevice));
  HIP(hipStreamWaitValue32(gated, word, value, flags, mask));
  HIP(hipMemsetAsync(buffer, 0x5a, kBytes, gated));
  std::atomic<bool> synchronized{false};
  std::thread device_wide([&] {
    CUDA(cudaSetDevice(0));
    CUDA(cudaDeviceSynchronize());
    synchronized = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT(!synchronized.load());  // the wait is on the device
  // And the memset behind it has not run (read on a stream of its own: a kernel here would need a
  // device-wide synchronisation, which the closed gate holds).
  std::vector<unsigned char> seen(kBytes, 0xff);
  hipStream_t reader = nullptr;
  if (HIP(hipStreamCreateWithFlags(&reader, hipStreamNonBlocking))) {
    HIP(hipMemcpyAsync(seen.data(), buffer, kBytes, hipMemcpyDeviceToHost, reader));
    HIP(hipStreamSynchronize(reader));
    HIP(hipStreamDestroy(reader));
  }
  EXPECT(seen == std::vector<unsigned char>(kBytes, 0));
  HIP(hipStreamWriteValue32(writer, word, opening, 0));
  HIP(hipStreamSynchronize(gated));
  device_wide.join();
  EXPECT(synchronized.load());
  EXPECT(kernel_mismatches(buffer, kBytes, 0x5a, counter) == 0);
  HIP(hipStreamDestroy(writer));
  HIP(hipStreamDestroy(gated));
  HIP(hipFree(buffer));
  HIP(hipFree(word));
}

__global__ void spin_until_set(const volatile unsigned* flag) {
  while (*flag == 0) {
  }
}

// Step 8.
void foreign_nonblocking_stream() {
  constexpr std::size_t kBytes = 4096;
  unsigned* flag = nullptr;
  void* buffer = nullptr;
  cudaStream_t foreign = nullptr;
  if (!CUDA(cudaHostAlloc(reinterpret_cast<void**>(&flag), sizeof *flag, cudaHostAllocMapped)) ||
      !HIP(hipMalloc(&buffer, kBytes)) || !CUDA(cudaStreamCreateWithFlags(&foreign, cudaStreamNonBlocking))) {
    return;
  }
  *static_cast<volatile unsigned*>(flag) = 0;
  spin_until_set<<<1, 1, 0, foreign>>>(flag);
  CUDA(cudaGetLastError());
  std::atomic<bool> returned{false};
  std::atomic<bool> let_go_by_guard{false};
  std::thread guard([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!returned.load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    let_go_by_guard = !returned.load();
    *static_cast<volatile unsigned*>(flag) = 1;
  });
  std::vector<unsigned char> back(kBytes, 0);
  HIP(hipMemset(buffer, 0x6b, kBytes));
  HIP(hipMemcpy(back.data(), buffer, kBytes, hipMemcpyDeviceToHost));
  returned = true;
  guard.join();
  EXPECT(!let_go_by_guard.load());
  EXPECT(back == std::vector<unsigned char>(kBytes, 0x6b));
  CUDA(cudaStreamSynchronize(foreign));
  CUDA(cudaStreamDestroy(foreign));
  HIP(hipFree(buffer));
  CUDA(cudaFreeHost(flag));
}

}  // namespace

// Step 9, in its own process: exits 0 where both queries report the fault.
__global__ void trap_now() { asm volatile("trap;"); }

int run_fault() {
  // The CUDA runtime starts here, and loads the kernels (CUDA_MODULE_LOADING=EAGER), before any
  // stream is held: started at the trap's launch, it would wait for the held stream.
  if (!CUDA(cudaFree(nullptr))) return 2;
  void* gate = nullptr;
  hipStream_t stream = nullptr;
  hipEvent_t event = nullptr;
  if (!HIP(hipMalloc(&gate, sizeof(std::uint32_t))) || !HIP(hipMemset(gate, 0, sizeof(std::uint32_t))) ||
      !HIP(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking)) || !HIP(hipEventCreate(&event)) ||
      // Held on the device: the word never becomes 1.
      !HIP(hipStreamWaitValue32(stream, gate, 1, hipStreamWaitValueEq, 0xFFFFFFFFu)) ||
      !HIP(hipEventRecord(event, stream))) {
    return 2;
  }
  trap_now<<<1, 1>>>();
  (void)cudaStreamSynchronize(cudaStreamLegacy);  // the trap's error, sticky from here on
  const hipError_t stream_query = hipStreamQuery(stream);
  const hipError_t event_query = hipEventQuery(event);
  const hipError_t synchronized = hipStreamSynchronize(stream);
  std::printf("gpu-kernel-check: after the fault: hipStreamQuery %s, hipEventQuery %s, hipStreamSynchronize %s\n",
              hipGetErrorName(stream_query), hipGetErrorName(event_query), hipGetErrorName(synchronized));
  std::fflush(stdout);
  const auto reports = [](hipError_t result) { return result != hipSuccess && result != hipErrorNotReady; };
  return reports(stream_query) && reports(event_query) && reports(synchronized) ? 0 : 1;
}

void fault_reported() {
  std::fflush(stdout);
  const pid_t child = fork();
  if (child == 0) {
    setenv("CUDA_MODULE_LOADING", "EAGER", 1);
    execl("/proc/self/exe", "gpu-kernel-check", "--fault", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  pid_t ended = 0;
  for (int waited = 0; waited < 600 && ended == 0; ++waited) {  // a minute at most
    ended = waitpid(child, &status, WNOHANG);
    if (ended == 0) std::this_thread::sleep_for(std::chrono::milliseconds{100});
  }
  if (ended == 0) {
    std::printf("gpu-kernel-check: step 9's process did not end within a minute\n");
    kill(child, SIGKILL);
    (void)waitpid(child, &status, 0);
  }
  EXPECT(ended == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--peer") == 0) return run_peer(std::atoi(argv[2]));
  if (argc == 2 && std::strcmp(argv[1], "--fault") == 0) return run_fault();
  int cuda_devices = 0;
  if (cudaGetDeviceCount(&cuda_devices) != cudaSuccess || cuda_devices == 0) {
    std::printf("gpu-kernel-check: skipped, the CUDA runtime sees no device\n");
    return kSkip;
  }
  int devices = 0;
  if (hipGetDeviceCount(&devices) != hipSuccess || devices == 0) {
    std::fprintf(stderr, "gpu-kernel-check: the CUDA runtime sees %d device(s) but hipxx none: %s\n", cuda_devices,
                 hipxxGetBackendError());
    return 1;
  }
  const char* backend = hipxxGetBackendName();
  if (backend == nullptr || std::strcmp(backend, "cuda") != 0) {
    std::fprintf(stderr, "gpu-kernel-check: needs HIPXX_BACKEND=cuda, runs on '%s'\n", backend ? backend : "?");
    return 1;
  }
  HIP(hipSetDevice(0));
  CUDA(cudaSetDevice(0));  // the same primary context hipxx uses

  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.location.type = hipMemLocationTypeDevice;
  prop.location.id = 0;
  int posix_fd = 0;
  HIP(hipDeviceGetAttribute(&posix_fd, hipDeviceAttributeMemoryPoolSupportedHandleTypes, 0));
  const bool exportable = (posix_fd & hipMemHandleTypePosixFileDescriptor) != 0;
  prop.requestedHandleType = exportable ? hipMemHandleTypePosixFileDescriptor : hipMemHandleTypeNone;
  std::size_t granularity = 0;
  if (!HIP(hipMemGetAllocationGranularity(&granularity, &prop, hipMemAllocationGranularityRecommended))) return 1;
  const std::size_t size = 2 * granularity;

  void* va = nullptr;  // room for two mappings: the allocation, and (step 4) its imported twin
  hipMemGenericAllocationHandle_t handle{};
  if (!HIP(hipMemAddressReserve(&va, 2 * size, 0, nullptr, 0)) || !HIP(hipMemCreate(&handle, size, &prop, 0)) ||
      !HIP(hipMemMap(va, size, 0, handle, 0))) {
    return 1;
  }
  const hipMemAccessDesc read_write{{hipMemLocationTypeDevice, 0}, hipMemAccessFlagsProtReadWrite};
  const hipMemAccessDesc no_access{{hipMemLocationTypeDevice, 0}, hipMemAccessFlagsProtNone};
  HIP(hipMemSetAccess(va, size, &read_write, 1));

  unsigned long long* counter = nullptr;
  if (!HIP(hipMalloc(reinterpret_cast<void**>(&counter), sizeof *counter))) return 1;

  // 1. kernel writes, hipMemcpy reads.
  kernel_writes(va, size, 0x5eed1234u);

  // 2. hipMemset writes, kernel reads.
  HIP(hipMemset(va, 0xa5, size));
  EXPECT(kernel_mismatches(va, size, 0xa5, counter) == 0);

  // 3. revoke and grant again: the contents stay, and the range is writable again.
  HIP(hipMemSetAccess(va, size, &no_access, 1));
  unsigned char probe = 0;
  EXPECT(hipMemcpy(&probe, va, 1, hipMemcpyDeviceToHost) == hipErrorInvalidValue);  // the books refuse
  HIP(hipMemSetAccess(va, size, &read_write, 1));
  EXPECT(kernel_mismatches(va, size, 0xa5, counter) == 0);
  kernel_writes(va, size, 0x0badf00du);

  // 4. the same physical memory through an exported and re-imported handle.
  if (exportable) {
    HIP(hipMemset(va, 0x3c, size));
    int fd = -1;
    hipMemGenericAllocationHandle_t imported{};
    void* twin = static_cast<char*>(va) + size;
    if (HIP(hipMemExportToShareableHandle(&fd, handle, hipMemHandleTypePosixFileDescriptor, 0)) &&
        HIP(hipMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)),
                                            hipMemHandleTypePosixFileDescriptor))) {
      close(fd);  // the import holds the memory; the fd stays ours either way
      if (HIP(hipMemMap(twin, size, 0, imported, 0))) {
        HIP(hipMemSetAccess(twin, size, &read_write, 1));
        EXPECT(kernel_mismatches(twin, size, 0x3c, counter) == 0);
        HIP(hipMemUnmap(twin, size));
      }
      HIP(hipMemRelease(imported));
    }
  } else {
    std::printf("gpu-kernel-check: device 0 exports no POSIX fds; step 4 skipped\n");
  }

  if (devices >= 2) {
    second_device(va, size, read_write);
    if (exportable) two_processes(va, size, handle, counter);
    std::printf("gpu-kernel-check: steps 5 and 6 ran on devices 0 and 1\n");
  } else {
    std::printf("gpu-kernel-check: one device; steps 5 and 6 need two\n");
  }

  // 7. Gte with a value above half the range (the word at 0 is "at least" it for the driver's GEQ,
  // which compares the signed difference), and Eq with a mask of the low byte.
  // Streams on host threads (HIPXX_STREAMS=host) wait on the host, and step 7 has nothing to check.
  if (std::strncmp(hipxxGetStreamEngine(), "device queues", 13) == 0) {
    device_wait(hipStreamWaitValueGte, 0x80000001u, 0xFFFFFFFFu, 0, 0x80000001u, counter);
    device_wait(hipStreamWaitValueEq, 0x42u, 0xFFu, 0x143u, 0x7742u, counter);
  } else {
    std::printf("gpu-kernel-check: streams run on %s; step 7 needs device queues\n", hipxxGetStreamEngine());
  }

  // 8. A non-blocking CUDA stream of the application's own does not hold synchronous calls.
  foreign_nonblocking_stream();

  // 9. A fault that spoils the context is reported by queries too, where device queues run streams.
  if (std::strncmp(hipxxGetStreamEngine(), "device queues", 13) == 0) fault_reported();

  HIP(hipFree(counter));
  HIP(hipMemUnmap(va, size));
  HIP(hipMemRelease(handle));
  HIP(hipMemAddressFree(va, 2 * size));
  hipxxBookCounts books{};
  HIP(hipxxGetBookCounts(&books));
  EXPECT(books.reservations == 0 && books.mappings == 0 && books.allocations == 0 && books.linearAllocations == 0);

  std::printf("gpu-kernel-check: %s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
