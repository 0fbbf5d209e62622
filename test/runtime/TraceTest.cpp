// The timeline export (tally_profiler_write_trace) against a scripted clock: a run whose slot
// switches, worker task and allocations happen at chosen instants must give exactly those slices
// (microseconds with the nanoseconds as three decimals), counters and names; a ring smaller than
// what a thread records keeps its newest records and counts the rest dropped, exactly, in the
// file and in the report. Importer rules on real traces of real apps are checked by
// test/export/check_trace.py.

#include "Json.h"
#include "TestUtil.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using tally_test::fake_time_ns;
using tally_test::Json;
using tally_test::JsonParser;

constexpr uint64_t kT0 = 7000000000ull;  // the script's time 0 on the fake clock (7 s)

void at_ns(uint64_t t) {
    fake_time_ns() = kT0 + t;
}

class Trace : public tally_test::ProfilerTest {
protected:
    void SetUp() override {
        ProfilerTest::SetUp();
        ASSERT_EQ(tally_profiler_set_default_mode(TALLY_PROFILER_FLAG_EXACT), 0);
        tally_testing_set_clock(tally_test::fake_clock);
        at_ns(0);
        ASSERT_EQ(tally_profiler_trace_record(nullptr, 1, 0), 0);
    }
    void TearDown() override {
        tally_profiler_trace_record(nullptr, 0, 262144);  // the default size
        ProfilerTest::TearDown();
    }

    // Writes the trace and returns its text (and, parsed, *out).
    std::string write(Json *out) {
        std::string path = ::testing::TempDir() + "tally_trace_test.json";
        EXPECT_EQ(tally_profiler_write_trace(nullptr, path.c_str()), 0);
        std::ifstream in(path);
        std::stringstream ss;
        ss << in.rdbuf();
        std::remove(path.c_str());
        std::string error;
        EXPECT_TRUE(JsonParser(ss.str()).parse(out, &error)) << error << "\n" << ss.str();
        return ss.str();
    }
};

std::vector<const Json *> events_with(const Json &trace, const std::string &ph) {
    std::vector<const Json *> out;
    for (const Json &e : trace["traceEvents"].items) {
        if (e["ph"].str == ph) {
            out.push_back(&e);
        }
    }
    return out;
}

// A name with a quote, a backslash, a control byte, UTF-8 and a byte that is not UTF-8.
const char *const kPipeline = "p\"q\\\x01 \xc3\xa9\xff";
const char *const kPipelineDecoded = "p\"q\\\x01 \xc3\xa9\xef\xbf\xbd";
const char *const kNames[] = {"overhead", "f", "f (copy to host)"};
const int32_t kKinds[] = {TALLY_SLOT_FUNC, TALLY_SLOT_FUNC, TALLY_SLOT_COPY_TO_HOST};

// One run on the calling thread with a worker task on another thread:
//   main:   overhead [0, 10 us), f [10, 30), copy [30, 31.5), f [31.5, 50)
//   worker: f [12, 20.25)
//   heap:   +4096 at 25 us (main), +100 at 15 us (worker), -100 at 18 us, -4096 at 40 us
TEST_F(Trace, AScriptedRunGivesExactSlicesCountersAndNames) {
    at_ns(0);
    void *inst =
        tally_profiler_start(nullptr, kPipeline, "host-profile", 3, kNames, kKinds, nullptr, 0);
    ASSERT_NE(inst, nullptr);
    at_ns(10000);
    tally_profiler_set_current(inst, 1);
    std::thread worker([&] {
        at_ns(12000);
        void *ctx = tally_profiler_thread_begin(inst);
        tally_profiler_set_current(ctx, 1);
        at_ns(15000);
        tally_profiler_memory_allocate(inst, 1, TALLY_MEMORY_HEAP, 100);
        at_ns(18000);
        tally_profiler_memory_free(inst, 1, TALLY_MEMORY_HEAP, 100);
        at_ns(20250);
        tally_profiler_thread_end(ctx);
    });
    worker.join();
    at_ns(25000);
    tally_profiler_memory_allocate(inst, 1, TALLY_MEMORY_HEAP, 4096);
    at_ns(30000);
    tally_profiler_set_current(inst, 2);
    at_ns(31500);
    tally_profiler_set_current(inst, 1);
    at_ns(40000);
    tally_profiler_memory_free(inst, 1, TALLY_MEMORY_HEAP, 4096);
    at_ns(50000);
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);

    Json trace;
    std::string text = write(&trace);
    EXPECT_EQ(trace["displayTimeUnit"].str, "ns");
    EXPECT_EQ(trace["otherData"]["dropped_events"].number, 0);

    // Slices, by thread: the main thread recorded first.
    std::map<int, std::vector<const Json *>> by_tid;
    for (const Json *x : events_with(trace, "X")) {
        EXPECT_EQ((*x)["pid"].number, 1);
        by_tid[int((*x)["tid"].number)].push_back(x);
    }
    ASSERT_EQ(by_tid.size(), 2u) << text;
    const std::vector<const Json *> &main_slices = by_tid.begin()->second;
    const std::vector<const Json *> &worker_slices = by_tid.rbegin()->second;
    struct Want {
        const char *name, *cat;
        double ts, dur;
    };
    const Want want_main[] = {{"overhead", "func", 7000000.0, 10.0},
                              {"f", "func", 7000010.0, 20.0},
                              {"f (copy to host)", "copy_to_host", 7000030.0, 1.5},
                              {"f", "func", 7000031.5, 18.5}};
    ASSERT_EQ(main_slices.size(), 4u) << text;
    for (size_t i = 0; i < 4; i++) {
        EXPECT_EQ((*main_slices[i])["name"].str, want_main[i].name) << i;
        EXPECT_EQ((*main_slices[i])["cat"].str, want_main[i].cat) << i;
        EXPECT_EQ((*main_slices[i])["ts"].number, want_main[i].ts) << i;
        EXPECT_EQ((*main_slices[i])["dur"].number, want_main[i].dur) << i;
    }
    ASSERT_EQ(worker_slices.size(), 1u) << text;
    EXPECT_EQ((*worker_slices[0])["name"].str, "f");
    EXPECT_EQ((*worker_slices[0])["ts"].number, 7000012.0);
    EXPECT_EQ((*worker_slices[0])["dur"].number, 8.25);
    // Sub-microsecond decimals are written as such (nanoseconds exactly), and no slice ends past
    // the next one's start when a reader adds ts + dur in doubles.
    EXPECT_NE(text.find("\"ts\":7000031.500,\"dur\":18.500"), std::string::npos) << text;
    EXPECT_NE(text.find("\"ts\":7000012.000,\"dur\":8.250"), std::string::npos) << text;
    for (size_t i = 0; i + 1 < main_slices.size(); i++) {
        EXPECT_LE((*main_slices[i])["ts"].number + (*main_slices[i])["dur"].number,
                  (*main_slices[i + 1])["ts"].number)
            << i;
    }

    // The heap counter: the pipeline's live bytes after each allocation and free, in time order
    // per thread.
    std::vector<std::pair<double, double>> heap;
    for (const Json *c : events_with(trace, "C")) {
        EXPECT_EQ((*c)["name"].str, "heap");
        heap.emplace_back((*c)["ts"].number, (*c)["args"]["bytes"].number);
    }
    std::sort(heap.begin(), heap.end());
    const std::vector<std::pair<double, double>> want_heap = {
        {7000015.0, 100}, {7000018.0, 0}, {7000025.0, 4096}, {7000040.0, 0}};
    EXPECT_EQ(heap, want_heap);

    // Names: the process (the escaped pipeline name, read back), both threads.
    std::map<std::string, std::string> names;
    for (const Json *m : events_with(trace, "M")) {
        std::string key = (*m)["name"].str;
        if (key == "thread_name") {
            key += " " + std::to_string(int((*m)["tid"].number));
        }
        names[key] = (*m)["args"]["name"].str;
    }
    EXPECT_EQ(names["process_name"], kPipelineDecoded);
    EXPECT_EQ(names["thread_name " + std::to_string(by_tid.begin()->first)],
              "host thread " + std::to_string(by_tid.begin()->first));
    EXPECT_EQ(names["thread_name " + std::to_string(by_tid.rbegin()->first)],
              "host thread " + std::to_string(by_tid.rbegin()->first));
}

// Recording off: runs leave no records at all.
TEST_F(Trace, NothingIsRecordedWhileRecordingIsOff) {
    ASSERT_EQ(tally_profiler_trace_record(nullptr, 0, 0), 0);
    void *inst =
        tally_profiler_start(nullptr, "off", "host-profile", 3, kNames, kKinds, nullptr, 0);
    at_ns(1000);
    tally_profiler_set_current(inst, 1);
    at_ns(2000);
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);
    Json trace;
    write(&trace);
    EXPECT_EQ(trace["traceEvents"].items.size(), 0u);
}

// A thread recording 102 records into a ring of 16 keeps the newest 16 and drops exactly 86: the
// file, the text report and the JSON report say so, and what is kept still makes valid slices.
TEST_F(Trace, AFullRingKeepsTheNewestRecordsAndCountsTheRestDropped) {
    ASSERT_EQ(tally_profiler_trace_record(nullptr, 1, 16), 0);
    std::thread t([] {  // a fresh thread: its ring is made with the new size
        at_ns(0);
        void *inst =
            tally_profiler_start(nullptr, "ring", "host-profile", 3, kNames, kKinds, nullptr, 0);
        for (int i = 1; i <= 100; i++) {  // 100 switches; the start and the end record one each
            at_ns(uint64_t(i) * 1000);
            tally_profiler_set_current(inst, 1 + (i & 1));
        }
        at_ns(101000);
        tally_profiler_end(nullptr, inst);
    });
    t.join();
    Json trace;
    std::string text = write(&trace);
    EXPECT_EQ(trace["otherData"]["dropped_events"].number, 86) << text;
    EXPECT_EQ(trace["otherData"]["ring_events_per_thread"].number, 16);
    // Records 87..102 survive: the switches at 86..100 us and the end at 101 us, so 15 slices of
    // 1 us each from 86 us on.
    std::vector<const Json *> slices = events_with(trace, "X");
    ASSERT_EQ(slices.size(), 15u) << text;
    for (size_t i = 0; i < slices.size(); i++) {
        EXPECT_EQ((*slices[i])["ts"].number, 7000086.0 + double(i)) << i;
        EXPECT_EQ((*slices[i])["dur"].number, 1.0) << i;
    }
    EXPECT_NE(tally_test::report_text(0).find("trace: 86 events dropped (ring of 16 events"),
              std::string::npos);
    Json report;
    std::string error;
    ASSERT_TRUE(JsonParser(tally_test::report_text(1)).parse(&report, &error)) << error;
    EXPECT_EQ(report["trace"]["dropped_events"].number, 86);
    EXPECT_EQ(report["trace"]["ring_events_per_thread"].number, 16);
}

// Threads record (real clock, rings small enough to wrap) while the trace is written again and
// again: every file is valid JSON whose slices have dur >= 0, and nothing blocks the recorders.
// (Run under ThreadSanitizer by the tsan job: the rings are read while their owners write.)
TEST_F(Trace, WritingWhileThreadsRecordGivesValidFiles) {
    tally_testing_set_clock(nullptr);
    ASSERT_EQ(tally_profiler_trace_record(nullptr, 1, 256), 0);
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; t++) {
        threads.emplace_back([&stop, t] {
            std::string name = "concurrent" + std::to_string(t);
            while (!stop.load()) {
                void *inst = tally_profiler_start(nullptr, name.c_str(), "host-profile", 3, kNames,
                                                  kKinds, nullptr, 0);
                for (int i = 0; i < 100; i++) {
                    tally_profiler_set_current(inst, 1 + (i & 1));
                    tally_profiler_memory_allocate(inst, 1, TALLY_MEMORY_HEAP, 64);
                    tally_profiler_memory_free(inst, 1, TALLY_MEMORY_HEAP, 64);
                }
                tally_profiler_end(nullptr, inst);
            }
        });
    }
    for (int i = 0; i < 20; i++) {
        Json trace;
        write(&trace);
        for (const Json *x : events_with(trace, "X")) {
            ASSERT_GE((*x)["dur"].number, 0);
        }
    }
    stop = true;
    for (std::thread &t : threads) {
        t.join();
    }
}

TEST_F(Trace, BadArgumentsAreReported) {
    tally_test::MessageCapture capture;
    EXPECT_EQ(tally_profiler_write_trace(nullptr, ""), TALLY_ERROR_BAD_ARGUMENT);
    EXPECT_EQ(tally_profiler_trace_record(nullptr, 1, uint64_t(1) << 40), TALLY_ERROR_BAD_ARGUMENT);
    EXPECT_EQ(tally_profiler_write_trace(nullptr, "/nonexistent-dir/x/trace.json"), TALLY_ERROR_IO);
    EXPECT_EQ(capture.errors().size(), 3u);
}

}  // namespace
