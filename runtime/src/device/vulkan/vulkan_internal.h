// What the files of the Vulkan back end share: the loaded entry points, the state, the
// records of buffers, submissions and kernels, and each file's functions. Layer device.backends
// (runtime/layers.txt); the files call one way, in the order listed there: vulkan_init.c (the
// instance, the device and the state), vulkan_timestamps.c, vulkan_submit.c, vulkan_memory.c,
// vulkan_kernels.c, and vulkan_device.c over all of them (the interface, the back-end
// operations, initialization on first use and teardown). Not installed, not seen by generated
// code. C11.
//
// The loader is opened at run time (dlopen("libvulkan.so.1"); every entry point comes from
// vkGetInstanceProcAddr / vkGetDeviceProcAddr), so a machine without Vulkan still runs everything
// else; a build without the Vulkan headers compiles only the stubs of vulkan_device.c
// (TALLY_HAVE_VULKAN_HEADERS 0). Environment (read at each initialization):
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
// Locking: tally_vk_lock guards the state; functions named *_locked are called with it held.
// Waits happen outside it.
#ifndef TALLY_RUNTIME_SRC_DEVICE_VULKAN_VULKAN_INTERNAL_H
#define TALLY_RUNTIME_SRC_DEVICE_VULKAN_VULKAN_INTERNAL_H

#include "tally_runtime.h"

#if defined(__has_include)
#if __has_include(<vulkan/vulkan.h>)
#define TALLY_HAVE_VULKAN_HEADERS 1
#endif
#endif
#ifndef TALLY_HAVE_VULKAN_HEADERS
#define TALLY_HAVE_VULKAN_HEADERS 0
#endif

#if TALLY_HAVE_VULKAN_HEADERS

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "device/backend.h"
#include "profiler/device_timeline.h"
#include "tally_halide_vulkan_module.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

// Hidden, like every internal declaration of runtime/src: no part of libtally.so's ABI, and
// calls between the runtime's files stay direct calls (no PLT, no interposition).
#pragma GCC visibility push(hidden)

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
    uint64_t last_use;  // serial of the last submission that used it (guarded by tally_vk_lock)
    struct vk_buffer *prev, *next;  // live list (guarded by tally_vk_lock)
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
    uint32_t shared_elems;  // Halide's kernels: its shared array sized at launch (0: none)
    VkPipeline pipeline;
} vk_pipeline_entry;

typedef struct vk_kernel_state {
    VkShaderModule module;
    VkDescriptorSetLayout set_layout;  // VK_NULL_HANDLE when the kernel takes no buffers
    VkPipelineLayout layout;
    int32_t push_size;  // bytes of the push-constant range; -1 until the layout exists
    // Halide's kernels (TALLY_KERNEL_LAYOUT_HALIDE_VULKAN): their binding header, once read.
    int32_t header_read;
    tally_hvk_header header;
    int32_t num_pipelines, cap_pipelines;
    vk_pipeline_entry *pipelines;
} vk_kernel_state;

// The Vulkan part of a tally_kernel_table's device_state: per kernel, its shader module, layouts
// and pipelines (one per work-group size). Lives as long as the process; its Vulkan objects are
// destroyed by release and rebuilt on the next launch.
typedef struct vk_module_cache {
    struct vk_module_cache *next;  // every cache, for release (guarded by tally_vk_lock)
    pthread_mutex_t lock;
    int32_t num_kernels;
    vk_kernel_state *kernels;
} vk_module_cache;

// Guards tally_vk and everything it points to (a module cache's kernels have their own lock).
extern pthread_mutex_t tally_vk_lock;
// 1 while the Vulkan objects of tally_vk are valid (written under tally_vk_lock).
extern _Atomic int32_t tally_vk_ready;

// The back end's state (vulkan_init.c defines it).
typedef struct tally_vk_state {
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
    vk_retired *retired;  // freed buffers awaiting their last use (guarded by tally_vk_lock)
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
} tally_vk_state;
extern tally_vk_state tally_vk;

// ---- vulkan_init.c: the instance, the device, the state --------------------------------------

// "VK_ERROR_DEVICE_LOST" for a VkResult; "VkResult" for values it does not name.
const char *tally_vk_result_name(VkResult r);
// Reports "<routine>: <what> failed: <VkResult name> (<value>)" with `code`; returns `code`.
int32_t tally_vk_fail(void *user_context, int32_t code, const char *routine, const char *what,
                      VkResult r);
// Opens the loader, creates the instance, picks the device, creates the device, its queue and
// command pool, and reads the settings of the environment. Returns 0, or -1 with the reason in
// `why` (everything created so far destroyed).
int tally_vk_init_locked(char *why, size_t why_size);
// Destroys whatever of the instance and device exists (nothing may be in flight).
void tally_vk_destroy_core_locked(void);

// ---- vulkan_timestamps.c: device timestamps (profile_timestamps) ----------------------------

// Whether launches can be timed: the queue has timestamps (not TALLY_VULKAN_NO_TIMESTAMPS).
int tally_vk_can_time(void);
// Takes one pairing of the device clock with the profiler's (VK_EXT_calibrated_timestamps);
// tally_vk.calibrated says whether the clocks are correlated. At initialization `check_support`
// asks the device; later pairings reuse its answer.
void tally_vk_calibrate_clocks_locked(int check_support);
// Opens the timestamp bracket of the command recorded next into p->cmd, for `owner`. Returns
// the pool to pass to tally_vk_end_timestamp_locked, or VK_NULL_HANDLE when the command is not
// timed (no timestamps, or every pool full: counted).
VkQueryPool tally_vk_begin_timestamp_locked(vk_pending *p, const tally_timeline_owner *owner);
// Closes the bracket (a no-op for VK_NULL_HANDLE).
void tally_vk_end_timestamp_locked(vk_pending *p, VkQueryPool pool);
// Bills a completed submission's interval to its owner (its fence has signaled).
void tally_vk_bill_timestamps_locked(const vk_pending *p);
// Destroys the query pools (the device idle).
void tally_vk_timestamps_teardown_locked(void);

// ---- vulkan_submit.c: submissions, waits and the testing gate -------------------------------

// Bills (when done and timed) and frees a submission and everything it holds.
void tally_vk_free_pending_locked(vk_pending *p);
// Frees every completed submission no thread waits on, then the retired buffers no submission in
// flight can use. Returns the serial of the oldest submission not known complete
// (tally_vk.next_serial when none): everything before it has completed.
uint64_t tally_vk_reclaim_locked(void);
// Waits until every submission with serial <= target has completed; the wait is counted under
// `reason` (a TALLY_DEVICE_WAIT_*) and the thread marked waiting. A failure is reported with
// `code`. Returns 0 at once when Vulkan is not initialized.
int32_t tally_vk_wait_serial(void *user_context, uint64_t target, int32_t reason, int32_t code,
                             const char *routine);
// Keeps the number of submissions in flight bounded: waits for the oldest when at the limit.
int32_t tally_vk_throttle(void *user_context, const char *routine);
// Allocates and begins a one-time command buffer whose first command orders it after all
// earlier work on the queue. Failures are reported with `code`.
int32_t tally_vk_begin_commands_locked(void *user_context, int32_t code, const char *routine,
                                       VkCommandBuffer *out);
// Ends `p->cmd`, submits it with a new fence and appends `p` to the pending list (its serial:
// tally_vk.next_serial - 1). On failure frees `p` and everything it holds.
int32_t tally_vk_submit_locked(void *user_context, int32_t code, const char *routine,
                               vk_pending *p);
// The testing gate (tally_testing_vulkan_hold): opens it (a no-op when open); closes it again in
// mode 1 or 2. Returns 0, or -1 with the gate left open (*result: why, when Vulkan said so).
void tally_vk_open_gate_locked(void);
int32_t tally_vk_close_gate_locked(int32_t mode, VkResult *result);
// Teardown, the device idle (`idle`: vkDeviceWaitIdle succeeded): frees every submission (billing
// what is still timed), every retired buffer and every gate.
void tally_vk_submit_teardown_locked(int idle);

// ---- vulkan_memory.c: buffers, copies and frees ---------------------------------------------

// A host-visible buffer, mapped at `mapped`: a copy's staging buffer, a launch's uniform buffer.
typedef struct vk_staging {
    VkBuffer buffer;
    VkDeviceMemory memory;
    void *mapped;
    int32_t coherent;
} vk_staging;
// Creates one of `size` bytes for `usage`; failures are reported with `code`.
int32_t tally_vk_create_staging(void *user_context, int32_t code, const char *routine,
                                VkDeviceSize size, VkBufferUsageFlags usage, vk_staging *s);
void tally_vk_destroy_staging(vk_staging *s);
// Makes host writes to mapped memory visible to the device (needed where it is not coherent).
void tally_vk_flush_mapped(VkDeviceMemory memory);

// buf's vk_buffer (buf->device of the Vulkan interface), after checking it is a live Vulkan
// allocation; failures are reported with `code`.
int32_t tally_vk_buffer_of(void *user_context, const halide_buffer_t *buf, const char *routine,
                           int32_t code, vk_buffer **out);
// The interface's operations (Vulkan ready; buf of the Vulkan interface for all but malloc).
int32_t tally_vk_device_malloc(void *user_context, halide_buffer_t *buf, const char *routine);
int32_t tally_vk_copy(void *user_context, halide_buffer_t *buf, int to_device, const char *routine);
int32_t tally_vk_device_sync(void *user_context, halide_buffer_t *buf, const char *routine);
// The back-end operations wait, defer_free and free_now (backend.h).
int32_t tally_vk_wait(void *user_context, const halide_buffer_t *buf, int32_t reason, int32_t code,
                      const char *routine);
int32_t tally_vk_defer_free(void *user_context, halide_buffer_t *buf);
int32_t tally_vk_free_now(void *user_context, halide_buffer_t *buf);
// Teardown: every buffer still allocated loses its memory (halide_device_free then only frees
// the record).
void tally_vk_memory_teardown_locked(void);

// ---- vulkan_kernels.c: kernels ----------------------------------------------------------------

// The back-end operations kernel_ready, compile and launch (backend.h).
int tally_vk_kernel_ready(const tally_device_launch *l);
int32_t tally_vk_compile(void *user_context, const tally_device_launch *l);
int32_t tally_vk_launch(void *user_context, const tally_device_launch *l, int timed);
// Teardown: destroys every kernel's pipelines, layouts and module (rebuilt on the next launch).
void tally_vk_kernels_teardown_locked(void);

#pragma GCC visibility pop

#endif  // TALLY_HAVE_VULKAN_HEADERS

#endif  // TALLY_RUNTIME_SRC_DEVICE_VULKAN_VULKAN_INTERNAL_H
