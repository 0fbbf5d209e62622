// halide_malloc's cache of freed large blocks: reuse (best fit), the peak of live blocks as its
// bound, the limit, release, small blocks left out, fault injection first, thread safety, and
// corruption detection.

#include "TestUtil.h"

#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr size_t kBig = 4u << 20;

class MallocCache : public ::testing::Test {
protected:
    void SetUp() override {
        tally_malloc_cache_release();
        previous_limit_ = tally_malloc_cache_set_limit(64u << 20);
    }
    void TearDown() override {
        tally_malloc_cache_set_limit(previous_limit_);
        tally_malloc_cache_release();
    }
    static tally_malloc_cache_stats stats() {
        tally_malloc_cache_stats s{};
        tally_malloc_cache_get_stats(&s);
        return s;
    }
    uint64_t previous_limit_ = 0;
};

TEST_F(MallocCache, AFreedBigBlockServesTheNextAllocationOfItsClass) {
    void *a = halide_malloc(nullptr, kBig);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % TALLY_MALLOC_ALIGNMENT, 0u);
    memset(a, 7, kBig);
    halide_free(nullptr, a);
    EXPECT_EQ(stats().cached_blocks, 1u);
    EXPECT_GE(stats().cached_bytes, kBig);
    // A slightly smaller request of the same class gets the same block back.
    void *b = halide_malloc(nullptr, kBig - 1000);
    EXPECT_EQ(b, a);
    EXPECT_EQ(stats().hits, 1u);
    EXPECT_EQ(stats().cached_blocks, 0u);
    // A request of another class does not.
    void *c = halide_malloc(nullptr, 2 * kBig);
    EXPECT_NE(c, a);
    EXPECT_EQ(stats().misses, 2u);
    halide_free(nullptr, b);
    halide_free(nullptr, c);
    EXPECT_EQ(stats().cached_blocks, 2u);
    tally_malloc_cache_release();
    EXPECT_EQ(stats().cached_blocks, 0u);
    EXPECT_EQ(stats().cached_bytes, 0u);
}

TEST_F(MallocCache, SmallBlocksAreNotCached) {
    void *p = halide_malloc(nullptr, 1000);
    ASSERT_NE(p, nullptr);
    halide_free(nullptr, p);
    EXPECT_EQ(stats().cached_blocks, 0u);
    EXPECT_EQ(stats().misses, 0u);
}

TEST_F(MallocCache, IntermediatesOfAFewHundredKiBAreCached) {
    // The C library trims blocks of this size off its heap when they are freed, so a pipeline
    // run again would page them in afresh.
    constexpr size_t kMedium = 384u << 10;
    void *a = halide_malloc(nullptr, kMedium);
    ASSERT_NE(a, nullptr);
    halide_free(nullptr, a);
    EXPECT_EQ(stats().cached_blocks, 1u);
    void *b = halide_malloc(nullptr, kMedium);
    EXPECT_EQ(b, a);
    EXPECT_EQ(stats().hits, 1u);
    halide_free(nullptr, b);
}

TEST_F(MallocCache, TheBoundIsRespected) {
    tally_malloc_cache_set_limit(kBig + kBig / 2);
    void *a = halide_malloc(nullptr, kBig);
    void *b = halide_malloc(nullptr, kBig);
    halide_free(nullptr, a);
    halide_free(nullptr, b);  // would exceed the bound: back to the system
    EXPECT_EQ(stats().cached_blocks, 1u);
    EXPECT_EQ(stats().overflows, 1u);
    EXPECT_LE(stats().cached_bytes, kBig + kBig / 2);
    // Lowering the bound releases what is over it; 0 turns the cache off.
    tally_malloc_cache_set_limit(0);
    EXPECT_EQ(stats().cached_bytes, 0u);
    void *c = halide_malloc(nullptr, kBig);
    halide_free(nullptr, c);
    EXPECT_EQ(stats().cached_blocks, 0u);
}

TEST_F(MallocCache, AFreedBlockServesASmallerRequestOfAnotherClass) {
    // As a heap would: an intermediate reuses the pages of a bigger one freed before it, the
    // smallest cached block that holds it.
    void *big = halide_malloc(nullptr, 4 * kBig);
    void *mid = halide_malloc(nullptr, 2 * kBig);
    halide_free(nullptr, big);
    halide_free(nullptr, mid);
    ASSERT_EQ(stats().cached_blocks, 2u);
    void *p = halide_malloc(nullptr, kBig);
    EXPECT_EQ(p, mid);
    EXPECT_EQ(stats().hits, 1u);
    halide_free(nullptr, p);
}

TEST_F(MallocCache, HoldsNoMoreThanThePeakOfLiveBlocks) {
    // Two intermediates never alive together: Halide's code holds one of them at a time, and so
    // does this cache. Without the bound it kept a block for each (the sum, not the peak).
    for (int run = 0; run < 3; run++) {
        void *a = halide_malloc(nullptr, kBig);
        halide_free(nullptr, a);
        void *b = halide_malloc(nullptr, 2 * kBig);
        tally_malloc_cache_stats s = stats();
        EXPECT_EQ(s.cached_bytes, 0u) << "run " << run << ": a's block is kept beside b's";
        EXPECT_LE(s.live_bytes, s.peak_bytes);
        halide_free(nullptr, b);
        EXPECT_EQ(stats().cached_blocks, 1u);
        EXPECT_LE(stats().cached_bytes, stats().peak_bytes);
    }
    // From the second run on, both take the one block that is kept: warm, and no more memory.
    EXPECT_EQ(stats().hits, 4u);
    EXPECT_EQ(stats().misses, 2u);
}

TEST_F(MallocCache, BlocksAliveTogetherAreAllKept) {
    void *a = halide_malloc(nullptr, kBig);
    void *b = halide_malloc(nullptr, 2 * kBig);
    halide_free(nullptr, a);
    halide_free(nullptr, b);
    EXPECT_EQ(stats().cached_blocks, 2u);
    void *a2 = halide_malloc(nullptr, kBig);
    void *b2 = halide_malloc(nullptr, 2 * kBig);
    EXPECT_EQ(a2, a);
    EXPECT_EQ(b2, b);
    EXPECT_EQ(stats().hits, 2u);
    halide_free(nullptr, a2);
    halide_free(nullptr, b2);
}

TEST_F(MallocCache, AnInjectedFaultFailsEvenWithABlockCached) {
    tally_test::MessageCapture capture;
    halide_free(nullptr, halide_malloc(nullptr, kBig));
    ASSERT_EQ(stats().cached_blocks, 1u);
    ASSERT_EQ(tally_testing_set_fault("malloc"), 0);
    EXPECT_EQ(halide_malloc(nullptr, kBig), nullptr);
    EXPECT_EQ(stats().cached_blocks, 1u);  // untouched
    ASSERT_EQ(capture.errors().size(), 1u);
    EXPECT_NE(capture.errors()[0].find("injected fault"), std::string::npos);
    void *p = halide_malloc(nullptr, kBig);  // the next one succeeds, from the cache
    EXPECT_NE(p, nullptr);
    EXPECT_EQ(stats().hits, 1u);
    halide_free(nullptr, p);
}

TEST_F(MallocCache, HugeRequestsFailCleanly) {
    tally_test::MessageCapture capture;
    EXPECT_EQ(halide_malloc(nullptr, SIZE_MAX), nullptr);
    EXPECT_EQ(halide_malloc(nullptr, SIZE_MAX - 10), nullptr);
    EXPECT_EQ(capture.errors().size(), 2u);
    void *zero = halide_malloc(nullptr, 0);
    EXPECT_NE(zero, nullptr);
    halide_free(nullptr, zero);
    halide_free(nullptr, nullptr);
}

TEST_F(MallocCache, ConcurrentAllocationsAndFreesStayConsistent) {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; t++) {
        threads.emplace_back([t] {
            for (int i = 0; i < 200; i++) {
                size_t n = (size_t(1) << 20) * size_t(1 + (i + t) % 5);
                auto *p = static_cast<uint8_t *>(halide_malloc(nullptr, n));
                ASSERT_NE(p, nullptr);
                p[0] = uint8_t(i);
                p[n - 1] = uint8_t(t);
                halide_free(nullptr, p);
            }
        });
    }
    for (auto &th : threads) {
        th.join();
    }
    tally_malloc_cache_stats s = stats();
    EXPECT_EQ(s.hits + s.misses, 800u);
    EXPECT_GT(s.hits, 0u);
    EXPECT_LE(s.cached_bytes, s.limit_bytes);
}

TEST(MallocCacheDeathTest, ADoubleFreeAborts) {
    EXPECT_DEATH(
        {
            void *p = halide_malloc(nullptr, kBig);
            halide_free(nullptr, p);
            halide_free(nullptr, p);
        },
        "freed twice");
}

}  // namespace
