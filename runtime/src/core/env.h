// The one rule for the environment variables the runtime reads (env.c): every TALLY_* variable and
// the HL_* variables Halide's runtime also reads. Layer core (runtime/layers.txt). Not installed,
// not seen by generated code. C11.
#ifndef TALLY_RUNTIME_SRC_CORE_ENV_H
#define TALLY_RUNTIME_SRC_CORE_ENV_H

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

// The variable's value, or NULL when it is unset or empty (an empty value is the same as none).
const char *tally_env_string(const char *name);

// Says once, as a warning, that the variable's value is not what it takes:
// "tally: warning: NAME=VALUE: expected EXPECTED; using INSTEAD". For variables with a syntax of
// their own (TALLY_FAULT's <op>[:<n>], HL_OCL_DEVICE_TYPE's list), whose parsers live with them.
void tally_env_reject(const char *name, const char *value, const char *expected,
                      const char *instead);

// A whole decimal number in [min, max]: digits with an optional leading '-' and nothing else
// (no spaces, no '+', no suffix). Unset: `fallback`, silently; anything else: `fallback`, said
// with `instead` (how a person would name the fallback: "1000", "the number of cores").
int64_t tally_env_int(const char *name, int64_t min, int64_t max, int64_t fallback,
                      const char *instead);

// A decimal number (strtod's syntax, finite, nothing after it) in (min_exclusive, max].
double tally_env_double(const char *name, double min_exclusive, double max, double fallback,
                        const char *instead);

// One of `n` words (exact match); the word's index, or `fallback` (unset: silently).
int tally_env_choice(const char *name, const char *const *words, int n, int fallback,
                     const char *instead);

#pragma GCC visibility pop

// On or off, tally_env_flag (tally_runtime.h: public, since the compiler library reads its own
// on/off variables by the same rule).

#endif  // TALLY_RUNTIME_SRC_CORE_ENV_H
