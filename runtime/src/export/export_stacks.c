// The data every profile export reads: a snapshot of the pipelines' totals taken through the
// public stats API, the call stack each slot is shown under, and the file writes they share
// (see export.h for the stack rule, runtime/layers.txt for the exporters' layers).

#include "core/error.h"
#include "export/export.h"
#include "tally_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int32_t tally_export_snapshot_take(tally_export_snapshot *out) {
    memset(out, 0, sizeof(*out));
    int32_t n = tally_profiler_num_pipelines();
    if (n <= 0) {
        return 0;
    }
    out->pipelines = (tally_export_pipeline *)calloc((size_t)n, sizeof(tally_export_pipeline));
    if (!out->pipelines) {
        return TALLY_ERROR_OUT_OF_MEMORY;
    }
    for (int32_t i = 0; i < n; i++) {
        tally_export_pipeline *p = &out->pipelines[i];
        // The registry only grows (until a reset), so an index that is gone means a reset ran:
        // keep what was read before it.
        if (tally_profiler_get_pipeline_stats_by_index(i, &p->stats) != 0) {
            break;
        }
        p->slots =
            (tally_export_slot *)calloc((size_t)p->stats.num_slots + 1, sizeof(tally_export_slot));
        if (!p->slots) {
            tally_export_snapshot_free(out);
            return TALLY_ERROR_OUT_OF_MEMORY;
        }
        out->num_pipelines = i + 1;
        out->runs += p->stats.runs;
        for (int32_t s = 0; s < p->stats.num_slots; s++) {
            if (tally_profiler_get_slot_stats_by_index(i, s, &p->slots[s].stats) != 0) {
                p->stats.num_slots = s;
                break;
            }
        }
    }
    return 0;
}

void tally_export_snapshot_free(tally_export_snapshot *s) {
    for (int32_t i = 0; i < s->num_pipelines; i++) {
        free(s->pipelines[i].slots);
    }
    free(s->pipelines);
    memset(s, 0, sizeof(*s));
}

int32_t tally_export_slot_stack(const tally_export_pipeline *p, int32_t slot,
                                const char *frames[3]) {
    const tally_export_slot *s = &p->slots[slot];
    frames[0] = p->stats.name;
    if (s->stats.kind == TALLY_SLOT_FUNC || s->stats.parent < 0) {
        frames[1] = s->stats.name;
        return 2;
    }
    frames[1] = p->slots[s->stats.parent].stats.name;
    frames[2] = s->stats.kind == TALLY_SLOT_COPY_TO_DEVICE ? "copy to device" : "copy to host";
    return 3;
}

int32_t tally_export_write_file(void *user_context, const char *path, const void *data, size_t len,
                                const char *what) {
    size_t path_len = strlen(path);
    char *tmp = (char *)malloc(path_len + 32);
    if (!tmp) {
        return tally_report_error(user_context, TALLY_ERROR_OUT_OF_MEMORY,
                                  "tally profiler: out of memory writing the %s to %s", what, path);
    }
    snprintf(tmp, path_len + 32, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    int ok = f && fwrite(data, 1, len, f) == len;
    if (f && fclose(f) != 0) {
        ok = 0;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = 0;
    }
    if (!ok) {
        remove(tmp);
    }
    free(tmp);
    if (!ok) {
        return tally_report_error(user_context, TALLY_ERROR_IO,
                                  "tally profiler: cannot write the %s to %s", what, path);
    }
    return 0;
}
