// Device memory: each buffer's own VkBuffer and VkDeviceMemory, mapped for good when the memory
// is host-visible (unless TALLY_VULKAN_FORCE_STAGING); copies of the buffer's span go through the
// mapping (after the work that uses the buffer completed) or through a staging buffer and a
// vkCmdCopyBuffer submission (timed under profile_timestamps and billed to the copy slot); a copy
// to the host and device_sync wait for the buffer's last use.
//
// No hidden syncs: a free never waits (device_free.c). A buffer that queued work may still use
// goes on a retired list with its last-use serial and is destroyed once every submission up to
// that serial has completed: checked whenever completed submissions are reclaimed
// (vulkan_submit.c) and, at release or exit, after the device went idle. Release destroys the
// memory of buffers still allocated; their records stay, marked dead, until freed.

#include "core/error.h"
#include "device/backend.h"
#include "device/vulkan/vulkan_internal.h"
#include "profiler/device_timeline.h"
#include "tally_runtime.h"
#include "tally_runtime_testing.h"

#if TALLY_HAVE_VULKAN_HEADERS

#include <stdlib.h>
#include <string.h>

// The first memory type allowed by `bits` with all of required|preferred, else with required.
static int32_t find_memory_type(uint32_t bits, VkMemoryPropertyFlags required,
                                VkMemoryPropertyFlags preferred) {
    for (int pass = 0; pass < 2; pass++) {
        VkMemoryPropertyFlags want = pass == 0 ? (required | preferred) : required;
        for (uint32_t i = 0; i < tally_vk.memory.memoryTypeCount; i++) {
            if ((bits & (1u << i)) &&
                (tally_vk.memory.memoryTypes[i].propertyFlags & want) == want) {
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
    VkResult r = tally_vk.f.vkCreateBuffer(tally_vk.device, &info, NULL, buffer);
    if (r != VK_SUCCESS) {
        *buffer = VK_NULL_HANDLE;
        return tally_report_error(user_context, code,
                                  "%s: vkCreateBuffer of %llu bytes failed: %s (%d)", routine,
                                  (unsigned long long)size, tally_vk_result_name(r), (int)r);
    }
    VkMemoryRequirements req;
    tally_vk.f.vkGetBufferMemoryRequirements(tally_vk.device, *buffer, &req);
    int32_t type = find_memory_type(req.memoryTypeBits, required, preferred);
    if (type < 0) {
        tally_vk.f.vkDestroyBuffer(tally_vk.device, *buffer, NULL);
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
    r = tally_vk.f.vkAllocateMemory(tally_vk.device, &alloc, NULL, memory);
    if (r == VK_SUCCESS) {
        r = tally_vk.f.vkBindBufferMemory(tally_vk.device, *buffer, *memory, 0);
        if (r != VK_SUCCESS) {
            tally_vk.f.vkFreeMemory(tally_vk.device, *memory, NULL);
        }
    }
    if (r != VK_SUCCESS) {
        *memory = VK_NULL_HANDLE;
        tally_vk.f.vkDestroyBuffer(tally_vk.device, *buffer, NULL);
        *buffer = VK_NULL_HANDLE;
        return tally_report_error(user_context, code,
                                  "%s: allocating %llu bytes of Vulkan memory (type %d) failed: "
                                  "%s (%d)",
                                  routine, (unsigned long long)req.size, type,
                                  tally_vk_result_name(r), (int)r);
    }
    *flags = tally_vk.memory.memoryTypes[type].propertyFlags;
    return 0;
}

void tally_vk_destroy_staging(vk_staging *s) {
    if (s->buffer) {
        tally_vk.f.vkDestroyBuffer(tally_vk.device, s->buffer, NULL);
    }
    if (s->memory) {
        tally_vk.f.vkFreeMemory(tally_vk.device, s->memory, NULL);  // unmaps
    }
    memset(s, 0, sizeof(*s));
}

int32_t tally_vk_create_staging(void *user_context, int32_t code, const char *routine,
                                VkDeviceSize size, VkBufferUsageFlags usage, vk_staging *s) {
    memset(s, 0, sizeof(*s));
    VkMemoryPropertyFlags flags = 0;
    int32_t r =
        create_buffer(user_context, code, routine, size, usage, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
                      VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, &s->buffer, &s->memory, &flags);
    if (r != 0) {
        return r;
    }
    VkResult vr =
        tally_vk.f.vkMapMemory(tally_vk.device, s->memory, 0, VK_WHOLE_SIZE, 0, &s->mapped);
    if (vr != VK_SUCCESS) {
        tally_vk_destroy_staging(s);
        return tally_vk_fail(user_context, code, routine, "vkMapMemory of a staging buffer", vr);
    }
    s->coherent = (flags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) != 0;
    return 0;
}

void tally_vk_flush_mapped(VkDeviceMemory memory) {
    VkMappedMemoryRange range;
    memset(&range, 0, sizeof(range));
    range.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE;
    range.memory = memory;
    range.size = VK_WHOLE_SIZE;
    tally_vk.f.vkFlushMappedMemoryRanges(tally_vk.device, 1, &range);
}

static void invalidate_mapped(VkDeviceMemory memory) {
    VkMappedMemoryRange range;
    memset(&range, 0, sizeof(range));
    range.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE;
    range.memory = memory;
    range.size = VK_WHOLE_SIZE;
    tally_vk.f.vkInvalidateMappedMemoryRanges(tally_vk.device, 1, &range);
}

static uint64_t last_use_of(const vk_buffer *vb) {
    pthread_mutex_lock(&tally_vk_lock);
    uint64_t serial = vb->last_use;
    pthread_mutex_unlock(&tally_vk_lock);
    return serial;
}

int32_t tally_vk_buffer_of(void *user_context, const halide_buffer_t *buf, const char *routine,
                           int32_t code, vk_buffer **out) {
    *out = NULL;
    vk_buffer *vb = (vk_buffer *)(uintptr_t)buf->device;
    if (!vb || vb->magic != TALLY_VK_BUFFER_MAGIC) {
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

// ---- allocation and frees --------------------------------------------------------------------

int32_t tally_vk_device_malloc(void *user_context, halide_buffer_t *buf, const char *routine) {
    uint64_t bytes = tally_buffer_size_in_bytes(buf);
    VkDeviceSize size = bytes < 4 ? 4 : (bytes + 3) & ~(VkDeviceSize)3;
    vk_buffer *vb = (vk_buffer *)calloc(1, sizeof(vk_buffer));
    if (!vb) {
        return tally_report_error(user_context, TALLY_ERROR_DEVICE_MALLOC_FAILED,
                                  "%s: out of host memory", routine);
    }
    VkMemoryPropertyFlags flags = 0;
    int32_t r =
        create_buffer(user_context, TALLY_ERROR_DEVICE_MALLOC_FAILED, routine, size,
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
    if ((flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) && !tally_vk.force_staging) {
        VkResult vr =
            tally_vk.f.vkMapMemory(tally_vk.device, vb->memory, 0, VK_WHOLE_SIZE, 0, &vb->mapped);
        if (vr != VK_SUCCESS) {
            vb->mapped = NULL;  // fall back to staging copies
        }
    }
    pthread_mutex_lock(&tally_vk_lock);
    vb->next = tally_vk.buffers;
    if (tally_vk.buffers) {
        tally_vk.buffers->prev = vb;
    }
    tally_vk.buffers = vb;
    pthread_mutex_unlock(&tally_vk_lock);
    buf->device = (uint64_t)(uintptr_t)vb;
    return 0;
}

// Takes vb off the live list. tally_vk_lock held.
static void unlink_locked(vk_buffer *vb) {
    if (vb->prev) {
        vb->prev->next = vb->next;
    } else {
        tally_vk.buffers = vb->next;
    }
    if (vb->next) {
        vb->next->prev = vb->prev;
    }
}

// Forgets buf's record (its Vulkan objects already destroyed or retired).
static void drop_record(halide_buffer_t *buf, vk_buffer *vb) {
    vb->magic = 0;
    free(vb);
    buf->device = 0;
}

int32_t tally_vk_defer_free(void *user_context, halide_buffer_t *buf) {
    vk_buffer *vb = (vk_buffer *)(uintptr_t)buf->device;
    if (vb->magic != TALLY_VK_BUFFER_MAGIC) {
        return tally_report_error(user_context, TALLY_ERROR_DEVICE_FREE_FAILED,
                                  "halide_device_free (vulkan): the buffer's device handle is not "
                                  "a Vulkan allocation");
    }
    int32_t result = TALLY_DEVICE_FREED;
    // A dead buffer's memory went with the device (release): only the record is left.
    if (!vb->dead) {
        vk_retired *retired = (vk_retired *)malloc(sizeof(vk_retired));
        pthread_mutex_lock(&tally_vk_lock);
        if (!vb->dead) {
            if (vb->last_use < tally_vk_reclaim_locked()) {
                unlink_locked(vb);
                tally_vk.f.vkDestroyBuffer(tally_vk.device, vb->buffer, NULL);
                tally_vk.f.vkFreeMemory(tally_vk.device, vb->memory, NULL);
            } else if (retired) {
                unlink_locked(vb);
                retired->last_use = vb->last_use;
                retired->buffer = vb->buffer;
                retired->memory = vb->memory;
                retired->next = tally_vk.retired;
                tally_vk.retired = retired;
                retired = NULL;
                result = TALLY_DEVICE_FREE_DEFERRED;
            } else {
                result = TALLY_DEVICE_FREE_NEEDS_WAIT;
            }
        }
        pthread_mutex_unlock(&tally_vk_lock);
        free(retired);
    }
    if (result != TALLY_DEVICE_FREE_NEEDS_WAIT) {
        drop_record(buf, vb);
    }
    return result;
}

int32_t tally_vk_free_now(void *user_context, halide_buffer_t *buf) {
    (void)user_context;
    vk_buffer *vb = (vk_buffer *)(uintptr_t)buf->device;
    pthread_mutex_lock(&tally_vk_lock);
    if (!vb->dead) {
        unlink_locked(vb);
        tally_vk.f.vkDestroyBuffer(tally_vk.device, vb->buffer, NULL);
        tally_vk.f.vkFreeMemory(tally_vk.device, vb->memory, NULL);
    }
    pthread_mutex_unlock(&tally_vk_lock);
    drop_record(buf, vb);
    return 0;
}

// ---- waits -----------------------------------------------------------------------------------

int32_t tally_vk_wait(void *user_context, const halide_buffer_t *buf, int32_t reason, int32_t code,
                      const char *routine) {
    uint64_t target;
    const vk_buffer *vb = buf ? (const vk_buffer *)(uintptr_t)buf->device : NULL;
    if (vb) {
        target = last_use_of(vb);
    } else {
        pthread_mutex_lock(&tally_vk_lock);
        target = tally_vk.next_serial - 1;
        pthread_mutex_unlock(&tally_vk_lock);
    }
    return tally_vk_wait_serial(user_context, target, reason, code, routine);
}

int32_t tally_vk_device_sync(void *user_context, halide_buffer_t *buf, const char *routine) {
    const vk_buffer *vb = (const vk_buffer *)(uintptr_t)buf->device;
    if (!vb || vb->magic != TALLY_VK_BUFFER_MAGIC || vb->dead) {
        return 0;
    }
    return tally_vk_wait_serial(user_context, last_use_of(vb), TALLY_DEVICE_WAIT_SYNC,
                                TALLY_ERROR_DEVICE_SYNC_FAILED, routine);
}

// ---- copies ----------------------------------------------------------------------------------

// Records and submits a copy of `bytes` between vb and the staging buffer `s` (to_device: from
// s to vb) and sets *serial to its submission. A copy to the device hands `s` to the submission
// (freed once the copy completed; `s` is cleared); a copy to the host leaves it the caller's. On
// failure everything is freed, `s` included.
static int32_t submit_staged_copy(void *user_context, int32_t code, const char *routine,
                                  vk_buffer *vb, vk_staging *s, uint64_t bytes, int to_device,
                                  uint64_t *serial) {
    vk_pending *p = (vk_pending *)calloc(1, sizeof(vk_pending));
    if (!p) {
        tally_vk_destroy_staging(s);
        return tally_report_error(user_context, code, "%s: out of host memory", routine);
    }
    // profile_timestamps: the device copy is timed and billed to its copy slot.
    tally_timeline_owner owner = tally_timeline_owner_now();
    const int want_timestamps = tally_timeline_owner_wants_timestamps(&owner);
    pthread_mutex_lock(&tally_vk_lock);
    int32_t r = tally_vk_begin_commands_locked(user_context, code, routine, &p->cmd);
    if (r != 0) {
        pthread_mutex_unlock(&tally_vk_lock);
        free(p);
        tally_vk_destroy_staging(s);
        return r;
    }
    VkQueryPool query_pool =
        want_timestamps ? tally_vk_begin_timestamp_locked(p, &owner) : VK_NULL_HANDLE;
    VkBufferCopy region = {0, 0, bytes};
    if (to_device) {
        tally_vk.f.vkCmdCopyBuffer(p->cmd, s->buffer, vb->buffer, 1, &region);
        p->staging = s->buffer;
        p->staging_memory = s->memory;
        memset(s, 0, sizeof(*s));
    } else {
        tally_vk.f.vkCmdCopyBuffer(p->cmd, vb->buffer, s->buffer, 1, &region);
    }
    tally_vk_end_timestamp_locked(p, query_pool);
    r = tally_vk_submit_locked(user_context, code, routine, p);
    *serial = tally_vk.next_serial - 1;
    if (r == 0) {
        vb->last_use = *serial;
    }
    pthread_mutex_unlock(&tally_vk_lock);
    if (r != 0) {
        tally_vk_destroy_staging(s);
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
            tally_vk_flush_mapped(memory);
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
int32_t tally_vk_copy(void *user_context, halide_buffer_t *buf, int to_device,
                      const char *routine) {
    const int32_t code =
        to_device ? TALLY_ERROR_COPY_TO_DEVICE_FAILED : TALLY_ERROR_COPY_TO_HOST_FAILED;
    vk_buffer *vb;
    int32_t r = tally_vk_buffer_of(user_context, buf, routine, code, &vb);
    if (r != 0) {
        return r;
    }
    uint64_t bytes = tally_buffer_size_in_bytes(buf);
    if (bytes > vb->size) {
        return tally_report_error(user_context, code,
                                  "%s: the buffer spans %llu bytes but its device allocation has "
                                  "%llu (its shape changed after device_malloc)",
                                  routine, (unsigned long long)bytes, (unsigned long long)vb->size);
    }
    if (bytes == 0) {
        return 0;
    }
    uint8_t *host = tally_buffer_begin(buf);
    const int32_t reason =
        to_device ? TALLY_DEVICE_WAIT_COPY_TO_DEVICE : TALLY_DEVICE_WAIT_COPY_TO_HOST;
    if (vb->mapped) {
        r = tally_vk_wait_serial(user_context, last_use_of(vb), reason,
                                 TALLY_ERROR_DEVICE_SYNC_FAILED, routine);
        if (r == 0) {
            copy_mapped(host, vb->mapped, vb->memory, vb->coherent, bytes, to_device);
        }
        return r;
    }
    r = tally_vk_throttle(user_context, routine);
    vk_staging s;
    if (r == 0) {
        r = tally_vk_create_staging(
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
    r = tally_vk_wait_serial(user_context, serial, reason, TALLY_ERROR_DEVICE_SYNC_FAILED, routine);
    if (r == 0) {
        copy_mapped(host, s.mapped, s.memory, s.coherent, bytes, 0);
    }
    tally_vk_destroy_staging(&s);
    return r;
}

// ---- testing and teardown --------------------------------------------------------------------

int32_t tally_testing_vulkan_live_buffers(void) {
    int32_t n = 0;
    pthread_mutex_lock(&tally_vk_lock);
    for (const vk_buffer *b = tally_vk.buffers; b; b = b->next) {
        n++;
    }
    pthread_mutex_unlock(&tally_vk_lock);
    return n;
}

void tally_vk_memory_teardown_locked(void) {
    for (vk_buffer *b = tally_vk.buffers; b; b = b->next) {
        tally_vk.f.vkDestroyBuffer(tally_vk.device, b->buffer, NULL);
        tally_vk.f.vkFreeMemory(tally_vk.device, b->memory, NULL);
        b->buffer = VK_NULL_HANDLE;
        b->memory = VK_NULL_HANDLE;
        b->mapped = NULL;
        b->dead = 1;
    }
    tally_vk.buffers = NULL;
}

#endif  // TALLY_HAVE_VULKAN_HEADERS
