// Exact mode against a scripted clock: every call the generated code makes (slot switches, copy
// slots, worker begin/end, nested workers, device waits, Halide's profiler ABI, one-time rows) is
// replayed at chosen instants, on the threads the script names, and every slot must get exactly
// the nanoseconds the rule says: while n worker contexts work, each bills 1/n of the time to its
// slot; otherwise the main context bills all of it; average threads integrate the working threads
// over each slot's busy time. Nothing here depends on the machine's speed or load.

#include "Json.h"
#include "TestUtil.h"

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <pthread.h>
#include <string>
#include <thread>
#include <time.h>
#include <utility>
#include <vector>

namespace {

using tally_test::fake_time_ns;

constexpr uint64_t kMs = 1000000;
constexpr uint64_t kUs = 1000;
constexpr uint64_t kT0 = 5000 * kMs;  // the script's time 0 on the fake clock

void at_ns(uint64_t t) {
    fake_time_ns() = kT0 + t;
}

void at_us(uint64_t us) {
    at_ns(us * kUs);
}

void at_ms(uint64_t ms) {
    at_ns(ms * kMs);
}

// Runs steps in order, each on the thread it names: 0 is the calling thread, 1..n others. A step
// starts only after the previous one returned, so the clock and the calls interleave exactly as
// written however the threads are scheduled.
class Script {
public:
    using Step = std::pair<int, std::function<void()>>;

    void run(int num_threads, const std::vector<Step> &steps) {
        steps_ = &steps;
        next_ = 0;
        std::vector<std::thread> threads;
        for (int t = 1; t <= num_threads; t++) {
            threads.emplace_back([this, t] { work(t); });
        }
        work(0);
        for (std::thread &t : threads) {
            t.join();
        }
    }

private:
    void work(int me) {
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            cv_.wait(lock, [&] { return next_ == steps_->size() || (*steps_)[next_].first == me; });
            if (next_ == steps_->size()) {
                return;
            }
            const std::function<void()> &fn = (*steps_)[next_].second;
            lock.unlock();
            fn();
            lock.lock();
            next_++;
            cv_.notify_all();
        }
    }

    const std::vector<Step> *steps_ = nullptr;
    size_t next_ = 0;
    std::mutex mutex_;
    std::condition_variable cv_;
};

class ProfilerExact : public tally_test::ProfilerTest {
protected:
    void SetUp() override {
        ProfilerTest::SetUp();
        ASSERT_EQ(tally_profiler_set_default_mode(TALLY_PROFILER_FLAG_EXACT), 0);
        tally_testing_set_clock(tally_test::fake_clock);
        at_ms(0);
    }
};

const char *const kNames[] = {"overhead", "f", "g", "in (copy to device)", "g (copy to host)"};
const int32_t kKinds[] = {TALLY_SLOT_FUNC, TALLY_SLOT_FUNC, TALLY_SLOT_FUNC,
                          TALLY_SLOT_COPY_TO_DEVICE, TALLY_SLOT_COPY_TO_HOST};

void *start(const char *name) {
    void *inst = tally_profiler_start(nullptr, name, "host-profile", 5, kNames, kKinds, nullptr, 0);
    EXPECT_NE(inst, nullptr);
    return inst;
}

// Every slot's time over the pipeline's runs, in ns.
void expect_times_ns(const char *pipeline, const std::vector<uint64_t> &want) {
    for (size_t s = 0; s < want.size(); s++) {
        EXPECT_EQ(tally_test::slot_stats(pipeline, int32_t(s)).time_ns, want[s])
            << pipeline << " slot " << s << " (" << kNames[s] << ")";
    }
}

// produce f { produce g { ... } consume g { ... } }: exclusive times, no sample involved.
TEST_F(ProfilerExact, NestedProduceConsumeBillsExclusiveTimes) {
    void *inst = start("nested");
    at_us(250);
    tally_profiler_set_current(inst, 1);  // produce f
    at_ms(2);
    tally_profiler_set_current(inst, 2);  // produce g inside f
    at_ms(5);
    tally_profiler_set_current(inst, 1);  // consume g: back to f
    at_ms(8);
    tally_profiler_set_current(inst, 0);  // after f
    at_us(9250);
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);

    tally_pipeline_stats p = tally_test::pipeline_stats("nested");
    EXPECT_EQ(p.flags, TALLY_PROFILER_FLAG_EXACT);
    EXPECT_EQ(p.runs, 1u);
    EXPECT_EQ(p.total_ns, 9 * kMs + 250 * kUs);
    EXPECT_EQ(p.samples, 0u);
    expect_times_ns("nested", {1 * kMs + 500 * kUs, 4 * kMs + 750 * kUs, 3 * kMs, 0, 0});
    EXPECT_DOUBLE_EQ(tally_test::slot_stats("nested", 1).average_threads, 1.0);
    EXPECT_DOUBLE_EQ(p.average_threads, 1.0);
}

// A run shorter than one sampling interval (1 ms): its stage gets its time, overhead only what
// was overhead. The sampling modes bill such a run to whatever slot is current at its end.
TEST_F(ProfilerExact, ARunShorterThanASamplePeriodLosesNothing) {
    for (int run = 0; run < 3; run++) {
        at_ms(100 * uint64_t(run));
        void *inst = start("short");
        at_ns(100 * uint64_t(run) * kMs + 3 * kUs);
        tally_profiler_set_current(inst, 1);
        at_ns(100 * uint64_t(run) * kMs + 603 * kUs);  // 0.6 ms of f
        tally_profiler_set_current(inst, 0);
        at_ns(100 * uint64_t(run) * kMs + 610 * kUs);
        ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);
    }
    expect_times_ns("short", {3 * 10 * kUs, 3 * 600 * kUs, 0, 0, 0});
    EXPECT_EQ(tally_test::pipeline_stats("short").total_ns, 3 * 610 * kUs);
}

// A run that ends while its stage is still current (the stage's end and the run's are one
// instant): the stage, not overhead, gets the last stretch.
TEST_F(ProfilerExact, ASingleRunEndingInItsStageBillsTheStage) {
    void *inst = start("single");
    tally_profiler_set_current(inst, 2);
    at_us(600);
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);
    expect_times_ns("single", {0, 0, 600 * kUs, 0, 0});
}

// A slow device: a copy to the host blocks 3 ms (the thread waits: 0 threads), a copy to the
// device takes 2 ms of host work.
int32_t slow_copy_to_host(void *, halide_buffer_t *) {
    fake_time_ns() += 3 * kMs;
    return 0;
}
int32_t slow_copy_to_device(void *, halide_buffer_t *) {
    fake_time_ns() += 2 * kMs;
    return 0;
}
int32_t slow_sync_global(void *, const halide_device_interface_t *) {
    fake_time_ns() += 4 * kMs;
    return 0;
}

halide_device_interface_t slow_device() {
    halide_device_interface_t d = *halide_host_device_interface();
    d.name = "slow";
    d.copy_to_host = slow_copy_to_host;
    d.copy_to_device = slow_copy_to_device;
    d.device_sync_global = slow_sync_global;
    return d;
}

TEST_F(ProfilerExact, CopySlotsGetTheirCopiesAndWaitsCountNoThreads) {
    halide_device_interface_t device = slow_device();
    float data[64] = {0};
    halide_dimension_t dim = {0, 64, 1, 0};
    halide_buffer_t buf{};
    buf.host = reinterpret_cast<uint8_t *>(data);
    buf.type = {halide_type_float, 32, 1};
    buf.dimensions = 1;
    buf.dim = &dim;

    void *inst = start("copies");
    tally_profiler_set_current(inst, 3);  // in (copy to device)
    tally_buffer_set_host_dirty(&buf, true);
    ASSERT_EQ(halide_copy_to_device(nullptr, &buf, &device), 0);  // 0 -> 2 ms
    tally_profiler_set_current(inst, 2);                          // g
    at_ms(3);
    ASSERT_EQ(halide_device_sync_global(nullptr, &device), 0);  // 3 -> 7 ms, waiting
    tally_buffer_set_device_dirty(&buf, true);
    tally_profiler_set_current(inst, 4);               // g (copy to host)
    ASSERT_EQ(halide_copy_to_host(nullptr, &buf), 0);  // 7 -> 10 ms, waiting
    tally_profiler_set_current(inst, 0);
    at_ms(11);
    ASSERT_EQ(halide_device_free(nullptr, &buf), 0);
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);

    expect_times_ns("copies", {1 * kMs, 0, 5 * kMs, 2 * kMs, 3 * kMs});
    EXPECT_DOUBLE_EQ(tally_test::slot_stats("copies", 3).average_threads, 1.0);
    EXPECT_DOUBLE_EQ(tally_test::slot_stats("copies", 2).average_threads, 1.0 / 5.0);
    EXPECT_DOUBLE_EQ(tally_test::slot_stats("copies", 4).average_threads, 0.0);
    EXPECT_EQ(tally_test::slot_stats("copies", 3).copies, 1u);
    EXPECT_EQ(tally_test::slot_stats("copies", 4).copies, 1u);
    // Working: 2 + 1 + 1 ms of 11.
    EXPECT_DOUBLE_EQ(tally_test::pipeline_stats("copies").average_threads, 4.0 / 11.0);
}

// Two workers on two threads of a parallel loop of f; one switches to g. While both work, each
// bills half of every nanosecond; the main context bills only before and after the loop.
//   main: start 0, f at 0; workers A, B begin at 1; A -> g at 5; B ends at 7; A ends at 9;
//   main -> overhead at 10; end at 11.
TEST_F(ProfilerExact, ParallelWorkersSplitTheWallTime) {
    void *inst = nullptr;
    void *a = nullptr, *b = nullptr;
    Script script;
    script.run(2, {
                      {0, [&] { inst = start("par"), tally_profiler_set_current(inst, 1); }},
                      {0, [&] { at_ms(1); }},
                      {1, [&] { a = tally_profiler_thread_begin(inst); }},
                      {2, [&] { b = tally_profiler_thread_begin(inst); }},
                      {1, [&] { at_ms(5), tally_profiler_set_current(a, 2); }},
                      {2, [&] { at_ms(7), tally_profiler_thread_end(b); }},
                      {1, [&] { at_ms(9), tally_profiler_thread_end(a); }},
                      {0, [&] { at_ms(10), tally_profiler_set_current(inst, 0); }},
                      {0, [&] { at_ms(11), tally_profiler_end(nullptr, inst); }},
                  });
    // f: main 1 + 1, A and B 4 ms at half each, B 2 ms alone at half; g: A 2 ms at half, 2 alone.
    expect_times_ns("par", {1 * kMs, 7 * kMs, 3 * kMs, 0, 0});
    // f busy: main 2 (1 thread), A 4 and B 6 (2 threads); g busy: A 2 (2 threads), 2 (1 thread).
    EXPECT_DOUBLE_EQ(tally_test::slot_stats("par", 1).average_threads, 22.0 / 12.0);
    EXPECT_DOUBLE_EQ(tally_test::slot_stats("par", 2).average_threads, 6.0 / 4.0);
    // The run: 1 + 6 x 2 + 2 x 1 + 2 thread-ms in 11 ms.
    EXPECT_DOUBLE_EQ(tally_test::pipeline_stats("par").average_threads, 17.0 / 11.0);
}

// A worker that waits on the device: it still bills its slot, with fewer working threads.
TEST_F(ProfilerExact, AWorkerWaitingOnTheDeviceCountsNoThread) {
    halide_device_interface_t device = slow_device();
    void *inst = start("wait");
    tally_profiler_set_current(inst, 1);
    void *w = tally_profiler_thread_begin(inst);
    at_ms(1);
    ASSERT_EQ(halide_device_sync_global(nullptr, &device), 0);  // 1 -> 5 ms
    at_ms(6);
    tally_profiler_thread_end(w);
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);
    expect_times_ns("wait", {0, 6 * kMs, 0, 0, 0});
    EXPECT_DOUBLE_EQ(tally_test::slot_stats("wait", 1).average_threads, 2.0 / 6.0);
}

// A parallel loop nested in a task on the same thread: only the innermost context works, the
// outer one resumes when the inner ends.
TEST_F(ProfilerExact, NestedWorkersBillOnlyTheInnermost) {
    void *inst = start("nest");
    tally_profiler_set_current(inst, 1);
    void *outer = tally_profiler_thread_begin(inst);
    tally_profiler_set_current(outer, 2);
    at_ms(1);
    void *inner = tally_profiler_thread_begin(outer);
    tally_profiler_set_current(inner, 1);
    at_ms(3);
    tally_profiler_thread_end(inner);
    at_ms(4);
    tally_profiler_thread_end(outer);
    at_ms(6);
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);
    expect_times_ns("nest", {0, 2 * kMs + 2 * kMs, 2 * kMs, 0, 0});
    EXPECT_DOUBLE_EQ(tally_test::slot_stats("nest", 1).average_threads, 1.0);
    EXPECT_DOUBLE_EQ(tally_test::slot_stats("nest", 2).average_threads, 1.0);
}

// Two runs of one pipeline in flight at once on two threads, interleaved: each bills only its
// own switches, and the totals add up.
//   X (thread 1): start 0, f at 0, g at 3, end 5.   Y (thread 2): start 1, f at 2, end 4.
TEST_F(ProfilerExact, ConcurrentRunsAreIndependent) {
    void *x = nullptr, *y = nullptr;
    Script script;
    script.run(2, {
                      {1, [&] { x = start("conc"), tally_profiler_set_current(x, 1); }},
                      {2, [&] { at_ms(1), y = start("conc"); }},
                      {2, [&] { at_ms(2), tally_profiler_set_current(y, 1); }},
                      {1, [&] { at_ms(3), tally_profiler_set_current(x, 2); }},
                      {2, [&] { at_ms(4), tally_profiler_end(nullptr, y); }},
                      {1, [&] { at_ms(5), tally_profiler_end(nullptr, x); }},
                  });
    tally_pipeline_stats p = tally_test::pipeline_stats("conc");
    EXPECT_EQ(p.runs, 2u);
    EXPECT_EQ(p.total_ns, 8 * kMs);
    expect_times_ns("conc", {1 * kMs, 3 * kMs + 2 * kMs, 2 * kMs, 0, 0});
}

// Real concurrency, on the real clock (for ThreadSanitizer and for the invariants, not for
// timing): 4 threads each make 200 runs of one pipeline, every run with 2 worker threads that
// switch slots while the run's thread switches its own. Every run is merged once, the slot times
// add up to the total wall time, and no average thread count exceeds the threads that worked.
TEST_F(ProfilerExact, ConcurrentRunsWithConcurrentWorkersKeepTheInvariants) {
    tally_testing_set_clock(nullptr);
    constexpr int kThreads = 4, kRuns = 200;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; t++) {
        threads.emplace_back([] {
            for (int r = 0; r < kRuns; r++) {
                void *inst = start("real");
                tally_profiler_set_current(inst, 1);
                std::thread workers[2];
                for (int w = 0; w < 2; w++) {
                    workers[w] = std::thread([inst, w] {
                        void *c = tally_profiler_thread_begin(inst);
                        for (int i = 0; i < 50; i++) {
                            tally_profiler_set_current(c, 1 + ((i + w) & 1));
                        }
                        tally_profiler_thread_end(c);
                    });
                }
                tally_profiler_set_current(inst, 2);
                for (std::thread &w : workers) {
                    w.join();
                }
                tally_profiler_set_current(inst, 0);
                tally_profiler_end(nullptr, inst);
            }
        });
    }
    for (std::thread &t : threads) {
        t.join();
    }
    tally_pipeline_stats p = tally_test::pipeline_stats("real");
    EXPECT_EQ(p.runs, uint64_t(kThreads * kRuns));
    uint64_t sum = 0;
    for (int32_t s = 0; s < 5; s++) {
        tally_slot_stats st = tally_test::slot_stats("real", s);
        sum += st.time_ns;
        EXPECT_LE(st.average_threads, 2.0 + 1e-9) << s;
    }
    EXPECT_EQ(sum, p.total_ns);
    EXPECT_LE(p.average_threads, 2.0 + 1e-9);
}

// One-time costs (a kernel compiled in the first run) go to their own row, not to the slot
// current around them; the report prints the row.
TEST_F(ProfilerExact, OneTimeCostsGetTheirOwnRow) {
    void *inst = start("once");
    tally_profiler_set_current(inst, 1);
    at_ms(1);
    int32_t token = tally_profiler_one_time_begin(TALLY_ONE_TIME_COMPILE);
    EXPECT_EQ(token, 1);
    at_ms(31);
    tally_profiler_one_time_end(token);
    at_ms(33);
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);
    expect_times_ns("once", {0, 3 * kMs, 0, 0, 0});
    std::string text = tally_test::report_text(0);
    EXPECT_NE(text.find("\n    (kernel compile)         30.000    90.9        0\n"),
              std::string::npos)
        << text;
    EXPECT_EQ(text.find("(device init)"), std::string::npos) << text;
    tally_test::Json root;
    ASSERT_TRUE(tally_test::JsonParser(tally_test::report_text(1)).parse(&root, nullptr));
    EXPECT_EQ(root["pipelines"][0]["kernel_compile_ns"].number, 30e6);
    EXPECT_EQ(root["pipelines"][0]["device_init_ns"].number, 0);
    uint64_t ns = 0;
    EXPECT_EQ(tally_profiler_get_one_time_ns_by_index(0, TALLY_ONE_TIME_COMPILE, &ns), 0);
    EXPECT_EQ(ns, 30 * kMs);
    EXPECT_EQ(tally_profiler_get_one_time_ns_by_index(0, 2, &ns), TALLY_ERROR_BAD_ARGUMENT);
    // Outside a run there is nothing to bill.
    EXPECT_EQ(tally_profiler_one_time_begin(TALLY_ONE_TIME_DEVICE_INIT), -1);
    tally_profiler_one_time_end(-1);
}

// The test thread's CPU time (whichever thread reads it), as a clock that stands still while the
// thread is preempted: a busy machine cannot make the calls around the initialisation look long.
clockid_t g_test_thread_cpu;
uint64_t test_thread_cpu_clock() {
    timespec ts;
    clock_gettime(g_test_thread_cpu, &ts);
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

// The device back end's initialisation in a run (here Vulkan's, on the first use of its interface
// in this process) is billed to the (device init) row, not to the slot that was current. Timed on
// the thread's CPU clock: the initialisation (loader, driver, device) is milliseconds of this
// thread's work, the profiler calls around it microseconds, whatever else the machine runs.
TEST_F(ProfilerExact, DeviceInitialisationIsAOneTimeRow) {
    ASSERT_EQ(pthread_getcpuclockid(pthread_self(), &g_test_thread_cpu), 0);
    tally_testing_set_clock(test_thread_cpu_clock);
    void *inst = start("init");
    tally_profiler_set_current(inst, 1);
    const halide_device_interface_t *vulkan = halide_vulkan_device_interface();
    tally_profiler_set_current(inst, 0);
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);
    tally_testing_set_clock(nullptr);
    if (!vulkan) {
        GTEST_SKIP() << "no Vulkan device";
    }
    uint64_t init_ns = 0;
    ASSERT_EQ(tally_profiler_get_one_time_ns_by_index(0, TALLY_ONE_TIME_DEVICE_INIT, &init_ns), 0);
    EXPECT_GT(init_ns, 0u);
    // Initialisation is the run's only work: the func's time is only the calls around it.
    tally_slot_stats f = tally_test::slot_stats("init", 1);
    EXPECT_LT(f.time_ns, init_ns);
}

// Halide's profiler ABI (IR that Halide instrumented) in exact mode: the main thread goes idle
// around the parallel loop, each task's worker context bills its func.
struct HalideClosure {
    halide_profiler_state *state;
    int token;
    int func;
    uint64_t ms;
};

int halide_task(void *, int, uint8_t *closure) {
    auto *c = reinterpret_cast<HalideClosure *>(closure);
    halide_profiler_incr_active_threads(c->state);
    halide_profiler_set_current_func(c->state, c->token, c->func, nullptr);
    fake_time_ns() += c->ms * kMs;
    halide_profiler_decr_active_threads(c->state);
    return 0;
}

TEST_F(ProfilerExact, HalideProfilerAbiRunsAreExact) {
    tally_set_num_threads(1);  // the tasks run on this thread, in order
    const char *const names[] = {"overhead", "halide_malloc", "halide_free", "s1", "s2"};
    uint64_t table[5];
    for (int i = 0; i < 5; i++) {
        table[i] = uint64_t(uintptr_t(names[i]));
    }
    int token = halide_profiler_pipeline_start(nullptr, "hal", 5, table);
    ASSERT_GE(token, 0);
    halide_profiler_state *state = halide_profiler_get_state();
    halide_profiler_incr_active_threads(state);
    at_ms(1);  // overhead
    halide_profiler_set_current_func(state, token, 3, nullptr);
    at_ms(2);  // s1 on the main thread
    halide_profiler_decr_active_threads(state);
    HalideClosure c{state, token, 4, 3};
    EXPECT_EQ(halide_do_par_for(nullptr, halide_task, 0, 2, reinterpret_cast<uint8_t *>(&c)), 0);
    // 2 tasks of 3 ms of s2; the main context was idle and billed nothing meanwhile.
    halide_profiler_incr_active_threads(state);
    at_ms(9);  // s1 again (the main context's func)
    halide_profiler_set_current_func(state, token, 0, nullptr);
    at_ms(10);
    halide_profiler_decr_active_threads(state);
    halide_profiler_pipeline_end(nullptr, state);
    tally_set_num_threads(0);

    tally_pipeline_stats p = tally_test::pipeline_stats("hal");
    EXPECT_EQ(p.flags, TALLY_PROFILER_FLAG_EXACT);
    EXPECT_EQ(p.total_ns, 10 * kMs);
    const uint64_t want[5] = {2 * kMs, 0, 0, 2 * kMs, 6 * kMs};
    for (int32_t f = 0; f < 5; f++) {
        EXPECT_EQ(tally_test::slot_stats("hal", f).time_ns, want[f]) << names[f];
    }
}

// Tasks run by the thread pool: a task's worker context lingers after the task (its thread's next
// task of the run takes it back without a clock read or a shared write), so the pool's own time
// between two tasks goes to the loop's slot; the pool ends it before the loop returns.
struct PoolClosure {
    void *inst;
    int32_t slot;
    uint64_t task_ns;   // in the task, between begin and end
    uint64_t after_ns;  // after the task's end, still inside the task function (the pool's time)
    std::vector<void *> contexts;
};

int pool_task(void *, int, uint8_t *closure) {
    auto *c = reinterpret_cast<PoolClosure *>(closure);
    void *ctx = tally_profiler_thread_begin(c->inst);
    c->contexts.push_back(ctx);
    tally_profiler_set_current(ctx, c->slot);
    fake_time_ns() += c->task_ns;
    tally_profiler_thread_end(ctx);
    fake_time_ns() += c->after_ns;
    return 0;
}

TEST_F(ProfilerExact, PoolTasksOnOneThreadShareOneLingeringContext) {
    tally_set_num_threads(1);  // the tasks run on this thread, in order
    void *inst = start("linger");
    tally_profiler_set_current(inst, 1);  // produce f
    at_ms(1);
    PoolClosure c{inst, 2, 2 * kMs, 1 * kMs, {}};
    EXPECT_EQ(halide_do_par_for(nullptr, pool_task, 0, 3, reinterpret_cast<uint8_t *>(&c)), 0);
    // The loop ended at 10 ms: its context no longer counts, the main context bills f again.
    fake_time_ns() += 4 * kMs;
    tally_profiler_set_current(inst, 0);
    fake_time_ns() += 1 * kMs;
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);
    tally_set_num_threads(0);

    ASSERT_EQ(c.contexts.size(), 3u);
    EXPECT_NE(c.contexts[0], inst);
    EXPECT_EQ(c.contexts[1], c.contexts[0]);
    EXPECT_EQ(c.contexts[2], c.contexts[0]);
    // g: 3 tasks of 2 ms and the pool's 1 ms after each; f: 1 ms before the loop, 4 after.
    expect_times_ns("linger", {1 * kMs, 5 * kMs, 9 * kMs, 0, 0});
    EXPECT_EQ(tally_test::pipeline_stats("linger").total_ns, 15 * kMs);
}

// A task that only enters its loop's slot (safe on any thread: it touches no shared test state).
int pool_task_still(void *, int, uint8_t *closure) {
    const auto *c = reinterpret_cast<const PoolClosure *>(closure);
    void *ctx = tally_profiler_thread_begin(c->inst);
    tally_profiler_set_current(ctx, c->slot);
    tally_profiler_thread_end(ctx);
    return 0;
}

TEST_F(ProfilerExact, NoPoolContextLingersPastItsLoop) {
    // Real pool threads (the clock stands still while they run): whichever thread ran the last
    // task, the loop's contexts have stopped counting by the time halide_do_par_for returns, so the
    // main context bills all of the next 3 ms. A context still counting would take them (the
    // main context bills nothing while a worker counts).
    tally_set_num_threads(2);
    for (int round = 0; round < 20; round++) {
        void *inst = start("no_linger");
        tally_profiler_set_current(inst, 1);
        PoolClosure c{inst, 2, 0, 0, {}};
        EXPECT_EQ(
            halide_do_par_for(nullptr, pool_task_still, 0, 4096, reinterpret_cast<uint8_t *>(&c)),
            0);
        fake_time_ns() += 3 * kMs;
        ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);
    }
    tally_set_num_threads(0);
    expect_times_ns("no_linger", {0, 60 * kMs, 0, 0, 0});
}

// Runs started with TALLY_PROFILER_FLAG_POOL_CONTEXTS (inject-profiling's): the pool opens each
// task's worker context in the loop's slot, and a task makes no profiler call unless it switches
// slots inside, on tally_profiler_current_context().
struct BareClosure {
    void *inst;
    int32_t inner_slot;  // a task with an odd index spends 1 ms of its time here
    uint64_t task_ns;
    std::vector<void *> contexts;  // tally_profiler_current_context() in each task
    int32_t inner_tasks = 0;       // a nested loop of that many tasks in each task (1 ms each)
    std::vector<void *> inner_contexts;
};

void *start_pooled(const char *name) {
    void *inst = tally_profiler_start(nullptr, name, "host-profile", 5, kNames, kKinds, nullptr,
                                      TALLY_PROFILER_FLAG_POOL_CONTEXTS);
    EXPECT_NE(inst, nullptr);
    return inst;
}

int inner_task(void *, int, uint8_t *closure) {
    auto *c = reinterpret_cast<BareClosure *>(closure);
    void *ctx = tally_profiler_current_context();
    c->inner_contexts.push_back(ctx);
    tally_profiler_set_current(ctx, c->inner_slot);
    fake_time_ns() += 1 * kMs;
    return 0;
}

int bare_task(void *, int idx, uint8_t *closure) {
    auto *c = reinterpret_cast<BareClosure *>(closure);
    void *ctx = tally_profiler_current_context();
    c->contexts.push_back(ctx);
    fake_time_ns() += c->task_ns;
    if (idx % 2 == 1) {
        // produce g inside the task: its switches go to the context the pool opened.
        tally_profiler_set_current(ctx, c->inner_slot);
        fake_time_ns() += 1 * kMs;
        tally_profiler_set_current(ctx, 1);
    }
    if (c->inner_tasks > 0) {
        EXPECT_EQ(halide_do_par_for(nullptr, inner_task, 0, c->inner_tasks, closure), 0);
        EXPECT_EQ(tally_profiler_current_context(), ctx);  // the nested loop gave it back
    }
    return 0;
}

TEST_F(ProfilerExact, ThePoolOpensTheTasksContextsInTheLoopsSlot) {
    tally_set_num_threads(1);  // the tasks run on this thread, in order
    void *inst = start_pooled("pooled");
    tally_profiler_set_current(inst, 1);  // produce f
    at_ms(1);
    BareClosure c{inst, 2, 2 * kMs, {}, 0, {}};
    EXPECT_EQ(halide_do_par_for(nullptr, bare_task, 0, 4, reinterpret_cast<uint8_t *>(&c)), 0);
    EXPECT_EQ(tally_profiler_current_context(), inst);  // the loop gave the main context back
    fake_time_ns() += 4 * kMs;
    tally_profiler_set_current(inst, 0);
    fake_time_ns() += 1 * kMs;
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);
    tally_set_num_threads(0);

    // Each task ran in a worker context of the run (not the main context, which the tasks of a
    // run without the flag find current), and the thread's tasks shared one.
    ASSERT_EQ(c.contexts.size(), 4u);
    EXPECT_NE(c.contexts[0], nullptr);
    EXPECT_NE(c.contexts[0], inst);
    for (void *ctx : c.contexts) {
        EXPECT_EQ(ctx, c.contexts[0]);
    }
    // f: 1 ms before the loop, the tasks' 4 x 2 ms in the loop's slot, 4 ms after; g: the two
    // odd tasks' 1 ms each; overhead: the last 1 ms.
    expect_times_ns("pooled", {1 * kMs, 13 * kMs, 2 * kMs, 0, 0});
    EXPECT_EQ(tally_test::pipeline_stats("pooled").total_ns, 16 * kMs);
}

TEST_F(ProfilerExact, ANestedLoopInAPooledTaskBillsItsOwnContexts) {
    tally_set_num_threads(1);
    void *inst = start_pooled("pooled_nested");
    tally_profiler_set_current(inst, 1);
    BareClosure c{inst, 2, 1 * kMs, {}, 0, {}};
    c.inner_tasks = 3;
    EXPECT_EQ(halide_do_par_for(nullptr, bare_task, 0, 2, reinterpret_cast<uint8_t *>(&c)), 0);
    fake_time_ns() += 2 * kMs;
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);
    tally_set_num_threads(0);

    // Each inner task ran in a context of its own, nested in its outer task's.
    ASSERT_EQ(c.inner_contexts.size(), 6u);
    for (void *ctx : c.inner_contexts) {
        EXPECT_NE(ctx, nullptr);
        EXPECT_NE(ctx, inst);
        EXPECT_NE(ctx, c.contexts[0]);
    }
    // f: the outer tasks' 1 ms each and the 2 ms after the loop; g: task 1's 1 ms, and every
    // inner task's 1 ms (6).
    expect_times_ns("pooled_nested", {0, 4 * kMs, 7 * kMs, 0, 0});
}

// A leaf task of a pooled run: it makes no profiler call (safe on any thread).
int leaf_task(void *, int, uint8_t *) {
    return 0;
}

TEST_F(ProfilerExact, NoPooledContextOutlivesItsLoop) {
    // As NoPoolContextLingersPastItsLoop, with the contexts the pool opens itself: on real pool
    // threads, every batch's context has stopped counting when halide_do_par_for returns.
    tally_set_num_threads(2);
    for (int round = 0; round < 20; round++) {
        void *inst = start_pooled("no_linger_pooled");
        tally_profiler_set_current(inst, 1);
        EXPECT_EQ(halide_do_par_for(nullptr, leaf_task, 0, 4096, nullptr), 0);
        fake_time_ns() += 3 * kMs;
        ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);
    }
    tally_set_num_threads(0);
    expect_times_ns("no_linger_pooled", {0, 60 * kMs, 0, 0, 0});
}

TEST_F(ProfilerExact, StartRejectsUnknownFlags) {
    tally_test::MessageCapture capture;
    EXPECT_EQ(
        tally_profiler_start(nullptr, "bad_flags", "host-profile", 5, kNames, kKinds, nullptr, 32),
        nullptr);
    // Bits 8-11 name a device API: one with no back end is unknown too.
    EXPECT_EQ(tally_profiler_start(nullptr, "bad_api", "host-profile", 5, kNames, kKinds, nullptr,
                                   TALLY_PROFILER_FLAG_DEVICE_API(9)),
              nullptr);
    std::vector<std::string> errors = capture.errors();
    ASSERT_EQ(errors.size(), 2u);
    EXPECT_NE(errors[0].find("pipeline bad_flags: unknown flags 0x20"), std::string::npos)
        << errors[0];
    EXPECT_NE(errors[1].find("pipeline bad_api: unknown flags 0x900"), std::string::npos)
        << errors[1];
}

}  // namespace
