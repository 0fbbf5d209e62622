// A growable byte string for the runtime's writers (report.c, the exports): appends that fail
// for want of memory set a sticky `failed` flag instead of returning an error each, so a writer
// builds its whole output and checks once at the end. The data is always NUL-terminated once
// anything (even nothing) was appended, so a text writer's result is a C string.

#include "core/bytes.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tally_bytes_reserve(tally_bytes *b, size_t extra) {
    if (b->failed || (b->data && b->len + extra + 1 <= b->cap)) {
        return;
    }
    size_t cap = b->cap ? b->cap : 256;
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
    b->data[b->len] = '\0';
}

void tally_bytes_append(tally_bytes *b, const void *bytes, size_t n) {
    tally_bytes_reserve(b, n);
    if (b->failed) {
        return;
    }
    if (n > 0) {
        memcpy(b->data + b->len, bytes, n);
    }
    b->len += n;
    b->data[b->len] = '\0';
}

void tally_bytes_printf(tally_bytes *b, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof(small), fmt, args);
    va_end(args);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    tally_bytes_reserve(b, (size_t)n);
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

void tally_bytes_free(tally_bytes *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = 0;
}

/** The length of the well-formed UTF-8 sequence at c (Unicode's table 3-7), or 0. */
static int utf8_sequence_length(const unsigned char *c) {
    int n = 0;
    unsigned lo = 0x80, hi = 0xbf;
    if (c[0] < 0x80) {
        return 1;
    } else if (c[0] >= 0xc2 && c[0] <= 0xdf) {
        n = 1;
    } else if (c[0] >= 0xe0 && c[0] <= 0xef) {
        n = 2;
        lo = c[0] == 0xe0 ? 0xa0 : 0x80;
        hi = c[0] == 0xed ? 0x9f : 0xbf;
    } else if (c[0] >= 0xf0 && c[0] <= 0xf4) {
        n = 3;
        lo = c[0] == 0xf0 ? 0x90 : 0x80;
        hi = c[0] == 0xf4 ? 0x8f : 0xbf;
    } else {
        return 0;
    }
    for (int i = 1; i <= n; i++) {
        if (c[i] < (i == 1 ? lo : 0x80) || c[i] > (i == 1 ? hi : 0xbf)) {
            return 0;  // also stops at the NUL
        }
    }
    return n + 1;
}

void tally_bytes_json_string(tally_bytes *b, const char *s) {
    tally_bytes_printf(b, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c;) {
        const char *escape = *c == '"'    ? "\\\""
                             : *c == '\\' ? "\\\\"
                             : *c == '\n' ? "\\n"
                             : *c == '\t' ? "\\t"
                             : *c == '\r' ? "\\r"
                                          : NULL;
        int n = utf8_sequence_length(c);
        if (escape) {
            tally_bytes_printf(b, "%s", escape);
        } else if (*c < 0x20) {
            tally_bytes_printf(b, "\\u%04x", (unsigned)*c);
        } else if (n == 0) {
            tally_bytes_printf(b, "\\ufffd");
            n = 1;
        } else {
            tally_bytes_printf(b, "%.*s", n, (const char *)c);
        }
        c += n ? n : 1;
    }
    tally_bytes_printf(b, "\"");
}
