// Halide 14's runtime services that its lowering calls and Tally's runtime serves: the text
// primitives of `stringify` (to_string.c), the memoization cache (memoize.c) and tracing
// (halide_trace.c). The expected texts are what Halide 14's runtime prints for the same values
// (the conformance pipelines trace_print and memoize_p compare whole pipelines' text with Halide's
// own).
#include "TestUtil.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

std::string dtoa(double v, int scientific) {
    char text[512];
    char *end = halide_double_to_string(text, text + sizeof(text), v, scientific);
    EXPECT_EQ(end, text + std::strlen(text));
    return text;
}

TEST(HalideToString, FixedNotationAsHalidePrintsFloat32) {
    EXPECT_EQ(dtoa(1.5, 0), "1.500000");
    EXPECT_EQ(dtoa(-0.25, 0), "-0.250000");
    EXPECT_EQ(dtoa(0.0, 0), "0.000000");
    EXPECT_EQ(dtoa(-0.0, 0), "-0.000000");
    EXPECT_EQ(dtoa(double(1.834044f), 0), "1.834044");
    // Half way at the 6th decimal: to even, as glibc's %f (0.0000005 is not exact in binary, so
    // take a float32 that is: 2^-21 = 0.000000476837158203125 rounds down, 3 * 2^-21 up).
    EXPECT_EQ(dtoa(std::ldexp(1.0, -21), 0), "0.000000");
    EXPECT_EQ(dtoa(3 * std::ldexp(1.0, -21), 0), "0.000001");
    // A fraction that rounds up into the integer part.
    EXPECT_EQ(dtoa(0.9999999, 0), "1.000000");
    // Every integer digit, no exponent.
    EXPECT_EQ(dtoa(1e20, 0), "100000000000000000000.000000");
    EXPECT_EQ(dtoa(std::ldexp(1.0, 70), 0), "1180591620717411303424.000000");
    // Subnormals print as zero in fixed notation.
    EXPECT_EQ(dtoa(std::numeric_limits<double>::denorm_min(), 0), "0.000000");
    EXPECT_EQ(dtoa(std::numeric_limits<double>::quiet_NaN(), 0), "nan");
    EXPECT_EQ(dtoa(-std::numeric_limits<double>::infinity(), 0), "-inf");
    // Each value against glibc's %f, which Halide's fixed form equals for float32 values.
    for (float f : {0.1f, 3.14159f, 1e-3f, 123456.789f, 65504.0f, 2.5e-6f, 7.0f / 3.0f}) {
        char want[64];
        std::snprintf(want, sizeof(want), "%f", double(f));
        EXPECT_EQ(dtoa(f, 0), want) << f;
    }
}

TEST(HalideToString, ScientificNotationAsHalidePrintsFloat64) {
    EXPECT_EQ(dtoa(1.5, 1), "1.500000e+00");
    EXPECT_EQ(dtoa(0.25, 1), "2.500000e-01");
    EXPECT_EQ(dtoa(0.0, 1), "0.000000e+00");
    EXPECT_EQ(dtoa(-0.0, 1), "-0.000000e+00");
    EXPECT_EQ(dtoa(-12345.678, 1), "-1.234568e+04");
    EXPECT_EQ(dtoa(1e100, 1), "1.000000e+100");
    EXPECT_EQ(dtoa(std::numeric_limits<double>::infinity(), 1), "inf");
}

TEST(HalideToString, IntegersPointersAndCutting) {
    char text[64];
    halide_int64_to_string(text, text + sizeof(text), INT64_MIN, 1);
    EXPECT_STREQ(text, "-9223372036854775808");
    halide_uint64_to_string(text, text + sizeof(text), UINT64_MAX, 1);
    EXPECT_STREQ(text, "18446744073709551615");
    halide_int64_to_string(text, text + sizeof(text), 7, 3);
    EXPECT_STREQ(text, "007");
    halide_pointer_to_string(text, text + sizeof(text), nullptr);
    EXPECT_STREQ(text, "0x0");
    halide_pointer_to_string(text, text + sizeof(text), reinterpret_cast<void *>(0xabc1230));
    EXPECT_STREQ(text, "0xabc1230");
    halide_string_to_string(text, text + sizeof(text), nullptr);
    EXPECT_STREQ(text, "<nullptr>");
    // Appending chains, and a text that does not fit is cut, NUL-terminated.
    char small[8];
    char *p = halide_string_to_string(small, small + sizeof(small), "abc");
    p = halide_double_to_string(p, small + sizeof(small), 1.5, 0);
    EXPECT_STREQ(small, "abc1.50");
    EXPECT_EQ(p, small + 7);
    EXPECT_EQ(halide_string_to_string(small + 8, small + 8, "x"), small + 8);
}

// ---- the memoization cache -------------------------------------------------------------------

struct MemoRealization {
    halide_dimension_t dims[2] = {{0, 16, 1, 0}, {0, 8, 16, 0}};
    halide_dimension_t bound_dims[2] = {{0, 16, 0, 0}, {0, 8, 0, 0}};
    halide_buffer_t buf{}, bounds{};
    halide_buffer_t *bufs[1] = {&buf};
    MemoRealization() {
        buf.type = {halide_type_float, 32, 1};
        buf.dimensions = 2;
        buf.dim = dims;
        bounds.dimensions = 2;
        bounds.dim = bound_dims;
    }
};

class MemoizationCache : public ::testing::Test {
protected:
    void SetUp() override { halide_memoization_cache_cleanup(); }
    void TearDown() override {
        halide_memoization_cache_set_size(0);
        halide_memoization_cache_cleanup();
    }
};

TEST_F(MemoizationCache, AMissAllocatesAStoreKeepsAndAHitReturnsTheSameData) {
    const uint8_t key[16] = {1, 2, 3};
    MemoRealization r1;
    ASSERT_EQ(halide_memoization_cache_lookup(nullptr, key, 16, &r1.bounds, 1, r1.bufs), 1);
    ASSERT_NE(r1.buf.host, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(r1.buf.host) % TALLY_MALLOC_ALIGNMENT, 0u);
    float *data = reinterpret_cast<float *>(r1.buf.host);
    for (int i = 0; i < 16 * 8; i++) {
        data[i] = float(i) * 0.5f;
    }
    EXPECT_EQ(halide_memoization_cache_store(nullptr, key, 16, &r1.bounds, 1, r1.bufs, false, 0),
              0);
    EXPECT_EQ(tally_memoization_cache_bytes(), 16u * 8u * 4u);
    halide_memoization_cache_release(nullptr, r1.buf.host);

    MemoRealization r2;
    ASSERT_EQ(halide_memoization_cache_lookup(nullptr, key, 16, &r2.bounds, 1, r2.bufs), 0);
    EXPECT_EQ(r2.buf.host, r1.buf.host);
    EXPECT_EQ(reinterpret_cast<float *>(r2.buf.host)[100], 50.0f);
    halide_memoization_cache_release(nullptr, r2.buf.host);
}

TEST_F(MemoizationCache, TheKeyTheBoundsAndTheShapeEachDecideAHit) {
    const uint8_t key[16] = {7};
    MemoRealization r;
    ASSERT_EQ(halide_memoization_cache_lookup(nullptr, key, 16, &r.bounds, 1, r.bufs), 1);
    halide_memoization_cache_store(nullptr, key, 16, &r.bounds, 1, r.bufs, false, 0);
    halide_memoization_cache_release(nullptr, r.buf.host);

    const uint8_t other_key[16] = {8};
    MemoRealization a;
    EXPECT_EQ(halide_memoization_cache_lookup(nullptr, other_key, 16, &a.bounds, 1, a.bufs), 1);
    halide_memoization_cache_release(nullptr, a.buf.host);  // never stored: freed

    MemoRealization b;
    b.bound_dims[1].min = 1;  // another region of the Func
    EXPECT_EQ(halide_memoization_cache_lookup(nullptr, key, 16, &b.bounds, 1, b.bufs), 1);
    halide_memoization_cache_release(nullptr, b.buf.host);

    MemoRealization c;
    c.buf.type = {halide_type_int, 32, 1};  // another element type
    EXPECT_EQ(halide_memoization_cache_lookup(nullptr, key, 16, &c.bounds, 1, c.bufs), 1);
    halide_memoization_cache_release(nullptr, c.buf.host);

    MemoRealization d;
    EXPECT_EQ(halide_memoization_cache_lookup(nullptr, key, 12, &d.bounds, 1, d.bufs), 1);
    halide_memoization_cache_release(nullptr, d.buf.host);
    EXPECT_EQ(tally_memoization_cache_bytes(), 16u * 8u * 4u);  // only the one stored
}

TEST_F(MemoizationCache, PastItsSizeTheLeastRecentlyUsedEntryNotInUseGoes) {
    halide_memoization_cache_set_size(2 * 16 * 8 * 4);  // room for two entries
    const uint8_t k1[8] = {1}, k2[8] = {2}, k3[8] = {3};
    MemoRealization r1, r2, r3;
    ASSERT_EQ(halide_memoization_cache_lookup(nullptr, k1, 8, &r1.bounds, 1, r1.bufs), 1);
    halide_memoization_cache_store(nullptr, k1, 8, &r1.bounds, 1, r1.bufs, false, 0);
    halide_memoization_cache_release(nullptr, r1.buf.host);
    ASSERT_EQ(halide_memoization_cache_lookup(nullptr, k2, 8, &r2.bounds, 1, r2.bufs), 1);
    halide_memoization_cache_store(nullptr, k2, 8, &r2.bounds, 1, r2.bufs, false, 0);
    // k2 is still in use (not released) when k3 needs room: k1, the least recent, goes.
    ASSERT_EQ(halide_memoization_cache_lookup(nullptr, k3, 8, &r3.bounds, 1, r3.bufs), 1);
    halide_memoization_cache_store(nullptr, k3, 8, &r3.bounds, 1, r3.bufs, false, 0);
    halide_memoization_cache_release(nullptr, r3.buf.host);
    EXPECT_EQ(tally_memoization_cache_bytes(), 2u * 16u * 8u * 4u);

    MemoRealization again1, again2;
    EXPECT_EQ(halide_memoization_cache_lookup(nullptr, k1, 8, &again1.bounds, 1, again1.bufs), 1);
    halide_memoization_cache_release(nullptr, again1.buf.host);
    EXPECT_EQ(halide_memoization_cache_lookup(nullptr, k2, 8, &again2.bounds, 1, again2.bufs), 0);
    halide_memoization_cache_release(nullptr, again2.buf.host);
    halide_memoization_cache_release(nullptr, r2.buf.host);
}

TEST_F(MemoizationCache, EvictionKeysAndATupleOfBuffers) {
    const uint8_t key[8] = {9};
    MemoRealization r;
    halide_dimension_t dims2[2] = {{0, 16, 1, 0}, {0, 8, 16, 0}};
    halide_buffer_t second{};
    second.type = {halide_type_uint, 8, 1};
    second.dimensions = 2;
    second.dim = dims2;
    halide_buffer_t *bufs[2] = {&r.buf, &second};
    ASSERT_EQ(halide_memoization_cache_lookup(nullptr, key, 8, &r.bounds, 2, bufs), 1);
    ASSERT_NE(second.host, nullptr);
    second.host[5] = 42;
    halide_memoization_cache_store(nullptr, key, 8, &r.bounds, 2, bufs, true, 77);
    halide_memoization_cache_release(nullptr, r.buf.host);
    halide_memoization_cache_release(nullptr, second.host);
    EXPECT_EQ(tally_memoization_cache_bytes(), 16u * 8u * 4u + 16u * 8u);

    MemoRealization h;
    halide_buffer_t second_h{};
    second_h.type = {halide_type_uint, 8, 1};
    second_h.dimensions = 2;
    second_h.dim = dims2;
    halide_buffer_t *hbufs[2] = {&h.buf, &second_h};
    ASSERT_EQ(halide_memoization_cache_lookup(nullptr, key, 8, &h.bounds, 2, hbufs), 0);
    EXPECT_EQ(second_h.host[5], 42);
    halide_memoization_cache_release(nullptr, h.buf.host);
    halide_memoization_cache_release(nullptr, second_h.host);

    halide_memoization_cache_evict(nullptr, 76);  // another key: nothing goes
    EXPECT_GT(tally_memoization_cache_bytes(), 0u);
    halide_memoization_cache_evict(nullptr, 77);
    EXPECT_EQ(tally_memoization_cache_bytes(), 0u);
}

// ---- debug_to_file ---------------------------------------------------------------------------

std::vector<uint8_t> read_file(const std::string &path) {
    std::vector<uint8_t> bytes;
    FILE *f = std::fopen(path.c_str(), "rb");
    if (!f) {
        return bytes;
    }
    int c;
    while ((c = std::fgetc(f)) != EOF) {
        bytes.push_back(uint8_t(c));
    }
    std::fclose(f);
    return bytes;
}

TEST(HalideDebugToFile, TheRawFormIsTheExtentsTheTypeCodeAndTheDataInCoordinateOrder) {
    // A 3x2 int16 buffer with its rows 4 apart and mins (5, -1): the data come out dense.
    int16_t storage[8] = {1, 2, 3, 99, 4, 5, 6, 99};
    halide_dimension_t dims[2] = {{5, 3, 1, 0}, {-1, 2, 4, 0}};
    halide_buffer_t b{};
    b.host = reinterpret_cast<uint8_t *>(storage);
    b.type = {halide_type_int, 16, 1};
    b.dimensions = 2;
    b.dim = dims;
    const std::string path = "/tmp/tally_debug_to_file_" + std::to_string(getpid()) + ".tmp";
    ASSERT_EQ(halide_debug_to_file(nullptr, path.c_str(), 5, &b), 0);
    std::vector<uint8_t> bytes = read_file(path);
    std::remove(path.c_str());
    ASSERT_EQ(bytes.size(), 5u * 4u + 6u * 2u);
    int32_t header[5];
    std::memcpy(header, bytes.data(), sizeof(header));
    EXPECT_EQ(header[0], 3);
    EXPECT_EQ(header[1], 2);
    EXPECT_EQ(header[2], 1);
    EXPECT_EQ(header[3], 1);
    EXPECT_EQ(header[4], 5);
    int16_t data[6];
    std::memcpy(data, bytes.data() + 20, sizeof(data));
    EXPECT_EQ(std::vector<int16_t>(data, data + 6), (std::vector<int16_t>{1, 2, 3, 4, 5, 6}));
}

TEST(HalideDebugToFile, FailuresAreReportedWithHalidesCodes) {
    tally_test::MessageCapture capture;
    halide_dimension_t dims[5] = {
        {0, 1, 1, 0}, {0, 1, 1, 0}, {0, 1, 1, 0}, {0, 1, 1, 0}, {0, 1, 1, 0}};
    uint8_t byte = 0;
    halide_buffer_t b{};
    b.host = &byte;
    b.type = {halide_type_uint, 8, 1};
    b.dimensions = 5;
    b.dim = dims;
    EXPECT_EQ(halide_debug_to_file(nullptr, "/tmp/x.tmp", 2, &b), -1);
    b.dimensions = 2;
    EXPECT_EQ(halide_debug_to_file(nullptr, "/nonexistent-dir/x.tmp", 2, &b), -2);
    ASSERT_EQ(capture.errors().size(), 2u);
    EXPECT_NE(capture.errors()[0].find("5-dimensional"), std::string::npos);
    EXPECT_NE(capture.errors()[1].find("cannot open '/nonexistent-dir/x.tmp'"), std::string::npos);
    EXPECT_EQ(halide_error_debug_to_file_failed(nullptr, "f", "x.tmp", -2),
              TALLY_ERROR_DEBUG_TO_FILE_FAILED);
    EXPECT_EQ(capture.errors().back(), "Failed to dump function f to file x.tmp with error -2");
}

TEST(HalideDebugToFile, Halide21sFormTakesTheTypeFromTheBufferAndWritesNpy) {
    // The same 3x2 int16 buffer through Halide 21's debug_to_file(filename, buffer).
    int16_t storage[8] = {1, 2, 3, 99, 4, 5, 6, 99};
    halide_dimension_t dims[2] = {{5, 3, 1, 0}, {-1, 2, 4, 0}};
    halide_buffer_t b{};
    b.host = reinterpret_cast<uint8_t *>(storage);
    b.type = {halide_type_int, 16, 1};
    b.dimensions = 2;
    b.dim = dims;
    const std::string base = "/tmp/tally_debug_to_file21_" + std::to_string(getpid());
    // .tmp: the raw form, with the type code Halide 14 was given (int16: 5).
    ASSERT_EQ(tally_halide21_debug_to_file(nullptr, (base + ".tmp").c_str(), &b), 0);
    std::vector<uint8_t> raw = read_file(base + ".tmp");
    std::remove((base + ".tmp").c_str());
    ASSERT_EQ(raw.size(), 5u * 4u + 6u * 2u);
    int32_t header[5];
    std::memcpy(header, raw.data(), sizeof(header));
    EXPECT_EQ(header[4], 5);
    // .npy: magic, version 1.0, the header's length, Halide 21's dictionary padded with spaces
    // after its newline so that the data start at a multiple of 64, then the data.
    ASSERT_EQ(tally_halide21_debug_to_file(nullptr, (base + ".npy").c_str(), &b), 0);
    std::vector<uint8_t> npy = read_file(base + ".npy");
    std::remove((base + ".npy").c_str());
    ASSERT_GE(npy.size(), 10u);
    EXPECT_EQ(std::string(npy.begin(), npy.begin() + 8), std::string("\x93NUMPY\x01\x00", 8));
    const size_t header_len = npy[8] | (size_t(npy[9]) << 8);
    EXPECT_EQ((10 + header_len) % 64, 0u);
    ASSERT_EQ(npy.size(), 10 + header_len + 12);
    const std::string dict(npy.begin() + 10, npy.begin() + 10 + header_len);
    const std::string expect = "{'descr': '<i2', 'fortran_order': False, 'shape': (3,2)}\n";
    EXPECT_EQ(dict.substr(0, expect.size()), expect);
    EXPECT_EQ(dict.find_first_not_of(' ', expect.size()), std::string::npos);
    int16_t data[6];
    std::memcpy(data, npy.data() + 10 + header_len, sizeof(data));
    EXPECT_EQ(std::vector<int16_t>(data, data + 6), (std::vector<int16_t>{1, 2, 3, 4, 5, 6}));
    // One dimension: a one-element tuple; one byte: no byte order.
    uint8_t bytes[4] = {7, 8, 9, 10};
    halide_dimension_t dim1 = {0, 4, 1, 0};
    halide_buffer_t u{};
    u.host = bytes;
    u.type = {halide_type_uint, 8, 1};
    u.dimensions = 1;
    u.dim = &dim1;
    ASSERT_EQ(tally_halide21_debug_to_file(nullptr, (base + ".npy").c_str(), &u), 0);
    npy = read_file(base + ".npy");
    std::remove((base + ".npy").c_str());
    ASSERT_GE(npy.size(), 10u);
    const std::string dict1(npy.begin() + 10, npy.end() - 4);
    EXPECT_EQ(dict1.rfind("{'descr': '|u1', 'fortran_order': False, 'shape': (4,)}\n", 0), 0u)
        << dict1;
}

TEST(HalideDebugToFile, Halide21sFormFailsWithHalide21sCodes) {
    tally_test::MessageCapture capture;
    uint16_t half = 0x3c00;
    halide_dimension_t dim = {0, 1, 1, 0};
    halide_buffer_t b{};
    b.host = reinterpret_cast<uint8_t *>(&half);
    b.type = {halide_type_float, 16, 1};
    b.dimensions = 1;
    b.dim = &dim;
    // float16 goes to .npy only.
    EXPECT_EQ(tally_halide21_debug_to_file(nullptr, "/tmp/x.tmp", &b), -13);
    b.dimensions = 5;
    EXPECT_EQ(tally_halide21_debug_to_file(nullptr, "/tmp/x.npy", &b), -43);
    ASSERT_EQ(capture.errors().size(), 2u);
    EXPECT_NE(capture.errors()[0].find("16-bit floats can only be written to a .npy file"),
              std::string::npos)
        << capture.errors()[0];
    EXPECT_NE(capture.errors()[1].find("5-dimensional"), std::string::npos);
}

// ---- tracing ---------------------------------------------------------------------------------

TEST(HalideTrace, TextLinesAreHalides) {
    tally_test::MessageCapture capture;
    int32_t coords[2] = {3, 4};
    float value = 1.5f;
    int32_t pipe = halide_trace_helper(nullptr, "h", nullptr, nullptr, 3, 0, 0,
                                       halide_trace_begin_pipeline, 0, 0, 0, "");
    int32_t id = halide_trace_helper(nullptr, "g", &value, coords, halide_type_float, 32, 1,
                                     halide_trace_store, pipe, 0, 2, "");
    EXPECT_EQ(id, pipe + 1);  // ids count up from one process-wide counter
    int32_t vcoords[8] = {0, 1, 2, 3, 5, 5, 5, 5};
    int16_t lanes[4] = {-1, 2, -3, 4};
    halide_trace_helper(nullptr, "a", lanes, vcoords, halide_type_int, 16, 4, halide_trace_load,
                        pipe, 1, 8, "");
    double d = 0.25;
    halide_trace_helper(nullptr, "f", &d, coords, halide_type_float, 64, 1, halide_trace_store,
                        pipe, 0, 2, "");
    uint16_t half = 0x3c00;  // 1.0
    halide_trace_helper(nullptr, "f16", &half, coords, halide_type_float, 16, 1, halide_trace_store,
                        pipe, 0, 2, "");
    int32_t box[4] = {0, 10, -2, 5};
    halide_trace_helper(nullptr, "g", nullptr, box, 3, 0, 0, halide_trace_begin_realization, pipe,
                        0, 4, "");
    halide_trace_helper(nullptr, "g", nullptr, nullptr, 3, 0, 0, halide_trace_tag, pipe, 0, 0,
                        "my tag");
    EXPECT_EQ(capture.printed(), "Begin pipeline h.0()\n"
                                 "Store g.0(3, 4) = 1.500000\n"
                                 "Load a.1(<0, 1, 2, 3>, <5, 5, 5, 5>) = <-1, 2, -3, 4>\n"
                                 "Store f.0(3, 4) = 2.500000e-01\n"
                                 "Store f16.0(3, 4) = 1.000000e+00\n"
                                 "Begin realization g.0(0, 10, -2, 5)\n"
                                 "Tag g.0() tag = \"my tag\"\n");
}

int32_t seen_event = -1, seen_dims = -1;
std::string seen_func;

int32_t custom_trace(void *, const halide_trace_event_t *e) {
    seen_event = e->event;
    seen_dims = e->dimensions;
    seen_func = e->func;
    return 1234;
}

TEST(HalideTrace, ACustomHandlerGetsTheEventAndGivesTheId) {
    halide_trace_t previous = halide_set_custom_trace(custom_trace);
    int32_t coords[3] = {1, 2, 3};
    uint8_t v = 7;
    EXPECT_EQ(halide_trace_helper(nullptr, "q", &v, coords, halide_type_uint, 8, 1,
                                  halide_trace_store, 9, 0, 3, ""),
              1234);
    EXPECT_EQ(seen_event, halide_trace_store);
    EXPECT_EQ(seen_dims, 3);
    EXPECT_EQ(seen_func, "q");
    EXPECT_EQ(halide_set_custom_trace(previous), custom_trace);
}

TEST(HalideTrace, BinaryPacketsGoToTheTraceFile) {
    char path[] = "/tmp/tally_trace_XXXXXX";
    int fd = mkstemp(path);
    ASSERT_GT(fd, 0);
    halide_set_trace_file(fd);
    EXPECT_EQ(halide_get_trace_file(nullptr), fd);
    int32_t coords[2] = {3, 4};
    int32_t value = -5;
    int32_t id = halide_trace_helper(nullptr, "fn", &value, coords, halide_type_int, 32, 1,
                                     halide_trace_store, 17, 2, 2, "t");
    halide_set_trace_file(0);
    std::vector<uint8_t> bytes(256);
    ssize_t n = pread(fd, bytes.data(), bytes.size(), 0);
    close(fd);
    unlink(path);
    // 28-byte header, 2 coordinates, 4 value bytes, "fn\0", "t\0": 46, padded to 48.
    ASSERT_EQ(n, 48);
    uint32_t header[7];
    std::memcpy(header, bytes.data(), sizeof(header));
    EXPECT_EQ(header[0], 48u);
    EXPECT_EQ(int32_t(header[1]), id);
    EXPECT_EQ(header[2], uint32_t(halide_type_int) | 32u << 8 | 1u << 16);
    EXPECT_EQ(header[3], uint32_t(halide_trace_store));
    EXPECT_EQ(header[4], 17u);
    EXPECT_EQ(header[5], 2u);
    EXPECT_EQ(header[6], 2u);
    int32_t body[3];
    std::memcpy(body, bytes.data() + 28, sizeof(body));
    EXPECT_EQ(body[0], 3);
    EXPECT_EQ(body[1], 4);
    EXPECT_EQ(body[2], -5);
    EXPECT_STREQ(reinterpret_cast<const char *>(bytes.data() + 40), "fn");
    EXPECT_STREQ(reinterpret_cast<const char *>(bytes.data() + 43), "t");
}

TEST(HalideTrace, ABadEventIsAnErrorNotACrash) {
    tally_test::MessageCapture capture;
    EXPECT_LT(halide_trace_helper(nullptr, "x", nullptr, nullptr, 0, 128, 1, halide_trace_store, 0,
                                  0, 0, ""),
              0);
    EXPECT_LT(halide_trace_helper(nullptr, "x", nullptr, nullptr, 0, 8, 1, 99, 0, 0, 0, ""), 0);
    ASSERT_EQ(capture.errors().size(), 2u);
    EXPECT_NE(capture.errors()[0].find("halide_trace: bad event"), std::string::npos);
}

}  // namespace
