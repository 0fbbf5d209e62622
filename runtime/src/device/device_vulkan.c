// The Vulkan device interface: buffers, copies, syncs and kernel launches on one Vulkan queue.
//
// The loader is opened at run time (dlopen("libvulkan.so.1"); every entry point comes from
// vkGetInstanceProcAddr / vkGetDeviceProcAddr), so a machine without Vulkan still runs everything
// else: halide_vulkan_device_interface() returns NULL and reports why, once. Initialization is
// lazy (first use), guarded by one mutex, undone by the interface's release (and at process
// exit, so the Khronos validation layer sees every object destroyed); a later call initializes
// again. Environment (read at each initialization):
//   TALLY_VULKAN_DEVICE   index into vkEnumeratePhysicalDevices, or a substring of the device
//                         name; default: the first device with a compute queue (and Vulkan 1.1).
//   TALLY_VULKAN_DISABLE  non-empty and not "0": act as if there were no Vulkan (for tests).
//   TALLY_VULKAN_DEBUG    1: install a VK_EXT_debug_utils messenger printing warnings and errors
//                         (validation messages) through tally_print_diagnostic; 2: also info and
//                         verbose.
//   TALLY_VULKAN_FORCE_STAGING  non-empty and not "0": never map device memory, always copy
//                         through staging buffers (the path of discrete GPUs; for tests).
//   TALLY_VULKAN_NO_TIMESTAMPS  non-empty and not "0": act as if the queue had no timestamps
//                         (profile_timestamps then falls back to a sync per launch; for tests).
// Testing seam: tally_testing_vulkan_hold puts a host-set event in front of later submissions,
// so tests order host calls against device work by construction instead of by timing.
//
// The kernel ABI the compiler side emits (one tally_kernel_source per kernel, device_api
// TALLY_DEVICE_API_VULKAN): SPIR-V words with entry point "main"; buffer arguments are storage
// buffers of descriptor set 0 at bindings 0, 1, ... in the order they appear among the arguments;
// scalar arguments are packed into one push-constant block in argument order, each at the next
// offset aligned to its own size (1, 2, 4 or 8 bytes); the block is padded to a multiple of 4.
// The work-group size is set through specialization constants 0, 1, 2 (threads x, y, z), i.e. the
// shader declares layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;.
// A storage buffer holds the buffer's element span: element 0 is at tally_buffer_begin(buf).
//
// Ordering: every command buffer starts with a full memory barrier (all earlier work on the queue,
// writes → reads and writes) and ends with one making device writes visible to the host, so
// submission order on the single queue is the only ordering needed. Submissions are not waited
// for: each one's fence, command buffer, descriptor pool and staging buffer go on a pending list,
// reclaimed once the fence signals. Each buffer remembers the serial of the last submission that
// used it; copy_to_host and device_sync wait for that serial, device_sync_global for everything.
// Waits happen outside the lock, mark the calling thread waiting for the profiler and are counted
// by reason in the device-wait ledger (device_waits.c).
//
// No hidden syncs: halide_device_free never waits. A buffer that queued work may still use goes
// on a retired list with its last-use serial and is destroyed once every submission up to that
// serial has completed: checked whenever completed submissions are reclaimed (before each
// submission, after each wait) and, at release or exit, after the device went idle. Halide's
// lowering frees a producer's device buffer right after its consumer's launch; a free that
// waited there would bill the producer's whole kernel to the consumer.
//
// profile_timestamps: a launch made while such a run is current brackets its dispatch with
// timestamp queries (see halide_vulkan_run and bill_timestamps_locked); the pair is read when its
// submission is reclaimed, i.e. once its fence is known signaled (also polled at the end of each
// such run; the at-exit report first waits for all queued work, vk_drain), and billed
// to the Func that launched it (device_timeline.c). Clocks are correlated through
// VK_EXT_calibrated_timestamps by paired readings (the tightest of several) at initialization and
// at the end of each such run, which refits their drift (calibrate_clocks_locked). Staged copies
// (vkCmdCopyBuffer) are timed the same way and billed to their copy slot; copies through mapped
// memory are host memcpys, in the copy slot's host time.

#include "core/context.h"
#include "core/error.h"
#include "core/fault.h"
#include "device/device_interface.h"
#include "profiler/device_timeline.h"
#include "profiler/device_waits.h"
#include "profiler/profiler.h"
#include "tally_runtime.h"
#include "tally_runtime_testing.h"

#if defined(__has_include)
#if __has_include(<vulkan/vulkan.h>)
#define TALLY_HAVE_VULKAN_HEADERS 1
#endif
#endif

#ifndef TALLY_HAVE_VULKAN_HEADERS

// Built without the Vulkan headers: the back end is always unavailable.
const halide_device_interface_t *halide_vulkan_device_interface(void) {
    static _Atomic int reported = 0;
    if (!atomic_exchange(&reported, 1)) {
        tally_report_error(NULL, TALLY_ERROR_NO_DEVICE_INTERFACE,
                           "Vulkan: the runtime was built without the Vulkan headers");
    }
    return NULL;
}

int32_t halide_vulkan_run(void *user_context, void *state, const char *entry_name, int32_t blocks_x,
                          int32_t blocks_y, int32_t blocks_z, int32_t threads_x, int32_t threads_y,
                          int32_t threads_z, int32_t shared_mem_bytes, const int64_t *arg_sizes,
                          void **args, const uint8_t *arg_is_buffer) {
    (void)state, (void)blocks_x, (void)blocks_y, (void)blocks_z;
    (void)threads_x, (void)threads_y, (void)threads_z, (void)shared_mem_bytes;
    (void)arg_sizes, (void)args, (void)arg_is_buffer;
    return tally_report_error(user_context, TALLY_ERROR_NO_DEVICE_INTERFACE,
                              "halide_vulkan_run: kernel %s: the runtime was built without the "
                              "Vulkan headers",
                              entry_name ? entry_name : "(null)");
}

static void vk_collect_completed(void) {}

static void vk_drain(int32_t reason) {
    (void)reason;
}

int32_t tally_testing_vulkan_hold(int32_t mode) {
    (void)mode;
    return tally_report_error(NULL, TALLY_ERROR_NO_DEVICE_INTERFACE,
                              "tally_testing_vulkan_hold: the runtime was built without the "
                              "Vulkan headers");
}

int32_t tally_testing_vulkan_live_buffers(void) {
    return 0;
}

void tally_testing_set_vulkan_calibration(tally_testing_vulkan_calibration_t reader) {
    (void)reader;
}

#else

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- entry points ----------------------------------------------------------------------------

#define TALLY_VK_INSTANCE_FUNCS(X)                                                                 \
    X(vkDestroyInstance)                                                                           \
    X(vkEnumeratePhysicalDevices)                                                                  \
    X(vkGetPhysicalDeviceProperties)                                                               \
    X(vkGetPhysicalDeviceQueueFamilyProperties)                                                    \
    X(vkGetPhysicalDeviceMemoryProperties)                                                         \
    X(vkGetPhysicalDeviceFeatures2)                                                                \
    X(vkEnumerateDeviceExtensionProperties)                                                        \
    X(vkCreateDevice)                                                                              \
    X(vkGetDeviceProcAddr)

#define TALLY_VK_DEVICE_FUNCS(X)                                                                   \
    X(vkDestroyDevice)                                                                             \
    X(vkGetDeviceQueue)                                                                            \
    X(vkDeviceWaitIdle)                                                                            \
    X(vkCreateBuffer)                                                                              \
    X(vkDestroyBuffer)                                                                             \
    X(vkGetBufferMemoryRequirements)                                                               \
    X(vkAllocateMemory)                                                                            \
    X(vkFreeMemory)                                                                                \
    X(vkBindBufferMemory)                                                                          \
    X(vkMapMemory)                                                                                 \
    X(vkFlushMappedMemoryRanges)                                                                   \
    X(vkInvalidateMappedMemoryRanges)                                                              \
    X(vkCreateCommandPool)                                                                         \
    X(vkDestroyCommandPool)                                                                        \
    X(vkAllocateCommandBuffers)                                                                    \
    X(vkFreeCommandBuffers)                                                                        \
    X(vkBeginCommandBuffer)                                                                        \
    X(vkEndCommandBuffer)                                                                          \
    X(vkCmdPipelineBarrier)                                                                        \
    X(vkCmdCopyBuffer)                                                                             \
    X(vkCmdBindPipeline)                                                                           \
    X(vkCmdBindDescriptorSets)                                                                     \
    X(vkCmdPushConstants)                                                                          \
    X(vkCmdDispatch)                                                                               \
    X(vkCreateFence)                                                                               \
    X(vkDestroyFence)                                                                              \
    X(vkWaitForFences)                                                                             \
    X(vkGetFenceStatus)                                                                            \
    X(vkQueueSubmit)                                                                               \
    X(vkCreateShaderModule)                                                                        \
    X(vkDestroyShaderModule)                                                                       \
    X(vkCreateDescriptorSetLayout)                                                                 \
    X(vkDestroyDescriptorSetLayout)                                                                \
    X(vkCreatePipelineLayout)                                                                      \
    X(vkDestroyPipelineLayout)                                                                     \
    X(vkCreateComputePipelines)                                                                    \
    X(vkDestroyPipeline)                                                                           \
    X(vkCreateDescriptorPool)                                                                      \
    X(vkDestroyDescriptorPool)                                                                     \
    X(vkAllocateDescriptorSets)                                                                    \
    X(vkUpdateDescriptorSets)                                                                      \
    X(vkCreateQueryPool)                                                                           \
    X(vkDestroyQueryPool)                                                                          \
    X(vkCmdResetQueryPool)                                                                         \
    X(vkCmdWriteTimestamp)                                                                         \
    X(vkGetQueryPoolResults)                                                                       \
    X(vkCreateEvent)                                                                               \
    X(vkDestroyEvent)                                                                              \
    X(vkSetEvent)                                                                                  \
    X(vkCmdWaitEvents)

#define TALLY_VK_DECLARE(name) PFN_##name name;

typedef struct vk_funcs {
    TALLY_VK_INSTANCE_FUNCS(TALLY_VK_DECLARE)
    TALLY_VK_DEVICE_FUNCS(TALLY_VK_DECLARE)
    PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT;
    PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT;
    // VK_EXT_calibrated_timestamps (optional).
    PFN_vkGetPhysicalDeviceCalibrateableTimeDomainsEXT
        vkGetPhysicalDeviceCalibrateableTimeDomainsEXT;
    PFN_vkGetCalibratedTimestampsEXT vkGetCalibratedTimestampsEXT;
} vk_funcs;

// ---- state -----------------------------------------------------------------------------------

#define TALLY_VK_BUFFER_MAGIC 0x54564b42u  // "TVKB"
// Submissions in flight beyond which a new one first waits for the oldest.
#define TALLY_VK_MAX_PENDING 256
// Fences waited for per vkWaitForFences call.
#define TALLY_VK_WAIT_CHUNK 64
// Timestamp query pools: pairs (begin, end) per pool, and pools at most.
#define TALLY_VK_PAIRS_PER_POOL 512
#define TALLY_VK_MAX_QUERY_POOLS 16
// Largest push-constant block a launch may build on the stack.
#define TALLY_VK_MAX_PUSH_BYTES 1024
// Host gates (tally_testing_vulkan_hold) per initialization.
#define TALLY_VK_MAX_GATES 64

// One device allocation; buf->device points at it.
typedef struct vk_buffer {
    uint32_t magic;
    // 1 after halide_device_release destroyed its Vulkan objects (only device_free is valid).
    int32_t dead;
    VkBuffer buffer;
    VkDeviceMemory memory;
    VkDeviceSize size;  // bytes of the VkBuffer (>= the buffer's span, >= 4)
    void *mapped;       // persistent mapping when the memory is host-visible, else NULL
    int32_t coherent;
    uint64_t last_use;  // serial of the last submission that used it (guarded by vk_lock)
    struct vk_buffer *prev, *next;  // live list (guarded by vk_lock)
} vk_buffer;

// One submission in flight and what it holds.
typedef struct vk_pending {
    struct vk_pending *next;
    uint64_t serial;
    VkFence fence;
    VkCommandBuffer cmd;
    VkDescriptorPool descriptor_pool;  // may be VK_NULL_HANDLE
    VkBuffer staging;                  // may be VK_NULL_HANDLE
    VkDeviceMemory staging_memory;
    int32_t waiters;  // threads waiting on the fence outside the lock: do not destroy it yet
    int32_t done;     // the fence is known to have signaled
    // profile_timestamps: the query pair bracketing the dispatch, and whom to bill.
    int32_t timed;
    int32_t ts_pool, ts_pair;
    tally_timeline_owner owner;
} vk_pending;

// A timestamp query pool and its free (begin, end) pairs; reused across runs.
typedef struct vk_query_pool {
    VkQueryPool pool;
    int32_t num_free;
    uint16_t free_pairs[TALLY_VK_PAIRS_PER_POOL];
} vk_query_pool;

// A freed buffer whose memory queued work may still use: destroyed once every submission with
// serial <= last_use has completed.
typedef struct vk_retired {
    struct vk_retired *next;
    uint64_t last_use;
    VkBuffer buffer;
    VkDeviceMemory memory;
} vk_retired;

typedef struct vk_pipeline_entry {
    int32_t threads[3];
    VkPipeline pipeline;
} vk_pipeline_entry;

typedef struct vk_kernel_state {
    VkShaderModule module;
    VkDescriptorSetLayout set_layout;  // VK_NULL_HANDLE when the kernel takes no buffers
    VkPipelineLayout layout;
    int32_t push_size;  // bytes of the push-constant range; -1 until the layout exists
    int32_t num_pipelines, cap_pipelines;
    vk_pipeline_entry *pipelines;
} vk_kernel_state;

// The Vulkan part of a tally_kernel_table's device_state: per kernel, its shader module, layouts
// and pipelines (one per work-group size). Lives as long as the process; its Vulkan objects are
// destroyed by release and rebuilt on the next launch.
typedef struct vk_module_cache {
    struct vk_module_cache *next;  // every cache, for release (guarded by vk_lock)
    pthread_mutex_t lock;
    int32_t num_kernels;
    vk_kernel_state *kernels;
} vk_module_cache;

static pthread_mutex_t vk_lock = PTHREAD_MUTEX_INITIALIZER;
// 1 while the objects below are valid (written under vk_lock).
static _Atomic int32_t vk_ready = 0;

static struct {
    void *lib;  // the loader; never closed once opened
    PFN_vkGetInstanceProcAddr get_instance_proc_addr;
    vk_funcs f;
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    VkPhysicalDevice physical;
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceMemoryProperties memory;
    VkDevice device;
    VkQueue queue;
    uint32_t queue_family;
    VkCommandPool command_pool;
    int32_t force_staging;
    uint64_t next_serial;
    vk_pending *pending_head, *pending_tail;
    int32_t num_pending;
    vk_buffer *buffers;
    vk_retired *retired;  // freed buffers awaiting their last use (guarded by vk_lock)
    vk_module_cache *caches;
    // Device timestamps: the queue family's timestampValidBits (0: none, or
    // TALLY_VULKAN_NO_TIMESTAMPS), whether the clocks are correlated (device_timeline.c holds the
    // pairings) and whether the device can be, and the query pools, grown on demand.
    uint32_t timestamp_bits;
    int32_t calibrated, calibration_supported;
    int32_t num_query_pools;
    vk_query_pool *query_pools[TALLY_VK_MAX_QUERY_POOLS];
    // tally_testing_vulkan_hold: while `gate_closed`, each new command buffer first waits for
    // the last of `gates` (a host-set event). Opened gates stay set until teardown.
    int32_t gate_closed;
    int32_t num_gates;
    VkEvent gates[TALLY_VK_MAX_GATES];
    // Initialization failure: the reason, and whether it was reported yet.
    int32_t failed;
    int32_t failure_reported;
    char failure[768];
    int32_t atexit_registered;
} vk;

static const halide_device_interface_t vulkan_interface;

// ---- helpers ---------------------------------------------------------------------------------

static const char *vk_result_name(VkResult r) {
    switch (r) {
    case VK_SUCCESS:
        return "VK_SUCCESS";
    case VK_NOT_READY:
        return "VK_NOT_READY";
    case VK_TIMEOUT:
        return "VK_TIMEOUT";
    case VK_INCOMPLETE:
        return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY:
        return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
        return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED:
        return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST:
        return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED:
        return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT:
        return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
        return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT:
        return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
        return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS:
        return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FRAGMENTED_POOL:
        return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_OUT_OF_POOL_MEMORY:
        return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_ERROR_INVALID_SHADER_NV:
        return "VK_ERROR_INVALID_SHADER_NV";
    default:
        return "VkResult";
    }
}

// Reports "<what> failed: <VkResult name> (<value>)" with `code`.
static int32_t vk_fail(void *user_context, int32_t code, const char *routine, const char *what,
                       VkResult r) {
    return tally_report_error(user_context, code, "%s: %s failed: %s (%d)", routine, what,
                              vk_result_name(r), (int)r);
}

// Non-empty and not "0".
static int env_flag(const char *name) {
    const char *v = getenv(name);
    return v && v[0] && strcmp(v, "0") != 0;
}

// A level variable: unset, empty or "0" is 0, a positive decimal number is that level (at most
// 9), and any other value ("1x", "yes", "-2") turns the setting on at level 1.
static int32_t env_level(const char *name) {
    const char *v = getenv(name);
    if (!v || !v[0] || strcmp(v, "0") == 0) {
        return 0;
    }
    char *end = NULL;
    long n = strtol(v, &end, 10);
    if (*end != '\0' || !(v[0] >= '0' && v[0] <= '9') || n < 1) {
        return 1;
    }
    return n > 9 ? 9 : (int32_t)n;
}

// dlsym returns an object pointer; POSIX guarantees it converts to a function pointer.
static PFN_vkVoidFunction to_function(void *p) {
    PFN_vkVoidFunction f;
    memcpy(&f, &p, sizeof(f));
    return f;
}

static VKAPI_ATTR VkBool32 VKAPI_CALL debug_callback(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT *data, void *user_data) {
    (void)user_data;
    const char *level = (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)     ? "error"
                        : (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) ? "warning"
                        : (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_INFO_BIT_EXT)    ? "info"
                                                                                       : "verbose";
    // The loader reports through the same messenger (e.g. that VK_INSTANCE_LAYERS added a layer);
    // its messages are labelled apart from the layers' validation messages.
    int loader =
        data && data->pMessageIdName && strcmp(data->pMessageIdName, "Loader Message") == 0;
    const char *kind = loader                                                      ? "loader"
                       : (types & VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT)  ? "validation"
                       : (types & VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT) ? "performance"
                                                                                   : "general";
    char msg[4096];
    snprintf(msg, sizeof(msg), "Vulkan %s %s: %s\n", kind, level,
             data && data->pMessage ? data->pMessage : "(no message)");
    tally_print_diagnostic(NULL, msg);
    return VK_FALSE;
}

static void fill_messenger_info(VkDebugUtilsMessengerCreateInfoEXT *info, int32_t level) {
    memset(info, 0, sizeof(*info));
    info->sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
    info->messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                            VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    if (level >= 2) {
        info->messageSeverity |= VK_DEBUG_UTILS_MESSAGE_SEVERITY_INFO_BIT_EXT |
                                 VK_DEBUG_UTILS_MESSAGE_SEVERITY_VERBOSE_BIT_EXT;
    }
    info->messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                        VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                        VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    info->pfnUserCallback = debug_callback;
}

// ---- initialization and teardown (vk_lock held) ----------------------------------------------

// Destroys whatever of the instance and device exists (nothing may be in flight).
static void destroy_core_locked(void) {
    if (vk.command_pool && vk.f.vkDestroyCommandPool) {
        vk.f.vkDestroyCommandPool(vk.device, vk.command_pool, NULL);
    }
    if (vk.device && vk.f.vkDestroyDevice) {
        vk.f.vkDestroyDevice(vk.device, NULL);
    }
    if (vk.messenger && vk.f.vkDestroyDebugUtilsMessengerEXT) {
        vk.f.vkDestroyDebugUtilsMessengerEXT(vk.instance, vk.messenger, NULL);
    }
    if (vk.instance && vk.f.vkDestroyInstance) {
        vk.f.vkDestroyInstance(vk.instance, NULL);
    }
    vk.command_pool = VK_NULL_HANDLE;
    vk.device = VK_NULL_HANDLE;
    vk.queue = VK_NULL_HANDLE;
    vk.messenger = VK_NULL_HANDLE;
    vk.instance = VK_NULL_HANDLE;
    vk.physical = VK_NULL_HANDLE;
    memset(&vk.f, 0, sizeof(vk.f));
}

// Picks the physical device (TALLY_VULKAN_DEVICE or the first usable one) and its compute queue
// family. Returns 0, or -1 with the reason in `why`.
static int select_device_locked(char *why, size_t why_size) {
    uint32_t count = 0;
    VkResult r = vk.f.vkEnumeratePhysicalDevices(vk.instance, &count, NULL);
    if (r != VK_SUCCESS || count == 0) {
        snprintf(why, why_size,
                 "no Vulkan physical device found (vkEnumeratePhysicalDevices: %s, %u devices; is "
                 "a driver such as Mesa lavapipe installed?)",
                 vk_result_name(r), count);
        return -1;
    }
    VkPhysicalDevice *devices = (VkPhysicalDevice *)calloc(count, sizeof(VkPhysicalDevice));
    if (!devices) {
        snprintf(why, why_size, "out of memory enumerating Vulkan devices");
        return -1;
    }
    r = vk.f.vkEnumeratePhysicalDevices(vk.instance, &count, devices);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        free(devices);
        snprintf(why, why_size, "vkEnumeratePhysicalDevices failed: %s (%d)", vk_result_name(r),
                 (int)r);
        return -1;
    }
    const char *selector = getenv("TALLY_VULKAN_DEVICE");
    int by_index = 0;
    long index = -1;
    if (selector && selector[0]) {
        char *end = NULL;
        index = strtol(selector, &end, 10);
        by_index = end && *end == '\0';
    } else {
        selector = NULL;
    }
    char names[512] = "";
    int found = 0;
    for (uint32_t i = 0; i < count && !found; i++) {
        VkPhysicalDeviceProperties props;
        vk.f.vkGetPhysicalDeviceProperties(devices[i], &props);
        size_t used = strlen(names);
        snprintf(names + used, sizeof(names) - used, "%s%u: %s", i ? ", " : "", i,
                 props.deviceName);
        if (selector && (by_index ? (long)i != index : !strstr(props.deviceName, selector))) {
            continue;
        }
        uint32_t num_families = 0;
        vk.f.vkGetPhysicalDeviceQueueFamilyProperties(devices[i], &num_families, NULL);
        VkQueueFamilyProperties families[64];
        if (num_families > 64) {
            num_families = 64;
        }
        vk.f.vkGetPhysicalDeviceQueueFamilyProperties(devices[i], &num_families, families);
        int32_t family = -1;
        for (uint32_t q = 0; q < num_families && family < 0; q++) {
            if ((families[q].queueFlags & VK_QUEUE_COMPUTE_BIT) && families[q].queueCount > 0) {
                family = (int32_t)q;
            }
        }
        const char *problem = family < 0                              ? "has no compute queue"
                              : props.apiVersion < VK_API_VERSION_1_1 ? "supports only Vulkan 1.0"
                                                                      : NULL;
        if (problem) {
            if (selector) {
                snprintf(why, why_size,
                         "the Vulkan device %u (%s) chosen by TALLY_VULKAN_DEVICE=%s %s", i,
                         props.deviceName, selector, problem);
                free(devices);
                return -1;
            }
            continue;
        }
        vk.physical = devices[i];
        vk.props = props;
        vk.queue_family = (uint32_t)family;
        // Nonzero: the queue family supports timestamps (of that many valid bits).
        vk.timestamp_bits = families[family].timestampValidBits;
        found = 1;
    }
    free(devices);
    if (!found) {
        if (selector) {
            snprintf(why, why_size, "no Vulkan device matches TALLY_VULKAN_DEVICE=%s (devices: %s)",
                     selector, names);
        } else {
            snprintf(why, why_size,
                     "no Vulkan device has a compute queue and Vulkan 1.1 (devices: %s)", names);
        }
        return -1;
    }
    return 0;
}

// Creates the logical device with one compute queue, enabling the optional shader features a
// kernel may use (64/16/8-bit types and storage) where the device supports them.
// Whether the selected physical device offers the device extension `name`.
static int has_device_extension(const char *name) {
    uint32_t n = 0;
    if (vk.f.vkEnumerateDeviceExtensionProperties(vk.physical, NULL, &n, NULL) != VK_SUCCESS ||
        n == 0) {
        return 0;
    }
    VkExtensionProperties *props = (VkExtensionProperties *)calloc(n, sizeof(*props));
    int found = 0;
    if (props &&
        vk.f.vkEnumerateDeviceExtensionProperties(vk.physical, NULL, &n, props) == VK_SUCCESS) {
        for (uint32_t i = 0; i < n && !found; i++) {
            found = strcmp(props[i].extensionName, name) == 0;
        }
    }
    free(props);
    return found;
}

// Correlates the device's timestamp counter with the profiler's clock (CLOCK_MONOTONIC) through
// VK_EXT_calibrated_timestamps, when the device offers both the device and the CLOCK_MONOTONIC
// domain: TALLY_VK_CALIBRATION_READINGS paired readings, of which device_timeline.c keeps the one
// with the smallest maxDeviation. Done at initialization and again at the end of each
// profile_timestamps run (vk_collect_completed), so that a long process refits the drift between
// the clocks. A device whose host domain is only CLOCK_MONOTONIC_RAW (or none) stays uncalibrated:
// its kernels are still timed, as durations. tally_testing_set_vulkan_calibration replaces the
// readings.
#define TALLY_VK_CALIBRATION_READINGS 5

static _Atomic(tally_testing_vulkan_calibration_t) calibration_script;

void tally_testing_set_vulkan_calibration(tally_testing_vulkan_calibration_t reader) {
    atomic_store_explicit(&calibration_script, reader, memory_order_release);
}

// Whether the device offers the device and CLOCK_MONOTONIC domains. vk_lock held.
static int calibration_supported_locked(void) {
    if (!vk.f.vkGetCalibratedTimestampsEXT ||
        !vk.f.vkGetPhysicalDeviceCalibrateableTimeDomainsEXT) {
        return 0;
    }
    VkTimeDomainEXT domains[16];
    uint32_t n = 16;
    VkResult r = vk.f.vkGetPhysicalDeviceCalibrateableTimeDomainsEXT(vk.physical, &n, domains);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        return 0;
    }
    int device = 0, monotonic = 0;
    for (uint32_t i = 0; i < n; i++) {
        device |= domains[i] == VK_TIME_DOMAIN_DEVICE_EXT;
        monotonic |= domains[i] == VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT;
    }
    return device && monotonic;
}

// One paired reading: the device counter, CLOCK_MONOTONIC, and the maximum deviation (ns).
static int calibrated_reading_locked(uint64_t *ticks, uint64_t *host_ns, uint64_t *deviation) {
    tally_testing_vulkan_calibration_t script =
        atomic_load_explicit(&calibration_script, memory_order_acquire);
    if (script) {
        return script(ticks, host_ns, deviation) == 0;
    }
    VkCalibratedTimestampInfoEXT info[2];
    memset(info, 0, sizeof(info));
    info[0].sType = info[1].sType = VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT;
    info[0].timeDomain = VK_TIME_DOMAIN_DEVICE_EXT;
    info[1].timeDomain = VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT;
    uint64_t stamps[2];
    if (vk.f.vkGetCalibratedTimestampsEXT(vk.device, 2, info, stamps, deviation) != VK_SUCCESS) {
        return 0;
    }
    *ticks = stamps[0];
    *host_ns = stamps[1];
    return 1;
}

// Takes one pairing (see above); vk.calibrated says whether the clocks are correlated. vk_lock
// held. At initialization `check_support` asks the device; later pairings reuse its answer.
static void calibrate_clocks_locked(int check_support) {
    if (check_support) {
        vk.calibration_supported = calibration_supported_locked();
    }
    if (!vk.calibration_supported &&
        !atomic_load_explicit(&calibration_script, memory_order_acquire)) {
        return;
    }
    const uint64_t mask =
        vk.timestamp_bits > 0 && vk.timestamp_bits < 64 ? (1ull << vk.timestamp_bits) - 1 : ~0ull;
    tally_clock_reading readings[TALLY_VK_CALIBRATION_READINGS];
    int32_t n = 0;
    for (int32_t i = 0; i < TALLY_VK_CALIBRATION_READINGS; i++) {
        uint64_t ticks = 0, host = 0, deviation = 0;
        if (calibrated_reading_locked(&ticks, &host, &deviation)) {
            readings[n].device_ns =
                (double)(ticks & mask) * (double)vk.props.limits.timestampPeriod;
            readings[n].host_ns = host;
            readings[n].deviation_ns = deviation;
            n++;
        }
    }
    if (n > 0) {
        tally_timeline_clock_pair(TALLY_DEVICE_API_VULKAN, readings, n);
        vk.calibrated = 1;
    }
}

static int create_device_locked(char *why, size_t why_size) {
    VkPhysicalDevice16BitStorageFeatures have16 = {
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES, NULL, 0, 0, 0, 0};
    VkPhysicalDevice8BitStorageFeatures have8 = {
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES, NULL, 0, 0, 0};
    VkPhysicalDeviceShaderFloat16Int8Features have_f16i8 = {
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES, NULL, 0, 0};
    // 8-bit storage and float16/int8 are core in 1.2; the instance asks for 1.2.
    int has12 = vk.props.apiVersion >= VK_API_VERSION_1_2;
    if (has12) {
        have16.pNext = &have8;
        have8.pNext = &have_f16i8;
    }
    VkPhysicalDeviceFeatures2 have;
    memset(&have, 0, sizeof(have));
    have.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    have.pNext = &have16;
    vk.f.vkGetPhysicalDeviceFeatures2(vk.physical, &have);

    VkPhysicalDevice16BitStorageFeatures want16 = have16;
    VkPhysicalDevice8BitStorageFeatures want8 = have8;
    VkPhysicalDeviceShaderFloat16Int8Features want_f16i8 = have_f16i8;
    want16.pNext = has12 ? (void *)&want8 : NULL;
    want8.pNext = &want_f16i8;
    want_f16i8.pNext = NULL;
    VkPhysicalDeviceFeatures2 want;
    memset(&want, 0, sizeof(want));
    want.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    want.pNext = &want16;
    want.features.shaderInt64 = have.features.shaderInt64;
    want.features.shaderFloat64 = have.features.shaderFloat64;
    want.features.shaderInt16 = have.features.shaderInt16;

    float priority = 1.0f;
    VkDeviceQueueCreateInfo queue_info;
    memset(&queue_info, 0, sizeof(queue_info));
    queue_info.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
    queue_info.queueFamilyIndex = vk.queue_family;
    queue_info.queueCount = 1;
    queue_info.pQueuePriorities = &priority;
    VkDeviceCreateInfo device_info;
    memset(&device_info, 0, sizeof(device_info));
    device_info.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
    device_info.pNext = &want;
    device_info.queueCreateInfoCount = 1;
    device_info.pQueueCreateInfos = &queue_info;
    const char *calibrated_ext = VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME;
    if (has_device_extension(calibrated_ext) &&
        vk.f.vkGetPhysicalDeviceCalibrateableTimeDomainsEXT) {
        device_info.enabledExtensionCount = 1;
        device_info.ppEnabledExtensionNames = &calibrated_ext;
    }
    VkResult r = vk.f.vkCreateDevice(vk.physical, &device_info, NULL, &vk.device);
    if (r != VK_SUCCESS) {
        vk.device = VK_NULL_HANDLE;
        snprintf(why, why_size, "vkCreateDevice failed for %s: %s (%d)", vk.props.deviceName,
                 vk_result_name(r), (int)r);
        return -1;
    }
#define TALLY_VK_LOAD_DEVICE(name)                                                                 \
    vk.f.name = (PFN_##name)vk.f.vkGetDeviceProcAddr(vk.device, #name);                            \
    if (!vk.f.name) {                                                                              \
        snprintf(why, why_size, "the Vulkan driver of %s lacks %s", vk.props.deviceName, #name);   \
        return -1;                                                                                 \
    }
    TALLY_VK_DEVICE_FUNCS(TALLY_VK_LOAD_DEVICE)
#undef TALLY_VK_LOAD_DEVICE
    vk.f.vkGetCalibratedTimestampsEXT =
        device_info.enabledExtensionCount
            ? (PFN_vkGetCalibratedTimestampsEXT)vk.f.vkGetDeviceProcAddr(
                  vk.device, "vkGetCalibratedTimestampsEXT")
            : NULL;
    vk.f.vkGetDeviceQueue(vk.device, vk.queue_family, 0, &vk.queue);
    VkCommandPoolCreateInfo pool_info;
    memset(&pool_info, 0, sizeof(pool_info));
    pool_info.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
    pool_info.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
    pool_info.queueFamilyIndex = vk.queue_family;
    r = vk.f.vkCreateCommandPool(vk.device, &pool_info, NULL, &vk.command_pool);
    if (r != VK_SUCCESS) {
        vk.command_pool = VK_NULL_HANDLE;
        snprintf(why, why_size, "vkCreateCommandPool failed: %s (%d)", vk_result_name(r), (int)r);
        return -1;
    }
    return 0;
}

static void release_at_exit(void);
static void vk_collect_completed(void);
static void vk_drain(int32_t reason);

// Opens the loader (once per process) and checks it offers Vulkan 1.1. Returns 0, or -1 with
// the reason in `why`.
static int open_loader_locked(char *why, size_t why_size) {
    if (!vk.lib) {
        dlerror();
        vk.lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!vk.lib) {
            const char *e = dlerror();
            snprintf(why, why_size, "could not load the Vulkan loader libvulkan.so.1 (%s)",
                     e ? e : "dlopen failed");
            return -1;
        }
    }
    vk.get_instance_proc_addr =
        (PFN_vkGetInstanceProcAddr)to_function(dlsym(vk.lib, "vkGetInstanceProcAddr"));
    if (!vk.get_instance_proc_addr) {
        snprintf(why, why_size, "the Vulkan loader libvulkan.so.1 has no vkGetInstanceProcAddr");
        return -1;
    }
    PFN_vkEnumerateInstanceVersion enumerate_version =
        (PFN_vkEnumerateInstanceVersion)vk.get_instance_proc_addr(NULL,
                                                                  "vkEnumerateInstanceVersion");
    uint32_t loader_version = VK_API_VERSION_1_0;
    if (enumerate_version && enumerate_version(&loader_version) != VK_SUCCESS) {
        loader_version = VK_API_VERSION_1_0;
    }
    if (loader_version < VK_API_VERSION_1_1) {
        snprintf(why, why_size, "the Vulkan loader supports only Vulkan 1.0; Tally needs 1.1");
        return -1;
    }
    return 0;
}

// TALLY_VULKAN_DEBUG's level, or 0 (said once through tally_print_diagnostic) when the loader lacks
// VK_EXT_debug_utils.
static int32_t debug_level(PFN_vkEnumerateInstanceExtensionProperties enumerate_extensions) {
    int32_t debug = env_level("TALLY_VULKAN_DEBUG");
    if (!debug) {
        return 0;
    }
    uint32_t n = 0;
    int have_debug_utils = 0;
    if (enumerate_extensions(NULL, &n, NULL) == VK_SUCCESS && n > 0) {
        VkExtensionProperties *ext =
            (VkExtensionProperties *)calloc(n, sizeof(VkExtensionProperties));
        if (ext && enumerate_extensions(NULL, &n, ext) >= 0) {
            for (uint32_t i = 0; i < n; i++) {
                if (strcmp(ext[i].extensionName, VK_EXT_DEBUG_UTILS_EXTENSION_NAME) == 0) {
                    have_debug_utils = 1;
                }
            }
        }
        free(ext);
    }
    if (!have_debug_utils) {
        tally_print_diagnostic(NULL,
                               "Tally Vulkan: TALLY_VULKAN_DEBUG is set but VK_EXT_debug_utils is "
                               "not available; no messages will be printed\n");
        return 0;
    }
    return debug;
}

// Creates the instance (with the debug messenger at level `*debug`, which drops to 0 when the
// extension is missing) and loads its entry points. Returns 0, or -1 with the reason in `why`.
static int create_instance_locked(int32_t *debug, char *why, size_t why_size) {
    PFN_vkGetInstanceProcAddr gipa = vk.get_instance_proc_addr;
    PFN_vkCreateInstance create_instance = (PFN_vkCreateInstance)gipa(NULL, "vkCreateInstance");
    PFN_vkEnumerateInstanceExtensionProperties enumerate_extensions =
        (PFN_vkEnumerateInstanceExtensionProperties)gipa(NULL,
                                                         "vkEnumerateInstanceExtensionProperties");
    if (!create_instance || !enumerate_extensions) {
        snprintf(why, why_size, "the Vulkan loader lacks vkCreateInstance");
        return -1;
    }
    *debug = debug_level(enumerate_extensions);
    VkDebugUtilsMessengerCreateInfoEXT messenger_info;
    fill_messenger_info(&messenger_info, *debug);
    const char *extensions[1] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
    VkApplicationInfo app;
    memset(&app, 0, sizeof(app));
    app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
    app.pApplicationName = "tally";
    app.pEngineName = "tally";
    app.apiVersion = VK_API_VERSION_1_2;
    VkInstanceCreateInfo instance_info;
    memset(&instance_info, 0, sizeof(instance_info));
    instance_info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
    // Chained, the messenger also reports problems of vkCreateInstance/vkDestroyInstance.
    instance_info.pNext = *debug ? &messenger_info : NULL;
    instance_info.pApplicationInfo = &app;
    instance_info.enabledExtensionCount = *debug ? 1 : 0;
    instance_info.ppEnabledExtensionNames = *debug ? extensions : NULL;
    VkResult r = create_instance(&instance_info, NULL, &vk.instance);
    if (r != VK_SUCCESS) {
        vk.instance = VK_NULL_HANDLE;
        snprintf(why, why_size, "vkCreateInstance failed: %s (%d)%s", vk_result_name(r), (int)r,
                 r == VK_ERROR_INCOMPATIBLE_DRIVER ? " (no Vulkan driver/ICD found)" : "");
        return -1;
    }
#define TALLY_VK_LOAD_INSTANCE(name)                                                               \
    vk.f.name = (PFN_##name)gipa(vk.instance, #name);                                              \
    if (!vk.f.name) {                                                                              \
        snprintf(why, why_size, "the Vulkan loader lacks %s", #name);                              \
        return -1;                                                                                 \
    }
    TALLY_VK_INSTANCE_FUNCS(TALLY_VK_LOAD_INSTANCE)
#undef TALLY_VK_LOAD_INSTANCE
    vk.f.vkGetPhysicalDeviceCalibrateableTimeDomainsEXT =
        (PFN_vkGetPhysicalDeviceCalibrateableTimeDomainsEXT)gipa(
            vk.instance, "vkGetPhysicalDeviceCalibrateableTimeDomainsEXT");
    if (*debug) {
        vk.f.vkCreateDebugUtilsMessengerEXT =
            (PFN_vkCreateDebugUtilsMessengerEXT)gipa(vk.instance, "vkCreateDebugUtilsMessengerEXT");
        vk.f.vkDestroyDebugUtilsMessengerEXT = (PFN_vkDestroyDebugUtilsMessengerEXT)gipa(
            vk.instance, "vkDestroyDebugUtilsMessengerEXT");
        if (vk.f.vkCreateDebugUtilsMessengerEXT && vk.f.vkDestroyDebugUtilsMessengerEXT &&
            vk.f.vkCreateDebugUtilsMessengerEXT(vk.instance, &messenger_info, NULL,
                                                &vk.messenger) != VK_SUCCESS) {
            vk.messenger = VK_NULL_HANDLE;
        }
    }
    return 0;
}

// Loads the loader, creates the instance, picks the device, creates device, queue and command
// pool. Returns 0, or -1 with the reason in `why` (everything created so far destroyed).
static int init_locked(char *why, size_t why_size) {
    if (env_flag("TALLY_VULKAN_DISABLE")) {
        snprintf(why, why_size, "Vulkan is disabled by TALLY_VULKAN_DISABLE");
        return -1;
    }
    if (open_loader_locked(why, why_size) != 0) {
        return -1;
    }
    int32_t debug = 0;
    if (create_instance_locked(&debug, why, why_size) != 0 ||
        select_device_locked(why, why_size) != 0 || create_device_locked(why, why_size) != 0) {
        destroy_core_locked();
        return -1;
    }
    vk.f.vkGetPhysicalDeviceMemoryProperties(vk.physical, &vk.memory);
    vk.force_staging = env_flag("TALLY_VULKAN_FORCE_STAGING");
    vk.next_serial = 1;
    if (env_flag("TALLY_VULKAN_NO_TIMESTAMPS")) {
        vk.timestamp_bits = 0;
    }
    vk.calibrated = 0;
    calibrate_clocks_locked(1);
    if (debug) {
        char msg[512];
        snprintf(msg, sizeof(msg), "Tally Vulkan: using %s (Vulkan %u.%u, queue family %u)%s\n",
                 vk.props.deviceName, VK_API_VERSION_MAJOR(vk.props.apiVersion),
                 VK_API_VERSION_MINOR(vk.props.apiVersion), vk.queue_family,
                 vk.force_staging ? ", staging copies forced" : "");
        tally_print_diagnostic(NULL, msg);
    }
    if (!vk.atexit_registered) {
        vk.atexit_registered = 1;
        atexit(release_at_exit);
    }
    tally_device_register_drain(TALLY_DEVICE_API_VULKAN, vk_collect_completed, vk_drain);
    return 0;
}

// Makes sure Vulkan is initialized. On failure reports the reason the first time and, when
// `routine` is not NULL, a per-call error naming the routine on later calls; returns
// TALLY_ERROR_NO_DEVICE_INTERFACE.
static int32_t ensure_ready(void *user_context, const char *routine) {
    if (atomic_load_explicit(&vk_ready, memory_order_acquire)) {
        return 0;
    }
    char reason[sizeof(vk.failure)];
    int report_reason = 0;
    pthread_mutex_lock(&vk_lock);
    if (!atomic_load_explicit(&vk_ready, memory_order_relaxed) && !vk.failed) {
        int32_t one_time = tally_profiler_one_time_begin(TALLY_ONE_TIME_DEVICE_INIT);
        if (init_locked(vk.failure, sizeof(vk.failure)) == 0) {
            atomic_store_explicit(&vk_ready, 1, memory_order_release);
        } else {
            vk.failed = 1;
        }
        tally_profiler_one_time_end(one_time);
    }
    int ok = atomic_load_explicit(&vk_ready, memory_order_relaxed);
    if (!ok) {
        memcpy(reason, vk.failure, sizeof(reason));
        report_reason = !vk.failure_reported;
        vk.failure_reported = 1;
    }
    pthread_mutex_unlock(&vk_lock);
    if (ok) {
        return 0;
    }
    // Reported outside the lock: the error handler is user code.
    if (report_reason) {
        return tally_report_error(user_context, TALLY_ERROR_NO_DEVICE_INTERFACE,
                                  "%s%sVulkan is not available: %s", routine ? routine : "",
                                  routine ? ": " : "", reason);
    }
    if (routine) {
        return tally_report_error(user_context, TALLY_ERROR_NO_DEVICE_INTERFACE,
                                  "%s: Vulkan is not available: %s", routine, reason);
    }
    return TALLY_ERROR_NO_DEVICE_INTERFACE;
}

// ---- device timestamps (profile_timestamps) ----------------------------------------------------

// Takes a free (begin, end) query pair, adding a pool when every pool is full. Returns 0, or -1
// when all TALLY_VK_MAX_QUERY_POOLS are in use (or a pool cannot be created).
static int acquire_pair_locked(int32_t *pool, int32_t *pair) {
    for (int32_t i = 0; i < vk.num_query_pools; i++) {
        vk_query_pool *q = vk.query_pools[i];
        if (q->num_free > 0) {
            *pool = i;
            *pair = q->free_pairs[--q->num_free];
            return 0;
        }
    }
    if (vk.num_query_pools == TALLY_VK_MAX_QUERY_POOLS) {
        return -1;
    }
    vk_query_pool *q = (vk_query_pool *)calloc(1, sizeof(vk_query_pool));
    if (!q) {
        return -1;
    }
    VkQueryPoolCreateInfo info;
    memset(&info, 0, sizeof(info));
    info.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
    info.queryType = VK_QUERY_TYPE_TIMESTAMP;
    info.queryCount = 2 * TALLY_VK_PAIRS_PER_POOL;
    if (vk.f.vkCreateQueryPool(vk.device, &info, NULL, &q->pool) != VK_SUCCESS) {
        free(q);
        return -1;
    }
    for (int32_t k = 0; k < TALLY_VK_PAIRS_PER_POOL; k++) {
        q->free_pairs[k] = (uint16_t)(TALLY_VK_PAIRS_PER_POOL - 1 - k);
    }
    q->num_free = TALLY_VK_PAIRS_PER_POOL;
    vk.query_pools[vk.num_query_pools] = q;
    *pool = vk.num_query_pools++;
    *pair = q->free_pairs[--q->num_free];
    return 0;
}

// Bills a completed submission's kernel interval to its owner. Its fence has signaled, so the
// results are available: read without waiting. The counter has timestamp_bits valid bits and
// wraps; the difference is taken modulo 2^bits, and an end before its begin on a full 64-bit
// counter is unmatched.
static void bill_timestamps_locked(const vk_pending *p) {
    VkQueryPool pool = vk.query_pools[p->ts_pool]->pool;
    uint64_t ticks[2] = {0, 0};
    VkResult r =
        vk.f.vkGetQueryPoolResults(vk.device, pool, (uint32_t)(2 * p->ts_pair), 2, sizeof(ticks),
                                   ticks, sizeof(uint64_t), VK_QUERY_RESULT_64_BIT);
    if (r != VK_SUCCESS) {
        tally_timeline_count_problem(TALLY_TIMELINE_LOST);
        return;
    }
    uint64_t mask = vk.timestamp_bits >= 64 ? ~0ull : (1ull << vk.timestamp_bits) - 1;
    uint64_t begin = ticks[0] & mask, end = ticks[1] & mask;
    if (vk.timestamp_bits >= 64 && end < begin) {
        tally_timeline_count_problem(TALLY_TIMELINE_UNMATCHED);
        return;
    }
    double period = (double)vk.props.limits.timestampPeriod;
    uint64_t ns = (uint64_t)((double)((end - begin) & mask) * period + 0.5);
    uint64_t host_begin = 0;
    int placed = vk.calibrated && tally_timeline_clock_to_host(TALLY_DEVICE_API_VULKAN,
                                                               (double)begin * period, &host_begin);
    tally_timeline_add(&p->owner, ns, placed, host_begin);
}

// Opens the timestamp bracket of the command recorded next into p->cmd, for `owner` (a
// profile_timestamps run): resets a query pair and writes the begin stamp after the barrier that
// opens every command buffer (so it cannot be taken before earlier submissions finished).
// Returns the pool to pass to end_timestamp_locked, or VK_NULL_HANDLE when the command is not
// timed (no timestamps, or every pool full: counted). vk_lock held.
static VkQueryPool begin_timestamp_locked(vk_pending *p, const tally_timeline_owner *owner) {
    if (!vk.timestamp_bits) {
        return VK_NULL_HANDLE;
    }
    if (acquire_pair_locked(&p->ts_pool, &p->ts_pair) != 0) {
        tally_timeline_count_problem(TALLY_TIMELINE_OVERFLOWED);
        return VK_NULL_HANDLE;
    }
    p->timed = 1;
    p->owner = *owner;
    VkQueryPool pool = vk.query_pools[p->ts_pool]->pool;
    vk.f.vkCmdResetQueryPool(p->cmd, pool, (uint32_t)(2 * p->ts_pair), 2);
    vk.f.vkCmdWriteTimestamp(p->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, pool,
                             (uint32_t)(2 * p->ts_pair));
    tally_timeline_set_mode(TALLY_DEVICE_API_VULKAN, vk.calibrated
                                                         ? TALLY_TIMELINE_TIMESTAMPS_CALIBRATED
                                                         : TALLY_TIMELINE_TIMESTAMPS);
    return pool;
}

// Closes the bracket: the end stamp is latched once every earlier command has completed.
static void end_timestamp_locked(vk_pending *p, VkQueryPool pool) {
    if (pool) {
        vk.f.vkCmdWriteTimestamp(p->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool,
                                 (uint32_t)(2 * p->ts_pair + 1));
    }
}

// ---- submissions -----------------------------------------------------------------------------

static void free_pending_locked(vk_pending *p) {
    if (p->timed) {
        if (p->done) {
            bill_timestamps_locked(p);
        }
        vk_query_pool *q = vk.query_pools[p->ts_pool];
        q->free_pairs[q->num_free++] = (uint16_t)p->ts_pair;
    }
    if (p->cmd) {
        vk.f.vkFreeCommandBuffers(vk.device, vk.command_pool, 1, &p->cmd);
    }
    if (p->descriptor_pool) {
        vk.f.vkDestroyDescriptorPool(vk.device, p->descriptor_pool, NULL);
    }
    if (p->staging) {
        vk.f.vkDestroyBuffer(vk.device, p->staging, NULL);
    }
    if (p->staging_memory) {
        vk.f.vkFreeMemory(vk.device, p->staging_memory, NULL);
    }
    if (p->fence) {
        vk.f.vkDestroyFence(vk.device, p->fence, NULL);
    }
    free(p);
}

// Destroys the retired buffers whose last use precedes `oldest_busy` (every submission with a
// smaller serial has completed).
static void release_retired_locked(uint64_t oldest_busy) {
    vk_retired **link = &vk.retired;
    while (*link) {
        vk_retired *r = *link;
        if (r->last_use < oldest_busy) {
            *link = r->next;
            vk.f.vkDestroyBuffer(vk.device, r->buffer, NULL);
            vk.f.vkFreeMemory(vk.device, r->memory, NULL);
            free(r);
            tally_device_count_deferred_release();
        } else {
            link = &r->next;
        }
    }
}

// Frees every submission whose fence has signaled and that no thread is waiting on, then the
// retired buffers no submission in flight can use. Returns the serial of the oldest submission
// not known complete (vk.next_serial when none): everything before it has completed.
static uint64_t reclaim_locked(void) {
    vk_pending **link = &vk.pending_head;
    vk_pending *last = NULL;
    uint64_t oldest_busy = vk.next_serial;
    while (*link) {
        vk_pending *p = *link;
        if (!p->done && vk.f.vkGetFenceStatus(vk.device, p->fence) == VK_SUCCESS) {
            p->done = 1;
        }
        if (!p->done && p->serial < oldest_busy) {
            oldest_busy = p->serial;
        }
        if (p->done && p->waiters == 0) {
            *link = p->next;
            vk.num_pending--;
            free_pending_locked(p);
        } else {
            last = p;
            link = &p->next;
        }
    }
    vk.pending_tail = last;
    release_retired_locked(oldest_busy);
    return oldest_busy;
}

static void reopen_gate_locked(void);

// Waits until every submission with serial <= target has completed. The fences are waited for
// outside the lock (marked with `waiters` so nobody destroys them meanwhile); the calling thread
// counts as waiting for the profiler; each blocking wait is counted under `reason` (a
// tally_device_wait_reason).
static int32_t wait_serial(void *user_context, uint64_t target, int32_t reason,
                           const char *routine) {
    for (;;) {
        VkFence fences[TALLY_VK_WAIT_CHUNK];
        vk_pending *entries[TALLY_VK_WAIT_CHUNK];
        uint32_t n = 0;
        int more = 0;
        pthread_mutex_lock(&vk_lock);
        if (!atomic_load_explicit(&vk_ready, memory_order_relaxed)) {
            pthread_mutex_unlock(&vk_lock);
            return 0;
        }
        VkDevice device = vk.device;
        PFN_vkWaitForFences wait_for_fences = vk.f.vkWaitForFences;
        for (vk_pending *p = vk.pending_head; p && p->serial <= target; p = p->next) {
            if (p->done) {
                continue;
            }
            if (n == TALLY_VK_WAIT_CHUNK) {
                more = 1;
                break;
            }
            p->waiters++;
            entries[n] = p;
            fences[n++] = p->fence;
        }
        if (n > 0 && vk.gate_closed == 2) {
            reopen_gate_locked();
        }
        pthread_mutex_unlock(&vk_lock);
        if (n == 0) {
            return 0;
        }
        tally_context *waiting = tally_profiler_wait_begin();
        uint64_t begin = tally_device_wait_begin();
        VkResult r = wait_for_fences(device, n, fences, VK_TRUE, UINT64_MAX);
        tally_device_wait_end(reason, begin);
        tally_profiler_wait_end(waiting);
        pthread_mutex_lock(&vk_lock);
        for (uint32_t i = 0; i < n; i++) {
            entries[i]->waiters--;
            if (r == VK_SUCCESS) {
                entries[i]->done = 1;
            }
        }
        reclaim_locked();
        pthread_mutex_unlock(&vk_lock);
        if (r != VK_SUCCESS) {
            return vk_fail(user_context, TALLY_ERROR_DEVICE_SYNC_FAILED, routine, "vkWaitForFences",
                           r);
        }
        if (!more) {
            return 0;
        }
    }
}

// Keeps the number of submissions in flight bounded: waits for the oldest when at the limit.
static int32_t throttle(void *user_context, const char *routine) {
    pthread_mutex_lock(&vk_lock);
    reclaim_locked();
    uint64_t oldest = 0;
    if (vk.num_pending >= TALLY_VK_MAX_PENDING && vk.pending_head) {
        oldest = vk.pending_head->serial;
    }
    pthread_mutex_unlock(&vk_lock);
    return oldest ? wait_serial(user_context, oldest, TALLY_DEVICE_WAIT_THROTTLE, routine) : 0;
}

static uint64_t last_use_of(const vk_buffer *vb) {
    pthread_mutex_lock(&vk_lock);
    uint64_t serial = vb->last_use;
    pthread_mutex_unlock(&vk_lock);
    return serial;
}

// A barrier between everything before and after it in queue submission order (src → dst).
static void cmd_barrier(VkCommandBuffer cmd, VkPipelineStageFlags src_stage,
                        VkAccessFlags src_access, VkPipelineStageFlags dst_stage,
                        VkAccessFlags dst_access) {
    VkMemoryBarrier barrier;
    memset(&barrier, 0, sizeof(barrier));
    barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    barrier.srcAccessMask = src_access;
    barrier.dstAccessMask = dst_access;
    vk.f.vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, &barrier, 0, NULL, 0, NULL);
}

// Allocates and begins a one-time command buffer whose first command orders it after all
// earlier work on the queue.
static int32_t begin_commands_locked(void *user_context, int32_t code, const char *routine,
                                     VkCommandBuffer *out) {
    VkCommandBufferAllocateInfo alloc;
    memset(&alloc, 0, sizeof(alloc));
    alloc.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    alloc.commandPool = vk.command_pool;
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    VkResult r = vk.f.vkAllocateCommandBuffers(vk.device, &alloc, out);
    if (r != VK_SUCCESS) {
        *out = VK_NULL_HANDLE;
        return vk_fail(user_context, code, routine, "vkAllocateCommandBuffers", r);
    }
    VkCommandBufferBeginInfo begin;
    memset(&begin, 0, sizeof(begin));
    begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    r = vk.f.vkBeginCommandBuffer(*out, &begin);
    if (r != VK_SUCCESS) {
        vk.f.vkFreeCommandBuffers(vk.device, vk.command_pool, 1, out);
        *out = VK_NULL_HANDLE;
        return vk_fail(user_context, code, routine, "vkBeginCommandBuffer", r);
    }
    cmd_barrier(*out, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT,
                VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT);
    if (vk.gate_closed) {
        vk.f.vkCmdWaitEvents(*out, 1, &vk.gates[vk.num_gates - 1], VK_PIPELINE_STAGE_HOST_BIT,
                             VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, NULL, 0, NULL, 0, NULL);
    }
    return 0;
}

// Ends `p->cmd` (after a barrier making its writes visible to the host), submits it with a new
// fence and appends `p` to the pending list. On failure frees `p` and everything it holds.
static int32_t submit_locked(void *user_context, int32_t code, const char *routine, vk_pending *p) {
    cmd_barrier(p->cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT,
                VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    VkResult r = vk.f.vkEndCommandBuffer(p->cmd);
    if (r != VK_SUCCESS) {
        free_pending_locked(p);
        return vk_fail(user_context, code, routine, "vkEndCommandBuffer", r);
    }
    VkFenceCreateInfo fence_info;
    memset(&fence_info, 0, sizeof(fence_info));
    fence_info.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
    r = vk.f.vkCreateFence(vk.device, &fence_info, NULL, &p->fence);
    if (r != VK_SUCCESS) {
        p->fence = VK_NULL_HANDLE;
        free_pending_locked(p);
        return vk_fail(user_context, code, routine, "vkCreateFence", r);
    }
    VkSubmitInfo submit;
    memset(&submit, 0, sizeof(submit));
    submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &p->cmd;
    r = vk.f.vkQueueSubmit(vk.queue, 1, &submit, p->fence);
    if (r != VK_SUCCESS) {
        free_pending_locked(p);
        return vk_fail(user_context, code, routine, "vkQueueSubmit", r);
    }
    p->serial = vk.next_serial++;
    p->next = NULL;
    if (vk.pending_tail) {
        vk.pending_tail->next = p;
    } else {
        vk.pending_head = p;
    }
    vk.pending_tail = p;
    vk.num_pending++;
    return 0;
}

// ---- memory ----------------------------------------------------------------------------------

// The first memory type allowed by `bits` with all of required|preferred, else with required.
static int32_t find_memory_type(uint32_t bits, VkMemoryPropertyFlags required,
                                VkMemoryPropertyFlags preferred) {
    for (int pass = 0; pass < 2; pass++) {
        VkMemoryPropertyFlags want = pass == 0 ? (required | preferred) : required;
        for (uint32_t i = 0; i < vk.memory.memoryTypeCount; i++) {
            if ((bits & (1u << i)) && (vk.memory.memoryTypes[i].propertyFlags & want) == want) {
                return (int32_t)i;
            }
        }
    }
    return -1;
}

// Creates a buffer with its own memory. Returns 0 or a reported error with `code`.
static int32_t create_buffer(void *user_context, int32_t code, const char *routine,
                             VkDeviceSize size, VkBufferUsageFlags usage,
                             VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred,
                             VkBuffer *buffer, VkDeviceMemory *memory,
                             VkMemoryPropertyFlags *flags) {
    *buffer = VK_NULL_HANDLE;
    *memory = VK_NULL_HANDLE;
    VkBufferCreateInfo info;
    memset(&info, 0, sizeof(info));
    info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
    info.size = size;
    info.usage = usage;
    info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    VkResult r = vk.f.vkCreateBuffer(vk.device, &info, NULL, buffer);
    if (r != VK_SUCCESS) {
        *buffer = VK_NULL_HANDLE;
        return tally_report_error(user_context, code,
                                  "%s: vkCreateBuffer of %llu bytes failed: %s (%d)", routine,
                                  (unsigned long long)size, vk_result_name(r), (int)r);
    }
    VkMemoryRequirements req;
    vk.f.vkGetBufferMemoryRequirements(vk.device, *buffer, &req);
    int32_t type = find_memory_type(req.memoryTypeBits, required, preferred);
    if (type < 0) {
        vk.f.vkDestroyBuffer(vk.device, *buffer, NULL);
        *buffer = VK_NULL_HANDLE;
        return tally_report_error(user_context, code,
                                  "%s: no Vulkan memory type fits a buffer of %llu bytes "
                                  "(type bits 0x%x, property flags 0x%x)",
                                  routine, (unsigned long long)size, req.memoryTypeBits,
                                  (unsigned)required);
    }
    VkMemoryAllocateInfo alloc;
    memset(&alloc, 0, sizeof(alloc));
    alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    alloc.allocationSize = req.size;
    alloc.memoryTypeIndex = (uint32_t)type;
    r = vk.f.vkAllocateMemory(vk.device, &alloc, NULL, memory);
    if (r == VK_SUCCESS) {
        r = vk.f.vkBindBufferMemory(vk.device, *buffer, *memory, 0);
        if (r != VK_SUCCESS) {
            vk.f.vkFreeMemory(vk.device, *memory, NULL);
        }
    }
    if (r != VK_SUCCESS) {
        *memory = VK_NULL_HANDLE;
        vk.f.vkDestroyBuffer(vk.device, *buffer, NULL);
        *buffer = VK_NULL_HANDLE;
        return tally_report_error(user_context, code,
                                  "%s: allocating %llu bytes of Vulkan memory (type %d) failed: "
                                  "%s (%d)",
                                  routine, (unsigned long long)req.size, type, vk_result_name(r),
                                  (int)r);
    }
    *flags = vk.memory.memoryTypes[type].propertyFlags;
    return 0;
}

// A host-visible buffer for one copy, mapped at *mapped.
typedef struct vk_staging {
    VkBuffer buffer;
    VkDeviceMemory memory;
    void *mapped;
    int32_t coherent;
} vk_staging;

static void destroy_staging(vk_staging *s) {
    if (s->buffer) {
        vk.f.vkDestroyBuffer(vk.device, s->buffer, NULL);
    }
    if (s->memory) {
        vk.f.vkFreeMemory(vk.device, s->memory, NULL);  // unmaps
    }
    memset(s, 0, sizeof(*s));
}

static int32_t create_staging(void *user_context, int32_t code, const char *routine,
                              VkDeviceSize size, VkBufferUsageFlags usage, vk_staging *s) {
    memset(s, 0, sizeof(*s));
    VkMemoryPropertyFlags flags = 0;
    int32_t r =
        create_buffer(user_context, code, routine, size, usage, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
                      VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, &s->buffer, &s->memory, &flags);
    if (r != 0) {
        return r;
    }
    VkResult vr = vk.f.vkMapMemory(vk.device, s->memory, 0, VK_WHOLE_SIZE, 0, &s->mapped);
    if (vr != VK_SUCCESS) {
        destroy_staging(s);
        return vk_fail(user_context, code, routine, "vkMapMemory of a staging buffer", vr);
    }
    s->coherent = (flags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) != 0;
    return 0;
}

static void flush_mapped(VkDeviceMemory memory) {
    VkMappedMemoryRange range;
    memset(&range, 0, sizeof(range));
    range.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE;
    range.memory = memory;
    range.size = VK_WHOLE_SIZE;
    vk.f.vkFlushMappedMemoryRanges(vk.device, 1, &range);
}

static void invalidate_mapped(VkDeviceMemory memory) {
    VkMappedMemoryRange range;
    memset(&range, 0, sizeof(range));
    range.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE;
    range.memory = memory;
    range.size = VK_WHOLE_SIZE;
    vk.f.vkInvalidateMappedMemoryRanges(vk.device, 1, &range);
}

// buf's vk_buffer, after checking it is live Vulkan device memory.
static int32_t buffer_of(void *user_context, const halide_buffer_t *buf, const char *routine,
                         int32_t code, vk_buffer **out) {
    *out = NULL;
    if (!buf) {
        return halide_error_buffer_is_null(user_context, routine);
    }
    if (!buf->device || buf->device_interface != &vulkan_interface) {
        return tally_report_error(user_context, code,
                                  "%s: the buffer has no Vulkan device memory (device interface "
                                  "%s)",
                                  routine,
                                  buf->device_interface && buf->device_interface->name
                                      ? buf->device_interface->name
                                      : "none");
    }
    vk_buffer *vb = (vk_buffer *)(uintptr_t)buf->device;
    if (vb->magic != TALLY_VK_BUFFER_MAGIC) {
        return tally_report_error(user_context, code,
                                  "%s: the buffer's device handle is not a Vulkan allocation",
                                  routine);
    }
    if (vb->dead) {
        return tally_report_error(user_context, code,
                                  "%s: the buffer's Vulkan memory was destroyed by "
                                  "halide_device_release; free it and allocate again",
                                  routine);
    }
    *out = vb;
    return 0;
}

// ---- the interface's operations ---------------------------------------------------------------

static int32_t vk_device_malloc(void *user_context, halide_buffer_t *buf,
                                const halide_device_interface_t *iface) {
    (void)iface;
    const char *routine = "halide_device_malloc (vulkan)";
    int32_t r = ensure_ready(user_context, routine);
    if (r != 0) {
        return r;
    }
    uint64_t bytes = tally_buffer_size_in_bytes(buf);
    VkDeviceSize size = bytes < 4 ? 4 : (bytes + 3) & ~(VkDeviceSize)3;
    vk_buffer *vb = (vk_buffer *)calloc(1, sizeof(vk_buffer));
    if (!vb) {
        return tally_report_error(user_context, TALLY_ERROR_DEVICE_MALLOC_FAILED,
                                  "%s: out of host memory", routine);
    }
    VkMemoryPropertyFlags flags = 0;
    r = create_buffer(user_context, TALLY_ERROR_DEVICE_MALLOC_FAILED, routine, size,
                      VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                          VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                      0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, &vb->buffer, &vb->memory, &flags);
    if (r != 0) {
        free(vb);
        return r;
    }
    vb->magic = TALLY_VK_BUFFER_MAGIC;
    vb->size = size;
    vb->coherent = (flags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) != 0;
    if ((flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) && !vk.force_staging) {
        VkResult vr = vk.f.vkMapMemory(vk.device, vb->memory, 0, VK_WHOLE_SIZE, 0, &vb->mapped);
        if (vr != VK_SUCCESS) {
            vb->mapped = NULL;  // fall back to staging copies
        }
    }
    pthread_mutex_lock(&vk_lock);
    vb->next = vk.buffers;
    if (vk.buffers) {
        vk.buffers->prev = vb;
    }
    vk.buffers = vb;
    pthread_mutex_unlock(&vk_lock);
    buf->device = (uint64_t)(uintptr_t)vb;
    return 0;
}

static int32_t vk_device_free(void *user_context, halide_buffer_t *buf) {
    const char *routine = "halide_device_free (vulkan)";
    vk_buffer *vb = (vk_buffer *)(uintptr_t)buf->device;
    if (!vb) {
        return 0;
    }
    if (vb->magic != TALLY_VK_BUFFER_MAGIC) {
        return tally_report_error(user_context, TALLY_ERROR_DEVICE_FREE_FAILED,
                                  "%s: the buffer's device handle is not a Vulkan allocation",
                                  routine);
    }
    // Never waits: memory that queued work may still use is retired, not destroyed.
    if (!vb->dead) {
        vk_retired *retired = (vk_retired *)malloc(sizeof(vk_retired));
        if (!retired) {
            // No host memory for the record: waiting for the last use is the only safe way left.
            int32_t r = wait_serial(user_context, last_use_of(vb), TALLY_DEVICE_WAIT_FREE, routine);
            if (r != 0) {
                return r;
            }
        }
        pthread_mutex_lock(&vk_lock);
        if (!vb->dead) {
            if (vb->prev) {
                vb->prev->next = vb->next;
            } else {
                vk.buffers = vb->next;
            }
            if (vb->next) {
                vb->next->prev = vb->prev;
            }
            if (vb->last_use < reclaim_locked() || !retired) {
                vk.f.vkDestroyBuffer(vk.device, vb->buffer, NULL);
                vk.f.vkFreeMemory(vk.device, vb->memory, NULL);
            } else {
                retired->last_use = vb->last_use;
                retired->buffer = vb->buffer;
                retired->memory = vb->memory;
                retired->next = vk.retired;
                vk.retired = retired;
                retired = NULL;
                tally_device_count_deferred_free();
            }
        }
        pthread_mutex_unlock(&vk_lock);
        free(retired);
    }
    vb->magic = 0;
    free(vb);
    buf->device = 0;
    return 0;
}

// The checks every copy starts with: Vulkan ready, buf on live Vulkan memory that still holds its
// span. Sets *vb and *bytes (0: nothing to copy).
static int32_t begin_copy(void *user_context, halide_buffer_t *buf, const char *routine,
                          int32_t code, vk_buffer **vb, uint64_t *bytes) {
    *bytes = 0;
    int32_t r = ensure_ready(user_context, routine);
    if (r == 0) {
        r = buffer_of(user_context, buf, routine, code, vb);
    }
    if (r != 0) {
        return r;
    }
    uint64_t span = tally_buffer_size_in_bytes(buf);
    if (span > (*vb)->size) {
        return tally_report_error(user_context, code,
                                  "%s: the buffer spans %llu bytes but its device allocation has "
                                  "%llu (its shape changed after device_malloc)",
                                  routine, (unsigned long long)span,
                                  (unsigned long long)(*vb)->size);
    }
    *bytes = span;
    return 0;
}

// Records and submits a copy of `bytes` between vb and the staging buffer `s` (to_device: from
// s to vb) and sets *serial to its submission. A copy to the device hands `s` to the submission
// (freed once the copy completed; `s` is cleared); a copy to the host leaves it the caller's. On
// failure everything is freed, `s` included.
static int32_t submit_staged_copy(void *user_context, int32_t code, const char *routine,
                                  vk_buffer *vb, vk_staging *s, uint64_t bytes, int to_device,
                                  uint64_t *serial) {
    vk_pending *p = (vk_pending *)calloc(1, sizeof(vk_pending));
    if (!p) {
        destroy_staging(s);
        return tally_report_error(user_context, code, "%s: out of host memory", routine);
    }
    // profile_timestamps: the device copy is timed and billed to its copy slot.
    tally_timeline_owner owner = tally_timeline_owner_now();
    const int want_timestamps = tally_timeline_owner_wants_timestamps(&owner);
    pthread_mutex_lock(&vk_lock);
    int32_t r = begin_commands_locked(user_context, code, routine, &p->cmd);
    if (r != 0) {
        pthread_mutex_unlock(&vk_lock);
        free(p);
        destroy_staging(s);
        return r;
    }
    VkQueryPool query_pool = want_timestamps ? begin_timestamp_locked(p, &owner) : VK_NULL_HANDLE;
    VkBufferCopy region = {0, 0, bytes};
    if (to_device) {
        vk.f.vkCmdCopyBuffer(p->cmd, s->buffer, vb->buffer, 1, &region);
        p->staging = s->buffer;
        p->staging_memory = s->memory;
        memset(s, 0, sizeof(*s));
    } else {
        vk.f.vkCmdCopyBuffer(p->cmd, vb->buffer, s->buffer, 1, &region);
    }
    end_timestamp_locked(p, query_pool);
    r = submit_locked(user_context, code, routine, p);
    *serial = vk.next_serial - 1;
    if (r == 0) {
        vb->last_use = *serial;
    }
    pthread_mutex_unlock(&vk_lock);
    if (r != 0) {
        destroy_staging(s);
    }
    return r;
}

// Copies between host memory and mapped memory: after a write to the device side flushes, before
// a read from it invalidates, where the memory is not host-coherent.
static void copy_mapped(uint8_t *host, void *mapped, VkDeviceMemory memory, int32_t coherent,
                        uint64_t bytes, int to_device) {
    if (to_device) {
        memcpy(mapped, host, (size_t)bytes);
        if (!coherent) {
            flush_mapped(memory);
        }
    } else {
        if (!coherent) {
            invalidate_mapped(memory);
        }
        memcpy(host, mapped, (size_t)bytes);
    }
}

// One copy of the buffer's span: directly through the mapping when the memory is host-visible
// (after earlier submissions that use the buffer finished), else through a staging buffer.
static int32_t vk_copy(void *user_context, halide_buffer_t *buf, int to_device) {
    const char *routine =
        to_device ? "halide_copy_to_device (vulkan)" : "halide_copy_to_host (vulkan)";
    const int32_t code =
        to_device ? TALLY_ERROR_COPY_TO_DEVICE_FAILED : TALLY_ERROR_COPY_TO_HOST_FAILED;
    vk_buffer *vb;
    uint64_t bytes;
    int32_t r = begin_copy(user_context, buf, routine, code, &vb, &bytes);
    if (r != 0 || bytes == 0) {
        return r;
    }
    uint8_t *host = tally_buffer_begin(buf);
    const int32_t reason =
        to_device ? TALLY_DEVICE_WAIT_COPY_TO_DEVICE : TALLY_DEVICE_WAIT_COPY_TO_HOST;
    if (vb->mapped) {
        r = wait_serial(user_context, last_use_of(vb), reason, routine);
        if (r == 0) {
            copy_mapped(host, vb->mapped, vb->memory, vb->coherent, bytes, to_device);
        }
        return r;
    }
    r = throttle(user_context, routine);
    vk_staging s;
    if (r == 0) {
        r = create_staging(
            user_context, code, routine, bytes,
            to_device ? VK_BUFFER_USAGE_TRANSFER_SRC_BIT : VK_BUFFER_USAGE_TRANSFER_DST_BIT, &s);
    }
    if (r != 0) {
        return r;
    }
    if (to_device) {
        copy_mapped(host, s.mapped, s.memory, s.coherent, bytes, 1);
    }
    uint64_t serial = 0;
    r = submit_staged_copy(user_context, code, routine, vb, &s, bytes, to_device, &serial);
    if (r != 0 || to_device) {
        return r;
    }
    // A copy to the host kept the staging buffer: the submission may be reclaimed before we read.
    r = wait_serial(user_context, serial, reason, routine);
    if (r == 0) {
        copy_mapped(host, s.mapped, s.memory, s.coherent, bytes, 0);
    }
    destroy_staging(&s);
    return r;
}

static int32_t vk_copy_to_device(void *user_context, halide_buffer_t *buf) {
    return vk_copy(user_context, buf, 1);
}

static int32_t vk_copy_to_host(void *user_context, halide_buffer_t *buf) {
    return vk_copy(user_context, buf, 0);
}

static int32_t vk_device_sync(void *user_context, halide_buffer_t *buf) {
    const char *routine = "halide_device_sync (vulkan)";
    if (!buf || !buf->device || buf->device_interface != &vulkan_interface) {
        return 0;
    }
    vk_buffer *vb = (vk_buffer *)(uintptr_t)buf->device;
    if (vb->magic != TALLY_VK_BUFFER_MAGIC || vb->dead) {
        return 0;
    }
    return wait_serial(user_context, last_use_of(vb), TALLY_DEVICE_WAIT_SYNC, routine);
}

static int32_t vk_device_sync_global(void *user_context, const halide_device_interface_t *iface) {
    (void)iface;
    // Nothing can be in flight before initialization; do not initialize just to wait.
    return wait_serial(user_context, UINT64_MAX, TALLY_DEVICE_WAIT_SYNC_GLOBAL,
                       "halide_device_sync_global (vulkan)");
}

// ---- testing gate ------------------------------------------------------------------------------

// Lets the device run what was held back (a no-op when the gate is open). vk_lock held.
static void open_gate_locked(void) {
    if (vk.gate_closed) {
        vk.f.vkSetEvent(vk.device, vk.gates[vk.num_gates - 1]);
        vk.gate_closed = 0;
    }
}

// Closes the gate (mode 1 or 2) behind a fresh event: one that queued work may still wait on is
// never reset. Returns 0, or -1 with the gate left open. vk_lock held.
static int32_t close_gate_locked(int32_t mode, VkResult *result) {
    *result = VK_SUCCESS;
    if (vk.num_gates == TALLY_VK_MAX_GATES) {
        return -1;
    }
    VkEventCreateInfo info;
    memset(&info, 0, sizeof(info));
    info.sType = VK_STRUCTURE_TYPE_EVENT_CREATE_INFO;
    *result = vk.f.vkCreateEvent(vk.device, &info, NULL, &vk.gates[vk.num_gates]);
    if (*result != VK_SUCCESS) {
        return -1;
    }
    vk.num_gates++;
    vk.gate_closed = mode;
    return 0;
}

// Mode 2, at a wait: lets everything queued so far run and holds what is submitted later (the
// gate stays open when no more events can be made). vk_lock held.
static void reopen_gate_locked(void) {
    open_gate_locked();
    VkResult ignored;
    (void)close_gate_locked(2, &ignored);
}

int32_t tally_testing_vulkan_live_buffers(void) {
    int32_t n = 0;
    pthread_mutex_lock(&vk_lock);
    for (const vk_buffer *b = vk.buffers; b; b = b->next) {
        n++;
    }
    pthread_mutex_unlock(&vk_lock);
    return n;
}

// A host gate in front of the queue, so tests can order host calls against device work without
// timing it: closed, every later submission starts with vkCmdWaitEvents on an event that only
// the host sets: when the gate opens, in mode 2 when a thread waits for queued work (the work
// queued so far is let through, later work is held again), and at teardown (which never waits
// on a closed gate).
int32_t tally_testing_vulkan_hold(int32_t mode) {
    const char *routine = "tally_testing_vulkan_hold";
    if (mode < 0 || mode > 2) {
        return tally_report_error(NULL, TALLY_ERROR_BAD_ARGUMENT, "%s: mode %d is not 0, 1 or 2",
                                  routine, (int)mode);
    }
    int32_t r = ensure_ready(NULL, routine);
    if (r != 0) {
        return r;
    }
    pthread_mutex_lock(&vk_lock);
    open_gate_locked();
    VkResult vr = VK_SUCCESS;
    int32_t failed = mode != 0 && close_gate_locked(mode, &vr) != 0;
    pthread_mutex_unlock(&vk_lock);
    if (failed && vr != VK_SUCCESS) {
        return vk_fail(NULL, TALLY_ERROR_DEVICE_MALLOC_FAILED, routine, "vkCreateEvent", vr);
    }
    if (failed) {
        return tally_report_error(NULL, TALLY_ERROR_BAD_ARGUMENT,
                                  "%s: more than %d closings before a release", routine,
                                  TALLY_VK_MAX_GATES);
    }
    return 0;
}

// Destroys every Vulkan object (waiting for the device first). vk_lock held.
static void teardown_locked(void) {
    if (atomic_load_explicit(&vk_ready, memory_order_relaxed)) {
        // Counted as a wait only when submissions were still in flight, held ones included: asked
        // before the gate opens, so that held work cannot complete in between.
        int busy = reclaim_locked() < vk.next_serial;
        open_gate_locked();
        uint64_t begin = tally_device_wait_begin();
        VkResult idle = vk.f.vkDeviceWaitIdle(vk.device);
        if (busy) {
            tally_device_wait_end(TALLY_DEVICE_WAIT_RELEASE, begin);
        }
        release_retired_locked(UINT64_MAX);
        for (vk_pending *p = vk.pending_head; p;) {
            vk_pending *next = p->next;
            p->done = p->done || idle == VK_SUCCESS;  // run end: bill what is still timed
            free_pending_locked(p);
            p = next;
        }
        for (int32_t i = 0; i < vk.num_query_pools; i++) {
            vk.f.vkDestroyQueryPool(vk.device, vk.query_pools[i]->pool, NULL);
            free(vk.query_pools[i]);
            vk.query_pools[i] = NULL;
        }
        vk.num_query_pools = 0;
        for (int32_t i = 0; i < vk.num_gates; i++) {
            vk.f.vkDestroyEvent(vk.device, vk.gates[i], NULL);
        }
        vk.num_gates = 0;
        vk.pending_head = vk.pending_tail = NULL;
        vk.num_pending = 0;
        for (vk_module_cache *c = vk.caches; c; c = c->next) {
            pthread_mutex_lock(&c->lock);
            for (int32_t k = 0; k < c->num_kernels; k++) {
                vk_kernel_state *ks = &c->kernels[k];
                for (int32_t i = 0; i < ks->num_pipelines; i++) {
                    vk.f.vkDestroyPipeline(vk.device, ks->pipelines[i].pipeline, NULL);
                }
                free(ks->pipelines);
                if (ks->layout) {
                    vk.f.vkDestroyPipelineLayout(vk.device, ks->layout, NULL);
                }
                if (ks->set_layout) {
                    vk.f.vkDestroyDescriptorSetLayout(vk.device, ks->set_layout, NULL);
                }
                if (ks->module) {
                    vk.f.vkDestroyShaderModule(vk.device, ks->module, NULL);
                }
                memset(ks, 0, sizeof(*ks));
                ks->push_size = -1;
            }
            pthread_mutex_unlock(&c->lock);
        }
        // Buffers still allocated lose their memory; halide_device_free then only frees the
        // record.
        for (vk_buffer *b = vk.buffers; b; b = b->next) {
            vk.f.vkDestroyBuffer(vk.device, b->buffer, NULL);
            vk.f.vkFreeMemory(vk.device, b->memory, NULL);
            b->buffer = VK_NULL_HANDLE;
            b->memory = VK_NULL_HANDLE;
            b->mapped = NULL;
            b->dead = 1;
        }
        vk.buffers = NULL;
        destroy_core_locked();
        tally_timeline_clock_forget(TALLY_DEVICE_API_VULKAN);
        atomic_store_explicit(&vk_ready, 0, memory_order_release);
    }
    // A failed initialization is forgotten too: the next use tries (and reports) again.
    vk.failed = 0;
    vk.failure_reported = 0;
    vk.failure[0] = '\0';
}

static int32_t vk_release(void *user_context, const halide_device_interface_t *iface) {
    (void)user_context;
    (void)iface;
    pthread_mutex_lock(&vk_lock);
    teardown_locked();
    pthread_mutex_unlock(&vk_lock);
    return 0;
}

static void vk_collect_completed(void) {
    if (atomic_load_explicit(&vk_ready, memory_order_acquire)) {
        pthread_mutex_lock(&vk_lock);
        if (atomic_load_explicit(&vk_ready, memory_order_relaxed)) {
            calibrate_clocks_locked(0);  // re-pair: the drift fit
            reclaim_locked();
        }
        pthread_mutex_unlock(&vk_lock);
    }
}

static void vk_drain(int32_t reason) {
    // At exit: never block on a lock some other thread holds (as release_at_exit), never
    // initialize, and never wait behind a closed testing gate.
    if (!atomic_load_explicit(&vk_ready, memory_order_acquire) ||
        pthread_mutex_trylock(&vk_lock) != 0) {
        return;
    }
    int ready = atomic_load_explicit(&vk_ready, memory_order_relaxed);
    if (ready) {
        open_gate_locked();
    }
    pthread_mutex_unlock(&vk_lock);
    if (ready) {
        (void)wait_serial(NULL, UINT64_MAX, reason, "the at-exit report (vulkan)");
    }
}

static void release_at_exit(void) {
    // Never block process exit on a lock some other thread holds.
    if (pthread_mutex_trylock(&vk_lock) == 0) {
        teardown_locked();
        pthread_mutex_unlock(&vk_lock);
    }
}

static const halide_device_interface_t vulkan_interface = TALLY_DEVICE_INTERFACE("vulkan", vk);

const halide_device_interface_t *halide_vulkan_device_interface(void) {
    return ensure_ready(NULL, NULL) == 0 ? &vulkan_interface : NULL;
}

// ---- kernels ---------------------------------------------------------------------------------

// The table's cache, created on first use (compare-exchange: concurrent first launches agree).
static vk_module_cache *cache_of(tally_kernel_table *table) {
    vk_module_cache *cache = (vk_module_cache *)__atomic_load_n(
        &table->device_state[TALLY_DEVICE_API_VULKAN], __ATOMIC_ACQUIRE);
    if (cache) {
        return cache;
    }
    vk_module_cache *fresh = (vk_module_cache *)calloc(1, sizeof(vk_module_cache));
    if (!fresh) {
        return NULL;
    }
    fresh->num_kernels = table->num_kernels;
    fresh->kernels = (vk_kernel_state *)calloc(
        (size_t)(table->num_kernels > 0 ? table->num_kernels : 1), sizeof(vk_kernel_state));
    if (!fresh->kernels) {
        free(fresh);
        return NULL;
    }
    for (int32_t i = 0; i < table->num_kernels; i++) {
        fresh->kernels[i].push_size = -1;
    }
    pthread_mutex_init(&fresh->lock, NULL);
    void *expected = NULL;
    if (!__atomic_compare_exchange_n(&table->device_state[TALLY_DEVICE_API_VULKAN], &expected,
                                     (void *)fresh, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        pthread_mutex_destroy(&fresh->lock);
        free(fresh->kernels);
        free(fresh);
        return (vk_module_cache *)expected;
    }
    pthread_mutex_lock(&vk_lock);
    fresh->next = vk.caches;
    vk.caches = fresh;
    pthread_mutex_unlock(&vk_lock);
    return fresh;
}

// The pipeline of kernel `k` for a work-group size, creating its shader module, layouts and
// pipeline on first use. Cache lock held.
static int32_t get_pipeline_locked(void *user_context, const char *routine,
                                   const tally_kernel_source *ksrc, vk_kernel_state *ks,
                                   int32_t push_size, const int32_t threads[3],
                                   VkPipeline *pipeline) {
    const int32_t code = TALLY_ERROR_DEVICE_RUN_FAILED;
    VkResult r;
    if (!ks->module) {
        VkShaderModuleCreateInfo info;
        memset(&info, 0, sizeof(info));
        info.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
        info.codeSize = (size_t)ksrc->code_size;
        uint32_t *copy = NULL;
        if (((uintptr_t)ksrc->code & 3) != 0) {
            copy = (uint32_t *)malloc((size_t)ksrc->code_size);
            if (!copy) {
                return tally_report_error(user_context, code, "%s: kernel %s: out of host memory",
                                          routine, ksrc->name);
            }
            memcpy(copy, ksrc->code, (size_t)ksrc->code_size);
            info.pCode = copy;
        } else {
            info.pCode = (const uint32_t *)(const void *)ksrc->code;
        }
        int32_t one_time = tally_profiler_one_time_begin(TALLY_ONE_TIME_COMPILE);
        r = vk.f.vkCreateShaderModule(vk.device, &info, NULL, &ks->module);
        tally_profiler_one_time_end(one_time);
        free(copy);
        if (r != VK_SUCCESS) {
            ks->module = VK_NULL_HANDLE;
            return tally_report_error(user_context, code,
                                      "%s: vkCreateShaderModule failed for kernel %s: %s (%d)",
                                      routine, ksrc->name, vk_result_name(r), (int)r);
        }
    }
    if (ks->push_size < 0) {
        if (ksrc->num_buffers > 0 && !ks->set_layout) {
            VkDescriptorSetLayoutBinding *bindings = (VkDescriptorSetLayoutBinding *)calloc(
                (size_t)ksrc->num_buffers, sizeof(VkDescriptorSetLayoutBinding));
            if (!bindings) {
                return tally_report_error(user_context, code, "%s: kernel %s: out of host memory",
                                          routine, ksrc->name);
            }
            for (int32_t i = 0; i < ksrc->num_buffers; i++) {
                bindings[i].binding = (uint32_t)i;
                bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
                bindings[i].descriptorCount = 1;
                bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
            }
            VkDescriptorSetLayoutCreateInfo info;
            memset(&info, 0, sizeof(info));
            info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
            info.bindingCount = (uint32_t)ksrc->num_buffers;
            info.pBindings = bindings;
            r = vk.f.vkCreateDescriptorSetLayout(vk.device, &info, NULL, &ks->set_layout);
            free(bindings);
            if (r != VK_SUCCESS) {
                ks->set_layout = VK_NULL_HANDLE;
                return tally_report_error(user_context, code,
                                          "%s: vkCreateDescriptorSetLayout failed for kernel %s: "
                                          "%s (%d)",
                                          routine, ksrc->name, vk_result_name(r), (int)r);
            }
        }
        VkPushConstantRange range = {VK_SHADER_STAGE_COMPUTE_BIT, 0, (uint32_t)push_size};
        VkPipelineLayoutCreateInfo info;
        memset(&info, 0, sizeof(info));
        info.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
        info.setLayoutCount = ks->set_layout ? 1 : 0;
        info.pSetLayouts = ks->set_layout ? &ks->set_layout : NULL;
        info.pushConstantRangeCount = push_size > 0 ? 1 : 0;
        info.pPushConstantRanges = push_size > 0 ? &range : NULL;
        r = vk.f.vkCreatePipelineLayout(vk.device, &info, NULL, &ks->layout);
        if (r != VK_SUCCESS) {
            ks->layout = VK_NULL_HANDLE;
            return tally_report_error(user_context, code,
                                      "%s: vkCreatePipelineLayout failed for kernel %s: %s (%d)",
                                      routine, ksrc->name, vk_result_name(r), (int)r);
        }
        ks->push_size = push_size;
    } else if (ks->push_size != push_size) {
        return tally_report_error(user_context, code,
                                  "%s: kernel %s was launched before with %d bytes of scalar "
                                  "arguments, now with %d",
                                  routine, ksrc->name, ks->push_size, push_size);
    }
    for (int32_t i = 0; i < ks->num_pipelines; i++) {
        const int32_t *t = ks->pipelines[i].threads;
        if (t[0] == threads[0] && t[1] == threads[1] && t[2] == threads[2]) {
            *pipeline = ks->pipelines[i].pipeline;
            return 0;
        }
    }
    if (ks->num_pipelines == ks->cap_pipelines) {
        int32_t cap = ks->cap_pipelines ? ks->cap_pipelines * 2 : 4;
        vk_pipeline_entry *grown =
            (vk_pipeline_entry *)realloc(ks->pipelines, (size_t)cap * sizeof(vk_pipeline_entry));
        if (!grown) {
            return tally_report_error(user_context, code, "%s: kernel %s: out of host memory",
                                      routine, ksrc->name);
        }
        ks->pipelines = grown;
        ks->cap_pipelines = cap;
    }
    uint32_t spec_data[3] = {(uint32_t)threads[0], (uint32_t)threads[1], (uint32_t)threads[2]};
    VkSpecializationMapEntry entries[3] = {
        {0, 0, 4},
        {1, 4, 4},
        {2, 8, 4},
    };
    VkSpecializationInfo spec = {3, entries, sizeof(spec_data), spec_data};
    VkComputePipelineCreateInfo info;
    memset(&info, 0, sizeof(info));
    info.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
    info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    info.stage.module = ks->module;
    info.stage.pName = "main";
    info.stage.pSpecializationInfo = &spec;
    info.layout = ks->layout;
    info.basePipelineIndex = -1;
    VkPipeline created = VK_NULL_HANDLE;
    int32_t one_time = tally_profiler_one_time_begin(TALLY_ONE_TIME_COMPILE);
    r = vk.f.vkCreateComputePipelines(vk.device, VK_NULL_HANDLE, 1, &info, NULL, &created);
    tally_profiler_one_time_end(one_time);
    if (r != VK_SUCCESS) {
        return tally_report_error(user_context, code,
                                  "%s: vkCreateComputePipelines failed for kernel %s with "
                                  "work-group size %dx%dx%d: %s (%d)",
                                  routine, ksrc->name, threads[0], threads[1], threads[2],
                                  vk_result_name(r), (int)r);
    }
    vk_pipeline_entry *e = &ks->pipelines[ks->num_pipelines++];
    e->threads[0] = threads[0];
    e->threads[1] = threads[1];
    e->threads[2] = threads[2];
    e->pipeline = created;
    *pipeline = created;
    return 0;
}

static const char *api_name(int32_t api) {
    switch (api) {
    case TALLY_DEVICE_API_CUDA:
        return "CUDA";
    case TALLY_DEVICE_API_VULKAN:
        return "Vulkan";
    default:
        return "unknown-API";
    }
}

int32_t halide_vulkan_run(void *user_context, void *state, const char *entry_name, int32_t blocks_x,
                          int32_t blocks_y, int32_t blocks_z, int32_t threads_x, int32_t threads_y,
                          int32_t threads_z, int32_t shared_mem_bytes, const int64_t *arg_sizes,
                          void **args, const uint8_t *arg_is_buffer) {
    const char *routine = "halide_vulkan_run";
    const int32_t code = TALLY_ERROR_DEVICE_RUN_FAILED;
    int32_t r = ensure_ready(user_context, routine);
    if (r != 0) {
        return r;
    }
    r = tally_fault_check(user_context, TALLY_FAULT_LAUNCH, "%s: kernel %s: launch failed", routine,
                          entry_name ? entry_name : "(null)");
    if (r != 0) {
        return r;
    }
    if (!state || !entry_name) {
        return tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT, "%s: the %s is NULL",
                                  routine, !state ? "kernel table (state)" : "kernel name");
    }
    tally_kernel_table *table = (tally_kernel_table *)state;
    if (table->abi_version != TALLY_RUNTIME_ABI_VERSION) {
        return tally_report_error(user_context, code,
                                  "%s: kernel %s: the kernel table has ABI version %d, the runtime "
                                  "expects %d",
                                  routine, entry_name, table->abi_version,
                                  TALLY_RUNTIME_ABI_VERSION);
    }
    int32_t index = -1, other_api = 0;
    for (int32_t i = 0; i < table->num_kernels && index < 0; i++) {
        const tally_kernel_source *k = &table->kernels[i];
        if (k->name && strcmp(k->name, entry_name) == 0) {
            if (k->device_api == TALLY_DEVICE_API_VULKAN) {
                index = i;
            } else if (!other_api) {
                other_api = k->device_api ? k->device_api : -1;
            }
        }
    }
    if (index < 0) {
        if (other_api) {
            return tally_report_error(user_context, code,
                                      "%s: kernel %s is a %s kernel, not a Vulkan (SPIR-V) one",
                                      routine, entry_name, api_name(other_api));
        }
        return tally_report_error(user_context, code,
                                  "%s: no Vulkan kernel named %s in the module's kernel table "
                                  "(%d kernels)",
                                  routine, entry_name, table->num_kernels);
    }
    const tally_kernel_source *ksrc = &table->kernels[index];
    if (!ksrc->code || ksrc->code_size == 0 || ksrc->code_size % 4 != 0) {
        return tally_report_error(user_context, code,
                                  "%s: kernel %s has no valid SPIR-V (%llu bytes; must be a "
                                  "non-zero multiple of 4)",
                                  routine, entry_name, (unsigned long long)ksrc->code_size);
    }
    if (shared_mem_bytes != 0) {
        return tally_report_error(user_context, code,
                                  "%s: kernel %s asks for %d bytes of dynamic shared memory; the "
                                  "Vulkan back end supports none (declare shared arrays in the "
                                  "shader)",
                                  routine, entry_name, shared_mem_bytes);
    }
    const int32_t blocks[3] = {blocks_x, blocks_y, blocks_z};
    const int32_t threads[3] = {threads_x, threads_y, threads_z};
    const VkPhysicalDeviceLimits *limits = &vk.props.limits;
    uint64_t invocations = 1;
    for (int d = 0; d < 3; d++) {
        if (blocks[d] < 1 || threads[d] < 1 ||
            (uint32_t)blocks[d] > limits->maxComputeWorkGroupCount[d] ||
            (uint32_t)threads[d] > limits->maxComputeWorkGroupSize[d]) {
            return tally_report_error(
                user_context, code,
                "%s: kernel %s: grid %dx%dx%d of work groups of %dx%dx%d threads is invalid on %s "
                "(each at least 1; at most %ux%ux%u groups of %ux%ux%u threads)",
                routine, entry_name, blocks_x, blocks_y, blocks_z, threads_x, threads_y, threads_z,
                vk.props.deviceName, limits->maxComputeWorkGroupCount[0],
                limits->maxComputeWorkGroupCount[1], limits->maxComputeWorkGroupCount[2],
                limits->maxComputeWorkGroupSize[0], limits->maxComputeWorkGroupSize[1],
                limits->maxComputeWorkGroupSize[2]);
        }
        invocations *= (uint64_t)threads[d];
    }
    if (invocations > limits->maxComputeWorkGroupInvocations) {
        return tally_report_error(user_context, code,
                                  "%s: kernel %s: work groups of %dx%dx%d threads exceed the "
                                  "device's %u invocations per work group",
                                  routine, entry_name, threads_x, threads_y, threads_z,
                                  limits->maxComputeWorkGroupInvocations);
    }

    // Arguments: buffers take bindings in order; scalars are packed into the push constants.
    int32_t num_args = 0;
    while (arg_sizes && args && arg_is_buffer && arg_sizes[num_args] != 0 && num_args < 4096) {
        num_args++;
    }
    int32_t num_buffers = 0;
    for (int32_t i = 0; i < num_args; i++) {
        num_buffers += arg_is_buffer[i] ? 1 : 0;
    }
    if (num_args != ksrc->num_args || num_buffers != ksrc->num_buffers) {
        return tally_report_error(user_context, code,
                                  "%s: kernel %s takes %d arguments (%d buffers) but the launch "
                                  "passed %d (%d buffers)",
                                  routine, entry_name, ksrc->num_args, ksrc->num_buffers, num_args,
                                  num_buffers);
    }
    uint8_t push[TALLY_VK_MAX_PUSH_BYTES];
    uint32_t push_limit = limits->maxPushConstantsSize < TALLY_VK_MAX_PUSH_BYTES
                              ? limits->maxPushConstantsSize
                              : TALLY_VK_MAX_PUSH_BYTES;
    uint32_t push_size = 0;
    vk_buffer **vbufs = NULL;
    if (num_buffers > 0) {
        vbufs = (vk_buffer **)calloc((size_t)num_buffers, sizeof(vk_buffer *));
        if (!vbufs) {
            return tally_report_error(user_context, code, "%s: kernel %s: out of host memory",
                                      routine, entry_name);
        }
    }
    for (int32_t i = 0, b = 0; i < num_args; i++) {
        int64_t size = arg_sizes[i];
        if (arg_is_buffer[i]) {
            const halide_buffer_t *buf = (const halide_buffer_t *)args[i];
            char what[160];
            snprintf(what, sizeof(what), "%s: kernel %s, argument %d", routine, entry_name, i);
            r = buffer_of(user_context, buf, what, code, &vbufs[b]);
            if (r != 0) {
                free(vbufs);
                return r;
            }
            VkDeviceSize bytes = vbufs[b]->size;
            if (bytes > limits->maxStorageBufferRange) {
                free(vbufs);
                return tally_report_error(user_context, code,
                                          "%s: kernel %s, argument %d: a buffer of %llu bytes "
                                          "exceeds the device's storage buffer range of %u",
                                          routine, entry_name, i, (unsigned long long)bytes,
                                          limits->maxStorageBufferRange);
            }
            b++;
            continue;
        }
        if ((size != 1 && size != 2 && size != 4 && size != 8) || !args[i]) {
            free(vbufs);
            return tally_report_error(user_context, code,
                                      "%s: kernel %s, argument %d: a scalar of %lld bytes%s "
                                      "(scalars are 1, 2, 4 or 8 bytes)",
                                      routine, entry_name, i, (long long)size,
                                      args[i] ? "" : " with a NULL value pointer");
        }
        uint32_t offset = (push_size + (uint32_t)size - 1) & ~((uint32_t)size - 1);
        if (offset + (uint32_t)size > push_limit) {
            free(vbufs);
            return tally_report_error(user_context, code,
                                      "%s: kernel %s: its scalar arguments need more than the "
                                      "device's %u bytes of push constants",
                                      routine, entry_name, push_limit);
        }
        memset(push + push_size, 0, offset - push_size);
        memcpy(push + offset, args[i], (size_t)size);
        push_size = offset + (uint32_t)size;
    }
    uint32_t padded = (push_size + 3) & ~3u;
    memset(push + push_size, 0, padded - push_size);
    push_size = padded;

    vk_module_cache *cache = cache_of(table);
    if (!cache || index >= cache->num_kernels) {
        free(vbufs);
        return tally_report_error(user_context, code, "%s: kernel %s: %s", routine, entry_name,
                                  cache ? "the kernel table grew after its first launch"
                                        : "out of host memory");
    }
    VkPipeline pipeline = VK_NULL_HANDLE;
    pthread_mutex_lock(&cache->lock);
    vk_kernel_state *ks = &cache->kernels[index];
    r = get_pipeline_locked(user_context, routine, ksrc, ks, (int32_t)push_size, threads,
                            &pipeline);
    VkPipelineLayout layout = ks->layout;
    VkDescriptorSetLayout set_layout = ks->set_layout;
    pthread_mutex_unlock(&cache->lock);
    if (r == 0) {
        r = throttle(user_context, routine);
    }
    // profile_timestamps: bracket the dispatch with device timestamps, billed to the Func
    // launching it now; a device without timestamps gets a sync after the launch instead.
    tally_timeline_owner owner = tally_timeline_owner_now();
    const int want_timestamps = tally_timeline_owner_wants_timestamps(&owner);
    vk_pending *p = NULL;
    if (r == 0) {
        p = (vk_pending *)calloc(1, sizeof(vk_pending));
        if (!p) {
            r = tally_report_error(user_context, code, "%s: kernel %s: out of host memory", routine,
                                   entry_name);
        }
    }
    if (r != 0) {
        free(vbufs);
        return r;
    }

    pthread_mutex_lock(&vk_lock);
    VkResult vr = VK_SUCCESS;
    VkDescriptorSet set = VK_NULL_HANDLE;
    if (num_buffers > 0) {
        VkDescriptorPoolSize pool_size = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, (uint32_t)num_buffers};
        VkDescriptorPoolCreateInfo pool_info;
        memset(&pool_info, 0, sizeof(pool_info));
        pool_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
        pool_info.maxSets = 1;
        pool_info.poolSizeCount = 1;
        pool_info.pPoolSizes = &pool_size;
        vr = vk.f.vkCreateDescriptorPool(vk.device, &pool_info, NULL, &p->descriptor_pool);
        if (vr != VK_SUCCESS) {
            p->descriptor_pool = VK_NULL_HANDLE;
            r = vk_fail(user_context, code, routine, "vkCreateDescriptorPool", vr);
        }
        if (r == 0) {
            VkDescriptorSetAllocateInfo alloc;
            memset(&alloc, 0, sizeof(alloc));
            alloc.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
            alloc.descriptorPool = p->descriptor_pool;
            alloc.descriptorSetCount = 1;
            alloc.pSetLayouts = &set_layout;
            vr = vk.f.vkAllocateDescriptorSets(vk.device, &alloc, &set);
            if (vr != VK_SUCCESS) {
                r = vk_fail(user_context, code, routine, "vkAllocateDescriptorSets", vr);
            }
        }
        if (r == 0) {
            VkDescriptorBufferInfo *infos = (VkDescriptorBufferInfo *)calloc(
                (size_t)num_buffers, sizeof(VkDescriptorBufferInfo));
            VkWriteDescriptorSet *writes =
                (VkWriteDescriptorSet *)calloc((size_t)num_buffers, sizeof(VkWriteDescriptorSet));
            if (!infos || !writes) {
                r = tally_report_error(user_context, code, "%s: kernel %s: out of host memory",
                                       routine, entry_name);
            } else {
                for (int32_t b = 0; b < num_buffers; b++) {
                    infos[b].buffer = vbufs[b]->buffer;
                    infos[b].offset = 0;
                    infos[b].range = VK_WHOLE_SIZE;
                    writes[b].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
                    writes[b].dstSet = set;
                    writes[b].dstBinding = (uint32_t)b;
                    writes[b].descriptorCount = 1;
                    writes[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
                    writes[b].pBufferInfo = &infos[b];
                }
                vk.f.vkUpdateDescriptorSets(vk.device, (uint32_t)num_buffers, writes, 0, NULL);
            }
            free(infos);
            free(writes);
        }
    }
    if (r == 0) {
        r = begin_commands_locked(user_context, code, routine, &p->cmd);
    }
    if (r != 0) {
        free_pending_locked(p);
        pthread_mutex_unlock(&vk_lock);
        free(vbufs);
        return r;
    }
    VkQueryPool query_pool = want_timestamps ? begin_timestamp_locked(p, &owner) : VK_NULL_HANDLE;
    vk.f.vkCmdBindPipeline(p->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    if (set) {
        vk.f.vkCmdBindDescriptorSets(p->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, &set, 0,
                                     NULL);
    }
    if (push_size > 0) {
        vk.f.vkCmdPushConstants(p->cmd, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size, push);
    }
    vk.f.vkCmdDispatch(p->cmd, (uint32_t)blocks_x, (uint32_t)blocks_y, (uint32_t)blocks_z);
    end_timestamp_locked(p, query_pool);
    r = submit_locked(user_context, code, routine, p);
    uint64_t serial = vk.next_serial - 1;
    if (r == 0) {
        for (int32_t b = 0; b < num_buffers; b++) {
            vbufs[b]->last_use = serial;
        }
    }
    pthread_mutex_unlock(&vk_lock);
    free(vbufs);
    if (r == 0) {
        tally_profiler_count_launch();
    }
    if (r == 0 && want_timestamps && !vk.timestamp_bits) {
        tally_timeline_set_mode(TALLY_DEVICE_API_VULKAN, TALLY_TIMELINE_SYNC_FALLBACK);
        r = wait_serial(user_context, serial, TALLY_DEVICE_WAIT_TIMESTAMP_FALLBACK, routine);
    }
    return r;
}

#endif  // TALLY_HAVE_VULKAN_HEADERS
