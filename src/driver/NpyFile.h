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

#include "tally/Module.h"
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

/** read() of an array of any element type numpy and Halide share (bool, int8 to int64, uint8
 * to uint64, float16, float32, float64), which it stores to `t`. */
std::vector<int> read_any(const std::string &path, Type *t, std::vector<uint8_t> *data);

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

/** The tools' `--buffer-constant NAME=FILE.npy[@X,Y,...]` (tally-run, tallyc): gives the
 * module's opaque buffer constant NAME (`buffer NAME = {...}`) the array in FILE as its
 * contents, its element type the file's, its extents the file's shape (numpy order reversed:
 * dimension 0 is the last axis), its mins those after `@` (0 without). A CompileError names the
 * option on bad input. */
void define_buffer_constant(Module &m, const std::string &spec);

/** define_buffer_constant() for each of `specs`; on a bad one prints `TOOL: error: ...` and
 * returns false (the tools then exit with status 2, as for any bad option value). */
bool define_buffer_constants(Module &m, const std::vector<std::string> &specs, const char *tool);

}  // namespace npy
}  // namespace tally

#endif  // TALLY_DRIVER_NPYFILE_H
