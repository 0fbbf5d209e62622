// halide_do_parallel_tasks and the semaphores, driven directly with Halide 14's ABI: ordering
// through semaphores, producer/consumer pipelines of nested task calls (the shape Halide's
// async() lowers to), nested parallel loops, errors, and progress with one and two pool threads.
// Every scenario runs under a watchdog: a deadlock fails the test with a message instead of
// hanging it.

#include "TestUtil.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace {

// Runs `body` on another thread and fails (aborting the process: the stuck threads cannot be
// joined) if it does not return within `seconds`.
void with_watchdog(const char *what, const std::function<void()> &body, int seconds = 30) {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    std::thread t([&] {
        body();
        std::lock_guard<std::mutex> lock(m);
        done = true;
        cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(m);
    if (!cv.wait_for(lock, std::chrono::seconds(seconds), [&] { return done; })) {
        fprintf(stderr, "deadlock: %s did not finish within %d s\n", what, seconds);
        std::abort();
    }
    lock.unlock();
    t.join();
}

halide_parallel_task_t make_task(halide_loop_task_t fn, void *closure, const char *name,
                                 halide_semaphore_acquire_t *sems, int n_sems, int min, int extent,
                                 int min_threads, bool serial) {
    halide_parallel_task_t t{};
    t.fn = fn;
    t.closure = (uint8_t *)closure;
    t.name = name;
    t.semaphores = sems;
    t.num_semaphores = n_sems;
    t.min = min;
    t.extent = extent;
    t.min_threads = min_threads;
    t.serial = serial;
    return t;
}

class AsyncTasks : public ::testing::TestWithParam<int> {
protected:
    void SetUp() override { tally_set_num_threads(GetParam()); }
    void TearDown() override { tally_set_num_threads(0); }
};

TEST(Semaphore, CountsAcquiresAndReleases) {
    halide_semaphore_t sem;
    EXPECT_EQ(halide_semaphore_init(&sem, 2), 2);
    EXPECT_TRUE(halide_semaphore_try_acquire(&sem, 2));
    EXPECT_FALSE(halide_semaphore_try_acquire(&sem, 1));
    EXPECT_EQ(halide_semaphore_release(&sem, 3), 3);
    EXPECT_FALSE(halide_semaphore_try_acquire(&sem, 4));  // fails whole, takes nothing
    EXPECT_TRUE(halide_semaphore_try_acquire(&sem, 3));
    EXPECT_TRUE(halide_semaphore_try_acquire(&sem, 0));
    EXPECT_FALSE(halide_semaphore_try_acquire(nullptr, 1));
}

// ---- the fork shape: two producers, a consumer that takes both semaphores ------------------

struct ForkState {
    std::atomic<int> a{0}, b{0};
    int seen_a = -1, seen_b = -1;
    halide_semaphore_t sem_a, sem_b;
};

int produce_a(void *, int, int, uint8_t *closure, void *) {
    auto *s = (ForkState *)closure;
    tally_test::spin_for_ns(2000000);  // give the consumer every chance to run too early
    s->a.store(11);
    halide_semaphore_release(&s->sem_a, 1);
    return 0;
}

int produce_b(void *, int, int, uint8_t *closure, void *) {
    auto *s = (ForkState *)closure;
    s->b.store(22);
    halide_semaphore_release(&s->sem_b, 1);
    return 0;
}

int consume_ab(void *, int, int, uint8_t *closure, void *) {
    auto *s = (ForkState *)closure;
    s->seen_a = s->a.load();
    s->seen_b = s->b.load();
    return 0;
}

TEST_P(AsyncTasks, ConsumerStartsOnlyAfterItsSemaphores) {
    with_watchdog("fork", [] {
        for (int order = 0; order < 2; order++) {
            ForkState s;
            halide_semaphore_init(&s.sem_a, 0);
            halide_semaphore_init(&s.sem_b, 0);
            halide_semaphore_acquire_t acq[2] = {{&s.sem_b, 1}, {&s.sem_a, 1}};
            std::vector<halide_parallel_task_t> tasks = {
                make_task(produce_a, &s, "a", nullptr, 0, 0, 1, 0, false),
                make_task(produce_b, &s, "b", nullptr, 0, 0, 1, 0, false),
                make_task(consume_ab, &s, "o", acq, 2, 0, 1, 0, false)};
            if (order == 1) {
                std::swap(tasks[0], tasks[2]);  // the consumer listed first
            }
            EXPECT_EQ(halide_do_parallel_tasks(nullptr, 3, tasks.data(), nullptr), 0);
            EXPECT_EQ(s.seen_a, 11);
            EXPECT_EQ(s.seen_b, 22);
            EXPECT_FALSE(halide_semaphore_try_acquire(&s.sem_a, 1));  // taken by the consumer
        }
    });
}

// ---- the async shape: per row, a nested task call on each side of a one-slot buffer -------

constexpr int kRows = 200;

struct PipeState {
    halide_semaphore_t empty, full;  // one-slot buffer: empty starts at 1, full at 0
    int slot = 0;
    std::vector<int> consumed;
    std::atomic<int> inner_calls{0};
};

int produce_row(void *, int row, int, uint8_t *closure, void *) {
    auto *s = (PipeState *)closure;
    s->slot = row * 3 + 1;
    halide_semaphore_release(&s->full, 1);
    s->inner_calls++;
    return 0;
}

int consume_row(void *, int, int, uint8_t *closure, void *) {
    auto *s = (PipeState *)closure;
    s->consumed.push_back(s->slot);
    halide_semaphore_release(&s->empty, 1);
    s->inner_calls++;
    return 0;
}

// Each side loops over the rows and makes one nested call per row, passing its task_parent on,
// as Halide's lowered async code does.
template <halide_loop_task_t Inner, bool Producer>
int side(void *uc, int, int, uint8_t *closure, void *task_parent) {
    auto *s = (PipeState *)closure;
    for (int row = 0; row < kRows; row++) {
        halide_semaphore_acquire_t acq = {Producer ? &s->empty : &s->full, 1};
        halide_parallel_task_t t =
            make_task(Inner, s, Producer ? "produce" : "consume", &acq, 1, row, 1, 0, false);
        int r = halide_do_parallel_tasks(uc, 1, &t, task_parent);
        if (r != 0) {
            return r;
        }
    }
    return 0;
}

TEST_P(AsyncTasks, ProducerConsumerThroughNestedCallsProgresses) {
    with_watchdog("async producer/consumer", [] {
        PipeState s;
        halide_semaphore_init(&s.empty, 1);
        halide_semaphore_init(&s.full, 0);
        halide_parallel_task_t tasks[2] = {
            make_task(side<produce_row, true>, &s, "q.fork.0", nullptr, 0, 0, 1, 1, false),
            make_task(side<consume_row, false>, &s, "q.fork.1", nullptr, 0, 0, 1, 1, false)};
        EXPECT_EQ(halide_do_parallel_tasks(nullptr, 2, tasks, nullptr), 0);
        ASSERT_EQ(s.consumed.size(), size_t(kRows));
        for (int row = 0; row < kRows; row++) {
            EXPECT_EQ(s.consumed[row], row * 3 + 1) << row;
        }
        EXPECT_EQ(s.inner_calls.load(), 2 * kRows);
    });
}

// ---- when every task blocks, the caller runs the last one ------------------------------------

struct ThreadIds {
    std::thread::id ids[2];
};

template <int Slot>
int record_thread(void *, int, int, uint8_t *closure, void *) {
    ((ThreadIds *)closure)->ids[Slot] = std::this_thread::get_id();
    return 0;
}

TEST_P(AsyncTasks, WhenEveryTaskBlocksTheCallerRunsTheLastItself) {
    // The caller would only wait for the group: it runs the last blocking task (one thread fewer
    // to wake), the others get task threads of their own, so each still runs at once.
    with_watchdog("caller runs a blocking task", [] {
        ThreadIds t;
        halide_parallel_task_t tasks[2] = {
            make_task(record_thread<0>, &t, "fork.0", nullptr, 0, 0, 1, 1, false),
            make_task(record_thread<1>, &t, "fork.1", nullptr, 0, 0, 1, 1, false)};
        EXPECT_EQ(halide_do_parallel_tasks(nullptr, 2, tasks, nullptr), 0);
        EXPECT_EQ(t.ids[1], std::this_thread::get_id());
        EXPECT_NE(t.ids[0], std::this_thread::get_id());
        EXPECT_NE(t.ids[0], std::thread::id());
    });
}

// The process's thread count, from /proc/self/status.
int process_threads() {
    FILE *f = std::fopen("/proc/self/status", "r");
    int n = -1;
    char line[256];
    while (f && std::fgets(line, sizeof(line), f)) {
        if (std::sscanf(line, "Threads: %d", &n) == 1) {
            break;
        }
    }
    if (f) {
        std::fclose(f);
    }
    return n;
}

TEST_P(AsyncTasks, AForkOfBlockingTasksStartsNoPoolWorkers) {
    // Neither task of the fork can use a pool worker (one runs on the caller, the other on a
    // task thread), so none is started: a worker started for nothing takes a core from the
    // run's start (it looks for work and spins), which cost async_store of the conformance
    // corpus its first run (1.14x Halide's -> 0.48x at scale 1). A parallel loop after it
    // starts the workers it can use.
    with_watchdog("fork starts no workers", [] {
        ASSERT_EQ(tally_thread_pool_shutdown(), 0);  // no workers nor task threads left
        const int before = process_threads();
        ASSERT_GT(before, 0);
        ThreadIds t;
        halide_parallel_task_t tasks[2] = {
            make_task(record_thread<0>, &t, "fork.0", nullptr, 0, 0, 1, 1, false),
            make_task(record_thread<1>, &t, "fork.1", nullptr, 0, 0, 1, 1, false)};
        EXPECT_EQ(halide_do_parallel_tasks(nullptr, 2, tasks, nullptr), 0);
        EXPECT_EQ(process_threads(), before + 1) << "the fork's task thread and nothing else";

        std::atomic<int> ran{0};
        auto body = [](void *, int, uint8_t *closure) {
            ((std::atomic<int> *)closure)->fetch_add(1);
            return 0;
        };
        EXPECT_EQ(halide_do_par_for(nullptr, body, 0, 64, (uint8_t *)&ran), 0);
        EXPECT_EQ(ran.load(), 64);
        EXPECT_EQ(process_threads(), before + 1 + (GetParam() - 1)) << "the loop's workers";
    });
}

// ---- a serial task with semaphores: iterations in order, each after its own acquire --------

struct SerialState {
    halide_semaphore_t ready;
    std::vector<int> order;
    std::atomic<int> produced{0};
};

int serial_producer(void *, int min, int extent, uint8_t *closure, void *) {
    auto *s = (SerialState *)closure;
    for (int i = min; i < min + extent; i++) {
        s->produced++;
        halide_semaphore_release(&s->ready, 1);
    }
    return 0;
}

int serial_consumer(void *, int min, int extent, uint8_t *closure, void *) {
    auto *s = (SerialState *)closure;
    // A call may cover several iterations (as Halide's pool does), each of whose semaphore was
    // taken before the call.
    EXPECT_GE(extent, 1);
    for (int i = min; i < min + extent; i++) {
        if (s->produced.load() <= int(s->order.size())) {
            return -50;  // ran before its semaphore was released for it
        }
        s->order.push_back(i);
    }
    return 0;
}

TEST_P(AsyncTasks, SerialTaskRunsItsIterationsInOrderEachAfterItsAcquire) {
    with_watchdog("serial", [] {
        SerialState s;
        halide_semaphore_init(&s.ready, 0);
        halide_semaphore_acquire_t acq = {&s.ready, 1};
        halide_parallel_task_t tasks[2] = {
            make_task(serial_consumer, &s, "consumer", &acq, 1, 5, 40, 0, true),
            make_task(serial_producer, &s, "producer", nullptr, 0, 0, 40, 0, true)};
        EXPECT_EQ(halide_do_parallel_tasks(nullptr, 2, tasks, nullptr), 0);
        ASSERT_EQ(s.order.size(), 40u);
        for (int i = 0; i < 40; i++) {
            EXPECT_EQ(s.order[i], 5 + i);
        }
    });
}

// ---- parallel (non-serial) tasks with extent > 1, and nested parallel loops ----------------

struct NestedState {
    std::atomic<int> calls[64];
    std::atomic<int> inner_sum{0};
};

int inner_iteration(void *, int i, uint8_t *closure) {
    ((NestedState *)closure)->inner_sum += i;
    return 0;
}

int outer_with_par_for(void *uc, int min, int extent, uint8_t *closure, void *) {
    auto *s = (NestedState *)closure;
    for (int i = min; i < min + extent; i++) {
        s->calls[i]++;
        int r = halide_do_par_for(uc, inner_iteration, 0, 100, closure);
        if (r != 0) {
            return r;
        }
    }
    return 0;
}

TEST_P(AsyncTasks, SlicedTasksAndNestedParallelLoopsRunEveryIterationOnce) {
    with_watchdog("nested par_for", [] {
        NestedState s;
        for (auto &c : s.calls) {
            c = 0;
        }
        halide_parallel_task_t tasks[2] = {
            make_task(outer_with_par_for, &s, "t0", nullptr, 0, 0, 32, 0, false),
            make_task(outer_with_par_for, &s, "t1", nullptr, 0, 32, 32, 1, false)};
        EXPECT_EQ(halide_do_parallel_tasks(nullptr, 2, tasks, nullptr), 0);
        for (int i = 0; i < 64; i++) {
            EXPECT_EQ(s.calls[i].load(), 1) << i;
        }
        EXPECT_EQ(s.inner_sum.load(), 64 * 4950);
    });
}

// A par_for whose iterations each run a producer/consumer pair of tasks that wait on each
// other: with a pool of one or two threads every pair still completes.
int pair_in_iteration(void *uc, int, uint8_t *) {
    PipeState s;
    halide_semaphore_init(&s.empty, 1);
    halide_semaphore_init(&s.full, 0);
    halide_parallel_task_t tasks[2] = {
        make_task(side<produce_row, true>, &s, "p", nullptr, 0, 0, 1, 1, false),
        make_task(side<consume_row, false>, &s, "c", nullptr, 0, 0, 1, 1, false)};
    int r = halide_do_parallel_tasks(uc, 2, tasks, nullptr);
    return r != 0 ? r : (s.consumed.size() == size_t(kRows) ? 0 : -60);
}

TEST_P(AsyncTasks, BlockingTasksInsideParallelLoopsProgress) {
    with_watchdog("tasks in par_for", [] {
        EXPECT_EQ(halide_do_par_for(nullptr, pair_in_iteration, 0, 6, nullptr), 0);
    });
}

// ---- errors ------------------------------------------------------------------------------

int fails(void *, int, int, uint8_t *, void *) {
    return -42;
}

std::atomic<int> never_calls{0};
int never(void *, int, int, uint8_t *, void *) {
    never_calls++;
    return 0;
}

TEST_P(AsyncTasks, AFailureIsReturnedAndWaitersGiveUp) {
    with_watchdog("errors", [] {
        // The consumer waits for a semaphore only the failed task would have released.
        halide_semaphore_t sem;
        halide_semaphore_init(&sem, 0);
        halide_semaphore_acquire_t acq = {&sem, 1};
        never_calls = 0;
        halide_parallel_task_t tasks[2] = {
            make_task(never, nullptr, "waits", &acq, 1, 0, 1, 0, false),
            make_task(fails, nullptr, "fails", nullptr, 0, 0, 1, 0, false)};
        EXPECT_EQ(halide_do_parallel_tasks(nullptr, 2, tasks, nullptr), -42);
        EXPECT_EQ(never_calls.load(), 0);
    });
}

int fails_in_nested(void *uc, int, int, uint8_t *, void *task_parent) {
    halide_parallel_task_t t = make_task(fails, nullptr, "inner", nullptr, 0, 0, 1, 0, false);
    return halide_do_parallel_tasks(uc, 1, &t, task_parent);
}

// A blocking task waiting, inside a nested call, on a semaphore its failed sibling never
// releases: the failure of the outer group ends the wait.
int waits_in_nested(void *uc, int, int, uint8_t *closure, void *task_parent) {
    halide_semaphore_acquire_t acq = {(halide_semaphore_t *)closure, 1};
    halide_parallel_task_t t = make_task(never, nullptr, "inner wait", &acq, 1, 0, 1, 0, false);
    return halide_do_parallel_tasks(uc, 1, &t, task_parent);
}

TEST_P(AsyncTasks, AFailureEndsWaitsInNestedCalls) {
    with_watchdog("nested errors", [] {
        halide_semaphore_t sem;
        halide_semaphore_init(&sem, 0);
        never_calls = 0;
        halide_parallel_task_t tasks[2] = {
            make_task(waits_in_nested, &sem, "waits", nullptr, 0, 0, 1, 1, false),
            make_task(fails_in_nested, nullptr, "fails", nullptr, 0, 0, 1, 1, false)};
        int r = halide_do_parallel_tasks(nullptr, 2, tasks, nullptr);
        EXPECT_EQ(r, -42);
        EXPECT_EQ(never_calls.load(), 0);
    });
}

TEST_P(AsyncTasks, BadArgumentsAreReported) {
    tally_test::MessageCapture capture;
    halide_parallel_task_t t = make_task(nullptr, nullptr, "nofn", nullptr, 0, 0, 1, 0, false);
    EXPECT_EQ(halide_do_parallel_tasks(nullptr, 1, &t, nullptr), TALLY_ERROR_BAD_ARGUMENT);
    EXPECT_EQ(halide_do_parallel_tasks(nullptr, 1, nullptr, nullptr), TALLY_ERROR_BAD_ARGUMENT);
    halide_semaphore_acquire_t acq = {nullptr, 1};
    t = make_task(never, nullptr, "nullsem", &acq, 1, 0, 1, 0, false);
    EXPECT_EQ(halide_do_parallel_tasks(nullptr, 1, &t, nullptr), TALLY_ERROR_BAD_ARGUMENT);
    EXPECT_EQ(halide_do_parallel_tasks(nullptr, 0, nullptr, nullptr), 0);
    ASSERT_EQ(capture.errors().size(), 3u);
    EXPECT_NE(capture.errors()[0].find("nofn"), std::string::npos) << capture.errors()[0];
}

// Many tasks (more than fit the call's stack table), all non-blocking.
std::atomic<int> many_sum{0};
int add_index(void *, int min, int, uint8_t *, void *) {
    many_sum += min;
    return 0;
}

TEST_P(AsyncTasks, ManyTasksAllRun) {
    with_watchdog("many", [] {
        many_sum = 0;
        std::vector<halide_parallel_task_t> tasks;
        for (int i = 0; i < 50; i++) {
            tasks.push_back(make_task(add_index, nullptr, "t", nullptr, 0, i, 1, 0, false));
        }
        EXPECT_EQ(halide_do_parallel_tasks(nullptr, 50, tasks.data(), nullptr), 0);
        EXPECT_EQ(many_sum.load(), 49 * 50 / 2);
    });
}

INSTANTIATE_TEST_SUITE_P(Threads, AsyncTasks, ::testing::Values(1, 2, 4),
                         [](const ::testing::TestParamInfo<int> &info) {
                             return std::to_string(info.param) + "_threads";
                         });

}  // namespace
