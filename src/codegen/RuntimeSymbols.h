/** \file
 * The single list of runtime entry points that compiled code (and the parser's type inference)
 * knows by name. Each entry gives the C signature as a compact string: the return type, a
 * colon, then one character per parameter:
 *   v void, b bool, i int32, u uint32, l int64, q uint64, f float, d double,
 *   p pointer (void *), s const char *, B halide_buffer_t *, D device interface pointer,
 *   U the user_context pointer, which generated code passes implicitly (IR calls omit it).
 * Every name here is declared in runtime/include/tally_runtime.h.
 */
#ifndef TALLY_CODEGEN_RUNTIMESYMBOLS_H
#define TALLY_CODEGEN_RUNTIMESYMBOLS_H

#include <cstring>

namespace tally {

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
    X(halide_device_free_as_destructor, "v:UB")                                   \
    X(halide_device_and_host_free_as_destructor, "v:UB")                          \
    X(halide_device_sync,               "i:UB")                                   \
    X(halide_device_sync_global,        "i:UD")                                   \
    X(halide_device_release,            "v:UD")                                   \
    X(halide_host_device_interface,     "D:")                                     \
    X(halide_cuda_device_interface,     "D:")                                     \
    X(halide_vulkan_device_interface,   "D:")                                     \
    X(halide_cuda_run,                  "i:Upsiiiiiiippp")                         \
    X(halide_vulkan_run,                "i:Upsiiiiiiippp")                         \
    X(halide_malloc,                    "p:Uq")                                   \
    X(halide_free,                      "v:Up")                                   \
    X(halide_do_par_for,                "i:Upiip")                                \
    X(halide_error,                     "v:Us")                                   \
    X(halide_print,                     "v:Us")                                   \
    /* profiler */                                                                \
    X(tally_profiler_start,             "p:Ussippi")                              \
    X(tally_profiler_end,               "i:Up")                                   \
    X(tally_profiler_set_current,       "v:pi")                                   \
    X(tally_profiler_thread_begin,      "p:p")                                    \
    X(tally_profiler_current_instance,  "p:")                                     \
    X(tally_buffer_size_in_bytes,       "q:B")                                    \
    X(tally_profiler_thread_end,        "v:p")                                    \
    X(tally_profiler_memory_allocate,   "v:piiq")                                 \
    X(tally_profiler_memory_free,       "v:piiq")
// clang-format on

inline const RuntimeSymbol *find_runtime_symbol(const char *name) {
    static const RuntimeSymbol table[] = {
#define TALLY_X(n, sig) {#n, sig},
        TALLY_RUNTIME_SYMBOLS(TALLY_X)
#undef TALLY_X
    };
    for (const RuntimeSymbol &s : table) {
        if (std::strcmp(s.name, name) == 0) {
            return &s;
        }
    }
    return nullptr;
}

}  // namespace tally

#endif  // TALLY_CODEGEN_RUNTIMESYMBOLS_H
