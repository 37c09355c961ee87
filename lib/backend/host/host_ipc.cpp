#include "backend/host/host_ipc.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>  // NOLINT(modernize-deprecated-headers): POSIX kill(), which <csignal> need not declare
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace hipxx::backend::host {
namespace {

constexpr std::array<char, 8> kMagic{'h', 'i', 'p', 'x', 'x', 'I', 'P', 'C'};
constexpr std::uint32_t kVersion = 1;
constexpr std::string_view kNamePrefix = "hipxx-ipc-";

// Field layout inside the 64 handle bytes.
struct HandleFields {
  std::array<char, 8> magic;
  std::uint32_t version;
  std::int32_t pid;
  std::uint64_t size;
  std::array<std::uint8_t, 16> token;
  std::uint64_t checksum;
  std::array<std::uint8_t, 16> unused;
};
static_assert(sizeof(HandleFields) == HIP_IPC_HANDLE_SIZE);

std::uint64_t checksum_of(const HandleFields& fields) {
  // FNV-1a over everything before the checksum: enough to tell a handle from random bytes.
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  const auto* bytes = reinterpret_cast<const unsigned char*>(&fields);
  for (std::size_t index = 0; index < offsetof(HandleFields, checksum); ++index) {
    hash = (hash ^ bytes[index]) * 0x100000001b3ULL;
  }
  return hash;
}

std::string object_name(const HandleFields& fields) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string name{"/"};
  name += kNamePrefix;
  name += std::to_string(fields.pid);
  name += '-';
  for (const std::uint8_t byte : fields.token) {
    name += kHex[byte >> 4];
    name += kHex[byte & 0xF];
  }
  return name;
}

bool fill_random(std::array<std::uint8_t, 16>& token) {
  std::size_t filled = 0;
  while (filled < token.size()) {
    const ssize_t got = getrandom(token.data() + filled, token.size() - filled, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    filled += static_cast<std::size_t>(got);
  }
  return true;
}

// The names this process has exported and not yet unlinked. The backend (and so IpcExports) lives
// until the process ends and is never destroyed, so without this a program that exits normally
// while exports are live would leave their objects in /dev/shm until some later process start
// notices the dead pid. At normal exit the names go; mappings already open elsewhere stay, as after
// hipFree. A forked child inherits the list but unlinks only names it exported itself.
class NamesToUnlinkAtExit {
 public:
  NamesToUnlinkAtExit() = default;
  NamesToUnlinkAtExit(const NamesToUnlinkAtExit&) = delete;
  NamesToUnlinkAtExit& operator=(const NamesToUnlinkAtExit&) = delete;
  NamesToUnlinkAtExit(NamesToUnlinkAtExit&&) = delete;
  NamesToUnlinkAtExit& operator=(NamesToUnlinkAtExit&&) = delete;
  ~NamesToUnlinkAtExit() {
    std::lock_guard lock{mutex_};
    for (const auto& [name, exporter] : names_) {
      if (exporter == getpid()) shm_unlink(name.c_str());
    }
  }

  void add(const std::string& name) {
    std::lock_guard lock{mutex_};
    names_.emplace(name, getpid());
  }
  void remove(const std::string& name) {
    std::lock_guard lock{mutex_};
    names_.erase(name);
  }

 private:
  std::mutex mutex_;
  std::map<std::string, pid_t> names_;
};

NamesToUnlinkAtExit& names_to_unlink_at_exit() {
  static NamesToUnlinkAtExit names;
  return names;
}

std::size_t page_rounded(std::size_t size) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return (size + page - 1) / page * page;
}

}  // namespace

IpcExports::IpcExports() {
  DIR* directory = opendir("/dev/shm");
  if (directory == nullptr) return;
  while (const dirent* entry = readdir(directory)) {
    const std::string_view name{static_cast<const char*>(entry->d_name)};
    if (!name.starts_with(kNamePrefix)) continue;
    const pid_t owner = static_cast<pid_t>(std::atol(name.substr(kNamePrefix.size()).data()));
    if (owner > 0 && kill(owner, 0) != 0 && errno == ESRCH) {
      std::string path{"/"};
      path += name;
      shm_unlink(path.c_str());
    }
  }
  closedir(directory);
}

IpcExports::~IpcExports() {
  std::lock_guard lock{mutex_};
  for (const auto& [base, handle] : exported_) {
    HandleFields fields{};
    std::memcpy(&fields, &handle, sizeof fields);
    shm_unlink(object_name(fields).c_str());
  }
}

hipError_t IpcExports::get_handle(void* ptr, std::size_t size, hipIpcMemHandle_t* handle) {
  std::lock_guard lock{mutex_};
  if (const auto found = exported_.find(reinterpret_cast<std::uintptr_t>(ptr)); found != exported_.end()) {
    *handle = found->second;
    return hipSuccess;
  }
  HandleFields fields{};
  fields.magic = kMagic;
  fields.version = kVersion;
  fields.pid = static_cast<std::int32_t>(getpid());
  fields.size = size;
  if (!fill_random(fields.token)) return hipErrorOperatingSystem;
  fields.checksum = checksum_of(fields);
  const std::string name = object_name(fields);

  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, S_IRUSR | S_IWUSR);
  if (fd < 0) return hipErrorOperatingSystem;
  const std::size_t mapped = page_rounded(size);
  // The current contents move onto the named object, which then replaces the pages in place.
  const bool moved = ftruncate(fd, static_cast<off_t>(mapped)) == 0 &&
                     pwrite(fd, ptr, mapped, 0) == static_cast<ssize_t>(mapped) &&
                     mmap(ptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) != MAP_FAILED;
  ::close(fd);
  if (!moved) {
    shm_unlink(name.c_str());
    return hipErrorOperatingSystem;
  }
  std::memcpy(handle, &fields, sizeof fields);
  exported_.emplace(reinterpret_cast<std::uintptr_t>(ptr), *handle);
  names_to_unlink_at_exit().add(name);
  return hipSuccess;
}

void IpcExports::forget(void* ptr) {
  std::lock_guard lock{mutex_};
  const auto found = exported_.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (found == exported_.end()) return;
  HandleFields fields{};
  std::memcpy(&fields, &found->second, sizeof fields);
  const std::string name = object_name(fields);
  shm_unlink(name.c_str());
  names_to_unlink_at_exit().remove(name);
  exported_.erase(found);
}

hipError_t IpcExports::open(const hipIpcMemHandle_t& handle, void** ptr, std::size_t* size) {
  HandleFields fields{};
  std::memcpy(&fields, &handle, sizeof fields);
  // The unused tail lies outside the checksum, so it is checked apart: a handle whose bytes differ
  // from the exported ones anywhere is not that handle.
  if (fields.magic != kMagic || fields.version != kVersion || fields.checksum != checksum_of(fields) ||
      fields.size == 0 || fields.unused != std::array<std::uint8_t, 16>{}) {
    return hipErrorInvalidValue;
  }
  if (fields.pid == static_cast<std::int32_t>(getpid())) return hipErrorInvalidContext;
  const int fd = shm_open(object_name(fields).c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return hipErrorInvalidValue;
  struct stat status {};
  const std::size_t mapped = page_rounded(fields.size);
  void* at = MAP_FAILED;
  if (fstat(fd, &status) == 0 && static_cast<std::size_t>(status.st_size) == mapped) {
    at = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  ::close(fd);
  if (at == MAP_FAILED) return hipErrorInvalidValue;
  *ptr = at;
  *size = fields.size;
  return hipSuccess;
}

hipError_t IpcExports::close(void* ptr, std::size_t size) {
  return munmap(ptr, page_rounded(size)) == 0 ? hipSuccess : hipErrorInvalidValue;
}

}  // namespace hipxx::backend::host
