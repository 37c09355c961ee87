// Each VMM operation of the host backend twice: through the HIP C entry points (hipxx) and as the
// bare Linux calls the host backend makes for it (raw), one iteration per call, with the set-up
// both sides need made once by the constructor and undone by the destructor. bench-vmm-ops runs
// each side on its own under Google Benchmark; bench-vmm-paired alternates the two in short
// batches, so both see the same machine at the same moments.
//
// The ops, at one recommended granule (2 MiB):
//   Reserve    hipMemAddressReserve + hipMemAddressFree  vs mmap(PROT_NONE) + munmap. The backend
//              serves reservations from its address arena without a system call; raw is what a
//              reservation costs a program that asks the kernel for each one.
//   Create     hipMemCreate + hipMemRelease  vs memfd_create, ftruncate, mmap, MADV_POPULATE_WRITE,
//              munmap, close (how the backend commits a new allocation; 2 MiB stays on one thread)
//   Map        hipMemMap + hipMemUnmap  vs mmap(MAP_SHARED|MAP_FIXED, fd), MADV_POPULATE_WRITE,
//              mprotect(PROT_NONE), then the PROT_NONE placeholder mapped back
//   SetAccess  hipMemSetAccess  vs mprotect, alternating read-write and read-only
//   ExportImport  hipMemExportToShareableHandle + hipMemImportFromShareableHandle + close +
//              hipMemRelease  vs dup, fstat, F_GET_SEALS, F_GETFL, dup, close, close
#pragma once

#include <hipxx/hip_runtime_api.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace vmm_ops {

constexpr std::size_t kSize = std::size_t{2} << 20;
constexpr int kReserveFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;

inline hipMemAllocationProp prop(bool exportable) {
  hipMemAllocationProp p{};
  p.type = hipMemAllocationTypePinned;
  p.requestedHandleType = exportable ? hipMemHandleTypePosixFileDescriptor : hipMemHandleTypeNone;
  p.location.type = hipMemLocationTypeDevice;
  p.location.id = 0;
  return p;
}

inline hipMemAccessDesc access(hipMemAccessFlags flags) {
  hipMemAccessDesc desc{};
  desc.location.type = hipMemLocationTypeDevice;
  desc.location.id = 0;
  desc.flags = flags;
  return desc;
}

// Physical memory as raw code would make it: a memfd of `size` with every page allocated.
inline int memfd(std::size_t size) {
  const int fd = memfd_create("bench-raw", MFD_CLOEXEC);
  if (fd >= 0 && (ftruncate(fd, static_cast<off_t>(size)) != 0 || fallocate(fd, 0, 0, static_cast<off_t>(size)) != 0)) {
    close(fd);
    return -1;
  }
  return fd;
}

// A mapping as the host backend makes it: mapped read-write, page tables filled by write faults,
// then closed to every device until access is set.
inline bool map_fd(void* va, int fd) {
  return mmap(va, kSize, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) != MAP_FAILED &&
         madvise(va, kSize, MADV_POPULATE_WRITE) == 0 && mprotect(va, kSize, PROT_NONE) == 0;
}

// What every op has: a raw side and a hipxx side for the same reservation-sized range, or the
// reason the set-up failed.
class Op {
 public:
  Op() = default;
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;
  Op(Op&&) = delete;
  Op& operator=(Op&&) = delete;
  ~Op() {
    if (raw_fd_ >= 0) close(raw_fd_);
    if (raw_va_ != MAP_FAILED) munmap(raw_va_, kSize);
    if (mapped_) (void)hipMemUnmap(va_, kSize);
    if (handle_ != nullptr) (void)hipMemRelease(handle_);
    if (va_ != nullptr) (void)hipMemAddressFree(va_, kSize);
  }

  [[nodiscard]] const char* failure() const noexcept { return failure_; }
  // Whether the set-up succeeded (ops with a set-up say so themselves).
  [[nodiscard]] bool ready() const noexcept { return true; }

 protected:
  bool fail(const char* what) {
    failure_ = what;
    return false;
  }
  // The raw side's reservation and memfd.
  bool raw_setup() {
    raw_va_ = mmap(nullptr, kSize, PROT_NONE, kReserveFlags, -1, 0);
    raw_fd_ = memfd(kSize);
    return raw_va_ != MAP_FAILED && raw_fd_ >= 0 ? true : fail("raw set-up");
  }
  // The hipxx side's reservation and allocation, mapped where `map` says.
  bool hipxx_setup(bool exportable, bool map) {
    const hipMemAllocationProp p = prop(exportable);
    if (hipMemAddressReserve(&va_, kSize, 0, nullptr, 0) != hipSuccess) return fail("hipMemAddressReserve");
    if (hipMemCreate(&handle_, kSize, &p, 0) != hipSuccess) return fail("hipMemCreate");
    if (map && hipMemMap(va_, kSize, 0, handle_, 0) != hipSuccess) return fail("hipMemMap");
    mapped_ = map;
    return true;
  }

  void* raw_va_ = MAP_FAILED;
  int raw_fd_ = -1;
  void* va_ = nullptr;
  hipMemGenericAllocationHandle_t handle_ = nullptr;
  bool mapped_ = false;
  const char* failure_ = nullptr;
};

class Reserve : public Op {
 public:
  static constexpr const char* kName = "Reserve";
  bool raw() {
    void* va = mmap(nullptr, kSize, PROT_NONE, kReserveFlags, -1, 0);
    if (va == MAP_FAILED) return fail("mmap");
    return munmap(va, kSize) == 0 ? true : fail("munmap");
  }
  bool hipxx() {
    void* va = nullptr;
    if (hipMemAddressReserve(&va, kSize, 0, nullptr, 0) != hipSuccess) return fail("hipMemAddressReserve");
    return hipMemAddressFree(va, kSize) == hipSuccess ? true : fail("hipMemAddressFree");
  }
};

class Create : public Op {
 public:
  static constexpr const char* kName = "Create";
  bool raw() {
    const int fd = memfd_create("bench-raw", MFD_CLOEXEC);
    void* at = MAP_FAILED;
    if (fd >= 0 && ftruncate(fd, static_cast<off_t>(kSize)) == 0) {
      at = mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    const bool populated = at != MAP_FAILED && madvise(at, kSize, MADV_POPULATE_WRITE) == 0;
    if (at != MAP_FAILED) munmap(at, kSize);
    if (fd >= 0) close(fd);
    return populated ? true : fail("memfd_create/ftruncate/mmap/madvise");
  }
  bool hipxx() {
    hipMemGenericAllocationHandle_t handle{};
    if (hipMemCreate(&handle, kSize, &properties_, 0) != hipSuccess) return fail("hipMemCreate");
    return hipMemRelease(handle) == hipSuccess ? true : fail("hipMemRelease");
  }

 private:
  hipMemAllocationProp properties_ = prop(false);
};

class Map : public Op {
 public:
  static constexpr const char* kName = "Map";
  Map() { ready_ = raw_setup() && hipxx_setup(false, false); }
  [[nodiscard]] bool ready() const noexcept { return ready_; }
  bool raw() {
    if (!map_fd(raw_va_, raw_fd_)) return fail("mmap fd");
    return mmap(raw_va_, kSize, PROT_NONE, kReserveFlags | MAP_FIXED, -1, 0) != MAP_FAILED ? true
                                                                                           : fail("mmap placeholder");
  }
  bool hipxx() {
    if (hipMemMap(va_, kSize, 0, handle_, 0) != hipSuccess) return fail("hipMemMap");
    return hipMemUnmap(va_, kSize) == hipSuccess ? true : fail("hipMemUnmap");
  }

 private:
  bool ready_ = false;
};

class SetAccess : public Op {
 public:
  static constexpr const char* kName = "SetAccess";
  SetAccess() { ready_ = raw_setup() && map_fd(raw_va_, raw_fd_) && hipxx_setup(false, true); }
  [[nodiscard]] bool ready() const noexcept { return ready_; }
  bool raw() {
    raw_write_ = !raw_write_;
    return mprotect(raw_va_, kSize, raw_write_ ? PROT_READ | PROT_WRITE : PROT_READ) == 0 ? true : fail("mprotect");
  }
  bool hipxx() {
    write_ = !write_;
    return hipMemSetAccess(va_, kSize, write_ ? &read_write_ : &read_only_, 1) == hipSuccess ? true
                                                                                             : fail("hipMemSetAccess");
  }

 private:
  bool ready_ = false;
  bool raw_write_ = false;
  bool write_ = false;
  hipMemAccessDesc read_write_ = access(hipMemAccessFlagsProtReadWrite);
  hipMemAccessDesc read_only_ = access(hipMemAccessFlagsProtRead);
};

class ExportImport : public Op {
 public:
  static constexpr const char* kName = "ExportImport";
  ExportImport() { ready_ = raw_setup() && hipxx_setup(true, false); }
  [[nodiscard]] bool ready() const noexcept { return ready_; }
  bool raw() {
    const int exported = fcntl(raw_fd_, F_DUPFD_CLOEXEC, 0);
    struct stat status {};
    if (exported < 0 || fstat(exported, &status) != 0) return fail("dup/fstat");
    const bool checked = fcntl(exported, F_GET_SEALS) >= 0 && fcntl(exported, F_GETFL) >= 0;
    const int imported = fcntl(exported, F_DUPFD_CLOEXEC, 0);
    close(exported);
    if (imported < 0 || !checked) return fail("fcntl");
    return close(imported) == 0 ? true : fail("close");
  }
  bool hipxx() {
    int fd = -1;
    if (hipMemExportToShareableHandle(&fd, handle_, hipMemHandleTypePosixFileDescriptor, 0) != hipSuccess) {
      return fail("hipMemExportToShareableHandle");
    }
    hipMemGenericAllocationHandle_t imported{};
    const hipError_t error = hipMemImportFromShareableHandle(
        &imported, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)), hipMemHandleTypePosixFileDescriptor);
    close(fd);
    if (error != hipSuccess) return fail("hipMemImportFromShareableHandle");
    return hipMemRelease(imported) == hipSuccess ? true : fail("hipMemRelease");
  }

 private:
  bool ready_ = false;
};

}  // namespace vmm_ops
