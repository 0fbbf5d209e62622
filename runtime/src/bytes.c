// A growable byte string for the runtime's writers (report.c, the exports): appends that fail
// for want of memory set a sticky `failed` flag instead of returning an error each, so a writer
// builds its whole output and checks once at the end. The data is always NUL-terminated once
// anything (even nothing) was appended, so a text writer's result is a C string.

#include "internal.h"

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
