// cuda_check: the CUDA back end on a real NVIDIA GPU. Built and run by test/gpu/cuda_check.sh.
//
//   cuda_check --src ROOT [--quick] [--only apps|kernels|attribution]
//
// Sections, in order (--only picks one):
//   kernels      the functions of test/ir/cuda-ptx/kernels.stmt (1-D/2-D/3-D launches, Euclidean
//                division with negative and zero divisors, guarded sibling thread loops, shared
//                memory with a barrier, libdevice math, dense vectors, bool bytes) against C++
//                references; host-cuda.
//   apps         the GPU apps (apps/gpu_gpu_cpu, blur_gpu, bounce, as written: their Default_GPU
//                loops take the target's API) for host-cuda, host-cuda-profile and
//                host-cuda-profile_timestamps at a few sizes,
//                against apps/*/reference.cpp (integers exactly, floats within 1e-5 relative),
//                with the time per run; then the profiler's report of the profiled runs.
//   attribution  test/gpu/attribution.stmt (A and B on the GPU, C on the CPU): the truth of each
//                stage is timed by running the unprofiled pipeline with only that stage's work
//                (the others' repetition counts at 0, minus the run with no work at all); the
//                profiled shares of A, B and C must each be within 10 percentage points of the
//                truth, with one launch per GPU stage and a sync after each launch. The same
//                pipeline without the injected syncs is run too and its (wrong) shares printed:
//                the GPU's time lands in C's blocking copy. Then profile_timestamps: A's and B's
//                device time from CUDA events and C's host time as shares, within 10 points of
//                the truth; no injected sync; every event pair billed; the copies timed with
//                events too (each copy slot billed at most once per run, at a bandwidth a
//                PCIe/NVLink GPU can have); the commands placed on the host clock by paired
//                readings (their span covers their busy time and lies within the runs' wall time);
//                wall time per run of plain, profile and profile_timestamps printed side by side.
// --quick runs small sizes only and skips the attribution (for compute-sanitizer).
//
// Exit status: 0 when everything passed, 1 when a check failed, 2 when CUDA is unavailable.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "blur_gpu/reference.h"
#include "bounce/reference.h"
#include "gpu_gpu_cpu/reference.h"
#include "tally/Arguments.h"
#include "tally/Buffer.h"
#include "tally/Compiler.h"
#include "tally/Error.h"
#include "tally/Lower.h"
#include "tally/Parser.h"
#include "tally_runtime.h"
#include "tally_runtime_testing.h"

namespace {

using Clock = std::chrono::steady_clock;

int failures = 0;

void fail(const std::string &what) {
    failures++;
    std::cout << "  FAIL  " << what << "\n";
}
void pass(const std::string &what) {
    std::cout << "  ok    " << what << "\n";
}

/** A dense tally::Buffer (extents[0] fastest, all mins 0) whose data counts as new (host-dirty),
 * outputs included, so that every copy to the device moves it. */
template <typename T>
tally::Buffer<T> buffer(const std::vector<int32_t> &extents,
                        const tally::Type &type = tally::type_of<T>()) {
    tally::Buffer<T> b(type, extents);
    b.set_host_dirty();
    return b;
}

/** Brings the device's result home. */
bool fetch(tally::Buffer<> &b) {
    return b.copy_to_host() == 0;
}

std::unique_ptr<tally::JITModule> compile(const tally::Module &m, const std::string &target,
                                          bool inject_sync = true) {
    tally::LowerOptions o;
    o.profiling.inject_device_sync = inject_sync;
    return tally::compile_jit(tally::lower(m, tally::Target::parse(target), o));
}

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

template <typename T>
bool same(const std::vector<T> &got, const std::vector<T> &want, double rel_tol, std::string *why) {
    size_t bad = 0;
    double worst = 0;
    std::ostringstream first;
    for (size_t i = 0; i < got.size(); i++) {
        double g = double(got[i]), w = double(want[i]);
        double err = std::fabs(g - w) / std::max(1.0, std::fabs(w));
        bool ok = rel_tol == 0 ? got[i] == want[i] : (err <= rel_tol || (g != g && w != w));
        worst = std::max(worst, err);
        if (!ok) {
            if (bad < 4) {
                first << " [" << i << "] got " << g << " want " << w << ";";
            }
            bad++;
        }
    }
    std::ostringstream s;
    if (bad) {
        s << bad << " of " << got.size() << " differ:" << first.str();
    } else {
        s << (rel_tol == 0 ? "exact" : "max rel. error ")
          << (rel_tol == 0 ? "" : std::to_string(worst));
    }
    *why = s.str();
    return bad == 0;
}

// ---- kernels ------------------------------------------------------------------------------

void check_kernels(const std::string &src) {
    std::cout << "\n== kernels (test/ir/cuda-ptx/kernels.stmt, host-cuda)\n";
    auto jit =
        compile(tally::parse_module_file(src + "/test/ir/cuda-ptx/kernels.stmt"), "host-cuda");
    std::mt19937 rng(7);
    std::string why;
    auto run = [&](const char *fn, const std::vector<tally::ArgumentValue> &args) {
        int rc = jit->call(fn, args);
        if (rc != 0) {
            fail(std::string(fn) + ": the pipeline failed with " + std::to_string(rc) + " (" +
                 tally_error_code_name(rc) + ")");
        }
        return rc == 0;
    };
    {
        int n = 37;
        auto in = buffer<float>({n * 64}), out = buffer<float>({n * 64});
        for (float &v : in) {
            v = std::uniform_real_distribution<float>(-10, 10)(rng);
        }
        std::vector<float> want(in.size());
        for (size_t i = 0; i < want.size(); i++) {
            want[i] = in[i] * 2.0f;
        }
        if (run("scale", {in, out, n}) && fetch(out)) {
            same(out.to_vector(), want, 0, &why) ? pass("scale: " + why) : fail("scale: " + why);
        }
    }
    {
        auto g = buffer<int32_t>({2 * 3 * 4 * 2 * 4 * 8});
        if (run("grid3", {g}) && fetch(g)) {
            std::vector<int32_t> want(g.size(), 1);
            same(g.to_vector(), want, 0, &why) ? pass("grid3 (3-D blocks and threads): " + why)
                                               : fail("grid3: " + why);
        }
    }
    for (int32_t d : {7, -7, 1, -1, 0, 1000003}) {
        auto num = buffer<int32_t>({128}), quot = buffer<int32_t>({128});
        for (size_t i = 0; i < num.size(); i++) {
            num[i] = int32_t(rng());
        }
        num[0] = std::numeric_limits<int32_t>::min();
        num[1] = -1;
        num[2] = 0;
        std::vector<int32_t> want(num.size());
        for (size_t i = 0; i < want.size(); i++) {
            int64_t a = num[i], q = 0, r = 0;
            if (d != 0) {
                q = a / d;
                r = a % d;
                if (r < 0) {
                    r += d < 0 ? -int64_t(d) : d;
                    q -= d < 0 ? -1 : 1;
                }
            }
            // (q * 1000 + r) in wrapping int32 arithmetic.
            want[i] = int32_t(uint32_t(uint64_t(int32_t(uint32_t(q))) * 1000u + uint64_t(r)));
        }
        if (run("euclid", {num, quot, d}) && fetch(quot)) {
            std::string what = "euclid (Euclidean / and %, divisor " + std::to_string(d) + ")";
            same(quot.to_vector(), want, 0, &why) ? pass(what + ": " + why)
                                                  : fail(what + ": " + why);
        }
    }
    {
        auto a = buffer<float>({8 * 32}), b = buffer<float>({8 * 16});
        if (run("siblings", {a, b}) && fetch(a) && fetch(b)) {
            bool ok = same(a.to_vector(), std::vector<float>(a.size(), 1.0f), 0, &why) &&
                      same(b.to_vector(), std::vector<float>(b.size(), 2.0f), 0, &why);
            ok ? pass("siblings (guarded 16-wide loop in a 32-thread launch): " + why)
               : fail("siblings: " + why);
        }
    }
    {
        auto in = buffer<float>({256}), rev = buffer<float>({256});
        for (size_t i = 0; i < in.size(); i++) {
            in[i] = float(i);
        }
        std::vector<float> want(256);
        for (int blk = 0; blk < 4; blk++) {
            for (int t = 0; t < 64; t++) {
                want[blk * 64 + t] = in[blk * 64 + 63 - t];
            }
        }
        if (run("reverse", {in, rev}) && fetch(rev)) {
            same(rev.to_vector(), want, 0, &why) ? pass("reverse (shared memory, barrier): " + why)
                                                 : fail("reverse: " + why);
        }
    }
    {
        auto in = buffer<float>({256}), res = buffer<float>({256});
        std::vector<float> want(256);
        for (size_t i = 0; i < in.size(); i++) {
            in[i] = 0.05f + float(i) * 0.04f;
            want[i] = std::sqrt(in[i]) + std::exp(in[i]) + std::floor(in[i]);
        }
        if (run("math", {in, res}) && fetch(res)) {
            same(res.to_vector(), want, 1e-5, &why)
                ? pass("math (sqrt, libdevice exp, floor): " + why)
                : fail("math: " + why);
        }
    }
    {
        auto in = buffer<float>({64}), v = buffer<float>({64});
        std::vector<float> want(64);
        for (size_t i = 0; i < in.size(); i++) {
            in[i] = float(i) * 0.5f;
            want[i] = in[i] + 1.0f;
        }
        if (run("vec", {in, v}) && fetch(v)) {
            same(v.to_vector(), want, 0, &why) ? pass("vec (dense 4-lane vectors): " + why)
                                               : fail("vec: " + why);
        }
    }
    {
        auto in = buffer<int32_t>({8});
        auto flag = buffer<uint8_t>({8}, tally::Bool());
        std::vector<uint8_t> want(8);
        for (int i = 0; i < 8; i++) {
            in[i] = i;
            want[i] = i > 3;
        }
        if (run("flags", {in, flag}) && fetch(flag)) {
            same(flag.to_vector(), want, 0, &why) ? pass("flags (bools as bytes): " + why)
                                                  : fail("flags: " + why);
        }
    }
}

// ---- apps -----------------------------------------------------------------------------------

/** Runs `body` `runs` times; returns the mean wall time per run in ms (results fetched). */
double timed(int runs, const std::function<bool()> &body) {
    auto t0 = Clock::now();
    for (int r = 0; r < runs; r++) {
        if (!body()) {
            return -1;
        }
    }
    return ms_since(t0) / runs;
}

void report_time(const std::string &what, double ms, int runs) {
    char line[256];
    std::snprintf(line, sizeof line, "%-58s %9.3f ms/run (%d runs)", what.c_str(), ms, runs);
    std::cout << "  time  " << line << "\n";
}

void check_apps(const std::string &src, bool quick) {
    std::cout << "\n== apps (Default_GPU loops on CUDA)\n";
    std::string apps = src + "/apps";
    std::mt19937 rng(11);
    std::string why;
    for (const char *target : {"host-cuda", "host-cuda-profile", "host-cuda-profile_timestamps"}) {
        // gpu_gpu_cpu
        {
            auto jit =
                compile(tally::parse_module_file(apps + "/gpu_gpu_cpu/gpu_gpu_cpu.stmt"), target);
            std::vector<std::pair<int, int>> sizes = {{37, 19}, {256, 128}};
            if (!quick) {
                sizes.push_back({1920, 1080});
            }
            for (auto [w, h] : sizes) {
                int reps = quick ? 8 : 64;
                auto in = buffer<float>({w, h}), out = buffer<float>({w, h});
                for (float &v : in) {
                    v = std::uniform_real_distribution<float>(0, 1)(rng);
                }
                std::vector<float> want(in.size());
                tally_apps::gpu_gpu_cpu_reference(in.data(), want.data(), w, h, reps);
                int runs = quick ? 1 : 5;
                double ms = timed(runs, [&]() {
                    int rc = jit->call({in, out, w, h, reps});
                    if (rc != 0) {
                        fail(std::string("gpu_gpu_cpu ") + target + ": error " +
                             tally_error_code_name(rc));
                    }
                    return rc == 0;
                });
                std::string what = std::string("gpu_gpu_cpu ") + target + " " + std::to_string(w) +
                                   "x" + std::to_string(h) + " reps=" + std::to_string(reps);
                if (ms < 0) {
                    continue;
                }
                same(out.to_vector(), want, 1e-5, &why) ? pass(what + ": " + why)
                                                        : fail(what + ": " + why);
                report_time(what, ms, runs);
            }
        }
        // blur_gpu
        {
            auto jit = compile(tally::parse_module_file(apps + "/blur_gpu/blur_gpu.stmt"), target);
            std::vector<std::pair<int, int>> sizes = {{1, 1}, {33, 17}};
            if (!quick) {
                sizes.push_back({3840, 2160});
            }
            for (auto [w, h] : sizes) {
                auto in = buffer<uint32_t>({w + 2, h + 2}), out = buffer<uint32_t>({w, h});
                for (uint32_t &v : in) {
                    v = rng() & 0x3fffffff;
                }
                std::vector<uint32_t> want(out.size());
                tally_apps::blur_gpu_reference(in.data(), want.data(), w, h);
                int runs = quick ? 1 : 5;
                double ms = timed(runs, [&]() {
                    int rc = jit->call({in, out, w, h});
                    if (rc != 0) {
                        fail(std::string("blur_gpu ") + target + ": error " +
                             tally_error_code_name(rc));
                    }
                    return rc == 0 && fetch(out);
                });
                std::string what = std::string("blur_gpu ") + target + " " + std::to_string(w) +
                                   "x" + std::to_string(h);
                if (ms < 0) {
                    continue;
                }
                same(out.to_vector(), want, 0, &why) ? pass(what + ": " + why)
                                                     : fail(what + ": " + why);
                report_time(what + " (+ copy back)", ms, runs);
            }
        }
        // bounce
        {
            auto jit = compile(tally::parse_module_file(apps + "/bounce/bounce.stmt"), target);
            std::vector<int> sizes = {1, 63, 1000};
            if (!quick) {
                sizes.push_back(1 << 22);
            }
            for (int n : sizes) {
                auto in = buffer<int32_t>({n}), out = buffer<int32_t>({n});
                for (int32_t &v : in) {
                    v = int32_t(rng() % (1u << 28)) - (1 << 27);
                }
                std::vector<int32_t> want(in.size());
                tally_apps::bounce_reference(in.data(), want.data(), n);
                int runs = quick ? 1 : 5;
                double ms = timed(runs, [&]() {
                    in.set_host_dirty();
                    int rc = jit->call({in, out, n});
                    if (rc != 0) {
                        fail(std::string("bounce ") + target + ": error " +
                             tally_error_code_name(rc));
                    }
                    return rc == 0 && fetch(out);
                });
                std::string what = std::string("bounce ") + target + " n=" + std::to_string(n);
                if (ms < 0) {
                    continue;
                }
                same(out.to_vector(), want, 0, &why) ? pass(what + ": " + why)
                                                     : fail(what + ": " + why);
                report_time(what + " (+ copy back)", ms, runs);
            }
        }
    }
    std::vector<char> report(1 << 20);
    int32_t len = tally_profiler_report_to_buffer(report.data(), report.size(), 0);
    std::cout << "\n-- profiler report of the host-cuda-profile runs\n"
              << (len >= 0 ? report.data() : "(no report)") << "\n";
    tally_profiler_reset();
}

// ---- attribution ------------------------------------------------------------------------------

struct Stages {
    double a = 0, b = 0, c = 0;
    double copy_back = 0;  // "B (copy to host)": not part of the shares
    double total() const { return a + b + c; }
};

// A number after `key` in `text` from `from` on (the JSON report), or -1.
double json_number_after(const std::string &text, size_t from, const std::string &key) {
    size_t at = from == std::string::npos ? from : text.find("\"" + key + "\": ", from);
    return at == std::string::npos ? -1 : std::strtod(text.c_str() + at + key.size() + 4, nullptr);
}

// The device copy rows of the JSON report's device_timeline from `from` on: slot name, device ns,
// number of copies.
struct DeviceCopy {
    std::string name;
    double device_ns = 0, copies = 0;
};
std::vector<DeviceCopy> device_copies_after(const std::string &json, size_t from) {
    std::vector<DeviceCopy> rows;
    size_t at = from == std::string::npos ? from : json.find("\"device_copies\": [", from);
    size_t end = at == std::string::npos ? at : json.find(']', at);
    const std::string key = "\"name\": \"";
    while (at != std::string::npos && (at = json.find(key, at)) != std::string::npos && at < end) {
        size_t name_end = json.find('"', at + key.size());
        DeviceCopy c;
        c.name = json.substr(at + key.size(), name_end - at - key.size());
        c.device_ns = json_number_after(json, name_end, "device_ns");
        c.copies = json_number_after(json, name_end, "copies");
        rows.push_back(c);
        at = name_end;
    }
    return rows;
}

// profile_timestamps on the attribution pipeline: no injected sync, each Func's device time from
// CUDA events against the timed truth, the copies timed too, the commands placed on the host
// clock consistently, the records all billed, and what the profiling costs in wall time next to
// sync mode's.
void check_timestamps(const tally::Module &m, tally::Buffer<float> &in, tally::Buffer<float> &out,
                      int w, int h, int reps[3], const Stages &truth, double plain_ms) {
    std::cout << "\n== profile_timestamps (CUDA events, no injected syncs)\n";
    const int runs = 12;
    double loop_ms = 0;  // the last call's runs, first start to last end
    auto wall_ms = [&](tally::JITModule &jit) {
        std::vector<double> t;
        auto loop_start = Clock::now();
        for (int r = 0; r < runs; r++) {
            // Bound before the clock starts: the run alone is timed.
            tally::BoundArguments args =
                jit.binder().bind({in, out, w, h, reps[0], reps[1], reps[2]});
            auto t0 = Clock::now();
            int e = jit.run(args.argv());
            t.push_back(ms_since(t0));
            if (e != 0) {
                fail(std::string("profile_timestamps run failed: ") + tally_error_code_name(e));
                return -1.0;
            }
        }
        loop_ms = ms_since(loop_start);
        std::sort(t.begin(), t.end());
        return t[t.size() / 2];
    };
    auto sync = compile(m, "host-cuda-profile");
    auto ts = compile(m, "host-cuda-profile_timestamps");
    double sync_ms = wall_ms(*sync);
    tally_profiler_reset();
    double ts_ms = wall_ms(*ts);
    if (sync_ms < 0 || ts_ms < 0) {
        return;
    }
    tally_pipeline_stats p{};
    if (tally_profiler_get_pipeline_stats("attribution", &p) != 0) {
        fail("no profiler stats for 'attribution' (profile_timestamps)");
        return;
    }
    std::vector<char> buf(1 << 20), text(1 << 20);
    tally_profiler_report_to_buffer(buf.data(), buf.size(), 1);
    tally_profiler_report_to_buffer(text.data(), text.size(), 0);
    std::cout << "\n-- report, profile_timestamps\n" << text.data() << "\n";
    std::string json(buf.data());
    size_t timeline = json.find("\"device_timeline\"");
    auto func_at = [&](const char *name) {
        return timeline == std::string::npos
                   ? timeline
                   : json.find(std::string("\"name\": \"") + name + "\", \"host_ns\"", timeline);
    };
    double runs_done = double(p.runs);
    double dev_a = json_number_after(json, func_at("A"), "device_ns") / 1e6 / runs_done;
    double dev_b = json_number_after(json, func_at("B"), "device_ns") / 1e6 / runs_done;
    double host_c = json_number_after(json, func_at("C"), "host_ns") / 1e6 / runs_done;
    double problems = json_number_after(json, timeline, "records_lost") +
                      json_number_after(json, timeline, "records_overflowed") +
                      json_number_after(json, timeline, "records_unmatched");
    auto pct = [](double x, double total) { return total > 0 ? 100.0 * x / total : 0.0; };
    double total = dev_a + dev_b + host_c;
    std::printf("  per run: device A %.2f ms, device B %.2f ms, host C %.2f ms (truth %.2f, %.2f, "
                "%.2f)\n",
                dev_a, dev_b, host_c, truth.a, truth.b, truth.c);
    std::printf("  wall per run: plain %.2f ms, profile %.2f ms (%.3fx), profile_timestamps %.2f "
                "ms (%.3fx)\n",
                plain_ms, sync_ms, sync_ms / plain_ms, ts_ms, ts_ms / plain_ms);
    const double tolerance = 10.0;
    const char *names[3] = {"A", "B", "C"};
    double t[3] = {truth.a, truth.b, truth.c}, g[3] = {dev_a, dev_b, host_c};
    for (int s = 0; s < 3; s++) {
        double dt = pct(t[s], truth.total()), dg = pct(g[s], total);
        char line[200];
        std::snprintf(line, sizeof line,
                      "profile_timestamps share of %s: %.1f%%, truth %.1f%% (%.1f points; "
                      "tolerance %.0f)",
                      names[s], dg, dt, std::fabs(dg - dt), tolerance);
        std::fabs(dg - dt) <= tolerance ? pass(line) : fail(line);
    }
    p.injected_syncs == 0
        ? pass("profile_timestamps injects no sync")
        : fail("profile_timestamps injected " + std::to_string(p.injected_syncs) + " syncs");
    problems == 0 ? pass("every event pair billed (none lost, overflowed or unmatched)")
                  : fail("timestamp records not billed: " + std::to_string(problems));

    // Copies: each copy slot timed (at most once per run), at a physically possible bandwidth.
    std::vector<DeviceCopy> copies = device_copies_after(json, timeline);
    double copy_ns = 0;
    for (const DeviceCopy &c : copies) {
        std::printf("  device copy '%s': %.3f ms per run on the device, %.0f copies\n",
                    c.name.c_str(), c.device_ns / 1e6 / runs_done, c.copies);
        copy_ns += c.device_ns;
        char line[240];
        std::snprintf(line, sizeof line,
                      "'%s' timed with events (%.0f copies in %.0f runs, %.3f ms)", c.name.c_str(),
                      c.copies, runs_done, c.device_ns / 1e6);
        c.copies >= 1 && c.copies <= runs_done &&c.device_ns > 0 ? pass(line) : fail(line);
    }
    !copies.empty()
        ? pass("copies are timed with events (" + std::to_string(copies.size()) + " copy slots)")
        : fail("no device copy timed under profile_timestamps");
    double bytes = double(p.copies_to_device_bytes + p.copies_to_host_bytes);
    double gb_per_s = copy_ns > 0 ? bytes / copy_ns : 0;
    {
        char line[200];
        std::snprintf(line, sizeof line,
                      "copies: %.1f MB in %.3f ms of device time, %.2f GB/s (plausible: 0.05 to "
                      "5000)",
                      bytes / 1e6, copy_ns / 1e6, gb_per_s);
        gb_per_s >= 0.05 && gb_per_s <= 5000 ? pass(line) : fail(line);
    }

    // Placement on the host clock (paired readings): commands on one stream do not overlap, so
    // their span covers their busy time, and they ran inside the loop of runs.
    double busy_ms = json_number_after(json, timeline, "device_busy_ns") / 1e6;
    double span_ms = json_number_after(json, timeline, "device_span_ns") / 1e6;
    {
        char line[240];
        std::snprintf(line, sizeof line,
                      "device span %.3f ms: at least the busy time %.3f ms, at most the runs' wall "
                      "time %.3f ms (+0.1 ms for the pairings' deviation)",
                      span_ms, busy_ms, loop_ms);
        span_ms >= busy_ms * 0.999 && span_ms <= loop_ms + 0.1 ? pass(line) : fail(line);
    }
    tally_testing_device_clock clock{};
    if (tally_testing_get_device_clock(TALLY_DEVICE_API_CUDA, &clock) == 0) {
        std::printf("  clock pairing: %d pairings from %d readings; newest deviation %.2f us, "
                    "rate %.9f\n",
                    clock.pairings, clock.readings, double(clock.deviation_ns) / 1e3, clock.rate);
        clock.pairings >= runs ? pass("clocks paired at each run's blocking copy")
                               : fail("clock pairings: " + std::to_string(clock.pairings));
    }
    tally_profiler_reset();
}

void check_attribution(const std::string &src) {
    std::cout << "\n== attribution (test/gpu/attribution.stmt: A, B on the GPU, C on the CPU)\n";
    tally::Module m = tally::parse_module_file(src + "/test/gpu/attribution.stmt");
    auto plain = compile(m, "host-cuda");
    int w = 1024, h = 1024;
    auto in = buffer<float>({w, h}), out = buffer<float>({w, h});
    std::mt19937 rng(3);
    for (float &v : in) {
        v = std::uniform_real_distribution<float>(0, 1)(rng);
    }
    // Median wall time of `runs` runs with the given work per stage.
    auto run_ms = [&](tally::JITModule &jit, int ra, int rb, int rc, int runs) {
        std::vector<double> t;
        for (int r = 0; r < runs; r++) {
            tally::BoundArguments args = jit.binder().bind({in, out, w, h, ra, rb, rc});
            auto t0 = Clock::now();
            int e = jit.run(args.argv());
            t.push_back(ms_since(t0));
            if (e != 0) {
                fail(std::string("attribution run failed: ") + tally_error_code_name(e));
                return -1.0;
            }
        }
        std::sort(t.begin(), t.end());
        return t[t.size() / 2];
    };
    double base = run_ms(*plain, 0, 0, 0, 5);
    if (base < 0) {
        return;
    }
    // Calibrate each stage to about 25 ms per run.
    const double target_ms = 25;
    int reps[3] = {4096, 4096, 8};
    for (int s = 0; s < 3; s++) {
        for (int round = 0; round < 3; round++) {
            int r[3] = {0, 0, 0};
            r[s] = reps[s];
            double ms = run_ms(*plain, r[0], r[1], r[2], 3) - base;
            double scale = target_ms / std::max(ms, 0.05);
            reps[s] = int(std::min(1e8, std::max(1.0, reps[s] * std::min(scale, 64.0))));
            if (ms > 0.7 * target_ms && ms < 1.3 * target_ms) {
                break;
            }
        }
    }
    // The truth: each stage alone, minus the run without work.
    Stages truth;
    truth.a = run_ms(*plain, reps[0], 0, 0, 7) - base;
    truth.b = run_ms(*plain, 0, reps[1], 0, 7) - base;
    truth.c = run_ms(*plain, 0, 0, reps[2], 7) - base;
    double all = run_ms(*plain, reps[0], reps[1], reps[2], 5);
    std::printf("  reps: A %d, B %d, C %d; unprofiled run %.2f ms (no work %.2f ms)\n", reps[0],
                reps[1], reps[2], all, base);
    std::printf("  truth (timed stages): A %.2f ms, B %.2f ms, C %.2f ms per run\n", truth.a,
                truth.b, truth.c);

    const int runs = 12;
    auto profiled_shares = [&](bool sync, Stages *ms, tally_pipeline_stats *p) {
        tally_profiler_reset();
        auto jit = compile(m, "host-cuda-profile", sync);
        for (int r = 0; r < runs; r++) {
            int e = jit->call({in, out, w, h, reps[0], reps[1], reps[2]});
            if (e != 0) {
                fail(std::string("profiled attribution run failed: ") + tally_error_code_name(e));
                return false;
            }
        }
        if (tally_profiler_get_pipeline_stats("attribution", p) != 0) {
            fail("no profiler stats for 'attribution'");
            return false;
        }
        for (int32_t s = 0; s < p->num_slots; s++) {
            tally_slot_stats st;
            if (tally_profiler_get_slot_stats("attribution", s, &st) != 0) {
                continue;
            }
            double t = double(st.time_ns) / 1e6 / double(p->runs);
            if (std::strcmp(st.name, "A") == 0) {
                ms->a = t;
            } else if (std::strcmp(st.name, "B") == 0) {
                ms->b = t;
            } else if (std::strcmp(st.name, "C") == 0) {
                ms->c = t;
            } else if (std::strcmp(st.name, "B (copy to host)") == 0) {
                ms->copy_back = t;
            }
        }
        std::vector<char> report(1 << 20);
        if (tally_profiler_report_to_buffer(report.data(), report.size(), 0) >= 0) {
            std::cout << "\n-- report, " << (sync ? "with" : "WITHOUT") << " injected syncs\n"
                      << report.data() << "\n";
        }
        return true;
    };
    Stages got, nosync;
    tally_pipeline_stats p{}, pn{};
    if (!profiled_shares(true, &got, &p)) {
        return;
    }
    if (!profiled_shares(false, &nosync, &pn)) {
        return;
    }
    tally_profiler_reset();

    auto pct = [](double x, double total) { return total > 0 ? 100.0 * x / total : 0.0; };
    std::printf("  %-28s %8s %8s %8s\n", "share of A+B+C (%)", "A", "B", "C");
    std::printf("  %-28s %8.1f %8.1f %8.1f\n", "truth", pct(truth.a, truth.total()),
                pct(truth.b, truth.total()), pct(truth.c, truth.total()));
    std::printf("  %-28s %8.1f %8.1f %8.1f\n", "profiled (syncs injected)", pct(got.a, got.total()),
                pct(got.b, got.total()), pct(got.c, got.total()));
    std::printf("  %-28s %8.1f %8.1f %8.1f\n", "profiled without syncs",
                pct(nosync.a, nosync.total()), pct(nosync.b, nosync.total()),
                pct(nosync.c, nosync.total()));
    const double tolerance = 10.0;  // percentage points
    const char *names[3] = {"A", "B", "C"};
    double t[3] = {truth.a, truth.b, truth.c}, g[3] = {got.a, got.b, got.c};
    for (int s = 0; s < 3; s++) {
        double dt = pct(t[s], truth.total()), dg = pct(g[s], got.total());
        char line[160];
        std::snprintf(line, sizeof line,
                      "share of %s: profiled %.1f%%, truth %.1f%% (tolerance %.0f points)",
                      names[s], dg, dt, tolerance);
        std::fabs(dg - dt) <= tolerance ? pass(line) : fail(line);
    }
    uint64_t want_launches = 2 * p.runs;
    p.kernel_launches == want_launches
        ? pass("2 kernel launches per run (" + std::to_string(p.kernel_launches) + ")")
        : fail("kernel launches: " + std::to_string(p.kernel_launches) + ", want " +
               std::to_string(want_launches));
    p.injected_syncs >= p.kernel_launches
        ? pass("a sync after every launch (" + std::to_string(p.injected_syncs) + " syncs)")
        : fail("injected syncs " + std::to_string(p.injected_syncs) + " < launches " +
               std::to_string(p.kernel_launches));
    pn.injected_syncs == 0
        ? pass("the no-sync variant injects none")
        : fail("the no-sync variant injected " + std::to_string(pn.injected_syncs) + " syncs");
    {
        char line[200];
        std::snprintf(line, sizeof line,
                      "without syncs the blocking copy absorbs the GPU's time: 'B (copy to "
                      "host)' %.2f ms > half of A+B's truth %.2f ms",
                      nosync.copy_back, 0.5 * (truth.a + truth.b));
        nosync.copy_back > 0.5 * (truth.a + truth.b) ? pass(line) : fail(line);
    }
    std::printf("  'B (copy to host)': %.2f ms per run with syncs, %.2f ms without: without them "
                "the GPU's time surfaces in that blocking copy (A %.2f ms, B %.2f ms where the "
                "truth is %.2f, %.2f)\n",
                got.copy_back, nosync.copy_back, nosync.a, nosync.b, truth.a, truth.b);
    check_timestamps(m, in, out, w, h, reps, truth, all);
}

}  // namespace

int main(int argc, char **argv) {
    std::string src, only;
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--src" && i + 1 < argc) {
            src = argv[++i];
        } else if (a == "--only" && i + 1 < argc) {
            only = argv[++i];
        } else if (a == "--quick") {
            quick = true;
        } else {
            std::cerr
                << "usage: cuda_check --src ROOT [--quick] [--only apps|kernels|attribution]\n";
            return 2;
        }
    }
    if (src.empty()) {
        std::cerr << "cuda_check: --src ROOT is required\n";
        return 2;
    }
    if (!halide_cuda_device_interface()) {
        std::cerr << "cuda_check: CUDA is unavailable here (the reason is above); this check "
                     "needs an NVIDIA GPU and its driver\n";
        return 2;
    }
    auto t0 = Clock::now();
    try {
        if (only.empty() || only == "kernels") {
            check_kernels(src);
        }
        if (only.empty() || only == "apps") {
            check_apps(src, quick);
        }
        if ((only.empty() && !quick) || only == "attribution") {
            check_attribution(src);
        }
    } catch (const std::exception &e) {
        fail(std::string("exception: ") + e.what());
    }
    halide_device_release(nullptr, halide_cuda_device_interface());
    std::printf("\ncuda_check: %s, %d failure(s), %.1f s\n", failures ? "FAILED" : "passed",
                failures, ms_since(t0) / 1000);
    return failures ? 1 : 0;
}
