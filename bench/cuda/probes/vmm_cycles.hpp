// One full VMM cycle as gpu-bench times it (reserve, create, map, set access, unmap, release,
// free), through the driver or through hipxx, timing only the map. `before_map` runs between the
// create and the map; `grant` says whether the cycle sets access (and through whose call).
#pragma once

#include "side_by_side.hpp"

#include <cstddef>

namespace probe {

enum class Grant { none, same_api, driver };

template <class BeforeMap>
double driver_cycle(const Driver& driver, std::size_t size, Grant grant, CUdeviceptr slot, BeforeMap&& before_map) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, driver.device};
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CUdeviceptr va = slot;
  if (slot == 0) check(cuMemAddressReserve(&va, size, 0, 0, 0), "cuMemAddressReserve");
  CUmemGenericAllocationHandle handle = 0;
  check(cuMemCreate(&handle, size, &prop, 0), "cuMemCreate");
  before_map();
  const auto start = Clock::now();
  check(cuMemMap(va, size, 0, handle, 0), "cuMemMap");
  const double elapsed = ns_since(start);
  if (grant != Grant::none) check(cuMemSetAccess(va, size, &access, 1), "cuMemSetAccess");
  check(cuMemUnmap(va, size), "cuMemUnmap");
  check(cuMemRelease(handle), "cuMemRelease");
  if (slot == 0) check(cuMemAddressFree(va, size), "cuMemAddressFree");
  return elapsed;
}

template <class BeforeMap>
double hipxx_cycle(const Driver& driver, std::size_t size, Grant grant, BeforeMap&& before_map) {
  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.location = {hipMemLocationTypeDevice, 0};
  hipMemAccessDesc access{};
  access.location = prop.location;
  access.flags = hipMemAccessFlagsProtReadWrite;
  void* va = nullptr;
  check(hipMemAddressReserve(&va, size, 0, nullptr, 0), "hipMemAddressReserve");
  hipMemGenericAllocationHandle_t handle = nullptr;
  check(hipMemCreate(&handle, size, &prop, 0), "hipMemCreate");
  before_map();
  const auto start = Clock::now();
  check(hipMemMap(va, size, 0, handle, 0), "hipMemMap");
  const double elapsed = ns_since(start);
  if (grant == Grant::same_api) check(hipMemSetAccess(va, size, &access, 1), "hipMemSetAccess");
  if (grant == Grant::driver) {
    CUmemAccessDesc driver_access{};
    driver_access.location = {CU_MEM_LOCATION_TYPE_DEVICE, driver.device};
    driver_access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    check(cuMemSetAccess(reinterpret_cast<CUdeviceptr>(va), size, &driver_access, 1), "cuMemSetAccess");
  }
  check(hipMemUnmap(va, size), "hipMemUnmap");
  check(hipMemRelease(handle), "hipMemRelease");
  check(hipMemAddressFree(va, size), "hipMemAddressFree");
  return elapsed;
}

}  // namespace probe
