// Where a woken pool thread runs (runtime/src/parallel/placement.c). The caller of a parallel loop
// whose last run took 40 us or more, waking a worker which went to sleep on the caller's core,
// narrows the worker's affinity to the other cores for the loop; the worker widens it back before
// it sleeps again; a loop's first run, and any loop with steering off, leaves the worker's
// affinity alone.
//
// The setup makes the worker sleep on a known core: in a first loop (of 100 us or more) it pins
// itself to core C (its own call, in its iteration), then sleeps there; the test widens it back
// while it sleeps and pins the caller to C. The second loop is the one checked.
#include "TestUtil.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

namespace {

pid_t thread_id() {
    return pid_t(syscall(SYS_gettid));
}

cpu_set_t affinity_of(pid_t tid) {
    cpu_set_t set;
    CPU_ZERO(&set);
    EXPECT_EQ(sched_getaffinity(tid, sizeof set, &set), 0);
    return set;
}

void set_affinity(pid_t tid, const cpu_set_t &set) {
    ASSERT_EQ(sched_setaffinity(tid, sizeof set, &set), 0);
}

cpu_set_t just(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return set;
}

// The thread's state letter in /proc ('S': asleep).
char state_of(pid_t tid) {
    std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/stat");
    std::string stat;
    std::getline(f, stat);
    size_t paren = stat.rfind(')');
    return paren == std::string::npos || paren + 2 >= stat.size() ? '?' : stat[paren + 2];
}

// One loop of two iterations: the caller runs one and waits (bounded) for the worker to have run
// the other, so the worker always takes part.
struct Loop {
    pid_t caller = 0;
    int pin = -1;  // the worker pins itself to this core in its iteration (-1: it does not)
    std::atomic<pid_t> worker{0};
    int worker_cpu = -1;
    cpu_set_t worker_affinity;  // in its iteration
    uint64_t start = 0;
};
Loop loop;

// Each iteration also runs 100 us, so that every run of the loop is long enough to steer for.
// iteration<N> is a loop of its own, with a history of its own.
template <int N>
int32_t iteration(void *, int32_t, uint8_t *) {
    if (thread_id() == loop.caller) {
        tally_test::wait_until([] { return loop.worker.load() != 0; }, loop.start);
    } else {
        if (loop.pin >= 0) {
            cpu_set_t one = just(loop.pin);
            sched_setaffinity(0, sizeof one, &one);
        }
        loop.worker_affinity = affinity_of(0);
        loop.worker_cpu = sched_getcpu();
        loop.worker.store(thread_id());
    }
    tally_test::spin_for_ns(100000);
    return 0;
}

template <int N = 0>
pid_t run_loop(int pin) {
    loop.caller = thread_id();
    loop.pin = pin;
    loop.worker = 0;
    loop.start = tally_test::monotonic_ns();
    EXPECT_EQ(halide_do_par_for(nullptr, iteration<N>, 0, 2, nullptr), 0);
    return loop.worker.load();
}

// Waits (bounded) until `tid` has been seen asleep twice, a millisecond apart.
bool wait_asleep(pid_t tid) {
    return tally_test::wait_until(
        [tid] {
            if (state_of(tid) != 'S') {
                return false;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            return state_of(tid) == 'S';
        },
        tally_test::monotonic_ns());
}

class WorkerPlacement : public ::testing::Test {
protected:
    cpu_set_t all;  // the caller's affinity at the start
    int core = -1;  // C
    pid_t worker = 0;

    void SetUp() override {
        all = affinity_of(0);
        if (CPU_COUNT(&all) < 2) {
            GTEST_SKIP() << "needs two cores the test may run on";
        }
        for (int c = 0; c < CPU_SETSIZE && core < 0; c++) {
            if (CPU_ISSET(c, &all)) {
                core = c;
            }
        }
        tally_thread_pool_shutdown();
        tally_set_num_threads(2);
        tally_testing_set_worker_steering(1);
    }

    void TearDown() override {
        if (CPU_COUNT(&all) >= 2) {
            set_affinity(0, all);
            tally_testing_set_worker_steering(1);
            tally_set_num_threads(0);
        }
    }

    // One run of loop N that leaves the worker asleep on C with its whole affinity, and the
    // caller on C: the run after it is the one a test checks.
    template <int N>
    void sleep_worker_on_core() {
        set_affinity(0, all);
        worker = run_loop<N>(core);
        ASSERT_NE(worker, 0) << "no worker ran the loop";
        ASSERT_TRUE(wait_asleep(worker)) << "the worker did not go to sleep";
        set_affinity(worker, all);
        set_affinity(0, just(core));
    }

    void expect_left_alone() {
        EXPECT_TRUE(CPU_EQUAL(&loop.worker_affinity, &all) != 0)
            << "the worker's affinity changed: " << CPU_COUNT(&loop.worker_affinity) << " cores of "
            << CPU_COUNT(&all);
    }
};

TEST_F(WorkerPlacement, CallerWakesItsCoresSleeperOntoAnotherCore) {
    sleep_worker_on_core<0>();
    sleep_worker_on_core<0>();
    ASSERT_EQ(run_loop<0>(-1), worker);  // the loop's third run
    EXPECT_FALSE(CPU_ISSET(core, &loop.worker_affinity))
        << "the worker may still run on core " << core;
    EXPECT_EQ(CPU_COUNT(&loop.worker_affinity), CPU_COUNT(&all) - 1)
        << "the worker lost more than the caller's core";
    EXPECT_NE(loop.worker_cpu, core);
    // Before it sleeps again, it has its whole affinity back.
    set_affinity(0, all);
    cpu_set_t now;
    EXPECT_TRUE(tally_test::wait_until(
        [&] {
            now = affinity_of(worker);
            return CPU_EQUAL(&now, &all) != 0;
        },
        tally_test::monotonic_ns()))
        << "the worker kept " << CPU_COUNT(&now) << " cores of " << CPU_COUNT(&all);
}

TEST_F(WorkerPlacement, ALoopsFirstTwoRunsAreNotSteered) {
    sleep_worker_on_core<1>();
    ASSERT_EQ(run_loop<1>(-1), worker);  // the second run
    expect_left_alone();
    // A loop's first run, with a worker asleep on the caller's core after a long loop.
    sleep_worker_on_core<1>();
    ASSERT_EQ(run_loop<2>(-1), worker);
    expect_left_alone();
}

TEST_F(WorkerPlacement, OffLeavesTheWorkerWhereTheKernelPutsIt) {
    sleep_worker_on_core<3>();
    sleep_worker_on_core<3>();
    EXPECT_EQ(tally_testing_set_worker_steering(0), 1);
    ASSERT_EQ(run_loop<3>(-1), worker);
    expect_left_alone();
}

// ---- task threads: a fork's caller wakes the task thread it hands a task to on its own core ----
//
// The task thread first runs a fork's task that pins it to core D and records its id; it then
// sleeps on D, and the test widens its affinity back while it sleeps. The caller, pinned to C,
// forks again: the task thread must run its task on C (its affinity is C alone from the wake-up
// call until its first instructions, which widen it back), and its affinity is whole again.

struct Fork {
    pid_t caller = 0;
    int pin = -1;  // the task thread pins itself to this core in its task (-1: it does not)
    std::atomic<pid_t> task_thread{0};
    int task_cpu = -1;
    uint64_t start = 0;
};
Fork fork_state;

// tasks[0]: handed to a task thread (it may block).
int handed_task(void *, int, int, uint8_t *, void *) {
    if (fork_state.pin >= 0) {
        cpu_set_t one = just(fork_state.pin);
        sched_setaffinity(0, sizeof one, &one);
    }
    fork_state.task_cpu = sched_getcpu();
    fork_state.task_thread.store(thread_id());
    return 0;
}

// tasks[1]: the caller's own, which waits (bounded) for the other to have run, as a consumer
// waits for its producer.
int callers_task(void *, int, int, uint8_t *, void *) {
    tally_test::wait_until([] { return fork_state.task_thread.load() != 0; }, fork_state.start);
    return 0;
}

pid_t run_fork(int pin) {
    fork_state.caller = thread_id();
    fork_state.pin = pin;
    fork_state.task_thread = 0;
    fork_state.task_cpu = -1;
    fork_state.start = tally_test::monotonic_ns();
    halide_parallel_task_t tasks[2] = {};
    tasks[0].fn = handed_task;
    tasks[0].name = "handed";
    tasks[0].extent = 1;
    tasks[0].min_threads = 1;
    tasks[0].serial = true;
    tasks[1].fn = callers_task;
    tasks[1].name = "caller's";
    tasks[1].extent = 1;
    tasks[1].min_threads = 1;
    tasks[1].serial = true;
    EXPECT_EQ(halide_do_parallel_tasks(nullptr, 2, tasks, nullptr), 0);
    return fork_state.task_thread.load();
}

TEST_F(WorkerPlacement, ForkWakesItsSleepingTaskThreadOnTheCallersCore) {
    int other = -1;  // D
    for (int c = 0; c < CPU_SETSIZE && other < 0; c++) {
        if (c != core && CPU_ISSET(c, &all)) {
            other = c;
        }
    }
    set_affinity(0, just(core));
    const pid_t tt = run_fork(other);
    ASSERT_NE(tt, 0) << "no task thread ran the handed task";
    ASSERT_NE(tt, thread_id()) << "the caller ran the handed task itself";
    ASSERT_EQ(fork_state.task_cpu, other);
    ASSERT_TRUE(wait_asleep(tt)) << "the task thread did not go to sleep";
    set_affinity(tt, all);
    ASSERT_EQ(run_fork(-1), tt);
    EXPECT_EQ(fork_state.task_cpu, core)
        << "the task thread, asleep on core " << other << ", ran on " << fork_state.task_cpu
        << ", not on its caller's core " << core;
    cpu_set_t now = affinity_of(tt);
    EXPECT_TRUE(CPU_EQUAL(&now, &all) != 0)
        << "the task thread kept " << CPU_COUNT(&now) << " cores of " << CPU_COUNT(&all);
}

}  // namespace
