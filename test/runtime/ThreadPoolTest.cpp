// halide_do_par_for: every index exactly once, first error wins, nested loops, many callers.
#include "TestUtil.h"

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

namespace {

struct Counts {
    std::atomic<int> hits[1000];
    Counts() {
        for (auto &h : hits) {
            h = 0;
        }
    }
};

int32_t count_task(void *uc, int32_t idx, uint8_t *closure) {
    auto *c = reinterpret_cast<Counts *>(closure);
    c->hits[idx - 100]++;
    return 0;
}

TEST(ThreadPool, RunsEveryIndexExactlyOnce) {
    Counts counts;
    ASSERT_EQ(
        halide_do_par_for(nullptr, count_task, 100, 1000, reinterpret_cast<uint8_t *>(&counts)), 0);
    for (int i = 0; i < 1000; i++) {
        EXPECT_EQ(counts.hits[i].load(), 1) << "index " << (100 + i);
    }
}

TEST(ThreadPool, EmptyAndSingleLoops) {
    Counts counts;
    EXPECT_EQ(halide_do_par_for(nullptr, count_task, 100, 0, reinterpret_cast<uint8_t *>(&counts)),
              0);
    EXPECT_EQ(halide_do_par_for(nullptr, count_task, 100, -5, reinterpret_cast<uint8_t *>(&counts)),
              0);
    EXPECT_EQ(halide_do_par_for(nullptr, count_task, 105, 1, reinterpret_cast<uint8_t *>(&counts)),
              0);
    for (int i = 0; i < 1000; i++) {
        EXPECT_EQ(counts.hits[i].load(), i == 5 ? 1 : 0);
    }
}

TEST(ThreadPool, PassesUserContext) {
    static std::atomic<int> wrong{0};
    int marker = 0;
    auto task = [](void *uc, int32_t, uint8_t *closure) -> int32_t {
        if (uc != static_cast<void *>(closure)) {
            wrong++;
        }
        return 0;
    };
    ASSERT_EQ(halide_do_par_for(&marker, task, 0, 64, reinterpret_cast<uint8_t *>(&marker)), 0);
    EXPECT_EQ(wrong.load(), 0);
}

TEST(ThreadPool, ReturnsTheFirstError) {
    auto task = [](void *, int32_t idx, uint8_t *) -> int32_t { return idx == 37 ? -7 : 0; };
    EXPECT_EQ(halide_do_par_for(nullptr, task, 0, 100, nullptr), -7);
    // Several failures: the result is one of them, never 0.
    auto many = [](void *, int32_t idx, uint8_t *) -> int32_t {
        return idx % 10 == 3 ? -(idx + 1) : 0;
    };
    int32_t r = halide_do_par_for(nullptr, many, 0, 100, nullptr);
    EXPECT_LT(r, 0);
    EXPECT_EQ((-r - 1) % 10, 3);
}

TEST(ThreadPool, SkipsTasksAfterAnErrorWhenSerial) {
    tally_set_num_threads(1);
    static std::atomic<int> ran{0};
    ran = 0;
    auto task = [](void *, int32_t idx, uint8_t *) -> int32_t {
        ran++;
        return idx == 3 ? 5 : 0;
    };
    EXPECT_EQ(halide_do_par_for(nullptr, task, 0, 10, nullptr), 5);
    EXPECT_EQ(ran.load(), 4);
    tally_set_num_threads(0);
}

struct Nested {
    std::atomic<int> hits[16 * 16];
};

int32_t inner_task(void *uc, int32_t idx, uint8_t *closure) {
    auto *n = reinterpret_cast<Nested *>(closure);
    n->hits[idx]++;
    return 0;
}

int32_t outer_task(void *uc, int32_t idx, uint8_t *closure) {
    // A nested parallel loop, as a Halide schedule with two parallel dimensions produces.
    return halide_do_par_for(uc, inner_task, idx * 16, 16, closure);
}

TEST(ThreadPool, NestedLoopsDoNotDeadlock) {
    tally_set_num_threads(4);
    Nested n;
    for (auto &h : n.hits) {
        h = 0;
    }
    ASSERT_EQ(halide_do_par_for(nullptr, outer_task, 0, 16, reinterpret_cast<uint8_t *>(&n)), 0);
    for (int i = 0; i < 256; i++) {
        EXPECT_EQ(n.hits[i].load(), 1);
    }
    tally_set_num_threads(0);
}

TEST(ThreadPool, ManyConcurrentCallers) {
    tally_set_num_threads(3);
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int t = 0; t < 8; t++) {
        threads.emplace_back([&failures] {
            for (int rep = 0; rep < 50; rep++) {
                Counts counts;
                if (halide_do_par_for(nullptr, count_task, 100, 200,
                                      reinterpret_cast<uint8_t *>(&counts)) != 0) {
                    failures++;
                }
                for (int i = 0; i < 200; i++) {
                    if (counts.hits[i].load() != 1) {
                        failures++;
                    }
                }
            }
        });
    }
    for (auto &t : threads) {
        t.join();
    }
    EXPECT_EQ(failures.load(), 0);
    tally_set_num_threads(0);
}

TEST(ThreadPool, UsesSeveralThreads) {
    // Each iteration waits (up to a bound) for a second thread to be in an iteration too, so that
    // a worker the machine's load keeps off a core for a while still shows up: only a pool that
    // never runs two iterations at once fails, after the bound.
    tally_set_num_threads(2);
    static std::atomic<int> concurrent{0}, max_concurrent{0};
    static uint64_t start;
    concurrent = 0;
    max_concurrent = 0;
    start = tally_test::monotonic_ns();
    auto task = [](void *, int32_t, uint8_t *) -> int32_t {
        int now = ++concurrent;
        int prev = max_concurrent.load();
        while (now > prev && !max_concurrent.compare_exchange_weak(prev, now)) {
        }
        tally_test::wait_until([] { return max_concurrent.load() >= 2; }, start);
        concurrent--;
        return 0;
    };
    ASSERT_EQ(halide_do_par_for(nullptr, task, 0, 8, nullptr), 0);
    EXPECT_EQ(max_concurrent.load(), 2);
    tally_set_num_threads(0);
}

TEST(ThreadPool, ClaimsShareOfManyIterationsAtOnce) {
    // A thread claims a share of a loop's unclaimed iterations under one lock, not one at a time:
    // with two threads and 64 iterations, the caller (which claims first, before it lets go of
    // the lock it listed the job under) runs iterations 0 to 7 itself, in order, although the
    // worker is running and free to take any iteration not claimed yet. The claims shrink to
    // single iterations at the end, so both threads still take part: the caller's first
    // iteration past its first share waits (up to a bound) for the worker to have run one, as a
    // worker the machine's load keeps off a core for a while would otherwise find none left.
    tally_set_num_threads(2);
    struct Seen {
        std::thread::id by[64];
        std::atomic<int> order{0};
        int at[64];
        std::thread::id caller;
        std::atomic<int> by_worker{0};
        uint64_t start;
    };
    static Seen seen;
    seen.caller = std::this_thread::get_id();
    auto task = [](void *, int32_t idx, uint8_t *) -> int32_t {
        seen.by[idx] = std::this_thread::get_id();
        seen.at[idx] = seen.order++;
        if (seen.by[idx] != seen.caller) {
            seen.by_worker++;
        } else if (idx >= 8) {
            tally_test::wait_until([] { return seen.by_worker.load() > 0; }, seen.start);
        }
        tally_test::spin_for_ns(200000);
        return 0;
    };
    // A first loop starts the worker; the second is the one checked.
    for (int loop = 0; loop < 2; loop++) {
        seen.order = 0;
        seen.by_worker = 0;
        seen.start = tally_test::monotonic_ns();
        ASSERT_EQ(halide_do_par_for(nullptr, task, 0, 64, nullptr), 0);
    }
    int others = 0;
    for (int i = 0; i < 64; i++) {
        others += seen.by[i] != std::this_thread::get_id();
    }
    for (int i = 0; i < 8; i++) {
        EXPECT_EQ(seen.by[i], std::this_thread::get_id()) << "iteration " << i;
        if (i > 0) {
            EXPECT_LT(seen.at[i - 1], seen.at[i]) << "iteration " << i;
        }
    }
    EXPECT_GT(others, 0) << "the worker ran no iteration";
    tally_set_num_threads(0);
}

TEST(ThreadPool, SetNumThreadsReturnsPrevious) {
    tally_set_num_threads(3);
    EXPECT_EQ(tally_set_num_threads(5), 3);
    EXPECT_EQ(tally_set_num_threads(0), 5);
}

TEST(ThreadPool, ShutdownThenRestart) {
    Counts counts;
    ASSERT_EQ(halide_do_par_for(nullptr, count_task, 100, 50, reinterpret_cast<uint8_t *>(&counts)),
              0);
    EXPECT_EQ(tally_thread_pool_shutdown(), 0);
    ASSERT_EQ(halide_do_par_for(nullptr, count_task, 100, 50, reinterpret_cast<uint8_t *>(&counts)),
              0);
    for (int i = 0; i < 50; i++) {
        EXPECT_EQ(counts.hits[i].load(), 2);
    }
}

TEST(ThreadPool, WorkerStartFailureFallsBackToTheCaller) {
    tally_test::MessageCapture capture;
    tally_thread_pool_shutdown();
    tally_set_num_threads(4);
    tally_testing_fail_thread_starts(100);
    Counts counts;
    EXPECT_EQ(
        halide_do_par_for(nullptr, count_task, 100, 100, reinterpret_cast<uint8_t *>(&counts)), 0);
    tally_testing_fail_thread_starts(0);
    for (int i = 0; i < 100; i++) {
        EXPECT_EQ(counts.hits[i].load(), 1);
    }
    EXPECT_NE(capture.printed().find("could not start a thread pool worker"), std::string::npos);
    tally_set_num_threads(0);
}

}  // namespace
