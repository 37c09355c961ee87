/* Legacy include path: the version of the HIP API that hipxx provides. */
#include <hipxx/hip_version.h>
