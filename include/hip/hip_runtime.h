/* Legacy include path (host-only use): the HIP runtime API is provided by hipxx. */
#include <hipxx/hip_runtime_api.h>
