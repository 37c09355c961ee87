/* Legacy include path: the HIP runtime API is provided by hipxx. */
#include <hipxx/hip_runtime_api.h>
