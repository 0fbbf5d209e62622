// The device-wait ledger: every time a device back end blocks the host on its queue, it says why
// and for how long, so the report can show that the runtime does not serialise the program it
// measures (waits only where the pipeline itself blocks: copies to the host and its own syncs),
// and that no halide_device_free waited for in-flight work but deferred the release instead.
//
// Process-wide atomics; the device back ends write, the report and tests read. A testing hook
// (tally_testing_set_device_wait_hook) runs at the start of each wait, on the waiting thread. Calls
// the profiler's clock and device_timeline.c (which bills each wait to the calling thread's run).

#include "profiler/device_waits.h"
#include "core/clock.h"
#include "profiler/device_timeline.h"
#include "profiler/trace.h"
#include "tally_runtime.h"
#include "tally_runtime_testing.h"

static _Atomic uint64_t wait_count[TALLY_NUM_DEVICE_WAIT_REASONS];
static _Atomic uint64_t wait_ns[TALLY_NUM_DEVICE_WAIT_REASONS];
static _Atomic uint64_t deferred_frees;
static _Atomic uint64_t deferred_frees_released;
// Per device API (TALLY_DEVICE_API_*), registered by the back end once initialized: called
// through pointers, so this layer never calls the back ends above it.
static _Atomic(tally_device_collect_fn) collectors[TALLY_TIMELINE_NUM_APIS];
static _Atomic(tally_device_drain_fn) drains[TALLY_TIMELINE_NUM_APIS];

static const char *const reason_names[TALLY_NUM_DEVICE_WAIT_REASONS] = {
    "copy_to_host", "copy_to_device",     "sync",        "sync_global", "free", "throttle",
    "release",      "timestamp_fallback", "exit_report",
};

static _Atomic(tally_testing_device_wait_hook_t) wait_hook;

void tally_testing_set_device_wait_hook(tally_testing_device_wait_hook_t hook) {
    atomic_store_explicit(&wait_hook, hook, memory_order_release);
}

uint64_t tally_device_wait_begin(void) {
    tally_testing_device_wait_hook_t hook = atomic_load_explicit(&wait_hook, memory_order_acquire);
    uint64_t begin = tally_now_ns();
    if (hook) {
        hook();
    }
    return begin;
}

void tally_device_wait_end(int32_t reason, uint64_t begin_ns) {
    if (reason < 0 || reason >= TALLY_NUM_DEVICE_WAIT_REASONS) {
        return;
    }
    uint64_t now = tally_now_ns();
    uint64_t ns = now > begin_ns ? now - begin_ns : 0;
    atomic_fetch_add_explicit(&wait_count[reason], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&wait_ns[reason], ns, memory_order_relaxed);
    tally_timeline_add_host_wait(ns);
    tally_trace_wait(begin_ns, now);
}

void tally_device_register_drain(int32_t api, tally_device_collect_fn collect,
                                 tally_device_drain_fn drain) {
    if (api >= 0 && api < TALLY_TIMELINE_NUM_APIS) {
        atomic_store_explicit(&collectors[api], collect, memory_order_release);
        atomic_store_explicit(&drains[api], drain, memory_order_release);
    }
}

void tally_device_collect_completed(const void *pipeline) {
    tally_timeline_owner o = {pipeline, 0, 0, 0};
    if (!tally_timeline_owner_wants_timestamps(&o)) {
        return;
    }
    for (int32_t api = 0; api < TALLY_TIMELINE_NUM_APIS; api++) {
        tally_device_collect_fn collect =
            atomic_load_explicit(&collectors[api], memory_order_acquire);
        if (collect) {
            collect();
        }
    }
}

void tally_device_drain_for_exit_report(void) {
    for (int32_t api = 0; api < TALLY_TIMELINE_NUM_APIS; api++) {
        tally_device_drain_fn drain = atomic_load_explicit(&drains[api], memory_order_acquire);
        if (drain) {
            drain(TALLY_DEVICE_WAIT_EXIT_REPORT);
        }
    }
}

void tally_device_count_deferred_free(void) {
    atomic_fetch_add_explicit(&deferred_frees, 1, memory_order_relaxed);
}

void tally_device_count_deferred_release(void) {
    atomic_fetch_add_explicit(&deferred_frees_released, 1, memory_order_relaxed);
}

void tally_device_get_wait_stats(tally_device_wait_stats *out) {
    if (!out) {
        return;
    }
    for (int32_t r = 0; r < TALLY_NUM_DEVICE_WAIT_REASONS; r++) {
        out->waits[r] = atomic_load_explicit(&wait_count[r], memory_order_relaxed);
        out->wait_ns[r] = atomic_load_explicit(&wait_ns[r], memory_order_relaxed);
    }
    out->deferred_frees = atomic_load_explicit(&deferred_frees, memory_order_relaxed);
    out->deferred_frees_released =
        atomic_load_explicit(&deferred_frees_released, memory_order_relaxed);
}

const char *tally_device_wait_reason_name(int32_t reason) {
    return reason >= 0 && reason < TALLY_NUM_DEVICE_WAIT_REASONS ? reason_names[reason] : "unknown";
}
