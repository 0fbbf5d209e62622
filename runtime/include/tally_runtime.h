/** \file
 * The Tally runtime C ABI: the only thing generated code shares with the runtime.
 *
 * This header is valid C11 and C++. It declares:
 *  - halide_buffer_t and friends, layout-compatible with Halide's ABI;
 *  - error and print hooks, and the error helpers generated assertions call;
 *  - halide_malloc / halide_free;
 *  - the thread pool (halide_do_par_for);
 *  - device interfaces (a struct of function pointers per device API) and their entry points;
 *  - the sampling profiler: the calls generated code makes (tally_profiler_start, _end,
 *    _set_current, _thread_begin/_end, _memory_allocate/_free), the report, and a stats API.
 *
 * Conventions: every entry point takes `void *user_context` first, except the hot profiler calls
 * (which take the instance or context pointer first) and the process-wide configuration calls.
 * Functions that can fail return int32_t: 0 on success, a negative tally_error_code_t otherwise,
 * after reporting a message through halide_error. The runtime never aborts.
 */
#ifndef TALLY_RUNTIME_INCLUDE_TALLY_RUNTIME_H
#define TALLY_RUNTIME_INCLUDE_TALLY_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Bumped whenever a struct layout or an entry point signature in this header changes. */
#define TALLY_RUNTIME_ABI_VERSION 3

/* ---------------------------------------------------------------------------------------------
 * Error codes
 * ------------------------------------------------------------------------------------------- */

/** Error codes returned by runtime calls and by generated pipelines. 0 is success; failures are
 * negative. Codes -1 to -44 have the same values as Halide 14's halide_error_code_t, and -46 as
 * Halide 21's, so a host program written against Halide reads them the same; Tally's own codes
 * start at -100. */
typedef enum tally_error_code_t {
    TALLY_SUCCESS = 0,
    TALLY_ERROR_GENERIC = -1,
    TALLY_ERROR_EXPLICIT_BOUNDS_TOO_SMALL = -2,
    TALLY_ERROR_BAD_TYPE = -3,
    TALLY_ERROR_ACCESS_OUT_OF_BOUNDS = -4,
    TALLY_ERROR_BUFFER_ALLOCATION_TOO_LARGE = -5,
    TALLY_ERROR_BUFFER_EXTENTS_TOO_LARGE = -6,
    TALLY_ERROR_CONSTRAINTS_MAKE_REQUIRED_REGION_SMALLER = -7,
    TALLY_ERROR_CONSTRAINT_VIOLATED = -8,
    TALLY_ERROR_PARAM_TOO_SMALL = -9,
    TALLY_ERROR_PARAM_TOO_LARGE = -10,
    TALLY_ERROR_OUT_OF_MEMORY = -11,
    TALLY_ERROR_BUFFER_ARGUMENT_IS_NULL = -12,
    TALLY_ERROR_DEBUG_TO_FILE_FAILED = -13,
    TALLY_ERROR_COPY_TO_HOST_FAILED = -14,
    TALLY_ERROR_COPY_TO_DEVICE_FAILED = -15,
    TALLY_ERROR_DEVICE_MALLOC_FAILED = -16,
    TALLY_ERROR_DEVICE_SYNC_FAILED = -17,
    TALLY_ERROR_DEVICE_FREE_FAILED = -18,
    TALLY_ERROR_NO_DEVICE_INTERFACE = -19,
    TALLY_ERROR_INTERNAL = -22,
    TALLY_ERROR_DEVICE_RUN_FAILED = -23,
    TALLY_ERROR_UNALIGNED_HOST_PTR = -24,
    TALLY_ERROR_BAD_FOLD = -25,
    TALLY_ERROR_FOLD_FACTOR_TOO_SMALL = -26,
    TALLY_ERROR_REQUIREMENT_FAILED = -27,
    TALLY_ERROR_BUFFER_EXTENTS_NEGATIVE = -28,
    TALLY_ERROR_SPECIALIZE_FAIL = -31,
    TALLY_ERROR_HOST_IS_NULL = -34,
    TALLY_ERROR_BAD_EXTERN_FOLD = -35,
    TALLY_ERROR_DEVICE_INTERFACE_NO_DEVICE = -36,
    TALLY_ERROR_HOST_AND_DEVICE_DIRTY = -37,
    TALLY_ERROR_BUFFER_IS_NULL = -38,
    TALLY_ERROR_DEVICE_BUFFER_COPY_FAILED = -39,
    TALLY_ERROR_INCOMPATIBLE_DEVICE_INTERFACE = -42,
    TALLY_ERROR_BAD_DIMENSIONS = -43,
    TALLY_ERROR_DEVICE_DIRTY_WITH_NO_DEVICE_SUPPORT = -44,
    /** Halide 21: a Func's explicit storage bound (bound_storage) is smaller than the region
     * it must hold. */
    TALLY_ERROR_STORAGE_BOUND_TOO_SMALL = -45,
    /** Halide 21: a split factor computed at run time was not positive. */
    TALLY_ERROR_SPLIT_FACTOR_NOT_POSITIVE = -46,
    /** An argument to a runtime call was invalid (NULL, out of range). */
    TALLY_ERROR_BAD_ARGUMENT = -100,
    /** A runtime thread (thread pool worker or profiler sampler) could not be started. */
    TALLY_ERROR_THREAD_START_FAILED = -101,
    /** The POSIX timer or signal handler of the profile_by_timer mode could not be set up. */
    TALLY_ERROR_TIMER_FAILED = -102,
    /** Too many profiled pipeline runs are in flight at once (see TALLY_PROFILER_MAX_LIVE). */
    TALLY_ERROR_TOO_MANY_INSTANCES = -103,
    /** A pipeline or slot asked for by name or index does not exist. */
    TALLY_ERROR_NOT_FOUND = -104,
    /** Writing a report to its destination failed. */
    TALLY_ERROR_IO = -105,
    /** The call is not allowed from this thread (e.g. shutting the pool down from a worker). */
    TALLY_ERROR_WRONG_THREAD = -106
} tally_error_code_t;

/** The enumerator name of an error code without the TALLY_ prefix, e.g. "ERROR_BAD_TYPE";
 * "ERROR_UNKNOWN" for values not in the enum. Never NULL. */
const char *tally_error_code_name(int32_t code);

/** An on/off environment variable, read by the one rule every TALLY_* and HL_* variable follows
 * (docs/environment.md): 1, true, yes or on is on; 0, false, no or off is off; unset or empty is
 * off; any other value is off, with one warning naming the variable and its value. The compiler
 * library reads its own on/off variables (TALLY_PERF_MAP) through it too. */
int32_t tally_env_flag(const char *name);

/** 1 when the CPU this runs on has every x86 ISA extension in `names` (a comma-separated list of
 * LLVM's names: "sse4.1,avx,avx2,fma,f16c"), else 0; a name it cannot check counts as missing.
 * A multi-target library's wrapper calls it to pick the first variant the CPU can run. */
int32_t tally_cpu_has_features(const char *names);

/* ---------------------------------------------------------------------------------------------
 * Buffers (layout-compatible with Halide's halide_buffer_t)
 * ------------------------------------------------------------------------------------------- */

/** Type codes, as in Halide. */
typedef enum halide_type_code_t {
    halide_type_int = 0,
    halide_type_uint = 1,
    halide_type_float = 2,
    halide_type_handle = 3,
    halide_type_bfloat = 4
} halide_type_code_t;

/** A scalar or vector element type: code (halide_type_code_t), bits per lane, lanes. */
typedef struct halide_type_t {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} halide_type_t;

/** One dimension of a buffer: coordinates [min, min + extent), stride in elements. */
typedef struct halide_dimension_t {
    int32_t min, extent, stride;
    uint32_t flags;
} halide_dimension_t;

/** Bits of halide_buffer_t::flags. */
typedef enum halide_buffer_flags {
    halide_buffer_flag_host_dirty = 1,
    halide_buffer_flag_device_dirty = 2
} halide_buffer_flags;

struct halide_device_interface_t;

/** A buffer: host memory, an optional device allocation owned by a device interface, and
 * dirty bits saying which copy is newer. Layout identical to Halide's. */
typedef struct halide_buffer_t {
    /** Device handle (back-end specific; for the host interface, a host pointer). 0 = none. */
    uint64_t device;
    /** The interface that owns `device`; NULL when there is no device allocation. */
    const struct halide_device_interface_t *device_interface;
    /** Host memory: points at the element with all coordinates equal to the mins. */
    uint8_t *host;
    /** halide_buffer_flags bits. */
    uint64_t flags;
    halide_type_t type;
    int32_t dimensions;
    halide_dimension_t *dim;
    void *padding;
} halide_buffer_t;

/** What a pipeline's `<name>_metadata()` returns (Halide 14's layout, version 1): its
 * arguments in order, the target it was compiled for, its name. */
typedef enum halide_argument_kind_t {
    halide_argument_kind_input_scalar = 0,
    halide_argument_kind_input_buffer = 1,
    halide_argument_kind_output_buffer = 2
} halide_argument_kind_t;

/** A value of any scalar type. */
typedef struct halide_scalar_value_t {
    union {
        bool b;
        int8_t i8;
        int16_t i16;
        int32_t i32;
        int64_t i64;
        uint8_t u8;
        uint16_t u16;
        uint32_t u32;
        uint64_t u64;
        float f32;
        double f64;
        void *handle;
    } u;
} halide_scalar_value_t;

/** One argument. `kind` is a halide_argument_kind_t; `dimensions` 0 for a scalar. The scalar
 * values are null where the pipeline gives none (a lowered text never does), the estimates null
 * or `dimensions * 2` pointers (min, extent), each possibly null. */
typedef struct halide_filter_argument_t {
    const char *name;
    int32_t kind;
    int32_t dimensions;
    halide_type_t type;
    const halide_scalar_value_t *scalar_def, *scalar_min, *scalar_max, *scalar_estimate;
    const int64_t *const *buffer_estimates;
} halide_filter_argument_t;

typedef struct halide_filter_metadata_t {
    int32_t version; /* 1 */
    int32_t num_arguments;
    const halide_filter_argument_t *arguments;
    const char *target;
    const char *name;
} halide_filter_metadata_t;

/** Bytes one element of `t` occupies (lanes included). */
uint32_t tally_type_bytes(halide_type_t t);

/** Bytes spanned by the buffer's elements: (1 + sum over dims of (extent-1)*|stride|) * element
 * size; 0 if any extent is <= 0 or buf is NULL. The span starts at tally_buffer_begin(). */
uint64_t tally_buffer_size_in_bytes(const halide_buffer_t *buf);

/** The lowest address the buffer's elements occupy (host + most negative stride offset). */
uint8_t *tally_buffer_begin(const halide_buffer_t *buf);

bool tally_buffer_get_host_dirty(const halide_buffer_t *buf);
bool tally_buffer_get_device_dirty(const halide_buffer_t *buf);
void tally_buffer_set_host_dirty(halide_buffer_t *buf, bool dirty);
void tally_buffer_set_device_dirty(halide_buffer_t *buf, bool dirty);

/** Halide's buffer accessors, with Halide's names and signatures (they take no user_context),
 * so code lowered by Halide that calls them links against this runtime. */
int32_t _halide_buffer_get_dimensions(const halide_buffer_t *buf);
uint8_t *_halide_buffer_get_host(const halide_buffer_t *buf);
uint64_t _halide_buffer_get_device(const halide_buffer_t *buf);
const struct halide_device_interface_t *
_halide_buffer_get_device_interface(const halide_buffer_t *buf);
int32_t _halide_buffer_get_min(const halide_buffer_t *buf, int32_t d);
int32_t _halide_buffer_get_max(const halide_buffer_t *buf, int32_t d);
int32_t _halide_buffer_get_extent(const halide_buffer_t *buf, int32_t d);
int32_t _halide_buffer_get_stride(const halide_buffer_t *buf, int32_t d);
bool _halide_buffer_get_host_dirty(const halide_buffer_t *buf);
bool _halide_buffer_get_device_dirty(const halide_buffer_t *buf);
int32_t _halide_buffer_set_host_dirty(halide_buffer_t *buf, bool val);
int32_t _halide_buffer_set_device_dirty(halide_buffer_t *buf, bool val);
halide_dimension_t *_halide_buffer_get_shape(halide_buffer_t *buf);
/** True when host and device are both null: the buffer is a bounds query. */
bool _halide_buffer_is_bounds_query(const halide_buffer_t *buf);
/** The type as Halide packs it into 32 bits: code | bits << 8 | lanes << 16. */
uint32_t _halide_buffer_get_type(const halide_buffer_t *buf);
/** Fills *dst (copying `dimensions` entries of `shape` into dst_shape, which dst->dim then points
 * at) and returns dst. The type has one lane. */
halide_buffer_t *_halide_buffer_init(halide_buffer_t *dst, halide_dimension_t *dst_shape,
                                     void *host, uint64_t device,
                                     const struct halide_device_interface_t *device_interface,
                                     int32_t type_code, int32_t type_bits, int32_t dimensions,
                                     halide_dimension_t *shape, uint64_t flags);

/** Writes `buf` as Halide 14's runtime prints a buffer (what `stringify` of a
 * `halide_buffer_t *` shows in -debug output) into [dst, end), NUL-terminated and truncated to
 * fit: `buffer(device, device_interface, host, flags, type, {min, extent, stride}...)`, e.g.
 * `buffer(0, 0x0, 0x55d0c2a0, 0, float32, {0, 123, 1}, {0, 200, 123})`, or `nullptr`. Returns
 * the position of the terminating NUL (end - 1 when truncated); nothing is written when
 * dst >= end. */
char *halide_buffer_to_string(char *dst, char *end, const halide_buffer_t *buf);

/** Func::debug_to_file: writes the buffer (at most 4 dimensions) to `filename` as Halide 14's
 * runtime does, in the format the name's extension picks: `.tiff`/`.tif` (uncompressed, planar
 * channels), `.mat` (MATLAB level 5, the array named after the file), anything else Halide's raw
 * form (the four extents and the type code as int32s, then the data). The data are in coordinate
 * order, dimension 0 fastest. `type_code` is Halide's: 0 float32, 1 float64, 2 uint8/bool,
 * 3 int8, 4 uint16, 5 int16, 6 uint32, 7 int32, 8 uint64, 9 int64. Returns 0, or Halide's
 * negative code with the failure reported (-1 bad arguments, -2 the file does not open, lower a
 * failed write). */
int32_t halide_debug_to_file(void *user_context, const char *filename, int32_t type_code,
                             halide_buffer_t *buf);

/** Halide 21's debug_to_file(filename, buffer) (src/ir/RuntimeCalls.h: TALLY_RUNTIME_OVERLOADS
 * picks it for a call with two arguments): the type from the buffer, the same formats and also
 * .npy (runtime/src/halide_abi/debug_to_file.c). Returns 0, or Halide 21's code with the failure
 * reported (-34 a bounds query, -43 over 4 dimensions, -13 otherwise). */
int32_t tally_halide21_debug_to_file(void *user_context, const char *filename,
                                     halide_buffer_t *buf);

/** Halide 14's text primitives, what `stringify` and the text trace print with. Each appends to
 * [dst, end), NUL-terminated and cut to fit, and returns the position of the NUL (dst itself
 * when dst >= end). */
char *halide_string_to_string(char *dst, char *end, const char *arg);  // NULL: "<nullptr>"
char *halide_int64_to_string(char *dst, char *end, int64_t arg, int min_digits);
char *halide_uint64_to_string(char *dst, char *end, uint64_t arg, int min_digits);
/** As Halide's runtime prints a double: `scientific` 0 gives every integer digit and 6
 * decimals (round half to even; subnormals 0.000000), 1 gives d.dddddde+XX by Halide's own
 * normalization; "nan", "inf" and their negatives for the special values. */
char *halide_double_to_string(char *dst, char *end, double arg, int scientific);
/** Lowercase hex with a 0x prefix and no leading zeros; NULL is "0x0". */
char *halide_pointer_to_string(char *dst, char *end, const void *arg);

/* ---------------------------------------------------------------------------------------------
 * Halide 14's memoization cache (Func::memoize), as Halide's lowering calls it
 * ------------------------------------------------------------------------------------------- */

/** Before a memoized Func is computed: 0 on a hit (each of the `tuple_count` buffers now points
 * at the cached data; the Func is not computed), 1 on a miss (each buffer got fresh host memory
 * of its size, to compute into), -1 when that memory could not be allocated. The key is the
 * `size` bytes at cache_key with the realization's bounds and every buffer's shape and type. */
int halide_memoization_cache_lookup(void *user_context, const uint8_t *cache_key, int32_t size,
                                    halide_buffer_t *computed_bounds, int32_t tuple_count,
                                    halide_buffer_t **tuple_buffers);
/** After a miss's computation: the cache keeps the blocks lookup allocated (no copy); if the
 * key is there already, the blocks stay the realization's. Returns 0. */
int halide_memoization_cache_store(void *user_context, const uint8_t *cache_key, int32_t size,
                                   halide_buffer_t *computed_bounds, int32_t tuple_count,
                                   halide_buffer_t **tuple_buffers, bool has_eviction_key,
                                   uint64_t eviction_key);
/** The end of a realization, once per buffer host pointer lookup gave it: unpins a cached
 * block, frees one the cache does not hold. */
void halide_memoization_cache_release(void *user_context, void *host);
/** The cache's size in bytes of data (least recently used entries not in use are dropped past
 * it); <= 0 restores the default, 1 MiB. */
void halide_memoization_cache_set_size(int64_t size);
/** Drops the entries stored with this eviction key that are not in use. */
void halide_memoization_cache_evict(void *user_context, uint64_t eviction_key);
/** Drops every entry not in use. */
void halide_memoization_cache_cleanup(void);
/** Bytes of data the cache holds now. */
uint64_t tally_memoization_cache_bytes(void);
/** Cached buffers handed out and not released yet (0 between runs). */
uint64_t tally_memoization_cache_in_use(void);

/* ---------------------------------------------------------------------------------------------
 * Halide 14's tracing (Func::trace_stores, trace_loads, trace_realizations, add_trace_tag)
 * ------------------------------------------------------------------------------------------- */

typedef enum halide_trace_event_code_t {
    halide_trace_load = 0,
    halide_trace_store = 1,
    halide_trace_begin_realization = 2,
    halide_trace_end_realization = 3,
    halide_trace_produce = 4,
    halide_trace_end_produce = 5,
    halide_trace_consume = 6,
    halide_trace_end_consume = 7,
    halide_trace_begin_pipeline = 8,
    halide_trace_end_pipeline = 9,
    halide_trace_tag = 10
} halide_trace_event_code_t;

/** One trace event, laid out as Halide 14's. Loads and stores carry `type.lanes` values and
 * dimensions = coordinates per lane x lanes (one vector of lanes per coordinate); realization,
 * produce and consume events carry (min, extent) pairs. */
typedef struct halide_trace_event_t {
    const char *func;
    void *value;
    int32_t *coordinates;
    const char *trace_tag;
    halide_type_t type;
    halide_trace_event_code_t event;
    int32_t parent_id;
    int32_t value_index;
    int32_t dimensions;
} halide_trace_event_t;

typedef int32_t (*halide_trace_t)(void *user_context, const halide_trace_event_t *event);

/** Reports an event to the trace handler and returns its id (the default handler's ids count
 * from 1, process-wide; generated code passes an event's id as the parent of those inside it).
 * The default handler prints one line per event through halide_print, in Halide's text format,
 * or appends Halide's binary packets to the file HL_TRACE_FILE names (or halide_set_trace_file's
 * descriptor). */
int32_t halide_trace(void *user_context, const halide_trace_event_t *event);
/** Installs a trace handler; NULL restores the default. Returns the previous one. */
halide_trace_t halide_set_custom_trace(halide_trace_t handler);
/** What Halide's lowering calls: the event from its fields, reported with halide_trace. */
int32_t halide_trace_helper(void *user_context, const char *func, void *value, int32_t *coords,
                            int32_t type_code, int32_t type_bits, int32_t type_lanes, int32_t code,
                            int32_t parent_id, int32_t value_index, int32_t dimensions,
                            const char *trace_tag);
/** The binary trace's file descriptor, 0 for text (HL_TRACE_FILE is read on the first call). */
int halide_get_trace_file(void *user_context);
/** Makes the default handler write binary packets to `fd` (> 0), or text (0). */
void halide_set_trace_file(int fd);
/** Closes the trace file HL_TRACE_FILE opened; the next event reads HL_TRACE_FILE again. */
int halide_shutdown_trace(void);

/* ---------------------------------------------------------------------------------------------
 * Hooks: errors and printing
 * ------------------------------------------------------------------------------------------- */

/** A handler for error messages or printed text. `msg` is NUL-terminated. */
typedef void (*tally_message_handler_t)(void *user_context, const char *msg);

/** Installs the handler halide_error calls; NULL restores the default (writes "Error: <msg>" and a
 * newline to stderr). Returns the previous handler (never NULL). Thread-safe. */
tally_message_handler_t tally_set_error_handler(tally_message_handler_t handler);

/** Installs the handler halide_print calls; NULL restores the default (writes msg unchanged to
 * stdout, as Halide's runtime does). The runtime's own text (tally_profiler_report's, warnings)
 * goes to an installed handler too, and to stderr without one. Returns the previous handler
 * (never NULL). Thread-safe. */
tally_message_handler_t tally_set_print_handler(tally_message_handler_t handler);

/** Reports an error message through the current error handler. Never aborts. */
void halide_error(void *user_context, const char *msg);

/** Prints a message through the current print handler (default: to stdout). What a pipeline
 * prints (print, print_when, -debug and tracing text) comes through here. */
void halide_print(void *user_context, const char *msg);

/** Error helpers called by generated assertions (Halide 14 names and argument lists). Each formats
 * a message naming what failed, reports it through halide_error and returns its negative code. */
int32_t halide_error_bounds_inference_call_failed(void *user_context, const char *extern_stage_name,
                                                  int32_t result);
int32_t halide_error_extern_stage_failed(void *user_context, const char *extern_stage_name,
                                         int32_t result);
int32_t halide_error_explicit_bounds_too_small(void *user_context, const char *func_name,
                                               const char *var_name, int32_t min_bound,
                                               int32_t max_bound, int32_t min_required,
                                               int32_t max_required);
/** type_given and correct_type are halide_type_t packed as in _halide_buffer_get_type. */
int32_t halide_error_bad_type(void *user_context, const char *func_name, uint32_t type_given,
                              uint32_t correct_type);
int32_t halide_error_bad_dimensions(void *user_context, const char *func_name,
                                    int32_t dimensions_given, int32_t correct_dimensions);
int32_t halide_error_access_out_of_bounds(void *user_context, const char *func_name,
                                          int32_t dimension, int32_t min_touched,
                                          int32_t max_touched, int32_t min_valid,
                                          int32_t max_valid);
int32_t halide_error_buffer_allocation_too_large(void *user_context, const char *buffer_name,
                                                 uint64_t allocation_size, uint64_t max_size);
int32_t halide_error_buffer_extents_negative(void *user_context, const char *buffer_name,
                                             int32_t dimension, int32_t extent);
int32_t halide_error_buffer_extents_too_large(void *user_context, const char *buffer_name,
                                              int64_t actual_size, int64_t max_size);
int32_t halide_error_constraints_make_required_region_smaller(
    void *user_context, const char *buffer_name, int32_t dimension, int32_t constrained_min,
    int32_t constrained_extent, int32_t required_min, int32_t required_extent);
int32_t halide_error_constraint_violated(void *user_context, const char *var, int32_t val,
                                         const char *constrained_var, int32_t constrained_val);
int32_t halide_error_param_too_small_i64(void *user_context, const char *param_name, int64_t val,
                                         int64_t min_val);
int32_t halide_error_param_too_small_u64(void *user_context, const char *param_name, uint64_t val,
                                         uint64_t min_val);
int32_t halide_error_param_too_small_f64(void *user_context, const char *param_name, double val,
                                         double min_val);
int32_t halide_error_param_too_large_i64(void *user_context, const char *param_name, int64_t val,
                                         int64_t max_val);
int32_t halide_error_param_too_large_u64(void *user_context, const char *param_name, uint64_t val,
                                         uint64_t max_val);
int32_t halide_error_param_too_large_f64(void *user_context, const char *param_name, double val,
                                         double max_val);
int32_t halide_error_out_of_memory(void *user_context);
int32_t halide_error_buffer_argument_is_null(void *user_context, const char *buffer_name);
int32_t halide_error_unaligned_host_ptr(void *user_context, const char *func_name,
                                        int32_t alignment);
int32_t halide_error_host_is_null(void *user_context, const char *func_name);
int32_t halide_error_device_dirty_with_no_device_support(void *user_context,
                                                         const char *buffer_name);
int32_t halide_error_bad_fold(void *user_context, const char *func_name, const char *var_name,
                              const char *loop_name);
int32_t halide_error_bad_extern_fold(void *user_context, const char *func_name, int32_t dim,
                                     int32_t min, int32_t extent, int32_t valid_min,
                                     int32_t fold_factor);
int32_t halide_error_fold_factor_too_small(void *user_context, const char *func_name,
                                           const char *var_name, int32_t fold_factor,
                                           const char *loop_name, int32_t required_extent);
int32_t halide_error_debug_to_file_failed(void *user_context, const char *func,
                                          const char *filename, int32_t error_code);
int32_t halide_error_requirement_failed(void *user_context, const char *condition,
                                        const char *message);
/** Halide 21's check of an explicit storage bound (`Func::bound_storage`): dimension `var_name`
 * of `func_name` was given `provided_size` elements where `required_size` are needed. Returns
 * TALLY_ERROR_STORAGE_BOUND_TOO_SMALL. */
int32_t halide_error_storage_bound_too_small(void *user_context, const char *func_name,
                                             const char *var_name, int32_t provided_size,
                                             int32_t required_size);
/** Halide 21's check of a split factor computed at run time (`split(x, xo, xi, factor)` with a
 * Param factor): `orig` was split into `outer` and `inner` by `factor_str`, which evaluated to
 * `factor` <= 0. Returns TALLY_ERROR_SPLIT_FACTOR_NOT_POSITIVE. */
int32_t halide_error_split_factor_not_positive(void *user_context, const char *func_name,
                                               const char *orig, const char *outer,
                                               const char *inner, const char *factor_str,
                                               int32_t factor);

/** An array of mutexes, one per element of a Func that an atomic update with a mutex (a
 * non-associative update Halide cannot make lock-free) writes: Halide 14 and 21 create it
 * with the Func's allocation, lock one entry around each element's update, and register
 * halide_mutex_array_destroy as its destructor. */
struct halide_mutex_array;
/** An array of `sz` unlocked mutexes (Halide 21 passes a uint64_t, Halide 14 an int, widened),
 * or NULL when memory ran out (the IR's assert then reports it). */
struct halide_mutex_array *halide_mutex_array_create(uint64_t sz);
/** Frees an array from halide_mutex_array_create; NULL is a no-op. */
void halide_mutex_array_destroy(void *user_context, void *array);
/** Locks / unlocks entry `entry`. Return 0. */
int32_t halide_mutex_array_lock(struct halide_mutex_array *array, int32_t entry);
int32_t halide_mutex_array_unlock(struct halide_mutex_array *array, int32_t entry);
int32_t halide_error_specialize_fail(void *user_context, const char *message);
int32_t halide_error_no_device_interface(void *user_context);
int32_t halide_error_device_interface_no_device(void *user_context);
int32_t halide_error_host_and_device_dirty(void *user_context);
int32_t halide_error_buffer_is_null(void *user_context, const char *routine);

/* ---------------------------------------------------------------------------------------------
 * Host memory
 * ------------------------------------------------------------------------------------------- */

/** Alignment of every halide_malloc result, in bytes. */
#define TALLY_MALLOC_ALIGNMENT 128

/** Allocates `size` bytes aligned to TALLY_MALLOC_ALIGNMENT. On failure reports through
 * halide_error and returns NULL. size 0 returns a unique non-NULL pointer. */
void *halide_malloc(void *user_context, size_t size);

/** Frees memory from halide_malloc; NULL is a no-op. Large blocks (at least
 * TALLY_MALLOC_CACHE_MIN_BYTES) go to a cache of freed blocks that later halide_malloc calls
 * reuse (the smallest that holds the request), so a pipeline run again finds its big buffers
 * already paged in. The cache holds no more than the peak of large blocks live at once (live ones
 * included) and the limit; it is emptied at process exit and by tally_malloc_cache_release. */
void halide_free(void *user_context, void *ptr);

/** Smallest allocation the free-block cache keeps (smaller ones go back to malloc at once). A
 * power of two. Blocks of a few hundred KiB must be kept too: the C library unmaps them or trims
 * them off the top of its heap when they are freed, so every run would page them in again. */
#define TALLY_MALLOC_CACHE_MIN_BYTES (1u << 16)

/** Numbers of the free-block cache since the process started (or the last release). */
typedef struct tally_malloc_cache_stats {
    /** Bytes and blocks held by the cache now (freed, not yet reused or released). */
    uint64_t cached_bytes;
    uint64_t cached_blocks;
    /** halide_malloc calls served from the cache, and calls of cacheable size that were not. */
    uint64_t hits;
    uint64_t misses;
    /** Frees the cache declined (over its bound) and handed back to the system at once. */
    uint64_t overflows;
    /** The bound on cached_bytes. */
    uint64_t limit_bytes;
    /** Bytes of the cacheable blocks handed out and not yet freed, and the most their requests
     * have taken at once since the last release: the cache keeps live and cached blocks within
     * that peak, so a process holds no more than the code's intermediates need at once. */
    uint64_t live_bytes;
    uint64_t peak_bytes;
} tally_malloc_cache_stats;

/** Fills *out with the cache's numbers (thread-safe). */
void tally_malloc_cache_get_stats(tally_malloc_cache_stats *out);

/** Sets the bound on the bytes the cache may hold (0 turns the cache off) and releases what is
 * over it. The default is TALLY_MALLOC_CACHE_BYTES from the environment (bytes), else 1 GiB or a
 * quarter of physical memory, whichever is less. Returns the previous bound. */
uint64_t tally_malloc_cache_set_limit(uint64_t bytes);

/** Hands every cached block back to the system and zeroes the hit and miss counts. Also runs at
 * process exit. */
void tally_malloc_cache_release(void);

/* ---------------------------------------------------------------------------------------------
 * Thread pool
 * ------------------------------------------------------------------------------------------- */

/** A parallel loop body: runs iteration `task_number` with the loop's closure; nonzero = error. */
typedef int32_t (*halide_task_t)(void *user_context, int32_t task_number, uint8_t *closure);

/** Runs f(user_context, i, closure) for every i in [min, min + extent), spread over a persistent
 * pool of threads; the calling thread helps. Returns 0 if every task returned 0, otherwise the
 * first nonzero task result (tasks not yet started when a task fails are skipped). A call made
 * from inside a task (nested parallelism) runs its loop serially on the calling thread. The pool
 * starts lazily with TALLY_NUM_THREADS (env) or one thread per online core, counting the caller. */
int32_t halide_do_par_for(void *user_context, halide_task_t f, int32_t min, int32_t extent,
                          uint8_t *closure);

/** An opaque counting semaphore of Halide's async tasks (16 bytes, as in Halide 14). */
typedef struct halide_semaphore_t {
    uint64_t _private[2];
} halide_semaphore_t;

/** A semaphore and how many units a task must take from it before each call. */
typedef struct halide_semaphore_acquire_t {
    struct halide_semaphore_t *semaphore;
    int32_t count;
} halide_semaphore_acquire_t;

/** Sets the semaphore's count to n. Returns n. */
int32_t halide_semaphore_init(struct halide_semaphore_t *sem, int32_t n);
/** Adds n to the count and wakes tasks waiting for it. Returns the new count. */
int32_t halide_semaphore_release(struct halide_semaphore_t *sem, int32_t n);
/** Takes n from the count if it holds at least n (then true); otherwise changes nothing. */
bool halide_semaphore_try_acquire(struct halide_semaphore_t *sem, int32_t n);

/** The body of a task of halide_do_parallel_tasks: runs iterations [min, min + extent);
 * `task_parent` is passed on to halide_do_parallel_tasks calls the body makes. */
typedef int32_t (*halide_loop_task_t)(void *user_context, int32_t min, int32_t extent,
                                      uint8_t *closure, void *task_parent);

/** One task of halide_do_parallel_tasks, laid out as Halide 14's halide_parallel_task_t. */
typedef struct halide_parallel_task_t {
    halide_loop_task_t fn;
    uint8_t *closure;
    /** For messages only. */
    const char *name;
    /** Taken before every call of fn (each iteration when the task is sliced). */
    struct halide_semaphore_acquire_t *semaphores;
    int32_t num_semaphores;
    int32_t min, extent;
    /** Threads the task needs to finish: > 0 means its body may block (it runs nested tasks
     * that wait on each other), so it gets a thread of its own. */
    int32_t min_threads;
    /** Iterations run in order, one at a time. */
    bool serial;
} halide_parallel_task_t;

/** Runs the tasks concurrently and returns when all have finished: 0, or the first nonzero
 * result of a task (iterations not started by then are skipped, and tasks waiting on semaphores
 * give up). Each call of a task's fn first takes all of its semaphores. Tasks whose min_threads
 * is > 0 each run on a thread of their own (idle ones are reused, more are started when needed,
 * beyond TALLY_NUM_THREADS), so tasks that wait on each other always progress, whatever the
 * pool's size; the others run on the caller and idle pool workers. `task_parent` is NULL at top
 * level, else the value the enclosing task's fn received. halide_do_par_for called from a task
 * runs in parallel on the pool. */
int32_t halide_do_parallel_tasks(void *user_context, int32_t num_tasks,
                                 struct halide_parallel_task_t *tasks, void *task_parent);

/** Sets the number of threads (caller included) parallel loops use; n <= 0 restores the default.
 * Running workers are stopped and restarted lazily. Returns the previous setting. Must not be
 * called from inside a task. */
int32_t tally_set_num_threads(int32_t n);

/** Stops and joins the pool's worker threads (they restart lazily on the next parallel loop).
 * Also runs at process exit. Returns TALLY_ERROR_WRONG_THREAD if called from a worker. */
int32_t tally_thread_pool_shutdown(void);

/* ---------------------------------------------------------------------------------------------
 * Device interfaces
 * ------------------------------------------------------------------------------------------- */

/** One device API (host, Vulkan, CUDA, ...) as a table of functions. The halide_* entry points
 * below check arguments and dirty bits, update profiler counters and call these; back-ends only
 * implement the raw operation. Each returns 0 or a negative tally_error_code_t (after reporting it
 * through halide_error). */
typedef struct halide_device_interface_t {
    /** Short API name, e.g. "host", "vulkan", "cuda". */
    const char *name;
    /** Allocates buf's device memory and sets buf->device. The entry point sets
     * buf->device_interface to `iface` on success. */
    int32_t (*device_malloc)(void *user_context, halide_buffer_t *buf,
                             const struct halide_device_interface_t *iface);
    /** Frees buf's device memory. The entry point clears device, device_interface and the device
     * dirty bit afterwards. */
    int32_t (*device_free)(void *user_context, halide_buffer_t *buf);
    /** Copies device memory to buf->host (blocking). */
    int32_t (*copy_to_host)(void *user_context, halide_buffer_t *buf);
    /** Copies buf->host to device memory (may be asynchronous). */
    int32_t (*copy_to_device)(void *user_context, halide_buffer_t *buf);
    /** Waits for the work queued on buf (may wait for everything). */
    int32_t (*device_sync)(void *user_context, halide_buffer_t *buf);
    /** Waits for all work queued on this device API; buffer-free. */
    int32_t (*device_sync_global)(void *user_context,
                                  const struct halide_device_interface_t *iface);
    /** Releases the API's global resources (contexts, queues). */
    int32_t (*release)(void *user_context, const struct halide_device_interface_t *iface);
    /** Back-end private state. */
    void *impl;
    /** Room for later additions (device timestamps); must be NULL. */
    void *reserved[4];
} halide_device_interface_t;

/* ---------------------------------------------------------------------------------------------
 * Device kernels embedded in compiled modules
 * ------------------------------------------------------------------------------------------- */

/** Device APIs with a Tally back end. */
typedef enum tally_device_api_t {
    TALLY_DEVICE_API_NONE = 0,
    TALLY_DEVICE_API_CUDA = 1,
    TALLY_DEVICE_API_VULKAN = 2,
    TALLY_DEVICE_API_OPENCL = 3
} tally_device_api_t;

/** How a kernel takes its arguments (tally_kernel_source::layout). */
typedef enum tally_kernel_layout_t {
    /** Tally's (the compiler's kernels): see tally_kernel_source. */
    TALLY_KERNEL_LAYOUT_TALLY = 0,
    /** Halide 21's Vulkan kernels (halide_vulkan_initialize_kernels): `code` is one kernel module
     * of Halide's module, its binding header then SPIR-V (tally_halide_vulkan_module.h); the
     * entry point is the kernel's name; the scalars are packed, in the launch's order without
     * padding, into a uniform buffer at binding 0 of set 0 (when there are any), the buffers
     * bound after it in order; the work group's size and the shared memory sized at launch are
     * specialization constants the header names. */
    TALLY_KERNEL_LAYOUT_HALIDE_VULKAN = 1
} tally_kernel_layout_t;

/** One kernel as the compiler embeds it: SPIR-V words (Vulkan), NUL-terminated PTX text (CUDA)
 * or NUL-terminated OpenCL C source defining `__kernel void <name>(...)` (OpenCL; code_size
 * counts the NUL). Its arguments are `num_buffers` buffers (Vulkan: storage buffers at bindings
 * 0..num_buffers-1 of descriptor set 0; CUDA: device pointers; OpenCL: `__global` pointers, set
 * as cl_mem) followed by the scalars (Vulkan: one push-constant block, each scalar at the next
 * offset aligned to its size; CUDA and OpenCL: by value, a bool as one byte), in the order of the
 * launch's argument arrays; unless `layout` says otherwise. */
typedef struct tally_kernel_source {
    const char *name;
    const uint8_t *code;
    uint64_t code_size;
    int32_t device_api;
    /** -1 each when the kernel's code says (tables made from Halide's source by
     * halide_<api>_initialize_kernels): the back end checks a launch against the kernel. */
    int32_t num_args;
    int32_t num_buffers;
    /** A tally_kernel_layout_t: 0 in every table the compiler makes. */
    int32_t layout;
} tally_kernel_source;

/** Every kernel of one compiled module. Generated code passes its address as the first argument
 * of halide_vulkan_run / halide_cuda_run; `device_state` belongs to the runtime (per device API,
 * indexed by tally_device_api_t: compiled shader modules, pipelines, CUDA modules), starts NULL
 * and is filled in lazily and thread-safely. */
typedef struct tally_kernel_table {
    int32_t abi_version;
    int32_t num_kernels;
    const tally_kernel_source *kernels;
    void *device_state[4];
} tally_kernel_table;

/** Device interfaces of the GPU back ends. Each returns NULL when the API is unusable here (no
 * loader or driver, no device); the reason is reported through halide_error once. */
const halide_device_interface_t *halide_vulkan_device_interface(void);
const halide_device_interface_t *halide_cuda_device_interface(void);
const halide_device_interface_t *halide_opencl_device_interface(void);

/** Launches kernel `entry_name` of `state` (the module's tally_kernel_table) on a grid of
 * blocks_x*y*z work groups of threads_x*y*z threads, asynchronously. `args` has one entry per
 * kernel argument (a halide_buffer_t * for buffers, a pointer to the value for scalars),
 * `arg_sizes` their sizes in bytes and `arg_is_buffer` 1 for buffers; each array ends with a 0
 * entry. Buffers must have device memory of this API (copy_to_device first). Counts one launch in
 * the profiler. An empty grid (a block or thread extent below 1) runs nothing and returns 0.
 * Returns 0 or a negative tally_error_code_t, the same for a fault on every API:
 * TALLY_ERROR_BAD_ARGUMENT for a NULL kernel table, name, argument array or argument;
 * TALLY_ERROR_NO_DEVICE_INTERFACE when the API is unusable here; TALLY_ERROR_OUT_OF_MEMORY when
 * the host is; TALLY_ERROR_DEVICE_RUN_FAILED for anything else (a table of another ABI version, a
 * kernel the table lacks for this API, arguments that do not match it, the device refusing or
 * failing the kernel). */
int32_t halide_vulkan_run(void *user_context, void *state, const char *entry_name, int32_t blocks_x,
                          int32_t blocks_y, int32_t blocks_z, int32_t threads_x, int32_t threads_y,
                          int32_t threads_z, int32_t shared_mem_bytes, const int64_t *arg_sizes,
                          void **args, const uint8_t *arg_is_buffer);
int32_t halide_cuda_run(void *user_context, void *state, const char *entry_name, int32_t blocks_x,
                        int32_t blocks_y, int32_t blocks_z, int32_t threads_x, int32_t threads_y,
                        int32_t threads_z, int32_t shared_mem_bytes, const int64_t *arg_sizes,
                        void **args, const uint8_t *arg_is_buffer);
int32_t halide_opencl_run(void *user_context, void *state, const char *entry_name, int32_t blocks_x,
                          int32_t blocks_y, int32_t blocks_z, int32_t threads_x, int32_t threads_y,
                          int32_t threads_z, int32_t shared_mem_bytes, const int64_t *arg_sizes,
                          void **args, const uint8_t *arg_is_buffer);

/** Halide's GPU module state, for lowered text whose kernels Halide compiled: makes *state_ptr
 * (when still NULL) a kernel table of every `__kernel` the OpenCL C source `src` (`size` bytes,
 * its NUL included) defines, which halide_opencl_run then takes as its state; the kernels' argument
 * counts are the compiled kernels' (num_args -1). Returns 0, TALLY_ERROR_BAD_ARGUMENT for a NULL
 * pointer or a source without kernels, TALLY_ERROR_OUT_OF_MEMORY. finalize gives nothing back:
 * the table lives as long as the process. */
int32_t halide_opencl_initialize_kernels(void *user_context, void **state_ptr, const char *src,
                                         int32_t size);
void halide_opencl_finalize_kernels(void *user_context, void *state);
/** The same for Halide 21's Vulkan module (`size` bytes, tally_halide_vulkan_module.h): one entry
 * per kernel module, of layout TALLY_KERNEL_LAYOUT_HALIDE_VULKAN, its storage buffer count from
 * its binding header. Returns TALLY_ERROR_BAD_ARGUMENT, naming what is wrong, for a module that
 * is not Halide's. */
int32_t halide_vulkan_initialize_kernels(void *user_context, void **state_ptr, const char *src,
                                         int32_t size);
void halide_vulkan_finalize_kernels(void *user_context, void *state);

/** The kernel of `table` named `name`, or NULL. */
const tally_kernel_source *tally_find_kernel(const tally_kernel_table *table, const char *name);

/** The always-available host interface: "device" memory is a second host allocation of
 * tally_buffer_size_in_bytes(buf), so copies really copy. */
const halide_device_interface_t *halide_host_device_interface(void);

/** Allocates device memory for buf on iface if it has none. Error if buf already has device
 * memory from a different interface. */
int32_t halide_device_malloc(void *user_context, halide_buffer_t *buf,
                             const halide_device_interface_t *iface);
/** Frees buf's device memory if any (no copy back). */
int32_t halide_device_free(void *user_context, halide_buffer_t *buf);
/** halide_malloc for the host (if buf->host is NULL) plus halide_device_malloc. */
int32_t halide_device_and_host_malloc(void *user_context, halide_buffer_t *buf,
                                      const halide_device_interface_t *iface);
/** halide_device_free plus halide_free of buf->host (set to NULL). */
int32_t halide_device_and_host_free(void *user_context, halide_buffer_t *buf);

/** Halide's destructor forms of halide_device_free / halide_device_and_host_free, registered by
 * lowered code to release device memory on every exit; errors are reported, not returned. */
void halide_device_free_as_destructor(void *user_context, void *buf);
void halide_device_and_host_free_as_destructor(void *user_context, void *buf);
/** No-op destructor Halide emits for buffers freed by halide_device_and_host_free. */
void halide_device_host_nop_free(void *user_context, void *obj);
/** Copies device to host if (and only if) the device copy is dirty, then clears device_dirty.
 * Error if both dirty bits are set. Counted as a copy to host; the calling thread's profiler
 * context is marked waiting meanwhile. */
int32_t halide_copy_to_host(void *user_context, halide_buffer_t *buf);
/** Makes the device copy current on iface (NULL = buf's current interface): allocates if needed,
 * moves the buffer from another interface if needed, and copies if host_dirty (then clears it).
 * Error if both dirty bits are set. Counted as a copy to device when a copy happens. */
int32_t halide_copy_to_device(void *user_context, halide_buffer_t *buf,
                              const halide_device_interface_t *iface);
/** Waits for buf's device work (no-op without a device interface). Counted as an explicit sync;
 * the calling thread's profiler context is marked waiting meanwhile. */
int32_t halide_device_sync(void *user_context, halide_buffer_t *buf);
/** Waits for all work on iface's API. Counted as an injected sync; waiting as above. */
int32_t halide_device_sync_global(void *user_context, const halide_device_interface_t *iface);
/** Releases iface's global resources. */
int32_t halide_device_release(void *user_context, const halide_device_interface_t *iface);

/* ---------------------------------------------------------------------------------------------
 * Profiler
 * ------------------------------------------------------------------------------------------- */

/** Slot kinds. Slot 0 is always "overhead", of kind TALLY_SLOT_FUNC. */
typedef enum tally_slot_kind_t {
    TALLY_SLOT_FUNC = 0,
    TALLY_SLOT_COPY_TO_DEVICE = 1,
    TALLY_SLOT_COPY_TO_HOST = 2
} tally_slot_kind_t;

/** Memory kinds for tally_profiler_memory_allocate/free. */
typedef enum tally_memory_kind_t {
    TALLY_MEMORY_HEAP = 0,
    TALLY_MEMORY_DEVICE = 1
} tally_memory_kind_t;

/** Flags of tally_profiler_start: the profiling mode of the run. A run has exactly one mode: the
 * flag passed (the first of TIMER, SAMPLING, EXACT), or with none of them the process default
 * (tally_profiler_set_default_mode). The pipeline stats' `flags` is the mode of its runs. */
typedef enum tally_profiler_flags_t {
    /** profile_by_timer: sample from a POSIX CLOCK_MONOTONIC timer's signal handler. */
    TALLY_PROFILER_FLAG_TIMER = 1,
    /** Sample from the sampler thread (every TALLY_PROFILE_INTERVAL_US); times are rescaled to
     * the run's wall time and carry sampling error (the report prints a 95 % interval). */
    TALLY_PROFILER_FLAG_SAMPLING = 2,
    /** Exact: every slot switch, worker begin/end and device wait reads a clock (the invariant
     * TSC where there is one) and bills the elapsed time to the slot being left; while n worker
     * contexts work, each bills 1/n of the wall time. No sampler runs. */
    TALLY_PROFILER_FLAG_EXACT = 4,
    /** Not a mode: the runtime's thread pool opens the worker context of every task of a
     * halide_do_par_for loop started in this run (as tally_profiler_thread_begin would, in the
     * slot of the context that started the loop) and ends it after the task (as
     * tally_profiler_thread_end would), so a task makes no profiler call of its own unless it
     * switches slots inside (on tally_profiler_current_context()). inject-profiling starts every
     * run with it. */
    TALLY_PROFILER_FLAG_POOL_CONTEXTS = 8,
    /** Not a mode: the pipeline was compiled for profile_timestamps (no device sync injected;
     * device work is timed by device timestamps read where the pipeline blocks anyway), so the
     * device back ends time its launches and copies and the report has device columns. */
    TALLY_PROFILER_FLAG_TIMESTAMPS = 16
} tally_profiler_flags_t;

/** The mode flags together. */
#define TALLY_PROFILER_MODE_FLAGS 7
/** Bits 8-11 of tally_profiler_start's flags: the tally_device_api_t the pipeline's kernels run
 * on (TALLY_DEVICE_API_NONE for a host pipeline), which names its device track in exports. */
#define TALLY_PROFILER_DEVICE_API_SHIFT 8
#define TALLY_PROFILER_DEVICE_API_MASK (0xf << TALLY_PROFILER_DEVICE_API_SHIFT)
#define TALLY_PROFILER_FLAG_DEVICE_API(api) ((int32_t)(api) << TALLY_PROFILER_DEVICE_API_SHIFT)
#define TALLY_PROFILER_DEVICE_API_OF(flags)                                                        \
    (((flags)&TALLY_PROFILER_DEVICE_API_MASK) >> TALLY_PROFILER_DEVICE_API_SHIFT)
/** Every flag tally_profiler_start knows. */
#define TALLY_PROFILER_START_FLAGS (31 | TALLY_PROFILER_DEVICE_API_MASK)

/** The mode of runs started without a mode flag when neither tally_profiler_set_default_mode nor
 * TALLY_PROFILE_MODE says otherwise. Chosen by measurement (bench/truth_bench.cpp; the figures and
 * the rule are in docs/exact-and-sampling.md and bench/RESULTS.md): exact mode is the more truthful
 * (on short runs by tens of points) and, since a parallel task's context lingers for its thread's
 * next task, costs no more than sampling on the benchmark (a clock read per slot switch against a
 * sampler thread's wakeups). */
#define TALLY_PROFILER_DEFAULT_MODE TALLY_PROFILER_FLAG_EXACT

/** Sets the mode of runs started without a mode flag (what `profile` targets and Halide's
 * profiler ABI start): TALLY_PROFILER_FLAG_EXACT, _SAMPLING or _TIMER, or 0 for the default,
 * which is the environment's TALLY_PROFILE_MODE ("exact", "sampling" or "timer") if set, else
 * TALLY_PROFILER_DEFAULT_MODE. Runs already started keep theirs. Returns 0 or
 * TALLY_ERROR_BAD_ARGUMENT (reported). */
int32_t tally_profiler_set_default_mode(int32_t mode);

/** The mode (one flag) runs started without a mode flag get now. */
int32_t tally_profiler_get_default_mode(void);

/** One-time costs, billed to rows of their own instead of the slot that happened to be current. */
typedef enum tally_one_time_kind_t {
    /** Device API initialisation (context, queues, modules loaded on first use). */
    TALLY_ONE_TIME_DEVICE_INIT = 0,
    /** Kernel / shader compilation on first use. */
    TALLY_ONE_TIME_COMPILE = 1
} tally_one_time_kind_t;

/** Bills the calling thread's time from now to the matching tally_profiler_one_time_end to the
 * one-time row `kind` of the run the thread works for (its current context), in every mode.
 * Returns a token for _end: the context's previous slot, or -1 when the thread works for no run
 * or kind is unknown (then _end does nothing). */
int32_t tally_profiler_one_time_begin(int32_t kind);

/** Ends a one-time section: the thread's current context returns to the slot in `token`. */
void tally_profiler_one_time_end(int32_t token);

/** How many profiled runs may be in flight at once per sampling mode. */
#define TALLY_PROFILER_MAX_LIVE 1024

/** Starts one profiled run (an *instance*) of `pipeline`. The pipeline's totals live in a global
 * registry keyed by name (and slot layout); this run's numbers are private to the instance until
 * tally_profiler_end merges them. slot_names[i] / slot_kinds[i] describe slot i (slot_kinds may be
 * NULL: all TALLY_SLOT_FUNC); the strings are copied. slot_parents[i] is the Func slot a copy slot
 * belongs to (its copies are that Func's: exports nest them under it) and -1 for Func slots and
 * for copies of no Func; slot_parents may be NULL (every entry -1). The runtime never reads a
 * slot's owner from its name. Registers the instance with the sampler
 * (starting the sampler thread or the timer on first use) and makes it the calling thread's current
 * context. Returns the instance pointer, which is also the calling thread's profiling context (pass
 * it to tally_profiler_set_current), or NULL after reporting an error through halide_error (bad
 * arguments, out of memory, sampler thread or timer failure, too many live instances). */
void *tally_profiler_start(void *user_context, const char *pipeline, const char *target,
                           int32_t num_slots, const char *const *slot_names,
                           const int32_t *slot_kinds, const int32_t *slot_parents, int32_t flags);

/** Ends a run: bills the time since the last switch (exact mode) or takes a final sample and
 * rescales the run's sampled slot times so they sum to its measured wall time (sampling modes),
 * merges everything into the pipeline's totals (runs += 1) and frees the instance. Generated code
 * calls it on every exit path, errors included. NULL is a no-op. Returns 0. Must be called once per
 * instance, on the thread that started it, after all of its worker tasks have ended. */
int32_t tally_profiler_end(void *user_context, void *instance);

/** The hot call: makes `slot` the current slot of `context` (an instance or a context from
 * tally_profiler_thread_begin): one relaxed atomic store in the sampling modes; in exact mode a
 * clock read first, billing the time since the context's previous switch to the slot it leaves, and
 * makes `context` the calling thread's current context (used by the device entry points to find the
 * run). NULL is a no-op. `slot` must be in [0, num_slots). */
void tally_profiler_set_current(void *context, int32_t slot);

/** Called by a parallel-loop task on entry: claims a worker context of `instance` (from a
 * preallocated per-instance pool; beyond it, allocated once and reused) whose slot starts as the
 * instance's current slot, and makes it the thread's current context. While any worker contexts of
 * an instance are active, each sampler tick is split evenly among their slots. Returns the context,
 * or NULL (a no-op context) if instance is NULL or memory ran out. */
void *tally_profiler_thread_begin(void *instance);

/** The run the calling thread works for: the instance of its current context, which tasks of
 * halide_do_par_for inherit from the thread that started the loop; NULL outside a run. Code
 * that Halide outlined into closures uses it to open worker contexts. */
void *tally_profiler_current_instance(void);

/** The calling thread's current profiling context (in a task of a run started with
 * TALLY_PROFILER_FLAG_POOL_CONTEXTS: the worker context the pool opened for it), to pass to
 * tally_profiler_set_current; NULL outside a run. */
void *tally_profiler_current_context(void);

/** Called by the task on exit (every exit path): releases the context and restores the thread's
 * previous current context. NULL is a no-op. (A task run by the runtime's thread pool keeps its
 * context active until the thread's next task of the same run takes it back, or the pool ends it
 * before the thread does anything else: the report is the same, at a fraction of the cost per
 * task.) */
void tally_profiler_thread_end(void *context);

/** Records an allocation of `bytes` of memory `kind` (tally_memory_kind_t) by slot `slot` in the
 * run: per slot and kind, current += bytes, peak, count and total bytes; and the run-wide current
 * and peak of that kind. Atomic: callable from any thread. `instance` may also be a worker context.
 * Out-of-range slot or kind: reported once per run through halide_error, then ignored. */
void tally_profiler_memory_allocate(void *instance, int32_t slot, int32_t kind, uint64_t bytes);

/** Records the free of an allocation made by slot `slot` (the allocating Func's slot, whichever
 * thread or slot frees it): current -= bytes for that slot and run-wide. */
void tally_profiler_memory_free(void *instance, int32_t slot, int32_t kind, uint64_t bytes);

/** Counts one kernel launch against the calling thread's current run (no-op without one). Device
 * back-ends call it from their run functions. */
void tally_profiler_count_launch(void);

/** Sets the sampling interval in microseconds (clamped to [10, 1000000]); takes effect at the next
 * tick. The default is TALLY_PROFILE_INTERVAL_US from the environment (10 to 1000000), else 1000.
 */
void tally_profiler_set_interval_us(uint32_t us);

/** The current sampling interval in microseconds. */
uint32_t tally_profiler_get_interval_us(void);

/** Prints the text report of every pipeline to the configured destination: the environment
 * variable TALLY_PROFILE_OUTPUT = "stderr" (default: the installed print handler, else stderr),
 * "stdout", or a file path (appended). Returns 0 or a negative error code. */
int32_t tally_profiler_report(void *user_context);

/** Writes now what the process writes at exit: the report to TALLY_PROFILE_OUTPUT (the file
 * truncated), the JSON report to TALLY_PROFILE_JSON, and the exports TALLY_PROFILE_PPROF,
 * TALLY_PROFILE_FOLDED and TALLY_PROFILE_TRACE name, after waiting for queued device work; nothing
 * when no profiled run has finished. Every output is attempted; each failure is reported through
 * halide_error naming the file and the reason. Returns 0, or the first failure's code
 * (TALLY_ERROR_IO for a file that cannot be written). A program whose callers gate on these files
 * calls it before exiting and exits non-zero when it fails (tally-run exits 3); at exit they are
 * then written again only if profiled runs finished after the call. */
int32_t tally_profiler_write_exit_outputs(void *user_context);

/** Writes the report (text if json == 0, JSON otherwise) into buf with snprintf semantics: at most
 * size - 1 characters and a NUL if size > 0. Returns the report's length without the NUL (bytes
 * needed minus one), or a negative error code. */
int32_t tally_profiler_report_to_buffer(char *buf, size_t size, int32_t json);

/** Forgets every pipeline's totals. Runs in flight keep working and are dropped when they end. */
void tally_profiler_reset(void);

/** Stops the sampler thread and disarms the timer; both restart when a run next starts. Also
 * empties halide_malloc's cache of free blocks (tally_malloc_cache_release). Runs at process exit
 * before the report is printed. */
void tally_profiler_shutdown(void);

/* ---------------------------------------------------------------------------------------------
 * Halide 14's profiler ABI (IR that Halide instrumented itself, with its -profile feature)
 *
 * Served by the profiler above: halide_profiler_pipeline_start starts a Tally run whose slots
 * are Halide's func ids (id 0 is Halide's "overhead", as Tally's slot 0), so the run reports in
 * the usual sections. Halide's code passes the opaque global state to the per-thread calls; the
 * runtime finds the run through the calling thread's current context, which the thread pool
 * hands to every task. The IR omits user_context where these functions take it.
 * ------------------------------------------------------------------------------------------- */

/** Opaque to generated code (Halide reads none of its fields). */
struct halide_profiler_state;

/** Starts a run of `pipeline_name` with one slot per func: func_names[i] is a `const char *`
 * stored as 64 bits. Makes the run current on this thread and its threads idle (Halide then
 * calls halide_profiler_incr_active_threads). Returns a token (>= 0) that
 * halide_profiler_set_current_func takes, or a negative error code (reported). */
int32_t halide_profiler_pipeline_start(void *user_context, const char *pipeline_name,
                                       int32_t num_funcs, const uint64_t *func_names);
/** The global state pointer Halide's code passes around (never NULL). */
struct halide_profiler_state *halide_profiler_get_state(void);
/** The run of `pipeline_name` this thread started last (what memory calls take), or NULL. */
void *halide_profiler_get_pipeline_state(const char *pipeline_name);
/** Ends the run this thread started last (registered by Halide as a destructor, so it runs on
 * every exit; a no-op when the start failed). */
void halide_profiler_pipeline_end(void *user_context, void *state);
/** Makes func `func_id` the current slot of the calling thread's context in the run `token`
 * names. A non-NULL sampling_token whose value is nonzero skips the switch (as in Halide). */
int32_t halide_profiler_set_current_func(struct halide_profiler_state *state, int32_t token,
                                         int32_t func_id, int32_t *sampling_token);
int32_t halide_profiler_init_sampling_token(int32_t *sampling_token, int32_t value);
/** Halide's sampling-token handshake: *local becomes the old *shared, *shared becomes 1. */
int32_t halide_profiler_acquire_sampling_token(int32_t *shared, int32_t *local);
/** Gives back a token this thread holds (*local == 0): *shared = 0, *local = 1. */
int32_t halide_profiler_release_sampling_token(int32_t *shared, int32_t *local);
/** The calling thread starts / stops working for the run it is in: on the thread that started
 * the run they toggle the main context; on a pool thread the first increment opens a worker
 * context (closed when its task returns). `state` is Halide 14's global state or Halide 21's
 * instance (below); the run is found through the calling thread's context either way. Return 0
 * (Halide 21's return the old count, which its code ignores). */
int32_t halide_profiler_incr_active_threads(struct halide_profiler_state *state);
int32_t halide_profiler_decr_active_threads(struct halide_profiler_state *state);
/** Heap memory of func `func_id` in the run `pipeline_state`: Halide 14's pipeline state (from
 * get_pipeline_state) or Halide 21's instance (from halide_profiler_instance_start). */
void halide_profiler_memory_allocate(void *user_context, void *pipeline_state, int32_t func_id,
                                     uint64_t bytes);
void halide_profiler_memory_free(void *user_context, void *pipeline_state, int32_t func_id,
                                 uint64_t bytes);
/** Per-func stack peaks, values[num_funcs] (0 = no stack use). Tally's report has no stack
 * column: they are checked and accepted, not reported. */
void halide_profiler_stack_peak_update(void *user_context, void *pipeline_state, uint64_t *values);

/* ---------------------------------------------------------------------------------------------
 * Halide 21's profiler ABI (IR that Halide 21 instrumented itself, with its -profile feature)
 *
 * Halide 21 keeps a run's state in memory the pipeline allocates, an *instance*: `allocate
 * profiler_instance[uint64 * N]` with N = (sizeof(halide_profiler_instance_state) + num_funcs *
 * sizeof(halide_profiler_func_stats) + 7) / 8 = 14 + 9 * num_funcs on 64-bit targets, always at
 * least 112 bytes. Tally keeps its own run state in the first bytes of that memory (a Tally run
 * and a few words, well under 112 bytes; the rest is unused), so the instance is the handle of
 * the run. The per-thread calls are Halide 14's (halide_profiler_incr_active_threads, the
 * sampling-token handshake), passed the instance instead of the global state; memory calls take
 * the instance where Halide 14's take the pipeline state (both work).
 *
 * Halide's slot table: 0 "overhead", 1 "waiting for parallel tasks to finish" (the main thread
 * while it waits for tasks: Tally suspends a waiting thread's context, so this slot holds only
 * time no task works in), 2 halide_malloc, 3 halide_free, then the Funcs and, on GPU targets,
 * one "<buffer> (copy to device)" / "<buffer> (copy to host)" slot per copied buffer, which
 * Tally's report lists in its copy sections (Halide 21 syncs with halide_device_sync_global
 * after each copy to the device, as Tally's own probes do).
 *
 * A run counts only once its code says it left the bounds query (halide_profiler_enable_instance):
 * a call that only answers a bounds query ends its run without counting it, as in Halide 21.
 *
 * Halide 21's `halide_profiler_set_current_func(instance, func_id, sampling_token)` has three
 * parameters where Halide 14's has four; C has one function per name, so the compiler calls
 * the three-argument form as tally_halide21_profiler_set_current_func (src/ir/RuntimeCalls.h,
 * TALLY_RUNTIME_OVERLOADS).
 * ------------------------------------------------------------------------------------------- */

/** Starts a run of `pipeline_name` with one slot per func (func_names[i] a `const char *` stored
 * as 64 bits) and keeps it in `instance`, memory of at least 112 bytes the pipeline allocated
 * (its contents on entry do not matter). Makes the run current on this thread, its threads idle
 * (the code then calls halide_profiler_incr_active_threads). Returns 0 or a negative error code
 * (reported); halide_profiler_instance_end is safe after either. */
int32_t halide_profiler_instance_start(void *user_context, const char *pipeline_name,
                                       int32_t num_funcs, const uint64_t *func_names,
                                       void *instance);
/** Marks the run in `instance` as past its bounds query: it counts (runs += 1) when it ends.
 * Returns 0. */
int32_t halide_profiler_enable_instance(void *instance);
/** Ends the run in `instance` (registered by Halide's code as a destructor, so it runs on every
 * exit): merges it into its pipeline's totals if halide_profiler_enable_instance was called,
 * else drops it. A no-op when the start failed or the run has ended. Returns 0. */
int32_t halide_profiler_instance_end(void *user_context, void *instance);
/** Halide 21's `halide_profiler_set_current_func(instance, func_id, sampling_token)`: makes func
 * `func_id` the current slot of the calling thread's context in the run of `instance`. A
 * non-NULL sampling_token whose value is nonzero skips the switch (as in Halide). Returns 0. */
int32_t tally_halide21_profiler_set_current_func(void *instance, int32_t func_id,
                                                 int32_t *sampling_token);

/** Memory numbers of one slot or pipeline, for one kind. */
typedef struct tally_memory_stats {
    /** Bytes currently allocated (after all runs ended: what was never freed). */
    int64_t current;
    /** Largest `current` seen in any one run. */
    uint64_t peak;
    /** Number of allocations. */
    uint64_t num_allocs;
    /** Sum of allocation sizes. */
    uint64_t total_bytes;
} tally_memory_stats;

/** Totals of one slot over all finished runs of its pipeline. */
typedef struct tally_slot_stats {
    /** Slot name (owned by the registry; valid until tally_profiler_reset). */
    const char *name;
    int32_t slot;
    /** tally_slot_kind_t. */
    int32_t kind;
    /** The Func slot a copy slot belongs to (tally_profiler_start's slot_parents), else -1. */
    int32_t parent;
    /** Time billed to the slot, after per-run rescaling to wall time. */
    uint64_t time_ns;
    /** 100 * time_ns / pipeline total_ns (0 if the total is 0). */
    double percent;
    /** Number of (tick, context) observations of this slot. */
    uint64_t samples;
    /** Average over those observations of the number of threads working in the run at that tick:
     * the active worker contexts not blocked in a device wait, or, with no workers active, 1 for
     * the main thread (0 while it is blocked in a device wait). */
    double average_threads;
    /** Buffer copies made while this slot was current, and their bytes. */
    uint64_t copies;
    uint64_t copy_bytes;
    tally_memory_stats heap;
    tally_memory_stats device;
} tally_slot_stats;

/** Totals of one pipeline over all finished runs. */
typedef struct tally_pipeline_stats {
    /** Pipeline name and target of its first run (owned by the registry). */
    const char *name;
    const char *target;
    int32_t num_slots;
    /** Union of the flags its runs were started with. */
    int32_t flags;
    uint64_t runs;
    /** Sum of the runs' wall times. */
    uint64_t total_ns;
    /** Sampler ticks that billed time to its runs. */
    uint64_t samples;
    /** Average over ticks of the threads working in the run (counted as for slots). */
    double average_threads;
    /** Largest run-wide current heap / device memory of any run. */
    uint64_t heap_peak;
    uint64_t device_peak;
    uint64_t kernel_launches;
    /** halide_device_sync_global calls. */
    uint64_t injected_syncs;
    /** halide_device_sync calls. */
    uint64_t explicit_syncs;
    uint64_t copies_to_device;
    uint64_t copies_to_device_bytes;
    uint64_t copies_to_host;
    uint64_t copies_to_host_bytes;
    /** The clock its exact-mode runs read ("tsc", "clock_gettime" or "test clock", static
     * strings): this process's for a pipeline of the registry. For tally_profiler_format_text,
     * the clock of the process that measured the runs, or NULL when the report did not record
     * it (the text then says so). */
    const char *clock;
} tally_pipeline_stats;

/** Number of pipelines in the registry. */
int32_t tally_profiler_num_pipelines(void);

/** Fills *out with the totals of the pipeline named `pipeline` (the first registered, if several
 * share the name). Returns 0, TALLY_ERROR_NOT_FOUND or TALLY_ERROR_BAD_ARGUMENT. */
int32_t tally_profiler_get_pipeline_stats(const char *pipeline, tally_pipeline_stats *out);

/** As above, by registration index in [0, tally_profiler_num_pipelines()). */
int32_t tally_profiler_get_pipeline_stats_by_index(int32_t index, tally_pipeline_stats *out);

/** Fills *out with the totals of slot `slot` of the pipeline named `pipeline`. Returns 0,
 * TALLY_ERROR_NOT_FOUND or TALLY_ERROR_BAD_ARGUMENT. */
int32_t tally_profiler_get_slot_stats(const char *pipeline, int32_t slot, tally_slot_stats *out);

/** As above, by pipeline registration index. */
int32_t tally_profiler_get_slot_stats_by_index(int32_t index, int32_t slot, tally_slot_stats *out);

/** The time billed to one-time row `kind` (tally_one_time_kind_t) of the pipeline with
 * registration index `index`, over its finished runs. Returns 0, TALLY_ERROR_NOT_FOUND or
 * TALLY_ERROR_BAD_ARGUMENT. */
int32_t tally_profiler_get_one_time_ns_by_index(int32_t index, int32_t kind, uint64_t *out);

/** The half-width, in percentage points, of the 95 % interval of slot `slot`'s share that the
 * report prints for a sampled pipeline (registration index `index`); -1 for an exact one.
 * Returns 0, TALLY_ERROR_NOT_FOUND or TALLY_ERROR_BAD_ARGUMENT. */
int32_t tally_profiler_get_slot_ci95_by_index(int32_t index, int32_t slot, double *out);

/** The clock exact mode reads: "tsc" (the invariant TSC, calibrated), "clock_gettime" or "test
 * clock" (tally_testing_set_clock). Calibrates the TSC first if no run has. */
const char *tally_profiler_clock_name(void);

/** The name of the mode a pipeline's runs were profiled in, from its flags
 * (tally_pipeline_stats::flags), as the report, the JSON ("mode") and the pprof label say it:
 * "exact", "timer" (sampled from a timer signal) or "sampling" (sampled by the sampler thread).
 * Never NULL. */
const char *tally_profiler_mode_name(int32_t flags);

/* ---------------------------------------------------------------------------------------------
 * Device waits: every time the runtime itself blocks the host on a device queue
 *
 * Process-wide (all pipelines, all device back ends), never reset. A profiler that serialises the
 * program it measures is measuring another program: these counts show where the runtime waited
 * (expected: only at copies to the host and at syncs the pipeline asked for), and that no
 * halide_device_free waited for in-flight work (its release is deferred instead).
 * ------------------------------------------------------------------------------------------- */

/** Why the runtime waited for a device queue. */
typedef enum tally_device_wait_reason {
    /** halide_copy_to_host: the data must be complete before the host reads it. */
    TALLY_DEVICE_WAIT_COPY_TO_HOST = 0,
    /** halide_copy_to_device into mapped memory still in use by queued work. */
    TALLY_DEVICE_WAIT_COPY_TO_DEVICE,
    /** halide_device_sync (one buffer). */
    TALLY_DEVICE_WAIT_SYNC,
    /** halide_device_sync_global (injected by sync-mode profiling, or the pipeline's own). */
    TALLY_DEVICE_WAIT_SYNC_GLOBAL,
    /** halide_device_free waiting for the buffer's last use (only back ends that cannot defer). */
    TALLY_DEVICE_WAIT_FREE,
    /** Too much work in flight: a submission waited for the oldest one. */
    TALLY_DEVICE_WAIT_THROTTLE,
    /** halide_device_release / process exit waiting for the device to go idle. */
    TALLY_DEVICE_WAIT_RELEASE,
    /** profile_timestamps on a device without timestamps: a sync after each launch instead. */
    TALLY_DEVICE_WAIT_TIMESTAMP_FALLBACK,
    /** The at-exit report waiting for queued work, so that every timed kernel is billed. */
    TALLY_DEVICE_WAIT_EXIT_REPORT,
    TALLY_NUM_DEVICE_WAIT_REASONS
} tally_device_wait_reason;

typedef struct tally_device_wait_stats {
    /** Waits that blocked on work not known complete, per tally_device_wait_reason. */
    uint64_t waits[TALLY_NUM_DEVICE_WAIT_REASONS];
    /** Host time spent in them (the profiler's clock), per reason. */
    uint64_t wait_ns[TALLY_NUM_DEVICE_WAIT_REASONS];
    /** halide_device_free calls whose memory was still in use by queued work: the release was
     * deferred until the queue passed the buffer's last use. */
    uint64_t deferred_frees;
    /** Of those, the releases done so far. */
    uint64_t deferred_frees_released;
} tally_device_wait_stats;

/** Fills *out with the process-wide counts. */
void tally_device_get_wait_stats(tally_device_wait_stats *out);

/** The reason's name as the report prints it ("copy_to_host", ...), or "unknown". */
const char *tally_device_wait_reason_name(int32_t reason);

/* ---------------------------------------------------------------------------------------------
 * Profile exports (runtime/src/export/): the totals above, in formats other tools read
 *
 * Each slot is shown under a call stack, root first: pipeline ; Func for a Func slot (overhead
 * included), pipeline ; Func ; "copy to device" or "copy to host" for a copy slot the compiler
 * named after its Func ("<Func> (copy to device)"), pipeline ; <slot name> for any other copy
 * slot. At exit, when at least one profiled run finished, TALLY_PROFILE_PPROF=<path> writes the
 * pprof profile and TALLY_PROFILE_FOLDED=<path> the folded stacks (both replace the file). Must
 * not run concurrently with tally_profiler_reset.
 * ------------------------------------------------------------------------------------------- */

/** Writes every pipeline's totals to `path` as a gzipped pprof profile (profile.proto, read by
 * `go tool pprof`, Parca and Pyroscope). Sample types: time (nanoseconds), samples (count),
 * alloc_objects (count) and alloc_space (bytes) of heap allocations, device_alloc_objects and
 * device_alloc_space, copies (count) and copy_space (bytes) of buffer copies; one sample per slot
 * with a nonzero value, labelled with the pipeline's target, mode ("sampler" or "timer"), slot kind
 * and runs. The file is written to a temporary name and renamed, so a reader never sees half of it.
 * Returns 0, TALLY_ERROR_BAD_ARGUMENT, TALLY_ERROR_OUT_OF_MEMORY, TALLY_ERROR_GENERIC (compression
 * failed) or TALLY_ERROR_IO, after reporting the failure through halide_error. */
int32_t tally_profiler_write_pprof(void *user_context, const char *path);

/** Writes every pipeline's totals to `path` as folded stacks for flame-graph tools: one line
 * `frame;frame[;frame] N` per slot with nonzero time, N its time in nanoseconds (';' in a name is
 * written ':'). Written and failing as tally_profiler_write_pprof. */
int32_t tally_profiler_write_folded(void *user_context, const char *path);

/** Writes the timeline recorded so far to `path` as Chrome Trace Event JSON (the object form, for
 * Perfetto UI, chrome://tracing and speedscope): one process per pipeline, a track per host thread
 * with a slice per slot activation (switch-timed, in every profiling mode), a device track with a
 * slice per kernel and staged copy (device timestamps under profile_timestamps, else the host's
 * view: launch to the device wait that completed it), a flow from each launch to its device
 * slice, "heap" and "device memory" counters, and thread and process names. otherData holds
 * "dropped_events" (records lost from full rings; expected 0). Records exist only while recording
 * is on: TALLY_PROFILE_TRACE=<path> turns it on at the first profiled run and writes this file at
 * exit (when a profiled run finished); tally_profiler_trace_record turns it on from code. Written
 * and failing as tally_profiler_write_pprof. */
int32_t tally_profiler_write_trace(void *user_context, const char *path);

/** Turns timeline recording on (on != 0) or off; records made so far are kept (tally_profiler_reset
 * forgets them). `events_per_thread` (0: unchanged) sets the ring each thread records into from
 * then on, in records (rounded up to a power of two; default 262144, or
 * TALLY_PROFILE_TRACE_EVENTS): a full ring overwrites its oldest records and counts them dropped.
 * While off, each hook costs one predictable branch. Returns 0 or TALLY_ERROR_BAD_ARGUMENT (more
 * than 2^26 events per thread). */
int32_t tally_profiler_trace_record(void *user_context, int32_t on, uint64_t events_per_thread);

/** Writes, as tally_profiler_write_pprof does, the numbers of what happened since the previous
 * call (the first call: since the process started): runs, time, samples, allocations and copies
 * are differences, peaks are as they are now. A pipeline counts from zero when it is new or the
 * registry was reset in between. For continuous profiling: TALLY_PROFILE_PPROF_EVERY=<seconds>
 * (with TALLY_PROFILE_PPROF=<path>) writes a window every <seconds> to <path>.0, <path>.1, ...
 * from a thread started with the first profiled run, keeping the last TALLY_PROFILE_PPROF_KEEP
 * files (default 8), with the sampling interval at 10 ms unless TALLY_PROFILE_INTERVAL_US is set;
 * the last, partial window is written at exit. Fails as tally_profiler_write_pprof. */
int32_t tally_profiler_write_pprof_window(void *user_context, const char *path);

/** Formats numbers read elsewhere (e.g. from a JSON report) exactly as tally_profiler_report
 * formats the registry's: pipelines[i] with its slots slots[i][0..pipelines[i].num_slots), in the
 * fields tally_profiler_get_*_stats fill (percent is recomputed; average thread counts are taken
 * to the nearest whole sum of threads over samples). Touches no profiler state. snprintf
 * semantics as tally_profiler_report_to_buffer. Returns the text's length, or
 * TALLY_ERROR_BAD_ARGUMENT (a NULL name, num_slots < 1, a slot kind out of range) or
 * TALLY_ERROR_OUT_OF_MEMORY. */
int32_t tally_profiler_format_text(int32_t num_pipelines, const tally_pipeline_stats *pipelines,
                                   const tally_slot_stats *const *slots, char *buf, size_t size);

/** Formats a device-wait ledger read elsewhere (e.g. a JSON report's "device_waits") exactly as
 * the report prints the process's after its pipelines: "" when it holds nothing. snprintf
 * semantics as above. Returns the text's length, TALLY_ERROR_BAD_ARGUMENT for a NULL `waits`,
 * or TALLY_ERROR_OUT_OF_MEMORY. */
int32_t tally_profiler_format_device_waits(const tally_device_wait_stats *waits, char *buf,
                                           size_t size);

/* ---------------------------------------------------------------------------------------------
 * Report warnings (runtime/src/profiler/warnings.c): patterns in a pipeline's totals worth a look,
 * each with the numbers behind it. The text report lists them under "warnings:" after the sections,
 * the JSON report as "warnings": [{"kind", "slot", "value", "threshold", "message"}, ...].
 * ------------------------------------------------------------------------------------------- */

/** What a warning is about; `value` and `threshold` of tally_warning say, per kind: */
typedef enum tally_warning_kind_t {
    /** A Func's buffer crosses between host and device TALLY_WARN_BOUNCE_COPIES times or more
     * per run, both ways: value = its copies per run. slot = the Func. */
    TALLY_WARNING_BUFFER_BOUNCE = 0,
    /** The pipeline's own syncs (halide_device_sync) reach one per kernel launch, so with the
     * profiler's own sync after each launch there is more than one sync per launch: value = its
     * explicit syncs per launch. */
    TALLY_WARNING_SYNCS_PER_LAUNCH = 1,
    /** Copies take TALLY_WARN_COPY_PERCENT or more of the time: value = their percentage. */
    TALLY_WARNING_COPY_TIME = 2,
    /** The host waits for the device most of the time: a pipeline with launches whose average
     * number of working threads is under TALLY_WARN_WAIT_THREADS: value = that average. */
    TALLY_WARNING_SYNC_WAIT = 3,
    /** One Func's peak memory (heap + device) is TALLY_WARN_PEAK_RATIO times or more that of all
     * other Funcs together, and at least TALLY_WARN_PEAK_MIN_BYTES: value = the ratio. slot = it.
     */
    TALLY_WARNING_PEAK_MEMORY = 4,
    /** Fewer than TALLY_WARN_MIN_SAMPLES samples: value = the samples. A time share p sampled n
     * times has a standard error of sqrt(p (1 - p) / n), up to 50 / sqrt(n) percentage points. */
    TALLY_WARNING_FEW_SAMPLES = 5
} tally_warning_kind_t;

#define TALLY_WARN_BOUNCE_COPIES 3
#define TALLY_WARN_COPY_PERCENT 50.0
#define TALLY_WARN_WAIT_THREADS 0.5
#define TALLY_WARN_PEAK_RATIO 10.0
#define TALLY_WARN_PEAK_MIN_BYTES (1u << 20)
#define TALLY_WARN_MIN_SAMPLES 100

/** One warning. */
typedef struct tally_warning {
    /** tally_warning_kind_t. */
    int32_t kind;
    /** The slot it is about, or -1 for the whole pipeline. */
    int32_t slot;
    /** The number behind it and the threshold that number reached. */
    double value;
    double threshold;
    /** One line saying what and why, with the numbers; NUL-terminated. */
    char message[240];
} tally_warning;

/** The JSON report's name of a warning kind: "buffer_bounce", "syncs_per_launch", "copy_time",
 * "sync_wait", "peak_memory", "few_samples"; "unknown" for other values. Never NULL. */
const char *tally_warning_kind_name(int32_t kind);

/** Checks a pipeline's totals (as tally_profiler_get_*_stats fill them; slots[0..num_slots))
 * against every rule above, in the order of tally_warning_kind_t, and writes up to max_warnings
 * of them to out. Returns how many it found (more than max_warnings when out is too small), 0
 * for a pipeline without finished runs, or TALLY_ERROR_BAD_ARGUMENT. */
int32_t tally_profiler_check_warnings(const tally_pipeline_stats *pipeline,
                                      const tally_slot_stats *slots, tally_warning *out,
                                      int32_t max_warnings);

/* ---------------------------------------------------------------------------------------------
 * Layout checks (the compiler side checks the same sizes with static_assert)
 * ------------------------------------------------------------------------------------------- */

#ifdef __cplusplus
#define TALLY_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define TALLY_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

TALLY_STATIC_ASSERT(sizeof(halide_type_t) == 4, "halide_type_t must be 4 bytes");
TALLY_STATIC_ASSERT(sizeof(halide_dimension_t) == 16, "halide_dimension_t must be 16 bytes");
TALLY_STATIC_ASSERT(sizeof(halide_buffer_t) == 24 + 4 * sizeof(void *),
                    "halide_buffer_t layout must match Halide's");
TALLY_STATIC_ASSERT(sizeof(halide_device_interface_t) == 13 * sizeof(void *),
                    "halide_device_interface_t is 13 pointers");
TALLY_STATIC_ASSERT(sizeof(tally_memory_stats) == 32, "tally_memory_stats must be 32 bytes");
TALLY_STATIC_ASSERT(sizeof(halide_semaphore_t) == 16, "halide_semaphore_t is 16 bytes in Halide");
TALLY_STATIC_ASSERT(sizeof(void *) != 8 || sizeof(halide_semaphore_acquire_t) == 16,
                    "halide_semaphore_acquire_t layout must match Halide's");
TALLY_STATIC_ASSERT(sizeof(void *) != 8 || sizeof(halide_parallel_task_t) == 56,
                    "halide_parallel_task_t layout must match Halide's");
TALLY_STATIC_ASSERT(sizeof(void *) != 8 || sizeof(halide_buffer_t) == 56,
                    "halide_buffer_t must be 56 bytes on 64-bit targets");
TALLY_STATIC_ASSERT(sizeof(void *) != 8 || sizeof(tally_slot_stats) == 136,
                    "tally_slot_stats layout changed: bump TALLY_RUNTIME_ABI_VERSION");
TALLY_STATIC_ASSERT(sizeof(void *) != 8 || sizeof(tally_pipeline_stats) == 136,
                    "tally_pipeline_stats layout changed: bump TALLY_RUNTIME_ABI_VERSION");

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // TALLY_RUNTIME_INCLUDE_TALLY_RUNTIME_H
