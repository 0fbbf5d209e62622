// What a slot's name says about it (slots.c), for the code that reads the stats structs (exports,
// warnings). Layer profiler.base (runtime/layers.txt). Not installed. C11.
#ifndef TALLY_RUNTIME_SRC_PROFILER_SLOTS_H
#define TALLY_RUNTIME_SRC_PROFILER_SLOTS_H

#include "tally_runtime.h"

#include <stddef.h>
#include <stdint.h>

/** The Func slot copy slot `slot` belongs to: the compiler names copy slots "<Func> (copy to
 * device)" / "<Func> (copy to host)", so it is the Func slot (other than overhead, slot 0) whose
 * name followed by a space starts the copy slot's name; the longest such name should one Func's
 * name prefix another's. -1 when none does, or when `slot` is not a copy slot. The slots are read
 * as `num_slots` tally_slot_stats `stride` bytes apart (a larger struct may begin with one). */
int32_t tally_copy_slot_owner(const tally_slot_stats *slots, size_t stride, int32_t num_slots,
                              int32_t slot);

#endif  // TALLY_RUNTIME_SRC_PROFILER_SLOTS_H
