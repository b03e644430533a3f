/* A stand-in for ort-rocket's libonnxruntime_rocket.so, of the same shape: an ONNX Runtime
 * plugin EP library exporting CreateEpFactories/ReleaseEpFactory, whose one factory is named
 * "rocket" and offers a device only when the rocket accel node exists, linked to librocketnpu.
 * Built by tests/helpers/rocket.py with aarch64-linux-gnu-gcc; GPL-3.0-or-later like ort-rocket. */
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include "rocketnpu.h"

typedef struct OrtEpFactory OrtEpFactory;
typedef void OrtStatus;

/* The first members of ORT's OrtEpFactory, in its order (onnxruntime_ep_c_api.h). */
struct OrtEpFactory {
  uint32_t ort_version_supported;
  const char *(*GetName)(const OrtEpFactory *self);
  const char *(*GetVendor)(const OrtEpFactory *self);
  OrtStatus *(*GetSupportedDevices)(OrtEpFactory *self, const void *const *devices,
                                    size_t num_devices, void **ep_devices,
                                    size_t max_ep_devices, size_t *num_ep_devices);
};

static const char *name(const OrtEpFactory *self) { (void)self; return "rocket"; }
static const char *vendor(const OrtEpFactory *self) { (void)self; return "ort-rocket"; }

static OrtStatus *devices(OrtEpFactory *self, const void *const *hardware, size_t count,
                          void **out, size_t most, size_t *found) {
  (void)self; (void)hardware; (void)count; (void)out;
  /* the NPU is offered only where the rocket driver's node is */
  *found = (most > 0 && access(ROCKET_NODE, F_OK) == 0 && rocketnpu_version() > 0) ? 1 : 0;
  return NULL;
}

static OrtEpFactory factory = {22, name, vendor, devices};

OrtStatus *CreateEpFactories(const char *registration_name, const void *ort_api_base,
                             const void *default_logger, OrtEpFactory **factories,
                             size_t max_factories, size_t *num_factories) {
  (void)registration_name; (void)ort_api_base; (void)default_logger;
  if (max_factories < 1) return NULL;
  factories[0] = &factory;
  *num_factories = 1;
  return NULL;
}

OrtStatus *ReleaseEpFactory(OrtEpFactory *released) { (void)released; return NULL; }
