// Buffers, dirty bits, halide_malloc, and the device entry points over the host interface.
#include "TestUtil.h"

#include <cstring>
#include <vector>

namespace {

struct TestBuffer {
    halide_dimension_t dims[2];
    halide_buffer_t buf;
    std::vector<float> storage;
    TestBuffer(int w, int h) : storage(size_t(w) * h) {
        dims[0] = {0, w, 1, 0};
        dims[1] = {0, h, w, 0};
        std::memset(&buf, 0, sizeof(buf));
        buf.host = reinterpret_cast<uint8_t *>(storage.data());
        buf.type = {halide_type_float, 32, 1};
        buf.dimensions = 2;
        buf.dim = dims;
    }
};

TEST(Buffer, LayoutMatchesHalide) {
    EXPECT_EQ(sizeof(halide_buffer_t), 56u);
    EXPECT_EQ(offsetof(halide_buffer_t, device), 0u);
    EXPECT_EQ(offsetof(halide_buffer_t, device_interface), 8u);
    EXPECT_EQ(offsetof(halide_buffer_t, host), 16u);
    EXPECT_EQ(offsetof(halide_buffer_t, flags), 24u);
    EXPECT_EQ(offsetof(halide_buffer_t, type), 32u);
    EXPECT_EQ(offsetof(halide_buffer_t, dimensions), 36u);
    EXPECT_EQ(offsetof(halide_buffer_t, dim), 40u);
    EXPECT_EQ(offsetof(halide_buffer_t, padding), 48u);
    EXPECT_EQ(sizeof(halide_dimension_t), 16u);
    EXPECT_EQ(sizeof(halide_type_t), 4u);
    // 2: tally_pipeline_stats records the clock; 3: tally_profiler_start takes the slot parents
    // and tally_slot_stats carries them.
    EXPECT_EQ(TALLY_RUNTIME_ABI_VERSION, 3);
}

TEST(Buffer, ToStringPrintsWhatHalidePrints) {
    TestBuffer b(123, 200);
    b.buf.host = reinterpret_cast<uint8_t *>(uintptr_t(0x1234a0));
    b.buf.flags = 1;
    char text[128];
    char *end = halide_buffer_to_string(text, text + sizeof(text), &b.buf);
    EXPECT_STREQ(text, "buffer(0, 0x0, 0x1234a0, 1, float32, {0, 123, 1}, {0, 200, 123})");
    EXPECT_EQ(end, text + std::strlen(text));

    b.buf.type = {halide_type_uint, 8, 4};
    b.buf.dimensions = 1;
    halide_buffer_to_string(text, text + sizeof(text), &b.buf);
    EXPECT_STREQ(text, "buffer(0, 0x0, 0x1234a0, 1, uint8x4, {0, 123, 1})");

    halide_buffer_to_string(text, text + sizeof(text), nullptr);
    EXPECT_STREQ(text, "nullptr");

    // Truncated to fit, NUL-terminated; nothing written into an empty range.
    char small[10];
    std::memset(small, 'z', sizeof(small));
    end = halide_buffer_to_string(small, small + 8, &b.buf);
    EXPECT_STREQ(small, "buffer(");
    EXPECT_EQ(end, small + 7);
    EXPECT_EQ(small[8], 'z');
    EXPECT_EQ(halide_buffer_to_string(small, small, &b.buf), small);
    EXPECT_EQ(small[0], 'b');
}

TEST(Buffer, SizeInBytes) {
    TestBuffer b(16, 8);
    EXPECT_EQ(tally_buffer_size_in_bytes(&b.buf), 16u * 8u * 4u);
    EXPECT_EQ(tally_buffer_begin(&b.buf), b.buf.host);
    // A crop: extent 4x2 of a 16-wide buffer spans 16 + 4 elements.
    b.dims[0].extent = 4;
    b.dims[1].extent = 2;
    EXPECT_EQ(tally_buffer_size_in_bytes(&b.buf), (16u + 4u) * 4u);
    // Negative stride: host points at the last row; the span starts below it.
    b.dims[1].stride = -16;
    EXPECT_EQ(tally_buffer_size_in_bytes(&b.buf), (16u + 4u) * 4u);
    EXPECT_EQ(tally_buffer_begin(&b.buf), b.buf.host - 16 * 4);
    b.dims[1].extent = 0;
    EXPECT_EQ(tally_buffer_size_in_bytes(&b.buf), 0u);
    EXPECT_EQ(tally_buffer_size_in_bytes(nullptr), 0u);
    halide_type_t vec = {halide_type_uint, 8, 4};
    EXPECT_EQ(tally_type_bytes(vec), 4u);
}

TEST(Buffer, DirtyBits) {
    TestBuffer b(4, 4);
    EXPECT_FALSE(tally_buffer_get_host_dirty(&b.buf));
    tally_buffer_set_host_dirty(&b.buf, true);
    EXPECT_TRUE(tally_buffer_get_host_dirty(&b.buf));
    EXPECT_EQ(b.buf.flags, uint64_t(halide_buffer_flag_host_dirty));
    tally_buffer_set_device_dirty(&b.buf, true);
    EXPECT_EQ(b.buf.flags, 3u);
    tally_buffer_set_host_dirty(&b.buf, false);
    EXPECT_EQ(b.buf.flags, 2u);
    EXPECT_TRUE(_halide_buffer_get_device_dirty(&b.buf));
    _halide_buffer_set_device_dirty(&b.buf, false);
    EXPECT_EQ(b.buf.flags, 0u);
}

TEST(Buffer, HalideAccessors) {
    TestBuffer b(16, 8);
    b.dims[1].min = 3;
    EXPECT_EQ(_halide_buffer_get_dimensions(&b.buf), 2);
    EXPECT_EQ(_halide_buffer_get_min(&b.buf, 1), 3);
    EXPECT_EQ(_halide_buffer_get_max(&b.buf, 1), 10);
    EXPECT_EQ(_halide_buffer_get_extent(&b.buf, 0), 16);
    EXPECT_EQ(_halide_buffer_get_stride(&b.buf, 1), 16);
    EXPECT_EQ(_halide_buffer_get_type(&b.buf), 73730u);  // float32, as Halide packs it
    EXPECT_FALSE(_halide_buffer_is_bounds_query(&b.buf));
    halide_buffer_t q;
    halide_dimension_t shape[2];
    halide_dimension_t src[2] = {{1, 2, 1, 0}, {3, 4, 2, 0}};
    _halide_buffer_init(&q, shape, nullptr, 0, nullptr, halide_type_uint, 16, 2, src, 0);
    EXPECT_TRUE(_halide_buffer_is_bounds_query(&q));
    EXPECT_EQ(q.dim, shape);
    EXPECT_EQ(shape[1].extent, 4);
    EXPECT_EQ(q.type.bits, 16);
    EXPECT_EQ(q.type.lanes, 1);
}

TEST(Buffer, MallocIsAligned) {
    for (size_t size :
         {size_t(0), size_t(1), size_t(63), size_t(64), size_t(1000), size_t(1) << 20}) {
        void *p = halide_malloc(nullptr, size);
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % TALLY_MALLOC_ALIGNMENT, 0u);
        std::memset(p, 0xab, size);
        halide_free(nullptr, p);
    }
    halide_free(nullptr, nullptr);
}

TEST(Buffer, MallocFailureIsReported) {
    tally_test::MessageCapture capture;
    int uc = 0;
    EXPECT_EQ(halide_malloc(&uc, SIZE_MAX - 16), nullptr);
    auto errors = capture.errors();
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0].find("out of memory"), std::string::npos);
    EXPECT_EQ(capture.contexts()[0], &uc);
}

TEST(HostDevice, CopiesRoundTripAndRespectDirtyBits) {
    TestBuffer b(8, 4);
    const halide_device_interface_t *host = halide_host_device_interface();
    ASSERT_NE(host, nullptr);
    EXPECT_STREQ(host->name, "host");
    for (size_t i = 0; i < b.storage.size(); i++) {
        b.storage[i] = float(i);
    }
    // Not host dirty: the device gets allocated but nothing is copied.
    ASSERT_EQ(halide_copy_to_device(nullptr, &b.buf, host), 0);
    EXPECT_NE(b.buf.device, 0u);
    EXPECT_EQ(b.buf.device_interface, host);
    // Host dirty: copied, bit cleared.
    tally_buffer_set_host_dirty(&b.buf, true);
    ASSERT_EQ(halide_copy_to_device(nullptr, &b.buf, host), 0);
    EXPECT_FALSE(tally_buffer_get_host_dirty(&b.buf));
    float *dev = reinterpret_cast<float *>(uintptr_t(b.buf.device));
    EXPECT_EQ(dev[5], 5.0f);
    // "Kernel" writes the device copy.
    for (size_t i = 0; i < b.storage.size(); i++) {
        dev[i] = float(i) * 2;
    }
    tally_buffer_set_device_dirty(&b.buf, true);
    // Host changes are not seen, device is newer: copy_to_host overwrites.
    b.storage[3] = -1;
    ASSERT_EQ(halide_copy_to_host(nullptr, &b.buf), 0);
    EXPECT_FALSE(tally_buffer_get_device_dirty(&b.buf));
    EXPECT_EQ(b.storage[3], 6.0f);
    // Not device dirty: copy_to_host is a no-op.
    dev[3] = 100;
    ASSERT_EQ(halide_copy_to_host(nullptr, &b.buf), 0);
    EXPECT_EQ(b.storage[3], 6.0f);
    EXPECT_EQ(halide_device_sync(nullptr, &b.buf), 0);
    EXPECT_EQ(halide_device_sync_global(nullptr, host), 0);
    ASSERT_EQ(halide_device_free(nullptr, &b.buf), 0);
    EXPECT_EQ(b.buf.device, 0u);
    EXPECT_EQ(b.buf.device_interface, nullptr);
    EXPECT_EQ(halide_device_release(nullptr, host), 0);
}

TEST(HostDevice, BothDirtyIsAnError) {
    tally_test::MessageCapture capture;
    TestBuffer b(4, 4);
    const halide_device_interface_t *host = halide_host_device_interface();
    ASSERT_EQ(halide_device_malloc(nullptr, &b.buf, host), 0);
    b.buf.flags = halide_buffer_flag_host_dirty | halide_buffer_flag_device_dirty;
    EXPECT_EQ(halide_copy_to_host(nullptr, &b.buf), TALLY_ERROR_HOST_AND_DEVICE_DIRTY);
    EXPECT_EQ(halide_copy_to_device(nullptr, &b.buf, host), TALLY_ERROR_HOST_AND_DEVICE_DIRTY);
    EXPECT_EQ(capture.errors().size(), 2u);
    b.buf.flags = 0;
    EXPECT_EQ(halide_device_free(nullptr, &b.buf), 0);
}

TEST(HostDevice, DeviceAndHostMallocAndFree) {
    halide_dimension_t dims[1] = {{0, 100, 1, 0}};
    halide_buffer_t buf;
    std::memset(&buf, 0, sizeof(buf));
    buf.type = {halide_type_uint, 16, 1};
    buf.dimensions = 1;
    buf.dim = dims;
    const halide_device_interface_t *host = halide_host_device_interface();
    ASSERT_EQ(halide_device_and_host_malloc(nullptr, &buf, host), 0);
    ASSERT_NE(buf.host, nullptr);
    ASSERT_NE(buf.device, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buf.host) % TALLY_MALLOC_ALIGNMENT, 0u);
    ASSERT_EQ(halide_device_and_host_free(nullptr, &buf), 0);
    EXPECT_EQ(buf.host, nullptr);
    EXPECT_EQ(buf.device, 0u);
    halide_device_host_nop_free(nullptr, &buf);
}

TEST(HostDevice, ArgumentErrors) {
    tally_test::MessageCapture capture;
    EXPECT_EQ(halide_copy_to_host(nullptr, nullptr), TALLY_ERROR_BUFFER_IS_NULL);
    EXPECT_EQ(halide_device_sync_global(nullptr, nullptr), TALLY_ERROR_NO_DEVICE_INTERFACE);
    TestBuffer b(2, 2);
    EXPECT_EQ(halide_copy_to_device(nullptr, &b.buf, nullptr), TALLY_ERROR_NO_DEVICE_INTERFACE);
    b.buf.device = 1234;  // a device handle without an interface
    EXPECT_EQ(halide_copy_to_host(nullptr, &b.buf), TALLY_ERROR_NO_DEVICE_INTERFACE);
    b.buf.device = 0;
    // A second, distinct interface: device_malloc on it while the host one owns the buffer fails.
    halide_device_interface_t other = *halide_host_device_interface();
    other.name = "other";
    ASSERT_EQ(halide_device_malloc(nullptr, &b.buf, halide_host_device_interface()), 0);
    EXPECT_EQ(halide_device_malloc(nullptr, &b.buf, &other),
              TALLY_ERROR_INCOMPATIBLE_DEVICE_INTERFACE);
    // copy_to_device moves the buffer to the other interface instead.
    b.storage[1] = 42;
    tally_buffer_set_host_dirty(&b.buf, true);
    ASSERT_EQ(halide_copy_to_device(nullptr, &b.buf, &other), 0);
    EXPECT_EQ(b.buf.device_interface, &other);
    EXPECT_EQ(reinterpret_cast<float *>(uintptr_t(b.buf.device))[1], 42.0f);
    EXPECT_EQ(halide_device_free(nullptr, &b.buf), 0);
    EXPECT_EQ(capture.errors().size(), 5u);
}

}  // namespace
