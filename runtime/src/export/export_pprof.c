// The pprof export: every pipeline's totals as a gzipped profile.proto (the format of
// github.com/google/pprof's proto/profile.proto), which `go tool pprof`, Parca and Pyroscope read.
//
// What the profile holds:
//   - sample types, in this order: time/nanoseconds, samples/count, alloc_objects/count,
//     alloc_space/bytes (heap allocations), device_alloc_objects/count, device_alloc_space/bytes,
//     copies/count, copy_space/bytes (buffer copies made in the slot); the default sample type is
//     time;
//   - one sample per slot that has any nonzero value, its values the slot's totals over all
//     finished runs (tally_slot_stats: time_ns, samples, heap and device num_allocs/total_bytes,
//     copies, copy_bytes),
//     its stack the slot's stack (export.h: pipeline ; Func [; copy]), leaf first as pprof wants;
//   - labels on each sample: "target" (the pipeline's target), "mode" (tally_profiler_mode_name:
//     exact, sampling or timer), "kind" (func, copy_to_device or copy_to_host) and the number
//     "runs" (the pipeline's finished runs);
//   - one function and one location per distinct frame (a frame is its name and its parent
//     frame, so the same Func name in two pipelines gets two locations, which share the function
//     when the names are equal); no mappings;
//   - period_type time/nanoseconds with period = the sampling interval, duration_nanos = the sum
//     of the pipelines' wall times, time_nanos = the wall clock when the profile was written.
// Ids start at 1; string_table[0] is "". Integers are varints, packed where the field is
// repeated; messages are length-delimited, each encoded into its own buffer first.
//
// The output is gzip (zlib's deflate with a gzip wrapper), as pprof writes and expects it.

#include "core/bytes.h"
#include "core/error.h"
#include "export/export.h"
#include "tally_runtime.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

// ---- protobuf wire format --------------------------------------------------------------

enum { WIRE_VARINT = 0, WIRE_LEN = 2 };

static void pb_varint(tally_bytes *b, uint64_t v) {
    uint8_t bytes[10];
    size_t n = 0;
    do {
        bytes[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) {
            bytes[n] |= 0x80;
        }
        n++;
    } while (v);
    tally_bytes_append(b, bytes, n);
}

static void pb_key(tally_bytes *b, uint32_t field, uint32_t wire) {
    pb_varint(b, ((uint64_t)field << 3) | wire);
}

// An int64/uint64 field. Zero is the default and is left out, as protobuf encoders do.
static void pb_int(tally_bytes *b, uint32_t field, int64_t v) {
    if (v != 0) {
        pb_key(b, field, WIRE_VARINT);
        pb_varint(b, (uint64_t)v);
    }
}

static void pb_bytes(tally_bytes *b, uint32_t field, const void *bytes, size_t n) {
    pb_key(b, field, WIRE_LEN);
    pb_varint(b, n);
    tally_bytes_append(b, bytes, n);
}

// Appends `sub` as a length-delimited field and empties it for reuse.
static void pb_message(tally_bytes *b, uint32_t field, tally_bytes *sub) {
    if (sub->failed) {
        b->failed = 1;
    }
    pb_bytes(b, field, sub->data, sub->len);
    sub->len = 0;
    sub->failed = 0;
}

// A packed repeated int64/uint64 field.
static void pb_packed(tally_bytes *b, uint32_t field, const uint64_t *values, size_t n,
                      tally_bytes *scratch) {
    for (size_t i = 0; i < n; i++) {
        pb_varint(scratch, values[i]);
    }
    pb_message(b, field, scratch);
}

// ---- profile.proto field numbers --------------------------------------------------------

enum {
    PROFILE_SAMPLE_TYPE = 1,
    PROFILE_SAMPLE = 2,
    PROFILE_LOCATION = 4,
    PROFILE_FUNCTION = 5,
    PROFILE_STRING_TABLE = 6,
    PROFILE_TIME_NANOS = 9,
    PROFILE_DURATION_NANOS = 10,
    PROFILE_PERIOD_TYPE = 11,
    PROFILE_PERIOD = 12,
    PROFILE_DEFAULT_SAMPLE_TYPE = 14,
    VALUE_TYPE_TYPE = 1,
    VALUE_TYPE_UNIT = 2,
    SAMPLE_LOCATION_ID = 1,
    SAMPLE_VALUE = 2,
    SAMPLE_LABEL = 3,
    LABEL_KEY = 1,
    LABEL_STR = 2,
    LABEL_NUM = 3,
    LOCATION_ID = 1,
    LOCATION_LINE = 4,
    LINE_FUNCTION_ID = 1,
    FUNCTION_ID = 1,
    FUNCTION_NAME = 2,
    FUNCTION_SYSTEM_NAME = 3,
};

// ---- tables -------------------------------------------------------------------------------

// The string table, functions and locations, each a growable array searched linearly (a profile
// has a few entries per slot). Index i of `strings` is string id i; function and location i have
// id i + 1.
typedef struct location {
    uint64_t function_id;
    uint64_t parent_id;  // the caller's location id; 0 for a root
} location;

typedef struct tables {
    const char **strings;
    size_t num_strings, cap_strings;
    uint64_t *functions;  // name string ids
    size_t num_functions, cap_functions;
    location *locations;
    size_t num_locations, cap_locations;
    int failed;
} tables;

static int grow(void **array, size_t *cap, size_t count, size_t elem) {
    if (count < *cap) {
        return 1;
    }
    size_t new_cap = *cap ? *cap * 2 : 16;
    void *grown = realloc(*array, new_cap * elem);
    if (!grown) {
        return 0;
    }
    *array = grown;
    *cap = new_cap;
    return 1;
}

static uint64_t intern_string(tables *t, const char *s) {
    for (size_t i = 0; i < t->num_strings; i++) {
        if (strcmp(t->strings[i], s) == 0) {
            return i;
        }
    }
    if (!grow((void **)&t->strings, &t->cap_strings, t->num_strings, sizeof(const char *))) {
        t->failed = 1;
        return 0;
    }
    t->strings[t->num_strings] = s;
    return t->num_strings++;
}

static uint64_t intern_function(tables *t, const char *name) {
    uint64_t name_id = intern_string(t, name);
    for (size_t i = 0; i < t->num_functions; i++) {
        if (t->functions[i] == name_id) {
            return i + 1;
        }
    }
    if (!grow((void **)&t->functions, &t->cap_functions, t->num_functions, sizeof(uint64_t))) {
        t->failed = 1;
        return 0;
    }
    t->functions[t->num_functions] = name_id;
    return ++t->num_functions;
}

static uint64_t intern_location(tables *t, const char *name, uint64_t parent_id) {
    uint64_t function_id = intern_function(t, name);
    for (size_t i = 0; i < t->num_locations; i++) {
        if (t->locations[i].function_id == function_id && t->locations[i].parent_id == parent_id) {
            return i + 1;
        }
    }
    if (!grow((void **)&t->locations, &t->cap_locations, t->num_locations, sizeof(location))) {
        t->failed = 1;
        return 0;
    }
    t->locations[t->num_locations].function_id = function_id;
    t->locations[t->num_locations].parent_id = parent_id;
    return ++t->num_locations;
}

static void tables_free(tables *t) {
    free((void *)t->strings);
    free(t->functions);
    free(t->locations);
}

// ---- encoding -----------------------------------------------------------------------------

enum { NUM_SAMPLE_TYPES = 8 };

static const char *const sample_types[NUM_SAMPLE_TYPES][2] = {
    {"time", "nanoseconds"},
    {"samples", "count"},
    {"alloc_objects", "count"},
    {"alloc_space", "bytes"},
    {"device_alloc_objects", "count"},
    {"device_alloc_space", "bytes"},
    {"copies", "count"},
    {"copy_space", "bytes"},
};

static void encode_value_type(tally_bytes *out, uint32_t field, tables *t, const char *type,
                              const char *unit, tally_bytes *scratch) {
    pb_int(scratch, VALUE_TYPE_TYPE, (int64_t)intern_string(t, type));
    pb_int(scratch, VALUE_TYPE_UNIT, (int64_t)intern_string(t, unit));
    pb_message(out, field, scratch);
}

static void encode_label(tally_bytes *sample, tables *t, const char *key, const char *str,
                         int64_t num, tally_bytes *scratch) {
    pb_int(scratch, LABEL_KEY, (int64_t)intern_string(t, key));
    if (str) {
        pb_int(scratch, LABEL_STR, (int64_t)intern_string(t, str));
    } else {
        pb_int(scratch, LABEL_NUM, num);
    }
    pb_message(sample, SAMPLE_LABEL, scratch);
}

static const char *kind_label(int32_t kind) {
    return kind == TALLY_SLOT_COPY_TO_DEVICE ? "copy_to_device"
           : kind == TALLY_SLOT_COPY_TO_HOST ? "copy_to_host"
                                             : "func";
}

// Appends one Sample message for slot `s` of `p` to `out` (nothing if all its values are 0).
static void encode_sample(tally_bytes *out, tables *t, const tally_export_pipeline *p, int32_t s,
                          tally_bytes *sample, tally_bytes *scratch) {
    const tally_slot_stats *ss = &p->slots[s].stats;
    uint64_t values[NUM_SAMPLE_TYPES] = {
        ss->time_ns,          ss->samples,           ss->heap.num_allocs,
        ss->heap.total_bytes, ss->device.num_allocs, ss->device.total_bytes,
        ss->copies,           ss->copy_bytes};
    int any = 0;
    for (int i = 0; i < NUM_SAMPLE_TYPES; i++) {
        any |= values[i] != 0;
    }
    if (!any) {
        return;
    }
    const char *frames[3];
    int32_t depth = tally_export_slot_stack(p, s, frames);
    uint64_t ids[3];
    uint64_t parent = 0;
    for (int32_t i = 0; i < depth; i++) {
        parent = intern_location(t, frames[i], parent);
        ids[depth - 1 - i] = parent;  // leaf first
    }
    pb_packed(sample, SAMPLE_LOCATION_ID, ids, (size_t)depth, scratch);
    pb_packed(sample, SAMPLE_VALUE, values, NUM_SAMPLE_TYPES, scratch);
    encode_label(sample, t, "target", p->stats.target, 0, scratch);
    encode_label(sample, t, "mode", tally_profiler_mode_name(p->stats.flags), 0, scratch);
    encode_label(sample, t, "kind", kind_label(ss->kind), 0, scratch);
    encode_label(sample, t, "runs", NULL, (int64_t)p->stats.runs, scratch);
    pb_message(out, PROFILE_SAMPLE, sample);
}

static int64_t wall_clock_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) {
        return 0;
    }
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// The uncompressed profile.proto bytes of the snapshot, into *out.
static int32_t encode_profile(const tally_export_snapshot *snap, tally_bytes *out) {
    tables t;
    memset(&t, 0, sizeof(t));
    tally_bytes sample = {NULL, 0, 0, 0}, scratch = {NULL, 0, 0, 0};
    intern_string(&t, "");  // string_table[0] must be ""

    for (int i = 0; i < NUM_SAMPLE_TYPES; i++) {
        encode_value_type(out, PROFILE_SAMPLE_TYPE, &t, sample_types[i][0], sample_types[i][1],
                          &scratch);
    }
    uint64_t duration = 0;
    for (int32_t i = 0; i < snap->num_pipelines; i++) {
        const tally_export_pipeline *p = &snap->pipelines[i];
        duration += p->stats.total_ns;
        for (int32_t s = 0; s < p->stats.num_slots; s++) {
            encode_sample(out, &t, p, s, &sample, &scratch);
        }
    }
    for (size_t i = 0; i < t.num_locations; i++) {
        pb_int(&sample, LOCATION_ID, (int64_t)(i + 1));
        pb_int(&scratch, LINE_FUNCTION_ID, (int64_t)t.locations[i].function_id);
        pb_message(&sample, LOCATION_LINE, &scratch);
        pb_message(out, PROFILE_LOCATION, &sample);
    }
    for (size_t i = 0; i < t.num_functions; i++) {
        pb_int(&sample, FUNCTION_ID, (int64_t)(i + 1));
        pb_int(&sample, FUNCTION_NAME, (int64_t)t.functions[i]);
        pb_int(&sample, FUNCTION_SYSTEM_NAME, (int64_t)t.functions[i]);
        pb_message(out, PROFILE_FUNCTION, &sample);
    }
    pb_int(out, PROFILE_TIME_NANOS, wall_clock_ns());
    pb_int(out, PROFILE_DURATION_NANOS, (int64_t)duration);
    encode_value_type(out, PROFILE_PERIOD_TYPE, &t, "time", "nanoseconds", &scratch);
    pb_int(out, PROFILE_PERIOD, (int64_t)tally_profiler_get_interval_us() * 1000);
    pb_int(out, PROFILE_DEFAULT_SAMPLE_TYPE, (int64_t)intern_string(&t, "time"));
    // Last, once every string is interned (field order does not matter on the wire).
    for (size_t i = 0; i < t.num_strings; i++) {
        pb_bytes(out, PROFILE_STRING_TABLE, t.strings[i], strlen(t.strings[i]));
    }
    int failed = t.failed || sample.failed || scratch.failed || out->failed;
    tables_free(&t);
    tally_bytes_free(&sample);
    tally_bytes_free(&scratch);
    return failed ? TALLY_ERROR_OUT_OF_MEMORY : 0;
}

static int32_t gzip(const tally_bytes *in, uint8_t **out, size_t *out_len) {
    z_stream z;
    memset(&z, 0, sizeof(z));
    // windowBits 15 + 16: a gzip header and trailer instead of zlib's.
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
        Z_OK) {
        return TALLY_ERROR_GENERIC;
    }
    size_t bound = deflateBound(&z, (uLong)in->len) + 32;  // + room for the gzip header
    uint8_t *buf = (uint8_t *)malloc(bound);
    if (!buf) {
        deflateEnd(&z);
        return TALLY_ERROR_OUT_OF_MEMORY;
    }
    z.next_in = (Bytef *)in->data;
    z.avail_in = (uInt)in->len;
    z.next_out = buf;
    z.avail_out = (uInt)bound;
    int r = deflate(&z, Z_FINISH);
    size_t len = bound - z.avail_out;
    deflateEnd(&z);
    if (r != Z_STREAM_END) {
        free(buf);
        return TALLY_ERROR_GENERIC;
    }
    *out = buf;
    *out_len = len;
    return 0;
}

int32_t tally_export_pprof_encode(const tally_export_snapshot *s, uint8_t **out, size_t *out_len) {
    tally_bytes raw = {NULL, 0, 0, 0};
    int32_t r = encode_profile(s, &raw);
    if (r == 0) {
        r = gzip(&raw, out, out_len);
    }
    tally_bytes_free(&raw);
    return r;
}

int32_t tally_profiler_write_pprof(void *user_context, const char *path) {
    if (!path || !*path) {
        return tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                                  "tally_profiler_write_pprof: no path");
    }
    tally_export_snapshot snap;
    int32_t r = tally_export_snapshot_take(&snap);
    uint8_t *bytes = NULL;
    size_t len = 0;
    if (r == 0) {
        r = tally_export_pprof_encode(&snap, &bytes, &len);
    }
    tally_export_snapshot_free(&snap);
    if (r != 0) {
        return tally_report_error(user_context, r,
                                  "tally profiler: cannot encode the pprof "
                                  "profile for %s (%s)",
                                  path, tally_error_code_name(r));
    }
    r = tally_export_write_file(user_context, path, bytes, len, "pprof profile");
    free(bytes);
    return r;
}
