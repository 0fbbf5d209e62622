// Kernels: each tally_kernel_source holds NUL-terminated OpenCL C source defining `__kernel void
// <name>(...)` (opencl_internal.h has the argument ABI). A table's
// device_state[TALLY_DEVICE_API_OPENCL] points at a record installed once with compare-exchange
// (tally_device_state_install: concurrent first launches agree on one); it holds one cl_program
// per entry (entries whose code pointer is the same share one program, each holding a reference)
// and one cl_kernel per entry, built on the first launch (tally_ocl_compile, in the one-time
// compile slot) under tally_ocl_lock, with CL_KERNEL_NUM_ARGS and CL_KERNEL_WORK_GROUP_SIZE read
// once. A build failure is reported with the build log (cut to fit a message, from its first
// error). Records live as long as the process (a table may be used again after a release);
// release only releases their kernels and programs.
//
// A launch is checked before anything is queued: the work group against the device's
// CL_DEVICE_MAX_WORK_ITEM_SIZES and CL_DEVICE_MAX_WORK_GROUP_SIZE (before building) and the
// kernel's CL_KERNEL_WORK_GROUP_SIZE; the kernel's argument count against the launch's: equal,
// or one more, the last a __local pointer given max(shared_mem_bytes, 1) bytes; the shared memory
// against CL_DEVICE_LOCAL_MEM_SIZE. Buffers are passed as their cl_mem, or, when buf->host is
// not the start of the buffer's span (negative strides), as a sub-buffer starting there, which
// OpenCL allows only at a multiple of CL_DEVICE_MEM_BASE_ADDR_ALIGN (else the launch fails,
// saying so); scalars by value. A cl_kernel's arguments are not thread-safe: setting them and
// enqueueing happen under the entry's own lock. Global size is blocks * threads per dimension,
// local size threads. The queue is flushed after each launch, so the device starts at once.
// What every launch checks whatever the API is done before, by device_launch.c.

#include "device/opencl/opencl_internal.h"

#if TALLY_HAVE_OPENCL_HEADERS

#include "core/buffer.h"
#include "core/error.h"
#include "device/backend.h"
#include "profiler/device_timeline.h"
#include "tally_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// At most this much of a build log goes into the message (whose whole is 1024 bytes).
#define TALLY_OCL_LOG_CHARS 640
#define TALLY_OCL_STACK_ARGS 64

static void free_record(opencl_kernels *k) {
    if (!k) {
        return;
    }
    if (k->launch_locks) {
        for (int32_t i = 0; i < k->num_kernels; i++) {
            pthread_mutex_destroy(&k->launch_locks[i]);
        }
    }
    free(k->programs);
    free((void *)k->kernels);
    free(k->num_args);
    free(k->work_group_size);
    free(k->launch_locks);
    free(k);
}

// The record of a table's built kernels, created on first use; NULL without host memory.
static opencl_kernels *kernels_of(tally_kernel_table *table) {
    opencl_kernels *k = (opencl_kernels *)tally_device_state(table, TALLY_DEVICE_API_OPENCL);
    if (k) {
        return k;
    }
    size_t n = (size_t)(table->num_kernels > 0 ? table->num_kernels : 1);
    k = (opencl_kernels *)calloc(1, sizeof *k);
    if (!k) {
        return NULL;
    }
    k->programs = (cl_program *)calloc(n, sizeof *k->programs);
    k->kernels = (_Atomic(cl_kernel) *)calloc(n, sizeof *k->kernels);
    k->num_args = (cl_uint *)calloc(n, sizeof *k->num_args);
    k->work_group_size = (size_t *)calloc(n, sizeof *k->work_group_size);
    pthread_mutex_t *locks = (pthread_mutex_t *)calloc(n, sizeof *locks);
    if (!k->programs || !k->kernels || !k->num_args || !k->work_group_size || !locks) {
        free(locks);
        free_record(k);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        pthread_mutex_init(&locks[i], NULL);
    }
    k->launch_locks = locks;
    k->num_kernels = table->num_kernels;
    opencl_kernels *won =
        (opencl_kernels *)tally_device_state_install(table, TALLY_DEVICE_API_OPENCL, k);
    if (won != k) {
        free_record(k);
        return won;
    }
    pthread_mutex_lock(&tally_ocl_lock);
    k->next = tally_ocl.all_kernels;
    tally_ocl.all_kernels = k;
    pthread_mutex_unlock(&tally_ocl_lock);
    return k;
}

// The build log of `program`, cut to fit a message: when the whole log does not fit, from the
// start of the first line that mentions an error. "" when there is none.
static void build_log_excerpt(cl_program program, char *out, size_t size) {
    out[0] = '\0';
    size_t n = 0;
    if (tally_cl.clGetProgramBuildInfo(program, tally_ocl.device, CL_PROGRAM_BUILD_LOG, 0, NULL,
                                       &n) != CL_SUCCESS ||
        n == 0) {
        return;
    }
    char *log = (char *)malloc(n + 1);
    if (!log) {
        return;
    }
    if (tally_cl.clGetProgramBuildInfo(program, tally_ocl.device, CL_PROGRAM_BUILD_LOG, n, log,
                                       NULL) != CL_SUCCESS) {
        free(log);
        return;
    }
    log[n] = '\0';
    size_t len = strlen(log);
    while (len > 0 && (log[len - 1] == '\n' || log[len - 1] == ' ' || log[len - 1] == '\r')) {
        log[--len] = '\0';
    }
    const char *start = log;
    if (len >= size) {
        const char *e = strstr(log, "error");
        if (e) {
            while (e > log && e[-1] != '\n') {
                e--;
            }
            start = e;
        }
    }
    size_t rest = strlen(start);
    if (rest < size) {
        snprintf(out, size, "%s", start);
    } else {
        const size_t keep = size - 64;
        snprintf(out, size, "%.*s ... (%llu more bytes of build log)", (int)keep, start,
                 (unsigned long long)(rest - keep));
    }
    free(log);
}

// Builds the program (or shares the one of an entry with the same code) and the kernel of entry
// `index`. tally_ocl_lock held; the caller reports nothing more.
static int32_t build_locked(void *user_context, const tally_kernel_table *table, opencl_kernels *k,
                            int32_t index) {
    const char *routine = "halide_opencl_run";
    const tally_kernel_source *src = &table->kernels[index];
    if (!src->code) {
        return tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                  "%s: kernel '%s' has no OpenCL C source", routine, src->name);
    }
    cl_program program = NULL;
    for (int32_t j = 0; j < k->num_kernels && !program; j++) {
        if (j != index && k->programs[j] && table->kernels[j].code == src->code &&
            tally_cl.clRetainProgram(k->programs[j]) == CL_SUCCESS) {
            program = k->programs[j];
        }
    }
    cl_int err = CL_SUCCESS;
    char what[256];
    if (!program) {
        // NUL-terminated, code_size counting the NUL; never read past code_size.
        const char *text = (const char *)src->code;
        size_t length = src->code_size > 0 ? strnlen(text, (size_t)src->code_size) : 0;
        program = tally_cl.clCreateProgramWithSource(tally_ocl.context, 1, &text,
                                                     length ? &length : NULL, &err);
        if (!program || err != CL_SUCCESS) {
            snprintf(what, sizeof what, "kernel '%s': clCreateProgramWithSource", src->name);
            return tally_ocl_fail(user_context, TALLY_ERROR_DEVICE_RUN_FAILED, routine, what,
                                  err != CL_SUCCESS ? err : CL_OUT_OF_RESOURCES);
        }
        err = tally_cl.clBuildProgram(program, 1, &tally_ocl.device, "", NULL, NULL);
        if (err != CL_SUCCESS) {
            char log[TALLY_OCL_LOG_CHARS];
            build_log_excerpt(program, log, sizeof log);
            tally_cl.clReleaseProgram(program);
            return tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                      "%s: kernel '%s': building its OpenCL C source for '%s' "
                                      "failed: %s (%d)%s%s",
                                      routine, src->name, tally_ocl.device_name,
                                      tally_ocl_error_name(err), (int)err,
                                      log[0] ? "; build log:\n" : " (no build log)", log);
        }
    }
    cl_kernel kernel = tally_cl.clCreateKernel(program, src->name, &err);
    if (!kernel || err != CL_SUCCESS) {
        tally_cl.clReleaseProgram(program);
        if (err == CL_INVALID_KERNEL_NAME) {
            return tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                      "%s: the OpenCL C source of kernel '%s' defines no __kernel "
                                      "of that name",
                                      routine, src->name);
        }
        snprintf(what, sizeof what, "kernel '%s': clCreateKernel", src->name);
        return tally_ocl_fail(user_context, TALLY_ERROR_DEVICE_RUN_FAILED, routine, what,
                              err != CL_SUCCESS ? err : CL_OUT_OF_RESOURCES);
    }
    cl_uint num_args = 0;
    size_t group = 0;
    err = tally_cl.clGetKernelInfo(kernel, CL_KERNEL_NUM_ARGS, sizeof num_args, &num_args, NULL);
    if (err == CL_SUCCESS) {
        err = tally_cl.clGetKernelWorkGroupInfo(kernel, tally_ocl.device, CL_KERNEL_WORK_GROUP_SIZE,
                                                sizeof group, &group, NULL);
    }
    if (err != CL_SUCCESS) {
        tally_cl.clReleaseKernel(kernel);
        tally_cl.clReleaseProgram(program);
        snprintf(what, sizeof what, "kernel '%s': reading its argument count and work-group size",
                 src->name);
        return tally_ocl_fail(user_context, TALLY_ERROR_DEVICE_RUN_FAILED, routine, what, err);
    }
    k->programs[index] = program;
    k->num_args[index] = num_args;
    k->work_group_size[index] = group;
    atomic_store_explicit(&k->kernels[index], kernel, memory_order_release);
    return 0;
}

// The record and built kernel of the launch's entry, building it on first use.
static int32_t kernel_of(void *user_context, const tally_device_launch *l, opencl_kernels **out_k,
                         cl_kernel *out) {
    opencl_kernels *k = kernels_of(l->table);
    if (!k) {
        return tally_report_error(user_context, TALLY_ERROR_OUT_OF_MEMORY,
                                  "halide_opencl_run: kernel '%s': out of host memory",
                                  l->entry_name);
    }
    if (l->kernel_index >= k->num_kernels) {
        return tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                  "halide_opencl_run: kernel table changed size (%d kernels, "
                                  "expected %d)",
                                  (int)l->table->num_kernels, (int)k->num_kernels);
    }
    *out_k = k;
    *out = atomic_load_explicit(&k->kernels[l->kernel_index], memory_order_acquire);
    if (*out) {
        return 0;
    }
    int32_t r = 0;
    pthread_mutex_lock(&tally_ocl_lock);
    if (!atomic_load_explicit(&k->kernels[l->kernel_index], memory_order_acquire)) {
        r = build_locked(user_context, l->table, k, l->kernel_index);
    }
    pthread_mutex_unlock(&tally_ocl_lock);
    *out = atomic_load_explicit(&k->kernels[l->kernel_index], memory_order_acquire);
    return r;
}

// The work group and shared memory against the device's limits; reported when `report`.
static int32_t check_device_fits(void *user_context, const tally_device_launch *l, int report) {
    const int32_t *t = l->threads;
    const size_t *max = tally_ocl.max_work_item_sizes;
    for (int d = 0; d < 3; d++) {
        if ((size_t)t[d] > max[d]) {
            return !report
                       ? TALLY_ERROR_DEVICE_RUN_FAILED
                       : tally_report_error(
                             user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                             "halide_opencl_run: kernel '%s': a work group of %dx%dx%d "
                             "threads is too large for OpenCL device '%s': %d threads in "
                             "dimension %d, at most %llu (CL_DEVICE_MAX_WORK_ITEM_SIZES "
                             "%llux%llux%llu)",
                             l->entry_name, (int)t[0], (int)t[1], (int)t[2], tally_ocl.device_name,
                             (int)t[d], d, (unsigned long long)max[d], (unsigned long long)max[0],
                             (unsigned long long)max[1], (unsigned long long)max[2]);
        }
    }
    uint64_t total = (uint64_t)t[0] * (uint64_t)t[1] * (uint64_t)t[2];
    if (total > tally_ocl.max_work_group_size) {
        return !report ? TALLY_ERROR_DEVICE_RUN_FAILED
                       : tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                            "halide_opencl_run: kernel '%s': a work group of "
                                            "%dx%dx%d = %llu threads is too large for OpenCL "
                                            "device '%s': at most %llu "
                                            "(CL_DEVICE_MAX_WORK_GROUP_SIZE)",
                                            l->entry_name, (int)t[0], (int)t[1], (int)t[2],
                                            (unsigned long long)total, tally_ocl.device_name,
                                            (unsigned long long)tally_ocl.max_work_group_size);
    }
    if (l->shared_mem_bytes > 0 && (uint64_t)l->shared_mem_bytes > tally_ocl.local_mem_bytes) {
        return !report ? TALLY_ERROR_DEVICE_RUN_FAILED
                       : tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                            "halide_opencl_run: kernel '%s': %d bytes of shared "
                                            "memory, more than the %llu bytes of local memory of "
                                            "OpenCL device '%s' (CL_DEVICE_LOCAL_MEM_SIZE)",
                                            l->entry_name, (int)l->shared_mem_bytes,
                                            (unsigned long long)tally_ocl.local_mem_bytes,
                                            tally_ocl.device_name);
    }
    return 0;
}

// The argument count and work group against the built kernel's; *local_arg: the kernel takes a
// trailing __local pointer. Reported when `report`.
static int32_t check_kernel_fits(void *user_context, const tally_device_launch *l,
                                 const opencl_kernels *k, int *local_arg, int report) {
    const cl_uint n = k->num_args[l->kernel_index];
    const size_t group = k->work_group_size[l->kernel_index];
    *local_arg = n == (cl_uint)l->num_args + 1;
    if (n != (cl_uint)l->num_args && !*local_arg) {
        return !report ? TALLY_ERROR_DEVICE_RUN_FAILED
                       : tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                            "halide_opencl_run: kernel '%s': its OpenCL C source "
                                            "takes %u arguments, the launch passes %d (the source "
                                            "may take one more, last: a __local pointer for "
                                            "shared memory)",
                                            l->entry_name, (unsigned)n, (int)l->num_args);
    }
    const int32_t *t = l->threads;
    uint64_t total = (uint64_t)t[0] * (uint64_t)t[1] * (uint64_t)t[2];
    if (total > group) {
        return !report ? TALLY_ERROR_DEVICE_RUN_FAILED
                       : tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                            "halide_opencl_run: kernel '%s': a work group of "
                                            "%dx%dx%d = %llu threads is more than the kernel can "
                                            "take on OpenCL device '%s' (CL_KERNEL_WORK_GROUP_SIZE "
                                            "%llu)",
                                            l->entry_name, (int)t[0], (int)t[1], (int)t[2],
                                            (unsigned long long)total, tally_ocl.device_name,
                                            (unsigned long long)group);
    }
    return 0;
}

int tally_ocl_kernel_ready(const tally_device_launch *l) {
    const opencl_kernels *k =
        (const opencl_kernels *)tally_device_state(l->table, TALLY_DEVICE_API_OPENCL);
    int local_arg = 0;
    return k && l->kernel_index < k->num_kernels &&
           atomic_load_explicit(&k->kernels[l->kernel_index], memory_order_acquire) != NULL &&
           check_device_fits(NULL, l, 0) == 0 && check_kernel_fits(NULL, l, k, &local_arg, 0) == 0;
}

int32_t tally_ocl_compile(void *user_context, const tally_device_launch *l) {
    int32_t r = check_device_fits(user_context, l, 1);
    opencl_kernels *k = NULL;
    cl_kernel kernel = NULL;
    if (r == 0) {
        r = kernel_of(user_context, l, &k, &kernel);
    }
    int local_arg = 0;
    return r != 0 ? r : check_kernel_fits(user_context, l, k, &local_arg, 1);
}

// The cl_mem a kernel gets for buffer argument `i`: the buffer's own, or a new sub-buffer
// starting at the element buf->host points at (*made set; the caller releases it).
static int32_t buffer_argument(void *user_context, const tally_device_launch *l, int32_t i,
                               cl_mem *out, int *made) {
    const halide_buffer_t *buf = (const halide_buffer_t *)l->args[i];
    cl_mem mem = (cl_mem)(uintptr_t)buf->device;
    uint64_t offset = tally_buffer_host_offset(buf);
    *made = 0;
    *out = mem;
    if (offset == 0) {
        return 0;
    }
    if (offset % tally_ocl.base_align_bytes != 0) {
        return tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                  "halide_opencl_run: kernel '%s', argument %d: the buffer's "
                                  "host pointer lies %llu bytes into its span (negative strides), "
                                  "not a multiple of the %llu-byte base address alignment of "
                                  "OpenCL device '%s' (CL_DEVICE_MEM_BASE_ADDR_ALIGN), so no "
                                  "sub-buffer can start there",
                                  l->entry_name, (int)i, (unsigned long long)offset,
                                  (unsigned long long)tally_ocl.base_align_bytes,
                                  tally_ocl.device_name);
    }
    cl_buffer_region region;
    region.origin = (size_t)offset;
    region.size = (size_t)(tally_buffer_size_in_bytes(buf) - offset);
    cl_int err = CL_SUCCESS;
    cl_mem sub = tally_cl.clCreateSubBuffer(mem, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION,
                                            &region, &err);
    if (!sub || err != CL_SUCCESS) {
        char what[256];
        snprintf(what, sizeof what, "kernel '%s', argument %d: clCreateSubBuffer at byte %llu",
                 l->entry_name, (int)i, (unsigned long long)offset);
        return tally_ocl_fail(user_context, TALLY_ERROR_DEVICE_RUN_FAILED, "halide_opencl_run",
                              what, err != CL_SUCCESS ? err : CL_OUT_OF_RESOURCES);
    }
    *out = sub;
    *made = 1;
    return 0;
}

// Sets the arguments and enqueues, under the entry's lock. On failure *failed_arg is the
// argument whose clSetKernelArg failed (-1: the enqueue) and the error is returned.
static cl_int set_and_enqueue(const tally_device_launch *l, opencl_kernels *k, cl_kernel kernel,
                              const cl_mem *mems, int local_arg, cl_event *event,
                              int32_t *failed_arg) {
    pthread_mutex_t *lock = &k->launch_locks[l->kernel_index];
    cl_int err = CL_SUCCESS;
    pthread_mutex_lock(lock);
    for (int32_t i = 0; i < l->num_args && err == CL_SUCCESS; i++) {
        err =
            l->arg_is_buffer[i]
                ? tally_cl.clSetKernelArg(kernel, (cl_uint)i, sizeof(cl_mem), &mems[i])
                : tally_cl.clSetKernelArg(kernel, (cl_uint)i, (size_t)l->arg_sizes[i], l->args[i]);
        *failed_arg = i;
    }
    if (err == CL_SUCCESS && local_arg) {
        size_t bytes = l->shared_mem_bytes > 0 ? (size_t)l->shared_mem_bytes : 1;
        err = tally_cl.clSetKernelArg(kernel, (cl_uint)l->num_args, bytes, NULL);
        *failed_arg = l->num_args;
    }
    if (err == CL_SUCCESS) {
        size_t global[3], local[3];
        for (int d = 0; d < 3; d++) {
            local[d] = (size_t)l->threads[d];
            global[d] = (size_t)l->blocks[d] * local[d];
        }
        *failed_arg = -1;
        err = tally_cl.clEnqueueNDRangeKernel(tally_ocl.queue, kernel, 3, NULL, global, local, 0,
                                              NULL, event);
        if (err == CL_SUCCESS) {
            tally_ocl_count_enqueued();
        }
    }
    pthread_mutex_unlock(lock);
    return err;
}

int32_t tally_ocl_launch(void *user_context, const tally_device_launch *l, int timed) {
    opencl_kernels *k = NULL;
    cl_kernel kernel = NULL;
    int local_arg = 0;
    int32_t r = check_device_fits(user_context, l, 1);
    if (r == 0) {
        r = kernel_of(user_context, l, &k, &kernel);
    }
    if (r == 0) {
        r = check_kernel_fits(user_context, l, k, &local_arg, 1);
    }
    if (r != 0) {
        return r;
    }
    const int32_t n = l->num_args;
    cl_mem stack_mems[TALLY_OCL_STACK_ARGS];
    uint8_t stack_made[TALLY_OCL_STACK_ARGS];
    cl_mem *mems = stack_mems;
    uint8_t *made = stack_made;
    if (n > TALLY_OCL_STACK_ARGS) {
        mems = (cl_mem *)calloc((size_t)n, sizeof *mems);
        made = (uint8_t *)calloc((size_t)n, 1);
        if (!mems || !made) {
            free(mems);
            free(made);
            return tally_report_error(user_context, TALLY_ERROR_OUT_OF_MEMORY,
                                      "halide_opencl_run: kernel '%s': out of host memory",
                                      l->entry_name);
        }
    }
    memset(made, 0, (size_t)(n > 0 ? n : 0));
    for (int32_t i = 0; i < n && r == 0; i++) {
        mems[i] = NULL;
        if (l->arg_is_buffer[i]) {
            int m = 0;
            r = buffer_argument(user_context, l, i, &mems[i], &m);
            made[i] = (uint8_t)m;
        }
    }
    cl_event event = NULL;
    int32_t failed_arg = -1;
    cl_int err = CL_SUCCESS;
    if (r == 0) {
        err = set_and_enqueue(l, k, kernel, mems, local_arg, timed ? &event : NULL, &failed_arg);
        if (err == CL_SUCCESS) {
            tally_cl.clFlush(tally_ocl.queue);
        }
    }
    for (int32_t i = 0; i < n; i++) {
        if (made[i]) {
            tally_cl.clReleaseMemObject(mems[i]);  // deleted once the kernel is done with it
        }
    }
    if (mems != stack_mems) {
        free(mems);
        free(made);
    }
    if (r != 0) {
        return r;
    }
    if (err != CL_SUCCESS) {
        char what[256];
        const int32_t *g = l->blocks, *t = l->threads;
        if (failed_arg < 0) {
            snprintf(what, sizeof what,
                     "clEnqueueNDRangeKernel of '%s' on %dx%dx%d work groups of %dx%dx%d threads",
                     l->entry_name, (int)g[0], (int)g[1], (int)g[2], (int)t[0], (int)t[1],
                     (int)t[2]);
        } else if (failed_arg == n) {
            snprintf(what, sizeof what,
                     "kernel '%s', argument %d (__local, %d bytes of shared memory): "
                     "clSetKernelArg",
                     l->entry_name, (int)failed_arg, (int)l->shared_mem_bytes);
        } else {
            snprintf(what, sizeof what,
                     "kernel '%s', argument %d (%s of %lld bytes): clSetKernelArg", l->entry_name,
                     (int)failed_arg, l->arg_is_buffer[failed_arg] ? "a buffer" : "a scalar",
                     l->arg_is_buffer[failed_arg] ? (long long)sizeof(cl_mem)
                                                  : (long long)l->arg_sizes[failed_arg]);
        }
        return tally_ocl_fail(user_context, TALLY_ERROR_DEVICE_RUN_FAILED, "halide_opencl_run",
                              what, err);
    }
    if (event) {
        tally_ocl_keep_timed(event, &l->owner);
    }
    return 0;
}

void tally_ocl_kernels_release_locked(void) {
    for (opencl_kernels *k = tally_ocl.all_kernels; k; k = k->next) {
        for (int32_t i = 0; i < k->num_kernels; i++) {
            cl_kernel kernel = atomic_exchange_explicit(&k->kernels[i], NULL, memory_order_acq_rel);
            if (kernel) {
                tally_cl.clReleaseKernel(kernel);
            }
            if (k->programs[i]) {
                tally_cl.clReleaseProgram(k->programs[i]);
                k->programs[i] = NULL;
            }
        }
    }
}

#endif  // TALLY_HAVE_OPENCL_HEADERS
