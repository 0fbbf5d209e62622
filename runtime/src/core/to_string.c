// Halide 14's text primitives: what generated code's `stringify` (print, print_when, require,
// -debug messages) and Halide's tracing build their text with. Each appends to [dst, end) and
// returns the new end of the text, always NUL-terminated when there was room for anything; a
// text that does not fit is cut at end - 1. The formats are Halide's, character for character:
// integers in decimal, pointers in lowercase hex with no leading zeros (`0x0` for NULL), and
// floating-point numbers by Halide's own algorithm rather than printf's, because its scientific
// form differs from printf's in the last digit (below).

#include "tally_runtime.h"

#include <string.h>

char *halide_string_to_string(char *dst, char *end, const char *arg) {
    if (dst >= end) {
        return dst;
    }
    if (arg == NULL) {
        arg = "<nullptr>";
    }
    // Byte by byte: the pieces are a few bytes each (a trace line is ten of them), where a
    // strlen and a memcpy call cost more than the copy (callgrind: 58 % of a trace event).
    char *const last = end - 1;
    while (dst < last && *arg) {
        *dst++ = *arg++;
    }
    *dst = '\0';
    return dst;
}

char *halide_uint64_to_string(char *dst, char *end, uint64_t arg, int min_digits) {
    char digits[32];
    char *p = digits + sizeof(digits) - 1;
    *p = '\0';
    for (int i = 0; (i < min_digits || arg != 0) && p > digits; i++) {
        *--p = (char)('0' + arg % 10);
        arg /= 10;
    }
    return halide_string_to_string(dst, end, p);
}

char *halide_int64_to_string(char *dst, char *end, int64_t arg, int min_digits) {
    uint64_t magnitude = (uint64_t)arg;
    if (arg < 0) {
        dst = halide_string_to_string(dst, end, "-");
        magnitude = 0 - magnitude;  // INT64_MIN's magnitude, without signed overflow
    }
    return halide_uint64_to_string(dst, end, magnitude, min_digits);
}

char *halide_pointer_to_string(char *dst, char *end, const void *arg) {
    static const char hex[] = "0123456789abcdef";
    char text[20];
    char *p = text + sizeof(text) - 1;
    *p = '\0';
    uintptr_t bits = (uintptr_t)arg;
    do {
        *--p = hex[bits & 15];
        bits >>= 4;
    } while (bits != 0);
    *--p = 'x';
    *--p = '0';
    return halide_string_to_string(dst, end, p);
}

// Scientific: Halide normalizes the magnitude into [1, 10) by repeated multiplication or division
// by 10 in double arithmetic (which can be off by an ulp from the exact scaling), then rounds
// half up to 6 decimals. That is not what printf's %e computes, so it is done the same way here.
static char *scientific_to_string(char *dst, char *end, double arg) {
    int exponent = 0;
    while (arg < 1) {
        arg *= 10;
        exponent--;
    }
    while (arg >= 10) {
        arg /= 10;
        exponent++;
    }
    const uint64_t scale = 1000000;
    uint64_t fixed = (uint64_t)(arg * (double)scale + 0.5);
    uint64_t top = fixed / scale;
    dst = halide_uint64_to_string(dst, end, top, 1);
    dst = halide_string_to_string(dst, end, ".");
    dst = halide_uint64_to_string(dst, end, fixed - top * scale, 6);
    dst = halide_string_to_string(dst, end, exponent >= 0 ? "e+" : "e-");
    return halide_uint64_to_string(dst, end, (uint64_t)(exponent >= 0 ? exponent : -exponent), 2);
}

// Fixed: the integer part exactly (every digit, no exponent), the fraction rounded to 6 decimals
// half to even, as glibc's %f; subnormals print as 0.000000, as in Halide.
static char *fixed_to_string(char *dst, char *end, uint64_t mantissa, int biased_exponent) {
    if (biased_exponent == 0) {
        return halide_string_to_string(dst, end, "0.000000");
    }
    const uint64_t scale = 1000000;
    uint64_t n = mantissa | ((uint64_t)1 << 52);
    int exponent = biased_exponent - 1023 - 52;  // the value is n * 2^exponent
    uint64_t integer = n;
    int integer_shift = exponent > 0 ? exponent : 0;  // integer * 2^integer_shift
    uint64_t fraction = 0;
    if (exponent < 0) {
        // The fraction's bits, f / 2^-exponent, times 10^6: exact in double for the fraction bits
        // a double has (f < 2^53 and the scaling is by 10^6 * 2^exponent, built exactly).
        double f;
        if (exponent < -52) {
            integer = 0;
            f = (double)n;
        } else {
            integer = n >> -exponent;
            f = (double)(n - (integer << -exponent));
        }
        double scaled = f * ((double)scale * __builtin_ldexp(1.0, exponent)) + 0.5;
        fraction = (uint64_t)scaled;
        if ((double)fraction == scaled && (fraction & 1)) {
            fraction--;  // exactly half way: to even
        }
        if (fraction == scale) {
            fraction = 0;
            integer++;
        }
    }
    // integer * 2^integer_shift in decimal: its digits, doubled integer_shift times.
    char digits[400];
    char *last = digits + sizeof(digits) - 1;
    *last = '\0';
    char *first = last;
    do {
        *--first = (char)('0' + integer % 10);
        integer /= 10;
    } while (integer != 0);
    for (int i = 0; i < integer_shift; i++) {
        int carry = 0;
        for (char *p = last - 1; p >= first; p--) {
            int d = (*p - '0') * 2 + carry;
            carry = d >= 10;
            *p = (char)('0' + d - (carry ? 10 : 0));
        }
        if (carry) {
            *--first = '1';
        }
    }
    dst = halide_string_to_string(dst, end, first);
    dst = halide_string_to_string(dst, end, ".");
    return halide_uint64_to_string(dst, end, fraction, 6);
}

char *halide_double_to_string(char *dst, char *end, double arg, int scientific) {
    uint64_t bits;
    memcpy(&bits, &arg, sizeof(bits));
    const uint64_t mantissa = bits & (((uint64_t)1 << 52) - 1);
    const int biased_exponent = (int)((bits >> 52) & 2047);
    const int negative = (int)(bits >> 63);
    if (biased_exponent == 2047) {
        const char *name = mantissa ? "nan" : "inf";
        if (negative) {
            dst = halide_string_to_string(dst, end, "-");
        }
        return halide_string_to_string(dst, end, name);
    }
    if (negative) {
        dst = halide_string_to_string(dst, end, "-");
        arg = -arg;
    }
    if (biased_exponent == 0 && mantissa == 0) {
        return halide_string_to_string(dst, end, scientific ? "0.000000e+00" : "0.000000");
    }
    return scientific ? scientific_to_string(dst, end, arg)
                      : fixed_to_string(dst, end, mantissa, biased_exponent);
}
