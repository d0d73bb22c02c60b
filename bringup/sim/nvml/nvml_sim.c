/*
 * nvml_sim.c -- a simulated NVIDIA Management Library, driven by data.
 *
 * What it is
 * ----------
 * Built as libnvidia-ml.so.1 and found first on LD_LIBRARY_PATH, this library is what the
 * real nvidia-ml-py (pynvml) loads in place of NVIDIA's: the project's GPU code then runs
 * against NVML on a machine without a GPU. It is compiled against NVIDIA's own nvml.h (from
 * the nvidia-nvml-dev wheels; see build.py), so every struct, enum, field id and return code
 * is NVIDIA's, and each function is defined under the symbol name pynvml looks up: nvml.h
 * #defines the unversioned names to the versioned ones (nvmlDeviceGetCount ->
 * nvmlDeviceGetCount_v2), so this file writes the versioned names out, as they are exported.
 *
 * Only the entry points the project calls are implemented. Any other is simply absent, and
 * pynvml raises its own NVMLError_FunctionNotFound, exactly as on an older driver.
 *
 * Where the values come from
 * --------------------------
 * nvmlInit reads a JSON state from the file named by $BRINGUP_NVMLSIM_STATE. The schema is
 * documented (and built, and checked) in state.py next to this file; in short:
 *
 *   { "schema": 1, "driver_version": "580.95.05", "cuda_driver_version": 13000,
 *     "branch": "r580", "field_ids": [[1, 273]], "errors": {"nvmlSystemGet...": "UNKNOWN"},
 *     "gpus": [ { "name": ..., "power": {"usage_mw": ...}, "fields": {"82": ...}, ... } ] }
 *
 * A key that is absent means the GPU does not support that query: the entry point answers
 * NVML_ERROR_NOT_SUPPORTED, as a real driver does for a feature the GPU lacks.
 *
 * How time works
 * --------------
 * Every number in a GPU's state is a "time value", a function of t, the seconds since
 * nvmlInit (CLOCK_MONOTONIC), written as data:
 *
 *   42                              constant
 *   {"steps": [[t, v], ...]}        piecewise constant: v of the last point with t_i <= t
 *                                   (before the first point, the first v)
 *   {"ramp": [[t, v], ...]}         piecewise linear between the points, flat outside them
 *   {"accumulate": [[t, r], ...]}   the integral from 0 to t of a rate that is r_i from t_i
 *                                   on (0 before the first point): throttle-time counters
 *
 * So a temperature ramps, power pins at its limit, a clocks event reason bit switches on at
 * a given second and its counter grows from then on: a sampler reads a real timeline. Each
 * call evaluates the value afresh; the state itself never changes after nvmlInit.
 *
 * How to add an entry point
 * -------------------------
 * 1. Find its declaration in nvml.h and pynvml's wrapper in pynvml.py: the wrapper names
 *    the symbol (_nvmlGetFunctionPointer("...")) and shows how arguments are passed.
 * 2. Write it below under that exact symbol, starting with ENTER_SYSTEM() or
 *    ENTER_DEVICE(device, gpu): those answer "not initialised", a bad handle, a lost GPU
 *    and an injected error, so the body only reads the state (number(), text(), ...).
 * 3. Add the symbol to ENTRY_POINTS in state.py (a test compares it with `nm -D`), and
 *    the state key to the schema there, with the builder that fills it.
 *
 * Threads: the state is read-only between nvmlInit and nvmlShutdown, so concurrent calls
 * (a sampler thread beside the main one) need no lock; init and shutdown take one.
 */

#define _POSIX_C_SOURCE 200809L

#include <nvml.h>

/* cJSON (Debian libcjson-dev) reads the state: a small, well-kept parser is safer than one
 * written here, and the state is written by Python's json module, so nothing exotic. */
#include <cjson/cJSON.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STATE_ENV "BRINGUP_NVMLSIM_STATE"
#define MAX_GPUS 64 /* more than any node has; a larger state is refused at nvmlInit */

/* nvml.h leaves struct nvmlDevice_st opaque: here a handle is one visible GPU. */
struct nvmlDevice_st {
    const cJSON *json; /* the GPU's object in the state */
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_refcount;    /* nvmlInit calls not yet matched by nvmlShutdown */
static cJSON *g_state;    /* the parsed state; kept until the next load (see load_state) */
static double g_t0;       /* CLOCK_MONOTONIC seconds at the nvmlInit that loaded the state */
static struct nvmlDevice_st g_gpus[MAX_GPUS];
static unsigned int g_count; /* visible GPUs: those not marked "missing" */

/* ------------------------------------------------------------------------------------------
 * Return codes by name: the state names them ("NOT_SUPPORTED"), nvml.h gives the numbers.
 * The texts are the ones NVIDIA's library gives (pynvml keeps the same table for the common
 * codes); the rarer ones are nvml.h's own comment.
 * ---------------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    nvmlReturn_t code;
    const char *text;
} RETURNS[] = {
    {"SUCCESS", NVML_SUCCESS, "Success"},
    {"UNINITIALIZED", NVML_ERROR_UNINITIALIZED, "Uninitialized"},
    {"INVALID_ARGUMENT", NVML_ERROR_INVALID_ARGUMENT, "Invalid Argument"},
    {"NOT_SUPPORTED", NVML_ERROR_NOT_SUPPORTED, "Not Supported"},
    {"NO_PERMISSION", NVML_ERROR_NO_PERMISSION, "Insufficient Permissions"},
    {"ALREADY_INITIALIZED", NVML_ERROR_ALREADY_INITIALIZED, "Already Initialized"},
    {"NOT_FOUND", NVML_ERROR_NOT_FOUND, "Not Found"},
    {"INSUFFICIENT_SIZE", NVML_ERROR_INSUFFICIENT_SIZE, "Insufficient Size"},
    {"INSUFFICIENT_POWER", NVML_ERROR_INSUFFICIENT_POWER, "Insufficient External Power"},
    {"DRIVER_NOT_LOADED", NVML_ERROR_DRIVER_NOT_LOADED, "Driver Not Loaded"},
    {"TIMEOUT", NVML_ERROR_TIMEOUT, "Timeout"},
    {"IRQ_ISSUE", NVML_ERROR_IRQ_ISSUE, "Interrupt Request Issue"},
    {"LIBRARY_NOT_FOUND", NVML_ERROR_LIBRARY_NOT_FOUND, "NVML Shared Library Not Found"},
    {"FUNCTION_NOT_FOUND", NVML_ERROR_FUNCTION_NOT_FOUND, "Function Not Found"},
    {"CORRUPTED_INFOROM", NVML_ERROR_CORRUPTED_INFOROM, "Corrupted infoROM"},
    {"GPU_IS_LOST", NVML_ERROR_GPU_IS_LOST, "GPU is lost"},
    {"RESET_REQUIRED", NVML_ERROR_RESET_REQUIRED, "GPU requires restart"},
    {"OPERATING_SYSTEM", NVML_ERROR_OPERATING_SYSTEM,
     "The operating system has blocked the request."},
    {"LIB_RM_VERSION_MISMATCH", NVML_ERROR_LIB_RM_VERSION_MISMATCH,
     "RM has detected an NVML/RM version mismatch."},
    {"IN_USE", NVML_ERROR_IN_USE, "In use by another client"},
    {"MEMORY", NVML_ERROR_MEMORY, "Insufficient Memory"},
    {"NO_DATA", NVML_ERROR_NO_DATA, "No data"},
    {"INSUFFICIENT_RESOURCES", NVML_ERROR_INSUFFICIENT_RESOURCES,
     "Ran out of critical resources, other than memory"},
    {"ARGUMENT_VERSION_MISMATCH", NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
     "The provided version is invalid/unsupported"},
    {"DEPRECATED", NVML_ERROR_DEPRECATED, "The requested functionality has been deprecated"},
    {"NOT_READY", NVML_ERROR_NOT_READY, "The system is not ready for the request"},
    {"GPU_NOT_FOUND", NVML_ERROR_GPU_NOT_FOUND, "No GPUs were found"},
    {"INVALID_STATE", NVML_ERROR_INVALID_STATE,
     "Resource not in correct state to perform requested operation"},
    {"UNKNOWN", NVML_ERROR_UNKNOWN, "Unknown Error"},
};
#define N_RETURNS (sizeof RETURNS / sizeof RETURNS[0])

/* The code a state names; UNKNOWN for a name this table lacks (state.py refuses those). */
static nvmlReturn_t return_code(const cJSON *name)
{
    if (cJSON_IsString(name))
        for (size_t i = 0; i < N_RETURNS; i++)
            if (strcmp(RETURNS[i].name, name->valuestring) == 0)
                return RETURNS[i].code;
    return NVML_ERROR_UNKNOWN;
}

const char *nvmlErrorString(nvmlReturn_t result)
{
    for (size_t i = 0; i < N_RETURNS; i++)
        if (RETURNS[i].code == result)
            return RETURNS[i].text;
    return "Unknown Error";
}

/* ------------------------------------------------------------------------------------------
 * Time values
 * ---------------------------------------------------------------------------------------- */

static double monotonic_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Point i of a [[t, v], ...] list; 0 when it is not a pair of numbers. */
static int point(const cJSON *points, int i, double *t, double *v)
{
    const cJSON *p = cJSON_GetArrayItem(points, i);
    const cJSON *pt = cJSON_GetArrayItem(p, 0), *pv = cJSON_GetArrayItem(p, 1);
    if (!cJSON_IsNumber(pt) || !cJSON_IsNumber(pv))
        return 0;
    *t = pt->valuedouble;
    *v = pv->valuedouble;
    return 1;
}

/* The value of a time value at t. Returns 0 (and leaves *out) when `value` is absent or
 * not a time value, which the callers answer as "not supported". */
static int evaluate(const cJSON *value, double t, double *out)
{
    if (cJSON_IsNumber(value)) {
        *out = value->valuedouble;
        return 1;
    }
    if (cJSON_IsBool(value)) {
        *out = cJSON_IsTrue(value) ? 1.0 : 0.0;
        return 1;
    }
    if (!cJSON_IsObject(value))
        return 0;
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(value, "steps");
    const cJSON *ramp = cJSON_GetObjectItemCaseSensitive(value, "ramp");
    const cJSON *acc = cJSON_GetObjectItemCaseSensitive(value, "accumulate");
    const cJSON *points = steps ? steps : ramp ? ramp : acc;
    int n = cJSON_GetArraySize(points);
    double ti, vi, tn, vn;
    if (!cJSON_IsArray(points) || n == 0 || !point(points, 0, &ti, &vi))
        return 0;

    if (steps) {
        double result = vi;
        for (int i = 0; i < n && point(points, i, &ti, &vi) && ti <= t; i++)
            result = vi;
        *out = result;
        return 1;
    }
    if (ramp) {
        if (t <= ti) {
            *out = vi;
            return 1;
        }
        for (int i = 0; i + 1 < n; i++) {
            if (!point(points, i, &ti, &vi) || !point(points, i + 1, &tn, &vn))
                return 0;
            if (t < tn) {
                *out = tn > ti ? vi + (vn - vi) * (t - ti) / (tn - ti) : vn;
                return 1;
            }
        }
        point(points, n - 1, &ti, &vi);
        *out = vi;
        return 1;
    }
    /* accumulate: rate r_i holds from t_i to t_{i+1} (the last one for ever) */
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        if (!point(points, i, &ti, &vi))
            return 0;
        if (ti >= t)
            break;
        double end = t;
        if (i + 1 < n && point(points, i + 1, &tn, &vn) && tn < t)
            end = tn;
        sum += vi * (end - ti);
    }
    *out = sum;
    return 1;
}

/* ------------------------------------------------------------------------------------------
 * Reading the state
 * ---------------------------------------------------------------------------------------- */

static const cJSON *at(const cJSON *object, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(object, key);
}

static double now(void)
{
    return monotonic_s() - g_t0;
}

/* A number of the state, now: NOT_SUPPORTED when absent. */
static nvmlReturn_t number(const cJSON *value, double *out)
{
    return evaluate(value, now(), out) ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

/* The number as an unsigned int (counters, MHz, mW, ...), rounded; negatives become 0. */
static nvmlReturn_t uint_value(const cJSON *value, unsigned int *out)
{
    double v;
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t r = number(value, &v);
    if (r == NVML_SUCCESS)
        *out = v <= 0 ? 0u : (unsigned int)(v + 0.5);
    return r;
}

static nvmlReturn_t ull_value(const cJSON *value, unsigned long long *out)
{
    double v;
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t r = number(value, &v);
    if (r == NVML_SUCCESS)
        *out = v <= 0 ? 0ull : (unsigned long long)(v + 0.5);
    return r;
}

static nvmlReturn_t int_value(const cJSON *value, int *out)
{
    double v;
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t r = number(value, &v);
    if (r == NVML_SUCCESS)
        *out = (int)(v < 0 ? v - 0.5 : v + 0.5);
    return r;
}

/* A string of the state into a caller's buffer of `length` bytes, as NVML fills them. */
static nvmlReturn_t text(const cJSON *value, char *buffer, unsigned int length)
{
    if (!buffer)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!cJSON_IsString(value))
        return NVML_ERROR_NOT_SUPPORTED;
    size_t need = strlen(value->valuestring) + 1;
    if (need > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buffer, value->valuestring, need);
    return NVML_SUCCESS;
}

/* The enum a state key names: {"sm", NVML_CLOCK_SM} and the like. */
struct named {
    const char *name;
    int value;
};

static const char *name_of(const struct named *table, size_t n, int value)
{
    for (size_t i = 0; i < n; i++)
        if (table[i].value == value)
            return table[i].name;
    return NULL;
}

static int value_of(const struct named *table, size_t n, const char *name, int fallback)
{
    for (size_t i = 0; name && i < n; i++)
        if (strcmp(table[i].name, name) == 0)
            return table[i].value;
    return fallback;
}

#define N(table) (sizeof table / sizeof table[0])

static const struct named CLOCKS[] = {
    {"graphics", NVML_CLOCK_GRAPHICS},
    {"sm", NVML_CLOCK_SM},
    {"mem", NVML_CLOCK_MEM},
    {"video", NVML_CLOCK_VIDEO},
};

static const struct named THRESHOLDS[] = {
    {"shutdown", NVML_TEMPERATURE_THRESHOLD_SHUTDOWN},
    {"slowdown", NVML_TEMPERATURE_THRESHOLD_SLOWDOWN},
    {"mem_max", NVML_TEMPERATURE_THRESHOLD_MEM_MAX},
    {"gpu_max", NVML_TEMPERATURE_THRESHOLD_GPU_MAX},
    {"acoustic_min", NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MIN},
    {"acoustic_curr", NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR},
    {"acoustic_max", NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MAX},
    {"gps_curr", NVML_TEMPERATURE_THRESHOLD_GPS_CURR},
};

static const struct named ECC_TYPES[] = {
    {"corrected", NVML_MEMORY_ERROR_TYPE_CORRECTED},
    {"uncorrected", NVML_MEMORY_ERROR_TYPE_UNCORRECTED},
};

static const struct named ECC_COUNTERS[] = {
    {"volatile", NVML_VOLATILE_ECC},
    {"aggregate", NVML_AGGREGATE_ECC},
};

static const struct named FABRIC_STATES[] = {
    {"not_supported", NVML_GPU_FABRIC_STATE_NOT_SUPPORTED},
    {"not_started", NVML_GPU_FABRIC_STATE_NOT_STARTED},
    {"in_progress", NVML_GPU_FABRIC_STATE_IN_PROGRESS},
    {"completed", NVML_GPU_FABRIC_STATE_COMPLETED},
};

static const struct named VALUE_TYPES[] = {
    {"double", NVML_VALUE_TYPE_DOUBLE},
    {"unsigned_int", NVML_VALUE_TYPE_UNSIGNED_INT},
    {"unsigned_long", NVML_VALUE_TYPE_UNSIGNED_LONG},
    {"unsigned_long_long", NVML_VALUE_TYPE_UNSIGNED_LONG_LONG},
    {"signed_long_long", NVML_VALUE_TYPE_SIGNED_LONG_LONG},
    {"signed_int", NVML_VALUE_TYPE_SIGNED_INT},
    {"unsigned_short", NVML_VALUE_TYPE_UNSIGNED_SHORT},
};

/* ------------------------------------------------------------------------------------------
 * Loading the state, and what every entry point checks first
 * ---------------------------------------------------------------------------------------- */

/* Reads and parses the state file; one line on stderr says why not (the caller's
 * NVMLError only carries a code). Called with g_lock held. */
static nvmlReturn_t load_state(void)
{
    const char *path = getenv(STATE_ENV);
    if (!path || !*path) {
        fprintf(stderr, "nvml_sim: %s is not set: no simulated driver\n", STATE_ENV);
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "nvml_sim: cannot open %s: %s\n", path, strerror(errno));
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    char *data = NULL;
    size_t size = 0, used = 0, got;
    do {
        if (used + 65536 + 1 > size) {
            char *bigger = realloc(data, size = used + 65536 + 1);
            if (!bigger) {
                free(data);
                fclose(f);
                return NVML_ERROR_MEMORY;
            }
            data = bigger;
        }
        got = fread(data + used, 1, 65536, f);
        used += got;
    } while (got > 0);
    fclose(f);
    data[used] = '\0';
    cJSON *state = cJSON_Parse(data);
    free(data);

    const cJSON *gpus = at(state, "gpus");
    if (!cJSON_IsObject(state) || !cJSON_IsArray(gpus)) {
        fprintf(stderr, "nvml_sim: %s is not a state (JSON object with \"gpus\")\n", path);
        cJSON_Delete(state);
        return NVML_ERROR_UNKNOWN;
    }
    if (cJSON_GetArraySize(gpus) > MAX_GPUS) {
        fprintf(stderr, "nvml_sim: %s has more than %d GPUs\n", path, MAX_GPUS);
        cJSON_Delete(state);
        return NVML_ERROR_UNKNOWN;
    }
    /* The previous state is freed only now, not at nvmlShutdown: a thread still inside a
     * call when another shuts down reads valid (if stale) memory, never freed memory. */
    cJSON_Delete(g_state);
    g_state = state;
    g_count = 0;
    const cJSON *gpu;
    cJSON_ArrayForEach(gpu, gpus)
    {
        if (!cJSON_IsTrue(at(gpu, "missing")))
            g_gpus[g_count++].json = gpu;
    }
    g_t0 = monotonic_s();
    return NVML_SUCCESS;
}

/* The error the state injects into `function` (state-wide or on this GPU), if any. */
static nvmlReturn_t injected(const cJSON *gpu, const char *function)
{
    const cJSON *error = at(at(gpu, "errors"), function);
    if (!error)
        error = at(at(g_state, "errors"), function);
    return error ? return_code(error) : NVML_SUCCESS;
}

static int initialised(void)
{
    pthread_mutex_lock(&g_lock);
    int ok = g_refcount > 0;
    pthread_mutex_unlock(&g_lock);
    return ok;
}

static nvmlReturn_t enter_system(const char *function)
{
    if (!initialised())
        return NVML_ERROR_UNINITIALIZED;
    return injected(NULL, function);
}

static int is_lost(const cJSON *gpu)
{
    double lost = 0.0;
    return evaluate(at(gpu, "lost"), now(), &lost) && lost != 0.0;
}

static nvmlReturn_t enter_device(const char *function, nvmlDevice_t device, const cJSON **gpu)
{
    if (!initialised())
        return NVML_ERROR_UNINITIALIZED;
    if (!device || device < g_gpus || device >= g_gpus + g_count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *gpu = device->json;
    if (is_lost(*gpu))
        return NVML_ERROR_GPU_IS_LOST;
    return injected(*gpu, function);
}

/* The first lines of every entry point. __func__ is the exported symbol's name, which is
 * also how the state names a function whose answer it overrides. */
#define ENTER_SYSTEM()                                                                         \
    do {                                                                                       \
        nvmlReturn_t entered_ = enter_system(__func__);                                        \
        if (entered_ != NVML_SUCCESS)                                                          \
            return entered_;                                                                   \
    } while (0)

#define ENTER_DEVICE(device, gpu)                                                              \
    const cJSON *gpu = NULL;                                                                   \
    do {                                                                                       \
        nvmlReturn_t entered_ = enter_device(__func__, device, &gpu);                          \
        if (entered_ != NVML_SUCCESS)                                                          \
            return entered_;                                                                   \
    } while (0)

/* ------------------------------------------------------------------------------------------
 * Initialisation
 * ---------------------------------------------------------------------------------------- */

nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags; /* NVML_INIT_FLAG_NO_GPUS and friends: a state with no GPUs already works */
    nvmlReturn_t r = NVML_SUCCESS;
    pthread_mutex_lock(&g_lock);
    if (g_refcount == 0)
        r = load_state();
    if (r == NVML_SUCCESS)
        r = injected(NULL, __func__); /* a node whose driver will not initialise */
    if (r == NVML_SUCCESS)
        g_refcount++;
    pthread_mutex_unlock(&g_lock);
    return r;
}

nvmlReturn_t nvmlInit_v2(void)
{
    return nvmlInitWithFlags(0);
}

/* Not an NVML function: the simulator says what it is to the process that loaded it. The
 * gpu and telemetry probes look this symbol up in the library pynvml loaded and mark their
 * records "simulated GPUs" (bringup/node/simulated.py): a run on this library can never be
 * ACCEPTED as a measurement of real GPUs, whatever the node's environment says. */
int bringupNvmlSimulated(void)
{
    return 1;
}

nvmlReturn_t nvmlShutdown(void)
{
    nvmlReturn_t r = NVML_SUCCESS;
    pthread_mutex_lock(&g_lock);
    if (g_refcount == 0)
        r = NVML_ERROR_UNINITIALIZED;
    else
        g_refcount--;
    pthread_mutex_unlock(&g_lock);
    return r;
}

/* ------------------------------------------------------------------------------------------
 * System
 * ---------------------------------------------------------------------------------------- */

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    ENTER_SYSTEM();
    return text(at(g_state, "driver_version"), version, length);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
    ENTER_SYSTEM();
    return int_value(at(g_state, "cuda_driver_version"), cudaDriverVersion);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
    ENTER_SYSTEM();
    return int_value(at(g_state, "cuda_driver_version"), cudaDriverVersion);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    ENTER_SYSTEM();
    if (!deviceCount)
        return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = g_count;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (!initialised())
        return NVML_ERROR_UNINITIALIZED;
    if (index >= g_count || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    const cJSON *gpu = g_gpus[index].json;
    if (is_lost(gpu))
        return NVML_ERROR_GPU_IS_LOST;
    nvmlReturn_t r = injected(gpu, __func__);
    if (r == NVML_SUCCESS)
        *device = &g_gpus[index];
    return r;
}

/* ------------------------------------------------------------------------------------------
 * Identity
 * ---------------------------------------------------------------------------------------- */

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    ENTER_DEVICE(device, gpu);
    return text(at(gpu, "name"), name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    ENTER_DEVICE(device, gpu);
    return text(at(gpu, "uuid"), uuid, length);
}

nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length)
{
    ENTER_DEVICE(device, gpu);
    return text(at(gpu, "serial"), serial, length);
}

nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char *version, unsigned int length)
{
    ENTER_DEVICE(device, gpu);
    return text(at(gpu, "vbios_version"), version, length);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    ENTER_DEVICE(device, gpu);
    const cJSON *info = at(gpu, "pci");
    const cJSON *bus_id = at(info, "bus_id");
    unsigned int domain, bus, slot, function;
    if (!pci)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!cJSON_IsString(bus_id) ||
        sscanf(bus_id->valuestring, "%x:%x:%x.%x", &domain, &bus, &slot, &function) != 4)
        return NVML_ERROR_NOT_SUPPORTED;
    memset(pci, 0, sizeof *pci);
    pci->domain = domain;
    pci->bus = bus;
    pci->device = slot;
    /* Both forms as NVML prints them: 8-digit domain, and the legacy 4-digit one. */
    snprintf(pci->busId, sizeof pci->busId, NVML_DEVICE_PCI_BUS_ID_FMT, domain, bus, slot);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT,
             domain, bus, slot);
    uint_value(at(info, "device_id"), &pci->pciDeviceId);
    uint_value(at(info, "subsystem_id"), &pci->pciSubSystemId);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
    ENTER_DEVICE(device, gpu);
    const cJSON *cc = at(gpu, "compute_capability");
    if (!major || !minor)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!cJSON_IsArray(cc))
        return NVML_ERROR_NOT_SUPPORTED;
    nvmlReturn_t r = int_value(cJSON_GetArrayItem(cc, 0), major);
    return r == NVML_SUCCESS ? int_value(cJSON_GetArrayItem(cc, 1), minor) : r;
}

/* ------------------------------------------------------------------------------------------
 * Memory, modes, ECC, row remapping
 * ---------------------------------------------------------------------------------------- */

/* total, reserved and used now, in bytes (reserved and used default to 0). */
static nvmlReturn_t memory(const cJSON *gpu, unsigned long long *total,
                           unsigned long long *reserved, unsigned long long *used)
{
    const cJSON *m = at(gpu, "memory");
    nvmlReturn_t r = ull_value(at(m, "total"), total);
    if (r != NVML_SUCCESS)
        return r;
    if (ull_value(at(m, "reserved"), reserved) != NVML_SUCCESS)
        *reserved = 0;
    if (ull_value(at(m, "used"), used) != NVML_SUCCESS)
        *used = 0;
    if (*reserved > *total)
        *reserved = *total;
    if (*used > *total - *reserved)
        *used = *total - *reserved;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *info)
{
    ENTER_DEVICE(device, gpu);
    unsigned long long total, reserved, used;
    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t r = memory(gpu, &total, &reserved, &used);
    if (r != NVML_SUCCESS)
        return r;
    /* The v1 struct has no "reserved": the driver counts it as used. */
    info->total = total;
    info->used = reserved + used;
    info->free = total - reserved - used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *info)
{
    ENTER_DEVICE(device, gpu);
    unsigned long long total, reserved, used;
    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (info->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    nvmlReturn_t r = memory(gpu, &total, &reserved, &used);
    if (r != NVML_SUCCESS)
        return r;
    info->total = total;
    info->reserved = reserved;
    info->used = used;
    info->free = total - reserved - used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode)
{
    ENTER_DEVICE(device, gpu);
    unsigned int v;
    if (!mode)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t r = uint_value(at(gpu, "persistence_mode"), &v);
    if (r == NVML_SUCCESS)
        *mode = v ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return r;
}

/* {"current": x, "pending": y} as two out-parameters. */
static nvmlReturn_t current_pending(const cJSON *pair, unsigned int *current,
                                    unsigned int *pending)
{
    if (!current || !pending)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t r = uint_value(at(pair, "current"), current);
    if (r != NVML_SUCCESS)
        return r;
    if (uint_value(at(pair, "pending"), pending) != NVML_SUCCESS)
        *pending = *current; /* nothing pending: the next boot keeps the current mode */
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                  unsigned int *pendingMode)
{
    ENTER_DEVICE(device, gpu);
    return current_pending(at(gpu, "mig_mode"), currentMode, pendingMode);
}

nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *current,
                                  nvmlEnableState_t *pending)
{
    ENTER_DEVICE(device, gpu);
    unsigned int c, p;
    if (!current || !pending)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t r = current_pending(at(gpu, "ecc_mode"), &c, &p);
    if (r == NVML_SUCCESS) {
        *current = c ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
        *pending = p ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    }
    return r;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                         nvmlEccCounterType_t counterType,
                                         unsigned long long *eccCounts)
{
    ENTER_DEVICE(device, gpu);
    const char *type = name_of(ECC_TYPES, N(ECC_TYPES), (int)errorType);
    const char *counter = name_of(ECC_COUNTERS, N(ECC_COUNTERS), (int)counterType);
    if (!type || !counter)
        return NVML_ERROR_INVALID_ARGUMENT;
    return ull_value(at(at(at(gpu, "ecc_errors"), type), counter), eccCounts);
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows,
                                       unsigned int *uncRows, unsigned int *isPending,
                                       unsigned int *failureOccurred)
{
    ENTER_DEVICE(device, gpu);
    const cJSON *rows = at(gpu, "remapped_rows");
    if (!corrRows || !uncRows || !isPending || !failureOccurred)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!cJSON_IsObject(rows))
        return NVML_ERROR_NOT_SUPPORTED;
    nvmlReturn_t r = uint_value(at(rows, "correctable"), corrRows);
    if (r == NVML_SUCCESS)
        r = uint_value(at(rows, "uncorrectable"), uncRows);
    if (r == NVML_SUCCESS)
        r = uint_value(at(rows, "pending"), isPending);
    if (r == NVML_SUCCESS)
        r = uint_value(at(rows, "failure"), failureOccurred);
    return r;
}

/* ------------------------------------------------------------------------------------------
 * PCIe
 * ---------------------------------------------------------------------------------------- */

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int *currLinkGen)
{
    ENTER_DEVICE(device, gpu);
    return uint_value(at(at(gpu, "pcie"), "gen_current"), currLinkGen);
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int *currLinkWidth)
{
    ENTER_DEVICE(device, gpu);
    return uint_value(at(at(gpu, "pcie"), "width_current"), currLinkWidth);
}

nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int *maxLinkGen)
{
    ENTER_DEVICE(device, gpu);
    return uint_value(at(at(gpu, "pcie"), "gen_max"), maxLinkGen);
}

nvmlReturn_t nvmlDeviceGetGpuMaxPcieLinkGeneration(nvmlDevice_t device,
                                                   unsigned int *maxLinkGenDevice)
{
    ENTER_DEVICE(device, gpu);
    return uint_value(at(at(gpu, "pcie"), "gpu_gen_max"), maxLinkGenDevice);
}

nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int *maxLinkWidth)
{
    ENTER_DEVICE(device, gpu);
    return uint_value(at(at(gpu, "pcie"), "width_max"), maxLinkWidth);
}

/* ------------------------------------------------------------------------------------------
 * Power
 * ---------------------------------------------------------------------------------------- */

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
    ENTER_DEVICE(device, gpu);
    return uint_value(at(at(gpu, "power"), "usage_mw"), power);
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit)
{
    ENTER_DEVICE(device, gpu);
    return uint_value(at(at(gpu, "power"), "enforced_limit_mw"), limit);
}

nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device,
                                                      unsigned int *defaultLimit)
{
    ENTER_DEVICE(device, gpu);
    return uint_value(at(at(gpu, "power"), "default_limit_mw"), defaultLimit);
}

/* ------------------------------------------------------------------------------------------
 * Temperatures (the simulated GPU has one sensor, NVML_TEMPERATURE_GPU, as real ones do)
 * ---------------------------------------------------------------------------------------- */

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                      unsigned int *temp)
{
    ENTER_DEVICE(device, gpu);
    if (sensorType != NVML_TEMPERATURE_GPU)
        return NVML_ERROR_INVALID_ARGUMENT;
    return uint_value(at(at(gpu, "temperature"), "gpu"), temp);
}

nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_t *temperature)
{
    ENTER_DEVICE(device, gpu);
    if (!temperature)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (temperature->version != nvmlTemperature_v1)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (temperature->sensorType != NVML_TEMPERATURE_GPU)
        return NVML_ERROR_INVALID_ARGUMENT;
    return int_value(at(at(gpu, "temperature"), "gpu"), &temperature->temperature);
}

nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device,
                                               nvmlTemperatureThresholds_t thresholdType,
                                               unsigned int *temp)
{
    ENTER_DEVICE(device, gpu);
    const char *name = name_of(THRESHOLDS, N(THRESHOLDS), (int)thresholdType);
    if (!name)
        return NVML_ERROR_INVALID_ARGUMENT;
    return uint_value(at(at(at(gpu, "temperature"), "thresholds"), name), temp);
}

nvmlReturn_t nvmlDeviceGetMarginTemperature(nvmlDevice_t device,
                                            nvmlMarginTemperature_t *marginTempInfo)
{
    ENTER_DEVICE(device, gpu);
    if (!marginTempInfo)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (marginTempInfo->version != nvmlMarginTemperature_v1)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    return int_value(at(at(gpu, "temperature"), "margin"), &marginTempInfo->marginTemperature);
}

/* ------------------------------------------------------------------------------------------
 * Clocks, clocks event reasons, utilisation
 * ---------------------------------------------------------------------------------------- */

static nvmlReturn_t clock_of(const cJSON *clocks, nvmlClockType_t type, unsigned int *mhz)
{
    const char *name = name_of(CLOCKS, N(CLOCKS), (int)type);
    if (!name)
        return NVML_ERROR_INVALID_ARGUMENT;
    return uint_value(at(clocks, name), mhz);
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                    unsigned int *clock_mhz)
{
    ENTER_DEVICE(device, gpu);
    return clock_of(at(gpu, "clocks"), type, clock_mhz);
}

nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                       unsigned int *clock_mhz)
{
    ENTER_DEVICE(device, gpu);
    return clock_of(at(gpu, "max_clocks"), type, clock_mhz);
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long *clocksEventReasons)
{
    ENTER_DEVICE(device, gpu);
    return ull_value(at(gpu, "clocks_event_reasons"), clocksEventReasons);
}

/* The name before drivers r535 renamed it; the same mask. */
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long *clocksThrottleReasons)
{
    ENTER_DEVICE(device, gpu);
    return ull_value(at(gpu, "clocks_event_reasons"), clocksThrottleReasons);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
    ENTER_DEVICE(device, gpu);
    const cJSON *u = at(gpu, "utilization");
    if (!utilization)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t r = uint_value(at(u, "gpu"), &utilization->gpu);
    return r == NVML_SUCCESS ? uint_value(at(u, "memory"), &utilization->memory) : r;
}

/* ------------------------------------------------------------------------------------------
 * NVLink and the NVLink fabric
 * ---------------------------------------------------------------------------------------- */

/* The state of one link, or NULL: a link past the GPU's last is an invalid argument. */
static const cJSON *nvlink(const cJSON *gpu, unsigned int link)
{
    return cJSON_GetArrayItem(at(gpu, "nvlinks"), (int)link);
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t *isActive)
{
    ENTER_DEVICE(device, gpu);
    unsigned int active;
    if (!isActive)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!cJSON_IsArray(at(gpu, "nvlinks")))
        return NVML_ERROR_NOT_SUPPORTED; /* no NVLink at all */
    const cJSON *l = nvlink(gpu, link);
    if (!l)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t r = uint_value(at(l, "active"), &active);
    if (r == NVML_SUCCESS)
        *isActive = active ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return r;
}

nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t device, unsigned int link,
                                        unsigned int *version)
{
    ENTER_DEVICE(device, gpu);
    if (!cJSON_IsArray(at(gpu, "nvlinks")))
        return NVML_ERROR_NOT_SUPPORTED;
    const cJSON *l = nvlink(gpu, link);
    if (!l)
        return NVML_ERROR_INVALID_ARGUMENT;
    return uint_value(at(l, "version"), version); /* nvmlNvlinkVersion_t: 7 = NVLink 5.0 */
}

/* The fields shared by every version of the fabric info struct. */
struct fabric {
    unsigned char cluster_uuid[NVML_GPU_FABRIC_UUID_LEN];
    nvmlReturn_t status;
    unsigned int clique_id;
    nvmlGpuFabricState_t state;
    unsigned int health_mask;
    unsigned int health_summary;
};

static nvmlReturn_t fabric_of(const cJSON *gpu, struct fabric *out)
{
    const cJSON *f = at(gpu, "fabric");
    if (!cJSON_IsObject(f))
        return NVML_ERROR_NOT_SUPPORTED;
    memset(out, 0, sizeof *out);
    const cJSON *state = at(f, "state");
    out->state = (nvmlGpuFabricState_t)value_of(
        FABRIC_STATES, N(FABRIC_STATES), cJSON_IsString(state) ? state->valuestring : NULL,
        NVML_GPU_FABRIC_STATE_NOT_SUPPORTED);
    out->status = at(f, "status") ? return_code(at(f, "status")) : NVML_SUCCESS;
    uint_value(at(f, "clique_id"), &out->clique_id);
    uint_value(at(f, "health_mask"), &out->health_mask);
    uint_value(at(f, "health_summary"), &out->health_summary);
    /* cluster_uuid: 32 hex digits, dashes allowed, as nvidia-smi prints it */
    const cJSON *uuid = at(f, "cluster_uuid");
    if (cJSON_IsString(uuid)) {
        const char *s = uuid->valuestring;
        for (int i = 0; i < NVML_GPU_FABRIC_UUID_LEN && *s;) {
            unsigned int byte;
            if (*s == '-') {
                s++;
                continue;
            }
            if (sscanf(s, "%2x", &byte) != 1)
                break;
            out->cluster_uuid[i++] = (unsigned char)byte;
            s += s[1] ? 2 : 1;
        }
    }
    return NVML_SUCCESS;
}

/* Deprecated in CUDA 13.0 but still exported, and what the gpu probe calls. */
nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device, nvmlGpuFabricInfo_t *gpuFabricInfo)
{
    ENTER_DEVICE(device, gpu);
    struct fabric f;
    if (!gpuFabricInfo)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t r = fabric_of(gpu, &f);
    if (r != NVML_SUCCESS)
        return r;
    memset(gpuFabricInfo, 0, sizeof *gpuFabricInfo);
    memcpy(gpuFabricInfo->clusterUuid, f.cluster_uuid, sizeof f.cluster_uuid);
    gpuFabricInfo->status = f.status;
    gpuFabricInfo->cliqueId = f.clique_id;
    gpuFabricInfo->state = f.state;
    return NVML_SUCCESS;
}

/* The versioned call: the caller sets .version (pynvml's c_nvmlGpuFabricInfo_v2_t sets
 * nvmlGpuFabricInfo_v2); v3, which adds healthSummary, exists from the CUDA 13.0 header. */
nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfoV_t *gpuFabricInfo)
{
    ENTER_DEVICE(device, gpu);
    struct fabric f;
    if (!gpuFabricInfo)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int version = gpuFabricInfo->version;
    if (version == nvmlGpuFabricInfo_v2) {
        nvmlReturn_t r = fabric_of(gpu, &f);
        if (r != NVML_SUCCESS)
            return r;
        nvmlGpuFabricInfo_v2_t *v2 = (nvmlGpuFabricInfo_v2_t *)gpuFabricInfo;
        memset(v2, 0, sizeof *v2);
        v2->version = version;
        memcpy(v2->clusterUuid, f.cluster_uuid, sizeof f.cluster_uuid);
        v2->status = f.status;
        v2->cliqueId = f.clique_id;
        v2->state = f.state;
        v2->healthMask = f.health_mask;
        return NVML_SUCCESS;
    }
#ifdef nvmlGpuFabricInfo_v3
    if (version == nvmlGpuFabricInfo_v3) {
        nvmlReturn_t r = fabric_of(gpu, &f);
        if (r != NVML_SUCCESS)
            return r;
        nvmlGpuFabricInfo_v3_t *v3 = (nvmlGpuFabricInfo_v3_t *)gpuFabricInfo;
        memset(v3, 0, sizeof *v3);
        v3->version = version;
        memcpy(v3->clusterUuid, f.cluster_uuid, sizeof f.cluster_uuid);
        v3->status = f.status;
        v3->cliqueId = f.clique_id;
        v3->state = f.state;
        v3->healthMask = f.health_mask;
        v3->healthSummary = (unsigned char)f.health_summary;
        return NVML_SUCCESS;
    }
#endif
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
}

/* ------------------------------------------------------------------------------------------
 * Field values: served by numeric id from the GPU's "fields", keyed "ID" or "ID:SCOPE"
 * (scope = the NVLink for per-link fields). An id the driver branch does not define
 * (outside the state's "field_ids" ranges) is answered NOT_SUPPORTED whatever the GPU has,
 * as the real driver of that branch answers it.
 * ---------------------------------------------------------------------------------------- */

static int branch_has_field(unsigned int id)
{
    const cJSON *range;
    cJSON_ArrayForEach(range, at(g_state, "field_ids"))
    {
        const cJSON *lo = cJSON_GetArrayItem(range, 0), *hi = cJSON_GetArrayItem(range, 1);
        if (cJSON_IsNumber(lo) && cJSON_IsNumber(hi) && id >= (unsigned int)lo->valuedouble &&
            id <= (unsigned int)hi->valuedouble)
            return 1;
    }
    return 0;
}

static void field_value(const cJSON *gpu, nvmlFieldValue_t *fv, double t)
{
    char key[32];
    const cJSON *fields = at(gpu, "fields");
    double v;

    fv->latencyUsec = 0;
    fv->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    if (!branch_has_field(fv->fieldId))
        return;
    snprintf(key, sizeof key, "%u:%u", fv->fieldId, fv->scopeId);
    const cJSON *field = at(fields, key);
    if (!field) {
        snprintf(key, sizeof key, "%u", fv->fieldId);
        field = at(fields, key);
    }
    const cJSON *type = at(field, "type");
    if (!field || !cJSON_IsString(type) || !evaluate(at(field, "value"), t, &v))
        return;
    fv->valueType = (nvmlValueType_t)value_of(VALUE_TYPES, N(VALUE_TYPES), type->valuestring,
                                              NVML_VALUE_TYPE_DOUBLE);
    switch (fv->valueType) {
    case NVML_VALUE_TYPE_UNSIGNED_INT:
        fv->value.uiVal = v <= 0 ? 0u : (unsigned int)(v + 0.5);
        break;
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
        fv->value.ulVal = v <= 0 ? 0ul : (unsigned long)(v + 0.5);
        break;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
        fv->value.ullVal = v <= 0 ? 0ull : (unsigned long long)(v + 0.5);
        break;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
        fv->value.sllVal = (long long)(v < 0 ? v - 0.5 : v + 0.5);
        break;
    case NVML_VALUE_TYPE_SIGNED_INT:
        fv->value.siVal = (int)(v < 0 ? v - 0.5 : v + 0.5);
        break;
    case NVML_VALUE_TYPE_UNSIGNED_SHORT:
        fv->value.usVal = v <= 0 ? 0 : (unsigned short)(v + 0.5);
        break;
    default:
        fv->value.dVal = v;
    }
    fv->nvmlReturn = NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
                                      nvmlFieldValue_t *values)
{
    ENTER_DEVICE(device, gpu);
    struct timespec wall;
    if (!values || valuesCount < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    clock_gettime(CLOCK_REALTIME, &wall);
    long long stamp = (long long)wall.tv_sec * 1000000 + wall.tv_nsec / 1000;
    double t = now(); /* one instant for the whole batch, as the driver samples them */
    for (int i = 0; i < valuesCount; i++) {
        values[i].timestamp = stamp;
        field_value(gpu, &values[i], t);
    }
    return NVML_SUCCESS;
}
