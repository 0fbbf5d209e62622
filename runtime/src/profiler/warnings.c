// The report's warnings (tally_runtime.h, "Report warnings"): rules over one pipeline's totals,
// read from the plain stats structs only, so the report of this process and a report read back
// from JSON (tally_profiler_format_text) warn alike. Each rule states its number and threshold
// in the message, per run where counts grow with runs.

#include "tally_runtime.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

typedef struct sink {
    tally_warning *out;
    int32_t max;
    int32_t count;
} sink;

static void warn(sink *k, int32_t kind, int32_t slot, double value, double threshold,
                 const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static void warn(sink *k, int32_t kind, int32_t slot, double value, double threshold,
                 const char *fmt, ...) {
    if (k->count < k->max) {
        tally_warning *w = &k->out[k->count];
        w->kind = kind;
        w->slot = slot;
        w->value = value;
        w->threshold = threshold;
        va_list args;
        va_start(args, fmt);
        vsnprintf(w->message, sizeof(w->message), fmt, args);
        va_end(args);
    }
    k->count++;
}

static void check_bounce(sink *k, const tally_pipeline_stats *p, const tally_slot_stats *slots) {
    double runs = (double)p->runs;
    for (int32_t f = 1; f < p->num_slots; f++) {
        if (slots[f].kind != TALLY_SLOT_FUNC) {
            continue;
        }
        uint64_t to_device = 0, to_host = 0;
        for (int32_t c = 0; c < p->num_slots; c++) {
            if (slots[c].kind != TALLY_SLOT_FUNC && slots[c].parent == f) {
                *(slots[c].kind == TALLY_SLOT_COPY_TO_DEVICE ? &to_device : &to_host) +=
                    slots[c].copies;
            }
        }
        double per_run = (double)(to_device + to_host) / runs;
        if (to_device > 0 && to_host > 0 && per_run >= TALLY_WARN_BOUNCE_COPIES) {
            warn(k, TALLY_WARNING_BUFFER_BOUNCE, f, per_run, TALLY_WARN_BOUNCE_COPIES,
                 "buffer %s bounces between host and device: %.1f copies per run (%.1f to device, "
                 "%.1f to host; warned at %d)",
                 slots[f].name, per_run, (double)to_device / runs, (double)to_host / runs,
                 TALLY_WARN_BOUNCE_COPIES);
        }
    }
}

static void check_syncs(sink *k, const tally_pipeline_stats *p) {
    if (p->kernel_launches == 0 || p->explicit_syncs < p->kernel_launches) {
        return;
    }
    double per_launch = (double)p->explicit_syncs / (double)p->kernel_launches;
    warn(k, TALLY_WARNING_SYNCS_PER_LAUNCH, -1, per_launch, 1.0,
         "more than one sync per launch: %" PRIu64 " explicit syncs for %" PRIu64
         " launches (%.2f per launch, plus the profiler's one), so the device cannot run ahead",
         p->explicit_syncs, p->kernel_launches, per_launch);
}

static void check_time(sink *k, const tally_pipeline_stats *p, const tally_slot_stats *slots) {
    uint64_t copy_ns = 0;
    for (int32_t s = 0; s < p->num_slots; s++) {
        if (slots[s].kind != TALLY_SLOT_FUNC) {
            copy_ns += slots[s].time_ns;
        }
    }
    double percent = p->total_ns ? 100.0 * (double)copy_ns / (double)p->total_ns : 0.0;
    if (percent >= TALLY_WARN_COPY_PERCENT) {
        warn(k, TALLY_WARNING_COPY_TIME, -1, percent, TALLY_WARN_COPY_PERCENT,
             "copies take %.1f%% of the time (%.3f of %.3f ms; warned at %.0f%%)", percent,
             (double)copy_ns / 1e6, (double)p->total_ns / 1e6, TALLY_WARN_COPY_PERCENT);
    }
    const int exact = (p->flags & TALLY_PROFILER_FLAG_EXACT) != 0;
    if (p->kernel_launches > 0 && (exact || p->samples > 0) &&
        p->average_threads < TALLY_WARN_WAIT_THREADS) {
        if (exact) {
            warn(k, TALLY_WARNING_SYNC_WAIT, -1, p->average_threads, TALLY_WARN_WAIT_THREADS,
                 "the host mostly waits for the device: %.2f threads working on average, timed "
                 "exactly (warned under %.2f)",
                 p->average_threads, TALLY_WARN_WAIT_THREADS);
        } else {
            warn(k, TALLY_WARNING_SYNC_WAIT, -1, p->average_threads, TALLY_WARN_WAIT_THREADS,
                 "the host mostly waits for the device: %.2f threads working on average over "
                 "%" PRIu64 " samples (warned under %.2f)",
                 p->average_threads, p->samples, TALLY_WARN_WAIT_THREADS);
        }
    }
}

static void check_peak(sink *k, const tally_pipeline_stats *p, const tally_slot_stats *slots) {
    int32_t top = -1;
    uint64_t top_peak = 0, others = 0;
    for (int32_t s = 0; s < p->num_slots; s++) {
        if (slots[s].kind != TALLY_SLOT_FUNC) {
            continue;
        }
        uint64_t peak = slots[s].heap.peak + slots[s].device.peak;
        if (top < 0 || peak > top_peak) {
            if (top >= 0) {
                others += top_peak;
            }
            top = s;
            top_peak = peak;
        } else {
            others += peak;
        }
    }
    if (top < 0 || top_peak < TALLY_WARN_PEAK_MIN_BYTES) {
        return;
    }
    if (others == 0) {
        // Infinitely more than the rest: the ratio is INFINITY (the JSON report writes null).
        warn(k, TALLY_WARNING_PEAK_MEMORY, top, INFINITY, TALLY_WARN_PEAK_RATIO,
             "%s's peak memory (%" PRIu64
             " bytes) is all there is: the other Funcs together peak at 0 bytes (warned at %.0fx)",
             slots[top].name, top_peak, TALLY_WARN_PEAK_RATIO);
        return;
    }
    double ratio = (double)top_peak / (double)others;
    if (ratio >= TALLY_WARN_PEAK_RATIO) {
        warn(k, TALLY_WARNING_PEAK_MEMORY, top, ratio, TALLY_WARN_PEAK_RATIO,
             "%s's peak memory (%" PRIu64
             " bytes) is %.1fx that of all other Funcs together (%" PRIu64
             " bytes; warned at %.0fx)",
             slots[top].name, top_peak, ratio, others, TALLY_WARN_PEAK_RATIO);
    }
}

static void check_samples(sink *k, const tally_pipeline_stats *p) {
    // Exact mode measures every switch: its shares come from no samples.
    if ((p->flags & TALLY_PROFILER_FLAG_EXACT) || p->samples >= TALLY_WARN_MIN_SAMPLES) {
        return;
    }
    // A share p of n samples has a standard error of sqrt(p (1 - p) / n), at most 0.5 / sqrt(n).
    double points = p->samples ? 50.0 / sqrt((double)p->samples) : 50.0;
    warn(k, TALLY_WARNING_FEW_SAMPLES, -1, (double)p->samples, TALLY_WARN_MIN_SAMPLES,
         "only %" PRIu64 " samples (warned under %d): a time share is uncertain by up to %.0f "
         "percentage points; run longer or lower TALLY_PROFILE_INTERVAL_US",
         p->samples, TALLY_WARN_MIN_SAMPLES, points);
}

const char *tally_warning_kind_name(int32_t kind) {
    static const char *const names[] = {"buffer_bounce", "syncs_per_launch", "copy_time",
                                        "sync_wait",     "peak_memory",      "few_samples"};
    return kind >= 0 && kind < (int32_t)(sizeof(names) / sizeof(names[0])) ? names[kind]
                                                                           : "unknown";
}

int32_t tally_profiler_check_warnings(const tally_pipeline_stats *pipeline,
                                      const tally_slot_stats *slots, tally_warning *out,
                                      int32_t max_warnings) {
    if (!pipeline || pipeline->num_slots < 0 || (pipeline->num_slots > 0 && !slots) ||
        max_warnings < 0 || (max_warnings > 0 && !out)) {
        return TALLY_ERROR_BAD_ARGUMENT;
    }
    if (pipeline->runs == 0) {
        return 0;
    }
    sink k = {out, max_warnings, 0};
    check_bounce(&k, pipeline, slots);
    check_syncs(&k, pipeline);
    check_time(&k, pipeline, slots);
    check_peak(&k, pipeline, slots);
    check_samples(&k, pipeline);
    return k.count;
}
