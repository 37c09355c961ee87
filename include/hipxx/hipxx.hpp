// Everything hipxx offers. Prefer the one-concept headers in code that cares about compile time:
// each pulls in only what it uses.
#pragma once

#include <hipxx/access.hpp>
#include <hipxx/callback.hpp>
#include <hipxx/copy.hpp>
#include <hipxx/device.hpp>
#include <hipxx/device_allocatable.hpp>
#include <hipxx/device_storable.hpp>
#include <hipxx/error.hpp>
#include <hipxx/event.hpp>
#include <hipxx/fd_passing.hpp>
#include <hipxx/growable_array.hpp>
#include <hipxx/ipc.hpp>
#include <hipxx/ipc_event.hpp>
#include <hipxx/managed_buffer.hpp>
#include <hipxx/mapping.hpp>
#include <hipxx/mem_pool.hpp>
#include <hipxx/physical_allocation.hpp>
#include <hipxx/pool_sharing.hpp>
#include <hipxx/shareable_handle.hpp>
#include <hipxx/stream.hpp>
#include <hipxx/stream_value.hpp>
#include <hipxx/virtual_range.hpp>
