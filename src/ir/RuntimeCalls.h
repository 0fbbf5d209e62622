/** \file
 * What the runtime's calls mean at the IR level: the one list of runtime entry points that
 * compiled code knows by name, and the recognizers and builders for the calls the lowering
 * passes write and read (copies, kernel launches, parallel closures, `X.buffer` descriptors,
 * checked calls, device interfaces, Default_GPU).
 *
 * Why here: the parser types runtime calls by their signatures, the passes write and recognize
 * them, code generation declares them, and the argument binder (src/jit/) reads how a pipeline
 * uses its buffers. Each of those once carried its own copy of these rules, and the copies
 * drifted (the pipeline/closure decision disagreed on Internal linkage; the Python bindings and
 * Halide's metadata had two rules for which buffers a pipeline writes). Living in src/ir/, below
 * every other layer, they can be shared without any layer reaching up.
 *
 * Runtime names appear as string literals only in this file's lists: code that writes or
 * matches a call uses the constants in `tally::runtime`.
 *
 * Each entry of the table gives the C signature as a compact string: the return type, a colon,
 * then one character per parameter:
 *   v void, b bool, i int32, u uint32, l int64, q uint64, f float, d double,
 *   p pointer (void *), s const char *, B halide_buffer_t *, D device interface pointer,
 *   U the user_context pointer, which generated code passes implicitly (IR calls omit it).
 * Every name here is declared in runtime/include/tally_runtime.h.
 */
#ifndef TALLY_IR_RUNTIMECALLS_H
#define TALLY_IR_RUNTIMECALLS_H

#include <map>
#include <set>
#include <string>
#include <vector>

#include "tally/IR.h"
#include "tally/Module.h"
#include "tally/Target.h"

namespace tally {

// ---------------------------------------------------------------------------------------------
// The runtime's entry points

struct RuntimeSymbol {
    const char *name;
    const char *signature;
};

// clang-format off
#define TALLY_RUNTIME_SYMBOLS(X)                                                  \
    /* buffers and devices */                                                     \
    X(halide_copy_to_host,              "i:UB")                                   \
    X(halide_copy_to_device,            "i:UBD")                                  \
    X(halide_device_malloc,             "i:UBD")                                  \
    X(halide_device_free,               "i:UB")                                   \
    X(halide_device_and_host_malloc,    "i:UBD")                                  \
    X(halide_device_and_host_free,      "i:UB")                                   \
    X(halide_device_free_as_destructor, "v:Up")                                   \
    X(halide_device_and_host_free_as_destructor, "v:Up")                          \
    X(halide_device_sync,               "i:UB")                                   \
    X(halide_device_sync_global,        "i:UD")                                   \
    X(halide_device_release,            "i:UD")                                   \
    X(halide_buffer_to_string,          "p:ppB")                                  \
    X(halide_host_device_interface,     "D:")                                     \
    X(halide_cuda_device_interface,     "D:")                                     \
    X(halide_vulkan_device_interface,   "D:")                                     \
    X(halide_opencl_device_interface,   "D:")                                     \
    X(halide_cuda_run,                  "i:Upsiiiiiiippp")                         \
    X(halide_vulkan_run,                "i:Upsiiiiiiippp")                         \
    X(halide_opencl_run,                "i:Upsiiiiiiippp")                         \
    /* Halide's GPU module state (lowered text: kernels Halide compiled) */       \
    X(halide_opencl_initialize_kernels, "i:Upsi")                                 \
    X(halide_opencl_finalize_kernels,   "v:Up")                                   \
    X(halide_vulkan_initialize_kernels, "i:Upsi")                                 \
    X(halide_vulkan_finalize_kernels,   "v:Up")                                   \
    X(halide_malloc,                    "p:Uq")                                   \
    X(halide_free,                      "v:Up")                                   \
    X(halide_do_par_for,                "i:Upiip")                                \
    X(halide_error,                     "v:Us")                                   \
    X(halide_error_bad_dimensions,      "i:Usii")                                 \
    X(halide_error_bad_type,            "i:Usuu")                                 \
    X(halide_error_param_too_small_i64, "i:Usll")                                 \
    X(halide_error_param_too_small_u64, "i:Usqq")                                 \
    X(halide_error_param_too_small_f64, "i:Usdd")                                 \
    X(halide_error_param_too_large_i64, "i:Usll")                                 \
    X(halide_error_param_too_large_u64, "i:Usqq")                                 \
    X(halide_error_param_too_large_f64, "i:Usdd")                                 \
    X(halide_print,                     "v:Us")                                   \
    /* Halide's text primitives (stringify) */                                    \
    X(halide_string_to_string,          "p:pps")                                  \
    X(halide_int64_to_string,           "p:ppli")                                 \
    X(halide_uint64_to_string,          "p:ppqi")                                 \
    X(halide_double_to_string,          "p:ppdi")                                 \
    X(halide_pointer_to_string,         "p:ppp")                                  \
    /* Halide's memoization cache (Func::memoize) and tracing (Func::trace_*) */  \
    X(halide_memoization_cache_lookup,  "i:UpiBip")                               \
    X(halide_memoization_cache_store,   "i:UpiBipbq")                             \
    X(halide_memoization_cache_release, "v:Up")                                   \
    X(halide_trace_helper,              "i:Usppiiiiiiis")                         \
    X(halide_debug_to_file,             "i:UsiB")                                 \
    X(tally_halide21_debug_to_file,     "i:UsB")                                  \
    /* profiler */                                                                \
    X(tally_profiler_start,             "p:Ussipppi")                             \
    X(tally_profiler_end,               "i:Up")                                   \
    X(tally_profiler_set_current,       "v:pi")                                   \
    X(tally_profiler_thread_begin,      "p:p")                                    \
    X(tally_profiler_current_instance,  "p:")                                     \
    X(tally_profiler_current_context,   "p:")                                     \
    X(tally_buffer_size_in_bytes,       "q:B")                                    \
    X(tally_profiler_thread_end,        "v:p")                                    \
    X(tally_profiler_memory_allocate,   "v:piiq")                                 \
    X(tally_profiler_memory_free,       "v:piiq")                                 \
    /* multi-target libraries: the wrapper's choice of variant */                 \
    X(tally_cpu_has_features,           "i:s")                                    \
    /* async tasks (Halide writes the user_context of do_parallel_tasks itself) */ \
    X(halide_do_parallel_tasks,         "i:pipp")                                 \
    X(halide_semaphore_init,            "i:pi")                                   \
    X(halide_semaphore_release,         "i:pi")                                   \
    X(halide_semaphore_try_acquire,     "b:pi")                                   \
    /* Halide profiler ABI (IR that Halide instrumented with -profile) */         \
    X(halide_profiler_pipeline_start,   "i:Usip")                                 \
    X(halide_profiler_pipeline_end,     "v:Up")                                   \
    X(halide_profiler_get_state,        "p:")                                     \
    X(halide_profiler_get_pipeline_state, "p:s")                                  \
    X(halide_profiler_set_current_func, "i:piip")                                 \
    X(halide_profiler_init_sampling_token, "i:pi")                                \
    X(halide_profiler_acquire_sampling_token, "i:pp")                             \
    X(halide_profiler_release_sampling_token, "i:pp")                             \
    X(halide_profiler_incr_active_threads, "i:p")                                 \
    X(halide_profiler_decr_active_threads, "i:p")                                 \
    X(halide_profiler_memory_allocate,  "v:Upiq")                                 \
    X(halide_profiler_memory_free,      "v:Upiq")                                 \
    X(halide_profiler_stack_peak_update, "v:Upp")                                 \
    /* Halide 21's per-instance profiler ABI (the instance is memory the IR        \
       allocates); its 3-argument set_current_func is TALLY_RUNTIME_OVERLOADS' */  \
    X(halide_profiler_instance_start,   "i:Usipp")                                \
    X(halide_profiler_instance_end,     "i:Up")                                   \
    X(halide_profiler_enable_instance,  "i:p")                                    \
    X(tally_halide21_profiler_set_current_func, "i:pip")                          \
    /* Halide's other calls (Halide 14 and 21) */                                 \
    X(halide_error_split_factor_not_positive, "i:Usssssi")                        \
    X(halide_error_storage_bound_too_small, "i:Ussii")                            \
    X(halide_mutex_array_create,        "p:q")                                    \
    X(halide_mutex_array_destroy,       "v:Up")                                   \
    X(halide_mutex_array_lock,          "i:pi")                                   \
    X(halide_mutex_array_unlock,        "i:pi")

/** Halide names that name two runtime functions. The IR keeps Halide's name (extern calls read
 * as Halide printed them), but C has one function per name, so where Halide's two dialects call
 * one name with different parameters, the later form is a runtime entry point of its own, named
 * `tally_halide<version>_...`: X(halide_name, entry_point), both in TALLY_RUNTIME_SYMBOLS.
 *
 * The rule (resolve_runtime_call, the one place it is applied): a call of `halide_name` with n
 * IR arguments (user_context never counts) calls the first of halide_name's own entry and its
 * overloads, in that order, that takes n; a count no form takes is an error naming every form.
 * The argument count alone decides: the forms listed here never share one. Code generation and
 * the verifier resolve through it; typing that only hints (the parser's argument hints) uses
 * find_runtime_call, which is the same rule without the error.
 *
 * halide_profiler_set_current_func: Halide 14's (state, token, func_id, sampling_token), Halide
 * 21's (instance, func_id, sampling_token). */
#define TALLY_RUNTIME_OVERLOADS(X)                                                \
    X(halide_profiler_set_current_func, tally_halide21_profiler_set_current_func) \
    X(halide_debug_to_file,             tally_halide21_debug_to_file)

/** Halide's buffer accessors that the passes write or read. They take no user_context and
 * are called as the IR types them, so they need no signature entry above. */
#define TALLY_BUFFER_INTRINSICS(X)                                                \
    X(_halide_buffer_init)                                                        \
    X(_halide_buffer_set_host_dirty)                                              \
    X(_halide_buffer_set_device_dirty)                                            \
    X(_halide_buffer_get_min)                                                     \
    X(_halide_buffer_get_extent)                                                  \
    X(_halide_buffer_get_stride)                                                  \
    X(_halide_buffer_get_type)                                                    \
    X(_halide_buffer_get_shape)
// clang-format on

/** The intrinsic that code generation resolves to the module's table of compiled kernels
 * (tally_kernel_table in runtime/include/tally_runtime.h); launches pass it to halide_<api>_run. */
inline constexpr char kernel_table_intrinsic[] = "tally_kernel_table";

/** The table entry for a runtime entry point, or nullptr when `name` is not one. A name with
 * overloads (TALLY_RUNTIME_OVERLOADS) gives its own entry: code that has a call's arguments
 * uses resolve_runtime_call instead. */
const RuntimeSymbol *find_runtime_symbol(const std::string &name);

/** The number of arguments an IR call passes to `s`: its parameters less the user_context,
 * which generated code adds. */
size_t runtime_call_arity(const RuntimeSymbol &s);

/** The runtime entry point an IR call of `name` with `num_args` arguments calls, by the rule of
 * TALLY_RUNTIME_OVERLOADS: find_runtime_symbol(name) for a name without overloads (whatever the
 * count), the form taking `num_args` for one with overloads, nullptr when `name` is no runtime
 * entry point. Throws CompileError (user_error) when `name` has overloads and none of its forms
 * takes `num_args` arguments. */
const RuntimeSymbol *resolve_runtime_call(const std::string &name, size_t num_args);

/** resolve_runtime_call without the error: nullptr also when `name` has overloads and none of
 * its forms takes `num_args` arguments. For typing that reports nothing itself (the parser's
 * argument hints: the verifier reports the count). */
const RuntimeSymbol *find_runtime_call(const std::string &name, size_t num_args);

/** Why an IR call of `name` with `num_args` arguments resolves to no runtime entry point (the
 * message resolve_runtime_call throws, naming every form), or "" when it resolves or `name` has
 * no overloads. For checkers that collect errors instead of throwing (the verifier). */
std::string runtime_call_arity_error(const std::string &name, size_t num_args);

/** One constant per runtime name, spelled as the name: `runtime::halide_copy_to_host`. */
namespace runtime {
#define TALLY_X(n, sig) inline constexpr char n[] = #n;
TALLY_RUNTIME_SYMBOLS(TALLY_X)
#undef TALLY_X
#define TALLY_X(n) inline constexpr char n[] = #n;
TALLY_BUFFER_INTRINSICS(TALLY_X)
#undef TALLY_X
}  // namespace runtime

// ---------------------------------------------------------------------------------------------
// Buffer descriptors: a buffer X is passed to the runtime as the variable `X.buffer`

/** `X.buffer`, the name of buffer X's descriptor variable. */
std::string buffer_var_name(const std::string &buffer);
/** The type of a buffer descriptor variable: `halide_buffer_t *`. */
Type buffer_ptr_type();
/** The descriptor variable of buffer X: `(halide_buffer_t *)X.buffer`. */
Expr buffer_var(const std::string &buffer);
/** X for a name `X.buffer` (X not empty), else "". */
std::string buffer_name_of(const std::string &var_name);
/** X for a Variable `X.buffer`, seen through casts (Halide writes `(halide_buffer_t *)X.buffer`),
 * else "". */
std::string buffer_name_of(const Expr &e);

// ---------------------------------------------------------------------------------------------
// Checked calls: `let r = call(...)` then `assert(r == 0, r)`, as Halide writes them

/** `<fn>_result`, the base name of the variable holding a checked call's result. */
std::string result_name(const std::string &fn);
/** `assert(r == 0, r)` for the result variable `r` of type `t`. */
Stmt result_check(const std::string &result, Type t = Int(32));
/** `let result = call` over `assert(result == 0, result)`, followed by `rest` when defined. */
Stmt checked_call(const std::string &result, const Expr &call, const Stmt &rest = Stmt());
/** Is `s` the check `assert(result == 0, ...)` of the variable `result`? */
bool is_result_check(const Stmt &s, const std::string &result);

// ---------------------------------------------------------------------------------------------
// Copies, launches and device interfaces

/** `c` when `e` calls halide_copy_to_device or halide_copy_to_host with at least a buffer
 * argument (its direction in *to_device, when given), else nullptr. */
const Call *as_copy_call(const Expr &e, bool *to_device = nullptr);

/** The API's name in runtime entry points: `cuda`, `vulkan`, `opencl`, ...; "" for the APIs
 * that name no GPU (None, Host, Default_GPU). */
std::string runtime_api_name(DeviceAPI api);
/** The GPU API whose module state Halide's GPU host code keeps in the buffer constant `name`
 * (`<api>_buf`, printed `buffer opencl_buf = {...}`), or DeviceAPI::None. In Halide's object
 * file it is a scalar buffer of one pointer, null until halide_<api>_initialize_kernels sets it,
 * and writable. */
DeviceAPI gpu_module_state_api(const std::string &name);
/** `halide_<api>_run`, the kernel launch entry point of a GPU API. */
std::string launch_function(DeviceAPI api);
/** The GPU API `c` launches a kernel on (`halide_<api>_run`), or DeviceAPI::None. */
DeviceAPI launch_api(const Call *c);
/** `halide_<api>_device_interface`, the runtime's name for an API's device interface. */
std::string device_interface_function(DeviceAPI api);
/** The call `halide_<api>_device_interface()`, of type `halide_device_interface_t *`. */
Expr device_interface_call(DeviceAPI api);
/** The API whose interface `e` returns, or DeviceAPI::None when `e` is no such call (one of
 * another type, or with arguments, is not). */
DeviceAPI device_interface_api(const Expr &e);

/** The API a GPU loop written for `api` runs on under target `t`: Default_GPU (or no API) means
 * the target's gpu_api(), which may be DeviceAPI::None; any other API stands as written. */
DeviceAPI resolve_device_api(DeviceAPI api, const Target &t);
/** The runtime's number for a device API (tally_device_api_t: kernel tables, the flags of
 * tally_profiler_start): TALLY_DEVICE_API_NONE for an API without a Tally back end. */
int runtime_device_api(DeviceAPI api);
/** Does Tally have a device back end for `api`? (CUDA, OpenCL and Vulkan.) */
bool has_gpu_backend(DeviceAPI api);

// ---------------------------------------------------------------------------------------------
// Parallel closures and pipeline functions

/** The function a `halide_do_par_for((void *)::f, ...)` call runs as its closure, or "". */
std::string par_for_closure(const Expr &e);
/** The functions a call runs as closures: the par_for closure of `halide_do_par_for`, or the task
 * functions `(void *)::f` of the tasks `halide_do_parallel_tasks` runs (its task array is a
 * make_struct of their fields); empty for any other expression. */
std::vector<std::string> task_closures(const Expr &e);
/** The names of the module's functions that some function runs as a closure (task_closures). */
std::set<std::string> par_for_closures(const Module &m);
/** Is `f` a pipeline, an entry point that callers run (given the module's par_for_closures)?
 * Closures are known by their call, never by their linkage: Halide 14 prints the closures it
 * outlines as `external func`. A function with Internal linkage cannot be called from outside
 * the module, so it is no pipeline either. */
bool is_pipeline_function(const LoweredFunc &f, const std::set<std::string> &closures);
/** The module's pipeline functions, in module order. */
std::vector<const LoweredFunc *> pipeline_functions(const Module &m);

// ---------------------------------------------------------------------------------------------
// How a pipeline uses its buffers: the one rule the argument binder (tally/Arguments.h) and
// Halide's metadata (describe_arguments) read

/** How a pipeline's code uses one buffer. */
struct BufferUse {
    /** Its elements are read: loaded (in host code, closures or kernels), or the buffer is handed
     * to a call that may read them, such as an extern stage. Buffer queries, dirty marks,
     * device management and copies do not read (a copy to the device reads the host only when
     * it is dirty, which is the caller's to say), nor do the argument structs of kernel
     * launches (their kernels' loads say what they read). */
    bool read = false;
    /** Its elements are written: stored to (in host code, closures or kernels) or marked dirty
     * (`_halide_buffer_set_host_dirty` after a host write, `_halide_buffer_set_device_dirty`
     * after a device write). A copy to the host is no write: it brings back what a device wrote,
     * which the device-dirty mark already says, and Halide also copies inputs to the host. */
    bool written = false;
    /** Its strides are read (`X.stride.N`, `_halide_buffer_get_stride`,
     * `_halide_buffer_get_shape`). Code that never reads them indexes the buffer as a dense
     * array, dimension 0 innermost. */
    bool reads_strides = false;
};

/** How pipeline function `f` of `m` uses each buffer its code names, by buffer name: its body,
 * the closures it runs (task_closures, followed through closures that run closures) and the
 * kernels its launches name. Buffers the code never names are absent. */
std::map<std::string, BufferUse> buffer_uses(const Module &m, const LoweredFunc &f);

/** What Halide's `<name>_metadata()` says of one argument of a pipeline function. */
struct ArgumentDescription {
    int kind;        // halide_argument_kind_t: 0 scalar, 1 input buffer, 2 output buffer
    int dimensions;  // 0 for a scalar
    Type type;       // the scalar's type, the buffer's element type; invalid when not known
    /** A scalar's range (Param::set_range) where Halide checks it with constant bounds
     * (`halide_error_param_too_small_i64("p", int64(p), (int64)0)`): the bound as that call
     * passes it (int64, uint64 or float64); undefined when there is none. */
    Expr min, max;
};
/** The description of each of the arguments of `f`, a pipeline function of `m`, in order. The
 * text names the arguments only; Halide's lowering checks every buffer argument, naming it by its
 * role ("Input buffer in", "Output buffer out" in `halide_error_bad_type` and the other
 * `halide_error_*` calls) and checking its rank
 * (`halide_error_bad_dimensions("Input buffer in", in.dimensions, 2)`) and its element type
 * (`halide_error_bad_type(..., in.type, (uint32)67585)`): those are read first. Without them (a
 * target with no_asserts) a buffer the pipeline writes (buffer_uses) is an output, and its rank
 * and type are the elaborator's (the highest dimension the body queries, else 0). A scalar's
 * type is the elaborator's; `__user_context` is a handle. Default values and estimates are not
 * in the text. */
std::vector<ArgumentDescription> describe_arguments(const Module &m, const LoweredFunc &f);

}  // namespace tally

#endif  // TALLY_IR_RUNTIMECALLS_H
