// The one rule for the environment variables the runtime reads, every TALLY_* variable and the
// HL_* variables Halide's runtime also reads (docs/environment.md lists them all):
//   - unset or empty: the variable's default, silently;
//   - a value of the variable's kind, whole and in its range: that value;
//   - anything else (a word where a number goes, a number out of range, trailing characters,
//     a leading space or '+'): the default, and one warning naming the variable, the value, what
//     it expects and what is used instead:
//         tally: warning: TALLY_NUM_THREADS=-3: expected a whole number from 1 to 256; using the
//         number of cores (2)
// Warnings go through tally_print_diagnostic (the print handler where one is installed, else
// stderr), never halide_error: a bad setting does not fail the run that happened to read it.
// Each variable is read once per process by the code that uses it (env.h's callers cache what they
// read), so each bad value is said once. A path (TALLY_PROFILE_JSON, HL_TRACE_FILE, ...) has no
// syntax to check: whether it can be written is said when it is written.

#include "core/env.h"
#include "core/error.h"
#include "tally_runtime.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *tally_env_string(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

void tally_env_reject(const char *name, const char *value, const char *expected,
                      const char *instead) {
    char msg[640];
    snprintf(msg, sizeof msg, "tally: warning: %s=%.200s%s: expected %s; using %s\n", name, value,
             strlen(value) > 200 ? "..." : "", expected, instead);
    tally_print_diagnostic(NULL, msg);
}

// Decimal digits with an optional leading '-' and nothing else; 0 with *out set, or -1.
static int parse_int(const char *s, int64_t *out) {
    size_t digits = s[0] == '-' ? 1 : 0;
    if (s[digits] == '\0' || strspn(s + digits, "0123456789") != strlen(s + digits)) {
        return -1;
    }
    errno = 0;
    long long v = strtoll(s, NULL, 10);
    if (errno == ERANGE) {
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

int64_t tally_env_int(const char *name, int64_t min, int64_t max, int64_t fallback,
                      const char *instead) {
    const char *s = tally_env_string(name);
    int64_t v;
    if (!s) {
        return fallback;
    }
    if (parse_int(s, &v) == 0 && v >= min && v <= max) {
        return v;
    }
    char expected[96];
    snprintf(expected, sizeof expected, "a whole number from %" PRId64 " to %" PRId64, min, max);
    tally_env_reject(name, s, expected, instead);
    return fallback;
}

double tally_env_double(const char *name, double min_exclusive, double max, double fallback,
                        const char *instead) {
    const char *s = tally_env_string(name);
    if (!s) {
        return fallback;
    }
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    const int number = (s[0] == '-' || s[0] == '.' || (s[0] >= '0' && s[0] <= '9')) &&
                       *end == '\0' && errno == 0 && isfinite(v);
    if (number && v > min_exclusive && v <= max) {
        return v;
    }
    char expected[96];
    snprintf(expected, sizeof expected, "a number above %g and at most %g", min_exclusive, max);
    tally_env_reject(name, s, expected, instead);
    return fallback;
}

int tally_env_choice(const char *name, const char *const *words, int n, int fallback,
                     const char *instead) {
    const char *s = tally_env_string(name);
    if (!s) {
        return fallback;
    }
    for (int i = 0; i < n; i++) {
        if (strcmp(s, words[i]) == 0) {
            return i;
        }
    }
    char expected[256] = "";
    for (int i = 0; i < n; i++) {
        size_t used = strlen(expected);
        snprintf(expected + used, sizeof expected - used, "%s%s",
                 i == 0      ? ""
                 : i + 1 < n ? ", "
                             : " or ",
                 words[i]);
    }
    tally_env_reject(name, s, expected, instead);
    return fallback;
}

int32_t tally_env_flag(const char *name) {
    static const char *const words[] = {"1", "true", "yes", "on", "0", "false", "no", "off"};
    const int n = (int)(sizeof words / sizeof words[0]);
    return tally_env_choice(name, words, n, n - 1, "off") < n / 2;
}
