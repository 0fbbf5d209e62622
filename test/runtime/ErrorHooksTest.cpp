// Error and print hooks: overriding, restoring, and the messages of the error helpers.
#include "TestUtil.h"

#include <cstdio>
#include <string>
#include <unistd.h>

namespace {

TEST(ErrorHooks, OverrideAndRestore) {
    std::string seen;
    {
        tally_test::MessageCapture capture;
        int uc = 7;
        halide_error(&uc, "boom");
        halide_print(&uc, "hello\n");
        ASSERT_EQ(capture.errors().size(), 1u);
        EXPECT_EQ(capture.errors()[0], "boom");
        EXPECT_EQ(capture.contexts()[0], &uc);
        EXPECT_EQ(capture.printed(), "hello\n");
    }
    // NULL restores the defaults, which return the previous handler.
    tally_message_handler_t def = tally_set_error_handler(nullptr);
    EXPECT_NE(def, nullptr);
    EXPECT_EQ(tally_set_error_handler(nullptr), def);
}

// The default handlers: errors to stderr, what a pipeline prints (halide_print) to stdout as
// Halide's runtime prints it. (The runtime's own text goes to stderr: ProfilerReport tests.)
TEST(ErrorHooks, DefaultHandlersWriteErrorsToStderrAndPrintsToStdout) {
    int out_fds[2], err_fds[2];
    ASSERT_EQ(pipe(out_fds), 0);
    ASSERT_EQ(pipe(err_fds), 0);
    fflush(stdout);
    fflush(stderr);
    int saved_out = dup(1), saved_err = dup(2);
    dup2(out_fds[1], 1);
    dup2(err_fds[1], 2);
    tally_set_error_handler(nullptr);
    tally_set_print_handler(nullptr);
    halide_error(nullptr, "default path");
    halide_print(nullptr, "printed\n");
    dup2(saved_out, 1);
    dup2(saved_err, 2);
    close(saved_out);
    close(saved_err);
    close(out_fds[1]);
    close(err_fds[1]);
    char out[256] = {0}, err[256] = {0};
    ASSERT_GT(read(out_fds[0], out, sizeof(out) - 1), 0);
    ASSERT_GT(read(err_fds[0], err, sizeof(err) - 1), 0);
    close(out_fds[0]);
    close(err_fds[0]);
    EXPECT_EQ(std::string(out), "printed\n");
    EXPECT_EQ(std::string(err), "Error: default path\n");
}

TEST(ErrorHooks, HelpersNameWhatFailedAndReturnTheirCode) {
    tally_test::MessageCapture capture;
    struct Case {
        int32_t got;
        int32_t want;
        const char *needle;
    };
    Case cases[] = {
        {halide_error_buffer_argument_is_null(nullptr, "input"),
         TALLY_ERROR_BUFFER_ARGUMENT_IS_NULL, "Buffer argument input is NULL"},
        {halide_error_bad_type(nullptr, "Input buffer b0", 67585 /* uint8 */, 73730 /* float32 */),
         TALLY_ERROR_BAD_TYPE,
         "Input buffer b0 has type float32 but type of the buffer passed in is uint8"},
        {halide_error_bad_dimensions(nullptr, "out", 3, 2), TALLY_ERROR_BAD_DIMENSIONS,
         "out requires a buffer of exactly 2 dimensions, but the buffer passed in has 3"},
        {halide_error_access_out_of_bounds(nullptr, "in", 1, -1, 5, 0, 9),
         TALLY_ERROR_ACCESS_OUT_OF_BOUNDS,
         "in is accessed at -1, which is before the min (0) in dimension 1"},
        {halide_error_access_out_of_bounds(nullptr, "in", 0, 0, 12, 0, 9),
         TALLY_ERROR_ACCESS_OUT_OF_BOUNDS,
         "in is accessed at 12, which is beyond the max (9) in dimension 0"},
        {halide_error_buffer_extents_negative(nullptr, "buf", 1, -3),
         TALLY_ERROR_BUFFER_EXTENTS_NEGATIVE, "buf dimension 1 is negative (-3)"},
        {halide_error_constraint_violated(nullptr, "in.stride.0", 2, "1", 1),
         TALLY_ERROR_CONSTRAINT_VIOLATED, "Constraint violated: in.stride.0 (2) == 1 (1)"},
        {halide_error_buffer_allocation_too_large(nullptr, "tmp", 5000000000ull, 2147483647ull),
         TALLY_ERROR_BUFFER_ALLOCATION_TOO_LARGE,
         "tmp is 5000000000, which exceeds the maximum size of 2147483647"},
        {halide_error_buffer_extents_too_large(nullptr, "big", 4294967296ll, 2147483647ll),
         TALLY_ERROR_BUFFER_EXTENTS_TOO_LARGE, "big is 4294967296"},
        {halide_error_host_is_null(nullptr, "Output buffer f"), TALLY_ERROR_HOST_IS_NULL,
         "The host pointer of Output buffer f is null"},
        {halide_error_device_dirty_with_no_device_support(nullptr, "Input buffer b0"),
         TALLY_ERROR_DEVICE_DIRTY_WITH_NO_DEVICE_SUPPORT,
         "The buffer Input buffer b0 is dirty on device"},
        {halide_error_explicit_bounds_too_small(nullptr, "relu3", "c", 0, 7, 0, 9),
         TALLY_ERROR_EXPLICIT_BOUNDS_TOO_SMALL, "Bounds given for c in relu3 (from 0 to 7)"},
        {halide_error_out_of_memory(nullptr), TALLY_ERROR_OUT_OF_MEMORY, "Out of memory"},
        {halide_error_param_too_large_i64(nullptr, "k", 10, 5), TALLY_ERROR_PARAM_TOO_LARGE,
         "Parameter k is 10 but must be at most 5"},
        {halide_error_host_and_device_dirty(nullptr), TALLY_ERROR_HOST_AND_DEVICE_DIRTY,
         "both host and device"},
        {halide_error_extern_stage_failed(nullptr, "ext", -99), -99, "Call to external stage ext"},
    };
    auto errors = capture.errors();
    ASSERT_EQ(errors.size(), sizeof(cases) / sizeof(cases[0]));
    for (size_t i = 0; i < errors.size(); i++) {
        EXPECT_EQ(cases[i].got, cases[i].want) << errors[i];
        EXPECT_LT(cases[i].got, 0);
        EXPECT_NE(errors[i].find(cases[i].needle), std::string::npos)
            << "message: " << errors[i] << "\nexpected to contain: " << cases[i].needle;
    }
}

TEST(ErrorHooks, ErrorCodeNames) {
    EXPECT_STREQ(tally_error_code_name(0), "SUCCESS");
    EXPECT_STREQ(tally_error_code_name(TALLY_ERROR_BAD_TYPE), "ERROR_BAD_TYPE");
    EXPECT_STREQ(tally_error_code_name(TALLY_ERROR_THREAD_START_FAILED),
                 "ERROR_THREAD_START_FAILED");
    EXPECT_STREQ(tally_error_code_name(-12345), "ERROR_UNKNOWN");
    EXPECT_EQ(TALLY_ERROR_DEVICE_DIRTY_WITH_NO_DEVICE_SUPPORT, -44);  // Halide 14's value
}

}  // namespace
