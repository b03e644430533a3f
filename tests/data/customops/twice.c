/*
 * A custom-operator library of the shape onnxruntime-extensions publishes: it exports
 * RegisterCustomOps(options, api_base), which asks the core for its OrtApi, creates the domain
 * "ai.ortbundle.test" with two operators, "Twice" and "Half", and adds it to the session
 * options. Only the OrtApi entries it calls are declared (onnxruntime_c_api.h: the OrtApi
 * table's indices are fixed once published). Built by tests/test_custom_op_domains.py.
 */
#include <stdint.h>
#include <string.h>

#ifdef _WIN32
#define API __stdcall
#define EXPORT __declspec(dllexport)
#else
#define API
#define EXPORT __attribute__((visibility("default")))
#endif

typedef struct OrtStatus OrtStatus;
typedef struct OrtSessionOptions OrtSessionOptions;
typedef struct OrtCustomOpDomain OrtCustomOpDomain;
typedef struct OrtApiBase {
    const void *(API *GetApi)(uint32_t version);
    const char *(API *GetVersionString)(void);
} OrtApiBase;

/* OrtCustomOp: its version, CreateKernel, GetName, then members this library leaves empty */
typedef struct OrtCustomOp {
    uint32_t version;
    void *(API *CreateKernel)(const struct OrtCustomOp *op, const void *api, const void *info);
    const char *(API *GetName)(const struct OrtCustomOp *op);
    void *rest[40];
} OrtCustomOp;

typedef OrtStatus *(API *create_domain_fn)(const char *domain, OrtCustomOpDomain **out);
typedef OrtStatus *(API *domain_add_fn)(OrtCustomOpDomain *domain, const OrtCustomOp *op);
typedef OrtStatus *(API *add_domain_fn)(OrtSessionOptions *options, OrtCustomOpDomain *domain);

static const char *API twice_name(const OrtCustomOp *op) { (void)op; return "Twice"; }
static const char *API half_name(const OrtCustomOp *op) { (void)op; return "Half"; }
static OrtCustomOp twice = {1, 0, twice_name, {0}};
static OrtCustomOp half = {1, 0, half_name, {0}};

#ifndef TEST_DOMAIN
#define TEST_DOMAIN "ai.ortbundle.test"
#endif

EXPORT OrtStatus *API RegisterCustomOps(OrtSessionOptions *options, const OrtApiBase *base) {
    void *const *api = (void *const *)base->GetApi(12); /* OrtApi 12: ONNX Runtime 1.12 */
    create_domain_fn create_domain;
    domain_add_fn domain_add;
    add_domain_fn add_domain;
    OrtCustomOpDomain *domain = 0;
    OrtStatus *status;
    memcpy(&create_domain, &api[26], sizeof create_domain); /* CreateCustomOpDomain */
    memcpy(&domain_add, &api[27], sizeof domain_add);       /* CustomOpDomain_Add */
    memcpy(&add_domain, &api[28], sizeof add_domain);       /* AddCustomOpDomain */
    if ((status = create_domain(TEST_DOMAIN, &domain)) != 0) return status;
    if ((status = domain_add(domain, &twice)) != 0) return status;
    if ((status = domain_add(domain, &half)) != 0) return status;
    return add_domain(options, domain);
}
