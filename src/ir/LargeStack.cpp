// A thread with a large stack for deep recursion over big IR trees.

#include "ir/LargeStack.h"

#include <pthread.h>

#include <cstring>

#include "tally/Error.h"

namespace tally {
namespace detail {

namespace {

thread_local bool on_large_stack = false;

struct Job {
    const std::function<void()> *fn;
    std::exception_ptr error;
};

void *trampoline(void *arg) {
    Job *job = static_cast<Job *>(arg);
    on_large_stack = true;
    try {
        (*job->fn)();
    } catch (...) {
        job->error = std::current_exception();
    }
    return nullptr;
}

}  // namespace

void run_on_large_stack(const std::function<void()> &fn) {
    if (on_large_stack) {
        fn();
        return;
    }
    Job job{&fn, nullptr};
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, size_t(1) << 30);
    pthread_t t;
    int rc = pthread_create(&t, &attr, trampoline, &job);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        // No thread available: do the work here rather than fail.
        fn();
        return;
    }
    pthread_join(t, nullptr);
    if (job.error) {
        std::rethrow_exception(job.error);
    }
}

}  // namespace detail
}  // namespace tally
