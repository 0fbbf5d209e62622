// Halide 14's Func::debug_to_file: the realized buffer (at most 4 dimensions, one value) written
// to a file in the format its name ends with, byte for byte as Halide's runtime writes it:
//  - .tiff / .tif: an uncompressed little-endian TIFF, one strip per channel (planar), with
//    Halide's 15 tags (extent 2 of up to 4 is the channels, else extent 3 is and extent 2 is
//    the depth, tag 32997) and a sample-format tag from the element type;
//  - .mat: a MATLAB level 5 file holding one array named after the file (its base name without
//    the extension), of the element type's class;
//  - anything else: five int32s (the four extents, 1 past the rank, then the type code) and the
//    data.
// The data are the elements in order of their coordinates, dimension 0 fastest. The type code is
// Halide's: 0 float32, 1 float64, 2 uint8 or bool, 3 int8, 4 uint16, 5 int16, 6 uint32, 7 int32,
// 8 uint64, 9 int64. Returns 0, or a negative code with the error reported (Halide's codes: -1
// a bad buffer, -2 the file cannot be opened, below that a failed write).
//
// Halide 21's form, debug_to_file(filename, buffer) (tally_halide21_debug_to_file: the runtime
// reads the type from the buffer, the same codes), writes the same files and, for a name ending
// in .npy, a NumPy file: version 1.0, the header dictionary as Halide 21 writes it (the extents in
// dimension order with fortran_order False, padded with spaces after its newline to a multiple of
// 64 bytes with the 10 bytes before it), then the same data. float16 buffers go to .npy only. Its
// failures return Halide 21's codes: -34 a bounds query, -43 over 4 dimensions, -13 the rest.

#include "core/error.h"
#include "tally_runtime.h"

#include <stdio.h>
#include <string.h>

static const int16_t tiff_sample_format[10] = {3, 3, 1, 2, 1, 2, 1, 2, 1, 2};
static const uint8_t matlab_class[10] = {7, 6, 9, 8, 11, 10, 13, 12, 15, 14};
static const uint8_t matlab_type[10] = {7, 9, 2, 1, 4, 3, 6, 5, 13, 12};

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static void put16(uint8_t *p, uint16_t v) {
    memcpy(p, &v, 2);
}

static void put32(uint8_t *p, uint32_t v) {
    memcpy(p, &v, 4);
}

// One TIFF directory entry: tag, field type (3 SHORT, 4 LONG, 5 RATIONAL), count, value.
static uint8_t *tiff_entry(uint8_t *p, uint16_t tag, uint16_t type, uint32_t count,
                           uint32_t value) {
    put16(p, tag);
    put16(p + 2, type);
    put32(p + 4, count);
    put32(p + 8, 0);
    if (type == 3) {
        put16(p + 8, (uint16_t)value);
    } else {
        put32(p + 8, value);
    }
    return p + 12;
}

// Halide's TIFF header: byte order, version, the directory (15 entries), its end, and the two
// resolutions it points at. 210 bytes.
enum { TIFF_HEADER = 210, TIFF_WIDTH_RES = 194, TIFF_HEIGHT_RES = 202 };

static int write_tiff_header(FILE *f, const halide_dimension_t *shape, int32_t bytes,
                             int32_t type_code, uint64_t elements) {
    int32_t channels, depth;
    if ((shape[3].extent == 0 || shape[3].extent == 1) && shape[2].extent < 5) {
        channels = shape[2].extent;
        depth = 1;
    } else {
        channels = shape[3].extent;
        depth = shape[2].extent;
    }
    uint8_t h[TIFF_HEADER];
    memset(h, 0, sizeof(h));
    h[0] = 'I';
    h[1] = 'I';
    put16(h + 2, 42);
    put32(h + 4, 8);
    put16(h + 8, 15);
    uint8_t *e = h + 10;
    e = tiff_entry(e, 256, 4, 1, (uint32_t)shape[0].extent);
    e = tiff_entry(e, 257, 4, 1, (uint32_t)shape[1].extent);
    e = tiff_entry(e, 258, 3, 1, (uint32_t)(bytes * 8));
    e = tiff_entry(e, 259, 3, 1, 1);
    e = tiff_entry(e, 262, 3, 1, channels >= 3 ? 2 : 1);
    e = tiff_entry(e, 273, 4, (uint32_t)channels, TIFF_HEADER);
    e = tiff_entry(e, 277, 3, 1, (uint32_t)channels);
    e = tiff_entry(e, 278, 4, 1, (uint32_t)shape[1].extent);
    e = tiff_entry(e, 279, 4, (uint32_t)channels,
                   channels == 1 ? (uint32_t)(elements * (uint64_t)bytes)
                                 : (uint32_t)(TIFF_HEADER + channels * 4));
    e = tiff_entry(e, 282, 5, 1, TIFF_WIDTH_RES);
    e = tiff_entry(e, 283, 5, 1, TIFF_HEIGHT_RES);
    e = tiff_entry(e, 284, 3, 1, 2);
    e = tiff_entry(e, 296, 3, 1, 1);
    e = tiff_entry(e, 339, 3, 1, (uint32_t)(uint16_t)tiff_sample_format[type_code]);
    e = tiff_entry(e, 32997, 4, 1, (uint32_t)depth);
    put32(e, 0);  // no next directory
    put32(h + TIFF_WIDTH_RES, 1);
    put32(h + TIFF_WIDTH_RES + 4, 1);
    put32(h + TIFF_HEIGHT_RES, 1);
    put32(h + TIFF_HEIGHT_RES + 4, 1);
    if (fwrite(h, sizeof(h), 1, f) != 1) {
        return -3;
    }
    if (channels > 1) {
        // Each channel's strip offset, then each one's byte count.
        const int32_t plane = shape[0].extent * shape[1].extent * depth * bytes;
        int32_t offset = TIFF_HEADER + channels * 4 * 2;
        for (int32_t i = 0; i < channels; i++, offset += plane) {
            if (fwrite(&offset, 4, 1, f) != 1) {
                return -4;
            }
        }
        for (int32_t i = 0; i < channels; i++) {
            if (fwrite(&plane, 4, 1, f) != 1) {
                return -5;
            }
        }
    }
    return 0;
}

static int write_mat_header(void *user_context, FILE *f, const char *filename,
                            const halide_buffer_t *buf, const halide_dimension_t *shape,
                            int32_t type_code, uint32_t *final_padding) {
    // The array's name: the file's base name up to its last '.'.
    const char *end = strrchr(filename, '.');
    const char *start = strrchr(filename, '/');
    start = start && start < end ? start + 1 : filename;
    uint32_t name_size = (uint32_t)(end - start);
    char name[256];
    memset(name, 0, sizeof(name));
    if (name_size > sizeof(name)) {
        tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                           "debug_to_file: the .mat file's name '%s' is over 256 bytes", filename);
        return -6;
    }
    memcpy(name, start, name_size);
    const uint32_t padded_name = (name_size + 7) & ~7u;

    char text[128];
    memset(text, ' ', sizeof(text));
    static const char title[] = "MATLAB 5.0 MAT-file, produced by Halide";
    memcpy(text, title, sizeof(title) - 1);
    text[124] = 0;  // version 0x0100, then "IM": little-endian
    text[125] = 1;
    text[126] = 'I';
    text[127] = 'M';
    if (fwrite(text, sizeof(text), 1, f) != 1) {
        return -7;
    }
    const uint64_t payload = tally_buffer_size_in_bytes(buf);
    *final_padding = payload ? 7 - (uint32_t)((payload - 1) & 7) : 0;
    if ((payload + *final_padding) >> 32) {
        tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                           "debug_to_file: '%s' would be a .mat file over 4 GB", filename);
        return -6;
    }
    const int dims = buf->dimensions < 2 ? 2 : buf->dimensions;
    const int padded_dims = (dims + 1) & ~1;
    const uint32_t tags[8] = {14,
                              40 + (uint32_t)padded_dims * 4 + padded_name + (uint32_t)payload +
                                  *final_padding,
                              6,
                              8,
                              matlab_class[type_code],
                              1,
                              5,
                              (uint32_t)(dims * 4)};
    const int32_t extents[4] = {shape[0].extent, shape[1].extent, shape[2].extent, shape[3].extent};
    const uint32_t name_header[2] = {1, name_size};
    const uint32_t payload_header[2] = {matlab_type[type_code], (uint32_t)payload};
    if (fwrite(tags, sizeof(tags), 1, f) != 1 ||
        fwrite(extents, (size_t)padded_dims * 4, 1, f) != 1 ||
        fwrite(name_header, sizeof(name_header), 1, f) != 1 ||
        (padded_name && fwrite(name, padded_name, 1, f) != 1) ||
        fwrite(payload_header, sizeof(payload_header), 1, f) != 1) {
        return -8;
    }
    return 0;
}

// Halide 21's .npy header: magic, version 1.0, the header's length, then the dictionary.
static int write_npy_header(FILE *f, const halide_buffer_t *buf, char kind) {
    char dict[1024];
    const int bytes = (int)tally_type_bytes(buf->type);
    int n = snprintf(dict, sizeof(dict), "{'descr': '%c%c%d', 'fortran_order': False, 'shape': (",
                     bytes == 1 ? '|' : '<', kind, bytes);
    for (int d = 0; d < buf->dimensions && n < (int)sizeof(dict); d++) {
        n += snprintf(dict + n, sizeof(dict) - (size_t)n, "%s%d%s", d > 0 ? "," : "",
                      (int)buf->dim[d].extent, buf->dimensions == 1 ? "," : "");
    }
    if (n < (int)sizeof(dict)) {
        n += snprintf(dict + n, sizeof(dict) - (size_t)n, ")}\n");
    }
    const int padded = (10 + n + 63) & ~63;
    if (padded - 10 >= (int)sizeof(dict)) {
        return -9;
    }
    memset(dict + n, ' ', (size_t)(padded - 10 - n));
    const uint16_t header_len = (uint16_t)(padded - 10);
    static const char magic[8] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
    if (fwrite(magic, sizeof(magic), 1, f) != 1 || fwrite(&header_len, 2, 1, f) != 1 ||
        fwrite(dict, header_len, 1, f) != 1) {
        return -10;
    }
    return 0;
}

// Writes `buf` to `filename` (the checks done): the header its name asks for, then the data.
// type_code is -1 for a type only .npy takes; npy_kind is the NumPy kind ('f', 'u', 'i') for
// Halide 21's form, 0 for Halide 14's (no .npy: such a name gets the raw format).
static int32_t write_debug_file(void *user_context, const char *filename, int32_t type_code,
                                halide_buffer_t *buf, char npy_kind) {
    const int npy = npy_kind != 0 && ends_with(filename, ".npy");
    if (type_code < 0 && !npy) {
        tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                           "halide_debug_to_file: '%s': a buffer of %d-bit floats can only be "
                           "written to a .npy file",
                           filename, (int)buf->type.bits);
        return -1;
    }
    int32_t r = halide_copy_to_host(user_context, buf);
    if (r != 0) {
        return r;
    }
    halide_dimension_t shape[4];
    uint64_t elements = 1;
    for (int i = 0; i < 4; i++) {
        if (i < buf->dimensions) {
            shape[i] = buf->dim[i];
            elements *= (uint64_t)(shape[i].extent > 0 ? shape[i].extent : 0);
        } else {
            shape[i].min = 0;
            shape[i].extent = 1;
            shape[i].stride = 0;
            shape[i].flags = 0;
        }
    }
    const int32_t bytes = (int32_t)tally_type_bytes(buf->type);
    FILE *f = fopen(filename, "wb");
    if (!f) {
        tally_report_error(user_context, TALLY_ERROR_IO,
                           "halide_debug_to_file: cannot open '%s' for writing", filename);
        return -2;
    }
    uint32_t final_padding = 0;
    if (npy) {
        r = write_npy_header(f, buf, npy_kind);
    } else if (ends_with(filename, ".tiff") || ends_with(filename, ".tif")) {
        r = write_tiff_header(f, shape, bytes, type_code, elements);
    } else if (ends_with(filename, ".mat")) {
        r = write_mat_header(user_context, f, filename, buf, shape, type_code, &final_padding);
    } else {
        const int32_t header[5] = {shape[0].extent, shape[1].extent, shape[2].extent,
                                   shape[3].extent, type_code};
        r = fwrite(header, sizeof(header), 1, f) == 1 ? 0 : -12;
    }
    // The elements in coordinate order, dimension 0 fastest, through a 4 KiB staging buffer.
    uint8_t staging[4096];
    size_t used = 0;
    for (int32_t i3 = 0; r == 0 && i3 < shape[3].extent; i3++) {
        for (int32_t i2 = 0; r == 0 && i2 < shape[2].extent; i2++) {
            for (int32_t i1 = 0; r == 0 && i1 < shape[1].extent; i1++) {
                const int64_t row = (int64_t)i1 * shape[1].stride + (int64_t)i2 * shape[2].stride +
                                    (int64_t)i3 * shape[3].stride;
                for (int32_t i0 = 0; i0 < shape[0].extent; i0++) {
                    const uint8_t *src =
                        buf->host + (row + (int64_t)i0 * shape[0].stride) * (int64_t)bytes;
                    if (used + (size_t)bytes > sizeof(staging)) {
                        if (fwrite(staging, used, 1, f) != 1) {
                            r = -13;
                            break;
                        }
                        used = 0;
                    }
                    memcpy(staging + used, src, (size_t)bytes);
                    used += (size_t)bytes;
                }
            }
        }
    }
    if (r == 0 && used > 0 && fwrite(staging, used, 1, f) != 1) {
        r = -14;
    }
    static const uint8_t zeros[8] = {0};
    if (r == 0 && final_padding > 0 && fwrite(zeros, final_padding, 1, f) != 1) {
        r = -16;
    }
    if (fclose(f) != 0 && r == 0) {
        r = -16;
    }
    if (r != 0) {
        tally_report_error(user_context, TALLY_ERROR_IO,
                           "halide_debug_to_file: writing '%s' failed (%d)", filename, (int)r);
    }
    return r;
}

int32_t halide_debug_to_file(void *user_context, const char *filename, int32_t type_code,
                             halide_buffer_t *buf) {
    if (!buf || !filename || _halide_buffer_is_bounds_query(buf)) {
        halide_error(user_context, "halide_debug_to_file: no buffer, no file name, or a bounds "
                                   "query buffer");
        return -1;
    }
    if (buf->dimensions > 4 || buf->dimensions < 0 || type_code < 0 || type_code > 9) {
        tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                           "halide_debug_to_file: cannot write a %d-dimensional buffer of type "
                           "code %d to '%s' (at most 4 dimensions, type codes 0 to 9)",
                           (int)buf->dimensions, (int)type_code, filename);
        return -1;
    }
    return write_debug_file(user_context, filename, type_code, buf, 0);
}

int32_t tally_halide21_debug_to_file(void *user_context, const char *filename,
                                     halide_buffer_t *buf) {
    if (!buf || !filename || _halide_buffer_is_bounds_query(buf)) {
        halide_error(user_context, "halide_debug_to_file: no buffer, no file name, or a bounds "
                                   "query buffer");
        return -34;
    }
    if (buf->dimensions > 4 || buf->dimensions < 0) {
        tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                           "halide_debug_to_file: cannot write a %d-dimensional buffer to '%s' "
                           "(at most 4 dimensions)",
                           (int)buf->dimensions, filename);
        return -43;
    }
    // Halide's type code (the comment at the top) and NumPy kind, from the buffer's type.
    const halide_type_t t = buf->type;
    int32_t code = -2;
    char kind = t.code == halide_type_float ? 'f' : t.code == halide_type_int ? 'i' : 'u';
    if (t.lanes == 1 && t.code == halide_type_float) {
        code = t.bits == 32 ? 0 : t.bits == 64 ? 1 : t.bits == 16 ? -1 : -2;
    } else if (t.lanes == 1 && (t.code == halide_type_int || t.code == halide_type_uint)) {
        const int is_int = t.code == halide_type_int;
        code = t.bits == 1 && !is_int ? 2
               : t.bits == 8          ? 2 + is_int
               : t.bits == 16         ? 4 + is_int
               : t.bits == 32         ? 6 + is_int
               : t.bits == 64         ? 8 + is_int
                                      : -2;
    }
    if (code == -2) {
        tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                           "halide_debug_to_file: cannot write a buffer of type code %d, %d "
                           "bits, %d lanes to '%s'",
                           (int)t.code, (int)t.bits, (int)t.lanes, filename);
        return -13;
    }
    return write_debug_file(user_context, filename, code, buf, kind) == 0 ? 0 : -13;
}
