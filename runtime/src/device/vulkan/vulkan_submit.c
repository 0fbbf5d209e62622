// Submissions: every command buffer starts with a full memory barrier (all earlier work on the
// queue, writes -> reads and writes) and ends with one making device writes visible to the host,
// so submission order on the single queue is the only ordering needed. Submissions are not
// waited for: each one's fence, command buffer, descriptor pool and staging buffer go on a
// pending list, reclaimed once the fence signals (checked before each submission and after each
// wait), and at most TALLY_VK_MAX_PENDING are in flight. Each buffer remembers the serial of the
// last submission that used it, so that a wait waits for just the work it needs: the fences are
// waited for outside the lock, the calling thread marked waiting for the profiler, and each wait
// that blocks counted by reason in the device-wait ledger (device_waits.c). Reclaiming also
// destroys the retired buffers (frees deferred behind queued work, vulkan_memory.c) whose last
// use has completed.
//
// Testing seam: tally_testing_vulkan_hold closes a gate, a host-set event every later submission
// waits on, so that tests order host calls against device work by construction instead of by
// timing.

#include "core/context.h"
#include "core/error.h"
#include "device/vulkan/vulkan_internal.h"
#include "profiler/device_waits.h"
#include "profiler/profiler.h"
#include "tally_runtime.h"

#if TALLY_HAVE_VULKAN_HEADERS

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

void tally_vk_free_pending_locked(vk_pending *p) {
    if (p->timed) {
        if (p->done) {
            tally_vk_bill_timestamps_locked(p);
        }
        vk_query_pool *q = tally_vk.query_pools[p->ts_pool];
        q->free_pairs[q->num_free++] = (uint16_t)p->ts_pair;
    }
    if (p->cmd) {
        tally_vk.f.vkFreeCommandBuffers(tally_vk.device, tally_vk.command_pool, 1, &p->cmd);
    }
    if (p->descriptor_pool) {
        tally_vk.f.vkDestroyDescriptorPool(tally_vk.device, p->descriptor_pool, NULL);
    }
    if (p->staging) {
        tally_vk.f.vkDestroyBuffer(tally_vk.device, p->staging, NULL);
    }
    if (p->staging_memory) {
        tally_vk.f.vkFreeMemory(tally_vk.device, p->staging_memory, NULL);
    }
    if (p->fence) {
        tally_vk.f.vkDestroyFence(tally_vk.device, p->fence, NULL);
    }
    free(p);
}

// Destroys the retired buffers whose last use precedes `oldest_busy` (every submission with a
// smaller serial has completed).
static void release_retired_locked(uint64_t oldest_busy) {
    vk_retired **link = &tally_vk.retired;
    while (*link) {
        vk_retired *r = *link;
        if (r->last_use < oldest_busy) {
            *link = r->next;
            tally_vk.f.vkDestroyBuffer(tally_vk.device, r->buffer, NULL);
            tally_vk.f.vkFreeMemory(tally_vk.device, r->memory, NULL);
            free(r);
            tally_device_count_deferred_release();
        } else {
            link = &r->next;
        }
    }
}

uint64_t tally_vk_reclaim_locked(void) {
    vk_pending **link = &tally_vk.pending_head;
    vk_pending *last = NULL;
    uint64_t oldest_busy = tally_vk.next_serial;
    while (*link) {
        vk_pending *p = *link;
        if (!p->done && tally_vk.f.vkGetFenceStatus(tally_vk.device, p->fence) == VK_SUCCESS) {
            p->done = 1;
        }
        if (!p->done && p->serial < oldest_busy) {
            oldest_busy = p->serial;
        }
        if (p->done && p->waiters == 0) {
            *link = p->next;
            tally_vk.num_pending--;
            tally_vk_free_pending_locked(p);
        } else {
            last = p;
            link = &p->next;
        }
    }
    tally_vk.pending_tail = last;
    release_retired_locked(oldest_busy);
    return oldest_busy;
}

static void reopen_gate_locked(void);

// The fences are waited for outside the lock (marked with `waiters` so nobody destroys them
// meanwhile); each blocking wait is counted.
int32_t tally_vk_wait_serial(void *user_context, uint64_t target, int32_t reason, int32_t code,
                             const char *routine) {
    for (;;) {
        VkFence fences[TALLY_VK_WAIT_CHUNK];
        vk_pending *entries[TALLY_VK_WAIT_CHUNK];
        uint32_t n = 0;
        int more = 0;
        pthread_mutex_lock(&tally_vk_lock);
        if (!atomic_load_explicit(&tally_vk_ready, memory_order_relaxed)) {
            pthread_mutex_unlock(&tally_vk_lock);
            return 0;
        }
        VkDevice device = tally_vk.device;
        PFN_vkWaitForFences wait_for_fences = tally_vk.f.vkWaitForFences;
        for (vk_pending *p = tally_vk.pending_head; p && p->serial <= target; p = p->next) {
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
        if (n > 0 && tally_vk.gate_closed == 2) {
            reopen_gate_locked();
        }
        pthread_mutex_unlock(&tally_vk_lock);
        if (n == 0) {
            return 0;
        }
        tally_context *waiting = tally_profiler_wait_begin();
        uint64_t begin = tally_device_wait_begin();
        VkResult r = wait_for_fences(device, n, fences, VK_TRUE, UINT64_MAX);
        tally_device_wait_end(reason, begin);
        tally_profiler_wait_end(waiting);
        pthread_mutex_lock(&tally_vk_lock);
        for (uint32_t i = 0; i < n; i++) {
            entries[i]->waiters--;
            if (r == VK_SUCCESS) {
                entries[i]->done = 1;
            }
        }
        tally_vk_reclaim_locked();
        pthread_mutex_unlock(&tally_vk_lock);
        if (r != VK_SUCCESS) {
            return tally_vk_fail(user_context, code, routine, "vkWaitForFences", r);
        }
        if (!more) {
            return 0;
        }
    }
}

int32_t tally_vk_throttle(void *user_context, const char *routine) {
    pthread_mutex_lock(&tally_vk_lock);
    tally_vk_reclaim_locked();
    uint64_t oldest = 0;
    if (tally_vk.num_pending >= TALLY_VK_MAX_PENDING && tally_vk.pending_head) {
        oldest = tally_vk.pending_head->serial;
    }
    pthread_mutex_unlock(&tally_vk_lock);
    return oldest ? tally_vk_wait_serial(user_context, oldest, TALLY_DEVICE_WAIT_THROTTLE,
                                         TALLY_ERROR_DEVICE_SYNC_FAILED, routine)
                  : 0;
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
    tally_vk.f.vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, &barrier, 0, NULL, 0, NULL);
}

// The gate, when closed, comes right after the opening barrier.
int32_t tally_vk_begin_commands_locked(void *user_context, int32_t code, const char *routine,
                                       VkCommandBuffer *out) {
    VkCommandBufferAllocateInfo alloc;
    memset(&alloc, 0, sizeof(alloc));
    alloc.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    alloc.commandPool = tally_vk.command_pool;
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    VkResult r = tally_vk.f.vkAllocateCommandBuffers(tally_vk.device, &alloc, out);
    if (r != VK_SUCCESS) {
        *out = VK_NULL_HANDLE;
        return tally_vk_fail(user_context, code, routine, "vkAllocateCommandBuffers", r);
    }
    VkCommandBufferBeginInfo begin;
    memset(&begin, 0, sizeof(begin));
    begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    r = tally_vk.f.vkBeginCommandBuffer(*out, &begin);
    if (r != VK_SUCCESS) {
        tally_vk.f.vkFreeCommandBuffers(tally_vk.device, tally_vk.command_pool, 1, out);
        *out = VK_NULL_HANDLE;
        return tally_vk_fail(user_context, code, routine, "vkBeginCommandBuffer", r);
    }
    cmd_barrier(*out, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT,
                VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT);
    if (tally_vk.gate_closed) {
        tally_vk.f.vkCmdWaitEvents(*out, 1, &tally_vk.gates[tally_vk.num_gates - 1],
                                   VK_PIPELINE_STAGE_HOST_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                                   0, NULL, 0, NULL, 0, NULL);
    }
    return 0;
}

// The command buffer ends with a barrier making its writes visible to the host.
int32_t tally_vk_submit_locked(void *user_context, int32_t code, const char *routine,
                               vk_pending *p) {
    cmd_barrier(p->cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT,
                VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    VkResult r = tally_vk.f.vkEndCommandBuffer(p->cmd);
    if (r != VK_SUCCESS) {
        tally_vk_free_pending_locked(p);
        return tally_vk_fail(user_context, code, routine, "vkEndCommandBuffer", r);
    }
    VkFenceCreateInfo fence_info;
    memset(&fence_info, 0, sizeof(fence_info));
    fence_info.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
    r = tally_vk.f.vkCreateFence(tally_vk.device, &fence_info, NULL, &p->fence);
    if (r != VK_SUCCESS) {
        p->fence = VK_NULL_HANDLE;
        tally_vk_free_pending_locked(p);
        return tally_vk_fail(user_context, code, routine, "vkCreateFence", r);
    }
    VkSubmitInfo submit;
    memset(&submit, 0, sizeof(submit));
    submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &p->cmd;
    r = tally_vk.f.vkQueueSubmit(tally_vk.queue, 1, &submit, p->fence);
    if (r != VK_SUCCESS) {
        tally_vk_free_pending_locked(p);
        return tally_vk_fail(user_context, code, routine, "vkQueueSubmit", r);
    }
    p->serial = tally_vk.next_serial++;
    p->next = NULL;
    if (tally_vk.pending_tail) {
        tally_vk.pending_tail->next = p;
    } else {
        tally_vk.pending_head = p;
    }
    tally_vk.pending_tail = p;
    tally_vk.num_pending++;
    return 0;
}

// ---- the testing gate
// ----------------------------------------------------------------------------

// Lets the device run what was held back.
void tally_vk_open_gate_locked(void) {
    if (tally_vk.gate_closed) {
        tally_vk.f.vkSetEvent(tally_vk.device, tally_vk.gates[tally_vk.num_gates - 1]);
        tally_vk.gate_closed = 0;
    }
}

// Closes the gate behind a fresh event: one that queued work may still wait on is never reset.
int32_t tally_vk_close_gate_locked(int32_t mode, VkResult *result) {
    *result = VK_SUCCESS;
    if (tally_vk.num_gates == TALLY_VK_MAX_GATES) {
        return -1;
    }
    VkEventCreateInfo info;
    memset(&info, 0, sizeof(info));
    info.sType = VK_STRUCTURE_TYPE_EVENT_CREATE_INFO;
    *result =
        tally_vk.f.vkCreateEvent(tally_vk.device, &info, NULL, &tally_vk.gates[tally_vk.num_gates]);
    if (*result != VK_SUCCESS) {
        return -1;
    }
    tally_vk.num_gates++;
    tally_vk.gate_closed = mode;
    return 0;
}

// Mode 2, at a wait: lets everything queued so far run and holds what is submitted later (the
// gate stays open when no more events can be made). tally_vk_lock held.
static void reopen_gate_locked(void) {
    tally_vk_open_gate_locked();
    VkResult ignored;
    (void)tally_vk_close_gate_locked(2, &ignored);
}

void tally_vk_submit_teardown_locked(int idle) {
    release_retired_locked(UINT64_MAX);
    for (vk_pending *p = tally_vk.pending_head; p;) {
        vk_pending *next = p->next;
        p->done = p->done || idle;  // run end: bill what is still timed
        tally_vk_free_pending_locked(p);
        p = next;
    }
    tally_vk.pending_head = tally_vk.pending_tail = NULL;
    tally_vk.num_pending = 0;
    for (int32_t i = 0; i < tally_vk.num_gates; i++) {
        tally_vk.f.vkDestroyEvent(tally_vk.device, tally_vk.gates[i], NULL);
    }
    tally_vk.num_gates = 0;
}

#endif  // TALLY_HAVE_VULKAN_HEADERS
