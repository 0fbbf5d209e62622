// Kernels: each tally_kernel_source holds one PTX module (NUL-terminated text). A table's
// device_state[TALLY_DEVICE_API_CUDA] points at a record installed once with compare-exchange; it
// holds each kernel's CUmodule and CUfunction, loaded on the first launch (tally_cuda_compile, in
// the one-time compile slot) under tally_cuda_lock, the PTX JIT's error log going into the
// report. Records live as long as the process (a table may be used again after a release);
// release only unloads their modules. A launch passes each buffer as the device address of the
// element buf->host points at, each scalar by value, on the one stream, between events when
// timed. What every launch checks whatever the API is done before, by device_launch.c.

#include "core/buffer.h"
#include "core/error.h"
#include "device/backend.h"
#include "device/cuda/cuda_internal.h"
#include "profiler/device_timeline.h"
#include "tally_runtime.h"

#include <stdio.h>
#include <stdlib.h>

// The record of a table's loaded kernels, created on first use.
static cuda_kernels *kernels_of(tally_kernel_table *table) {
    cuda_kernels *k = (cuda_kernels *)tally_device_state(table, TALLY_DEVICE_API_CUDA);
    if (k) {
        return k;
    }
    k = (cuda_kernels *)calloc(1, sizeof *k);
    int32_t n = table->num_kernels > 0 ? table->num_kernels : 1;
    if (k) {
        k->num_kernels = table->num_kernels;
        k->modules = (CUmodule *)calloc((size_t)n, sizeof *k->modules);
        k->functions = (_Atomic(CUfunction) *)calloc((size_t)n, sizeof *k->functions);
    }
    if (!k || !k->modules || !k->functions) {
        if (k) {
            free(k->modules);
            free((void *)k->functions);
            free(k);
        }
        return NULL;
    }
    cuda_kernels *won = (cuda_kernels *)tally_device_state_install(table, TALLY_DEVICE_API_CUDA, k);
    if (won != k) {
        free(k->modules);
        free((void *)k->functions);
        free(k);
        return won;
    }
    pthread_mutex_lock(&tally_cuda_lock);
    k->next = tally_cuda.all_kernels;
    tally_cuda.all_kernels = k;
    pthread_mutex_unlock(&tally_cuda_lock);
    return k;
}

// The CUfunction of kernel `index` of the table, loading its module on first use (context
// already current).
static int32_t kernel_function(void *user_context, tally_kernel_table *table, int32_t index,
                               CUfunction *out) {
    const tally_kernel_source *src = &table->kernels[index];
    cuda_kernels *k = kernels_of(table);
    if (!k) {
        return tally_report_error(user_context, TALLY_ERROR_OUT_OF_MEMORY,
                                  "halide_cuda_run: kernel '%s': out of host memory", src->name);
    }
    if (index >= k->num_kernels) {
        return tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                  "halide_cuda_run: kernel table changed size (%d kernels, "
                                  "expected %d)",
                                  (int)table->num_kernels, (int)k->num_kernels);
    }
    *out = atomic_load_explicit(&k->functions[index], memory_order_acquire);
    if (*out) {
        return 0;
    }
    int32_t result = 0;
    pthread_mutex_lock(&tally_cuda_lock);
    *out = atomic_load_explicit(&k->functions[index], memory_order_acquire);
    if (!*out) {
        char log[4096] = "";
        CUjit_option options[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
        void *values[2] = {log, (void *)(uintptr_t)sizeof log};
        CUmodule module = NULL;
        CUresult c = tally_cu.ModuleLoadDataEx(&module, src->code, 2, options, values);
        if (c != CUDA_SUCCESS) {
            char d[256];
            tally_cuda_describe(c, d, sizeof d);
            log[sizeof log - 1] = '\0';
            result = tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                        "halide_cuda_run: loading the PTX of kernel '%s' failed: "
                                        "%s%s%s",
                                        src->name, d, log[0] ? "\n" : "", log);
        } else {
            CUfunction f = NULL;
            c = tally_cu.ModuleGetFunction(&f, module, src->name);
            if (c != CUDA_SUCCESS) {
                char d[256];
                tally_cuda_describe(c, d, sizeof d);
                tally_cu.ModuleUnload(module);
                result = tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                            "halide_cuda_run: the PTX of kernel '%s' has no entry "
                                            "of that name: %s",
                                            src->name, d);
            } else {
                k->modules[index] = module;
                atomic_store_explicit(&k->functions[index], f, memory_order_release);
                *out = f;
            }
        }
    }
    pthread_mutex_unlock(&tally_cuda_lock);
    return result;
}

int tally_cuda_kernel_ready(const tally_device_launch *l) {
    const cuda_kernels *k =
        (const cuda_kernels *)tally_device_state(l->table, TALLY_DEVICE_API_CUDA);
    return k && l->kernel_index < k->num_kernels &&
           atomic_load_explicit(&k->functions[l->kernel_index], memory_order_acquire) != NULL;
}

int32_t tally_cuda_compile(void *user_context, const tally_device_launch *l) {
    int32_t r = tally_cuda_push(user_context, TALLY_ERROR_DEVICE_RUN_FAILED);
    if (r != 0) {
        return r;
    }
    CUfunction f = NULL;
    r = kernel_function(user_context, l->table, l->kernel_index, &f);
    tally_cuda_pop();
    return r;
}

#define CUDA_STACK_ARGS 64

int32_t tally_cuda_launch(void *user_context, const tally_device_launch *l, int timed) {
    const int32_t n = l->num_args;
    void *stack_params[CUDA_STACK_ARGS];
    CUdeviceptr stack_ptrs[CUDA_STACK_ARGS];
    void **params = stack_params;
    CUdeviceptr *ptrs = stack_ptrs;
    if (n > CUDA_STACK_ARGS) {
        params = (void **)malloc((size_t)n * sizeof *params);
        ptrs = (CUdeviceptr *)malloc((size_t)n * sizeof *ptrs);
        if (!params || !ptrs) {
            free(params);
            free(ptrs);
            return tally_report_error(user_context, TALLY_ERROR_OUT_OF_MEMORY,
                                      "halide_cuda_run: kernel '%s': out of host memory",
                                      l->entry_name);
        }
    }
    for (int32_t i = 0; i < n; i++) {
        if (l->arg_is_buffer[i]) {
            const halide_buffer_t *buf = (const halide_buffer_t *)l->args[i];
            ptrs[i] = (CUdeviceptr)buf->device + tally_buffer_host_offset(buf);
            params[i] = &ptrs[i];
        } else {
            params[i] = l->args[i];
        }
    }
    int32_t r = tally_cuda_push(user_context, TALLY_ERROR_DEVICE_RUN_FAILED);
    CUfunction f = NULL;
    if (r == 0) {
        r = kernel_function(user_context, l->table, l->kernel_index, &f);
        if (r == 0) {
            CUevent begin = NULL;
            if (timed) {
                tally_cuda_begin_timed(&begin);
            }
            const int32_t *g = l->blocks, *t = l->threads;
            CUresult c = tally_cu.LaunchKernel(
                f, (unsigned)g[0], (unsigned)g[1], (unsigned)g[2], (unsigned)t[0], (unsigned)t[1],
                (unsigned)t[2], (unsigned)(l->shared_mem_bytes > 0 ? l->shared_mem_bytes : 0),
                tally_cuda.stream, params, NULL);
            if (begin) {
                tally_cuda_end_timed(begin, c == CUDA_SUCCESS, &l->owner);
            }
            if (c != CUDA_SUCCESS) {
                char what[512];
                snprintf(what, sizeof what,
                         "cuLaunchKernel of '%s' on %dx%dx%d blocks of %dx%dx%d threads",
                         l->entry_name, (int)g[0], (int)g[1], (int)g[2], (int)t[0], (int)t[1],
                         (int)t[2]);
                r = tally_cuda_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED, what, c);
            }
        }
        tally_cuda_pop();
    }
    if (params != stack_params) {
        free(params);
        free(ptrs);
    }
    return r;
}

void tally_cuda_kernels_release_locked(void) {
    for (cuda_kernels *k = tally_cuda.all_kernels; k; k = k->next) {
        for (int32_t i = 0; i < k->num_kernels; i++) {
            atomic_store_explicit(&k->functions[i], NULL, memory_order_release);
            if (k->modules[i]) {
                tally_cu.ModuleUnload(k->modules[i]);
                k->modules[i] = NULL;
            }
        }
    }
}
