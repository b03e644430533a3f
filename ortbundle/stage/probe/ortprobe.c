/*
 * ortprobe: load one staged ONNX Runtime the way the shipped loader (runtime_loader.py) does,
 * and say what it can do, one fact per line on stdout. Built from this one file by
 * ortbundle/tools/smoke/probe/__init__.py: with mingw-w64 for Windows (run under Wine or on
 * Windows) and with gcc for Linux. It needs no ONNX Runtime header: the few C API entries it
 * calls are declared below (the OrtApi table's indices are fixed once published).
 *
 *   ortprobe --lib DIR/onnxruntime.dll [--plugin NAME=PATH]... [--custom-ops NAME=PATH]...
 *            [--ep NAME[:KEY=VALUE,...]]... [--model PATH]... [--load PATH]... [--hold SECONDS]
 *
 * Output lines (the caller, ortbundle/tools/smoke/probe/__init__.py, parses them):
 *   api N                          the newest OrtApi version the core offers
 *   version X.Y.Z                  OrtGetApiBase()->GetVersionString()
 *   providers A B ...              GetAvailableProviders()
 *   plugin NAME ok EP_NAME... | plugin NAME failed MESSAGE
 *   customops NAME ok DOMAIN:OP... | customops NAME failed MESSAGE
 *                                  the library's RegisterCustomOps run against the core, the
 *                                  domains it created and the operators it added to each
 *   ep NAME ok | ep NAME failed MESSAGE      a session with that provider appended
 *   model PATH ok | model PATH failed MESSAGE
 *   input NAME float D0xD1...      the fixed input it was given: x[i] = ((i % 11) - 5) * 0.5
 *                                  (after its model's `ok` line, as are the outputs)
 *   output NAME float|int64 COUNT V...       | output NAME other
 *   loaded NAME                    a library of the core's directory that the core, its
 *                                  providers and plugins have mapped by now
 *   load PATH ok | load PATH failed CODE     then each --load, loaded directly
 *   why MESSAGE                    after a failed load: the platform loader's own words
 *   holding                        --hold: it now sleeps with everything loaded (a
 *                                  running application, for the installer's in-use tests)
 *   error MESSAGE                  the probe stopped (exit 1)
 * Exit status: 0 when the core loaded and every model ran; 1 otherwise. A failed --ep, --plugin
 * or --load is reported but does not change it: the caller decides what it needed.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#include <windows.h>
#include <shellapi.h>
#else
#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>
#endif

/* ------------------------------------------------------------------ the ONNX Runtime C API
 * OrtGetApiBase() gives GetApi(version), which returns the OrtApi struct: a table of function
 * pointers that ONNX Runtime only ever appends to, so each entry's index is the same in every
 * release that has it. ORT_ENTRY(name, index, return type, parameters) declares one entry as
 * onnxruntime_c_api.h declares it (index = offsetof(OrtApi, name) / sizeof(void *)).
 *
 * Built with -DORTPROBE_CHECK_HEADER and the real header on the include path, the probe is
 * compiled against that header instead, and each index and constant below is asserted against
 * it (tests/test_smoke_real.py does that, with the header of the pinned Android AAR).
 */
#define PROBE_API_MIN 12  /* SessionOptionsAppendExecutionProvider: ONNX Runtime 1.12 */
#define PLUGIN_API_MIN 22 /* RegisterExecutionProviderLibrary, GetEpDevices: 1.22 */
#define PROBE_API_SEARCH 64 /* a core whose version string is not 1.N: try from here down */

#ifdef ORTPROBE_CHECK_HEADER
#include "onnxruntime_c_api.h"
typedef OrtApi ort_table;
typedef const OrtApi *ort_api_ptr;
#define ORT_ENTRY(name, index, ret, params)                                                      \
    _Static_assert(offsetof(OrtApi, name) == (index) * sizeof(void *), #name " is not entry " #index);
#define ORT_CONSTANT(name, value) _Static_assert((name) == (value), #name " is not " #value);
#define ORT(name) (api->name)
#else
#ifdef _WIN32
#define ORT_API_CALL __stdcall
typedef wchar_t ORTCHAR_T;
#else
#define ORT_API_CALL
typedef char ORTCHAR_T;
#endif
typedef struct OrtAllocator OrtAllocator;
typedef struct OrtEnv OrtEnv;
typedef struct OrtEpDevice OrtEpDevice;
typedef struct OrtMemoryInfo OrtMemoryInfo;
typedef struct OrtRunOptions OrtRunOptions;
typedef struct OrtSession OrtSession;
typedef struct OrtSessionOptions OrtSessionOptions;
typedef struct OrtStatus OrtStatus;
typedef struct OrtTensorTypeAndShapeInfo OrtTensorTypeAndShapeInfo;
typedef struct OrtTypeInfo OrtTypeInfo;
typedef struct OrtValue OrtValue;
typedef struct OrtCustomOpDomain OrtCustomOpDomain;
/* OrtCustomOp's first members (the header's order; the rest is never read here) */
typedef struct OrtCustomOp {
    uint32_t version;
    void *(ORT_API_CALL *CreateKernel)(const struct OrtCustomOp *op, const void *api,
                                       const void *info);
    const char *(ORT_API_CALL *GetName)(const struct OrtCustomOp *op);
} OrtCustomOp;
/* the header's enums: int-sized in both ABIs, their few values below */
typedef int OrtLoggingLevel;
typedef int OrtAllocatorType;
typedef int OrtMemType;
typedef int ONNXTensorElementDataType;
typedef struct OrtApiBase {
    const void *(ORT_API_CALL *GetApi)(uint32_t version); /* const OrtApi * */
    const char *(ORT_API_CALL *GetVersionString)(void);
} OrtApiBase;
typedef const void *ort_api_ptr;
typedef void (*ort_table)(void); /* one entry of OrtApi, cast to its type by ORT() */
#define ORT_ENTRY(name, index, ret, params)                                                      \
    typedef ret(ORT_API_CALL *name##_fn) params;                                                  \
    enum { name##_index = (index) };
#define ORT_CONSTANT(name, value) enum { name = (value) };
#define ORT(name) ((name##_fn)api[name##_index])
#endif

ORT_CONSTANT(ORT_LOGGING_LEVEL_ERROR, 3)
ORT_CONSTANT(OrtArenaAllocator, 1)
ORT_CONSTANT(OrtMemTypeDefault, 0)
ORT_CONSTANT(ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED, 0)
ORT_CONSTANT(ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, 1)
ORT_CONSTANT(ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, 7)

ORT_ENTRY(GetErrorMessage, 2, const char *, (const OrtStatus *status))
ORT_ENTRY(CreateEnv, 3, OrtStatus *, (OrtLoggingLevel level, const char *logid, OrtEnv **out))
ORT_ENTRY(CreateSession, 7, OrtStatus *,
          (const OrtEnv *env, const ORTCHAR_T *model_path, const OrtSessionOptions *options,
           OrtSession **out))
ORT_ENTRY(Run, 9, OrtStatus *,
          (OrtSession *session, const OrtRunOptions *run_options, const char *const *input_names,
           const OrtValue *const *inputs, size_t input_len, const char *const *output_names,
           size_t output_names_len, OrtValue **outputs))
ORT_ENTRY(CreateSessionOptions, 10, OrtStatus *, (OrtSessionOptions **options))
ORT_ENTRY(CreateCustomOpDomain, 26, OrtStatus *, (const char *domain, OrtCustomOpDomain **out))
ORT_ENTRY(CustomOpDomain_Add, 27, OrtStatus *,
          (OrtCustomOpDomain *custom_op_domain, const OrtCustomOp *op))
ORT_ENTRY(SessionGetInputCount, 30, OrtStatus *, (const OrtSession *session, size_t *out))
ORT_ENTRY(SessionGetOutputCount, 31, OrtStatus *, (const OrtSession *session, size_t *out))
ORT_ENTRY(SessionGetInputTypeInfo, 33, OrtStatus *,
          (const OrtSession *session, size_t index, OrtTypeInfo **type_info))
ORT_ENTRY(SessionGetInputName, 36, OrtStatus *,
          (const OrtSession *session, size_t index, OrtAllocator *allocator, char **value))
ORT_ENTRY(SessionGetOutputName, 37, OrtStatus *,
          (const OrtSession *session, size_t index, OrtAllocator *allocator, char **value))
ORT_ENTRY(CreateTensorWithDataAsOrtValue, 49, OrtStatus *,
          (const OrtMemoryInfo *info, void *p_data, size_t p_data_len, const int64_t *shape,
           size_t shape_len, ONNXTensorElementDataType type, OrtValue **out))
ORT_ENTRY(IsTensor, 50, OrtStatus *, (const OrtValue *value, int *out))
ORT_ENTRY(GetTensorMutableData, 51, OrtStatus *, (OrtValue *value, void **out))
ORT_ENTRY(CastTypeInfoToTensorInfo, 55, OrtStatus *,
          (const OrtTypeInfo *type_info, const OrtTensorTypeAndShapeInfo **out))
ORT_ENTRY(GetTensorElementType, 60, OrtStatus *,
          (const OrtTensorTypeAndShapeInfo *info, ONNXTensorElementDataType *out))
ORT_ENTRY(GetDimensionsCount, 61, OrtStatus *,
          (const OrtTensorTypeAndShapeInfo *info, size_t *out))
ORT_ENTRY(GetDimensions, 62, OrtStatus *,
          (const OrtTensorTypeAndShapeInfo *info, int64_t *dim_values, size_t dim_values_length))
ORT_ENTRY(GetTensorShapeElementCount, 64, OrtStatus *,
          (const OrtTensorTypeAndShapeInfo *info, size_t *out))
ORT_ENTRY(GetTensorTypeAndShape, 65, OrtStatus *,
          (const OrtValue *value, OrtTensorTypeAndShapeInfo **out))
ORT_ENTRY(CreateCpuMemoryInfo, 69, OrtStatus *,
          (OrtAllocatorType type, OrtMemType mem_type, OrtMemoryInfo **out))
ORT_ENTRY(AllocatorFree, 76, OrtStatus *, (OrtAllocator *allocator, void *p))
ORT_ENTRY(GetAllocatorWithDefaultOptions, 78, OrtStatus *, (OrtAllocator **out))
ORT_ENTRY(ReleaseStatus, 93, void, (OrtStatus *input))
ORT_ENTRY(ReleaseMemoryInfo, 94, void, (OrtMemoryInfo *input))
ORT_ENTRY(ReleaseSession, 95, void, (OrtSession *input))
ORT_ENTRY(ReleaseValue, 96, void, (OrtValue *input))
ORT_ENTRY(ReleaseTypeInfo, 98, void, (OrtTypeInfo *input))
ORT_ENTRY(ReleaseTensorTypeAndShapeInfo, 99, void, (OrtTensorTypeAndShapeInfo *input))
ORT_ENTRY(ReleaseSessionOptions, 100, void, (OrtSessionOptions *input))
ORT_ENTRY(GetAvailableProviders, 125, OrtStatus *, (char ***out_ptr, int *provider_length))
ORT_ENTRY(ReleaseAvailableProviders, 126, OrtStatus *, (char **ptr, int providers_length))
ORT_ENTRY(SessionOptionsAppendExecutionProvider, 216, OrtStatus *,
          (OrtSessionOptions *options, const char *provider_name,
           const char *const *provider_options_keys, const char *const *provider_options_values,
           size_t num_keys))
ORT_ENTRY(RegisterExecutionProviderLibrary, 301, OrtStatus *,
          (OrtEnv *env, const char *registration_name, const ORTCHAR_T *path))
ORT_ENTRY(GetEpDevices, 303, OrtStatus *,
          (const OrtEnv *env, const OrtEpDevice *const **ep_devices, size_t *num_ep_devices))
ORT_ENTRY(EpDevice_EpName, 312, const char *, (const OrtEpDevice *ep_device))

#define MAX_ITEMS 64
#define MAX_DIMS 8

static const ort_table *api;
static uint32_t api_version;
static char load_error[1024]; /* why the last open_library failed, in the platform's words */

static void one_line(char *text) {
    size_t i;
    for (i = 0; text[i]; i++) {
        if (text[i] == '\n' || text[i] == '\r') text[i] = ' ';
    }
}

static void fail(const char *message) {
    printf("error %s\n", message);
    fflush(stdout);
    exit(1);
}

/* The message of a failed call, on one line; the status is released. */
static const char *message_of(OrtStatus *status) {
    static char text[1024];
    const char *raw = ORT(GetErrorMessage)(status);
    snprintf(text, sizeof text, "%s", raw ? raw : "unknown error");
    one_line(text);
    ORT(ReleaseStatus)(status);
    return text;
}

static void check(OrtStatus *status, const char *what) {
    char line[1200];
    if (status == NULL) return;
    snprintf(line, sizeof line, "%s: %s", what, message_of(status));
    fail(line);
}

/* ------------------------------------------------------------------ platform: libraries */
#ifdef _WIN32
static wchar_t *wide(const char *utf8) {
    int n = MultiByteToWideChar(CP_UTF8, 0, utf8, -1, NULL, 0);
    wchar_t *out = malloc(sizeof(wchar_t) * (size_t)(n > 0 ? n : 1));
    if (out == NULL) fail("out of memory");
    if (n <= 0) out[0] = 0;
    else MultiByteToWideChar(CP_UTF8, 0, utf8, -1, out, n);
    return out;
}

static char *narrow(const wchar_t *text) {
    int n = WideCharToMultiByte(CP_UTF8, 0, text, -1, NULL, 0, NULL, NULL);
    char *out = malloc((size_t)(n > 0 ? n : 1));
    if (out == NULL) fail("out of memory");
    if (n <= 0) out[0] = 0;
    else WideCharToMultiByte(CP_UTF8, 0, text, -1, out, n, NULL, NULL);
    return out;
}

typedef const ORTCHAR_T *ort_path;
static ort_path ort_path_of(const char *utf8) { return wide(utf8); }

/* runtime_loader.py: os.add_dll_directory(dir), dir first on PATH, then ctypes.CDLL(entry),
 * which is LoadLibraryExW with the default directories and the DLL's own directory. */
static void *open_library(const char *path, unsigned long *code) {
    wchar_t *wpath = wide(path);
    HMODULE module = LoadLibraryExW(
        wpath, NULL, LOAD_LIBRARY_SEARCH_DEFAULT_DIRS | LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR);
    *code = module ? 0 : GetLastError();
    free(wpath);
    load_error[0] = 0;
    if (module == NULL) {
        FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL,
                       (DWORD)*code, 0, load_error, sizeof load_error, NULL);
        one_line(load_error);
    }
    return (void *)module;
}

static void *symbol(void *library, const char *name) {
    return (void *)GetProcAddress((HMODULE)library, name);
}

static void pause_seconds(int seconds) { Sleep((DWORD)seconds * 1000); }

static void add_search_directory(const char *directory) {
    wchar_t *wdir = wide(directory);
    size_t size = 32768;
    wchar_t *path = malloc(sizeof(wchar_t) * size);
    wchar_t *joined = malloc(sizeof(wchar_t) * (size + wcslen(wdir) + 2));
    if (path == NULL || joined == NULL) fail("out of memory");
    if (AddDllDirectory(wdir) == NULL) fail("AddDllDirectory failed for the runtime directory");
    if (GetEnvironmentVariableW(L"PATH", path, (DWORD)size) == 0) path[0] = 0;
    swprintf(joined, size + wcslen(wdir) + 2, L"%ls;%ls", wdir, path);
    SetEnvironmentVariableW(L"PATH", joined);
    free(path);
    free(joined);
    free(wdir);
}

static void print_loaded(const char *directory) {
    char pattern[4096];
    WIN32_FIND_DATAW found;
    HANDLE search;
    wchar_t *wpattern;
    snprintf(pattern, sizeof pattern, "%s\\*.dll", directory);
    wpattern = wide(pattern);
    search = FindFirstFileW(wpattern, &found);
    free(wpattern);
    if (search == INVALID_HANDLE_VALUE) return;
    do {
        char *name = narrow(found.cFileName);
        char full[4096];
        wchar_t *wfull;
        snprintf(full, sizeof full, "%s\\%s", directory, name);
        wfull = wide(full);
        if (GetModuleHandleW(wfull) != NULL) printf("loaded %s\n", name);
        free(wfull);
        free(name);
    } while (FindNextFileW(search, &found));
    FindClose(search);
}
#define SEPARATORS "\\/"
#else
typedef const ORTCHAR_T *ort_path;
static ort_path ort_path_of(const char *utf8) { return utf8; }

static void *open_library(const char *path, unsigned long *code) {
    void *library = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    const char *why = library ? NULL : dlerror();
    *code = library ? 0 : 1;
    snprintf(load_error, sizeof load_error, "%s", why ? why : "");
    one_line(load_error);
    return library;
}

static void *symbol(void *library, const char *name) { return dlsym(library, name); }

static void pause_seconds(int seconds) { sleep((unsigned)seconds); }

static void add_search_directory(const char *directory) { (void)directory; /* RUNPATH $ORIGIN */ }

static void print_loaded(const char *directory) {
    DIR *dir = opendir(directory);
    struct dirent *entry;
    if (dir == NULL) return;
    while ((entry = readdir(dir)) != NULL) {
        char full[4096];
        void *handle;
        if (strstr(entry->d_name, ".so") == NULL) continue;
        snprintf(full, sizeof full, "%s/%s", directory, entry->d_name);
        handle = dlopen(full, RTLD_NOW | RTLD_NOLOAD);
        if (handle != NULL) {
            printf("loaded %s\n", entry->d_name);
            dlclose(handle);
        }
    }
    closedir(dir);
}
#define SEPARATORS "/"
#endif

/* ------------------------------------------------------------------ the probe */
static float input_value(size_t i) { return (float)((int)(i % 11) - 5) * 0.5f; }

static void print_providers(void) {
    char **names = NULL;
    int count = 0, i;
    check(ORT(GetAvailableProviders)(&names, &count), "GetAvailableProviders");
    printf("providers");
    for (i = 0; i < count; i++) printf(" %s", names[i]);
    printf("\n");
    check(ORT(ReleaseAvailableProviders)(names, count), "ReleaseAvailableProviders");
}

static void register_plugin(OrtEnv *env, const char *spec) {
    char name[256];
    const char *equals = strchr(spec, '=');
    const OrtEpDevice *const *devices = NULL;
    size_t count = 0, i;
    OrtStatus *status;
    ort_path path;
    if (equals == NULL || (size_t)(equals - spec) >= sizeof name) fail("--plugin wants NAME=PATH");
    memcpy(name, spec, (size_t)(equals - spec));
    name[equals - spec] = 0;
    if (api_version < PLUGIN_API_MIN) {
        printf("plugin %s failed this core offers API %u; plugin EPs need %d\n", name,
               (unsigned)api_version, PLUGIN_API_MIN);
        return;
    }
    path = ort_path_of(equals + 1);
    status = ORT(RegisterExecutionProviderLibrary)(env, name, path);
    if (status != NULL) {
        printf("plugin %s failed %s\n", name, message_of(status));
        return;
    }
    check(ORT(GetEpDevices)(env, &devices, &count), "GetEpDevices");
    printf("plugin %s ok", name);
    for (i = 0; i < count; i++) printf(" %s", ORT(EpDevice_EpName)(devices[i]));
    printf("\n");
}

/* --custom-ops: a custom-operator library's RegisterCustomOps(options, api_base) is run with an
 * OrtApiBase of the probe's own, whose OrtApi is the core's table with two entries wrapped:
 * CreateCustomOpDomain and CustomOpDomain_Add record each domain and operator, then call the
 * core's. ONNX Runtime offers no call that lists a session's custom domains, so this is how the
 * library itself says what it registers. The table is copied as far as it can be read (it ends
 * where the core's OrtApi ends, unknown here; a library reads no further than its own). */
#define SHIM_SLOTS 1024
#define MAX_DOMAINS 64
static void *shim_slots[SHIM_SLOTS];
static const OrtApiBase *real_base;
static OrtApiBase shim_base;
static const OrtCustomOpDomain *domain_handles[MAX_DOMAINS];
static char domain_names[MAX_DOMAINS][160];
static size_t n_domains;
static char registered_ops[16384];

static size_t readable_slots(const void *start, size_t want) {
    size_t n = 0;
#ifdef _WIN32
    MEMORY_BASIC_INFORMATION info;
    const char *at = (const char *)start;
    while (n < want && VirtualQuery(at + n * sizeof(void *), &info, sizeof info) != 0 &&
           info.State == MEM_COMMIT && !(info.Protect & (PAGE_NOACCESS | PAGE_GUARD))) {
        size_t end = (size_t)((const char *)info.BaseAddress + info.RegionSize - at);
        n = end / sizeof(void *);
    }
#else
    int fds[2];
    char sink[sizeof(void *)];
    if (pipe(fds) != 0) return 0;
    /* write() reads the memory for us: EFAULT, not a crash, where it is not mapped */
    for (n = 0; n < want; n++) {
        if (write(fds[1], (const char *)start + n * sizeof(void *), sizeof(void *)) !=
            (ssize_t)sizeof(void *))
            break;
        if (read(fds[0], sink, sizeof sink) != (ssize_t)sizeof sink) break;
    }
    close(fds[0]);
    close(fds[1]);
#endif
    return n < want ? n : want;
}

static OrtStatus *ORT_API_CALL hook_create_domain(const char *domain, OrtCustomOpDomain **out) {
    OrtStatus *status = ORT(CreateCustomOpDomain)(domain, out);
    if (status == NULL && out != NULL && *out != NULL && n_domains < MAX_DOMAINS) {
        domain_handles[n_domains] = *out;
        snprintf(domain_names[n_domains], sizeof domain_names[0], "%s",
                 domain != NULL && domain[0] ? domain : "ai.onnx");
        n_domains++;
    }
    return status;
}

static OrtStatus *ORT_API_CALL hook_domain_add(OrtCustomOpDomain *domain, const OrtCustomOp *op) {
    OrtStatus *status = ORT(CustomOpDomain_Add)(domain, op);
    const char *name = "?", *where = "?";
    size_t i, used = strlen(registered_ops);
    if (status != NULL) return status;
    for (i = 0; i < n_domains; i++)
        if (domain_handles[i] == domain) where = domain_names[i];
    if (op != NULL && op->GetName != NULL && op->GetName(op) != NULL) name = op->GetName(op);
    snprintf(registered_ops + used, sizeof registered_ops - used, " %s:%s", where, name);
    return NULL;
}

static ort_api_ptr ORT_API_CALL shim_get_api(uint32_t version) {
    const void *real = (const void *)real_base->GetApi(version);
    OrtStatus *(ORT_API_CALL * create)(const char *, OrtCustomOpDomain **) = hook_create_domain;
    OrtStatus *(ORT_API_CALL * add)(OrtCustomOpDomain *, const OrtCustomOp *) = hook_domain_add;
    size_t slots;
    if (real == NULL) return NULL;
    slots = readable_slots(real, SHIM_SLOTS);
    memset(shim_slots, 0, sizeof shim_slots);
    memcpy(shim_slots, real, slots * sizeof(void *));
    memcpy(&shim_slots[26], &create, sizeof create); /* CreateCustomOpDomain */
    memcpy(&shim_slots[27], &add, sizeof add);       /* CustomOpDomain_Add */
    return (ort_api_ptr)(const void *)shim_slots;
}

static void register_custom_ops(const OrtApiBase *base, const char *spec) {
    char name[256];
    const char *equals = strchr(spec, '=');
    unsigned long code = 0;
    void *library;
    OrtStatus *(ORT_API_CALL * entry)(OrtSessionOptions *, const OrtApiBase *);
    OrtSessionOptions *options = NULL;
    OrtStatus *status;
    if (equals == NULL || (size_t)(equals - spec) >= sizeof name)
        fail("--custom-ops wants NAME=PATH");
    memcpy(name, spec, (size_t)(equals - spec));
    name[equals - spec] = 0;
    library = open_library(equals + 1, &code);
    if (library == NULL) {
        printf("customops %s failed cannot load it (code %lu): %s\n", name, code, load_error);
        return;
    }
    *(void **)&entry = symbol(library, "RegisterCustomOps");
    if (entry == NULL) {
        printf("customops %s failed it exports no RegisterCustomOps\n", name);
        return;
    }
    real_base = base;
    shim_base.GetApi = shim_get_api;
    shim_base.GetVersionString = base->GetVersionString;
    n_domains = 0;
    registered_ops[0] = 0;
    check(ORT(CreateSessionOptions)(&options), "CreateSessionOptions");
    status = entry(options, &shim_base);
    if (status != NULL) {
        printf("customops %s failed %s\n", name, message_of(status));
        return;
    }
    printf("customops %s ok%s\n", name, registered_ops);
    /* the options own the domains now; the process ends soon, so neither is released */
}

/* "OpenVINO:device_type=GPU,precision=FP32" -> a session with that provider appended. */
static void try_provider(OrtEnv *env, const char *spec, const char *model) {
    char buffer[1024], *keys[16], *values[16], *cursor, *colon;
    size_t count = 0;
    OrtSessionOptions *options = NULL;
    OrtSession *session = NULL;
    OrtStatus *status;
    snprintf(buffer, sizeof buffer, "%s", spec);
    colon = strchr(buffer, ':');
    if (colon != NULL) {
        *colon = 0;
        for (cursor = strtok(colon + 1, ","); cursor && count < 16; cursor = strtok(NULL, ",")) {
            char *equals = strchr(cursor, '=');
            if (equals == NULL) fail("--ep wants NAME:KEY=VALUE,...");
            *equals = 0;
            keys[count] = cursor;
            values[count++] = equals + 1;
        }
    }
    check(ORT(CreateSessionOptions)(&options), "CreateSessionOptions");
    status = ORT(SessionOptionsAppendExecutionProvider)(
        options, buffer, (const char *const *)keys, (const char *const *)values, count);
    if (status == NULL && model != NULL)
        status = ORT(CreateSession)(env, ort_path_of(model), options, &session);
    if (status != NULL) printf("ep %s failed %s\n", buffer, message_of(status));
    else printf("ep %s ok\n", buffer);
    if (session) ORT(ReleaseSession)(session);
    ORT(ReleaseSessionOptions)(options);
}

static int run_model(OrtEnv *env, const char *model) {
    OrtSessionOptions *options = NULL;
    OrtSession *session = NULL;
    OrtAllocator *allocator = NULL;
    OrtMemoryInfo *memory = NULL;
    OrtStatus *status;
    size_t inputs = 0, outputs = 0, i, j;
    char *input_names[MAX_ITEMS], *output_names[MAX_ITEMS];
    OrtValue *input_values[MAX_ITEMS], *output_values[MAX_ITEMS];
    float *buffers[MAX_ITEMS];
    int64_t shapes[MAX_ITEMS][MAX_DIMS];
    size_t ranks[MAX_ITEMS];

    check(ORT(CreateSessionOptions)(&options), "CreateSessionOptions");
    status = ORT(CreateSession)(env, ort_path_of(model), options, &session);
    ORT(ReleaseSessionOptions)(options);
    if (status != NULL) {
        printf("model %s failed %s\n", model, message_of(status));
        return 0;
    }
    check(ORT(GetAllocatorWithDefaultOptions)(&allocator), "GetAllocatorWithDefaultOptions");
    check(ORT(CreateCpuMemoryInfo)(OrtArenaAllocator, OrtMemTypeDefault, &memory), "MemoryInfo");
    check(ORT(SessionGetInputCount)(session, &inputs), "SessionGetInputCount");
    check(ORT(SessionGetOutputCount)(session, &outputs), "SessionGetOutputCount");
    if (inputs > MAX_ITEMS || outputs > MAX_ITEMS) fail("model has too many inputs or outputs");

    for (i = 0; i < inputs; i++) {
        OrtTypeInfo *type = NULL;
        const OrtTensorTypeAndShapeInfo *tensor = NULL;
        ONNXTensorElementDataType element;
        int64_t dims[MAX_DIMS];
        size_t rank = 0, count = 1;
        check(ORT(SessionGetInputName)(session, i, allocator, &input_names[i]), "input name");
        check(ORT(SessionGetInputTypeInfo)(session, i, &type), "SessionGetInputTypeInfo");
        check(ORT(CastTypeInfoToTensorInfo)(type, &tensor), "CastTypeInfoToTensorInfo");
        if (tensor == NULL) fail("a model input is not a tensor");
        check(ORT(GetTensorElementType)(tensor, &element), "GetTensorElementType");
        if (element != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) fail("a model input is not float");
        check(ORT(GetDimensionsCount)(tensor, &rank), "GetDimensionsCount");
        if (rank > MAX_DIMS) fail("a model input has too many dimensions");
        check(ORT(GetDimensions)(tensor, dims, rank), "GetDimensions");
        ORT(ReleaseTypeInfo)(type);
        for (j = 0; j < rank; j++) {
            if (dims[j] <= 0) dims[j] = 3; /* a free dimension (batch): three rows */
            count *= (size_t)dims[j];
            shapes[i][j] = dims[j];
        }
        ranks[i] = rank;
        buffers[i] = malloc(sizeof(float) * (count ? count : 1));
        if (buffers[i] == NULL) fail("out of memory");
        for (j = 0; j < count; j++) buffers[i][j] = input_value(j);
        input_values[i] = NULL;
        check(ORT(CreateTensorWithDataAsOrtValue)(memory, buffers[i], sizeof(float) * count, dims,
                                                  rank, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT,
                                                  &input_values[i]),
              "CreateTensorWithDataAsOrtValue");
    }
    for (i = 0; i < outputs; i++) {
        check(ORT(SessionGetOutputName)(session, i, allocator, &output_names[i]), "output name");
        output_values[i] = NULL;
    }
    status = ORT(Run)(session, NULL, (const char *const *)input_names,
                      (const OrtValue *const *)input_values, inputs,
                      (const char *const *)output_names, outputs, output_values);
    if (status != NULL) {
        printf("model %s failed %s\n", model, message_of(status));
        return 0;
    }
    printf("model %s ok\n", model);
    for (i = 0; i < inputs; i++) {
        printf("input %s float ", input_names[i]);
        for (j = 0; j < ranks[i]; j++) printf(j ? "x%lld" : "%lld", (long long)shapes[i][j]);
        printf("\n");
    }
    for (i = 0; i < outputs; i++) {
        int is_tensor = 0;
        OrtTensorTypeAndShapeInfo *info = NULL;
        ONNXTensorElementDataType element = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
        size_t count = 0;
        void *data = NULL;
        check(ORT(IsTensor)(output_values[i], &is_tensor), "IsTensor");
        if (is_tensor) {
            check(ORT(GetTensorTypeAndShape)(output_values[i], &info), "GetTensorTypeAndShape");
            check(ORT(GetTensorElementType)(info, &element), "GetTensorElementType");
            check(ORT(GetTensorShapeElementCount)(info, &count), "GetTensorShapeElementCount");
            ORT(ReleaseTensorTypeAndShapeInfo)(info);
            check(ORT(GetTensorMutableData)(output_values[i], &data), "GetTensorMutableData");
        }
        if (element == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
            printf("output %s float %zu", output_names[i], count);
            for (j = 0; j < count; j++) printf(" %.9g", (double)((float *)data)[j]);
        } else if (element == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64) {
            printf("output %s int64 %zu", output_names[i], count);
            for (j = 0; j < count; j++) printf(" %lld", (long long)((int64_t *)data)[j]);
        } else {
            printf("output %s other", output_names[i]);
        }
        printf("\n");
        ORT(ReleaseValue)(output_values[i]);
        check(ORT(AllocatorFree)(allocator, output_names[i]), "AllocatorFree");
    }
    for (i = 0; i < inputs; i++) {
        ORT(ReleaseValue)(input_values[i]);
        free(buffers[i]);
        check(ORT(AllocatorFree)(allocator, input_names[i]), "AllocatorFree");
    }
    ORT(ReleaseMemoryInfo)(memory);
    ORT(ReleaseSession)(session);
    return 1;
}

static int probe(int argc, char **argv) {
    const char *lib = NULL, *plugins[MAX_ITEMS], *eps[MAX_ITEMS], *models[MAX_ITEMS];
    const char *loads[MAX_ITEMS], *custom_ops[MAX_ITEMS];
    size_t n_plugins = 0, n_eps = 0, n_models = 0, n_loads = 0, n_custom = 0, i, cut;
    int hold = 0;
    char directory[4096];
    void *core;
    unsigned long code = 0;
    const OrtApiBase *(ORT_API_CALL * get_base)(void);
    const OrtApiBase *base;
    const char *version;
    OrtEnv *env = NULL;
    int ok = 1, a;
#ifndef _WIN32
    /* each line out as it is said: a core that crashes keeps what came before (a pipe would
     * otherwise hold it in a buffer the crash throws away; Windows' C runtime has no line
     * buffering) */
    setvbuf(stdout, NULL, _IOLBF, BUFSIZ);
#endif

    for (a = 1; a + 1 < argc; a += 2) {
        const char *flag = argv[a], *value = argv[a + 1];
        if (strcmp(flag, "--lib") == 0) lib = value;
        else if (strcmp(flag, "--plugin") == 0 && n_plugins < MAX_ITEMS) plugins[n_plugins++] = value;
        else if (strcmp(flag, "--custom-ops") == 0 && n_custom < MAX_ITEMS)
            custom_ops[n_custom++] = value;
        else if (strcmp(flag, "--ep") == 0 && n_eps < MAX_ITEMS) eps[n_eps++] = value;
        else if (strcmp(flag, "--model") == 0 && n_models < MAX_ITEMS) models[n_models++] = value;
        else if (strcmp(flag, "--load") == 0 && n_loads < MAX_ITEMS) loads[n_loads++] = value;
        else if (strcmp(flag, "--hold") == 0) hold = atoi(value);
        else fail("usage: ortprobe --lib CORE [--plugin N=P] [--ep N[:K=V,...]] [--model P] [--load P]");
    }
    if (a != argc || lib == NULL) fail("usage: ortprobe --lib CORE [...] (see the source)");

    snprintf(directory, sizeof directory, "%s", lib);
    cut = strlen(directory);
    while (cut > 0 && strchr(SEPARATORS, directory[cut - 1]) == NULL) cut--;
    directory[cut > 0 ? cut - 1 : 0] = 0;
    if (directory[0]) add_search_directory(directory);

    core = open_library(lib, &code);
    if (core == NULL) {
        char line[4200];
        snprintf(line, sizeof line, "cannot load %s (code %lu): %s", lib, code, load_error);
        fail(line);
    }
    *(void **)&get_base = symbol(core, "OrtGetApiBase");
    if (get_base == NULL) fail("the library has no OrtGetApiBase: not an ONNX Runtime");
    base = get_base();
    if (base == NULL) fail("OrtGetApiBase returned NULL");
    /* ORT 1.N offers OrtApi versions 1..N: ask for that first (an unknown version makes the
     * core print a complaint), then walk down in case a build numbers differently. */
    version = base->GetVersionString();
    if (version != NULL && sscanf(version, "1.%u", &api_version) == 1 && api_version > 0)
        api = (const ort_table *)base->GetApi(api_version);
    if (api == NULL) {
        for (api_version = PROBE_API_SEARCH; api_version >= PROBE_API_MIN; api_version--) {
            api = (const ort_table *)base->GetApi(api_version);
            if (api != NULL) break;
        }
    }
    if (api == NULL || api_version < PROBE_API_MIN) {
        char line[256];
        snprintf(line, sizeof line,
                 "ONNX Runtime %s offers no OrtApi version %d or newer, which this probe needs",
                 version ? version : "(no version)", PROBE_API_MIN);
        fail(line);
    }
    printf("api %u\n", (unsigned)api_version);
    printf("version %s\n", version ? version : "");
    print_providers();
    check(ORT(CreateEnv)(ORT_LOGGING_LEVEL_ERROR, "ortprobe", &env), "CreateEnv");
    for (i = 0; i < n_plugins; i++) register_plugin(env, plugins[i]);
    for (i = 0; i < n_custom; i++) register_custom_ops(base, custom_ops[i]);
    for (i = 0; i < n_eps; i++) try_provider(env, eps[i], n_models ? models[0] : NULL);
    for (i = 0; i < n_models; i++) ok &= run_model(env, models[i]);
    if (directory[0]) print_loaded(directory); /* what the core and its providers loaded */
    for (i = 0; i < n_loads; i++) {
        void *library = open_library(loads[i], &code);
        if (library) printf("load %s ok\n", loads[i]);
        else printf("load %s failed %lu\nwhy %s\n", loads[i], code, load_error);
    }
    fflush(stdout);
    if (hold > 0) {
        printf("holding\n");
        fflush(stdout);
        pause_seconds(hold);
    }
    return ok ? 0 : 1;
}

#ifdef _WIN32
int main(void) {
    int argc = 0, i;
    wchar_t **wargv = CommandLineToArgvW(GetCommandLineW(), &argc);
    char **argv = malloc(sizeof(char *) * (size_t)(argc + 1));
    if (wargv == NULL || argv == NULL) fail("cannot read the command line");
    for (i = 0; i < argc; i++) argv[i] = narrow(wargv[i]);
    argv[argc] = NULL;
    SetErrorMode(SEM_FAILCRITICALERRORS | SEM_NOGPFAULTERRORBOX | SEM_NOOPENFILEERRORBOX);
    return probe(argc, argv);
}
#else
int main(int argc, char **argv) { return probe(argc, argv); }
#endif
