// The CPU-feature rule: a multi-target library's wrapper (src/jit/Multitarget.cpp) runs a
// variant only when the CPU it runs on has every x86 ISA extension that variant's code may use,
// named as LLVM names them ("avx2", "fma", "avx512f", ...: codegen/HostMachine's list for the
// variant's target). A name this file cannot check counts as missing, so an unknown extension
// never runs: the wrapper falls back to a later variant. The answer comes from CPUID, with the
// operating system's XSAVE state for the AVX and AVX-512 registers (XGETBV), read once.

#include "tally_runtime.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

typedef struct {
    const char *name;
    unsigned leaf, subleaf;
    char reg;  // 'b', 'c' or 'd': the CPUID output register holding the bit
    unsigned bit;
    char state;  // registers the OS must save: 0 none, 'y' AVX (YMM), 'z' AVX-512 (ZMM and k)
} cpu_feature_t;

// Bit positions from Intel's SDM, volume 2A (CPUID) and AMD's APM, volume 3 (CPUID Fn8000_0001).
static const cpu_feature_t features[] = {
    {"sse4.1", 1, 0, 'c', 19, 0},       {"sse4.2", 1, 0, 'c', 20, 0},
    {"fma", 1, 0, 'c', 12, 'y'},        {"avx", 1, 0, 'c', 28, 'y'},
    {"f16c", 1, 0, 'c', 29, 'y'},       {"avx2", 7, 0, 'b', 5, 'y'},
    {"avx512f", 7, 0, 'b', 16, 'z'},    {"avx512dq", 7, 0, 'b', 17, 'z'},
    {"avx512ifma", 7, 0, 'b', 21, 'z'}, {"avx512cd", 7, 0, 'b', 28, 'z'},
    {"avx512bw", 7, 0, 'b', 30, 'z'},   {"avx512vl", 7, 0, 'b', 31, 'z'},
    {"avx512vbmi", 7, 0, 'c', 1, 'z'},  {"avx512vnni", 7, 0, 'c', 11, 'z'},
    {"avx512bf16", 7, 1, 'a', 5, 'z'},  {"fma4", 0x80000001u, 0, 'c', 16, 'y'},
};

#if defined(__x86_64__) || defined(__i386__)
static int has(const cpu_feature_t *f) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(f->leaf, f->subleaf, &a, &b, &c, &d)) {
        return 0;  // the leaf is beyond the CPU's maximum
    }
    unsigned r = f->reg == 'a' ? a : f->reg == 'b' ? b : f->reg == 'c' ? c : d;
    if (!((r >> f->bit) & 1)) {
        return 0;
    }
    if (f->state) {
        // OSXSAVE (CPUID.1:ECX bit 27), then XCR0: SSE and AVX state (bits 1, 2), and for
        // AVX-512 the opmask and ZMM state (bits 5, 6, 7).
        if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1)) {
            return 0;
        }
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        unsigned need = f->state == 'z' ? 0xe6u : 0x6u;
        if ((lo & need) != need) {
            return 0;
        }
    }
    return 1;
}
#else
static int has(const cpu_feature_t *f) {
    (void)f;
    return 0;
}
#endif

// One bit per entry of `features`, computed on first use (the answer never changes; a race
// computes it twice, alike).
static int cache_ready;
static unsigned cache_bits;

static unsigned present(void) {
    if (!__atomic_load_n(&cache_ready, __ATOMIC_ACQUIRE)) {
        unsigned bits = 0;
        for (unsigned i = 0; i < sizeof features / sizeof features[0]; i++) {
            bits |= (unsigned)has(&features[i]) << i;
        }
        __atomic_store_n(&cache_bits, bits, __ATOMIC_RELAXED);
        __atomic_store_n(&cache_ready, 1, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&cache_bits, __ATOMIC_RELAXED);
}

int32_t tally_cpu_has_features(const char *names) {
    if (!names) {
        return 0;
    }
    unsigned bits = present();
    const char *p = names;
    while (*p) {
        size_t n = strcspn(p, ",");
        if (n > 0) {
            int found = 0;
            for (unsigned i = 0; i < sizeof features / sizeof features[0]; i++) {
                if (strlen(features[i].name) == n && strncmp(features[i].name, p, n) == 0) {
                    found = 1;
                    if (!((bits >> i) & 1)) {
                        return 0;
                    }
                    break;
                }
            }
            if (!found) {
                return 0;  // an extension this file cannot check: never assumed present
            }
        }
        p += n;
        if (*p == ',') {
            p++;
        }
    }
    return 1;
}
