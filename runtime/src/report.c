// The profiler report: text and JSON, on demand and at process exit.
//
// Text format (one block per pipeline, in registration order, blocks separated by a blank line;
// every number is a total over the pipeline's finished runs):
//
//   pipeline: <name>
//     target:           <target string of its first run>
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
// included; a section without slots shows "(none)". A section's title line is also its column
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
// ns and bytes, plus ms and percent as decimals); see write_json.
//
// Destinations: tally_profiler_report prints the text through halide_print unless
// TALLY_PROFILE_OUTPUT says "stdout" or names a file (appended to). At exit (lifetime.c calls
// tally_report_at_exit once it has stopped the sampler; it prints when at least one run finished)
// the text goes to stderr (written directly: user print hooks may be gone by then), stdout, or the
// file (truncated), and the JSON to the file named by TALLY_PROFILE_JSON, if set.

#include "internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ---- a growable string ----------------------------------------------------------------

typedef struct strbuf {
    char *data;
    size_t len;
    size_t cap;
    int failed;
} strbuf;

static void sb_reserve(strbuf *b, size_t extra) {
    if (b->failed || b->len + extra + 1 <= b->cap) {
        return;
    }
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + extra + 1) {
        cap *= 2;
    }
    char *data = (char *)realloc(b->data, cap);
    if (!data) {
        b->failed = 1;
        return;
    }
    b->data = data;
    b->cap = cap;
    b->data[b->len] = '\0';  // an empty report is still a valid string
}

static void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(strbuf *b, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof(small), fmt, args);
    va_end(args);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    sb_reserve(b, (size_t)n);
    if (b->failed) {
        return;
    }
    if ((size_t)n < sizeof(small)) {
        memcpy(b->data + b->len, small, (size_t)n + 1);
    } else {
        va_start(args, fmt);
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, args);
        va_end(args);
    }
    b->len += (size_t)n;
}

static void sb_free(strbuf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

// ---- warnings (the rules are warnings.c's) ---------------------------------------------

// The warnings of a pipeline, into a malloc'ed array (*out, NULL when there are none or memory
// ran out: a report without its warnings still reports). Returns how many.
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

static void write_text_warnings(strbuf *b, const tally_pipeline *p) {
    tally_warning *w;
    int32_t n = collect_warnings(p, &w);
    if (n > 0) {
        sb_printf(b, "  warnings:\n");
    }
    for (int32_t i = 0; i < n; i++) {
        sb_printf(b, "    %s\n", w[i].message);
    }
    free(w);
}

static void write_json_string(strbuf *b, const char *s);

static void write_json_warnings(strbuf *b, const tally_pipeline *p) {
    tally_warning *w;
    int32_t n = collect_warnings(p, &w);
    sb_printf(b, ",\n      \"warnings\": [");
    for (int32_t i = 0; i < n; i++) {
        sb_printf(
            b,
            "%s\n        {\"kind\": \"%s\", \"slot\": %d, \"value\": %.4f, \"threshold\": %.4f, "
            "\"message\": ",
            i ? "," : "", tally_warning_kind_name(w[i].kind), (int)w[i].slot, w[i].value,
            w[i].threshold);
        write_json_string(b, w[i].message);
        sb_printf(b, "}");
    }
    sb_printf(b, "%s]", n ? "\n      " : "");
    free(w);
}

// ---- text -----------------------------------------------------------------------------

static const char *const section_titles[3] = {"funcs", "copies to device", "copies to host"};

static double ms(uint64_t ns) {
    return (double)ns / 1e6;
}

static void write_text_pipeline(strbuf *b, const tally_pipeline *p) {
    tally_pipeline_stats ps;
    tally_fill_pipeline_stats_locked(p, &ps);
    sb_printf(b, "pipeline: %s\n", ps.name);
    sb_printf(b, "  %-18s%s\n", "target:", ps.target);
    sb_printf(b, "  %-18s%.3f ms\n", "total time:", ms(ps.total_ns));
    sb_printf(b, "  %-18s%" PRIu64 "\n", "runs:", ps.runs);
    sb_printf(b, "  %-18s%.3f ms\n",
              "time per run:", ps.runs ? ms(ps.total_ns) / (double)ps.runs : 0.0);
    sb_printf(b, "  %-18s%" PRIu64 "\n", "samples:", ps.samples);
    sb_printf(b, "  %-18s%.2f\n", "average threads:", ps.average_threads);
    sb_printf(b, "  %-18s%" PRIu64 " bytes\n", "heap peak:", ps.heap_peak);
    sb_printf(b, "  %-18s%" PRIu64 " bytes\n", "device peak:", ps.device_peak);
    sb_printf(b, "  %-18s%" PRIu64 "\n", "kernel launches:", ps.kernel_launches);
    sb_printf(b, "  %-18s%" PRIu64 "\n", "injected syncs:", ps.injected_syncs);
    sb_printf(b, "  %-18s%" PRIu64 "\n", "explicit syncs:", ps.explicit_syncs);
    sb_printf(b, "  %-18s%" PRIu64 " (%" PRIu64 " bytes)\n",
              "copies to device:", ps.copies_to_device, ps.copies_to_device_bytes);
    sb_printf(b, "  %-18s%" PRIu64 " (%" PRIu64 " bytes)\n", "copies to host:", ps.copies_to_host,
              ps.copies_to_host_bytes);
    sb_printf(b, "\n");

    int width = (int)strlen(section_titles[1]);
    for (int32_t s = 0; s < p->num_slots; s++) {
        int len = (int)strlen(p->slot_names[s]);
        width = len > width ? len : width;
    }
    for (int32_t kind = 0; kind < 3; kind++) {
        if (kind == TALLY_SLOT_FUNC) {
            sb_printf(b, "  %-*s%12s%8s%9s%9s%12s%12s%13s%14s%12s%12s%14s\n", width + 2,
                      section_titles[kind], "time ms", "%", "samples", "threads", "heap cur",
                      "heap peak", "heap allocs", "heap bytes", "dev peak", "dev allocs",
                      "dev bytes");
        } else {
            sb_printf(b, "  %-*s%12s%8s%9s%9s%14s\n", width + 2, section_titles[kind], "time ms",
                      "%", "samples", "count", "bytes");
        }
        int any = 0;
        for (int32_t s = 0; s < p->num_slots; s++) {
            if (p->slot_kinds[s] != kind) {
                continue;
            }
            any = 1;
            tally_slot_stats ss;
            tally_fill_slot_stats_locked(p, s, &ss);
            if (kind == TALLY_SLOT_FUNC) {
                sb_printf(b,
                          "    %-*s%12.3f%8.1f%9" PRIu64 "%9.2f%12" PRId64 "%12" PRIu64 "%13" PRIu64
                          "%14" PRIu64 "%12" PRIu64 "%12" PRIu64 "%14" PRIu64 "\n",
                          width, ss.name, ms(ss.time_ns), ss.percent, ss.samples,
                          ss.average_threads, ss.heap.current, ss.heap.peak, ss.heap.num_allocs,
                          ss.heap.total_bytes, ss.device.peak, ss.device.num_allocs,
                          ss.device.total_bytes);
            } else {
                sb_printf(b, "    %-*s%12.3f%8.1f%9" PRIu64 "%9" PRIu64 "%14" PRIu64 "\n", width,
                          ss.name, ms(ss.time_ns), ss.percent, ss.samples, ss.copies,
                          ss.copy_bytes);
            }
        }
        if (!any) {
            sb_printf(b, "    (none)\n");
        }
    }
    write_text_warnings(b, p);
}

// ---- JSON -----------------------------------------------------------------------------

static void write_json_string(strbuf *b, const char *s) {
    sb_printf(b, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        const char *escape = *c == '"'    ? "\\\""
                             : *c == '\\' ? "\\\\"
                             : *c == '\n' ? "\\n"
                             : *c == '\t' ? "\\t"
                             : *c == '\r' ? "\\r"
                                          : NULL;
        if (escape) {
            sb_printf(b, "%s", escape);
        } else if (*c < 0x20) {
            sb_printf(b, "\\u%04x", (unsigned)*c);
        } else {
            sb_printf(b, "%c", (char)*c);
        }
    }
    sb_printf(b, "\"");
}

static const char *kind_name(int32_t kind) {
    return kind == TALLY_SLOT_COPY_TO_DEVICE ? "copy_to_device"
           : kind == TALLY_SLOT_COPY_TO_HOST ? "copy_to_host"
                                             : "func";
}

static void write_json_memory(strbuf *b, const char *key, const tally_memory_stats *m) {
    sb_printf(b,
              "\"%s\": {\"current\": %" PRId64 ", \"peak\": %" PRIu64 ", \"allocs\": %" PRIu64
              ", \"bytes\": %" PRIu64 "}",
              key, m->current, m->peak, m->num_allocs, m->total_bytes);
}

static void write_json_pipeline(strbuf *b, const tally_pipeline *p) {
    tally_pipeline_stats ps;
    tally_fill_pipeline_stats_locked(p, &ps);
    sb_printf(b, "    {\n      \"name\": ");
    write_json_string(b, ps.name);
    sb_printf(b, ",\n      \"target\": ");
    write_json_string(b, ps.target);
    sb_printf(b, ",\n      \"runs\": %" PRIu64 ",\n", ps.runs);
    sb_printf(b, "      \"total_ns\": %" PRIu64 ",\n", ps.total_ns);
    sb_printf(b, "      \"total_ms\": %.6f,\n", ms(ps.total_ns));
    sb_printf(b, "      \"time_per_run_ms\": %.6f,\n",
              ps.runs ? ms(ps.total_ns) / (double)ps.runs : 0.0);
    sb_printf(b, "      \"samples\": %" PRIu64 ",\n", ps.samples);
    sb_printf(b, "      \"average_threads\": %.4f,\n", ps.average_threads);
    sb_printf(b, "      \"heap_peak_bytes\": %" PRIu64 ",\n", ps.heap_peak);
    sb_printf(b, "      \"device_peak_bytes\": %" PRIu64 ",\n", ps.device_peak);
    sb_printf(b, "      \"kernel_launches\": %" PRIu64 ",\n", ps.kernel_launches);
    sb_printf(b, "      \"injected_syncs\": %" PRIu64 ",\n", ps.injected_syncs);
    sb_printf(b, "      \"explicit_syncs\": %" PRIu64 ",\n", ps.explicit_syncs);
    sb_printf(b, "      \"copies_to_device\": %" PRIu64 ",\n", ps.copies_to_device);
    sb_printf(b, "      \"copies_to_device_bytes\": %" PRIu64 ",\n", ps.copies_to_device_bytes);
    sb_printf(b, "      \"copies_to_host\": %" PRIu64 ",\n", ps.copies_to_host);
    sb_printf(b, "      \"copies_to_host_bytes\": %" PRIu64 ",\n", ps.copies_to_host_bytes);
    sb_printf(b, "      \"slots\": [\n");
    for (int32_t s = 0; s < p->num_slots; s++) {
        tally_slot_stats ss;
        tally_fill_slot_stats_locked(p, s, &ss);
        sb_printf(b, "        {\"id\": %d, \"name\": ", (int)s);
        write_json_string(b, ss.name);
        sb_printf(b,
                  ", \"kind\": \"%s\", \"time_ns\": %" PRIu64
                  ", \"time_ms\": %.6f, \"percent\": %.4f, \"samples\": %" PRIu64
                  ", \"average_threads\": %.4f, \"copies\": %" PRIu64 ", \"copy_bytes\": %" PRIu64
                  ", ",
                  kind_name(ss.kind), ss.time_ns, ms(ss.time_ns), ss.percent, ss.samples,
                  ss.average_threads, ss.copies, ss.copy_bytes);
        write_json_memory(b, "heap", &ss.heap);
        sb_printf(b, ", ");
        write_json_memory(b, "device", &ss.device);
        sb_printf(b, "}%s\n", s + 1 < p->num_slots ? "," : "");
    }
    sb_printf(b, "      ]");
    write_json_warnings(b, p);
    sb_printf(b, "\n    }");
}

// Builds the whole report. Returns 0, or TALLY_ERROR_OUT_OF_MEMORY.
static int32_t build_report(strbuf *b, int json, int *any_runs) {
    sb_reserve(b, 0);
    pthread_mutex_lock(&tally_registry_lock);
    int first = 1;
    *any_runs = 0;
    if (json) {
        sb_printf(b, "{\n  \"abi_version\": %d,\n  \"pipelines\": [", TALLY_RUNTIME_ABI_VERSION);
    }
    for (const tally_pipeline *p = tally_registry_first_locked(); p; p = p->next) {
        *any_runs |= p->runs > 0;
        if (json) {
            sb_printf(b, "%s\n", first ? "" : ",");
            write_json_pipeline(b, p);
        } else {
            if (!first) {
                sb_printf(b, "\n");
            }
            write_text_pipeline(b, p);
        }
        first = 0;
    }
    if (json) {
        sb_printf(b, "%s]\n}\n", first ? "" : "\n  ");
    }
    pthread_mutex_unlock(&tally_registry_lock);
    if (b->failed) {
        sb_free(b);
        return TALLY_ERROR_OUT_OF_MEMORY;
    }
    return 0;
}

int32_t tally_profiler_report_to_buffer(char *buf, size_t size, int32_t json) {
    strbuf b = {NULL, 0, 0, 0};
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
    sb_free(&b);
    return len;
}

static int32_t write_file(void *user_context, const char *path, const char *mode, const char *text,
                          size_t len) {
    FILE *f = fopen(path, mode);
    int ok = f && fwrite(text, 1, len, f) == len;
    if (f && fclose(f) != 0) {
        ok = 0;
    }
    if (!ok) {
        return tally_report_error(user_context, TALLY_ERROR_IO,
                                  "tally profiler: cannot write the report to %s", path);
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
    const char *dest = getenv("TALLY_PROFILE_OUTPUT");
    if (!dest || !*dest || strcmp(dest, "stderr") == 0) {
        if (at_exit) {
            write_fd_all(STDERR_FILENO, text, len);
        } else {
            halide_print(user_context, text);
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
    strbuf b = {NULL, 0, 0, 0};
    int any;
    int32_t r = build_report(&b, 0, &any);
    if (r != 0) {
        return tally_report_error(user_context, r,
                                  "tally profiler: out of memory building the "
                                  "report");
    }
    r = emit_text(user_context, b.data ? b.data : "", b.len, 0);
    sb_free(&b);
    return r;
}

void tally_report_at_exit(void) {
    strbuf b = {NULL, 0, 0, 0};
    int any = 0;
    if (build_report(&b, 0, &any) != 0) {
        return;
    }
    if (any) {
        emit_text(NULL, b.data, b.len, 1);
        const char *json_path = getenv("TALLY_PROFILE_JSON");
        if (json_path && *json_path) {
            strbuf j = {NULL, 0, 0, 0};
            if (build_report(&j, 1, &any) == 0) {
                write_file(NULL, json_path, "w", j.data, j.len);
            }
            sb_free(&j);
        }
    }
    sb_free(&b);
}

// ---- text from numbers read elsewhere ---------------------------------------------------

int32_t tally_profiler_format_text(int32_t num_pipelines, const tally_pipeline_stats *pipelines,
                                   const tally_slot_stats *const *slots, char *buf, size_t size) {
    if (num_pipelines < 0 || (num_pipelines > 0 && (!pipelines || !slots))) {
        return TALLY_ERROR_BAD_ARGUMENT;
    }
    strbuf b = {NULL, 0, 0, 0};
    sb_reserve(&b, 0);
    int32_t r = 0;
    for (int32_t i = 0; i < num_pipelines && r == 0; i++) {
        tally_pipeline *p;
        r = tally_pipeline_from_stats(&pipelines[i], slots[i], &p);
        if (r != 0) {
            break;
        }
        if (i > 0) {
            sb_printf(&b, "\n");
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
    sb_free(&b);
    return r != 0 ? r : len;
}
