// Error and print hooks, and the error helpers generated assertions call.
//
// The hooks are function pointers held in atomics so that a user can swap them while pipelines run
// on other threads. Every helper formats its message into a stack buffer (no allocation: they run
// when memory may be exhausted), reports it and returns its code; nothing here ever aborts.

#include "core/error.h"
#include "core/context.h"
#include "profiler/run.h"
#include "tally_runtime.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

// Writes all of `len` bytes to fd, retrying on short writes and EINTR.
static void write_all(int fd, const char *s, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, s, len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return;
        }
        s += n;
        len -= (size_t)n;
    }
}

static void default_error_handler(void *user_context, const char *msg) {
    (void)user_context;
    // One write per message, so concurrent errors do not interleave mid-line.
    char buf[4096];
    size_t len = strlen(msg);
    int newline = len == 0 || msg[len - 1] != '\n';
    int n = snprintf(buf, sizeof(buf), "Error: %s%s", msg, newline ? "\n" : "");
    if (n >= 0 && (size_t)n < sizeof(buf)) {
        write_all(STDERR_FILENO, buf, (size_t)n);
    } else {
        write_all(STDERR_FILENO, "Error: ", 7);
        write_all(STDERR_FILENO, msg, len);
        if (newline) {
            write_all(STDERR_FILENO, "\n", 1);
        }
    }
}

// As Halide's runtime prints (posix_io.cpp): what a pipeline prints goes to stdout.
static void default_print_handler(void *user_context, const char *msg) {
    (void)user_context;
    write_all(STDOUT_FILENO, msg, strlen(msg));
}

static _Atomic(tally_message_handler_t) error_handler = default_error_handler;
static _Atomic(tally_message_handler_t) print_handler = default_print_handler;

tally_message_handler_t tally_set_error_handler(tally_message_handler_t handler) {
    return atomic_exchange(&error_handler, handler ? handler : default_error_handler);
}

tally_message_handler_t tally_set_print_handler(tally_message_handler_t handler) {
    return atomic_exchange(&print_handler, handler ? handler : default_print_handler);
}

void halide_error(void *user_context, const char *msg) {
    // An error reported inside a run means the run is failing: its end settles what the error
    // exit releases without reporting (see merge_into_pipeline_locked in profiler.c). The flag is
    // the one thing of the profiler's that core touches (its type, profiler/run.h; no call).
    tally_context *ctx = tally_get_current_context();
    if (ctx && ctx->instance) {
        atomic_store_explicit(&ctx->instance->failed, 1, memory_order_relaxed);
    }
    tally_message_handler_t handler = atomic_load(&error_handler);
    handler(user_context, msg ? msg : "(null)");
}

void halide_print(void *user_context, const char *msg) {
    tally_message_handler_t handler = atomic_load(&print_handler);
    handler(user_context, msg ? msg : "(null)");
}

void tally_print_diagnostic(void *user_context, const char *msg) {
    tally_message_handler_t handler = atomic_load(&print_handler);
    if (handler == default_print_handler) {
        write_all(STDERR_FILENO, msg ? msg : "(null)", strlen(msg ? msg : "(null)"));
    } else {
        handler(user_context, msg ? msg : "(null)");
    }
}

int32_t tally_report_error(void *user_context, int32_t code, const char *fmt, ...) {
    char buf[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(buf, sizeof(buf), fmt, args);
    va_end(args);
    halide_error(user_context, buf);
    return code;
}

const char *tally_error_code_name(int32_t code) {
    switch (code) {
#define TALLY_CODE_NAME(name)                                                                      \
    case TALLY_##name:                                                                             \
        return #name;
        TALLY_CODE_NAME(SUCCESS)
        TALLY_CODE_NAME(ERROR_GENERIC)
        TALLY_CODE_NAME(ERROR_EXPLICIT_BOUNDS_TOO_SMALL)
        TALLY_CODE_NAME(ERROR_BAD_TYPE)
        TALLY_CODE_NAME(ERROR_ACCESS_OUT_OF_BOUNDS)
        TALLY_CODE_NAME(ERROR_BUFFER_ALLOCATION_TOO_LARGE)
        TALLY_CODE_NAME(ERROR_BUFFER_EXTENTS_TOO_LARGE)
        TALLY_CODE_NAME(ERROR_CONSTRAINTS_MAKE_REQUIRED_REGION_SMALLER)
        TALLY_CODE_NAME(ERROR_CONSTRAINT_VIOLATED)
        TALLY_CODE_NAME(ERROR_PARAM_TOO_SMALL)
        TALLY_CODE_NAME(ERROR_PARAM_TOO_LARGE)
        TALLY_CODE_NAME(ERROR_OUT_OF_MEMORY)
        TALLY_CODE_NAME(ERROR_BUFFER_ARGUMENT_IS_NULL)
        TALLY_CODE_NAME(ERROR_DEBUG_TO_FILE_FAILED)
        TALLY_CODE_NAME(ERROR_COPY_TO_HOST_FAILED)
        TALLY_CODE_NAME(ERROR_COPY_TO_DEVICE_FAILED)
        TALLY_CODE_NAME(ERROR_DEVICE_MALLOC_FAILED)
        TALLY_CODE_NAME(ERROR_DEVICE_SYNC_FAILED)
        TALLY_CODE_NAME(ERROR_DEVICE_FREE_FAILED)
        TALLY_CODE_NAME(ERROR_NO_DEVICE_INTERFACE)
        TALLY_CODE_NAME(ERROR_INTERNAL)
        TALLY_CODE_NAME(ERROR_DEVICE_RUN_FAILED)
        TALLY_CODE_NAME(ERROR_UNALIGNED_HOST_PTR)
        TALLY_CODE_NAME(ERROR_BAD_FOLD)
        TALLY_CODE_NAME(ERROR_FOLD_FACTOR_TOO_SMALL)
        TALLY_CODE_NAME(ERROR_REQUIREMENT_FAILED)
        TALLY_CODE_NAME(ERROR_BUFFER_EXTENTS_NEGATIVE)
        TALLY_CODE_NAME(ERROR_SPECIALIZE_FAIL)
        TALLY_CODE_NAME(ERROR_HOST_IS_NULL)
        TALLY_CODE_NAME(ERROR_BAD_EXTERN_FOLD)
        TALLY_CODE_NAME(ERROR_DEVICE_INTERFACE_NO_DEVICE)
        TALLY_CODE_NAME(ERROR_HOST_AND_DEVICE_DIRTY)
        TALLY_CODE_NAME(ERROR_BUFFER_IS_NULL)
        TALLY_CODE_NAME(ERROR_DEVICE_BUFFER_COPY_FAILED)
        TALLY_CODE_NAME(ERROR_INCOMPATIBLE_DEVICE_INTERFACE)
        TALLY_CODE_NAME(ERROR_BAD_DIMENSIONS)
        TALLY_CODE_NAME(ERROR_DEVICE_DIRTY_WITH_NO_DEVICE_SUPPORT)
        TALLY_CODE_NAME(ERROR_STORAGE_BOUND_TOO_SMALL)
        TALLY_CODE_NAME(ERROR_SPLIT_FACTOR_NOT_POSITIVE)
        TALLY_CODE_NAME(ERROR_BAD_ARGUMENT)
        TALLY_CODE_NAME(ERROR_THREAD_START_FAILED)
        TALLY_CODE_NAME(ERROR_TIMER_FAILED)
        TALLY_CODE_NAME(ERROR_TOO_MANY_INSTANCES)
        TALLY_CODE_NAME(ERROR_NOT_FOUND)
        TALLY_CODE_NAME(ERROR_IO)
        TALLY_CODE_NAME(ERROR_WRONG_THREAD)
#undef TALLY_CODE_NAME
    }
    return "ERROR_UNKNOWN";
}

// ---- helpers called by generated code ----------------------------------------------------

static const char *str_or_null(const char *s) {
    return s ? s : "(null)";
}

// "<call> <stage> returned non-zero value: <result>", reported with the stage's own result.
static int32_t extern_stage_error(void *user_context, const char *call, const char *stage,
                                  int32_t result) {
    return tally_report_error(user_context, result, "%s %s returned non-zero value: %d", call,
                              str_or_null(stage), (int)result);
}

int32_t halide_error_bounds_inference_call_failed(void *user_context, const char *extern_stage_name,
                                                  int32_t result) {
    return extern_stage_error(user_context, "Bounds inference call to external stage",
                              extern_stage_name, result);
}

int32_t halide_error_extern_stage_failed(void *user_context, const char *extern_stage_name,
                                         int32_t result) {
    return extern_stage_error(user_context, "Call to external stage", extern_stage_name, result);
}

int32_t halide_error_explicit_bounds_too_small(void *user_context, const char *func_name,
                                               const char *var_name, int32_t min_bound,
                                               int32_t max_bound, int32_t min_required,
                                               int32_t max_required) {
    return tally_report_error(
        user_context, TALLY_ERROR_EXPLICIT_BOUNDS_TOO_SMALL,
        "Bounds given for %s in %s (from %d to %d) do not cover required region (from %d to %d)",
        str_or_null(var_name), str_or_null(func_name), (int)min_bound, (int)max_bound,
        (int)min_required, (int)max_required);
}

// Writes a packed type (code | bits << 8 | lanes << 16) as e.g. "float32" or "uint8x4".
static void format_type(char *buf, size_t size, uint32_t packed) {
    static const char *const codes[] = {"int", "uint", "float", "handle", "bfloat"};
    uint32_t code = packed & 0xff;
    uint32_t bits = (packed >> 8) & 0xff;
    uint32_t lanes = packed >> 16;
    const char *code_name = code < 5 ? codes[code] : "code?";
    if (lanes > 1) {
        snprintf(buf, size, "%s%ux%u", code_name, (unsigned)bits, (unsigned)lanes);
    } else {
        snprintf(buf, size, "%s%u", code_name, (unsigned)bits);
    }
}

int32_t halide_error_bad_type(void *user_context, const char *func_name, uint32_t type_given,
                              uint32_t correct_type) {
    char given[32], correct[32];
    format_type(given, sizeof(given), type_given);
    format_type(correct, sizeof(correct), correct_type);
    return tally_report_error(user_context, TALLY_ERROR_BAD_TYPE,
                              "%s has type %s but type of the buffer passed in is %s",
                              str_or_null(func_name), correct, given);
}

int32_t halide_error_bad_dimensions(void *user_context, const char *func_name,
                                    int32_t dimensions_given, int32_t correct_dimensions) {
    return tally_report_error(user_context, TALLY_ERROR_BAD_DIMENSIONS,
                              "%s requires a buffer of exactly %d dimensions, but the buffer "
                              "passed in has %d dimensions",
                              str_or_null(func_name), (int)correct_dimensions,
                              (int)dimensions_given);
}

int32_t halide_error_access_out_of_bounds(void *user_context, const char *func_name,
                                          int32_t dimension, int32_t min_touched,
                                          int32_t max_touched, int32_t min_valid,
                                          int32_t max_valid) {
    if (min_touched < min_valid) {
        return tally_report_error(user_context, TALLY_ERROR_ACCESS_OUT_OF_BOUNDS,
                                  "%s is accessed at %d, which is before the min (%d) in "
                                  "dimension %d",
                                  str_or_null(func_name), (int)min_touched, (int)min_valid,
                                  (int)dimension);
    }
    return tally_report_error(user_context, TALLY_ERROR_ACCESS_OUT_OF_BOUNDS,
                              "%s is accessed at %d, which is beyond the max (%d) in dimension %d",
                              str_or_null(func_name), (int)max_touched, (int)max_valid,
                              (int)dimension);
}

int32_t halide_error_buffer_allocation_too_large(void *user_context, const char *buffer_name,
                                                 uint64_t allocation_size, uint64_t max_size) {
    return tally_report_error(user_context, TALLY_ERROR_BUFFER_ALLOCATION_TOO_LARGE,
                              "Total allocation for buffer %s is %" PRIu64
                              ", which exceeds the maximum size of %" PRIu64,
                              str_or_null(buffer_name), allocation_size, max_size);
}

int32_t halide_error_buffer_extents_negative(void *user_context, const char *buffer_name,
                                             int32_t dimension, int32_t extent) {
    return tally_report_error(user_context, TALLY_ERROR_BUFFER_EXTENTS_NEGATIVE,
                              "The extents for buffer %s dimension %d is negative (%d)",
                              str_or_null(buffer_name), (int)dimension, (int)extent);
}

int32_t halide_error_buffer_extents_too_large(void *user_context, const char *buffer_name,
                                              int64_t actual_size, int64_t max_size) {
    return tally_report_error(user_context, TALLY_ERROR_BUFFER_EXTENTS_TOO_LARGE,
                              "Product of extents for buffer %s is %" PRId64
                              ", which exceeds the maximum size of %" PRId64,
                              str_or_null(buffer_name), actual_size, max_size);
}

int32_t halide_error_constraints_make_required_region_smaller(
    void *user_context, const char *buffer_name, int32_t dimension, int32_t constrained_min,
    int32_t constrained_extent, int32_t required_min, int32_t required_extent) {
    return tally_report_error(
        user_context, TALLY_ERROR_CONSTRAINTS_MAKE_REQUIRED_REGION_SMALLER,
        "Applying the constraints on %s to the required region made it smaller in dimension %d. "
        "Required size: %d to %d. Constrained size: %d to %d.",
        str_or_null(buffer_name), (int)dimension, (int)required_min,
        (int)(required_min + required_extent - 1), (int)constrained_min,
        (int)(constrained_min + constrained_extent - 1));
}

int32_t halide_error_constraint_violated(void *user_context, const char *var, int32_t val,
                                         const char *constrained_var, int32_t constrained_val) {
    return tally_report_error(user_context, TALLY_ERROR_CONSTRAINT_VIOLATED,
                              "Constraint violated: %s (%d) == %s (%d)", str_or_null(var), (int)val,
                              str_or_null(constrained_var), (int)constrained_val);
}

// halide_error_param_too_{small,large}_{i64,u64,f64}: "Parameter <name> is <val> but must be at
// least|most <limit>", one definition per value type and direction.
#define TALLY_PARAM_ERROR(name, type, fmt, code)                                                   \
    int32_t name(void *user_context, const char *param_name, type val, type limit) {               \
        return tally_report_error(user_context, code,                                              \
                                  "Parameter %s is " fmt " but must be at %s " fmt,                \
                                  str_or_null(param_name), val,                                    \
                                  code == TALLY_ERROR_PARAM_TOO_SMALL ? "least" : "most", limit);  \
    }
TALLY_PARAM_ERROR(halide_error_param_too_small_i64, int64_t, "%" PRId64,
                  TALLY_ERROR_PARAM_TOO_SMALL)
TALLY_PARAM_ERROR(halide_error_param_too_small_u64, uint64_t, "%" PRIu64,
                  TALLY_ERROR_PARAM_TOO_SMALL)
TALLY_PARAM_ERROR(halide_error_param_too_small_f64, double, "%g", TALLY_ERROR_PARAM_TOO_SMALL)
TALLY_PARAM_ERROR(halide_error_param_too_large_i64, int64_t, "%" PRId64,
                  TALLY_ERROR_PARAM_TOO_LARGE)
TALLY_PARAM_ERROR(halide_error_param_too_large_u64, uint64_t, "%" PRIu64,
                  TALLY_ERROR_PARAM_TOO_LARGE)
TALLY_PARAM_ERROR(halide_error_param_too_large_f64, double, "%g", TALLY_ERROR_PARAM_TOO_LARGE)
#undef TALLY_PARAM_ERROR

int32_t halide_error_out_of_memory(void *user_context) {
    return tally_report_error(user_context, TALLY_ERROR_OUT_OF_MEMORY,
                              "Out of memory (halide_malloc returned NULL)");
}

int32_t halide_error_buffer_argument_is_null(void *user_context, const char *buffer_name) {
    return tally_report_error(user_context, TALLY_ERROR_BUFFER_ARGUMENT_IS_NULL,
                              "Buffer argument %s is NULL", str_or_null(buffer_name));
}

int32_t halide_error_unaligned_host_ptr(void *user_context, const char *func_name,
                                        int32_t alignment) {
    return tally_report_error(user_context, TALLY_ERROR_UNALIGNED_HOST_PTR,
                              "The host pointer of %s is not aligned to a %d bytes boundary",
                              str_or_null(func_name), (int)alignment);
}

int32_t halide_error_host_is_null(void *user_context, const char *func_name) {
    return tally_report_error(user_context, TALLY_ERROR_HOST_IS_NULL,
                              "The host pointer of %s is null, but the pipeline will access it "
                              "on the host",
                              str_or_null(func_name));
}

int32_t halide_error_device_dirty_with_no_device_support(void *user_context,
                                                         const char *buffer_name) {
    return tally_report_error(user_context, TALLY_ERROR_DEVICE_DIRTY_WITH_NO_DEVICE_SUPPORT,
                              "The buffer %s is dirty on device, but this pipeline was compiled "
                              "with no support for device to host copies",
                              str_or_null(buffer_name));
}

int32_t halide_error_storage_bound_too_small(void *user_context, const char *func_name,
                                             const char *var_name, int32_t provided_size,
                                             int32_t required_size) {
    return tally_report_error(user_context, TALLY_ERROR_STORAGE_BOUND_TOO_SMALL,
                              "The explicit allocation bound (%d) of dimension %s of %s is too "
                              "small to store the required region (%d).",
                              (int)provided_size, str_or_null(var_name), str_or_null(func_name),
                              (int)required_size);
}

int32_t halide_error_split_factor_not_positive(void *user_context, const char *func_name,
                                               const char *orig, const char *outer,
                                               const char *inner, const char *factor_str,
                                               int32_t factor) {
    return tally_report_error(user_context, TALLY_ERROR_SPLIT_FACTOR_NOT_POSITIVE,
                              "In schedule for func %s, the factor used to split the variable %s "
                              "into %s and %s is %s. This evaluated to %d, which is not strictly "
                              "positive. Consider using max(%s, 1) instead.",
                              str_or_null(func_name), str_or_null(orig), str_or_null(outer),
                              str_or_null(inner), str_or_null(factor_str), (int)factor,
                              str_or_null(factor_str));
}

int32_t halide_error_bad_fold(void *user_context, const char *func_name, const char *var_name,
                              const char *loop_name) {
    return tally_report_error(user_context, TALLY_ERROR_BAD_FOLD,
                              "The folded storage dimension %s of %s was accessed out of order by "
                              "loop %s",
                              str_or_null(var_name), str_or_null(func_name),
                              str_or_null(loop_name));
}

int32_t halide_error_bad_extern_fold(void *user_context, const char *func_name, int32_t dim,
                                     int32_t min, int32_t extent, int32_t valid_min,
                                     int32_t fold_factor) {
    return tally_report_error(user_context, TALLY_ERROR_BAD_EXTERN_FOLD,
                              "In extern stage %s, dimension %d of the folded buffer is accessed "
                              "at [%d, %d], which wraps around the fold boundary (valid from %d, "
                              "fold factor %d)",
                              str_or_null(func_name), (int)dim, (int)min, (int)(min + extent - 1),
                              (int)valid_min, (int)fold_factor);
}

int32_t halide_error_fold_factor_too_small(void *user_context, const char *func_name,
                                           const char *var_name, int32_t fold_factor,
                                           const char *loop_name, int32_t required_extent) {
    return tally_report_error(user_context, TALLY_ERROR_FOLD_FACTOR_TOO_SMALL,
                              "The fold factor (%d) of dimension %s of %s is too small to store "
                              "the required region accessed by loop %s (%d)",
                              (int)fold_factor, str_or_null(var_name), str_or_null(func_name),
                              str_or_null(loop_name), (int)required_extent);
}

int32_t halide_error_debug_to_file_failed(void *user_context, const char *func,
                                          const char *filename, int32_t error_code) {
    return tally_report_error(user_context, TALLY_ERROR_DEBUG_TO_FILE_FAILED,
                              "Failed to dump function %s to file %s with error %d",
                              str_or_null(func), str_or_null(filename), (int)error_code);
}

int32_t halide_error_requirement_failed(void *user_context, const char *condition,
                                        const char *message) {
    return tally_report_error(user_context, TALLY_ERROR_REQUIREMENT_FAILED,
                              "Requirement Failed: (%s) %s", str_or_null(condition),
                              str_or_null(message));
}

int32_t halide_error_specialize_fail(void *user_context, const char *message) {
    return tally_report_error(user_context, TALLY_ERROR_SPECIALIZE_FAIL,
                              "A schedule specialized with specialize_fail() was chosen: %s",
                              str_or_null(message));
}

int32_t halide_error_no_device_interface(void *user_context) {
    return tally_report_error(user_context, TALLY_ERROR_NO_DEVICE_INTERFACE,
                              "Buffer has a non-zero device but no device interface");
}

int32_t halide_error_device_interface_no_device(void *user_context) {
    return tally_report_error(user_context, TALLY_ERROR_DEVICE_INTERFACE_NO_DEVICE,
                              "Buffer has a non-null device_interface but device is 0");
}

int32_t halide_error_host_and_device_dirty(void *user_context) {
    return tally_report_error(user_context, TALLY_ERROR_HOST_AND_DEVICE_DIRTY,
                              "Buffer has both host and device dirty bits set");
}

int32_t halide_error_buffer_is_null(void *user_context, const char *routine) {
    return tally_report_error(user_context, TALLY_ERROR_BUFFER_IS_NULL,
                              "Buffer pointer passed to %s is null", str_or_null(routine));
}
