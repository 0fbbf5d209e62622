// Halide 21's per-instance profiler ABI served by Tally's profiler: the call sequence Halide 21's
// -profile IR makes (instance start into memory the pipeline allocates, a bounds query that ends
// before halide_profiler_enable_instance, the active-thread toggles around parallel calls, func
// switches in tasks, memory calls taking the instance, the destructor end), replayed on a fake
// clock, must report once, per func, in Tally's sections; plus Halide's other calls Tally serves
// for Halide 21's IR (mutex arrays, the split-factor check).

#include "TestUtil.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

using tally_test::fake_time_ns;

class Halide21Profiler : public tally_test::ProfilerTest {
protected:
    void SetUp() override {
        ProfilerTest::SetUp();
        tally_testing_set_clock(tally_test::fake_clock);
        tally_set_num_threads(1);  // tasks run on the caller, in order: deterministic samples
    }
    void TearDown() override {
        tally_set_num_threads(0);
        ProfilerTest::TearDown();
    }
};

// Halide 21's table: overhead, its three special slots, then the Funcs.
const char *const kNames[] = {
    "overhead", "waiting for parallel tasks to finish", "halide_malloc", "halide_free", "a", "b"};
constexpr int kNumFuncs = 6;

std::vector<uint64_t> name_table(const char *const *names, int n) {
    std::vector<uint64_t> t;
    for (int i = 0; i < n; i++) {
        t.push_back(uint64_t(uintptr_t(names[i])));
    }
    return t;
}

// `allocate profiler_instance[uint64 * N]`, N = 14 + 9 * num_funcs as Halide 21 sizes it, full of
// what a stack slot may hold before the start: its contents must not matter.
std::vector<uint64_t> instance_memory(int num_funcs) {
    return std::vector<uint64_t>(14 + 9 * num_funcs, ~uint64_t(0));
}

void tick_ms(uint64_t ms) {
    fake_time_ns() += ms * 1000000;
    tally_testing_sample_now();
}

struct Closure {
    void *instance;
    int func;
    uint64_t ms;
};

// A task body as Halide 21 writes it: active, switch to its func, work, idle, "waiting".
int task_body(void *, int, int, uint8_t *closure, void *) {
    auto *c = (Closure *)closure;
    halide_profiler_incr_active_threads((halide_profiler_state *)c->instance);
    tally_halide21_profiler_set_current_func(c->instance, c->func, nullptr);
    tick_ms(c->ms);
    halide_profiler_decr_active_threads((halide_profiler_state *)c->instance);
    tally_halide21_profiler_set_current_func(c->instance, 1, nullptr);
    return 0;
}

int par_body(void *, int, uint8_t *closure) {
    return task_body(nullptr, 0, 1, closure, nullptr);
}

TEST_F(Halide21Profiler, AnInstanceReportsPerFuncAndCountsOnlyPastItsBoundsQuery) {
    std::vector<uint64_t> names = name_table(kNames, kNumFuncs);
    std::vector<uint64_t> mem = instance_memory(kNumFuncs);
    void *instance = mem.data();
    auto *state = (halide_profiler_state *)instance;

    // A bounds query: the probes run, enable_instance is never reached, the end drops the run.
    ASSERT_EQ(halide_profiler_instance_start(nullptr, "h21", kNumFuncs, names.data(), instance), 0);
    halide_profiler_incr_active_threads(state);
    tally_halide21_profiler_set_current_func(instance, 0, nullptr);
    tick_ms(7);
    halide_profiler_decr_active_threads(state);
    EXPECT_EQ(halide_profiler_instance_end(nullptr, instance), 0);
    EXPECT_EQ(tally_test::pipeline_stats("h21").runs, 0u);
    EXPECT_EQ(tally_profiler_current_instance(), nullptr);

    // The real call.
    ASSERT_EQ(halide_profiler_instance_start(nullptr, "h21", kNumFuncs, names.data(), instance), 0);
    int32_t shared_token = 0;
    halide_profiler_init_sampling_token(&shared_token, 0);
    halide_profiler_incr_active_threads(state);
    tally_halide21_profiler_set_current_func(instance, 0, nullptr);
    tick_ms(2);  // overhead (the argument checks)
    EXPECT_EQ(halide_profiler_enable_instance(instance), 0);
    tally_halide21_profiler_set_current_func(instance, 2, nullptr);
    halide_profiler_memory_allocate(nullptr, instance, 4, 1000);  // takes the instance
    halide_profiler_memory_allocate(nullptr, instance, 5, 500);
    tick_ms(1);  // halide_malloc
    // The main thread waits for parallel tasks: idle, in slot 1; each task bills its own func.
    halide_profiler_decr_active_threads(state);
    tally_halide21_profiler_set_current_func(instance, 1, nullptr);
    Closure ca{instance, 4, 5}, cb{instance, 5, 3};
    halide_parallel_task_t tasks[2] = {};
    tasks[0].fn = task_body;
    tasks[0].closure = (uint8_t *)&ca;
    tasks[0].extent = 1;
    tasks[1].fn = task_body;
    tasks[1].closure = (uint8_t *)&cb;
    tasks[1].extent = 1;
    EXPECT_EQ(halide_do_parallel_tasks(nullptr, 2, tasks, nullptr), 0);
    Closure cp{instance, 4, 1};
    EXPECT_EQ(halide_do_par_for(nullptr, par_body, 0, 2, (uint8_t *)&cp), 0);
    halide_profiler_incr_active_threads(state);
    int32_t local_token = 0;  // held: the switch happens
    tally_halide21_profiler_set_current_func(instance, 3, &local_token);
    halide_profiler_memory_free(nullptr, instance, 4, 1000);
    halide_profiler_memory_free(nullptr, instance, 5, 500);
    tick_ms(4);  // halide_free
    // Another instance's switch, and a sampling token held elsewhere, switch nothing.
    std::vector<uint64_t> other = instance_memory(kNumFuncs);
    tally_halide21_profiler_set_current_func(other.data(), 4, nullptr);
    int32_t held = 1;
    tally_halide21_profiler_set_current_func(instance, 5, &held);
    tick_ms(1);  // still halide_free
    halide_profiler_decr_active_threads(state);
    tally_halide21_profiler_set_current_func(instance, 0, nullptr);
    uint64_t stack[kNumFuncs] = {0, 0, 0, 0, 64, 0};
    halide_profiler_stack_peak_update(nullptr, instance, stack);
    EXPECT_EQ(halide_profiler_instance_end(nullptr, instance), 0);
    // A second end (the memory no longer holds a run) does nothing.
    EXPECT_EQ(halide_profiler_instance_end(nullptr, instance), 0);

    tally_pipeline_stats p = tally_test::pipeline_stats("h21");
    EXPECT_EQ(p.runs, 1u);
    EXPECT_EQ(p.num_slots, kNumFuncs);
    EXPECT_EQ(p.total_ns, 18000000u);
    EXPECT_EQ(p.heap_peak, 1500u);
    const uint64_t want_ms[kNumFuncs] = {2, 0, 1, 5, 7, 3};
    for (int s = 0; s < kNumFuncs; s++) {
        tally_slot_stats st = tally_test::slot_stats("h21", s);
        EXPECT_STREQ(st.name, kNames[s]);
        EXPECT_EQ(st.kind, TALLY_SLOT_FUNC) << kNames[s];
        EXPECT_EQ(st.time_ns, want_ms[s] * 1000000) << kNames[s];
    }
    tally_slot_stats a = tally_test::slot_stats("h21", 4);
    EXPECT_EQ(a.heap.peak, 1000u);
    EXPECT_EQ(a.heap.num_allocs, 1u);
    EXPECT_EQ(a.heap.current, 0);
    EXPECT_EQ(tally_profiler_current_instance(), nullptr);
    // The report names the pipeline's Funcs and Halide's special slots, once run.
    std::string text = tally_test::report_text(0);
    EXPECT_NE(text.find("waiting for parallel tasks to finish"), std::string::npos) << text;
    EXPECT_NE(text.find("halide21-profile"), std::string::npos) << text;
}

TEST_F(Halide21Profiler, CopySlotsAreCopiesOfTheirFunc) {
    // What Halide 21 names on a GPU target: a copy slot per buffer and direction.
    const char *const names[] = {"overhead",
                                 "waiting for parallel tasks to finish",
                                 "halide_malloc",
                                 "halide_free",
                                 "f",
                                 "f (copy to device)",
                                 "in (copy to device)",
                                 "f (copy to host)"};
    std::vector<uint64_t> table = name_table(names, 8);
    std::vector<uint64_t> mem = instance_memory(8);
    ASSERT_EQ(halide_profiler_instance_start(nullptr, "gpu21", 8, table.data(), mem.data()), 0);
    halide_profiler_enable_instance(mem.data());
    halide_profiler_instance_end(nullptr, mem.data());
    const int32_t kind[] = {TALLY_SLOT_FUNC,           TALLY_SLOT_FUNC,
                            TALLY_SLOT_FUNC,           TALLY_SLOT_FUNC,
                            TALLY_SLOT_FUNC,           TALLY_SLOT_COPY_TO_DEVICE,
                            TALLY_SLOT_COPY_TO_DEVICE, TALLY_SLOT_COPY_TO_HOST};
    const int32_t parent[] = {-1, -1, -1, -1, -1, 4, -1, 4};
    for (int s = 0; s < 8; s++) {
        tally_slot_stats st = tally_test::slot_stats("gpu21", s);
        EXPECT_EQ(st.kind, kind[s]) << names[s];
        EXPECT_EQ(st.parent, parent[s]) << names[s];
    }
    EXPECT_EQ(tally_test::pipeline_stats("gpu21").runs, 1u);
}

TEST_F(Halide21Profiler, BadCallsAreReportedOrIgnored) {
    tally_test::MessageCapture capture;
    std::vector<uint64_t> names = name_table(kNames, kNumFuncs);
    EXPECT_EQ(halide_profiler_instance_start(nullptr, "x", kNumFuncs, names.data(), nullptr),
              TALLY_ERROR_BAD_ARGUMENT);
    std::vector<uint64_t> mem = instance_memory(kNumFuncs);
    EXPECT_EQ(halide_profiler_instance_end(nullptr, mem.data()), 0);  // never started: no-op
    EXPECT_EQ(halide_profiler_instance_start(nullptr, nullptr, 3, nullptr, mem.data()),
              TALLY_ERROR_BAD_ARGUMENT);
    EXPECT_EQ(halide_profiler_enable_instance(mem.data()), 0);
    EXPECT_EQ(halide_profiler_instance_end(nullptr, mem.data()), 0);  // the failed start's end
    ASSERT_EQ(halide_profiler_instance_start(nullptr, "bad21", kNumFuncs, names.data(), mem.data()),
              0);
    halide_profiler_enable_instance(mem.data());
    halide_profiler_incr_active_threads((halide_profiler_state *)mem.data());
    tally_halide21_profiler_set_current_func(mem.data(), 9, nullptr);
    tally_halide21_profiler_set_current_func(mem.data(), -1, nullptr);
    halide_profiler_instance_end(nullptr, mem.data());
    EXPECT_EQ(tally_test::pipeline_stats("bad21").runs, 1u);
    // The two bad starts, then once per run for the out-of-range ids.
    ASSERT_EQ(capture.errors().size(), 3u);
    EXPECT_NE(capture.errors()[2].find("func id 9"), std::string::npos) << capture.errors()[2];
    // Calls outside any run do nothing.
    EXPECT_EQ(tally_halide21_profiler_set_current_func(mem.data(), 4, nullptr), 0);
    halide_profiler_memory_allocate(nullptr, mem.data(), 4, 10);
    EXPECT_EQ(halide_profiler_enable_instance(nullptr), 0);
}

TEST(HalideMutexArray, LocksEachEntryOnItsOwn) {
    halide_mutex_array *a = halide_mutex_array_create(4);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(halide_mutex_array_lock(a, 0), 0);
    EXPECT_EQ(halide_mutex_array_lock(a, 3), 0);  // another entry: no deadlock
    EXPECT_EQ(halide_mutex_array_unlock(a, 3), 0);
    EXPECT_EQ(halide_mutex_array_unlock(a, 0), 0);
    halide_mutex_array_destroy(nullptr, a);
    halide_mutex_array_destroy(nullptr, nullptr);
    halide_mutex_array *empty = halide_mutex_array_create(0);
    ASSERT_NE(empty, nullptr);
    halide_mutex_array_destroy(nullptr, empty);
}

TEST(HalideSplitFactor, ReportsTheFactorAndReturnsHalide21sCode) {
    tally_test::MessageCapture capture;
    EXPECT_EQ(halide_error_split_factor_not_positive(nullptr, "f", "x", "xo", "xi", "factor", -2),
              TALLY_ERROR_SPLIT_FACTOR_NOT_POSITIVE);
    EXPECT_EQ(TALLY_ERROR_SPLIT_FACTOR_NOT_POSITIVE, -46);
    ASSERT_EQ(capture.errors().size(), 1u);
    EXPECT_NE(capture.errors()[0].find("split the variable x into xo and xi is factor. This "
                                       "evaluated to -2"),
              std::string::npos)
        << capture.errors()[0];
    EXPECT_STREQ(tally_error_code_name(-46), "ERROR_SPLIT_FACTOR_NOT_POSITIVE");
}

TEST(HalideStorageBound, ReportsBothSizesAndReturnsHalide21sCode) {
    tally_test::MessageCapture capture;
    EXPECT_EQ(halide_error_storage_bound_too_small(nullptr, "f", "y", 4, 6),
              TALLY_ERROR_STORAGE_BOUND_TOO_SMALL);
    EXPECT_EQ(TALLY_ERROR_STORAGE_BOUND_TOO_SMALL, -45);
    ASSERT_EQ(capture.errors().size(), 1u);
    EXPECT_NE(capture.errors()[0].find("The explicit allocation bound (4) of dimension y of f is "
                                       "too small to store the required region (6)."),
              std::string::npos)
        << capture.errors()[0];
    EXPECT_STREQ(tally_error_code_name(-45), "ERROR_STORAGE_BOUND_TOO_SMALL");
}

}  // namespace
