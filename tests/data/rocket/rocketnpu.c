/* A stand-in for rocket-userspace's librocketnpu.so.1: the driver library ort-rocket links. */
#include "rocketnpu.h"

int rocketnpu_version(void) { return 1; }
