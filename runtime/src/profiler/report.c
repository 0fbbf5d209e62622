// The profiler report: text and JSON, on demand and at process exit.
//
// Text format (one block per pipeline, in registration order, blocks separated by a blank line;
// every number is a total over the pipeline's finished runs):
//
//   pipeline: <name>
//     target:           <target string of its first run>
//     mode:             exact (<clock>) | sampling (sampler thread) | sampling (timer signal)
//     total time:       <sum of run wall times, ms, 3 decimals> ms
//     runs:             <count>
//     time per run:     <total time / runs> ms
//     samples:          <sampler ticks>
//     average threads:  <average over ticks of working threads, 2 decimals>
//     heap peak:        <largest run-wide heap in use in any run> bytes
//     device peak:      <same for device memory> bytes
//     kernel launches:  <count>
//     injected syncs:   <halide_device_sync_global calls>
//     explicit syncs:   <halide_device_sync calls>
//     copies to device: <count> (<bytes> bytes)
//     copies to host:   <count> (<bytes> bytes)
//
//     funcs               time ms       %  samples  threads  heap cur ... dev bytes
//       <slot name>       <time ms>  <pct>  ...
//     copies to device    time ms       %  samples    count    bytes
//       <slot name>       ...
//     copies to host      time ms       %  samples    count    bytes
//       <slot name>       ...
//
// Sections come in this order and list every slot of their kind in slot order, zero-time slots
// included; a section without slots shows "(none)". After the funcs, the one-time rows
// "(device init)" and "(kernel compile)" (tally_profiler_one_time_begin), when they have time.
// In the sampling modes every row also has a "+-95%" column after "%": the half-width of a 95 %
// interval of its share, in percentage points (see ci95_pp), so that a share drawn from a few
// samples reads as what it is. A section's title line is also its column
// header: the title occupies the name column, the other columns are labelled after it. The name
// column is as wide as the longest slot name (at least "copies to device"), so all three sections
// align. Numeric columns are right-aligned; times in ms with 3 decimals, percentages of the total
// time with 1 decimal, average threads with 2. funcs columns: time ms, %, samples, threads, heap
// cur / heap peak / heap allocs / heap bytes (current, peak, number and total bytes of heap
// allocations), dev peak / dev allocs / dev bytes. Copy columns: time ms, %, samples, count and
// bytes of the copies made in that slot. No line has trailing spaces. Then, when the pipeline's
// numbers trip a rule of warnings.c, "  warnings:" and one indented line per warning.
//
// JSON: {"abi_version": N, "pipelines": [{...header fields..., "slots": [{...}, ...],
// "warnings": [{kind, slot, value, threshold, message}, ...]}]} with the same numbers (integers in
// ns and bytes, plus ms and percent as decimals); see write_json. The mode is "mode" ("exact",
// "sampling" or "timer") and "clock"; each slot's "parent" is the Func slot a copy slot belongs
// to (-1: none); sampled slots carry "ci95_pp"; the one-time rows are
// "device_init_ns" and "kernel_compile_ns".
//
// Destinations: tally_profiler_report prints the text through tally_print_diagnostic (the print
// handler where one is installed, else stderr) unless TALLY_PROFILE_OUTPUT says "stdout" or names
// a file (appended to). At exit (lifetime.c calls
// tally_report_at_exit once it has stopped the sampler; it prints when at least one run finished)
// the text goes to stderr (written directly: user print hooks may be gone by then), stdout, or the
// file (truncated), and the JSON to the file named by TALLY_PROFILE_JSON, if set.

#include "profiler/report.h"
#include "core/bytes.h"
#include "core/env.h"
#include "core/error.h"
#include "profiler/device_timeline.h"
#include "profiler/profiler.h"
#include "profiler/run.h"
#include "profiler/trace.h"
#include "tally_runtime.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ---- warnings (the rules are warnings.c's) ---------------------------------------------

// The warnings of a pipeline, into a malloc'ed array (*out, NULL when there are none or memory
// ran out: a report without its warnings still reports). Returns how many.
// An average thread count as the JSON report states it (four decimals). The text prints it from
// that value, so that `tally-report show` of the JSON prints the same digits (rounding the raw
// value to two decimals could differ from rounding its four-decimal form: 1.03504 -> 1.04, but
// 1.0350 -> 1.03).
static double as_in_json(double threads) {
    char s[64];
    snprintf(s, sizeof(s), "%.4f", threads);
    return strtod(s, NULL);
}

static int32_t collect_warnings(const tally_pipeline *p, tally_warning **out) {
    *out = NULL;
    tally_pipeline_stats ps;
    tally_fill_pipeline_stats_locked(p, &ps);
    tally_slot_stats *slots = (tally_slot_stats *)calloc((size_t)p->num_slots, sizeof(*slots));
    int32_t max = p->num_slots + TALLY_WARNING_FEW_SAMPLES + 1;  // bounces are per Func
    tally_warning *w = (tally_warning *)calloc((size_t)max, sizeof(*w));
    int32_t n = 0;
    if (slots && w) {
        for (int32_t s = 0; s < p->num_slots; s++) {
            tally_fill_slot_stats_locked(p, s, &slots[s]);
        }
        n = tally_profiler_check_warnings(&ps, slots, w, max);
        n = n < 0 ? 0 : n < max ? n : max;
    }
    free(slots);
    if (n == 0) {
        free(w);
        return 0;
    }
    *out = w;
    return n;
}

static void write_text_name(tally_bytes *b, const char *s, int width);
static void write_text_device_rows(tally_bytes *b, const struct tally_pipeline *p,
                                   const uint64_t *device_ns, const uint64_t *counts, int funcs);

static void write_text_warnings(tally_bytes *b, const tally_pipeline *p) {
    tally_warning *w;
    int32_t n = collect_warnings(p, &w);
    if (n > 0) {
        tally_bytes_printf(b, "  warnings:\n");
    }
    for (int32_t i = 0; i < n; i++) {
        // A message quotes slot names: written as names are, control bytes as \xNN.
        tally_bytes_printf(b, "    ");
        write_text_name(b, w[i].message, 0);
        tally_bytes_printf(b, "\n");
    }
    free(w);
}

// A JSON number, or null for what JSON has no number for (an infinite ratio, NaN).
static void write_json_real(tally_bytes *b, double v) {
    if (isfinite(v)) {
        tally_bytes_printf(b, "%.4f", v);
    } else {
        tally_bytes_printf(b, "null");
    }
}

static void write_json_warnings(tally_bytes *b, const tally_pipeline *p) {
    tally_warning *w;
    int32_t n = collect_warnings(p, &w);
    tally_bytes_printf(b, ",\n      \"warnings\": [");
    for (int32_t i = 0; i < n; i++) {
        tally_bytes_printf(b,
                           "%s\n        {\"kind\": \"%s\", \"slot\": %d, \"value\": ", i ? "," : "",
                           tally_warning_kind_name(w[i].kind), (int)w[i].slot);
        write_json_real(b, w[i].value);
        tally_bytes_printf(b, ", \"threshold\": ");
        write_json_real(b, w[i].threshold);
        tally_bytes_printf(b, ", \"message\": ");
        tally_bytes_json_string(b, w[i].message);
        tally_bytes_printf(b, "}");
    }
    tally_bytes_printf(b, "%s]", n ? "\n      " : "");
    free(w);
}

// ---- text -----------------------------------------------------------------------------

static const char *const section_titles[3] = {"funcs", "copies to device", "copies to host"};

static double ms(uint64_t ns) {
    return (double)ns / 1e6;
}

/** The width of `s` as the text report writes it: a control byte (or DEL) takes 4 columns,
 * `\xNN`, so that no name can break the report's lines. */
static int text_name_width(const char *s) {
    int w = 0;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        w += *c < 0x20 || *c == 0x7f ? 4 : 1;
    }
    return w;
}

/** Writes `s` for the text report (control bytes as `\xNN`), padded with spaces to `width`. */
static void write_text_name(tally_bytes *b, const char *s, int width) {
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c < 0x20 || *c == 0x7f) {
            tally_bytes_printf(b, "\\x%02x", (unsigned)*c);
        } else {
            tally_bytes_printf(b, "%c", (char)*c);
        }
    }
    int pad = width - text_name_width(s);
    tally_bytes_printf(b, "%*s", pad > 0 ? pad : 0, "");
}

// ---- the profiling mode, sampling error, one-time rows ---------------------------------

static int is_sampled(const tally_pipeline *p) {
    return (p->flags & TALLY_PROFILER_FLAG_EXACT) == 0;
}

const char *tally_profiler_mode_name(int32_t flags) {
    return (flags & TALLY_PROFILER_FLAG_EXACT)   ? "exact"
           : (flags & TALLY_PROFILER_FLAG_TIMER) ? "timer"
                                                 : "sampling";
}

static const char *mode_key(const tally_pipeline *p) {
    return tally_profiler_mode_name(p->flags);
}

static void write_text_mode(tally_bytes *b, const tally_pipeline *p) {
    if (!is_sampled(p)) {
        tally_bytes_printf(b, "  %-18sexact (%s)\n", "mode:", tally_pipeline_clock(p));
    } else {
        tally_bytes_printf(
            b, "  %-18ssampling (%s)\n",
            "mode:", (p->flags & TALLY_PROFILER_FLAG_TIMER) ? "timer signal" : "sampler thread");
    }
}

// Observations behind the shares of a sampled pipeline: one per working context per tick.
static uint64_t observations(const tally_pipeline *p) {
    uint64_t n = 0;
    for (int32_t s = 0; s < p->num_slots + TALLY_NUM_ONE_TIME; s++) {
        n += p->slots[s].samples;
    }
    return n;
}

// Square root of x in [0, 1] by Newton's iteration from above (the runtime does not link libm).
static double sqrt_unit(double x) {
    if (x <= 0.0) {
        return 0.0;
    }
    double r = 1.0;
    for (int i = 0; i < 64; i++) {
        double next = 0.5 * (r + x / r);
        if (next >= r) {
            break;
        }
        r = next;
    }
    return r;
}

// Half-width, in percentage points, of a 95 % confidence interval of a sampled share: the normal
// approximation to the binomial, 1.96 * sqrt(q (1 - q) / n), with q the reported share and n the
// pipeline's observations (each observation a Bernoulli draw of "in this slot"). It ignores that
// ticks are not independent draws and is a floor for the real error, not a bound; with no
// observations it is the whole range.
static double ci95_pp(double percent, uint64_t n) {
    if (n == 0) {
        return 100.0;
    }
    double q = percent / 100.0;
    double var = q * (1.0 - q) / (double)n;
    return 100.0 * 1.96 * sqrt_unit(var);
}

int32_t tally_profiler_get_slot_ci95_by_index(int32_t index, int32_t slot, double *out) {
    if (!out) {
        return TALLY_ERROR_BAD_ARGUMENT;
    }
    pthread_mutex_lock(&tally_registry_lock);
    const tally_pipeline *p = tally_registry_first_locked();
    for (int32_t i = 0; p && i < index; i++) {
        p = p->next;
    }
    int32_t r = TALLY_ERROR_NOT_FOUND;
    if (index >= 0 && p && slot >= 0 && slot < p->num_slots) {
        *out = -1.0;
        if (is_sampled(p)) {
            tally_slot_stats ss;
            tally_fill_slot_stats_locked(p, slot, &ss);
            *out = ci95_pp(ss.percent, observations(p));
        }
        r = 0;
    }
    pthread_mutex_unlock(&tally_registry_lock);
    return r;
}

static const char *const one_time_names[TALLY_NUM_ONE_TIME] = {"(device init)", "(kernel compile)"};
static const char *const one_time_keys[TALLY_NUM_ONE_TIME] = {"device_init", "kernel_compile"};

static double share_percent(const tally_pipeline *p, uint64_t ns) {
    return p->total_ns ? 100.0 * (double)ns / (double)p->total_ns : 0.0;
}

// The one-time rows with time, after the funcs section's slots.
static void write_text_one_time(tally_bytes *b, const tally_pipeline *p, int width) {
    for (int32_t k = 0; k < TALLY_NUM_ONE_TIME; k++) {
        const tally_slot_total *t = &p->slots[p->num_slots + k];
        if (t->time_ns == 0) {
            continue;
        }
        double pct = share_percent(p, t->time_ns);
        tally_bytes_printf(b, "    %-*s%12.3f%8.1f", width, one_time_names[k], ms(t->time_ns), pct);
        if (is_sampled(p)) {
            tally_bytes_printf(b, "%8.1f", ci95_pp(pct, observations(p)));
        }
        tally_bytes_printf(b, "%9" PRIu64 "\n", t->samples);
    }
}

static void write_json_mode(tally_bytes *b, const tally_pipeline *p) {
    tally_bytes_printf(b, "      \"mode\": \"%s\",\n      \"clock\": \"%s\",\n", mode_key(p),
                       tally_pipeline_clock(p));
}

static void write_json_one_time(tally_bytes *b, const tally_pipeline *p) {
    for (int32_t k = 0; k < TALLY_NUM_ONE_TIME; k++) {
        tally_bytes_printf(b, "      \"%s_ns\": %" PRIu64 ",\n", one_time_keys[k],
                           p->slots[p->num_slots + k].time_ns);
    }
}

static void write_text_pipeline(tally_bytes *b, const tally_pipeline *p) {
    tally_pipeline_stats ps;
    tally_fill_pipeline_stats_locked(p, &ps);
    tally_bytes_printf(b, "pipeline: ");
    write_text_name(b, ps.name, 0);
    tally_bytes_printf(b, "\n  %-18s", "target:");
    write_text_name(b, ps.target, 0);
    tally_bytes_printf(b, "\n");
    write_text_mode(b, p);
    tally_bytes_printf(b, "  %-18s%.3f ms\n", "total time:", ms(ps.total_ns));
    tally_bytes_printf(b, "  %-18s%" PRIu64 "\n", "runs:", ps.runs);
    tally_bytes_printf(b, "  %-18s%.3f ms\n",
                       "time per run:", ps.runs ? ms(ps.total_ns) / (double)ps.runs : 0.0);
    tally_bytes_printf(b, "  %-18s%" PRIu64 "\n", "samples:", ps.samples);
    tally_bytes_printf(b, "  %-18s%.2f\n", "average threads:", as_in_json(ps.average_threads));
    tally_bytes_printf(b, "  %-18s%" PRIu64 " bytes\n", "heap peak:", ps.heap_peak);
    tally_bytes_printf(b, "  %-18s%" PRIu64 " bytes\n", "device peak:", ps.device_peak);
    tally_bytes_printf(b, "  %-18s%" PRIu64 "\n", "kernel launches:", ps.kernel_launches);
    tally_bytes_printf(b, "  %-18s%" PRIu64 "\n", "injected syncs:", ps.injected_syncs);
    tally_bytes_printf(b, "  %-18s%" PRIu64 "\n", "explicit syncs:", ps.explicit_syncs);
    tally_bytes_printf(b, "  %-18s%" PRIu64 " (%" PRIu64 " bytes)\n",
                       "copies to device:", ps.copies_to_device, ps.copies_to_device_bytes);
    tally_bytes_printf(b, "  %-18s%" PRIu64 " (%" PRIu64 " bytes)\n",
                       "copies to host:", ps.copies_to_host, ps.copies_to_host_bytes);
    tally_bytes_printf(b, "\n");

    int width = (int)strlen(section_titles[1]);
    for (int32_t s = 0; s < p->num_slots; s++) {
        int len = text_name_width(p->slot_names[s]);
        width = len > width ? len : width;
    }
    const int sampled = is_sampled(p);
    const uint64_t n_obs = sampled ? observations(p) : 0;
    for (int32_t kind = 0; kind < 3; kind++) {
        tally_bytes_printf(b, "  %-*s%12s%8s", width + 2, section_titles[kind], "time ms", "%");
        if (sampled) {
            tally_bytes_printf(b, "%8s", "+-95%");
        }
        if (kind == TALLY_SLOT_FUNC) {
            tally_bytes_printf(b, "%9s%9s%12s%12s%13s%14s%12s%12s%14s\n", "samples", "threads",
                               "heap cur", "heap peak", "heap allocs", "heap bytes", "dev peak",
                               "dev allocs", "dev bytes");
        } else {
            tally_bytes_printf(b, "%9s%9s%14s\n", "samples", "count", "bytes");
        }
        int any = 0;
        for (int32_t s = 0; s < p->num_slots; s++) {
            if (p->slot_kinds[s] != kind) {
                continue;
            }
            any = 1;
            tally_slot_stats ss;
            tally_fill_slot_stats_locked(p, s, &ss);
            tally_bytes_printf(b, "    ");
            write_text_name(b, ss.name, width);
            tally_bytes_printf(b, "%12.3f%8.1f", ms(ss.time_ns), ss.percent);
            if (sampled) {
                tally_bytes_printf(b, "%8.1f", ci95_pp(ss.percent, n_obs));
            }
            if (kind == TALLY_SLOT_FUNC) {
                tally_bytes_printf(b,
                                   "%9" PRIu64 "%9.2f%12" PRId64 "%12" PRIu64 "%13" PRIu64
                                   "%14" PRIu64 "%12" PRIu64 "%12" PRIu64 "%14" PRIu64 "\n",
                                   ss.samples, as_in_json(ss.average_threads), ss.heap.current,
                                   ss.heap.peak, ss.heap.num_allocs, ss.heap.total_bytes,
                                   ss.device.peak, ss.device.num_allocs, ss.device.total_bytes);
            } else {
                tally_bytes_printf(b, "%9" PRIu64 "%9" PRIu64 "%14" PRIu64 "\n", ss.samples,
                                   ss.copies, ss.copy_bytes);
            }
        }
        if (kind == TALLY_SLOT_FUNC) {
            write_text_one_time(b, p, width);
        }
        if (!any) {
            tally_bytes_printf(b, "    (none)\n");
        }
    }
    write_text_warnings(b, p);
}

// ---- JSON -----------------------------------------------------------------------------

static const char *kind_name(int32_t kind) {
    return kind == TALLY_SLOT_COPY_TO_DEVICE ? "copy_to_device"
           : kind == TALLY_SLOT_COPY_TO_HOST ? "copy_to_host"
                                             : "func";
}

static void write_json_memory(tally_bytes *b, const char *key, const tally_memory_stats *m) {
    tally_bytes_printf(b,
                       "\"%s\": {\"current\": %" PRId64 ", \"peak\": %" PRIu64
                       ", \"allocs\": %" PRIu64 ", \"bytes\": %" PRIu64 "}",
                       key, m->current, m->peak, m->num_allocs, m->total_bytes);
}

static void write_json_device_timeline(tally_bytes *b, const tally_pipeline *p);

static void write_json_pipeline(tally_bytes *b, const tally_pipeline *p) {
    tally_pipeline_stats ps;
    tally_fill_pipeline_stats_locked(p, &ps);
    tally_bytes_printf(b, "    {\n      \"name\": ");
    tally_bytes_json_string(b, ps.name);
    tally_bytes_printf(b, ",\n      \"target\": ");
    tally_bytes_json_string(b, ps.target);
    tally_bytes_printf(b, ",\n");
    write_json_mode(b, p);
    tally_bytes_printf(b, "      \"runs\": %" PRIu64 ",\n", ps.runs);
    tally_bytes_printf(b, "      \"total_ns\": %" PRIu64 ",\n", ps.total_ns);
    tally_bytes_printf(b, "      \"total_ms\": %.6f,\n", ms(ps.total_ns));
    tally_bytes_printf(b, "      \"time_per_run_ms\": %.6f,\n",
                       ps.runs ? ms(ps.total_ns) / (double)ps.runs : 0.0);
    tally_bytes_printf(b, "      \"samples\": %" PRIu64 ",\n", ps.samples);
    tally_bytes_printf(b, "      \"average_threads\": %.4f,\n", ps.average_threads);
    tally_bytes_printf(b, "      \"heap_peak_bytes\": %" PRIu64 ",\n", ps.heap_peak);
    tally_bytes_printf(b, "      \"device_peak_bytes\": %" PRIu64 ",\n", ps.device_peak);
    tally_bytes_printf(b, "      \"kernel_launches\": %" PRIu64 ",\n", ps.kernel_launches);
    tally_bytes_printf(b, "      \"injected_syncs\": %" PRIu64 ",\n", ps.injected_syncs);
    tally_bytes_printf(b, "      \"explicit_syncs\": %" PRIu64 ",\n", ps.explicit_syncs);
    tally_bytes_printf(b, "      \"copies_to_device\": %" PRIu64 ",\n", ps.copies_to_device);
    tally_bytes_printf(b, "      \"copies_to_device_bytes\": %" PRIu64 ",\n",
                       ps.copies_to_device_bytes);
    tally_bytes_printf(b, "      \"copies_to_host\": %" PRIu64 ",\n", ps.copies_to_host);
    tally_bytes_printf(b, "      \"copies_to_host_bytes\": %" PRIu64 ",\n",
                       ps.copies_to_host_bytes);
    write_json_one_time(b, p);
    tally_bytes_printf(b, "      \"slots\": [\n");
    for (int32_t s = 0; s < p->num_slots; s++) {
        tally_slot_stats ss;
        tally_fill_slot_stats_locked(p, s, &ss);
        tally_bytes_printf(b, "        {\"id\": %d, \"name\": ", (int)s);
        tally_bytes_json_string(b, ss.name);
        tally_bytes_printf(b,
                           ", \"kind\": \"%s\", \"parent\": %d, \"time_ns\": %" PRIu64
                           ", \"time_ms\": %.6f, \"percent\": %.4f, \"samples\": %" PRIu64
                           ", \"average_threads\": %.4f, \"copies\": %" PRIu64
                           ", \"copy_bytes\": %" PRIu64 ", ",
                           kind_name(ss.kind), (int)ss.parent, ss.time_ns, ms(ss.time_ns),
                           ss.percent, ss.samples, ss.average_threads, ss.copies, ss.copy_bytes);
        if (is_sampled(p)) {
            tally_bytes_printf(b, "\"ci95_pp\": %.4f, ", ci95_pp(ss.percent, observations(p)));
        }
        write_json_memory(b, "heap", &ss.heap);
        tally_bytes_printf(b, ", ");
        write_json_memory(b, "device", &ss.device);
        tally_bytes_printf(b, "}%s\n", s + 1 < p->num_slots ? "," : "");
    }
    tally_bytes_printf(b, "      ]");
    write_json_device_timeline(b, p);
    write_json_warnings(b, p);
    tally_bytes_printf(b, "\n    }");
}

// ---- device time from timestamps
// ------------------------------------------------------

static const char *const timeline_api_names[TALLY_TIMELINE_NUM_APIS] = {"none", "cuda", "vulkan",
                                                                        "opencl"};
static const char *const timeline_problem_names[TALLY_NUM_TIMELINE_PROBLEMS] = {
    "lost", "overflowed", "unmatched"};

// Reads the device timeline of a profile_timestamps pipeline into per-slot arrays (freed by the
// caller); returns 0 when the pipeline is not in that mode or out of memory (nothing to print).
static int read_timeline(const tally_pipeline *p, uint64_t **device_ns, uint64_t **kernels,
                         tally_timeline_summary *sum) {
    *device_ns = *kernels = NULL;
    if (!(p->device_flags & TALLY_PROFILER_FLAG_TIMESTAMPS) || p->num_slots <= 0) {
        return 0;
    }
    *device_ns = (uint64_t *)calloc((size_t)p->num_slots, sizeof(uint64_t));
    *kernels = (uint64_t *)calloc((size_t)p->num_slots, sizeof(uint64_t));
    if (!*device_ns || !*kernels) {
        free(*device_ns);
        free(*kernels);
        return 0;
    }
    tally_timeline_read(p, p->num_slots, *device_ns, *kernels, sum);
    return 1;
}

// Host/device overlap: device time during which the host was not blocked waiting for the device.
static uint64_t timeline_overlap_ns(const tally_timeline_summary *sum) {
    return sum->busy_ns > sum->host_wait_ns ? sum->busy_ns - sum->host_wait_ns : 0;
}

// profile_timestamps: how device time was measured, device busy and idle time, the records that
// could not be billed, and per Func its host time (sampled) next to its device time (kernels).
static void write_text_device_timeline(tally_bytes *b, const tally_pipeline *p) {
    uint64_t *device_ns, *kernels;
    tally_timeline_summary sum;
    if (!read_timeline(p, &device_ns, &kernels, &sum)) {
        return;
    }
    tally_bytes_printf(b, "  device time (profile_timestamps, no injected syncs):\n");
    int any_mode = 0;
    for (int32_t a = 0; a < TALLY_TIMELINE_NUM_APIS; a++) {
        if (sum.mode[a]) {
            any_mode = 1;
            tally_bytes_printf(b, "    %-16s%s\n", timeline_api_names[a],
                               tally_timeline_mode_name(sum.mode[a]));
        }
    }
    if (!any_mode) {
        tally_bytes_printf(b, "    %-16s%s\n", "mode:", "no kernel was timed");
    }
    uint64_t idle = p->total_ns > sum.busy_ns ? p->total_ns - sum.busy_ns : 0;
    tally_bytes_printf(
        b, "    %-16s%.3f ms (%.1f %% of %.3f ms)\n", "device busy:", ms(sum.busy_ns),
        p->total_ns ? 100.0 * (double)sum.busy_ns / (double)p->total_ns : 0.0, ms(p->total_ns));
    tally_bytes_printf(b, "    %-16s%.3f ms\n", "device idle:", ms(idle));
    if (sum.span_ns) {
        tally_bytes_printf(b,
                           "    %-16s%.3f ms (first kernel start to last kernel end, host clock)\n",
                           "device span:", ms(sum.span_ns));
    }
    tally_bytes_printf(b, "    %-16s%.3f ms (device busy while the host was not waiting for it)\n",
                       "overlap:", ms(timeline_overlap_ns(&sum)));
    tally_bytes_printf(b, "    %-16s", "records:");
    for (int32_t k = 0; k < TALLY_NUM_TIMELINE_PROBLEMS; k++) {
        tally_bytes_printf(b, "%s%s %" PRIu64, k ? ", " : "", timeline_problem_names[k],
                           sum.problems[k]);
    }
    tally_bytes_printf(b, " (expected 0)\n");
    write_text_device_rows(b, p, device_ns, kernels, 1);
    // Device copies that were timed (staged copies), in their copy slots.
    write_text_device_rows(b, p, device_ns, kernels, 0);
    free(device_ns);
    free(kernels);
}

// The device timeline's rows in the text: the Func slots (always headed, "kernels": their
// launches), or the copy slots the device timed (headed only if there is one; "copies").
static void write_text_device_rows(tally_bytes *b, const tally_pipeline *p,
                                   const uint64_t *device_ns, const uint64_t *counts, int funcs) {
    int heading = 0;
    for (int32_t s = 0; s < p->num_slots; s++) {
        int is_func = p->slot_kinds[s] == TALLY_SLOT_FUNC;
        if (funcs ? !is_func : (is_func || counts[s] == 0)) {
            continue;
        }
        if (!heading) {
            tally_bytes_printf(b, "    %-24s%12s%12s%9s\n", funcs ? "funcs" : "device copies",
                               "host ms", "device ms", funcs ? "kernels" : "copies");
            heading = 1;
        }
        tally_slot_stats ss;
        tally_fill_slot_stats_locked(p, s, &ss);
        tally_bytes_printf(b, "      ");
        write_text_name(b, ss.name, 22);
        tally_bytes_printf(b, "%12.3f%12.3f%9" PRIu64 "\n", ms(ss.time_ns), ms(device_ns[s]),
                           counts[s]);
    }
}

// The device timeline's rows: the Func slots ("kernels": their launches), or the copy slots the
// device timed ("copies": their copies; slots with none are left out).
static void write_json_device_rows(tally_bytes *b, const tally_pipeline *p,
                                   const uint64_t *device_ns, const uint64_t *counts, int funcs) {
    int first = 1;
    for (int32_t s = 0; s < p->num_slots; s++) {
        int is_func = p->slot_kinds[s] == TALLY_SLOT_FUNC;
        if (funcs ? !is_func : (is_func || counts[s] == 0)) {
            continue;
        }
        tally_slot_stats ss;
        tally_fill_slot_stats_locked(p, s, &ss);
        tally_bytes_printf(b, "%s{\"id\": %d, \"name\": ", first ? "" : ", ", (int)s);
        tally_bytes_json_string(b, ss.name);
        tally_bytes_printf(
            b, ", \"host_ns\": %" PRIu64 ", \"device_ns\": %" PRIu64 ", \"%s\": %" PRIu64 "}",
            ss.time_ns, device_ns[s], funcs ? "kernels" : "copies", counts[s]);
        first = 0;
    }
}

static void write_json_device_timeline(tally_bytes *b, const tally_pipeline *p) {
    uint64_t *device_ns, *kernels;
    tally_timeline_summary sum;
    if (!read_timeline(p, &device_ns, &kernels, &sum)) {
        return;
    }
    uint64_t idle = p->total_ns > sum.busy_ns ? p->total_ns - sum.busy_ns : 0;
    tally_bytes_printf(b, ",\n      \"device_timeline\": {\"modes\": {");
    int first = 1;
    for (int32_t a = 0; a < TALLY_TIMELINE_NUM_APIS; a++) {
        if (sum.mode[a]) {
            tally_bytes_printf(b, "%s\"%s\": ", first ? "" : ", ", timeline_api_names[a]);
            tally_bytes_json_string(b, tally_timeline_mode_name(sum.mode[a]));
            first = 0;
        }
    }
    tally_bytes_printf(b,
                       "}, \"device_busy_ns\": %" PRIu64 ", \"device_idle_ns\": %" PRIu64
                       ", \"device_span_ns\": %" PRIu64 ", \"host_wait_ns\": %" PRIu64
                       ", \"overlap_ns\": %" PRIu64 ", \"kernels\": %" PRIu64,
                       sum.busy_ns, idle, sum.span_ns, sum.host_wait_ns, timeline_overlap_ns(&sum),
                       sum.kernels);
    for (int32_t k = 0; k < TALLY_NUM_TIMELINE_PROBLEMS; k++) {
        tally_bytes_printf(b, ", \"records_%s\": %" PRIu64, timeline_problem_names[k],
                           sum.problems[k]);
    }
    tally_bytes_printf(b, ", \"funcs\": [");
    write_json_device_rows(b, p, device_ns, kernels, 1);
    tally_bytes_printf(b, "], \"device_copies\": [");
    write_json_device_rows(b, p, device_ns, kernels, 0);
    tally_bytes_printf(b, "]}");
    free(device_ns);
    free(kernels);
}

// ---- device waits ------------------------------------------------------------------------------

// Whether a ledger holds anything (the section is printed only then, so reports of host-only
// programs are unchanged).
static int device_waits_any(const tally_device_wait_stats *w) {
    int any = w->deferred_frees != 0;
    for (int32_t r = 0; r < TALLY_NUM_DEVICE_WAIT_REASONS; r++) {
        any |= w->waits[r] != 0;
    }
    return any;
}

// Fills *w with the process-wide device-wait ledger; returns whether anything is in it.
static int device_waits_to_report(tally_device_wait_stats *w) {
    tally_device_get_wait_stats(w);
    return device_waits_any(w);
}

// Every device wait of `w`, by reason, and the frees deferred instead of waiting.
static void write_text_device_waits_of(tally_bytes *b, const tally_device_wait_stats *w) {
    if (!device_waits_any(w)) {
        return;
    }
    tally_bytes_printf(b, "\ndevice waits by the runtime (all pipelines):\n");
    tally_bytes_printf(b, "  %-22s%8s%12s\n", "reason", "count", "time ms");
    for (int32_t r = 0; r < TALLY_NUM_DEVICE_WAIT_REASONS; r++) {
        tally_bytes_printf(b, "    %-20s%8" PRIu64 "%12.3f\n", tally_device_wait_reason_name(r),
                           w->waits[r], ms(w->wait_ns[r]));
    }
    tally_bytes_printf(b, "  %-18s%" PRIu64 " (%" PRIu64 " released)\n",
                       "deferred frees:", w->deferred_frees, w->deferred_frees_released);
}

// Every device wait the runtime did, by reason, and the frees it deferred instead of waiting.
static void write_text_device_waits(tally_bytes *b) {
    tally_device_wait_stats w;
    tally_device_get_wait_stats(&w);
    write_text_device_waits_of(b, &w);
}

static void write_json_device_waits(tally_bytes *b) {
    tally_device_wait_stats w;
    if (!device_waits_to_report(&w)) {
        return;
    }
    tally_bytes_printf(b, ",\n  \"device_waits\": {");
    for (int32_t r = 0; r < TALLY_NUM_DEVICE_WAIT_REASONS; r++) {
        tally_bytes_printf(b, "\"%s\": {\"count\": %" PRIu64 ", \"ns\": %" PRIu64 "}, ",
                           tally_device_wait_reason_name(r), w.waits[r], w.wait_ns[r]);
    }
    tally_bytes_printf(b,
                       "\"deferred_frees\": %" PRIu64 ", \"deferred_frees_released\": %" PRIu64 "}",
                       w.deferred_frees, w.deferred_frees_released);
}

// The timeline recorder (trace.c), once anything was recorded: the records lost from full rings
// (expected 0; TALLY_PROFILE_TRACE_EVENTS sizes the rings).
static void write_text_trace(tally_bytes *b) {
    if (!tally_trace_used()) {
        return;
    }
    tally_bytes_printf(b,
                       "\ntrace: %" PRIu64 " events dropped (ring of %u events per thread; "
                       "TALLY_PROFILE_TRACE_EVENTS)\n",
                       tally_trace_dropped(), (unsigned)tally_trace_capacity());
}

static void write_json_trace(tally_bytes *b) {
    if (!tally_trace_used()) {
        return;
    }
    tally_bytes_printf(
        b, ",\n  \"trace\": {\"dropped_events\": %" PRIu64 ", \"ring_events_per_thread\": %u}",
        tally_trace_dropped(), (unsigned)tally_trace_capacity());
}

// Builds the whole report. Returns 0, or TALLY_ERROR_OUT_OF_MEMORY.
static int32_t build_report(tally_bytes *b, int json, int *any_runs) {
    tally_bytes_reserve(b, 0);
    pthread_mutex_lock(&tally_registry_lock);
    int first = 1;
    *any_runs = 0;
    if (json) {
        tally_bytes_printf(b, "{\n  \"abi_version\": %d,\n  \"pipelines\": [",
                           TALLY_RUNTIME_ABI_VERSION);
    }
    for (const tally_pipeline *p = tally_registry_first_locked(); p; p = p->next) {
        *any_runs |= p->runs > 0;
        if (json) {
            tally_bytes_printf(b, "%s\n", first ? "" : ",");
            write_json_pipeline(b, p);
        } else {
            if (!first) {
                tally_bytes_printf(b, "\n");
            }
            write_text_pipeline(b, p);
            write_text_device_timeline(b, p);
        }
        first = 0;
    }
    if (json) {
        tally_bytes_printf(b, "%s]", first ? "" : "\n  ");
        write_json_device_waits(b);
        write_json_trace(b);
        tally_bytes_printf(b, "\n}\n");
    } else if (!first) {
        write_text_device_waits(b);
        write_text_trace(b);
    }
    pthread_mutex_unlock(&tally_registry_lock);
    if (b->failed) {
        tally_bytes_free(b);
        return TALLY_ERROR_OUT_OF_MEMORY;
    }
    return 0;
}

int32_t tally_profiler_report_to_buffer(char *buf, size_t size, int32_t json) {
    tally_bytes b = {NULL, 0, 0, 0};
    int any;
    int32_t r = build_report(&b, json, &any);
    if (r != 0) {
        return r;
    }
    if (buf && size > 0) {
        size_t n = b.len < size - 1 ? b.len : size - 1;
        memcpy(buf, b.data, n);
        buf[n] = '\0';
    }
    int32_t len = b.len > INT32_MAX ? INT32_MAX : (int32_t)b.len;
    tally_bytes_free(&b);
    return len;
}

static int32_t write_file(void *user_context, const char *path, const char *mode, const char *text,
                          size_t len) {
    errno = 0;
    FILE *f = fopen(path, mode);
    int ok = f && fwrite(text, 1, len, f) == len;
    if (f && fclose(f) != 0) {
        ok = 0;
    }
    if (!ok) {
        const int err = errno;
        return tally_report_error(user_context, TALLY_ERROR_IO,
                                  "tally profiler: cannot write the report to %s: %s", path,
                                  err ? strerror(err) : "write failed");
    }
    return 0;
}

static void write_fd_all(int fd, const char *s, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, s, len);
        if (n <= 0) {
            return;
        }
        s += n;
        len -= (size_t)n;
    }
}

// Sends the text to TALLY_PROFILE_OUTPUT. `at_exit` writes stderr directly and truncates files.
static int32_t emit_text(void *user_context, const char *text, size_t len, int at_exit) {
    const char *dest = tally_env_string("TALLY_PROFILE_OUTPUT");  // stderr, stdout or a path
    if (!dest || strcmp(dest, "stderr") == 0) {
        if (at_exit) {
            write_fd_all(STDERR_FILENO, text, len);
        } else {
            tally_print_diagnostic(user_context, text);
        }
        return 0;
    }
    if (strcmp(dest, "stdout") == 0) {
        fflush(stdout);
        write_fd_all(STDOUT_FILENO, text, len);
        return 0;
    }
    return write_file(user_context, dest, at_exit ? "w" : "a", text, len);
}

int32_t tally_profiler_report(void *user_context) {
    tally_bytes b = {NULL, 0, 0, 0};
    int any;
    int32_t r = build_report(&b, 0, &any);
    if (r != 0) {
        return tally_report_error(user_context, r,
                                  "tally profiler: out of memory building the "
                                  "report");
    }
    r = emit_text(user_context, b.data ? b.data : "", b.len, 0);
    tally_bytes_free(&b);
    return r;
}

int32_t tally_report_at_exit(void *user_context) {
    tally_bytes b = {NULL, 0, 0, 0};
    int any = 0;
    int32_t r = build_report(&b, 0, &any);
    if (r != 0) {
        tally_bytes_free(&b);
        return tally_report_error(user_context, r,
                                  "tally profiler: out of memory building the report");
    }
    if (any) {
        r = emit_text(user_context, b.data, b.len, 1);
        const char *json_path = tally_env_string("TALLY_PROFILE_JSON");
        if (json_path) {
            tally_bytes j = {NULL, 0, 0, 0};
            int32_t rj = build_report(&j, 1, &any);
            rj = rj != 0 ? tally_report_error(user_context, rj,
                                              "tally profiler: out of memory building the JSON "
                                              "report for %s",
                                              json_path)
                         : write_file(user_context, json_path, "w", j.data, j.len);
            r = r != 0 ? r : rj;
            tally_bytes_free(&j);
        }
    }
    tally_bytes_free(&b);
    return r;
}

// ---- text from numbers read elsewhere ---------------------------------------------------

int32_t tally_profiler_format_device_waits(const tally_device_wait_stats *waits, char *buf,
                                           size_t size) {
    if (!waits) {
        return TALLY_ERROR_BAD_ARGUMENT;
    }
    tally_bytes b = {NULL, 0, 0, 0};
    tally_bytes_reserve(&b, 0);
    write_text_device_waits_of(&b, waits);
    int32_t r = b.failed ? TALLY_ERROR_OUT_OF_MEMORY : 0;
    if (r == 0 && buf && size > 0) {
        size_t n = b.len < size - 1 ? b.len : size - 1;
        if (n) {
            memcpy(buf, b.data, n);
        }
        buf[n] = '\0';
    }
    int32_t len = b.len > INT32_MAX ? INT32_MAX : (int32_t)b.len;
    tally_bytes_free(&b);
    return r != 0 ? r : len;
}

int32_t tally_profiler_format_text(int32_t num_pipelines, const tally_pipeline_stats *pipelines,
                                   const tally_slot_stats *const *slots, char *buf, size_t size) {
    if (num_pipelines < 0 || (num_pipelines > 0 && (!pipelines || !slots))) {
        return TALLY_ERROR_BAD_ARGUMENT;
    }
    tally_bytes b = {NULL, 0, 0, 0};
    tally_bytes_reserve(&b, 0);
    int32_t r = 0;
    for (int32_t i = 0; i < num_pipelines && r == 0; i++) {
        tally_pipeline *p;
        r = tally_pipeline_from_stats(&pipelines[i], slots[i], &p);
        if (r != 0) {
            break;
        }
        if (i > 0) {
            tally_bytes_printf(&b, "\n");
        }
        write_text_pipeline(&b, p);
        tally_pipeline_free_unregistered(p);
    }
    if (r == 0 && b.failed) {
        r = TALLY_ERROR_OUT_OF_MEMORY;
    }
    if (r == 0 && buf && size > 0) {
        size_t n = b.len < size - 1 ? b.len : size - 1;
        memcpy(buf, b.data, n);
        buf[n] = '\0';
    }
    int32_t len = b.len > INT32_MAX ? INT32_MAX : (int32_t)b.len;
    tally_bytes_free(&b);
    return r != 0 ? r : len;
}
