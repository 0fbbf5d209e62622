/** \file
 * The compile-time check that ir/RuntimeCalls.h's compact signatures say what
 * runtime/include/tally_runtime.h declares.
 *
 * RuntimeCalls.h types every runtime entry point compiled code calls with a compact string
 * ("i:UBD": returns int32; takes the user context, a buffer, a device interface). Code
 * generation declares the functions from those strings, so a string that drifts from the C
 * declaration is a call with the wrong arguments, found (if at all) at run time. This header
 * derives the same string from the declaration's C type and compares the two while compiling:
 * `TALLY_CHECK_RUNTIME_SIGNATURE(halide_copy_to_host, "i:UB")` fails to compile, naming the
 * function, when they disagree. RuntimeSignatures.cpp applies it to every entry of the list.
 *
 * The C type of each code: v void, b bool, i int32_t, u uint32_t, l int64_t, q uint64_t,
 * f float, d double, s `const char *`, B (const) `halide_buffer_t *`, D (const)
 * `halide_device_interface_t *`, U `void *` as the first parameter (the user context), p any
 * other pointer (including `void *` elsewhere and function pointers).
 */
#ifndef TALLY_IR_RUNTIMESIGNATURECHECK_H
#define TALLY_IR_RUNTIMESIGNATURECHECK_H

#include <cstdint>
#include <type_traits>

#include "tally_runtime.h"

namespace tally {
namespace runtime_signature {

/** The code of one C type; `V` is `void *` (U or p in a signature), `?` a type no code has. */
template <typename T>
constexpr char code() {
    using U = std::remove_cv_t<T>;
    if constexpr (std::is_void_v<U>) {
        return 'v';
    } else if constexpr (std::is_same_v<U, bool>) {
        return 'b';
    } else if constexpr (std::is_same_v<U, int32_t>) {
        return 'i';
    } else if constexpr (std::is_same_v<U, uint32_t>) {
        return 'u';
    } else if constexpr (std::is_same_v<U, int64_t>) {
        return 'l';
    } else if constexpr (std::is_same_v<U, uint64_t>) {
        return 'q';
    } else if constexpr (std::is_same_v<U, float>) {
        return 'f';
    } else if constexpr (std::is_same_v<U, double>) {
        return 'd';
    } else if constexpr (std::is_pointer_v<U>) {
        using Pointee = std::remove_pointer_t<U>;
        using Bare = std::remove_cv_t<Pointee>;
        if constexpr (std::is_same_v<Pointee, const char>) {
            return 's';
        } else if constexpr (std::is_same_v<Bare, halide_buffer_t>) {
            return 'B';
        } else if constexpr (std::is_same_v<Bare, halide_device_interface_t>) {
            return 'D';
        } else if constexpr (std::is_same_v<Pointee, void>) {
            return 'V';
        } else {
            return 'p';
        }
    } else {
        return '?';
    }
}

/** The signature of a C function type, codes as above. */
template <typename F>
struct Of;
template <typename R, typename... Args>
struct Of<R(Args...)> {
    static constexpr char value[] = {code<R>(), ':', code<Args>()..., '\0'};
};

/** True when the compact string `declared` describes the C signature `actual` (Of<>::value). */
constexpr bool matches(const char *declared, const char *actual) {
    int i = 0;
    for (; declared[i] && actual[i]; i++) {
        char d = declared[i], a = actual[i];
        bool first_param = i == 2;
        if (d == 'U') {
            if (!first_param || a != 'V') {
                return false;
            }
        } else if (d == 'p') {
            if (a != 'p' && a != 'V') {
                return false;
            }
        } else if (d != a || a == 'V' || a == '?') {
            return false;
        }
    }
    return declared[i] == actual[i];
}

}  // namespace runtime_signature
}  // namespace tally

/** Fails to compile when `signature` does not describe `name`'s declaration in tally_runtime.h. */
#define TALLY_CHECK_RUNTIME_SIGNATURE(name, signature)                                             \
    static_assert(::tally::runtime_signature::matches(                                             \
                      signature, ::tally::runtime_signature::Of<decltype(::name)>::value),         \
                  "the signature of " #name " in ir/RuntimeCalls.h (" signature                    \
                  ") disagrees with its declaration in runtime/include/tally_runtime.h");

#endif  // TALLY_IR_RUNTIMESIGNATURECHECK_H
