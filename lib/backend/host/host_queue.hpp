// A device queue for the host backend, chosen with HIPXX_HOST_QUEUES=1: one thread per queue runs
// its operations in order through the backend's synchronous calls, and waits by polling, as a GPU's
// command processor does. It exists so that the runtime's device-queue path (progress words, gates,
// cross-queue waits, timestamps, host calls) runs and is tested where no GPU is.
#pragma once

#include "backend/backend.hpp"

#include <memory>

namespace hipxx::backend {

[[nodiscard]] std::unique_ptr<Queue> make_host_queue(Backend& backend);
[[nodiscard]] std::unique_ptr<Timestamp> make_host_timestamp(bool timing);

}  // namespace hipxx::backend
