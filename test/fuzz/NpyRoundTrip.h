/** \file
 * The property the .npy fuzzer checks (fuzz_npy.cpp), shared with the unit test that replays
 * test/fuzz/regressions/npy/ (test/unit/FuzzRegressionTest.cpp).
 *
 * The first input byte picks the element type the pipeline expects; the rest is the file. For
 * any bytes, npy::parse returns a shape whose element count times the element size is the data
 * it returns, or throws a CompileError naming the file; it allocates no more than the file
 * holds, whatever the header claims (the fuzzer runs with -malloc_limit_mb). What it reads,
 * written back by npy::encode, reads back to the same shape and data.
 */
#ifndef TALLY_TEST_FUZZ_NPYROUNDTRIP_H
#define TALLY_TEST_FUZZ_NPYROUNDTRIP_H

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "driver/NpyFile.h"
#include "tally/Error.h"

namespace tally_fuzz {

/** Checks the property for `data`; returns "" when it holds, else what went wrong. */
inline std::string check_npy_round_trip(const uint8_t *data, size_t size) {
    if (size == 0) {
        return "";
    }
    const tally::Type types[] = {
        tally::Bool(),  tally::UInt(8),   tally::Int(8),    tally::UInt(16),
        tally::Int(16), tally::UInt(32),  tally::Int(32),   tally::UInt(64),
        tally::Int(64), tally::Float(16), tally::Float(32), tally::Float(64),
    };
    const tally::Type t = types[data[0] % (sizeof(types) / sizeof(types[0]))];
    const std::string file(reinterpret_cast<const char *>(data) + 1, size - 1);
    std::vector<uint8_t> values;
    std::vector<int> shape;
    try {
        shape = tally::npy::parse(file, "in.npy", t, &values);
    } catch (const tally::CompileError &e) {
        if (std::string(e.what()).rfind("in.npy: error: ", 0) != 0) {
            return std::string("an error that does not name the file: ") + e.what();
        }
        return "";
    } catch (const std::exception &e) {
        return std::string("unexpected exception: ") + e.what();
    }
    uint64_t count = 1;
    for (int e : shape) {
        if (e < 0) {
            return "a negative extent in the shape read";
        }
        count *= uint64_t(e);
    }
    if (count * uint64_t(t.bytes()) != values.size()) {
        return "the shape read does not match the data read";
    }
    try {
        std::vector<uint8_t> again;
        const std::vector<int> shape2 = tally::npy::parse(
            tally::npy::encode(t, shape, values.data(), values.size()), "again.npy", t, &again);
        if (shape2 != shape || again != values) {
            return "encode(parse(file)) reads back different";
        }
    } catch (const std::exception &e) {
        return std::string("the encoded file does not read back: ") + e.what();
    }
    return "";
}

}  // namespace tally_fuzz

#endif  // TALLY_TEST_FUZZ_NPYROUNDTRIP_H
