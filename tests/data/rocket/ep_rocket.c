/* A stand-in for ort-rocket's libonnxruntime_rocket.so, of the same shape: an ONNX Runtime
 * plugin EP library exporting CreateEpFactories/ReleaseEpFactory, whose one factory is named
 * "rocket" and offers a device only when the rocket accel node opens, linked to librocketnpu.
 * Stock ONNX Runtime (1.23 or newer) registers it with RegisterExecutionProviderLibrary; it
 * runs no model (CreateEp says so). Built by tests/helpers/rocket.py with aarch64-linux-gnu-gcc;
 * GPL-3.0-or-later like ort-rocket.
 *
 * It needs no ONNX Runtime header: the few declarations below mirror ORT's own,
 *   include/onnxruntime/core/session/onnxruntime_c_api.h     OrtApiBase; OrtApi entries at their
 *                                                             fixed indices (append-only table)
 *   include/onnxruntime/core/session/onnxruntime_ep_c_api.h  OrtEpFactory as of 1.23; OrtEpApi's
 *                                                             CreateEpDevice; CreateEpApiFactoriesFn
 * Built with -DEP_ROCKET_CHECK_HEADER and ORT's headers on the include path, every index,
 * member offset, constant and signature below is checked against those headers instead
 * (tests/test_rocket_qemu.py does that with the headers of the default product's pinned AAR).
 *
 * Versioning. OrtEpFactory only grows at its end, one block per release, and its first member,
 * ort_version_supported, says which release's struct the library compiled: the header says
 * "ORT will use this to ensure it does not call functions that were not available when the
 * library was compiled", ep_api.cc's CreateEpDevice reads GetVersion only when it is >= 23, and
 * ORT's notes for adding a factory callback say to check "factory->ort_version_supported >= NN"
 * before reading one added in 1.NN. That is not the whole truth: measured under qemu, ORT 1.32
 * calls CreateDataTransfer (a 1.23 member) while registering a factory that says 22, and a
 * factory ending at ReleaseEp crashes it there. So this factory is the 1.23 struct, complete,
 * and says 23. Of the later members (1.24's device incompatibility details, custom-op domains,
 * graphics interop, ...) the same measurement, with more entries placed after the struct, saw
 * none called. The OrtApi it asks for is version 23's, which every newer core still serves.
 */
#define _POSIX_C_SOURCE 200809L /* O_CLOEXEC */
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include "rocketnpu.h"

#define ROCKET_ORT_API 23 /* the release whose OrtEpFactory and OrtApi this library uses */
#define ROCKET_VERSION "0.1.0"

#ifdef EP_ROCKET_CHECK_HEADER
#include "onnxruntime_c_api.h"
typedef OrtApiBase api_base_t;
typedef OrtEpFactory factory_t;
typedef OrtApi ort_table;
typedef OrtEpApi ep_table;
#define API_ENTRY(table, name, index, ret, params)                                              \
    _Static_assert(offsetof(table, name) == (index) * sizeof(void *), #name " is not entry " #index);
#define CONSTANT(name, value) _Static_assert((name) == (value), #name " is not " #value);
#define ORT(name) (ort->name)
#define EP(name) (ep_api->name)
#else
typedef struct OrtAllocator OrtAllocator;
typedef struct OrtDataTransferImpl OrtDataTransferImpl;
typedef struct OrtEp OrtEp;
typedef struct OrtEpDevice OrtEpDevice;
typedef struct OrtHardwareDevice OrtHardwareDevice;
typedef struct OrtKeyValuePairs OrtKeyValuePairs;
typedef struct OrtLogger OrtLogger;
typedef struct OrtMemoryDevice OrtMemoryDevice;
typedef struct OrtMemoryInfo OrtMemoryInfo;
typedef struct OrtSessionOptions OrtSessionOptions;
typedef struct OrtStatus OrtStatus;
typedef struct OrtSyncStreamImpl OrtSyncStreamImpl;
typedef int OrtErrorCode;          /* the header's enums: int-sized, their few values below */
typedef int OrtHardwareDeviceType;
typedef int OrtCompiledModelCompatibility;
typedef struct api_base_t {
    const void *(*GetApi)(uint32_t version); /* const OrtApi * */
    const char *(*GetVersionString)(void);
} api_base_t;
typedef struct factory_v23 factory_t;
typedef void (*ort_table)(void); /* one entry of OrtApi or OrtEpApi, cast to its type by ORT() */
typedef ort_table ep_table;
#define API_ENTRY(table, name, index, ret, params)                                              \
    typedef ret (*name##_fn) params;                                                             \
    enum { name##_index = (index) };
#define CONSTANT(name, value) enum { name = (value) };
#define ORT(name) ((name##_fn)ort[name##_index])
#define EP(name) ((name##_fn)ep_api[name##_index])
#endif

/* OrtEpFactory up to its 1.23 end (ORT_API_VERSION 23), member for member. */
struct factory_v23 {
    uint32_t ort_version_supported;
    const char *(*GetName)(const factory_t *self);
    const char *(*GetVendor)(const factory_t *self);
    OrtStatus *(*GetSupportedDevices)(factory_t *self, const OrtHardwareDevice *const *devices,
                                      size_t num_devices, OrtEpDevice **ep_devices,
                                      size_t max_ep_devices, size_t *num_ep_devices);
    OrtStatus *(*CreateEp)(factory_t *self, const OrtHardwareDevice *const *devices,
                           const OrtKeyValuePairs *const *ep_metadata_pairs, size_t num_devices,
                           const OrtSessionOptions *session_options, const OrtLogger *logger,
                           OrtEp **ep);
    void (*ReleaseEp)(factory_t *self, OrtEp *ep);
    /* 1.23 */
    uint32_t (*GetVendorId)(const factory_t *self);
    const char *(*GetVersion)(const factory_t *self);
    OrtStatus *(*ValidateCompiledModelCompatibilityInfo)(
        factory_t *self, const OrtHardwareDevice *const *devices, size_t num_devices,
        const char *compatibility_info, OrtCompiledModelCompatibility *model_compatibility);
    OrtStatus *(*CreateAllocator)(factory_t *self, const OrtMemoryInfo *memory_info,
                                  const OrtKeyValuePairs *allocator_options,
                                  OrtAllocator **allocator);
    void (*ReleaseAllocator)(factory_t *self, OrtAllocator *allocator);
    OrtStatus *(*CreateDataTransfer)(factory_t *self, OrtDataTransferImpl **data_transfer);
    bool (*IsStreamAware)(const factory_t *self);
    OrtStatus *(*CreateSyncStreamForDevice)(factory_t *self, const OrtMemoryDevice *memory_device,
                                            const OrtKeyValuePairs *stream_options,
                                            OrtSyncStreamImpl **stream);
};

#ifdef EP_ROCKET_CHECK_HEADER
#define SAME_MEMBER(name)                                                                       \
    _Static_assert(offsetof(struct factory_v23, name) == offsetof(OrtEpFactory, name),          \
                   "OrtEpFactory." #name " has moved");
SAME_MEMBER(ort_version_supported)
SAME_MEMBER(GetName)
SAME_MEMBER(GetVendor)
SAME_MEMBER(GetSupportedDevices)
SAME_MEMBER(CreateEp)
SAME_MEMBER(ReleaseEp)
SAME_MEMBER(GetVendorId)
SAME_MEMBER(GetVersion)
SAME_MEMBER(ValidateCompiledModelCompatibilityInfo)
SAME_MEMBER(CreateAllocator)
SAME_MEMBER(ReleaseAllocator)
SAME_MEMBER(CreateDataTransfer)
SAME_MEMBER(IsStreamAware)
SAME_MEMBER(CreateSyncStreamForDevice)
/* 1.24's first member follows: the 1.23 struct is a prefix of every later one */
_Static_assert(sizeof(struct factory_v23) == offsetof(OrtEpFactory, GetHardwareDeviceIncompatibilityDetails),
               "OrtEpFactory's 1.23 part is not what this file declares");
#endif

CONSTANT(ORT_INVALID_ARGUMENT, 2)
CONSTANT(ORT_NOT_IMPLEMENTED, 9)
CONSTANT(OrtHardwareDeviceType_CPU, 0)
CONSTANT(OrtCompiledModelCompatibility_EP_NOT_APPLICABLE, 0)

API_ENTRY(OrtApi, CreateStatus, 0, OrtStatus *, (OrtErrorCode code, const char *msg))
API_ENTRY(OrtApi, HardwareDevice_Type, 307, OrtHardwareDeviceType,
          (const OrtHardwareDevice *device))
API_ENTRY(OrtApi, GetEpApi, 317, const void *, (void))
API_ENTRY(OrtEpApi, CreateEpDevice, 0, OrtStatus *,
          (factory_t *ep_factory, const OrtHardwareDevice *hardware_device,
           const OrtKeyValuePairs *ep_metadata, const OrtKeyValuePairs *ep_options,
           OrtEpDevice **ep_device))

static const ort_table *ort;
static const ep_table *ep_api;

/* The NPU is here when the rocket driver's node opens and the driver library answers. */
static int npu_present(void) {
    int fd = open(ROCKET_NODE, O_RDWR | O_CLOEXEC);
    if (fd < 0) return 0;
    close(fd);
    return rocketnpu_version() > 0;
}

static const char *name(const factory_t *self) {
    (void)self;
    return "rocket";
}

static const char *vendor(const factory_t *self) {
    (void)self;
    return "ort-rocket";
}

/* One OrtEpDevice, on the CPU's hardware device (ORT enumerates no NPU behind /dev/accel),
 * when the NPU is present; none otherwise, which is no error: the machine lacks it. */
static OrtStatus *supported_devices(factory_t *self, const OrtHardwareDevice *const *devices,
                                    size_t count, OrtEpDevice **out, size_t most, size_t *found) {
    size_t i;
    *found = 0;
    if (most == 0 || !npu_present()) return NULL;
    for (i = 0; i < count; i++) {
        if (ORT(HardwareDevice_Type)(devices[i]) == OrtHardwareDeviceType_CPU) {
            OrtStatus *status = EP(CreateEpDevice)(self, devices[i], NULL, NULL, &out[0]);
            if (status != NULL) return status;
            *found = 1;
            break;
        }
    }
    return NULL;
}

static OrtStatus *create_ep(factory_t *self, const OrtHardwareDevice *const *devices,
                            const OrtKeyValuePairs *const *metadata, size_t count,
                            const OrtSessionOptions *options, const OrtLogger *logger,
                            OrtEp **ep) {
    (void)self; (void)devices; (void)metadata; (void)count; (void)options; (void)logger;
    *ep = NULL;
    return ORT(CreateStatus)(ORT_NOT_IMPLEMENTED, "the ort-rocket stand-in runs no model");
}

static void release_ep(factory_t *self, OrtEp *ep) {
    (void)self;
    (void)ep;
}

/* The 1.23 entries: no allocator, data transfer or stream of its own (the header's "set to
 * nullptr if not required"), no compiled models to judge. */
static uint32_t vendor_id(const factory_t *self) {
    (void)self;
    return 0; /* Rockchip's NPU has no PCI vendor id */
}

static const char *version(const factory_t *self) {
    (void)self;
    return ROCKET_VERSION;
}

static OrtStatus *validate_compiled(factory_t *self, const OrtHardwareDevice *const *devices,
                                    size_t count, const char *info,
                                    OrtCompiledModelCompatibility *compatibility) {
    (void)self; (void)devices; (void)count; (void)info;
    *compatibility = OrtCompiledModelCompatibility_EP_NOT_APPLICABLE;
    return NULL;
}

static OrtStatus *create_allocator(factory_t *self, const OrtMemoryInfo *info,
                                   const OrtKeyValuePairs *options, OrtAllocator **allocator) {
    (void)self; (void)info; (void)options;
    *allocator = NULL; /* the default CPU allocator */
    return NULL;
}

static void release_allocator(factory_t *self, OrtAllocator *allocator) {
    (void)self;
    (void)allocator;
}

static OrtStatus *create_data_transfer(factory_t *self, OrtDataTransferImpl **transfer) {
    (void)self;
    *transfer = NULL;
    return NULL;
}

static bool stream_aware(const factory_t *self) {
    (void)self;
    return false;
}

static OrtStatus *create_stream(factory_t *self, const OrtMemoryDevice *device,
                                const OrtKeyValuePairs *options, OrtSyncStreamImpl **stream) {
    (void)self; (void)device; (void)options;
    *stream = NULL;
    return NULL;
}

static factory_t factory = {
    .ort_version_supported = ROCKET_ORT_API,
    .GetName = name,
    .GetVendor = vendor,
    .GetSupportedDevices = supported_devices,
    .CreateEp = create_ep,
    .ReleaseEp = release_ep,
    .GetVendorId = vendor_id,
    .GetVersion = version,
    .ValidateCompiledModelCompatibilityInfo = validate_compiled,
    .CreateAllocator = create_allocator,
    .ReleaseAllocator = release_allocator,
    .CreateDataTransfer = create_data_transfer,
    .IsStreamAware = stream_aware,
    .CreateSyncStreamForDevice = create_stream,
};

OrtStatus *CreateEpFactories(const char *registration_name, const api_base_t *base,
                             const OrtLogger *default_logger, factory_t **factories,
                             size_t max_factories, size_t *num_factories) {
    (void)registration_name;
    (void)default_logger;
    *num_factories = 0;
    ort = base->GetApi(ROCKET_ORT_API);
    if (ort == NULL) return NULL; /* a core older than 1.23: nothing to register with it */
    ep_api = ORT(GetEpApi)();
    if (max_factories < 1) {
        return ORT(CreateStatus)(ORT_INVALID_ARGUMENT, "no room for the rocket factory");
    }
    factories[0] = &factory;
    *num_factories = 1;
    return NULL;
}

OrtStatus *ReleaseEpFactory(factory_t *released) {
    (void)released; /* the one factory is static */
    return NULL;
}

#ifdef EP_ROCKET_CHECK_HEADER
/* the two exports have the types ORT looks them up as */
__attribute__((unused)) static CreateEpApiFactoriesFn const check_create = CreateEpFactories;
__attribute__((unused)) static ReleaseEpApiFactoryFn const check_release = ReleaseEpFactory;
#endif
