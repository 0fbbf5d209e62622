/** \file
 * What the GPU end-to-end tests share (VulkanTest.cpp, GpuApiTest.cpp): the GPU apps
 * (apps/gpu_gpu_cpu, apps/blur_gpu, apps/bounce) with inputs, runs and checks against their C++
 * references; result comparisons; lowering with or without injected syncs; the report and the
 * profiler's stats by slot name.
 */
#ifndef TALLY_TEST_E2E_GPUAPPS_H
#define TALLY_TEST_E2E_GPUAPPS_H

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "E2EUtil.h"
#include "blur_gpu/reference.h"
#include "bounce/reference.h"
#include "gpu_gpu_cpu/reference.h"
#include "tally/IRMutator.h"

namespace tally_e2e {

/** Floats agree when |got - want| <= 1e-4 * max(1, |want|). The GPU may contract a multiply-add
 * into an FMA (Vulkan allows it) where the reference rounds twice; the apps' iterations are
 * contractions, so those differences stay within a few hundred ulps. */
inline constexpr double float_tolerance = 1e-4;

inline const std::vector<std::string> gpu_apps = {"gpu_gpu_cpu", "blur_gpu", "bounce"};

template <typename T>
void fill_sentinel(Buffer<T> &img, uint8_t byte) {
    std::memset(img.data(), byte, img.size() * sizeof(T));
}

template <typename T>
::testing::AssertionResult same_integers(const std::vector<T> &got, const std::vector<T> &want) {
    if (got.size() != want.size()) {
        return ::testing::AssertionFailure() << "sizes differ";
    }
    size_t bad = 0;
    std::ostringstream first;
    for (size_t i = 0; i < got.size(); i++) {
        if (got[i] != want[i]) {
            if (bad < 5) {
                first << " [" << i << "] got " << int64_t(got[i]) << " want " << int64_t(want[i])
                      << ";";
            }
            bad++;
        }
    }
    if (bad) {
        return ::testing::AssertionFailure()
               << bad << " of " << got.size() << " elements differ:" << first.str();
    }
    return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult close_floats(const std::vector<float> &got,
                                               const std::vector<float> &want) {
    if (got.size() != want.size()) {
        return ::testing::AssertionFailure() << "sizes differ";
    }
    size_t bad = 0;
    std::ostringstream first;
    for (size_t i = 0; i < got.size(); i++) {
        double tol = float_tolerance * std::max(1.0, std::fabs(double(want[i])));
        if (!(std::fabs(double(got[i]) - double(want[i])) <= tol)) {
            if (bad < 5) {
                first << " [" << i << "] got " << got[i] << " want " << want[i] << ";";
            }
            bad++;
        }
    }
    if (bad) {
        return ::testing::AssertionFailure()
               << bad << " of " << got.size() << " elements differ:" << first.str();
    }
    return ::testing::AssertionSuccess();
}

inline std::unique_ptr<tally::JITModule>
compile_with(const tally::Module &m, const std::string &target, bool inject_sync = true) {
    tally::LowerOptions opts;
    opts.profiling.inject_device_sync = inject_sync;
    return tally::compile_jit(tally::lower(m, tally::Target::parse(target), opts));
}

// --- the apps, ready to run ------------------------------------------------------------------

/** gpu_gpu_cpu(input, C, width, height, reps). */
struct GpuGpuCpu {
    Buffer<float> input, C;
    int32_t width, height, reps;
    GpuGpuCpu(int w, int h, int r, uint64_t seed)
        : input({w, h}), C({w, h}), width(w), height(h), reps(r) {
        Rng rng(seed);
        for (size_t i = 0; i < input.size(); i++) {
            input[i] = rng.uniform(-1.0f, 1.0f);
        }
    }
    /** Runs the pipeline; the input counts as just written (its host copy newer than any device
     * copy, Halide's convention), so every run copies it to the device. */
    int run(const tally::JITModule &jit) {
        input.set_host_dirty();
        return jit.call({input, C, width, height, reps});
    }
    ::testing::AssertionResult check() {
        std::vector<float> want(C.size());
        tally_apps::gpu_gpu_cpu_reference(input.data(), want.data(), width, height, reps);
        return close_floats(C.to_vector(), want);
    }
};

/** blur_gpu(input, output, width, height). */
struct BlurGpu {
    Buffer<uint32_t> input, output;
    int32_t width, height;
    BlurGpu(int w, int h, uint64_t seed)
        : input({w + 2, h + 2}), output({w, h}), width(w), height(h) {
        Rng rng(seed);
        for (size_t i = 0; i < input.size(); i++) {
            input[i] = rng.next() >> 2;  // below 2^30: sums of three do not wrap
        }
    }
    int run(const tally::JITModule &jit) {
        input.set_host_dirty();
        return jit.call({input, output, width, height});
    }
    ::testing::AssertionResult check() {
        std::vector<uint32_t> want(output.size());
        tally_apps::blur_gpu_reference(input.data(), want.data(), width, height);
        return same_integers(output.to_vector(), want);
    }
};

/** bounce(input, output, n). */
struct Bounce {
    Buffer<int32_t> input, output;
    int32_t n;
    Bounce(int count, uint64_t seed) : input({count}), output({count}), n(count) {
        Rng rng(seed);
        for (size_t i = 0; i < input.size(); i++) {
            input[i] = int32_t(rng.below(2000000)) - 1000000;  // negatives exercise Euclid
        }
    }
    int run(const tally::JITModule &jit) {
        input.set_host_dirty();
        return jit.call({input, output, n});
    }
    ::testing::AssertionResult check() {
        std::vector<int32_t> want(output.size());
        tally_apps::bounce_reference(input.data(), want.data(), n);
        return same_integers(output.to_vector(), want);
    }
};

// --- the report --------------------------------------------------------------------------------

inline std::string report_text() {
    int32_t n = tally_profiler_report_to_buffer(nullptr, 0, 0);
    EXPECT_GE(n, 0);
    std::string s(size_t(std::max(n, 0)) + 1, '\0');
    EXPECT_EQ(tally_profiler_report_to_buffer(&s[0], s.size(), 0), n);
    s.resize(size_t(std::max(n, 0)));
    return s;
}

/** The value after `label` on the report line that starts with "  <label>", or -1. */
inline int64_t header_value(const std::string &report, const std::string &label) {
    std::istringstream in(report);
    std::string l;
    while (std::getline(in, l)) {
        if (l.compare(0, label.size() + 2, "  " + label) == 0) {
            return std::atoll(l.c_str() + label.size() + 2);
        }
    }
    return -1;
}

/** Slot stats of a pipeline by name: name -> stats. */
inline std::map<std::string, tally_slot_stats> slots_of(const std::string &pipeline) {
    std::map<std::string, tally_slot_stats> out;
    tally_pipeline_stats ps;
    if (tally_profiler_get_pipeline_stats(pipeline.c_str(), &ps) != 0) {
        return out;
    }
    for (int32_t s = 0; s < ps.num_slots; s++) {
        tally_slot_stats ss;
        if (tally_profiler_get_slot_stats(pipeline.c_str(), s, &ss) == 0) {
            out[ss.name] = ss;
        }
    }
    return out;
}

/** Turns GPU loops into serial host loops: the same computation for the host back end. */
class GpuLoopsToSerial : public tally::IRMutator {
public:
    using tally::IRMutator::visit;
    tally::Stmt visit(const tally::For *op) override {
        tally::Stmt body = mutate(op->body);
        if (op->for_type == tally::ForType::GPUBlock || op->for_type == tally::ForType::GPUThread) {
            return tally::For::make(op->name, op->min, op->extent, tally::ForType::Serial,
                                    tally::DeviceAPI::None, body);
        }
        return tally::For::make(op->name, op->min, op->extent, op->for_type, op->device_api, body);
    }
};

}  // namespace tally_e2e

#endif  // TALLY_TEST_E2E_GPUAPPS_H
