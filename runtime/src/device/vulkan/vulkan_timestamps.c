// Device timestamps (profile_timestamps): a launch or staged copy made while such a run is
// current brackets its commands with a pair of timestamp queries (tally_vk_begin_timestamp_locked,
// tally_vk_end_timestamp_locked); the pair is read when its submission is reclaimed, i.e. once
// its fence is known signaled (also polled at the end of each such run; the at-exit report first
// waits for all queued work), and billed to the Func or copy slot that issued it
// (device_timeline.c). Query pools are grown on demand up to TALLY_VK_MAX_QUERY_POOLS and reused
// across runs. Clocks are correlated through VK_EXT_calibrated_timestamps by paired readings (the
// tightest of several) at initialization and at the end of each such run, which refits their
// drift. A queue without timestamps (or TALLY_VULKAN_NO_TIMESTAMPS) times nothing: the shared
// launch path (device_launch.c) then syncs after each launch instead.

#include "device/vulkan/vulkan_internal.h"
#include "profiler/device_timeline.h"
#include "tally_runtime.h"
#include "tally_runtime_testing.h"

#if TALLY_HAVE_VULKAN_HEADERS

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

int tally_vk_can_time(void) {
    return tally_vk.timestamp_bits != 0;
}

// Correlates the device's timestamp counter with the profiler's clock (CLOCK_MONOTONIC) through
// VK_EXT_calibrated_timestamps, when the device offers both the device and the CLOCK_MONOTONIC
// domain: TALLY_VK_CALIBRATION_READINGS paired readings, of which device_timeline.c keeps the one
// with the smallest maxDeviation. Done at initialization and again at the end of each
// profile_timestamps run (vulkan_device.c, collect_completed), so that a long process refits the
// drift between the clocks. A device whose host domain is only CLOCK_MONOTONIC_RAW (or none) stays
// uncalibrated: its kernels are still timed, as durations. tally_testing_set_vulkan_calibration
// replaces the readings.
#define TALLY_VK_CALIBRATION_READINGS 5

static _Atomic(tally_testing_vulkan_calibration_t) calibration_script;

void tally_testing_set_vulkan_calibration(tally_testing_vulkan_calibration_t reader) {
    atomic_store_explicit(&calibration_script, reader, memory_order_release);
}

// Whether the device offers the device and CLOCK_MONOTONIC domains. tally_vk_lock held.
static int calibration_supported_locked(void) {
    if (!tally_vk.f.vkGetCalibratedTimestampsEXT ||
        !tally_vk.f.vkGetPhysicalDeviceCalibrateableTimeDomainsEXT) {
        return 0;
    }
    VkTimeDomainEXT domains[16];
    uint32_t n = 16;
    VkResult r =
        tally_vk.f.vkGetPhysicalDeviceCalibrateableTimeDomainsEXT(tally_vk.physical, &n, domains);
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
    if (tally_vk.f.vkGetCalibratedTimestampsEXT(tally_vk.device, 2, info, stamps, deviation) !=
        VK_SUCCESS) {
        return 0;
    }
    *ticks = stamps[0];
    *host_ns = stamps[1];
    return 1;
}

void tally_vk_calibrate_clocks_locked(int check_support) {
    if (check_support) {
        tally_vk.calibration_supported = calibration_supported_locked();
    }
    if (!tally_vk.calibration_supported &&
        !atomic_load_explicit(&calibration_script, memory_order_acquire)) {
        return;
    }
    const uint64_t mask = tally_vk.timestamp_bits > 0 && tally_vk.timestamp_bits < 64
                              ? (1ull << tally_vk.timestamp_bits) - 1
                              : ~0ull;
    tally_clock_reading readings[TALLY_VK_CALIBRATION_READINGS];
    int32_t n = 0;
    for (int32_t i = 0; i < TALLY_VK_CALIBRATION_READINGS; i++) {
        uint64_t ticks = 0, host = 0, deviation = 0;
        if (calibrated_reading_locked(&ticks, &host, &deviation)) {
            readings[n].device_ns =
                (double)(ticks & mask) * (double)tally_vk.props.limits.timestampPeriod;
            readings[n].host_ns = host;
            readings[n].deviation_ns = deviation;
            n++;
        }
    }
    if (n > 0) {
        tally_timeline_clock_pair(TALLY_DEVICE_API_VULKAN, readings, n);
        tally_vk.calibrated = 1;
    }
}

// Takes a free (begin, end) query pair, adding a pool when every pool is full. Returns 0, or -1
// when all TALLY_VK_MAX_QUERY_POOLS are in use (or a pool cannot be created).
static int acquire_pair_locked(int32_t *pool, int32_t *pair) {
    for (int32_t i = 0; i < tally_vk.num_query_pools; i++) {
        vk_query_pool *q = tally_vk.query_pools[i];
        if (q->num_free > 0) {
            *pool = i;
            *pair = q->free_pairs[--q->num_free];
            return 0;
        }
    }
    if (tally_vk.num_query_pools == TALLY_VK_MAX_QUERY_POOLS) {
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
    if (tally_vk.f.vkCreateQueryPool(tally_vk.device, &info, NULL, &q->pool) != VK_SUCCESS) {
        free(q);
        return -1;
    }
    for (int32_t k = 0; k < TALLY_VK_PAIRS_PER_POOL; k++) {
        q->free_pairs[k] = (uint16_t)(TALLY_VK_PAIRS_PER_POOL - 1 - k);
    }
    q->num_free = TALLY_VK_PAIRS_PER_POOL;
    tally_vk.query_pools[tally_vk.num_query_pools] = q;
    *pool = tally_vk.num_query_pools++;
    *pair = q->free_pairs[--q->num_free];
    return 0;
}

// Its fence has signaled, so the results are available: read without waiting. The counter has
// timestamp_bits valid bits and wraps; the difference is taken modulo 2^bits, and an end before
// its begin on a full 64-bit counter is unmatched.
void tally_vk_bill_timestamps_locked(const vk_pending *p) {
    VkQueryPool pool = tally_vk.query_pools[p->ts_pool]->pool;
    uint64_t ticks[2] = {0, 0};
    VkResult r = tally_vk.f.vkGetQueryPoolResults(tally_vk.device, pool, (uint32_t)(2 * p->ts_pair),
                                                  2, sizeof(ticks), ticks, sizeof(uint64_t),
                                                  VK_QUERY_RESULT_64_BIT);
    if (r != VK_SUCCESS) {
        tally_timeline_count_problem(TALLY_TIMELINE_LOST);
        return;
    }
    uint64_t mask = tally_vk.timestamp_bits >= 64 ? ~0ull : (1ull << tally_vk.timestamp_bits) - 1;
    uint64_t begin = ticks[0] & mask, end = ticks[1] & mask;
    if (tally_vk.timestamp_bits >= 64 && end < begin) {
        tally_timeline_count_problem(TALLY_TIMELINE_UNMATCHED);
        return;
    }
    double period = (double)tally_vk.props.limits.timestampPeriod;
    uint64_t ns = (uint64_t)((double)((end - begin) & mask) * period + 0.5);
    uint64_t host_begin = 0;
    int placed =
        tally_vk.calibrated &&
        tally_timeline_clock_to_host(TALLY_DEVICE_API_VULKAN, (double)begin * period, &host_begin);
    tally_timeline_add(&p->owner, ns, placed, host_begin);
}

// Resets a query pair and writes the begin stamp after the barrier that opens every command
// buffer (so it cannot be taken before earlier submissions finished).
VkQueryPool tally_vk_begin_timestamp_locked(vk_pending *p, const tally_timeline_owner *owner) {
    if (!tally_vk.timestamp_bits) {
        return VK_NULL_HANDLE;
    }
    if (acquire_pair_locked(&p->ts_pool, &p->ts_pair) != 0) {
        tally_timeline_count_problem(TALLY_TIMELINE_OVERFLOWED);
        return VK_NULL_HANDLE;
    }
    p->timed = 1;
    p->owner = *owner;
    VkQueryPool pool = tally_vk.query_pools[p->ts_pool]->pool;
    tally_vk.f.vkCmdResetQueryPool(p->cmd, pool, (uint32_t)(2 * p->ts_pair), 2);
    tally_vk.f.vkCmdWriteTimestamp(p->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, pool,
                                   (uint32_t)(2 * p->ts_pair));
    tally_timeline_set_mode(TALLY_DEVICE_API_VULKAN, tally_vk.calibrated
                                                         ? TALLY_TIMELINE_TIMESTAMPS_CALIBRATED
                                                         : TALLY_TIMELINE_TIMESTAMPS);
    return pool;
}

// The end stamp is latched once every earlier command has completed.
void tally_vk_end_timestamp_locked(vk_pending *p, VkQueryPool pool) {
    if (pool) {
        tally_vk.f.vkCmdWriteTimestamp(p->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool,
                                       (uint32_t)(2 * p->ts_pair + 1));
    }
}

void tally_vk_timestamps_teardown_locked(void) {
    for (int32_t i = 0; i < tally_vk.num_query_pools; i++) {
        tally_vk.f.vkDestroyQueryPool(tally_vk.device, tally_vk.query_pools[i]->pool, NULL);
        free(tally_vk.query_pools[i]);
        tally_vk.query_pools[i] = NULL;
    }
    tally_vk.num_query_pools = 0;
}

#endif  // TALLY_HAVE_VULKAN_HEADERS
