// Halide 14's tracing ABI (Func::trace_stores, trace_loads, trace_realizations, add_trace_tag,
// and the pipeline events they bring): the halide_trace_helper calls Halide's lowering writes,
// and halide_trace with Halide's default handler.
//
// The default handler numbers every event from 1 up (one process-wide counter, the id the
// generated code passes as the parent of the events inside) and writes it out:
//  - as text, one line per event through halide_print (one call per line, under a lock, so
//    lines of parallel threads do not mix), in Halide's format:
//      <Event> <func>.<value_index>(<coordinates>)[ = <value>][ tag = "<tag>"]
//    vectors as <a, b, ...>, numbers as Halide's runtime prints them (to_string.c);
//  - or, when HL_TRACE_FILE names a file (or halide_set_trace_file gave a descriptor), as
//    Halide's binary packets appended to it: a 28-byte header (size, id, type, event,
//    parent_id, value_index, dimensions), the coordinates, the value's bytes, the func's name
//    and the tag, both NUL-terminated, padded to 4 bytes.
// halide_set_custom_trace replaces the handler.

#include "core/env.h"
#include "core/error.h"
#include "tally_runtime.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int32_t default_trace(void *user_context, const halide_trace_event_t *e);

static _Atomic(halide_trace_t) trace_handler = default_trace;
static _Atomic int32_t next_id = 1;
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;  // the trace file's state
static atomic_flag print_lock = ATOMIC_FLAG_INIT;               // one text line at a time
// The binary trace's file descriptor: -1 not decided yet (HL_TRACE_FILE is read on first
// use), 0 text through halide_print, > 0 the file. owned: opened here from HL_TRACE_FILE.
static _Atomic int trace_fd = -1;
static int trace_fd_owned = 0;

static const char *const event_names[] = {
    "Load",    "Store",       "Begin realization", "End realization", "Produce", "End produce",
    "Consume", "End consume", "Begin pipeline",    "End pipeline",    "Tag"};

// float16 bits as a double (exact: every float16 is a double).
static double half_to_double(uint16_t h) {
    const int sign = h >> 15, exponent = (h >> 10) & 31, mantissa = h & 1023;
    double v;
    if (exponent == 31) {
        v = mantissa ? __builtin_nan("") : __builtin_inf();
    } else if (exponent == 0) {
        v = __builtin_ldexp((double)mantissa, -24);
    } else {
        v = __builtin_ldexp((double)(mantissa | 1024), exponent - 25);
    }
    return sign ? -v : v;
}

// Lane i of the event's value, as Halide's text trace prints it.
static char *value_to_string(char *dst, char *end, const halide_trace_event_t *e, int i) {
    int bits = 8;
    while (bits < e->type.bits) {
        bits <<= 1;
    }
    const void *v = e->value;
    switch (e->type.code) {
    case halide_type_int:
        return halide_int64_to_string(dst, end,
                                      bits == 8    ? ((const int8_t *)v)[i]
                                      : bits == 16 ? ((const int16_t *)v)[i]
                                      : bits == 32 ? ((const int32_t *)v)[i]
                                                   : ((const int64_t *)v)[i],
                                      1);
    case halide_type_uint:
        return halide_uint64_to_string(dst, end,
                                       bits == 8    ? ((const uint8_t *)v)[i]
                                       : bits == 16 ? ((const uint16_t *)v)[i]
                                       : bits == 32 ? ((const uint32_t *)v)[i]
                                                    : ((const uint64_t *)v)[i],
                                       1);
    case halide_type_float:
        if (bits == 16) {
            return halide_double_to_string(dst, end, half_to_double(((const uint16_t *)v)[i]), 1);
        }
        return bits == 32 ? halide_double_to_string(dst, end, ((const float *)v)[i], 0)
                          : halide_double_to_string(dst, end, ((const double *)v)[i], 1);
    case halide_type_handle:
        return halide_pointer_to_string(dst, end, ((void *const *)v)[i]);
    default:
        return dst;  // bfloat: Halide 14 prints nothing
    }
}

static void print_event(void *user_context, const halide_trace_event_t *e) {
    char line[4096];
    char *end = line + sizeof(line), *p = line;
    *p = '\0';
    const int lanes = e->type.lanes;
    p = halide_string_to_string(p, end, event_names[e->event]);
    p = halide_string_to_string(p, end, " ");
    p = halide_string_to_string(p, end, e->func);
    p = halide_string_to_string(p, end, ".");
    p = halide_int64_to_string(p, end, e->value_index, 1);
    p = halide_string_to_string(p, end, lanes > 1 ? "(<" : "(");
    for (int i = 0; i < e->dimensions; i++) {
        if (i > 0) {
            p = halide_string_to_string(p, end, lanes > 1 && i % lanes == 0 ? ">, <" : ", ");
        }
        p = halide_int64_to_string(p, end, e->coordinates[i], 1);
    }
    p = halide_string_to_string(p, end, lanes > 1 ? ">)" : ")");
    if (e->event == halide_trace_load || e->event == halide_trace_store) {
        p = halide_string_to_string(p, end, lanes > 1 ? " = <" : " = ");
        for (int i = 0; i < lanes && e->value; i++) {
            if (i > 0) {
                p = halide_string_to_string(p, end, ", ");
            }
            p = value_to_string(p, end, e, i);
        }
        if (lanes > 1) {
            p = halide_string_to_string(p, end, ">");
        }
    }
    if (e->trace_tag && *e->trace_tag) {
        p = halide_string_to_string(p, end, " tag = \"");
        p = halide_string_to_string(p, end, e->trace_tag);
        p = halide_string_to_string(p, end, "\"");
    }
    halide_string_to_string(p, end, "\n");
    // A spin lock, as Halide's: a line is one short print, and a mutex's cost per event showed
    // (about 20 ns of Tally's 160 against Halide's 125 for an int16 store, when printing
    // nothing).
    while (atomic_flag_test_and_set_explicit(&print_lock, memory_order_acquire)) {
        sched_yield();
    }
    halide_print(user_context, line);
    atomic_flag_clear_explicit(&print_lock, memory_order_release);
}

static int write_all_fd(int fd, const uint8_t *data, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, data, n);
        if (w < 0) {
            return -1;
        }
        data += w;
        n -= (size_t)w;
    }
    return 0;
}

static int32_t write_packet(void *user_context, int fd, int32_t id, const halide_trace_event_t *e) {
    const size_t value_bytes = (size_t)e->type.lanes * (size_t)((e->type.bits + 7) / 8);
    const size_t name_bytes = strlen(e->func ? e->func : "") + 1;
    const size_t tag_bytes = strlen(e->trace_tag ? e->trace_tag : "") + 1;
    const size_t header = 28, coords = (size_t)e->dimensions * sizeof(int32_t);
    size_t size = header + coords + value_bytes + name_bytes + tag_bytes;
    size = (size + 3) & ~(size_t)3;
    uint8_t *packet = (uint8_t *)calloc(1, size);
    if (!packet) {
        halide_error(user_context, "halide_trace: out of memory for a trace packet");
        return -1;
    }
    const uint32_t fields[7] = {(uint32_t)size,
                                (uint32_t)id,
                                (uint32_t)e->type.code | (uint32_t)e->type.bits << 8 |
                                    (uint32_t)e->type.lanes << 16,
                                (uint32_t)e->event,
                                (uint32_t)e->parent_id,
                                (uint32_t)e->value_index,
                                (uint32_t)e->dimensions};
    memcpy(packet, fields, header);
    uint8_t *p = packet + header;
    if (coords) {
        memcpy(p, e->coordinates, coords);
    }
    p += coords;
    if (value_bytes && e->value) {
        memcpy(p, e->value, value_bytes);
    }
    p += value_bytes;
    memcpy(p, e->func ? e->func : "", name_bytes);
    p += name_bytes;
    memcpy(p, e->trace_tag ? e->trace_tag : "", tag_bytes);
    pthread_mutex_lock(&trace_lock);
    int r = write_all_fd(fd, packet, size);
    pthread_mutex_unlock(&trace_lock);
    free(packet);
    if (r != 0) {
        halide_error(user_context, "halide_trace: writing the trace file failed");
        return -1;
    }
    return id;
}

int halide_get_trace_file(void *user_context) {
    int known = atomic_load_explicit(&trace_fd, memory_order_acquire);
    if (known >= 0) {
        return known;  // decided: no lock on an event's path
    }
    const char *failed = NULL;
    pthread_mutex_lock(&trace_lock);
    if (trace_fd < 0) {
        int fd = 0;  // text, unless HL_TRACE_FILE names a file that opens
        const char *path = tally_env_string("HL_TRACE_FILE");
        if (path) {
            int f = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
            if (f > 0) {
                fd = f;
                trace_fd_owned = 1;
            } else {
                failed = path;
            }
        }
        trace_fd = fd;  // published once, decided
    }
    known = trace_fd;
    pthread_mutex_unlock(&trace_lock);
    if (failed) {
        tally_report_error(user_context, TALLY_ERROR_IO,
                           "HL_TRACE_FILE: cannot open '%s' for the trace; tracing as text",
                           failed);
    }
    return known;
}

void halide_set_trace_file(int fd) {
    pthread_mutex_lock(&trace_lock);
    if (trace_fd_owned && trace_fd > 0 && trace_fd != fd) {
        close(trace_fd);
    }
    trace_fd = fd > 0 ? fd : 0;
    trace_fd_owned = 0;
    pthread_mutex_unlock(&trace_lock);
}

int halide_shutdown_trace(void) {
    pthread_mutex_lock(&trace_lock);
    int r = 0;
    if (trace_fd_owned && trace_fd > 0) {
        r = close(trace_fd);
    }
    trace_fd = -1;
    trace_fd_owned = 0;
    pthread_mutex_unlock(&trace_lock);
    return r;
}

static int32_t default_trace(void *user_context, const halide_trace_event_t *e) {
    const int32_t id = atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed);
    if (e->event < halide_trace_load || e->event > halide_trace_tag || e->dimensions < 0 ||
        e->type.bits > 64) {
        return tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                                  "halide_trace: bad event (code %d, %d dimensions, %d bits)",
                                  (int)e->event, (int)e->dimensions, (int)e->type.bits);
    }
    const int fd = halide_get_trace_file(user_context);
    if (fd > 0) {
        return write_packet(user_context, fd, id, e);
    }
    print_event(user_context, e);
    return id;
}

int32_t halide_trace(void *user_context, const halide_trace_event_t *event) {
    halide_trace_t handler = atomic_load_explicit(&trace_handler, memory_order_acquire);
    return handler(user_context, event);
}

halide_trace_t halide_set_custom_trace(halide_trace_t handler) {
    return atomic_exchange(&trace_handler, handler ? handler : default_trace);
}

int32_t halide_trace_helper(void *user_context, const char *func, void *value, int32_t *coords,
                            int32_t type_code, int32_t type_bits, int32_t type_lanes, int32_t code,
                            int32_t parent_id, int32_t value_index, int32_t dimensions,
                            const char *trace_tag) {
    halide_trace_event_t e;
    e.func = func;
    e.value = value;
    e.coordinates = coords;
    e.trace_tag = trace_tag;
    e.type.code = (uint8_t)type_code;
    e.type.bits = (uint8_t)type_bits;
    e.type.lanes = (uint16_t)type_lanes;
    e.event = (halide_trace_event_code_t)code;
    e.parent_id = parent_id;
    e.value_index = value_index;
    e.dimensions = dimensions;
    return halide_trace(user_context, &e);
}
