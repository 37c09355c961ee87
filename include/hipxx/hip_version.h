/*
 * hipxx: the version of the HIP API that <hip/hip_runtime_api.h> corresponds to, on its own as
 * AMD's <hip/hip_version.h> is, for code that includes only that.
 */
#ifndef HIPXX_HIP_VERSION_H
#define HIPXX_HIP_VERSION_H

#define HIP_VERSION_MAJOR 6
#define HIP_VERSION_MINOR 3
#define HIP_VERSION_PATCH 0
/* Same packing as AMD: major * 10^7 + minor * 10^5 + patch. */
#define HIP_VERSION (HIP_VERSION_MAJOR * 10000000 + HIP_VERSION_MINOR * 100000 + HIP_VERSION_PATCH)

#endif /* HIPXX_HIP_VERSION_H */
