#include "core/event.hpp"

namespace hipxx::core {

void Event::set_marker(std::shared_ptr<EventMarker> marker) {
  std::lock_guard lock{mutex_};
  marker_ = std::move(marker);
}

std::shared_ptr<EventMarker> Event::marker() const {
  std::lock_guard lock{mutex_};
  return marker_;
}

hipError_t Event::query() const {
  const std::shared_ptr<EventMarker> current = marker();
  if (!current) return hipSuccess;  // never recorded: nothing to wait for
  return current->reached() ? current->failure() : hipErrorNotReady;
}

hipError_t Event::synchronize() const {
  const std::shared_ptr<EventMarker> current = marker();
  if (!current) return hipSuccess;
  current->wait();
  return current->failure();
}

hipError_t EventRegistry::create(hipEvent_t* event, unsigned flags) {
  auto created = std::make_shared<Event>(flags);
  std::lock_guard lock{mutex_};
  const std::uintptr_t id = numbers_.take();
  events_.emplace(id, std::move(created));
  *event = reinterpret_cast<hipEvent_t>(id);
  return hipSuccess;
}

hipError_t EventRegistry::destroy(hipEvent_t event) {
  std::lock_guard lock{mutex_};
  return events_.erase(reinterpret_cast<std::uintptr_t>(event)) == 1 ? hipSuccess : hipErrorInvalidHandle;
}

std::shared_ptr<Event> EventRegistry::resolve(hipEvent_t event) const {
  std::lock_guard lock{mutex_};
  const auto found = events_.find(reinterpret_cast<std::uintptr_t>(event));
  return found == events_.end() ? nullptr : found->second;
}

std::size_t EventRegistry::live_events() const {
  std::lock_guard lock{mutex_};
  return events_.size();
}

hipError_t elapsed_milliseconds(const Event& start, const Event& stop, float* milliseconds) {
  if (!start.timing() || !stop.timing()) return hipErrorInvalidHandle;
  const std::shared_ptr<EventMarker> first = start.marker();
  const std::shared_ptr<EventMarker> second = stop.marker();
  if (!first || !second) return hipErrorInvalidHandle;
  if (!first->reached() || !second->reached()) {
    return hipErrorNotReady;
  }
  if (first->timestamp && second->timestamp) return second->timestamp->elapsed_since(*first->timestamp, milliseconds);
  if (first->timestamp || second->timestamp) return hipErrorInvalidHandle;  // a device time and a host time
  const std::chrono::duration<float, std::milli> span = second->reached_at - first->reached_at;
  *milliseconds = span.count();
  return hipSuccess;
}

}  // namespace hipxx::core
