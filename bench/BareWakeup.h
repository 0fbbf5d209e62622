/** \file
 * The floor under any periodic profiler thread: what this machine charges a thread that does
 * nothing but sleep to absolute CLOCK_MONOTONIC deadlines at a fixed interval. The sampler and
 * continuous-mode benchmarks report it next to their own figures, so that a cost that misses a
 * target can be read against what merely waking up costs here.
 */
#ifndef TALLY_BENCH_BAREWAKEUP_H
#define TALLY_BENCH_BAREWAKEUP_H

#include <atomic>
#include <cstdint>
#include <pthread.h>
#include <thread>
#include <time.h>

/** A thread waking every `interval_ns` until destroyed; cpu_ns() is its CPU time so far. */
class BareWakeupThread {
public:
    explicit BareWakeupThread(uint64_t interval_ns)
        : thread_([this, interval_ns] {
              timespec now;
              clock_gettime(CLOCK_MONOTONIC, &now);
              uint64_t next = uint64_t(now.tv_sec) * 1000000000u + uint64_t(now.tv_nsec);
              while (!stop_.load()) {
                  next += interval_ns;
                  timespec deadline = {time_t(next / 1000000000u), long(next % 1000000000u)};
                  clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, nullptr);
              }
          }) {
        pthread_getcpuclockid(thread_.native_handle(), &clock_);
    }
    ~BareWakeupThread() {
        stop_ = true;
        thread_.join();
    }
    BareWakeupThread(const BareWakeupThread &) = delete;
    BareWakeupThread &operator=(const BareWakeupThread &) = delete;

    uint64_t cpu_ns() const {
        timespec ts;
        clock_gettime(clock_, &ts);
        return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
    }

private:
    std::atomic<bool> stop_{false};
    std::thread thread_;
    clockid_t clock_{};
};

#endif  // TALLY_BENCH_BAREWAKEUP_H
