// Halide's GPU module state, for lowered text whose kernels Halide compiled: at each run its host
// code calls halide_<api>_initialize_kernels(user_context, &state, source, size) with the module's
// kernels (the text's `<api>_gpu_source_kernels`) and a pointer to the module's state (`<api>_buf`,
// null at first), launches with halide_<api>_run(user_context, state, ...), and registers
// halide_<api>_finalize_kernels(user_context, state) to run when the pipeline returns.
//
// Here the state is a tally_kernel_table (tally_runtime.h), the same the launch path takes from
// Tally's own code: one entry per kernel the source defines, every entry pointing at the whole
// source (the back end builds one program per source and finds each kernel in it by name), with
// its argument counts unknown (-1): the back end checks a launch against the compiled kernel.
// The first initialization of a module makes its table and installs it with a compare-and-swap,
// so that concurrent first runs agree on one; later ones find it and do nothing. A table lives
// as long as the process (the module's state keeps pointing at it, and the back end keeps its
// programs with it until halide_device_release), reachable from the list below; finalize has
// nothing to give back.
//
// OpenCL: the kernels are the source's `__kernel void <name>(` definitions (attributes between
// `void` and the name are skipped; comments hold none), as Halide's OpenCL back end writes them.
//
// Vulkan: the kernels are the kernel modules of Halide 21's binary module, read by the rule of
// tally_halide_vulkan_module.h; each entry points at its own kernel module (binding header and
// SPIR-V), of layout TALLY_KERNEL_LAYOUT_HALIDE_VULKAN, with its storage buffer count from the
// header. A module that is not Halide's is rejected here, with what is wrong, before any launch.

#include "core/error.h"
#include "tally_halide_vulkan_module.h"
#include "tally_runtime.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

// Every table made, so that none is lost when a module is unloaded (its state was the only
// other pointer to it).
typedef struct state_record {
    struct state_record *next;
    tally_kernel_table table;
} state_record;

static pthread_mutex_t records_lock = PTHREAD_MUTEX_INITIALIZER;
static state_record *records;

static int is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
static int is_ident(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Skips white space and `__attribute__((...))` groups from p (< end).
static const char *skip_blanks_and_attributes(const char *p, const char *end) {
    for (;;) {
        while (p < end && is_space(*p)) {
            p++;
        }
        static const char attr[] = "__attribute__";
        if ((size_t)(end - p) > sizeof attr - 1 && memcmp(p, attr, sizeof attr - 1) == 0) {
            p += sizeof attr - 1;
            while (p < end && is_space(*p)) {
                p++;
            }
            int depth = 0;
            do {
                if (p >= end) {
                    return end;
                }
                depth += *p == '(' ? 1 : *p == ')' ? -1 : 0;
                p++;
            } while (depth > 0);
            continue;
        }
        return p;
    }
}

// Calls found(name, length) for each `__kernel void <name>(` of src[0, size).
static int32_t for_each_opencl_kernel(const char *src, size_t size,
                                      int32_t (*found)(void *, const char *, size_t), void *ctx) {
    static const char kw[] = "__kernel";
    const char *end = src + size;
    for (const char *p = src; p + sizeof kw - 1 <= end; p++) {
        // Comments hold no definitions.
        if (p + 1 < end && p[0] == '/' && p[1] == '/') {
            while (p + 1 < end && p[1] != '\n') {
                p++;
            }
            continue;
        }
        if (p + 1 < end && p[0] == '/' && p[1] == '*') {
            p += 2;
            while (p + 1 < end && !(p[0] == '*' && p[1] == '/')) {
                p++;
            }
            p++;
            continue;
        }
        if (memcmp(p, kw, sizeof kw - 1) != 0 || (p > src && is_ident(p[-1])) ||
            (p + sizeof kw - 1 < end && is_ident(p[sizeof kw - 1]))) {
            continue;
        }
        const char *q = skip_blanks_and_attributes(p + sizeof kw - 1, end);
        if ((size_t)(end - q) < 4 || memcmp(q, "void", 4) != 0 || (q + 4 < end && is_ident(q[4]))) {
            continue;
        }
        q = skip_blanks_and_attributes(q + 4, end);
        const char *name = q;
        while (q < end && is_ident(*q)) {
            q++;
        }
        const char *after = skip_blanks_and_attributes(q, end);
        if (q == name || after >= end || *after != '(') {
            continue;
        }
        int32_t r = found(ctx, name, (size_t)(q - name));
        if (r != 0) {
            return r;
        }
        p = q;
    }
    return 0;
}

typedef struct table_builder {
    tally_kernel_source *kernels;
    int32_t count;
    const char *src;
    uint64_t size;
    int32_t api;
} table_builder;

static int32_t count_kernel(void *ctx, const char *name, size_t length) {
    (void)name;
    (void)length;
    ((table_builder *)ctx)->count++;
    return 0;
}

static int32_t add_kernel(void *ctx, const char *name, size_t length) {
    table_builder *b = (table_builder *)ctx;
    char *copy = (char *)malloc(length + 1);
    if (!copy) {
        return TALLY_ERROR_OUT_OF_MEMORY;
    }
    memcpy(copy, name, length);
    copy[length] = '\0';
    tally_kernel_source *k = &b->kernels[b->count++];
    k->name = copy;
    k->code = (const uint8_t *)b->src;
    k->code_size = b->size;
    k->device_api = b->api;
    k->num_args = -1;
    k->num_buffers = -1;
    k->layout = TALLY_KERNEL_LAYOUT_TALLY;
    return 0;
}

static void free_record(state_record *r, int32_t names) {
    tally_kernel_source *kernels = (tally_kernel_source *)r->table.kernels;
    for (int32_t i = 0; i < names; i++) {
        free((void *)kernels[i].name);
    }
    free(kernels);
    free(r);
}

// The table of the kernels `src` defines for `api` (its entries found by `find`), or NULL after
// reporting why (`routine` names the caller) with the code in *error.
static state_record *
make_table(void *user_context, const char *routine, int32_t api, const char *src, int32_t size,
           int32_t (*find)(const char *, size_t, int32_t (*)(void *, const char *, size_t), void *),
           int32_t *error) {
    // The source's own length, at most `size` (Halide counts the terminating NUL).
    size_t n = 0;
    while (n < (size_t)size && src[n] != '\0') {
        n++;
    }
    table_builder b = {NULL, 0, src, (uint64_t)size, api};
    find(src, n, count_kernel, &b);
    if (b.count == 0) {
        *error =
            tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                               "%s: the source (%d bytes) defines no kernel", routine, (int)size);
        return NULL;
    }
    state_record *r = (state_record *)calloc(1, sizeof *r);
    b.kernels = (tally_kernel_source *)calloc((size_t)b.count, sizeof *b.kernels);
    if (!r || !b.kernels) {
        free(r);
        free(b.kernels);
        *error = tally_report_error(user_context, TALLY_ERROR_OUT_OF_MEMORY,
                                    "%s: out of host memory for the kernel table", routine);
        return NULL;
    }
    r->table.abi_version = TALLY_RUNTIME_ABI_VERSION;
    r->table.kernels = b.kernels;
    b.count = 0;
    if (find(src, n, add_kernel, &b) != 0) {
        r->table.num_kernels = b.count;
        free_record(r, b.count);
        *error = tally_report_error(user_context, TALLY_ERROR_OUT_OF_MEMORY,
                                    "%s: out of host memory for the kernel names", routine);
        return NULL;
    }
    r->table.num_kernels = b.count;
    return r;
}

// Makes r's table the module's state unless a concurrent first run installed one first (then r
// is freed), and keeps it listed.
static void install(void **state_ptr, state_record *r) {
    void *expected = NULL;
    if (!__atomic_compare_exchange_n(state_ptr, &expected, &r->table, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        free_record(r, r->table.num_kernels);  // another first run installed one
        return;
    }
    pthread_mutex_lock(&records_lock);
    r->next = records;
    records = r;
    pthread_mutex_unlock(&records_lock);
}

// The checks every initialize makes of its arguments: 0, or the reported error.
static int32_t check_arguments(void *user_context, const char *routine, void **state_ptr,
                               const char *src, int32_t size) {
    if (!state_ptr || !src || size <= 0) {
        return tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT, "%s: %s", routine,
                                  !state_ptr ? "no state pointer"
                                  : !src     ? "no source"
                                             : "an empty source");
    }
    return 0;
}

int32_t halide_opencl_initialize_kernels(void *user_context, void **state_ptr, const char *src,
                                         int32_t size) {
    static const char routine[] = "halide_opencl_initialize_kernels";
    int32_t bad = check_arguments(user_context, routine, state_ptr, src, size);
    if (bad != 0) {
        return bad;
    }
    if (__atomic_load_n(state_ptr, __ATOMIC_ACQUIRE)) {
        return 0;
    }
    int32_t error = 0;
    state_record *r = make_table(user_context, routine, TALLY_DEVICE_API_OPENCL, src, size,
                                 for_each_opencl_kernel, &error);
    if (!r) {
        return error;
    }
    install(state_ptr, r);
    return 0;
}

void halide_opencl_finalize_kernels(void *user_context, void *state) {
    (void)user_context;
    (void)state;
}

// The table of the kernels of Halide's Vulkan module src[0, size), or NULL after reporting why
// with the code in *error.
static state_record *make_vulkan_table(void *user_context, const char *routine, const uint8_t *src,
                                       size_t size, int32_t *error) {
    char why[256];
    size_t table_bytes = 0;
    uint64_t module_bytes = 0;
    uint32_t count = tally_hvk_read_module(src, size, &table_bytes, &module_bytes, NULL,
                                           "the module", why, sizeof why);
    if (count != 0 && module_bytes != size - table_bytes) {
        snprintf(why, sizeof why,
                 "its table gives %u kernel modules of %llu bytes after %llu bytes of table; the "
                 "module has %llu bytes",
                 count, (unsigned long long)module_bytes, (unsigned long long)table_bytes,
                 (unsigned long long)size);
        count = 0;
    }
    tally_hvk_kernel *found =
        count ? (tally_hvk_kernel *)calloc(count, sizeof(tally_hvk_kernel)) : NULL;
    state_record *r = count ? (state_record *)calloc(1, sizeof *r) : NULL;
    tally_kernel_source *kernels =
        count ? (tally_kernel_source *)calloc(count, sizeof(tally_kernel_source)) : NULL;
    if (count == 0) {
        *error = tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                                    "%s: not Halide's Vulkan module (%llu bytes): %s", routine,
                                    (unsigned long long)size, why);
        return NULL;
    }
    if (!found || !r || !kernels) {
        free(found);
        free(r);
        free(kernels);
        *error = tally_report_error(user_context, TALLY_ERROR_OUT_OF_MEMORY,
                                    "%s: out of host memory for the kernel table", routine);
        return NULL;
    }
    tally_hvk_read_module(src, size, &table_bytes, &module_bytes, found, "the module", why,
                          sizeof why);
    r->table.abi_version = TALLY_RUNTIME_ABI_VERSION;
    r->table.kernels = kernels;
    for (uint32_t k = 0; k < count; k++) {
        tally_hvk_header h;
        if (!tally_hvk_read_header(found[k].code, found[k].code_size, &h, why, sizeof why)) {
            *error = tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                                        "%s: kernel %u of Halide's Vulkan module (%s): %s", routine,
                                        k, found[k].name, why);
            free_record(r, (int32_t)k);
            free(found);
            return NULL;
        }
        const size_t length = strlen(found[k].name);
        char *name = (char *)malloc(length + 1);
        if (!name) {
            free_record(r, (int32_t)k);
            free(found);
            *error = tally_report_error(user_context, TALLY_ERROR_OUT_OF_MEMORY,
                                        "%s: out of host memory for the kernel names", routine);
            return NULL;
        }
        memcpy(name, found[k].name, length + 1);
        kernels[k].name = name;
        kernels[k].code = found[k].code;
        kernels[k].code_size = found[k].code_size;
        kernels[k].device_api = TALLY_DEVICE_API_VULKAN;
        kernels[k].num_args = -1;
        kernels[k].num_buffers = (int32_t)h.storage_buffers;
        kernels[k].layout = TALLY_KERNEL_LAYOUT_HALIDE_VULKAN;
    }
    r->table.num_kernels = (int32_t)count;
    free(found);
    return r;
}

int32_t halide_vulkan_initialize_kernels(void *user_context, void **state_ptr, const char *src,
                                         int32_t size) {
    static const char routine[] = "halide_vulkan_initialize_kernels";
    int32_t bad = check_arguments(user_context, routine, state_ptr, src, size);
    if (bad != 0) {
        return bad;
    }
    if (__atomic_load_n(state_ptr, __ATOMIC_ACQUIRE)) {
        return 0;
    }
    int32_t error = 0;
    state_record *r =
        make_vulkan_table(user_context, routine, (const uint8_t *)src, (size_t)size, &error);
    if (!r) {
        return error;
    }
    install(state_ptr, r);
    return 0;
}

void halide_vulkan_finalize_kernels(void *user_context, void *state) {
    (void)user_context;
    (void)state;
}
