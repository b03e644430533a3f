/* A stand-in for rocket-userspace's librocketnpu.so.1: the driver library ort-rocket links. */
#include <stdlib.h>

#include "rocketnpu.h"

/* 1, or ROCKETNPU_VERSION's value (a C library call: the library links libc as the real one) */
int rocketnpu_version(void) {
  const char *forced = getenv("ROCKETNPU_VERSION");
  return forced ? atoi(forced) : 1;
}
