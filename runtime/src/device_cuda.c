// Placeholder until the CUDA back end lands: no CUDA device interface yet.

#include "internal.h"

const halide_device_interface_t *halide_cuda_device_interface(void) {
    return NULL;
}

int32_t halide_cuda_run(void *user_context, void *state, const char *entry_name, int32_t blocks_x,
                          int32_t blocks_y, int32_t blocks_z, int32_t threads_x, int32_t threads_y,
                          int32_t threads_z, int32_t shared_mem_bytes, const int64_t *arg_sizes,
                          void **args, const uint8_t *arg_is_buffer) {
    (void)state, (void)entry_name, (void)blocks_x, (void)blocks_y, (void)blocks_z;
    (void)threads_x, (void)threads_y, (void)threads_z, (void)shared_mem_bytes;
    (void)arg_sizes, (void)args, (void)arg_is_buffer;
    return tally_report_error(user_context, TALLY_ERROR_NO_DEVICE_INTERFACE,
                              "halide_cuda_run: the CUDA back end is not available");
}
