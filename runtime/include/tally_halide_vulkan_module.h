/* Halide 21's Vulkan kernel module: the bytes its CodeGen_Vulkan_Dev::encode_module writes and
 * its lowered host code embeds as `vulkan_gpu_source_kernels`, read by Tally's text parser (how
 * long the printed module is) and its runtime (halide_vulkan_initialize_kernels: its kernels).
 * Header-only C, so that both read it by one rule.
 *
 * The module, in little-endian 32-bit words: the number of kernels; per kernel the size in bytes
 * of its kernel module, its entry point's name length in words (strlen / 4 + 1: at least one NUL)
 * and the name, NUL-padded; then the kernel modules, back to back, each a binding header
 * (tally_hvk_read_header) followed by SPIR-V. */

#ifndef TALLY_RUNTIME_INCLUDE_TALLY_HALIDE_VULKAN_MODULE_H
#define TALLY_RUNTIME_INCLUDE_TALLY_HALIDE_VULKAN_MODULE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The most kernels a module may hold (a larger count is not Halide's). */
#define TALLY_HVK_MAX_KERNELS 65536

/** One kernel of a module: its entry point's name (NUL-terminated, inside the module) and its
 * kernel module (binding header and SPIR-V). */
typedef struct tally_hvk_kernel {
    const char *name;
    const uint8_t *code;
    uint32_t code_size;
} tally_hvk_kernel;

static inline uint32_t tally_hvk_word(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/** Reads the table at the start of bytes[0, size): returns the number of kernels and sets
 * *table_bytes to the table's length and *module_bytes to the kernel modules' after it, which
 * may run past `size` (the caller checks that it has them); fills kernels[0, count) when
 * `kernels` is not NULL and they do not. On a table that is not Halide's, returns 0 with the
 * reason in why[0, why_size), naming `holder` (what holds the bytes, "the text") where the bytes
 * run out. */
static inline uint32_t tally_hvk_read_module(const uint8_t *bytes, size_t size, size_t *table_bytes,
                                             uint64_t *module_bytes, tally_hvk_kernel *kernels,
                                             const char *holder, char *why, size_t why_size) {
    size_t off = 0;
    if (size < 4) {
        snprintf(why, why_size, "%s ends inside the kernel count", holder);
        return 0;
    }
    const uint32_t count = tally_hvk_word(bytes);
    off = 4;
    if (count == 0 || count > TALLY_HVK_MAX_KERNELS) {
        snprintf(why, why_size, "a kernel count of %u", count);
        return 0;
    }
    uint64_t modules = 0;
    for (uint32_t k = 0; k < count; k++) {
        if (size - off < 8) {
            snprintf(why, why_size, "%s ends inside kernel %u's size and name length", holder, k);
            return 0;
        }
        const uint32_t bytes_k = tally_hvk_word(bytes + off);
        const uint32_t name_words = tally_hvk_word(bytes + off + 4);
        off += 8;
        if (bytes_k % 4 != 0 || name_words == 0 || (uint64_t)name_words * 4 > size - off ||
            bytes[off + (size_t)name_words * 4 - 1] != 0) {
            snprintf(why, why_size,
                     "kernel %u has a size of %u bytes and a name of %u words, which %s does not "
                     "hold",
                     k, bytes_k, name_words, holder);
            return 0;
        }
        off += (size_t)name_words * 4;
        modules += bytes_k;
    }
    *table_bytes = off;
    *module_bytes = modules;
    if (!kernels || modules > size - off) {
        return count;
    }
    size_t name_at = 4, code_at = off;
    for (uint32_t k = 0; k < count; k++) {
        const uint32_t bytes_k = tally_hvk_word(bytes + name_at);
        const uint32_t name_words = tally_hvk_word(bytes + name_at + 4);
        kernels[k].name = (const char *)(bytes + name_at + 8);
        kernels[k].code = bytes + code_at;
        kernels[k].code_size = bytes_k;
        name_at += 8 + (size_t)name_words * 4;
        code_at += bytes_k;
    }
    return count;
}

/** A kernel module's binding header, as Halide 21's SPIRV_Emitter::encode_header writes it:
 * its length in words (this word included: the SPIR-V starts after it), the number of
 * descriptor sets (1: each kernel module holds one entry point), and for the set: the entry
 * point's name (length in words, then the words), the number of uniform buffers (1 when the
 * kernel has scalar arguments: they are packed into it, in the launch's order, without padding),
 * the number of storage buffers, the specialization constants (count; each a name, its
 * constant id and its size in bytes), the shared memory allocations (count; each a name, the
 * id of the constant that sizes it, 0 when its size is fixed, its element size and its
 * element count) and the constant ids of the work group's x, y and z sizes (0 when the SPIR-V
 * fixes them). Bindings of set 0: the uniform buffer at 0 when there is one, then the storage
 * buffers, in argument order. */
typedef struct tally_hvk_header {
    uint32_t header_words;
    uint32_t uniform_buffers;
    uint32_t storage_buffers;
    uint32_t local_size_ids[3];
    /* The one shared allocation sized at launch (its constant id, element size), if any; the
     * bytes of the fixed ones. */
    uint32_t dynamic_shared_id, dynamic_shared_elem_bytes;
    uint64_t static_shared_bytes;
    /* Every specialization constant id the header declares (at most 16 are kept). */
    uint32_t num_constants;
    uint32_t constant_ids[16];
    const uint32_t *spirv; /* into the kernel module: 4-byte aligned when the module is */
    size_t spirv_bytes;
} tally_hvk_header;

/* Reads words of a binding header in order; the first failure sticks (ok 0, why written). */
typedef struct tally_hvk_reader {
    const uint8_t *code;
    size_t size, off;
    int ok;
    char *why;
    size_t why_size;
} tally_hvk_reader;

static inline uint32_t tally_hvk_next(tally_hvk_reader *r, const char *what) {
    if (r->ok && r->size - r->off < 4) {
        snprintf(r->why, r->why_size, "its binding header ends inside %s", what);
        r->ok = 0;
    }
    if (!r->ok) {
        return 0;
    }
    r->off += 4;
    return tally_hvk_word(r->code + r->off - 4);
}

static inline void tally_hvk_skip_name(tally_hvk_reader *r, const char *what) {
    const uint32_t words = tally_hvk_next(r, what);
    if (r->ok && (uint64_t)words * 4 > r->size - r->off) {
        snprintf(r->why, r->why_size, "its binding header ends inside %s", what);
        r->ok = 0;
    }
    r->off += r->ok ? (size_t)words * 4 : 0;
}

/** Reads the binding header of a kernel module (code[0, size)): returns 1 and fills *h, or 0
 * with the reason in why[0, why_size). */
static inline int tally_hvk_read_header(const uint8_t *code, size_t size, tally_hvk_header *h,
                                        char *why, size_t why_size) {
    memset(h, 0, sizeof(*h));
    tally_hvk_reader r = {code, size, 0, 1, why, why_size};
    h->header_words = tally_hvk_next(&r, "its length");
    const uint32_t sets = tally_hvk_next(&r, "the descriptor set count");
    if (r.ok && sets != 1) {
        snprintf(why, why_size, "%u descriptor sets (Halide 21 writes one per kernel module)",
                 sets);
        return 0;
    }
    tally_hvk_skip_name(&r, "the entry point's name");
    h->uniform_buffers = tally_hvk_next(&r, "the uniform buffer count");
    h->storage_buffers = tally_hvk_next(&r, "the storage buffer count");
    if (r.ok && h->uniform_buffers > 1) {
        snprintf(why, why_size, "%u uniform buffers (Halide 21 packs the scalars into one)",
                 h->uniform_buffers);
        return 0;
    }
    const uint32_t constants = tally_hvk_next(&r, "the specialization constant count");
    for (uint32_t i = 0; r.ok && i < constants; i++) {
        tally_hvk_skip_name(&r, "a specialization constant's name");
        const uint32_t id = tally_hvk_next(&r, "a specialization constant's id");
        const uint32_t bytes = tally_hvk_next(&r, "a specialization constant's size");
        if (r.ok && (bytes != 4 || h->num_constants == 16)) {
            snprintf(why, why_size,
                     "specialization constant %u of %u bytes (4-byte constants, 16 at most)", id,
                     bytes);
            return 0;
        }
        if (r.ok) {
            h->constant_ids[h->num_constants++] = id;
        }
    }
    const uint32_t shared = tally_hvk_next(&r, "the shared allocation count");
    for (uint32_t i = 0; r.ok && i < shared; i++) {
        tally_hvk_skip_name(&r, "a shared allocation's name");
        const uint32_t id = tally_hvk_next(&r, "a shared allocation's constant id");
        const uint32_t elem = tally_hvk_next(&r, "a shared allocation's element size");
        const uint32_t count = tally_hvk_next(&r, "a shared allocation's size");
        if (r.ok && id == 0) {
            h->static_shared_bytes += (uint64_t)elem * count;
        } else if (r.ok && (h->dynamic_shared_id != 0 || elem == 0)) {
            snprintf(why, why_size,
                     "shared allocations sized at launch: more than one, or one of %u-byte "
                     "elements",
                     elem);
            return 0;
        } else if (r.ok) {
            h->dynamic_shared_id = id;
            h->dynamic_shared_elem_bytes = elem;
        }
    }
    for (int d = 0; d < 3; d++) {
        h->local_size_ids[d] = tally_hvk_next(&r, "the work group size's constant ids");
    }
    if (!r.ok) {
        return 0;
    }
    if ((uint64_t)h->header_words * 4 != r.off || r.off >= size || (size - r.off) % 4 != 0 ||
        tally_hvk_word(code + r.off) != 0x07230203u) {
        snprintf(why, why_size,
                 "its binding header of %u words is not followed by SPIR-V (the header read "
                 "takes %zu bytes of the kernel module's %zu)",
                 h->header_words, r.off, size);
        return 0;
    }
    h->spirv = (const uint32_t *)(const void *)(code + r.off);
    h->spirv_bytes = size - r.off;
    return 1;
}

#ifdef __cplusplus
}
#endif

#endif /* TALLY_RUNTIME_INCLUDE_TALLY_HALIDE_VULKAN_MODULE_H */
