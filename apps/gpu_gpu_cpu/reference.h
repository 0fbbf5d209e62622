/** \file
 * Plain C++ reference for apps/gpu_gpu_cpu/gpu_gpu_cpu.stmt: two iterated stages (the pipeline
 * runs them on the GPU) and a cheap one (on the CPU) that reads the second.
 */
#ifndef TALLY_APPS_GPU_GPU_CPU_REFERENCE_H
#define TALLY_APPS_GPU_GPU_CPU_REFERENCE_H

namespace tally_apps {

/** Computes C (width x height, dense row-major) from input (same shape):
 *   A(x, y) = f^reps(input(x, y)),  f(v) = v * 0.99f + 0.01f
 *   B(x, y) = g^reps((A(x, y) + A(min(x + 1, width - 1), y)) * 0.5f),  g(v) = v * 0.97f - 0.015f
 *   C(x, y) = h^(reps / 16)(B(x, y) * 2.0f + input(x, y)),  h(v) = v * 0.9f + 0.05f
 * in float32, one rounding per operation. */
void gpu_gpu_cpu_reference(const float *input, float *C, int width, int height, int reps);

}  // namespace tally_apps

#endif  // TALLY_APPS_GPU_GPU_CPU_REFERENCE_H
