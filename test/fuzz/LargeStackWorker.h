/** \file
 * Runs each small fuzz input on one long-lived thread with a large stack.
 *
 * The compiler's whole-module entry points (parse_module, verify, lower, equal, to_string) run
 * their work on a fresh 1 GiB-stack thread unless the caller is already on one
 * (src/ir/LargeStack.h). A fuzz target that called them from libFuzzer's thread would create and
 * join several such threads per input; under ASan each one costs far more than parsing a small
 * input. The worker here is created once and runs its loop through with_large_stack, so the loop
 * runs on one large-stack thread and every entry point inside runs inline on it.
 */
#ifndef TALLY_TEST_FUZZ_LARGESTACKWORKER_H
#define TALLY_TEST_FUZZ_LARGESTACKWORKER_H

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "ir/LargeStack.h"

namespace tally_fuzz {

/** Inputs below this many bytes run on the worker; longer ones as before, each whole-module
 * entry point on a fresh thread. ASan clears a thread's stack shadow after a throw
 * (__asan_handle_no_return) only when the throw is at most 64 MiB deep; deeper, it leaves the
 * redzones of the frames a CompileError unwound poisoned ("ASan is ignoring requested
 * __asan_handle_no_return", google/sanitizers#189), and a later input reusing those stack
 * addresses would report a false stack-buffer-overflow. The parser's 10,000-level nesting
 * limit is reached that deep (about 6.7 KB of stack a level under ASan), which takes at least
 * 10,000 bytes of input; a 4 KiB input cannot recurse anywhere near 64 MiB. */
constexpr size_t worker_max_input = 4096;

class LargeStackWorker {
public:
    /** Runs `check` on the worker; returns what it returned. */
    std::string run(const std::function<std::string()> &check) {
        std::unique_lock<std::mutex> lock(mu);
        job = &check;
        done = false;
        cv.notify_all();
        cv.wait(lock, [&] { return done; });
        return result;
    }

    static LargeStackWorker &get() {
        static LargeStackWorker *w = new LargeStackWorker();  // lives until exit, never joined
        return *w;
    }

    /** Checks one input of `size` bytes: on the worker when it is small, else directly. */
    static std::string check(size_t size, const std::function<std::string()> &check) {
        return size < worker_max_input ? get().run(check) : check();
    }

private:
    std::mutex mu;
    std::condition_variable cv;
    const std::function<std::string()> *job = nullptr;
    bool done = false;
    std::string result;

    LargeStackWorker() {
        std::thread([this]() { tally::with_large_stack([this]() { loop(); }); }).detach();
    }

    void loop() {
        std::unique_lock<std::mutex> lock(mu);
        while (true) {
            cv.wait(lock, [&] { return job != nullptr && !done; });
            const std::function<std::string()> *current = job;
            lock.unlock();
            std::string r = (*current)();
            lock.lock();
            result = std::move(r);
            job = nullptr;
            done = true;
            cv.notify_all();
        }
    }
};

}  // namespace tally_fuzz

#endif  // TALLY_TEST_FUZZ_LARGESTACKWORKER_H
