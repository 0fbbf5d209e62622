/** \file
 * The Halide 14 side of apps_bench: its own shared module (apps_bench_halide.cpp), because
 * Halide.h and Tally's runtime header both define halide_buffer_t and the other Halide runtime
 * types, and because libHalide 14 brings libLLVM-14, whose symbols must stay out of the
 * program's global scope: PoCL (the OpenCL device the benchmarks run on) builds programs with its
 * own LLVM 15, which looks its unversioned template instances up there first and crashed inside
 * libLLVM-14 when both were global. apps_bench loads the module with dlopen(RTLD_LOCAL), so
 * libHalide and libLLVM-14 stay in the module's own scope.
 *
 * The module's C entry points; Blur wraps them.
 */
#ifndef TALLY_BENCH_APPS_BENCH_HALIDE_H
#define TALLY_BENCH_APPS_BENCH_HALIDE_H

#include <cstdint>
#include <stdexcept>
#include <string>

#include <dlfcn.h>

extern "C" {
/** blur (apps/blur) written in Halide 14 and JIT-compiled with the app's schedule, over the
 * caller's dense row-major buffers: input (width + 2) x (height + 2), output width x height. */
void *apps_bench_halide_blur_new(const uint16_t *input, uint16_t *output, int width, int height);
/** One run: fills the output. */
void apps_bench_halide_blur_run(void *blur);
void apps_bench_halide_blur_delete(void *blur);
}

namespace apps_bench_halide {

/** Halide 14's blur, from the module at `path` (loaded once, RTLD_LOCAL). */
class Blur {
public:
    Blur(const char *path, const uint16_t *input, uint16_t *output, int width, int height) {
        static void *module = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!module) {
            throw std::runtime_error(std::string("cannot load ") + path + ": " + dlerror());
        }
        make_ = reinterpret_cast<decltype(&apps_bench_halide_blur_new)>(
            dlsym(module, "apps_bench_halide_blur_new"));
        run_ = reinterpret_cast<decltype(&apps_bench_halide_blur_run)>(
            dlsym(module, "apps_bench_halide_blur_run"));
        delete_ = reinterpret_cast<decltype(&apps_bench_halide_blur_delete)>(
            dlsym(module, "apps_bench_halide_blur_delete"));
        if (!make_ || !run_ || !delete_) {
            throw std::runtime_error(std::string(path) + " lacks the apps_bench_halide_blur_* "
                                                         "entry points");
        }
        blur_ = make_(input, output, width, height);
    }
    ~Blur() { delete_(blur_); }
    Blur(const Blur &) = delete;
    Blur &operator=(const Blur &) = delete;

    /** One run: fills the output. */
    void run() { run_(blur_); }

private:
    decltype(&apps_bench_halide_blur_new) make_ = nullptr;
    decltype(&apps_bench_halide_blur_run) run_ = nullptr;
    decltype(&apps_bench_halide_blur_delete) delete_ = nullptr;
    void *blur_ = nullptr;
};

}  // namespace apps_bench_halide

#endif  // TALLY_BENCH_APPS_BENCH_HALIDE_H
