// Declarations shared by the profile exporters (export_*.c). Not installed, not seen by generated
// code. C11.
//
// The exporters sit above the profiler: they read the pipelines' totals through the public stats
// API of tally_runtime.h (tally_profiler_get_pipeline_stats_by_index and
// tally_profiler_get_slot_stats_by_index), never the registry itself, and nothing below them
// calls them except lifetime.c at exit (tally_export_at_exit). Their layers (export.snapshot,
// export.formats, export.writers) are declared in runtime/layers.txt, with what each file does.
//
// The stack of a slot, root first, is the same in every export:
//   - a Func slot (overhead included):          pipeline ; Func
//   - a copy slot that belongs to a Func slot (its stats' parent, which the compiled pipeline
//     passed to tally_profiler_start):
//                                                pipeline ; Func ; copy to device|copy to host
//   - any other copy slot:                       pipeline ; <copy slot name>
#ifndef TALLY_RUNTIME_SRC_EXPORT_EXPORT_H
#define TALLY_RUNTIME_SRC_EXPORT_EXPORT_H

#include "tally_runtime.h"

#include <stddef.h>
#include <stdint.h>

/** One slot of a snapshot (its stats' parent is the Func slot a copy slot belongs to, else -1). */
typedef struct tally_export_slot {
    tally_slot_stats stats;
} tally_export_slot;

/** One pipeline of a snapshot: its totals and its slots in slot order. */
typedef struct tally_export_pipeline {
    tally_pipeline_stats stats;
    tally_export_slot *slots;
} tally_export_pipeline;

/** The totals of every pipeline, read at one moment (pipeline by pipeline: a run ending while the
 * snapshot is taken may be counted in one pipeline's numbers and not yet in the next one's). The
 * names point into the registry: a snapshot must not outlive a tally_profiler_reset. */
typedef struct tally_export_snapshot {
    int32_t num_pipelines;
    tally_export_pipeline *pipelines;
    /** Sum of the pipelines' runs. */
    uint64_t runs;
} tally_export_snapshot;

/** Takes a snapshot of the registry. Returns 0 or TALLY_ERROR_OUT_OF_MEMORY (nothing to free). */
int32_t tally_export_snapshot_take(tally_export_snapshot *out);

/** Frees what tally_export_snapshot_take allocated. */
void tally_export_snapshot_free(tally_export_snapshot *s);

/** Fills frames[0..n) with the names of the slot's stack, root first (see above), and returns n
 * (2 or 3). The strings are the snapshot's or static. */
int32_t tally_export_slot_stack(const tally_export_pipeline *p, int32_t slot,
                                const char *frames[3]);

/** Writes len bytes to path through a temporary file in the same directory renamed over it, so a
 * reader never sees half a file. Returns 0, or TALLY_ERROR_IO after reporting what failed. */
int32_t tally_export_write_file(void *user_context, const char *path, const void *data, size_t len,
                                const char *what);

/** Encodes the snapshot as a gzipped pprof profile into a malloc'ed buffer (*out, *out_len).
 * Returns 0, TALLY_ERROR_OUT_OF_MEMORY or TALLY_ERROR_GENERIC (zlib failed). */
int32_t tally_export_pprof_encode(const tally_export_snapshot *s, uint8_t **out, size_t *out_len);

/** Formats the snapshot as folded stacks into a malloc'ed NUL-terminated string (*out, *out_len
 * without the NUL). Returns 0 or TALLY_ERROR_OUT_OF_MEMORY. */
int32_t tally_export_folded_format(const tally_export_snapshot *s, char **out, size_t *out_len);

/** Formats what the timeline recorder holds as Chrome Trace Event JSON into a malloc'ed
 * NUL-terminated string (*out, *out_len without the NUL). Returns 0 or TALLY_ERROR_OUT_OF_MEMORY.
 */
int32_t tally_export_trace_format(char **out, size_t *out_len);

/** Writes the exports named by TALLY_PROFILE_PPROF, TALLY_PROFILE_FOLDED and TALLY_PROFILE_TRACE,
 * when at least one profiled run finished. Returns 0 or the first failure's code (each reported
 * through halide_error); every export is attempted. Called by lifetime.c, after the report. */
int32_t tally_export_at_exit(void *user_context);

/** Starts the continuous pprof writer if TALLY_PROFILE_PPROF_EVERY asks for it (once per process;
 * lifetime.c calls it when a profiled run starts). Bad settings are reported, and leave it off. */
void tally_export_continuous_start(void);

/** Stops the writer and writes the last window (lifetime.c, at exit). No-op when it is off. */
void tally_export_continuous_stop(void);

/** After fork, in the child: the writer is off (its thread stays with the parent). */
void tally_export_continuous_fork_child(void);

#endif  // TALLY_RUNTIME_SRC_EXPORT_EXPORT_H
