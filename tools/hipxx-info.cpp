// hipxx-info: which backend the runtime chose (or why none), and what each device offers.
//
// Uses the C API only, so that what it prints is exactly what any HIP program linked against
// libhipxx would be told. Every "yes" or "no" in the feature table is the runtime's own answer to
// hipDeviceGetAttribute; where HIP has no attribute for a feature the table says so.
//
// Exit status: 0 when a backend runs with at least one device, 1 when no backend could start,
// 2 when a query that should work failed.
#include <hipxx/hip_runtime_api.h>
#include <hipxx/hipxx_ext.h>

#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

int failures = 0;

const char* env_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

std::string bytes_text(std::uint64_t bytes) {
  constexpr std::array<const char*, 5> units{"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < units.size()) {
    value /= 1024.0;
    ++unit;
  }
  std::array<char, 32> text{};
  std::snprintf(text.data(), text.size(), unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return text.data();
}

const char* yes_no(bool value) { return value ? "yes" : "no"; }

hipMemAllocationProp pinned_on(int device, hipMemAllocationHandleType handle_type) {
  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.requestedHandleType = handle_type;
  prop.location.type = hipMemLocationTypeDevice;
  prop.location.id = device;
  return prop;
}

// One attribute, or the error that came back instead (never a made-up default).
struct Attribute {
  hipError_t error = hipSuccess;
  int value = 0;
};

Attribute attribute(hipDeviceAttribute_t which, int device) {
  Attribute out;
  out.error = hipDeviceGetAttribute(&out.value, which, device);
  return out;
}

void print_granularity(int device) {
  const hipMemAllocationProp prop = pinned_on(device, hipMemHandleTypeNone);
  std::size_t minimum = 0;
  std::size_t recommended = 0;
  const hipError_t min_error = hipMemGetAllocationGranularity(&minimum, &prop, hipMemAllocationGranularityMinimum);
  const hipError_t rec_error =
      hipMemGetAllocationGranularity(&recommended, &prop, hipMemAllocationGranularityRecommended);
  std::printf("  %-22s ", "granularity");
  if (min_error == hipSuccess) {
    std::printf("minimum %s", bytes_text(minimum).c_str());
  } else {
    std::printf("minimum ? (%s)", hipGetErrorName(min_error));
    ++failures;
  }
  if (rec_error == hipSuccess) {
    std::printf(", recommended %s\n", bytes_text(recommended).c_str());
  } else {
    std::printf(", recommended ? (%s)\n", hipGetErrorName(rec_error));
    ++failures;
  }
}

void print_total_memory(int device) {
  std::size_t bytes = 0;
  if (hipDeviceTotalMem(&bytes, device) == hipSuccess) {
    std::printf("  %-22s %s\n", "total memory", bytes_text(bytes).c_str());
    return;
  }
  // Fall back on the attribute, an int.
  const Attribute total = attribute(hipDeviceAttributeTotalGlobalMem, device);
  if (total.error != hipSuccess) {
    std::printf("  %-22s ? (%s)\n", "total memory", hipGetErrorName(total.error));
    return;
  }
  // The attribute is an int: at INT_MAX it has saturated and only says "at least 2 GiB".
  std::printf("  %-22s %s%s\n", "total memory", total.value == INT_MAX ? "at least " : "",
              bytes_text(static_cast<std::uint64_t>(total.value)).c_str());
}

// Really exports: creates the smallest exportable allocation, asks for its descriptor, closes both.
void print_fd_export_probe(int device) {
  const hipMemAllocationProp prop = pinned_on(device, hipMemHandleTypePosixFileDescriptor);
  std::size_t size = 0;
  if (hipMemGetAllocationGranularity(&size, &prop, hipMemAllocationGranularityMinimum) != hipSuccess) {
    std::printf("  %-22s ? (no granularity)\n", "POSIX fd export");
    return;
  }
  hipMemGenericAllocationHandle_t handle{};
  if (const hipError_t error = hipMemCreate(&handle, size, &prop, 0); error != hipSuccess) {
    std::printf("  %-22s no (hipMemCreate of an exportable allocation: %s)\n", "POSIX fd export",
                hipGetErrorName(error));
    return;
  }
  int fd = -1;
  const hipError_t error = hipMemExportToShareableHandle(&fd, handle, hipMemHandleTypePosixFileDescriptor, 0);
  if (error == hipSuccess) {
    std::printf("  %-22s yes (exported a %s allocation as fd %d)\n", "POSIX fd export", bytes_text(size).c_str(), fd);
    close(fd);
  } else {
    std::printf("  %-22s no (hipMemExportToShareableHandle: %s)\n", "POSIX fd export", hipGetErrorName(error));
  }
  (void)hipMemRelease(handle);
}

void print_feature(const char* feature, hipDeviceAttribute_t which, const char* attribute_name, int device,
                   bool (*supported)(int)) {
  const Attribute value = attribute(which, device);
  if (value.error != hipSuccess) {
    std::printf("    %-22s %-10s %s -> %s\n", feature, "unknown", attribute_name, hipGetErrorName(value.error));
    return;
  }
  std::printf("    %-22s %-10s %s = %d\n", feature, yes_no(supported(value.value)), attribute_name, value.value);
}

// HIP has no device attribute for hipIpcGetMemHandle. Say whether this runtime exports the entry
// point at all, and if so whether it hands out a handle for a fresh hipMalloc allocation.
void print_legacy_ipc(int device) {
  using GetHandle = hipError_t (*)(hipIpcMemHandle_t*, void*);
  auto* const get_handle = reinterpret_cast<GetHandle>(dlsym(RTLD_DEFAULT, "hipIpcGetMemHandle"));
  if (get_handle == nullptr) {
    std::printf("    %-22s %-10s (no HIP attribute) hipIpcGetMemHandle is not exported by this runtime\n", "legacy IPC",
                "no");
    return;
  }
  int previous = 0;
  (void)hipGetDevice(&previous);
  void* memory = nullptr;
  if (hipSetDevice(device) != hipSuccess || hipMalloc(&memory, 4096) != hipSuccess) {
    std::printf("    %-22s %-10s (no HIP attribute) could not hipMalloc to probe\n", "legacy IPC", "unknown");
    (void)hipSetDevice(previous);
    return;
  }
  hipIpcMemHandle_t handle{};
  const hipError_t error = get_handle(&handle, memory);
  std::printf("    %-22s %-10s (no HIP attribute) probed: hipIpcGetMemHandle -> %s\n", "legacy IPC",
              yes_no(error == hipSuccess), hipGetErrorName(error));
  (void)hipFree(memory);
  (void)hipSetDevice(previous);
}

// The host backend's physical memory is shmem (memfds): whether the kernel gives it transparent huge
// pages is this sysfs setting, read here directly (HIP has no query for it).
void print_host_huge_pages() {
  constexpr const char* kPath = "/sys/kernel/mm/transparent_hugepage/shmem_enabled";
  std::string text;
  if (FILE* file = std::fopen(kPath, "re")) {
    std::array<char, 256> buffer{};
    if (std::fgets(buffer.data(), static_cast<int>(buffer.size()), file) != nullptr) text = buffer.data();
    std::fclose(file);
  }
  const std::size_t open = text.find('[');
  const std::size_t close = text.find(']', open);
  if (open == std::string::npos || close == std::string::npos) {
    std::printf("shmem huge pages: unknown (no %s: no transparent huge pages)\n", kPath);
    return;
  }
  const std::string setting = text.substr(open + 1, close - open - 1);
  const char* meaning = "4 KiB pages only";
  if (setting == "always" || setting == "within_size" || setting == "force") {
    meaning = "2 MiB pages where size and alignment allow, allocated at hipMemCreate";
  } else if (setting == "advise") {
    meaning = "2 MiB pages where size and alignment allow (hipMemCreate asks for them with MADV_HUGEPAGE)";
  }
  std::printf("shmem huge pages: %s (%s): %s\n", setting.c_str(), kPath, meaning);
}

void print_device(int device) {
  std::array<char, 256> name{};
  if (hipDeviceGetName(name.data(), static_cast<int>(name.size()), device) == hipSuccess) {
    std::printf("device %d: %s\n", device, name.data());
  } else {
    std::printf("device %d (no name: hipDeviceGetName failed)\n", device);
  }
  print_total_memory(device);
  print_granularity(device);
  const Attribute vmm = attribute(hipDeviceAttributeVirtualMemoryManagementSupported, device);
  if (vmm.error == hipSuccess) {
    std::printf("  %-22s %s\n", "VMM", yes_no(vmm.value != 0));
  } else {
    std::printf("  %-22s ? (%s)\n", "VMM", hipGetErrorName(vmm.error));
    ++failures;
  }
  print_fd_export_probe(device);

  std::printf("  features, as hipDeviceGetAttribute reports them:\n");
  std::printf("    %-22s %-10s %s\n", "feature", "supported", "attribute = value");
  print_feature("VMM", hipDeviceAttributeVirtualMemoryManagementSupported,
                "hipDeviceAttributeVirtualMemoryManagementSupported", device, [](int v) { return v != 0; });
  print_feature("shareable fd handles", hipDeviceAttributeMemoryPoolSupportedHandleTypes,
                "hipDeviceAttributeMemoryPoolSupportedHandleTypes", device,
                [](int v) { return (v & hipMemHandleTypePosixFileDescriptor) != 0; });
  print_feature("stream-ordered pools", hipDeviceAttributeMemoryPoolsSupported,
                "hipDeviceAttributeMemoryPoolsSupported", device, [](int v) { return v != 0; });
  print_feature("managed memory", hipDeviceAttributeManagedMemory, "hipDeviceAttributeManagedMemory", device,
                [](int v) { return v != 0; });
  print_legacy_ipc(device);
}

}  // namespace

int main() {
  std::printf("HIPXX_BACKEND=%s HIPXX_HOST_DEVICES=%s\n", env_or("HIPXX_BACKEND", "(unset: auto)"),
              env_or("HIPXX_HOST_DEVICES", "(unset)"));
  const char* backend = hipxxGetBackendName();
  if (backend == nullptr) {
    const char* why = hipxxGetBackendError();
    std::printf("no backend: %s\n", why != nullptr && *why != '\0' ? why : "no device found");
    return 1;
  }
  std::printf("backend: %s\n", backend);
  std::printf("streams: %s\n", hipxxGetStreamEngine());
  if (std::string{backend} == "host") print_host_huge_pages();

  int runtime_version = 0;
  int driver_version = 0;
  if (hipRuntimeGetVersion(&runtime_version) == hipSuccess && hipDriverGetVersion(&driver_version) == hipSuccess) {
    std::printf("HIP runtime version %d, driver version %d\n", runtime_version, driver_version);
  }

  int count = 0;
  if (const hipError_t error = hipGetDeviceCount(&count); error != hipSuccess) {
    std::printf("hipGetDeviceCount: %s\n", hipGetErrorName(error));
    return 1;
  }
  std::printf("devices: %d\n", count);
  if (count == 0) return 1;
  for (int device = 0; device < count; ++device) {
    std::printf("\n");
    print_device(device);
  }
  return failures == 0 ? 0 : 2;
}
