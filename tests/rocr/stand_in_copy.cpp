// The stand-in's copies, fills and SVM attributes: where GPUs may reach.
//
// An agent reaches a byte when it lies in
//   a vmem mapping whose last set_access gave that agent the access (read: RO/RW, write: WO/RW);
//   a pool allocation of that agent's pool, or one that hsa_amd_agents_allow_access allowed to it;
//   an IPC attachment made for that agent;
//   ordinary host memory mapped with the protection the access needs, for the CPU agent; for a GPU
//   only where hsa_amd_svm_attributes_set made it accessible to that GPU (with XNACK on: unless
//   AGENT_NO_ACCESS denied it), and never for a write where READ_ONLY was set.
// hsa_amd_memory_async_copy needs dst_agent to write all of dst and src_agent to read all of src,
// and, since ROCr runs the copy on one engine (the source GPU's, else the destination agent's), that
// engine's agent to reach both. A range may span several entries; each part is checked.
// hsa_amd_memory_fill runs on the memory's owner (for a mapping, its allocation's pool's GPU, which
// must have write access to it), within one allocation or mapping.
#include "rocr/stand_in.hpp"
#include "rocr/stand_in_exports.hpp"

#include <algorithm>
#include <cstring>

namespace hipxx::backend::rocr::stand_in {
namespace {

struct Piece {
  std::byte* bytes;
  std::size_t size;
};

// How a copy reaches one of its ranges, and what must stay alive and busy until it is done.
struct Reach {
  std::vector<Piece> pieces;
  std::vector<std::shared_ptr<Busy>> busy;
  std::vector<std::shared_ptr<DeviceMemory>> memory;
};

// The part of one book entry (or of ordinary host memory) at an address, as one agent sees it.
struct Span {
  std::uintptr_t end = 0;
  std::byte* bytes = nullptr;
  std::string refusal{};  // empty: the agent may make the access
  std::shared_ptr<Busy> busy{};
  std::shared_ptr<DeviceMemory> memory{};
};

std::string agent_name(unsigned agent) {
  return is_gpu(agent) ? "GPU " + std::to_string(agent - 1) + " (agent " + hex(agent_handle(agent).handle) + ")"
                       : "the CPU agent";
}

const char* access_word(Want want) { return want == Want::write ? "write" : "read"; }

Span device_span(std::uintptr_t base, std::size_t size, const std::shared_ptr<DeviceMemory>& memory,
                 const std::shared_ptr<Busy>& busy, std::uintptr_t address) {
  return Span{.end = base + size, .bytes = memory->device_view() + (address - base), .busy = busy, .memory = memory};
}

Span reserved_span(std::uintptr_t base, Reservation& reservation, std::uintptr_t address, unsigned agent, Want want) {
  auto& mappings = reservation.mappings;
  const auto mapping = entry_holding(mappings, address);
  if (mapping == mappings.end()) {
    const auto next = mappings.upper_bound(address);
    return Span{.end = next == mappings.end() ? base + reservation.size : next->first,
                .refusal = "reserved address space with nothing mapped"};
  }
  const Mapping& found = mapping->second;
  Span span = device_span(mapping->first, found.size, found.memory, found.busy, address);
  if (!permits(found.permissions[agent], want)) {
    span.refusal = std::string{"a vmem mapping where set_access gave "} + agent_name(agent) + " no " +
                   access_word(want) + " access";
  }
  return span;
}

Span allocation_span(std::uintptr_t base, const PoolAllocation& allocation, std::uintptr_t address, unsigned agent) {
  Span span = allocation.memory ? device_span(base, allocation.size, allocation.memory, allocation.busy, address)
                                : Span{.end = base + allocation.size,
                                       .bytes = reinterpret_cast<std::byte*>(address),
                                       .busy = allocation.busy};
  if ((allocation.allowed & bit(agent)) == 0) {
    span.refusal = (allocation.memory ? "GPU " + std::to_string(allocation.pool - 1) : std::string{"CPU"}) +
                   " pool memory that hsa_amd_agents_allow_access did not allow to " + agent_name(agent);
  }
  return span;
}

Span attachment_span(std::uintptr_t base, const Attachment& attachment, std::uintptr_t address, unsigned agent) {
  Span span = device_span(base, attachment.size, attachment.memory, attachment.busy, address);
  if ((attachment.allowed & bit(agent)) == 0) span.refusal = "IPC memory not attached for " + agent_name(agent);
  return span;
}

template <typename Map>
std::uintptr_t next_base(const Map& map, std::uintptr_t address, std::uintptr_t limit) {
  const auto next = map.upper_bound(address);
  return next == map.end() ? limit : std::min(limit, next->first);
}

Span host_span(const State& s, std::uintptr_t address, std::uintptr_t limit, unsigned agent, Want want) {
  const std::uintptr_t end =
      next_base(s.reservations, address, next_base(s.allocations, address, next_base(s.attachments, address, limit)));
  Span span{.end = end, .bytes = reinterpret_cast<std::byte*>(address)};
  if (!host_pages_allow(address, end, want)) {
    span.refusal = std::string{"host memory not mapped for "} + access_word(want) + " access";
    return span;
  }
  if (!is_gpu(agent)) return span;
  const AgentMask me = bit(agent);
  const bool reachable = s.svm.all(address, end, [&](const SvmAttributes& attributes) {
    if ((attributes.denied & me) != 0 || (want == Want::write && attributes.read_only)) return false;
    return s.config.xnack || (attributes.accessible & me) != 0;
  });
  if (!reachable) {
    span.refusal = "ordinary host memory that " + agent_name(agent) +
                   " may not reach (neither pool memory allowed to it nor SVM made accessible to it)";
  }
  return span;
}

Span span_at(State& s, std::uintptr_t address, std::uintptr_t limit, unsigned agent, Want want) {
  if (auto reservation = entry_holding(s.reservations, address); reservation != s.reservations.end()) {
    return reserved_span(reservation->first, reservation->second, address, agent, want);
  }
  if (auto allocation = entry_holding(s.allocations, address); allocation != s.allocations.end()) {
    return allocation_span(allocation->first, allocation->second, address, agent);
  }
  if (auto attachment = entry_holding(s.attachments, address); attachment != s.attachments.end()) {
    return attachment_span(attachment->first, attachment->second, address, agent);
  }
  return host_span(s, address, limit, agent, want);
}

// How `agent` reaches [begin, begin + size); the answer is why it may not (empty when it may).
std::string resolve(State& s, std::uintptr_t begin, std::size_t size, unsigned agent, Want want, Reach& reach) {
  const std::uintptr_t end = begin + size;
  if (end < begin) return "a range that wraps around the address space";
  for (std::uintptr_t cursor = begin; cursor < end;) {
    Span span = span_at(s, cursor, end, agent, want);
    if (!span.refusal.empty()) return hex(cursor) + " is " + span.refusal;
    const std::uintptr_t piece_end = std::min(span.end, end);
    reach.pieces.push_back(Piece{.bytes = span.bytes, .size = piece_end - cursor});
    if (span.busy) reach.busy.push_back(std::move(span.busy));
    if (span.memory) reach.memory.push_back(std::move(span.memory));
    cursor = piece_end;
  }
  return {};
}

struct CopyEnds {
  std::uintptr_t dst;
  unsigned dst_agent;
  std::uintptr_t src;
  unsigned src_agent;
  std::size_t size;
};

// Why the copy may not go (empty when it may), filling in how it reaches both ranges.
std::string check_copy(State& s, const CopyEnds& copy, Reach& to, Reach& from) {
  if (std::string refusal = resolve(s, copy.dst, copy.size, copy.dst_agent, Want::write, to); !refusal.empty()) {
    return "destination " + refusal;
  }
  if (std::string refusal = resolve(s, copy.src, copy.size, copy.src_agent, Want::read, from); !refusal.empty()) {
    return "source " + refusal;
  }
  const unsigned engine = is_gpu(copy.src_agent) ? copy.src_agent : copy.dst_agent;
  Reach unused;
  if (engine != copy.dst_agent) {
    if (std::string refusal = resolve(s, copy.dst, copy.size, engine, Want::write, unused); !refusal.empty()) {
      return "destination " + refusal + ", and the copy runs on that agent's engine";
    }
  }
  if (engine != copy.src_agent) {
    if (std::string refusal = resolve(s, copy.src, copy.size, engine, Want::read, unused); !refusal.empty()) {
      return "source " + refusal + ", and the copy runs on that agent's engine";
    }
  }
  return {};
}

void copy_pieces(const std::vector<Piece>& to, const std::vector<Piece>& from) {
  std::size_t to_index = 0;
  std::size_t from_index = 0;
  std::size_t to_offset = 0;
  std::size_t from_offset = 0;
  while (to_index < to.size() && from_index < from.size()) {
    const std::size_t length = std::min(to[to_index].size - to_offset, from[from_index].size - from_offset);
    std::memmove(to[to_index].bytes + to_offset, from[from_index].bytes + from_offset, length);
    to_offset += length;
    from_offset += length;
    if (to_offset == to[to_index].size) {
      ++to_index;
      to_offset = 0;
    }
    if (from_offset == from[from_index].size) {
      ++from_index;
      from_offset = 0;
    }
  }
}

// The dependency signals of an asynchronous call, or the status that refuses them.
hsa_status_t dependencies_of(const State& s, std::uint32_t count, const hsa_signal_t* signals,
                             std::vector<std::shared_ptr<Signal>>& dependencies) {
  if ((count == 0) != (signals == nullptr)) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  for (std::uint32_t index = 0; index < count; ++index) {
    const auto found = s.signals.find(signals[index].handle);
    if (found == s.signals.end()) return HSA_STATUS_ERROR_INVALID_SIGNAL;
    dependencies.push_back(found->second);
  }
  return HSA_STATUS_SUCCESS;
}

// Where a fill of [begin, end) writes: memory from the runtime that a GPU may write; else nullptr.
// ROCr's fill runs on the GPU its pointer lookup names as the memory's owner. For a mapping that is
// the GPU of its allocation's pool, granted the mapping or not: where it may not write, its fill
// faults (`refusal` says so). An imported allocation's mapping has no owner there (newer ROCr
// dereferences the null region it finds), which stops the process.
std::byte* fill_target(State& s, std::uintptr_t begin, std::uintptr_t end, std::string& refusal) {
  if (auto reservation = entry_holding(s.reservations, begin); reservation != s.reservations.end()) {
    auto& mappings = reservation->second.mappings;
    const auto mapping = entry_holding(mappings, begin);
    if (mapping == mappings.end() || end - mapping->first > mapping->second.size) return nullptr;
    const VmemHandle& handle = s.handles.at(mapping->second.handle);
    if (handle.imported) {
      fatal("hsa_amd_memory_fill(" + hex(begin) +
            "): memory mapped from an imported handle, which ROCr's pointer lookup finds no owning pool for");
    }
    if (!permits(mapping->second.permissions[handle.pool], Want::write)) {
      refusal = "the fill runs on " + agent_name(handle.pool) +
                ", whose pool the mapping's memory is of, and set_access gave it no write access";
      return nullptr;
    }
    return mapping->second.memory->device_view() + (begin - mapping->first);
  }
  if (auto allocation = entry_holding(s.allocations, begin); allocation != s.allocations.end()) {
    if (end - allocation->first > allocation->second.size) return nullptr;
    if (!allocation->second.memory) return reinterpret_cast<std::byte*>(begin);  // CPU pool memory
    return allocation->second.memory->device_view() + (begin - allocation->first);
  }
  if (auto attachment = entry_holding(s.attachments, begin); attachment != s.attachments.end()) {
    if (end - attachment->first > attachment->second.size || attachment->second.allowed == 0) return nullptr;
    return attachment->second.memory->device_view() + (begin - attachment->first);
  }
  return nullptr;
}

hsa_status_t check_svm_attribute(const State& s, const hsa_amd_svm_attribute_pair_t& pair) {
  switch (pair.attribute) {
    case HSA_AMD_SVM_ATTRIB_GLOBAL_FLAG:
      return pair.value == HSA_AMD_SVM_GLOBAL_FLAG_FINE_GRAINED || pair.value == HSA_AMD_SVM_GLOBAL_FLAG_COARSE_GRAINED
                 ? HSA_STATUS_SUCCESS
                 : HSA_STATUS_ERROR_INVALID_ARGUMENT;
    case HSA_AMD_SVM_ATTRIB_READ_ONLY:
    case HSA_AMD_SVM_ATTRIB_HIVE_LOCAL:
    case HSA_AMD_SVM_ATTRIB_MIGRATION_GRANULARITY:
    case HSA_AMD_SVM_ATTRIB_READ_MOSTLY: return HSA_STATUS_SUCCESS;
    case HSA_AMD_SVM_ATTRIB_PREFERRED_LOCATION:
      return pair.value == 0 || agent_index(s, hsa_agent_t{pair.value}) ? HSA_STATUS_SUCCESS
                                                                        : HSA_STATUS_ERROR_INVALID_AGENT;
    case HSA_AMD_SVM_ATTRIB_AGENT_ACCESSIBLE:
    case HSA_AMD_SVM_ATTRIB_AGENT_ACCESSIBLE_IN_PLACE:
    case HSA_AMD_SVM_ATTRIB_AGENT_NO_ACCESS:
      return agent_index(s, hsa_agent_t{pair.value}) ? HSA_STATUS_SUCCESS : HSA_STATUS_ERROR_INVALID_AGENT;
    default: return HSA_STATUS_ERROR_INVALID_ARGUMENT;  // PREFETCH_LOCATION and ACCESS_QUERY among them
  }
}

void apply_svm_attribute(const State& s, const hsa_amd_svm_attribute_pair_t& pair, SvmAttributes& attributes) {
  const auto agent_bit = [&] { return bit(*agent_index(s, hsa_agent_t{pair.value})); };
  switch (pair.attribute) {
    case HSA_AMD_SVM_ATTRIB_GLOBAL_FLAG: attributes.global_flag = pair.value; break;
    case HSA_AMD_SVM_ATTRIB_READ_ONLY: attributes.read_only = pair.value != 0; break;
    case HSA_AMD_SVM_ATTRIB_READ_MOSTLY: attributes.read_mostly = pair.value != 0; break;
    case HSA_AMD_SVM_ATTRIB_PREFERRED_LOCATION: attributes.preferred_location = pair.value; break;
    case HSA_AMD_SVM_ATTRIB_AGENT_ACCESSIBLE:
    case HSA_AMD_SVM_ATTRIB_AGENT_ACCESSIBLE_IN_PLACE:
      attributes.accessible |= agent_bit();
      attributes.denied &= ~agent_bit();
      break;
    case HSA_AMD_SVM_ATTRIB_AGENT_NO_ACCESS:
      attributes.denied |= agent_bit();
      attributes.accessible &= ~agent_bit();
      break;
    default: break;  // accepted and without effect here: HIVE_LOCAL, MIGRATION_GRANULARITY
  }
}

// The page-rounded range of an SVM call, or the reason it does not name ordinary host memory.
std::string svm_range(const State& s, void* ptr, std::size_t size, std::uintptr_t& begin, std::uintptr_t& end) {
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  begin = address / page_size() * page_size();
  end = round_up(address + size, page_size());
  if (end <= begin) return "an empty or wrapping range";
  if (overlaps_books(s, begin, end)) return "memory that the runtime allocated, not ordinary host memory";
  if (!host_pages_allow(begin, end, Want::any)) return "addresses that are not mapped in this process";
  return {};
}

}  // namespace
}  // namespace hipxx::backend::rocr::stand_in

namespace hipxx::backend::rocr {
using namespace stand_in;  // NOLINT(google-build-using-namespace): the entry points' own namespace

hsa_status_t hsa_amd_memory_async_copy(void* dst, hsa_agent_t dst_agent, const void* src, hsa_agent_t src_agent,
                                       std::size_t size, std::uint32_t num_dep_signals, const hsa_signal_t* dep_signals,
                                       hsa_signal_t completion_signal) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  State& s = state();
  if (dst == nullptr || src == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const auto to_agent = agent_index(s, dst_agent);
  const auto from_agent = agent_index(s, src_agent);
  if (!to_agent || !from_agent) return HSA_STATUS_ERROR_INVALID_AGENT;
  Job job;
  if (const hsa_status_t status = dependencies_of(s, num_dep_signals, dep_signals, job.dependencies);
      status != HSA_STATUS_SUCCESS) {
    return status;
  }
  if (completion_signal.handle == 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const auto completion = s.signals.find(completion_signal.handle);
  if (completion == s.signals.end()) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  if (size == 0) {
    note("hsa_amd_memory_async_copy of 0 bytes: nothing is queued and the completion signal is left unchanged");
    return HSA_STATUS_SUCCESS;
  }
  Reach to;
  Reach from;
  const CopyEnds ends{.dst = reinterpret_cast<std::uintptr_t>(dst),
                      .dst_agent = *to_agent,
                      .src = reinterpret_cast<std::uintptr_t>(src),
                      .src_agent = *from_agent,
                      .size = size};
  if (const std::string refusal = check_copy(s, ends, to, from); !refusal.empty()) {
    complain("hsa_amd_memory_async_copy refused: " + refusal);
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  job.completion = completion->second;
  job.busy = std::move(to.busy);
  job.busy.insert(job.busy.end(), from.busy.begin(), from.busy.end());
  job.memory = std::move(to.memory);
  job.memory.insert(job.memory.end(), from.memory.begin(), from.memory.end());
  if (s.copies_to_fail > 0) {
    --s.copies_to_fail;
    job.fails = true;
  } else {
    job.work = [to_pieces = std::move(to.pieces), from_pieces = std::move(from.pieces)] {
      copy_pieces(to_pieces, from_pieces);
    };
  }
  enqueue(s, std::move(job));
  return HSA_STATUS_SUCCESS;
}

void hsa_stand_in_fail_copies(unsigned count) {
  const auto lock = lock_open();
  if (lock) state().copies_to_fail = count;
}

hsa_status_t hsa_amd_memory_fill(void* ptr, std::uint32_t value, std::size_t count) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  const auto begin = reinterpret_cast<std::uintptr_t>(ptr);
  if (ptr == nullptr || begin % sizeof value != 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (count == 0) return HSA_STATUS_SUCCESS;
  const std::size_t bytes = count * sizeof value;
  if (bytes / sizeof value != count || begin + bytes < begin) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  std::string refusal = "not runtime memory, all in one allocation or mapping, that a GPU may write";
  std::byte* target = fill_target(state(), begin, begin + bytes, refusal);
  if (target == nullptr) {
    complain("hsa_amd_memory_fill(" + hex(begin) + ", " + std::to_string(count) + " words): " + refusal);
    return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  }
  std::fill_n(reinterpret_cast<std::uint32_t*>(target), count, value);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_svm_attributes_set(void* ptr, std::size_t size, hsa_amd_svm_attribute_pair_t* attribute_list,
                                        std::size_t attribute_count) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  State& s = state();
  if (ptr == nullptr || size == 0 || (attribute_count > 0 && attribute_list == nullptr)) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  for (std::size_t index = 0; index < attribute_count; ++index) {
    if (const hsa_status_t status = check_svm_attribute(s, attribute_list[index]); status != HSA_STATUS_SUCCESS) {
      return status;
    }
  }
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
  if (const std::string refusal = svm_range(s, ptr, size, begin, end); !refusal.empty()) {
    complain("hsa_amd_svm_attributes_set(" + hex(begin) + "): " + refusal);
    return HSA_STATUS_ERROR;  // what ROCr answers when the kernel driver refuses the range
  }
  s.svm.update(begin, end, [&](SvmAttributes& attributes) {
    for (std::size_t index = 0; index < attribute_count; ++index) {
      apply_svm_attribute(s, attribute_list[index], attributes);
    }
  });
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_svm_prefetch_async(void* ptr, std::size_t size, hsa_agent_t agent, std::uint32_t num_dep_signals,
                                        const hsa_signal_t* dep_signals, hsa_signal_t completion_signal) {
  const auto lock = lock_open();
  if (!lock) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  State& s = state();
  if (ptr == nullptr || size == 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (!agent_index(s, agent)) return HSA_STATUS_ERROR_INVALID_AGENT;
  Job job;
  if (const hsa_status_t status = dependencies_of(s, num_dep_signals, dep_signals, job.dependencies);
      status != HSA_STATUS_SUCCESS) {
    return status;
  }
  if (completion_signal.handle != 0) {  // documented as optional for a prefetch
    const auto completion = s.signals.find(completion_signal.handle);
    if (completion == s.signals.end()) return HSA_STATUS_ERROR_INVALID_SIGNAL;
    job.completion = completion->second;
  }
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
  if (const std::string refusal = svm_range(s, ptr, size, begin, end); !refusal.empty()) {
    complain("hsa_amd_svm_prefetch_async(" + hex(begin) + "): " + refusal);
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  job.lowered_on_host = true;
  job.finish = [&s, begin, end, destination = agent.handle] {
    s.svm.update(begin, end, [destination](SvmAttributes& attributes) { attributes.prefetched_to = destination; });
  };
  enqueue(s, std::move(job));
  return HSA_STATUS_SUCCESS;
}

}  // namespace hipxx::backend::rocr
