// Halide 14's profiler ABI served by Tally's profiler: the call sequence Halide's -profile IR
// makes (pipeline start, the active-thread toggles around parallel calls, func switches in
// tasks, memory, the destructor end), replayed on a fake clock, must report once, per func, in
// Tally's sections.

#include "TestUtil.h"

#include <cstdint>
#include <string>
#include <vector>

namespace {

using tally_test::fake_time_ns;

class HalideProfiler : public tally_test::ProfilerTest {
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

const char *const kNames[] = {"overhead", "halide_malloc", "halide_free", "a", "b"};

std::vector<uint64_t> name_table() {
    std::vector<uint64_t> t;
    for (const char *n : kNames) {
        t.push_back(uint64_t(uintptr_t(n)));
    }
    return t;
}

void tick_ms(uint64_t ms) {
    fake_time_ns() += ms * 1000000;
    tally_testing_sample_now();
}

struct Closure {
    halide_profiler_state *state;
    int token;
    int func;
    uint64_t ms;
};

// A task body as Halide writes it: active, switch to its func, work, idle.
int task_body(void *, int, int, uint8_t *closure, void *) {
    auto *c = (Closure *)closure;
    halide_profiler_incr_active_threads(c->state);
    halide_profiler_set_current_func(c->state, c->token, c->func, nullptr);
    tick_ms(c->ms);
    halide_profiler_decr_active_threads(c->state);
    return 0;
}

int par_body(void *, int, uint8_t *closure) {
    return task_body(nullptr, 0, 1, closure, nullptr);
}

TEST_F(HalideProfiler, AHalideInstrumentedRunReportsPerFunc) {
    std::vector<uint64_t> names = name_table();
    int token = halide_profiler_pipeline_start(nullptr, "hp", 5, names.data());
    ASSERT_GE(token, 0);
    halide_profiler_state *state = halide_profiler_get_state();
    ASSERT_NE(state, nullptr);
    void *ps = halide_profiler_get_pipeline_state("hp");
    ASSERT_NE(ps, nullptr);
    EXPECT_EQ(halide_profiler_get_pipeline_state("other"), nullptr);
    int32_t sampling_token = 0;
    halide_profiler_init_sampling_token(&sampling_token, 0);
    halide_profiler_incr_active_threads(state);
    tick_ms(2);  // overhead
    halide_profiler_set_current_func(state, token, 1, nullptr);
    halide_profiler_memory_allocate(nullptr, ps, 3, 1000);
    halide_profiler_memory_allocate(nullptr, ps, 4, 500);
    tick_ms(1);  // halide_malloc
    // The async tasks: the main thread goes idle, each task bills its own func.
    halide_profiler_decr_active_threads(state);
    Closure ca{state, token, 3, 5}, cb{state, token, 4, 3};
    halide_parallel_task_t tasks[2] = {};
    tasks[0].fn = task_body;
    tasks[0].closure = (uint8_t *)&ca;
    tasks[0].extent = 1;
    tasks[1].fn = task_body;
    tasks[1].closure = (uint8_t *)&cb;
    tasks[1].extent = 1;
    EXPECT_EQ(halide_do_parallel_tasks(nullptr, 2, tasks, nullptr), 0);
    // A parallel loop of func a.
    Closure cp{state, token, 3, 1};
    EXPECT_EQ(halide_do_par_for(nullptr, par_body, 0, 2, (uint8_t *)&cp), 0);
    halide_profiler_incr_active_threads(state);
    halide_profiler_set_current_func(state, token, 2, &sampling_token);
    halide_profiler_memory_free(nullptr, ps, 3, 1000);
    halide_profiler_memory_free(nullptr, ps, 4, 500);
    tick_ms(4);  // halide_free
    // A token that is not this run's, and a sampling token held elsewhere, switch nothing.
    halide_profiler_set_current_func(state, token + 1, 3, nullptr);
    int32_t held = 1;
    halide_profiler_set_current_func(state, token, 4, &held);
    tick_ms(1);  // still halide_free
    halide_profiler_set_current_func(state, token, 0, nullptr);
    halide_profiler_decr_active_threads(state);
    uint64_t stack[5] = {0, 0, 0, 64, 0};
    halide_profiler_stack_peak_update(nullptr, ps, stack);
    halide_profiler_pipeline_end(nullptr, state);

    tally_pipeline_stats p = tally_test::pipeline_stats("hp");
    EXPECT_EQ(p.runs, 1u);
    EXPECT_EQ(p.num_slots, 5);
    EXPECT_EQ(p.total_ns, 18000000u);
    EXPECT_EQ(p.heap_peak, 1500u);
    const uint64_t want_ms[5] = {2, 1, 5, 7, 3};
    for (int s = 0; s < 5; s++) {
        tally_slot_stats st{};
        ASSERT_EQ(tally_profiler_get_slot_stats("hp", s, &st), 0);
        EXPECT_STREQ(st.name, kNames[s]);
        EXPECT_EQ(st.time_ns, want_ms[s] * 1000000) << kNames[s];
    }
    tally_slot_stats a{};
    ASSERT_EQ(tally_profiler_get_slot_stats("hp", 3, &a), 0);
    EXPECT_EQ(a.heap.peak, 1000u);
    EXPECT_EQ(a.heap.num_allocs, 1u);
    EXPECT_EQ(a.heap.current, 0);
    EXPECT_DOUBLE_EQ(a.average_threads, 1.0);
    // No context of the run is left behind on this thread.
    EXPECT_EQ(tally_profiler_current_instance(), nullptr);
}

TEST_F(HalideProfiler, BadCallsAreReportedOrIgnored) {
    tally_test::MessageCapture capture;
    halide_profiler_pipeline_end(nullptr, halide_profiler_get_state());  // no start: no-op
    EXPECT_LT(halide_profiler_pipeline_start(nullptr, nullptr, 3, nullptr), 0);
    halide_profiler_pipeline_end(nullptr, halide_profiler_get_state());  // pops the failed start
    std::vector<uint64_t> names = name_table();
    int token = halide_profiler_pipeline_start(nullptr, "bad", 5, names.data());
    ASSERT_GE(token, 0);
    halide_profiler_incr_active_threads(halide_profiler_get_state());
    halide_profiler_set_current_func(halide_profiler_get_state(), token, 9, nullptr);
    halide_profiler_set_current_func(halide_profiler_get_state(), token, -1, nullptr);
    halide_profiler_pipeline_end(nullptr, halide_profiler_get_state());
    EXPECT_EQ(tally_test::pipeline_stats("bad").runs, 1u);
    // Once per run for the out-of-range ids, once for the bad start.
    ASSERT_EQ(capture.errors().size(), 2u);
    EXPECT_NE(capture.errors()[1].find("func id 9"), std::string::npos) << capture.errors()[1];
    // Calls outside any run do nothing.
    EXPECT_EQ(halide_profiler_incr_active_threads(halide_profiler_get_state()), 0);
    EXPECT_EQ(halide_profiler_decr_active_threads(halide_profiler_get_state()), 0);
    halide_profiler_memory_allocate(nullptr, nullptr, 1, 10);
}

TEST(HalideProfilerSamplingToken, FollowsHalidesHandshake) {
    int32_t shared = 0, local = 7;
    halide_profiler_init_sampling_token(&local, 1);
    EXPECT_EQ(local, 1);
    halide_profiler_acquire_sampling_token(&shared, &local);
    EXPECT_EQ(local, 0);  // acquired
    EXPECT_EQ(shared, 1);
    int32_t other = 5;
    halide_profiler_acquire_sampling_token(&shared, &other);
    EXPECT_EQ(other, 1);  // already held
    halide_profiler_release_sampling_token(&shared, &other);
    EXPECT_EQ(shared, 1);  // not its to give back
    halide_profiler_release_sampling_token(&shared, &local);
    EXPECT_EQ(shared, 0);
    EXPECT_EQ(local, 1);
}

}  // namespace
