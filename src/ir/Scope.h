/** \file
 * Scope: the names bound around the node a traversal is at, with shadowing. A name pushed twice
 * stays bound until it is popped twice; with values, lookups see the innermost binding.
 *
 * Why: passes and the parser each kept a map of counters (or of stacks) with the same
 * bind/unbind bookkeeping; this is that bookkeeping once. `Scope<>` only counts bindings (is
 * this name bound here?); `Scope<T>` also keeps a value per binding (the parser's types of the
 * variables in scope). Users: FindFreeVariables (and through it offload-gpu-loops), and
 * inject-host-dev-copies (the lets in scope).
 */
#ifndef TALLY_IR_SCOPE_H
#define TALLY_IR_SCOPE_H

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tally/Error.h"

namespace tally {

/** Names in scope, each with the values of its bindings, innermost last. */
template <typename T = void>
class Scope {
public:
    /** Binds `name` to `value`, shadowing any outer binding of it. */
    void push(const std::string &name, T value) { bindings[name].push_back(std::move(value)); }

    /** Ends the innermost binding of `name`. */
    void pop(const std::string &name) {
        auto it = bindings.find(name);
        internal_assert(it != bindings.end()) << "Scope: popping '" << name << "', not bound";
        it->second.pop_back();
        if (it->second.empty()) {
            bindings.erase(it);
        }
    }

    /** The value of the innermost binding of `name`, or nullptr when it is not bound. */
    const T *find(const std::string &name) const {
        auto it = bindings.find(name);
        return it == bindings.end() ? nullptr : &it->second.back();
    }

    bool contains(const std::string &name) const { return bindings.count(name) > 0; }
    void clear() { bindings.clear(); }

private:
    std::unordered_map<std::string, std::vector<T>> bindings;
};

/** Names in scope, with how many bindings of each are open. */
template <>
class Scope<void> {
public:
    void push(const std::string &name) { counts[name]++; }

    void pop(const std::string &name) {
        auto it = counts.find(name);
        internal_assert(it != counts.end()) << "Scope: popping '" << name << "', not bound";
        if (--it->second == 0) {
            counts.erase(it);
        }
    }

    bool contains(const std::string &name) const { return counts.count(name) > 0; }
    void clear() { counts.clear(); }

private:
    std::unordered_map<std::string, int> counts;
};

}  // namespace tally

#endif  // TALLY_IR_SCOPE_H
