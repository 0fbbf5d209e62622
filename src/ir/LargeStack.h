/** \file
 * Runs compiler work on a thread with a large stack. The IR is a tree and every traversal
 * recurses; a function with a hundred thousand nested lets is legal input, so the public entry
 * points that walk whole modules run their work here instead of on the caller's (possibly
 * small) stack. Nested calls run inline.
 */
#ifndef TALLY_IR_LARGESTACK_H
#define TALLY_IR_LARGESTACK_H

#include <exception>
#include <functional>
#include <type_traits>
#include <utility>

namespace tally {
namespace detail {

/** Runs fn on a thread with a 1 GiB stack (reserved, committed as used), or inline when the
 * caller is already on one. Exceptions propagate to the caller. */
void run_on_large_stack(const std::function<void()> &fn);

}  // namespace detail

template <typename F>
auto with_large_stack(F &&f) -> decltype(f()) {
    using R = decltype(f());
    if constexpr (std::is_void_v<R>) {
        detail::run_on_large_stack([&]() { f(); });
    } else {
        R *result = nullptr;
        alignas(R) unsigned char storage[sizeof(R)];
        detail::run_on_large_stack([&]() { result = new (storage) R(f()); });
        R out = std::move(*result);
        result->~R();
        return out;
    }
}

}  // namespace tally

#endif  // TALLY_IR_LARGESTACK_H
