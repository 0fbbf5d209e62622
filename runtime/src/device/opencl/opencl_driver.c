// The driver: loading the OpenCL ICD loader and its entry points, choosing the platform and
// device, and creating the context and the one in-order queue every command goes to; the state
// every file of the back end shares, and the queue's order bookkeeping. On first use
// (opencl_device.c, under tally_ocl_lock) it opens $TALLY_OPENCL_LIBRARY if set (tests point it
// elsewhere), else libOpenCL.so.1, else libOpenCL.so, and resolves the entry points with dlsym
// (libOpenCL is never linked). The platform is the first whose name contains
// $HL_OCL_PLATFORM_NAME (any, when unset) and has a device of the types $HL_OCL_DEVICE_TYPE names
// ("cpu", "gpu", "acc", any combination; all when unset or naming none); the device is number
// $HL_GPU_DEVICE (default 0) among that platform's devices of those types. A failure leaves
// OpenCL unusable with a reason ("libOpenCL.so.1 not found: ...", "no OpenCL platform", "no
// OpenCL device of type gpu on platform '...'", ...) for the caller to report.
//
// The order bookkeeping (opencl_internal.h) is two counters: commands whose enqueue returned, and
// how many of those a blocking operation has seen completed. In an in-order queue a command
// completes after every command enqueued before it, so a blocking operation that took its mark
// before enqueueing has seen all commands counted before the mark complete.

#include "device/opencl/opencl_internal.h"

#if TALLY_HAVE_OPENCL_HEADERS

#include "core/env.h"
#include "core/error.h"
#include "tally_runtime.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

pthread_mutex_t tally_ocl_lock = PTHREAD_MUTEX_INITIALIZER;
_Atomic int32_t tally_ocl_ready;
_Atomic int32_t tally_ocl_shut_down;
opencl_api tally_cl;
tally_opencl_state tally_ocl;

static _Atomic uint64_t commands_enqueued;
static _Atomic uint64_t commands_seen_complete;

#define TALLY_OCL_MAX_PLATFORMS 16

// ---- errors ----------------------------------------------------------------------------------

const char *tally_ocl_error_name(cl_int err) {
    switch (err) {
#define TALLY_OCL_ERROR(name)                                                                      \
    case name:                                                                                     \
        return #name;
        TALLY_OCL_ERROR(CL_SUCCESS)
        TALLY_OCL_ERROR(CL_DEVICE_NOT_FOUND)
        TALLY_OCL_ERROR(CL_DEVICE_NOT_AVAILABLE)
        TALLY_OCL_ERROR(CL_COMPILER_NOT_AVAILABLE)
        TALLY_OCL_ERROR(CL_MEM_OBJECT_ALLOCATION_FAILURE)
        TALLY_OCL_ERROR(CL_OUT_OF_RESOURCES)
        TALLY_OCL_ERROR(CL_OUT_OF_HOST_MEMORY)
        TALLY_OCL_ERROR(CL_PROFILING_INFO_NOT_AVAILABLE)
        TALLY_OCL_ERROR(CL_BUILD_PROGRAM_FAILURE)
        TALLY_OCL_ERROR(CL_MISALIGNED_SUB_BUFFER_OFFSET)
        TALLY_OCL_ERROR(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
        TALLY_OCL_ERROR(CL_INVALID_VALUE)
        TALLY_OCL_ERROR(CL_INVALID_DEVICE_TYPE)
        TALLY_OCL_ERROR(CL_INVALID_PLATFORM)
        TALLY_OCL_ERROR(CL_INVALID_DEVICE)
        TALLY_OCL_ERROR(CL_INVALID_CONTEXT)
        TALLY_OCL_ERROR(CL_INVALID_QUEUE_PROPERTIES)
        TALLY_OCL_ERROR(CL_INVALID_COMMAND_QUEUE)
        TALLY_OCL_ERROR(CL_INVALID_MEM_OBJECT)
        TALLY_OCL_ERROR(CL_INVALID_BUFFER_SIZE)
        TALLY_OCL_ERROR(CL_INVALID_BINARY)
        TALLY_OCL_ERROR(CL_INVALID_BUILD_OPTIONS)
        TALLY_OCL_ERROR(CL_INVALID_PROGRAM)
        TALLY_OCL_ERROR(CL_INVALID_PROGRAM_EXECUTABLE)
        TALLY_OCL_ERROR(CL_INVALID_KERNEL_NAME)
        TALLY_OCL_ERROR(CL_INVALID_KERNEL_DEFINITION)
        TALLY_OCL_ERROR(CL_INVALID_KERNEL)
        TALLY_OCL_ERROR(CL_INVALID_ARG_INDEX)
        TALLY_OCL_ERROR(CL_INVALID_ARG_VALUE)
        TALLY_OCL_ERROR(CL_INVALID_ARG_SIZE)
        TALLY_OCL_ERROR(CL_INVALID_KERNEL_ARGS)
        TALLY_OCL_ERROR(CL_INVALID_WORK_DIMENSION)
        TALLY_OCL_ERROR(CL_INVALID_WORK_GROUP_SIZE)
        TALLY_OCL_ERROR(CL_INVALID_WORK_ITEM_SIZE)
        TALLY_OCL_ERROR(CL_INVALID_GLOBAL_OFFSET)
        TALLY_OCL_ERROR(CL_INVALID_EVENT_WAIT_LIST)
        TALLY_OCL_ERROR(CL_INVALID_EVENT)
        TALLY_OCL_ERROR(CL_INVALID_OPERATION)
        TALLY_OCL_ERROR(CL_INVALID_GLOBAL_WORK_SIZE)
#undef TALLY_OCL_ERROR
    case -1001:
        return "CL_PLATFORM_NOT_FOUND_KHR";
    default:
        return "an OpenCL error";
    }
}

int32_t tally_ocl_fail(void *user_context, int32_t code, const char *routine, const char *what,
                       cl_int err) {
    return tally_report_error(user_context, code, "%s: %s failed: %s (%d)", routine, what,
                              tally_ocl_error_name(err), (int)err);
}

static void set_reason(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_reason(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tally_ocl.reason, sizeof tally_ocl.reason, fmt, ap);
    va_end(ap);
}

// ---- the library -----------------------------------------------------------------------------

static int open_library_locked(void) {
    if (tally_ocl.lib) {
        return 1;
    }
    const char *override = tally_env_string("TALLY_OPENCL_LIBRARY");
    const char *candidates[2] = {"libOpenCL.so.1", "libOpenCL.so"};
    int n = 2;
    if (override) {
        candidates[0] = override;
        n = 1;
    }
    char first_error[256] = "";
    for (int i = 0; i < n && !tally_ocl.lib; i++) {
        tally_ocl.lib = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
        if (tally_ocl.lib) {
            snprintf(tally_ocl.lib_name, sizeof tally_ocl.lib_name, "%s", candidates[i]);
        } else if (i == 0) {
            const char *e = dlerror();
            snprintf(first_error, sizeof first_error, "%s", e ? e : "dlopen failed");
        }
    }
    if (!tally_ocl.lib) {
        set_reason("%s not found: %s (is an OpenCL ICD loader installed, with a driver such as "
                   "PoCL?)",
                   candidates[0], first_error);
        return 0;
    }
    // dlsym returns object pointers; POSIX guarantees they convert to function pointers.
#define TALLY_OCL_RESOLVE(name)                                                                    \
    {                                                                                              \
        void *symbol = dlsym(tally_ocl.lib, #name);                                                \
        if (!symbol) {                                                                             \
            set_reason("%s has no %s (an OpenCL 1.2 ICD loader is needed)", tally_ocl.lib_name,    \
                       #name);                                                                     \
            dlclose(tally_ocl.lib);                                                                \
            tally_ocl.lib = NULL;                                                                  \
            memset(&tally_cl, 0, sizeof tally_cl);                                                 \
            return 0;                                                                              \
        }                                                                                          \
        memcpy(&tally_cl.name, &symbol, sizeof symbol);                                            \
    }
    TALLY_OCL_FUNCS(TALLY_OCL_RESOLVE)
#undef TALLY_OCL_RESOLVE
    void *timer = dlsym(tally_ocl.lib, "clGetDeviceAndHostTimer");
    memcpy(&tally_cl.clGetDeviceAndHostTimer, &timer, sizeof timer);
    return 1;
}

// ---- the platform and the device -------------------------------------------------------------

// The device types HL_OCL_DEVICE_TYPE names, and their names for messages ("gpu", "cpu or gpu";
// "" for all). Its value is a list of cpu, gpu and acc, separated by ',', '|' or spaces, as
// Halide's runtime takes it; any other word makes it all types (said by the environment rule).
static cl_device_type device_types(char *label, size_t size) {
    static const struct {
        const char *word;
        cl_device_type type;
    } words[] = {{"cpu", CL_DEVICE_TYPE_CPU},
                 {"gpu", CL_DEVICE_TYPE_GPU},
                 {"acc", CL_DEVICE_TYPE_ACCELERATOR}};
    const char *s = tally_env_string("HL_OCL_DEVICE_TYPE");
    cl_device_type types = 0;
    label[0] = '\0';
    for (const char *p = s; p && *p;) {
        const size_t sep = strspn(p, ",| "), len = strcspn(p + sep, ",| ");
        p += sep;
        if (len == 0) {
            break;
        }
        size_t i = 0;
        while (i < sizeof words / sizeof words[0] &&
               !(strlen(words[i].word) == len && strncmp(p, words[i].word, len) == 0)) {
            i++;
        }
        if (i == sizeof words / sizeof words[0]) {
            tally_env_reject("HL_OCL_DEVICE_TYPE", s, "cpu, gpu or acc, or a list of them",
                             "every device type");
            label[0] = '\0';
            return CL_DEVICE_TYPE_ALL;
        }
        if (!(types & words[i].type)) {
            size_t used = strlen(label);
            snprintf(label + used, size - used, "%s%s", types ? " or " : "", words[i].word);
            types |= words[i].type;
        }
        p += len;
    }
    return types ? types : CL_DEVICE_TYPE_ALL;
}

// The device HL_GPU_DEVICE names, 0 when unset, or -1 when the value is not a device index
// (said by the environment rule).
static int device_index(void) {
    return (int)tally_env_int("HL_GPU_DEVICE", 0, INT_MAX,
                              tally_env_string("HL_GPU_DEVICE") ? -1 : 0,
                              "no OpenCL device: OpenCL is not available");
}

static void platform_name(cl_platform_id p, char *out, size_t size) {
    out[0] = '\0';
    if (tally_cl.clGetPlatformInfo(p, CL_PLATFORM_NAME, size, out, NULL) != CL_SUCCESS) {
        snprintf(out, size, "(unnamed)");
    }
    out[size - 1] = '\0';
}

// "'A', 'B'" for the platforms [0, n).
static void list_platforms(char names[][128], cl_uint n, char *out, size_t size) {
    out[0] = '\0';
    for (cl_uint i = 0; i < n; i++) {
        size_t used = strlen(out);
        snprintf(out + used, size - used, "%s'%s'", i ? ", " : "", names[i]);
    }
}

// Chooses tally_ocl.platform and tally_ocl.device; 0 with the reason set when it cannot.
static int choose_device_locked(void) {
    int index = device_index();
    if (index < 0) {
        set_reason("HL_GPU_DEVICE=%s is not a device index", tally_env_string("HL_GPU_DEVICE"));
        return 0;
    }
    cl_platform_id platforms[TALLY_OCL_MAX_PLATFORMS];
    cl_uint num_platforms = 0;
    cl_int err = tally_cl.clGetPlatformIDs(TALLY_OCL_MAX_PLATFORMS, platforms, &num_platforms);
    if (err != CL_SUCCESS || num_platforms == 0) {
        set_reason("no OpenCL platform (clGetPlatformIDs: %s (%d)); is an OpenCL driver such as "
                   "PoCL installed?",
                   tally_ocl_error_name(err), (int)err);
        return 0;
    }
    if (num_platforms > TALLY_OCL_MAX_PLATFORMS) {
        num_platforms = TALLY_OCL_MAX_PLATFORMS;
    }
    char names[TALLY_OCL_MAX_PLATFORMS][128];
    char all[1024];
    for (cl_uint i = 0; i < num_platforms; i++) {
        platform_name(platforms[i], names[i], sizeof names[i]);
    }
    // The platforms whose name matches, in the order the loader lists them.
    const char *wanted_name = tally_env_string("HL_OCL_PLATFORM_NAME");
    cl_platform_id matching[TALLY_OCL_MAX_PLATFORMS];
    char matching_names[TALLY_OCL_MAX_PLATFORMS][128];
    cl_uint num_matching = 0;
    for (cl_uint i = 0; i < num_platforms; i++) {
        if (!wanted_name || strstr(names[i], wanted_name)) {
            matching[num_matching] = platforms[i];
            memcpy(matching_names[num_matching], names[i], sizeof names[i]);
            num_matching++;
        }
    }
    if (num_matching == 0) {
        list_platforms(names, num_platforms, all, sizeof all);
        set_reason("no OpenCL platform whose name contains '%s' (HL_OCL_PLATFORM_NAME; the "
                   "platforms are %s)",
                   wanted_name, all);
        return 0;
    }
    char type_label[64];
    cl_device_type types = device_types(type_label, sizeof type_label);
    for (cl_uint i = 0; i < num_matching; i++) {
        cl_uint count = 0;
        err = tally_cl.clGetDeviceIDs(matching[i], types, 0, NULL, &count);
        if (err != CL_SUCCESS || count == 0) {
            continue;
        }
        if ((cl_uint)index >= count) {
            set_reason("no OpenCL device %d%s%s on platform '%s' (HL_GPU_DEVICE; %u present)",
                       index, type_label[0] ? " of type " : "", type_label, matching_names[i],
                       (unsigned)count);
            return 0;
        }
        cl_device_id devices[64];
        cl_uint take = count < 64 ? count : 64;
        if ((cl_uint)index >= take) {
            set_reason("no OpenCL device %d on platform '%s' (HL_GPU_DEVICE; only the first %u "
                       "are considered)",
                       index, matching_names[i], (unsigned)take);
            return 0;
        }
        err = tally_cl.clGetDeviceIDs(matching[i], types, take, devices, NULL);
        if (err != CL_SUCCESS) {
            set_reason("clGetDeviceIDs on platform '%s' failed: %s (%d)", matching_names[i],
                       tally_ocl_error_name(err), (int)err);
            return 0;
        }
        tally_ocl.platform = matching[i];
        tally_ocl.device = devices[index];
        memcpy(tally_ocl.platform_name, matching_names[i], sizeof tally_ocl.platform_name);
        return 1;
    }
    list_platforms(matching_names, num_matching, all, sizeof all);
    set_reason("no OpenCL device%s%s on platform%s %s", type_label[0] ? " of type " : "",
               type_label, num_matching > 1 ? "s" : "", all);
    return 0;
}

// The device's name and the limits launches are checked against.
static int read_device_info_locked(void) {
    cl_device_id d = tally_ocl.device;
    char name[sizeof tally_ocl.device_name] = "";
    if (tally_cl.clGetDeviceInfo(d, CL_DEVICE_NAME, sizeof name, name, NULL) != CL_SUCCESS) {
        snprintf(name, sizeof name, "(unnamed)");
    }
    name[sizeof name - 1] = '\0';
    memcpy(tally_ocl.device_name, name, sizeof name);
    cl_uint align_bits = 0, dims = 0;
    size_t sizes[16];
    cl_ulong local = 0;
    size_t group = 0;
    cl_int err = tally_cl.clGetDeviceInfo(d, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits,
                                          &align_bits, NULL);
    if (err == CL_SUCCESS) {
        err =
            tally_cl.clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof group, &group, NULL);
    }
    if (err == CL_SUCCESS) {
        err = tally_cl.clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, sizeof dims, &dims,
                                       NULL);
    }
    if (err == CL_SUCCESS && (dims < 1 || dims > 16)) {
        err = CL_INVALID_VALUE;
    }
    if (err == CL_SUCCESS) {
        err = tally_cl.clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_ITEM_SIZES, dims * sizeof(size_t),
                                       sizes, NULL);
    }
    if (err == CL_SUCCESS) {
        err = tally_cl.clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
    }
    if (err != CL_SUCCESS) {
        set_reason("cannot read the limits of OpenCL device '%s': %s (%d)", name,
                   tally_ocl_error_name(err), (int)err);
        return 0;
    }
    tally_ocl.base_align_bytes = align_bits >= 8 ? align_bits / 8 : 1;
    tally_ocl.max_work_group_size = group;
    for (cl_uint i = 0; i < 3; i++) {
        tally_ocl.max_work_item_sizes[i] = i < dims ? sizes[i] : 1;
    }
    tally_ocl.local_mem_bytes = local;
    return 1;
}

int tally_ocl_init_locked(void) {
    if (atomic_load_explicit(&tally_ocl_ready, memory_order_relaxed)) {
        return 1;
    }
    if (tally_ocl.failed) {
        return 0;
    }
    if (atomic_load(&tally_ocl_shut_down)) {
        set_reason("the process is exiting and OpenCL was released");
        return 0;
    }
    tally_ocl.failed = 1;
    if (!open_library_locked() || !choose_device_locked() || !read_device_info_locked()) {
        return 0;
    }
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)tally_ocl.platform,
                                     0};
    cl_int err = CL_SUCCESS;
    tally_ocl.context = tally_cl.clCreateContext(props, 1, &tally_ocl.device, NULL, NULL, &err);
    if (!tally_ocl.context || err != CL_SUCCESS) {
        set_reason("cannot create an OpenCL context on '%s': %s (%d)", tally_ocl.device_name,
                   tally_ocl_error_name(err), (int)err);
        tally_ocl.context = NULL;
        return 0;
    }
    // In order, with profiling unless the tests ask for none (or the device has none).
    tally_ocl.profiling = !tally_env_flag("TALLY_OPENCL_NO_TIMESTAMPS");
    tally_ocl.queue = NULL;
    if (tally_ocl.profiling) {
        tally_ocl.queue = tally_cl.clCreateCommandQueue(tally_ocl.context, tally_ocl.device,
                                                        CL_QUEUE_PROFILING_ENABLE, &err);
    }
    if (!tally_ocl.queue) {
        tally_ocl.profiling = 0;
        tally_ocl.queue =
            tally_cl.clCreateCommandQueue(tally_ocl.context, tally_ocl.device, 0, &err);
    }
    if (!tally_ocl.queue || err != CL_SUCCESS) {
        set_reason("cannot create an OpenCL command queue on '%s': %s (%d)", tally_ocl.device_name,
                   tally_ocl_error_name(err), (int)err);
        tally_cl.clReleaseContext(tally_ocl.context);
        tally_ocl.context = NULL;
        tally_ocl.queue = NULL;
        return 0;
    }
    // A new queue has nothing in it.
    tally_ocl_now_idle(tally_ocl_idle_mark());
    tally_ocl.failed = 0;
    tally_ocl.reason[0] = '\0';
    return 1;
}

void tally_ocl_destroy_locked(void) {
    if (tally_ocl.queue) {
        tally_cl.clReleaseCommandQueue(tally_ocl.queue);
    }
    if (tally_ocl.context) {
        tally_cl.clReleaseContext(tally_ocl.context);
    }
    tally_ocl.queue = NULL;
    tally_ocl.context = NULL;
    tally_ocl.device = NULL;
    tally_ocl.platform = NULL;
}

// ---- the queue's order -----------------------------------------------------------------------

void tally_ocl_count_enqueued(void) {
    atomic_fetch_add(&commands_enqueued, 1);
}

uint64_t tally_ocl_idle_mark(void) {
    return atomic_load(&commands_enqueued);
}

void tally_ocl_now_idle(uint64_t mark) {
    uint64_t seen = atomic_load(&commands_seen_complete);
    while (seen < mark && !atomic_compare_exchange_weak(&commands_seen_complete, &seen, mark)) {
    }
}

int tally_ocl_known_idle(void) {
    uint64_t seen = atomic_load(&commands_seen_complete);
    return seen == atomic_load(&commands_enqueued);
}

#endif  // TALLY_HAVE_OPENCL_HEADERS
