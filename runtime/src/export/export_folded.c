// The folded-stacks export, the input of flame-graph tools (Brendan Gregg's flamegraph.pl,
// inferno, speedscope): one line per slot with nonzero time,
//
//   <frame>;<frame>[;<frame>] <time in nanoseconds>
//
// the frames being the slot's stack root first (export.h: pipeline ; Func [; copy to device|host]),
// in pipeline registration order and slot order. The tools split frames at ';' and the count at
// the last space, so a ';' inside a name is written as ':' and a line break as a space; other
// characters (spaces included) are kept.

#include "core/bytes.h"
#include "core/error.h"
#include "export/export.h"
#include "tally_runtime.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void append_frame(tally_bytes *t, const char *name) {
    for (const char *c = name; *c; c++) {
        char ch = *c == ';' ? ':' : (*c == '\n' || *c == '\r') ? ' ' : *c;
        tally_bytes_append(t, &ch, 1);
    }
}

int32_t tally_export_folded_format(const tally_export_snapshot *s, char **out, size_t *out_len) {
    tally_bytes t = {NULL, 0, 0, 0};
    tally_bytes_append(&t, "", 0);  // an empty profile is still a string
    for (int32_t i = 0; i < s->num_pipelines; i++) {
        const tally_export_pipeline *p = &s->pipelines[i];
        for (int32_t slot = 0; slot < p->stats.num_slots; slot++) {
            uint64_t ns = p->slots[slot].stats.time_ns;
            if (ns == 0) {
                continue;
            }
            const char *frames[3];
            int32_t depth = tally_export_slot_stack(p, slot, frames);
            for (int32_t f = 0; f < depth; f++) {
                if (f > 0) {
                    tally_bytes_append(&t, ";", 1);
                }
                append_frame(&t, frames[f]);
            }
            char count[32];
            int n = snprintf(count, sizeof(count), " %" PRIu64 "\n", ns);
            tally_bytes_append(&t, count, (size_t)n);
        }
    }
    if (t.failed) {
        free(t.data);
        return TALLY_ERROR_OUT_OF_MEMORY;
    }
    *out = t.data;
    *out_len = t.len;
    return 0;
}

int32_t tally_profiler_write_folded(void *user_context, const char *path) {
    if (!path || !*path) {
        return tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                                  "tally_profiler_write_folded: no path");
    }
    tally_export_snapshot snap;
    int32_t r = tally_export_snapshot_take(&snap);
    char *folded = NULL;
    size_t len = 0;
    if (r == 0) {
        r = tally_export_folded_format(&snap, &folded, &len);
    }
    tally_export_snapshot_free(&snap);
    if (r != 0) {
        return tally_report_error(
            user_context, r, "tally profiler: out of memory formatting folded stacks for %s", path);
    }
    r = tally_export_write_file(user_context, path, folded, len, "folded stacks");
    free(folded);
    return r;
}
