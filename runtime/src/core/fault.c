// Fault injection, a test hook: TALLY_FAULT=<op>[:<n>] makes the n-th operation of kind <op> in
// the process fail (n defaults to 1; only that one fails, later ones succeed again). Operations
// and where they are counted (a call that has nothing to do, e.g. a copy of a buffer that is not
// dirty, is not counted):
//   malloc          every halide_malloc (also the host device interface's device allocations);
//                   returns NULL, so generated code returns TALLY_ERROR_OUT_OF_MEMORY
//   device_malloc   halide_device_malloc when it would allocate: TALLY_ERROR_DEVICE_MALLOC_FAILED
//   copy_to_host    halide_copy_to_host when it would copy: TALLY_ERROR_COPY_TO_HOST_FAILED
//   copy_to_device  halide_copy_to_device when it would copy: TALLY_ERROR_COPY_TO_DEVICE_FAILED
//   launch          halide_vulkan_run, halide_opencl_run and halide_cuda_run, once the device is
//                   ready, before the kernel is looked up (the host interface has no launches:
//                   host pipelines run their loops inline): TALLY_ERROR_DEVICE_RUN_FAILED
//   sync            halide_device_sync and halide_device_sync_global when they would call the
//                   back end: TALLY_ERROR_DEVICE_SYNC_FAILED
// The failure is reported through halide_error as "<entry point>: <what> failed (injected
// fault)" and the call returns as if the back end had failed: nothing is allocated, copied or
// marked, so the bookkeeping stays as it was. The environment is read once, at the first
// operation (a malformed spec there is a warning by the environment rule, core/env.c, and arms
// nothing); tally_testing_set_fault replaces it in-process. Counting is process-wide and
// thread-safe: exactly one operation fails, on whichever thread makes the n-th call.
//
// Thread starts fail by count instead (tally_testing_fail_thread_starts: the next n fail with
// EAGAIN); every thread the runtime starts (pool workers, the sampler) goes through
// tally_thread_create.

#include "core/fault.h"
#include "core/env.h"
#include "core/error.h"
#include "tally_runtime.h"
#include "tally_runtime_testing.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const op_names[TALLY_NUM_FAULT_OPS] = {
    "malloc", "device_malloc", "copy_to_host", "copy_to_device", "launch", "sync",
};

static const int32_t op_codes[TALLY_NUM_FAULT_OPS] = {
    TALLY_ERROR_OUT_OF_MEMORY,       TALLY_ERROR_DEVICE_MALLOC_FAILED,
    TALLY_ERROR_COPY_TO_HOST_FAILED, TALLY_ERROR_COPY_TO_DEVICE_FAILED,
    TALLY_ERROR_DEVICE_RUN_FAILED,   TALLY_ERROR_DEVICE_SYNC_FAILED,
};

// The armed operation (-1: none), which call of it fails (1-based), calls of it so far, and how
// many faults fired since the process started.
static _Atomic int32_t armed_op = -1;
static _Atomic int64_t armed_n;
static _Atomic int64_t armed_count;
static _Atomic int64_t injected_total;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static _Atomic int env_read;

// Parses "<op>[:<n>]" into *op and *n; returns 0, or -1 if the spec is malformed.
static int parse_spec(const char *spec, int32_t *op, int64_t *n) {
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    *op = -1;
    for (int32_t i = 0; i < TALLY_NUM_FAULT_OPS; i++) {
        if (strlen(op_names[i]) == len && strncmp(spec, op_names[i], len) == 0) {
            *op = i;
        }
    }
    if (*op < 0) {
        return -1;
    }
    *n = 1;
    if (colon) {
        char *end = NULL;
        long long v = strtoll(colon + 1, &end, 10);
        if (end == colon + 1 || *end != '\0' || v < 1) {
            return -1;
        }
        *n = (int64_t)v;
    }
    return 0;
}

#define FAULT_SPEC_SYNTAX                                                                          \
    "<op>[:<n>] with op one of malloc, device_malloc, copy_to_host, copy_to_device, launch, sync " \
    "and n >= 1"

// Arms `spec`; from the environment (from_env), a malformed spec is a warning by the environment
// rule, else an error returned to tally_testing_set_fault's caller.
static int32_t arm(const char *spec, int from_env) {
    atomic_store(&armed_op, -1);
    atomic_store(&armed_count, 0);
    if (!spec || !*spec) {
        return 0;
    }
    int32_t op;
    int64_t n;
    if (parse_spec(spec, &op, &n) != 0) {
        if (from_env) {
            tally_env_reject("TALLY_FAULT", spec, FAULT_SPEC_SYNTAX, "no fault injection");
            return 0;
        }
        return tally_report_error(NULL, TALLY_ERROR_BAD_ARGUMENT,
                                  "tally_testing_set_fault \"%s\": expected " FAULT_SPEC_SYNTAX
                                  "; no fault will be injected",
                                  spec);
    }
    atomic_store(&armed_n, n);
    atomic_store(&armed_op, op);
    return 0;
}

static void read_env(void) {
    (void)arm(tally_env_string("TALLY_FAULT"), 1);
    atomic_store_explicit(&env_read, 1, memory_order_release);
}

void tally_fault_prefault(void) {
    pthread_once(&env_once, read_env);
}

int32_t tally_fault_check(void *user_context, int32_t op, const char *fmt, ...) {
    if (!atomic_load_explicit(&env_read, memory_order_acquire)) {
        pthread_once(&env_once, read_env);
    }
    if (atomic_load_explicit(&armed_op, memory_order_acquire) != op) {
        return 0;
    }
    if (atomic_fetch_add(&armed_count, 1) + 1 != atomic_load(&armed_n)) {
        return 0;
    }
    atomic_fetch_add(&injected_total, 1);
    char msg[960];  // leaves room for the suffix in tally_report_error's 1024 bytes
    va_list args;
    va_start(args, fmt);
    int len = vsnprintf(msg, sizeof(msg), fmt, args);
    va_end(args);
    if (len < 0) {
        msg[0] = '\0';
    }
    return tally_report_error(user_context, op_codes[op], "%s (injected fault)", msg);
}

int32_t tally_testing_set_fault(const char *spec) {
    pthread_once(&env_once, read_env);
    return arm(spec, 0);
}

int64_t tally_testing_faults_injected(void) {
    return atomic_load(&injected_total);
}

// ---- thread starts -------------------------------------------------------------------------

static _Atomic int32_t fail_thread_starts;

void tally_testing_fail_thread_starts(int32_t count) {
    atomic_store(&fail_thread_starts, count);
}

int tally_thread_create(pthread_t *thread, void *(*fn)(void *), void *arg) {
    int32_t n = atomic_load(&fail_thread_starts);
    while (n > 0) {
        if (atomic_compare_exchange_weak(&fail_thread_starts, &n, n - 1)) {
            return EAGAIN;
        }
    }
    return pthread_create(thread, NULL, fn, arg);
}
