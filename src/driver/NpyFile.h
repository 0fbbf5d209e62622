/** \file
 * numpy's .npy files (format 1.0 to 3.0, C order, little-endian), as tally-run reads and
 * writes its buffers and the benchmarks read the conformance corpus's inputs.
 */
#ifndef TALLY_DRIVER_NPYFILE_H
#define TALLY_DRIVER_NPYFILE_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tally/Type.h"

namespace tally {
namespace npy {

/** numpy's type string for the element type `t`: `|b1`, `|u1`, `<i2`, `<f4`, ... */
std::string descr(const Type &t);

/** Reads the .npy file `path`, whose elements must be of type `t`, into `data`; returns its
 * shape (numpy order: the last axis varies fastest). A file that is not a C-order .npy of that
 * type, whose header is not the dict numpy writes, or whose data is shorter or longer than its
 * shape says, is a CompileError naming the file. */
std::vector<int> read(const std::string &path, const Type &t, std::vector<uint8_t> *data);

/** read() on the contents of a file, `bytes`, named `name` in errors. Nothing is allocated
 * beyond what `bytes` holds, whatever the header claims. */
std::vector<int> parse(const std::string &bytes, const std::string &name, const Type &t,
                       std::vector<uint8_t> *data);

/** The .npy file write() writes, as bytes. */
std::string encode(const Type &t, const std::vector<int> &shape, const void *data, size_t bytes);

/** Writes `bytes` bytes at `data` as a C-order .npy array of type `t` and the given shape
 * (numpy order). A file that cannot be written is a CompileError naming it. */
void write(const std::string &path, const Type &t, const std::vector<int> &shape, const void *data,
           size_t bytes);

}  // namespace npy
}  // namespace tally

#endif  // TALLY_DRIVER_NPYFILE_H
