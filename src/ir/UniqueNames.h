/** \file
 * UniqueNames: fresh names for what a pass generates, unique against the names already in use.
 *
 * `make(base)` gives `base` itself when it is free, else the first free one of `base<sep>1`,
 * `base<sep>2`, ...; the name it gives is taken from then on. With separator "$" this is
 * Halide's unique_name (launch and copy results: `halide_copy_to_host_result$1`); with "_" it
 * names kernels. An object belongs to one pass invocation (no global counter), so the same input
 * always gets the same names.
 *
 * Only names that start with the object's prefix can collide with one it makes (every base it
 * is given must start with it), so it keeps only those: a function of a million names that
 * generates `halide_...` results keeps the few that start `halide_`.
 *
 * Cost: each base remembers where its last search stopped (names are only ever added), so n
 * names made from one base cost n lookups, not n^2/2.
 *
 * Users: offload-gpu-loops (launch results, kernel names), inject-host-dev-copies (results).
 */
#ifndef TALLY_IR_UNIQUENAMES_H
#define TALLY_IR_UNIQUENAMES_H

#include <string>
#include <unordered_map>
#include <unordered_set>

#include "tally/IR.h"

namespace tally {

class UniqueNames {
public:
    explicit UniqueNames(std::string separator, std::string prefix = "");

    /** Marks `name` as in use (names without the prefix cannot collide: they are not kept). */
    void reserve(const std::string &name);
    /** Reserves every name `s` binds (Let, LetStmt, For, Allocate) or uses (Variable). */
    void reserve_names_in(const Stmt &s);
    bool is_taken(const std::string &name) const { return taken.count(name) > 0; }

    /** A name not in use, made from `base` (which must start with the prefix); now in use. */
    std::string make(const std::string &base);

private:
    std::string separator, prefix;
    std::unordered_set<std::string> taken;
    std::unordered_map<std::string, int> next_suffix;  // per base: every lower suffix is taken
};

}  // namespace tally

#endif  // TALLY_IR_UNIQUENAMES_H
