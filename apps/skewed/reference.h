/** \file
 * Plain C++ reference for apps/skewed/skewed.stmt: xorshift rounds in three stages.
 */
#ifndef TALLY_APPS_SKEWED_REFERENCE_H
#define TALLY_APPS_SKEWED_REFERENCE_H

#include <cstdint>

namespace tally_apps {

/** output(i) = xorshift32 applied 7 * reps times (reps + 5 * reps + reps) to input(i). */
void skewed_reference(const uint32_t *input, uint32_t *output, int n, int reps);

}  // namespace tally_apps

#endif  // TALLY_APPS_SKEWED_REFERENCE_H
