// What a slot's name says about it (slots.h): the one place that reads the compiler's naming of
// copy slots.

#include "profiler/slots.h"
#include "tally_runtime.h"

#include <string.h>

static const tally_slot_stats *slot_at(const tally_slot_stats *slots, size_t stride, int32_t i) {
    return (const tally_slot_stats *)((const char *)slots + (size_t)i * stride);
}

int32_t tally_copy_slot_owner(const tally_slot_stats *slots, size_t stride, int32_t num_slots,
                              int32_t slot) {
    const tally_slot_stats *copy = slot_at(slots, stride, slot);
    if (copy->kind == TALLY_SLOT_FUNC || !copy->name) {
        return -1;
    }
    int32_t best = -1;
    size_t best_len = 0;
    for (int32_t s = 1; s < num_slots; s++) {
        const tally_slot_stats *f = slot_at(slots, stride, s);
        if (f->kind != TALLY_SLOT_FUNC || !f->name) {
            continue;
        }
        size_t len = strlen(f->name);
        if (len > best_len && strncmp(copy->name, f->name, len) == 0 && copy->name[len] == ' ') {
            best = s;
            best_len = len;
        }
    }
    return best;
}
