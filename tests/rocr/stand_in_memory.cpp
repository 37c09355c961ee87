// The stand-in's memory underneath the entry points: memfd-backed device memory, the host's page
// protections, the SVM attribute book, and releasing everything at the last hsa_shut_down.
#include "rocr/stand_in.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <string_view>

namespace hipxx::backend::rocr::stand_in {
namespace {

// Every memfd the stand-in creates is named so: the owning GPU and a random token. Import and IPC
// attach recognise stand-in memory by this name (the kernel shows it as "/memfd:NAME (deleted)"),
// and an IPC handle carries the token, so that a reused descriptor number is never taken for it.
constexpr std::string_view kNamePrefix = "hipxx-stand-in-g";
constexpr std::string_view kLinkPrefix = "/memfd:";

std::uint64_t random_token() {
  std::uint64_t token = 0;
  if (getrandom(&token, sizeof token, 0) != static_cast<ssize_t>(sizeof token)) {
    static std::uint64_t fallback = 0;
    token = (static_cast<std::uint64_t>(getpid()) << 32) ^ ++fallback;
  }
  return token;
}

std::string memfd_name(unsigned owner, std::uint64_t token) {
  std::array<char, 17> digits{};
  std::snprintf(digits.data(), digits.size(), "%016jx", static_cast<std::uintmax_t>(token));
  return std::string{kNamePrefix} + std::to_string(owner) + "-" + digits.data();
}

struct MemfdIdentity {
  unsigned owner = 0;
  std::uint64_t token = 0;
};

// What the name behind `fd` says, when it is one of the stand-in's memfds.
std::optional<MemfdIdentity> identify(int fd) {
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  std::array<char, 256> target{};
  const ssize_t length = readlink(link.c_str(), target.data(), target.size() - 1);
  if (length <= 0) return std::nullopt;
  std::string_view name{target.data(), static_cast<std::size_t>(length)};
  if (!name.starts_with(kLinkPrefix)) return std::nullopt;
  name.remove_prefix(kLinkPrefix.size());
  if (!name.starts_with(kNamePrefix)) return std::nullopt;
  name.remove_prefix(kNamePrefix.size());
  MemfdIdentity identity;
  const auto [owner_end, owner_error] = std::from_chars(name.data(), name.data() + name.size(), identity.owner);
  if (owner_error != std::errc{} || owner_end == name.data() + name.size() || *owner_end != '-') return std::nullopt;
  const char* token_begin = owner_end + 1;
  const auto [token_end, token_error] = std::from_chars(token_begin, name.data() + name.size(), identity.token, 16);
  if (token_error != std::errc{} || token_end - token_begin != 16) return std::nullopt;
  if (identity.owner == kCpu || identity.owner > kMaxGpus) return std::nullopt;
  return identity;
}

std::byte* map_device_view(int fd, std::size_t size) {
  void* view = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return view == MAP_FAILED ? nullptr : static_cast<std::byte*>(view);
}

std::string read_whole(const char* path) {
  std::string text;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  std::array<char, 4096> chunk{};
  for (;;) {
    const ssize_t got = read(fd, chunk.data(), chunk.size());
    if (got <= 0) break;
    text.append(chunk.data(), static_cast<std::size_t>(got));
  }
  close(fd);
  return text;
}

struct MapsLine {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
  bool readable = false;
  bool writable = false;
};

// One line of /proc/self/maps: "begin-end rwxp ...", addresses in hex.
std::optional<MapsLine> parse_maps_line(std::string_view line) {
  MapsLine parsed;
  const char* cursor = line.data();
  const char* const last = line.data() + line.size();
  auto [dash, begin_error] = std::from_chars(cursor, last, parsed.begin, 16);
  if (begin_error != std::errc{} || dash == last || *dash != '-') return std::nullopt;
  auto [space, end_error] = std::from_chars(dash + 1, last, parsed.end, 16);
  if (end_error != std::errc{} || last - space < 3) return std::nullopt;
  parsed.readable = space[1] == 'r';
  parsed.writable = space[2] == 'w';
  return parsed;
}

bool line_allows(const MapsLine& line, Want want) {
  if (want == Want::read) return line.readable;
  if (want == Want::write) return line.writable;
  return true;
}

template <typename Map>
bool overlaps(const Map& map, std::uintptr_t begin, std::uintptr_t end) {
  auto entry = map.lower_bound(end);
  if (entry == map.begin()) return false;
  --entry;
  return entry->first + entry->second.size > begin;
}

template <typename Map>
void unmap_all(Map& map) {
  for (const auto& [base, entry] : map) munmap(reinterpret_cast<void*>(base), entry.size);
  map.clear();
}

}  // namespace

std::shared_ptr<DeviceMemory> DeviceMemory::create(std::size_t size, unsigned owner) {
  const std::uint64_t token = random_token();
  const int fd = memfd_create(memfd_name(owner, token).c_str(), MFD_CLOEXEC);
  if (fd < 0) return nullptr;
  std::byte* view = ftruncate(fd, static_cast<off_t>(size)) == 0 ? map_device_view(fd, size) : nullptr;
  if (view == nullptr) {
    close(fd);
    return nullptr;
  }
  return std::shared_ptr<DeviceMemory>{new DeviceMemory{fd, size, owner, token, view}};
}

std::shared_ptr<DeviceMemory> DeviceMemory::adopt(int fd) {
  const auto identity = identify(fd);
  struct stat status {};
  if (!identity || fstat(fd, &status) != 0 || status.st_size <= 0) return nullptr;
  const auto size = static_cast<std::size_t>(status.st_size);
  std::byte* view = map_device_view(fd, size);
  if (view == nullptr) return nullptr;
  return std::shared_ptr<DeviceMemory>{new DeviceMemory{fd, size, identity->owner, identity->token, view}};
}

DeviceMemory::~DeviceMemory() {
  munmap(view_, size_);
  close(fd_);
}

void* DeviceMemory::map_host_view(void* va) const {
  const int flags = MAP_SHARED | (va != nullptr ? MAP_FIXED : 0);
  void* mapped = mmap(va, size_, PROT_NONE, flags, fd_, 0);
  return mapped == MAP_FAILED ? nullptr : mapped;
}

bool host_pages_allow(std::uintptr_t begin, std::uintptr_t end, Want want) {
  const std::string maps = read_whole("/proc/self/maps");
  std::uintptr_t covered = begin;
  std::size_t at = 0;
  // The lines come in address order: walk them until [begin, end) is covered or a gap shows.
  while (covered < end && at < maps.size()) {
    const std::size_t line_end = std::min(maps.find('\n', at), maps.size());
    const auto line = parse_maps_line(std::string_view{maps}.substr(at, line_end - at));
    at = line_end + 1;
    if (!line || line->end <= covered) continue;
    if (line->begin > covered || !line_allows(*line, want)) return false;
    covered = line->end;
  }
  return covered >= end;
}

bool overlaps_books(const State& s, std::uintptr_t begin, std::uintptr_t end) {
  return overlaps(s.reservations, begin, end) || overlaps(s.allocations, begin, end) ||
         overlaps(s.attachments, begin, end);
}

void SvmBook::split_at(std::uintptr_t address) {
  auto range = ranges_.upper_bound(address);
  if (range == ranges_.begin()) return;
  --range;
  if (range->first < address && address < range->second.end) {
    ranges_.emplace(address, Range{range->second.end, range->second.attributes});
    range->second.end = address;
  }
}

void SvmBook::update(std::uintptr_t begin, std::uintptr_t end, const std::function<void(SvmAttributes&)>& change) {
  split_at(begin);
  split_at(end);
  std::uintptr_t cursor = begin;
  auto range = ranges_.lower_bound(begin);
  while (cursor < end) {
    if (range == ranges_.end() || range->first > cursor) {
      // A gap: pages with the default attributes, recorded from now on.
      const std::uintptr_t gap_end = range == ranges_.end() ? end : std::min(end, range->first);
      range = ranges_.emplace_hint(range, cursor, Range{gap_end, SvmAttributes{}});
    }
    change(range->second.attributes);
    cursor = range->second.end;
    ++range;
  }
}

bool SvmBook::all(std::uintptr_t begin, std::uintptr_t end,
                  const std::function<bool(const SvmAttributes&)>& holds) const {
  std::uintptr_t cursor = begin;
  auto range = ranges_.upper_bound(begin);
  if (range != ranges_.begin() && std::prev(range)->second.end > begin) --range;
  while (cursor < end) {
    if (range == ranges_.end() || range->first > cursor) {
      if (!holds(SvmAttributes{})) return false;
      if (range == ranges_.end()) return true;
      cursor = range->first;
      continue;
    }
    if (!holds(range->second.attributes)) return false;
    cursor = range->second.end;
    ++range;
  }
  return true;
}

void SvmBook::forget(std::uintptr_t begin, std::uintptr_t end) {
  split_at(begin);
  split_at(end);
  ranges_.erase(ranges_.lower_bound(begin), ranges_.lower_bound(end));
}

void release_all(State& s) {
  unmap_all(s.reservations);
  unmap_all(s.allocations);
  unmap_all(s.attachments);
  s.handles.clear();
  s.signals.clear();
  s.jobs.clear();
  s.svm.clear();
  s.pool_in_use = {};
}

}  // namespace hipxx::backend::rocr::stand_in
