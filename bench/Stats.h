/** \file
 * The statistics the benchmarks report: medians, and a bootstrap interval for a quotient of two
 * medians measured in pairs (interleaved runs, fresh processes), so that a figure near a goal
 * says whether this machine's noise can tell it from the goal.
 */
#ifndef TALLY_BENCH_STATS_H
#define TALLY_BENCH_STATS_H

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    if (n == 0) {
        return 0.0;
    }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/** A 90 % bootstrap interval of median(a) / median(b) over paired samples (a[i] and b[i] were
 * measured together: one round, one process; they are resampled together): the 5th and 95th
 * percentiles of 2,000 resamples, with a fixed seed so that a rerun on the same samples gives the
 * same interval. */
inline std::pair<double, double> bootstrap_interval(const std::vector<double> &a,
                                                    const std::vector<double> &b) {
    if (a.empty() || a.size() != b.size()) {
        return {0.0, 0.0};
    }
    std::mt19937 rng(20261202);
    std::uniform_int_distribution<size_t> pick(0, a.size() - 1);
    std::vector<double> quotients, ra(a.size()), rb(b.size());
    const int resamples = 2000;
    for (int r = 0; r < resamples; r++) {
        for (size_t i = 0; i < a.size(); i++) {
            size_t j = pick(rng);
            ra[i] = a[j];
            rb[i] = b[j];
        }
        quotients.push_back(median(ra) / median(rb));
    }
    std::sort(quotients.begin(), quotients.end());
    return {quotients[resamples / 20], quotients[resamples - 1 - resamples / 20]};
}

/** The median of the per-pair quotients a[i] / b[i] (a[i] and b[i] measured together: one round
 * of interleaved runs), with its 90 % bootstrap interval as bootstrap_interval draws it: a slow
 * drift of the machine's speed (another guest's load, the clock) moves both runs of a pair, so
 * it cancels in each quotient rather than widening the interval. {0, 0, 0} when the samples do
 * not pair up. */
struct PairedQuotient {
    double median = 0, lo = 0, hi = 0;
};

inline PairedQuotient paired_quotient(const std::vector<double> &a, const std::vector<double> &b) {
    if (a.empty() || a.size() != b.size()) {
        return {};
    }
    std::vector<double> q(a.size());
    for (size_t i = 0; i < a.size(); i++) {
        q[i] = a[i] / b[i];
    }
    std::mt19937 rng(20261202);
    std::uniform_int_distribution<size_t> pick(0, q.size() - 1);
    std::vector<double> medians, r(q.size());
    const int resamples = 2000;
    for (int k = 0; k < resamples; k++) {
        for (double &x : r) {
            x = q[pick(rng)];
        }
        medians.push_back(median(r));
    }
    std::sort(medians.begin(), medians.end());
    return {median(q), medians[resamples / 20], medians[resamples - 1 - resamples / 20]};
}

#endif  // TALLY_BENCH_STATS_H
