// libFuzzer target: the profiler's text report and JSON writers (runtime/src/profiler/report.c) and
// the timeline writer (runtime/src/export/export_trace.c, recording into rings of 64 events so that
// they overflow too), fed by profiled runs the input describes: up to 3 pipelines with arbitrary
// names and targets (quotes, backslashes, control bytes, valid and invalid UTF-8), up to 8 slots of
// any kind with such names, 0 to 4 runs each in exact or sampling mode, and in each run slot
// switches, samples after clock jumps of any size (the testing clock), heap and device allocations
// and frees of any 64-bit size (or up to 2^48 bytes, the sizes a 48-bit address space holds),
// launches, and bursts of up to 4,096 launches or allocations (counts far above what the other
// steps reach).
//
// The property: both reports have the length tally_profiler_report_to_buffer promised; the JSON
// report and the trace are each one valid JSON document (StrictJson.h: RFC 8259, strings in valid
// UTF-8); the text report is bounded (a few hundred bytes per slot line plus the longest name) and
// well-formed: no NUL, no control byte but the line feeds, every line ended. A violated property
// aborts, so libFuzzer keeps the input; crashes, sanitizer reports, leaks and hangs are reported by
// libFuzzer.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "StrictJson.h"
#include "tally_runtime.h"
#include "tally_runtime_testing.h"

namespace {

/** Reads the input front to back: integers in a range, strings with a length byte first; past
 * the end, zeros and empty strings. (libFuzzer mutates such inputs well enough, and the harness
 * then also builds with gcc for the replay test.) */
class Input {
public:
    Input(const uint8_t *data, size_t size) : p(data), end(data + size) {}

    uint64_t u64() {
        uint64_t v = 0;
        for (int i = 0; i < 8 && p < end; i++) {
            v |= uint64_t(*p++) << (8 * i);
        }
        return v;
    }
    /** In [lo, hi], from one byte (or eight when the range is wider than a byte). */
    template <typename T>
    T range(T lo, T hi) {
        const uint64_t span = uint64_t(hi) - uint64_t(lo);
        const uint64_t v = span < 256 ? (p < end ? *p++ : 0) : u64();
        return T(uint64_t(lo) + (span == UINT64_MAX ? v : v % (span + 1)));
    }
    std::string string(size_t max) {
        size_t n = std::min<size_t>(range<size_t>(0, 255) % (max + 1), size_t(end - p));
        std::string s(reinterpret_cast<const char *>(p), n);
        p += n;
        return s;
    }

private:
    const uint8_t *p;
    const uint8_t *end;
};

// The trace writer's formatting step (export/export.h), which the static runtime links: the fuzzer
// checks the text without a file in between.
extern "C" int32_t tally_export_trace_format(char **out, size_t *out_len);

uint64_t fake_now = 1;
uint64_t fake_clock() {
    return __atomic_load_n(&fake_now, __ATOMIC_RELAXED);
}

[[noreturn]] void finding(const std::string &what, const std::string &report) {
    std::fprintf(stderr, "fuzz_report: %s\n--- report:\n%s\n", what.c_str(), report.c_str());
    std::fflush(stderr);
    std::abort();
}

std::string report(int32_t json) {
    const int32_t n = tally_profiler_report_to_buffer(nullptr, 0, json);
    if (n < 0) {
        finding("report_to_buffer(NULL, 0) failed: " + std::to_string(n), "");
    }
    std::string buf(size_t(n) + 1, '\x7f');
    const int32_t m = tally_profiler_report_to_buffer(&buf[0], buf.size(), json);
    if (m != n || buf[size_t(n)] != '\0') {
        finding("the report's length changed between the size query and the write", buf);
    }
    buf.resize(size_t(n));
    return buf;
}

/** An allocation size: any 64-bit value (two of about 2^62 overflowed the profiler's signed
 * "current" bytes: docs/reliability.md, finding 12), or one up to 2^48 bytes, the most a 48-bit
 * address space holds, so that frees can match allocations. */
uint64_t allocation_size(Input &in) {
    return in.range(0, 1) ? in.u64() : in.range<uint64_t>(0, uint64_t(1) << 48);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    tally_testing_set_clock(fake_clock);
    tally_profiler_set_interval_us(1000000);  // the sampler thread stays out of the way
    tally_profiler_trace_record(nullptr, 1, 64);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tally_profiler_reset();
    Input in(data, size);
    size_t longest_name = 0, slot_lines = 0;
    const int pipelines = in.range(0, 3);
    for (int p = 0; p < pipelines; p++) {
        const std::string name = in.string(64);
        const std::string target = in.string(32);
        const int slots = in.range(1, 8);
        std::vector<std::string> names;
        std::vector<const char *> name_ptrs;
        std::vector<int32_t> kinds;
        for (int s = 0; s < slots; s++) {
            names.push_back(in.string(64));
            kinds.push_back(in.range(0, 2));
        }
        for (const std::string &n : names) {
            name_ptrs.push_back(n.c_str());
            longest_name = std::max(longest_name, n.size());
        }
        longest_name = std::max({longest_name, name.size(), target.size()});
        slot_lines += size_t(slots) + 3;
        const int runs = in.range(0, 4);
        const int32_t mode =
            in.range(0, 1) ? TALLY_PROFILER_FLAG_SAMPLING : TALLY_PROFILER_FLAG_EXACT;
        for (int r = 0; r < runs; r++) {
            void *run = tally_profiler_start(nullptr, name.c_str(), target.c_str(), slots,
                                             name_ptrs.data(), kinds.data(), nullptr, mode);
            if (!run) {
                continue;
            }
            const int steps = in.range(0, 16);
            for (int i = 0; i < steps; i++) {
                const int32_t slot = in.range(0, slots - 1);
                const int32_t kind = in.range(0, 1);
                switch (in.range(0, 5)) {
                case 0:
                    tally_profiler_set_current(run, slot);
                    break;
                case 1:
                    __atomic_fetch_add(&fake_now, in.u64() >> in.range(0, 63), __ATOMIC_RELAXED);
                    tally_testing_sample_now();
                    break;
                case 2:
                    tally_profiler_memory_allocate(run, slot, kind, allocation_size(in));
                    break;
                case 3:
                    tally_profiler_memory_free(run, slot, kind, allocation_size(in));
                    break;
                case 4:
                    tally_profiler_count_launch();
                    break;
                default: {
                    const int n = in.range(0, 4095);
                    const uint64_t bytes = allocation_size(in);
                    for (int k = 0; k < n; k++) {
                        if (kind) {
                            tally_profiler_count_launch();
                        } else {
                            tally_profiler_memory_allocate(run, slot, TALLY_MEMORY_HEAP, bytes);
                        }
                    }
                    break;
                }
                }
            }
            tally_profiler_end(nullptr, run);
        }
    }
    const std::string json = report(1);
    if (std::getenv("TALLY_FUZZ_PRINT_REPORTS")) {  // to look at what an input produces
        std::printf("%s%s", json.c_str(), report(0).c_str());
    }
    const std::string problem = tally_fuzz::StrictJson::check(json);
    if (!problem.empty()) {
        finding("the JSON report is not valid JSON: " + problem, json);
    }
    char *trace = nullptr;
    size_t trace_len = 0;
    if (tally_export_trace_format(&trace, &trace_len) != 0) {
        finding("the trace could not be formatted", json);
    }
    const std::string trace_text(trace, trace_len);
    std::free(trace);
    const std::string trace_problem = tally_fuzz::StrictJson::check(trace_text);
    if (!trace_problem.empty()) {
        finding("the trace is not valid JSON: " + trace_problem, trace_text);
    }
    const std::string text = report(0);
    // About 30 header lines a pipeline and one line a slot, each at most the longest name plus
    // the columns' width (under 200 bytes).
    const size_t bound = (size_t(pipelines) * 30 + slot_lines) * (longest_name + 200);
    if (text.size() > bound) {
        finding("the text report is longer than its bound " + std::to_string(bound), text);
    }
    for (size_t i = 0; i < text.size(); i++) {
        const unsigned char c = (unsigned char)text[i];
        if ((c < 0x20 && c != '\n') || c == 0x7f) {
            finding("a control byte in the text report at byte " + std::to_string(i), text);
        }
    }
    if (!text.empty() && text.back() != '\n') {
        finding("the text report's last line is not ended", text);
    }
    return 0;
}
