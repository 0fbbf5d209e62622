// halide_buffer_t helpers: sizes, dirty bits, and Halide's _halide_buffer_* accessors.
//
// A buffer's elements span from its lowest to its highest addressed element; strides may be
// negative, so the span starts below `host` when they are. Device back-ends mirror exactly that
// span, which is what tally_buffer_begin / tally_buffer_size_in_bytes describe.

#include "core/buffer.h"
#include "tally_runtime.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

uint32_t tally_type_bytes(halide_type_t t) {
    uint32_t lanes = t.lanes ? t.lanes : 1;
    return ((uint32_t)t.bits + 7) / 8 * lanes;
}

// Element offsets of the lowest and highest addressed elements, relative to host. Returns 0 if the
// buffer is empty.
static int buffer_span(const halide_buffer_t *buf, int64_t *lo, int64_t *hi) {
    *lo = 0;
    *hi = 0;
    if (!buf) {
        return 0;
    }
    for (int32_t i = 0; i < buf->dimensions; i++) {
        const halide_dimension_t *d = &buf->dim[i];
        if (d->extent <= 0) {
            return 0;
        }
        int64_t reach = (int64_t)(d->extent - 1) * (int64_t)d->stride;
        if (reach < 0) {
            *lo += reach;
        } else {
            *hi += reach;
        }
    }
    return 1;
}

uint64_t tally_buffer_size_in_bytes(const halide_buffer_t *buf) {
    int64_t lo, hi;
    if (!buffer_span(buf, &lo, &hi)) {
        return 0;
    }
    return (uint64_t)(hi - lo + 1) * tally_type_bytes(buf->type);
}

uint64_t tally_buffer_host_offset(const halide_buffer_t *buf) {
    int64_t lo, hi;
    if (!buffer_span(buf, &lo, &hi)) {
        return 0;
    }
    return (uint64_t)(-lo) * tally_type_bytes(buf->type);
}

uint8_t *tally_buffer_begin(const halide_buffer_t *buf) {
    if (!buf || !buf->host) {
        return NULL;
    }
    return buf->host - tally_buffer_host_offset(buf);
}

bool tally_buffer_get_host_dirty(const halide_buffer_t *buf) {
    return (buf->flags & halide_buffer_flag_host_dirty) != 0;
}

bool tally_buffer_get_device_dirty(const halide_buffer_t *buf) {
    return (buf->flags & halide_buffer_flag_device_dirty) != 0;
}

void tally_buffer_set_host_dirty(halide_buffer_t *buf, bool dirty) {
    if (dirty) {
        buf->flags |= halide_buffer_flag_host_dirty;
    } else {
        buf->flags &= ~(uint64_t)halide_buffer_flag_host_dirty;
    }
}

void tally_buffer_set_device_dirty(halide_buffer_t *buf, bool dirty) {
    if (dirty) {
        buf->flags |= halide_buffer_flag_device_dirty;
    } else {
        buf->flags &= ~(uint64_t)halide_buffer_flag_device_dirty;
    }
}

int32_t _halide_buffer_get_dimensions(const halide_buffer_t *buf) {
    return buf->dimensions;
}

uint8_t *_halide_buffer_get_host(const halide_buffer_t *buf) {
    return buf->host;
}

uint64_t _halide_buffer_get_device(const halide_buffer_t *buf) {
    return buf->device;
}

const struct halide_device_interface_t *
_halide_buffer_get_device_interface(const halide_buffer_t *buf) {
    return buf->device_interface;
}

int32_t _halide_buffer_get_min(const halide_buffer_t *buf, int32_t d) {
    return buf->dim[d].min;
}

int32_t _halide_buffer_get_max(const halide_buffer_t *buf, int32_t d) {
    return buf->dim[d].min + buf->dim[d].extent - 1;
}

int32_t _halide_buffer_get_extent(const halide_buffer_t *buf, int32_t d) {
    return buf->dim[d].extent;
}

int32_t _halide_buffer_get_stride(const halide_buffer_t *buf, int32_t d) {
    return buf->dim[d].stride;
}

bool _halide_buffer_get_host_dirty(const halide_buffer_t *buf) {
    return tally_buffer_get_host_dirty(buf);
}

bool _halide_buffer_get_device_dirty(const halide_buffer_t *buf) {
    return tally_buffer_get_device_dirty(buf);
}

int32_t _halide_buffer_set_host_dirty(halide_buffer_t *buf, bool val) {
    tally_buffer_set_host_dirty(buf, val);
    return 0;
}

int32_t _halide_buffer_set_device_dirty(halide_buffer_t *buf, bool val) {
    tally_buffer_set_device_dirty(buf, val);
    return 0;
}

halide_dimension_t *_halide_buffer_get_shape(halide_buffer_t *buf) {
    return buf->dim;
}

bool _halide_buffer_is_bounds_query(const halide_buffer_t *buf) {
    return buf->host == NULL && buf->device == 0;
}

uint32_t _halide_buffer_get_type(const halide_buffer_t *buf) {
    return (uint32_t)buf->type.code | ((uint32_t)buf->type.bits << 8) |
           ((uint32_t)buf->type.lanes << 16);
}

halide_buffer_t *_halide_buffer_init(halide_buffer_t *dst, halide_dimension_t *dst_shape,
                                     void *host, uint64_t device,
                                     const struct halide_device_interface_t *device_interface,
                                     int32_t type_code, int32_t type_bits, int32_t dimensions,
                                     halide_dimension_t *shape, uint64_t flags) {
    dst->host = (uint8_t *)host;
    dst->device = device;
    dst->device_interface = device_interface;
    dst->type.code = (uint8_t)type_code;
    dst->type.bits = (uint8_t)type_bits;
    dst->type.lanes = 1;
    dst->dimensions = dimensions;
    dst->dim = dst_shape;
    if (shape != dst_shape && dimensions > 0) {
        memcpy(dst_shape, shape, sizeof(halide_dimension_t) * (size_t)dimensions);
    }
    dst->flags = flags;
    dst->padding = NULL;
    return dst;
}

// Appends printf-formatted text at dst, within [dst, end); returns the new end of the text.
static char *append(char *dst, char *end, const char *fmt, ...) {
    if (dst >= end) {
        return dst;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(dst, (size_t)(end - dst), fmt, ap);
    va_end(ap);
    if (n < 0) {
        return dst;
    }
    return (size_t)n < (size_t)(end - dst) ? dst + n : end - 1;
}

char *halide_buffer_to_string(char *dst, char *end, const halide_buffer_t *buf) {
    if (buf == NULL) {
        return append(dst, end, "nullptr");
    }
    static const char *const codes[] = {"int", "uint", "float", "handle", "bfloat"};
    const char *code = buf->type.code < 5 ? codes[buf->type.code] : "bad_type_code";
    dst = append(dst, end, "buffer(%" PRIu64 ", 0x%" PRIxPTR ", 0x%" PRIxPTR ", %" PRIu64 ", %s%d",
                 buf->device, (uintptr_t)buf->device_interface, (uintptr_t)buf->host, buf->flags,
                 code, (int)buf->type.bits);
    if (buf->type.lanes > 1) {
        dst = append(dst, end, "x%d", (int)buf->type.lanes);
    }
    for (int i = 0; i < buf->dimensions; i++) {
        dst = append(dst, end, ", {%d, %d, %d}", buf->dim[i].min, buf->dim[i].extent,
                     buf->dim[i].stride);
    }
    return append(dst, end, ")");
}
