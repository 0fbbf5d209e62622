/** \file
 * Profiler reports read back from their JSON (what TALLY_PROFILE_JSON writes), for tally-report
 * and the Python module: loading with checks that name the file and the field at fault, the text
 * report of the loaded numbers (formatted by the runtime, tally_profiler_format_text, so the
 * layout has one home), and the comparison of two reports that CI gates on.
 */
#ifndef TALLY_SRC_DRIVER_REPORTFILE_H
#define TALLY_SRC_DRIVER_REPORTFILE_H

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tally_runtime.h"

namespace tally {

/** A report file that cannot be read or is not a profiler report. what() is
 * `FILE:LINE:COL: error: ...` for JSON syntax errors and `FILE: error: FIELD: ...` for a field
 * that is missing or of the wrong type or range. */
class ReportError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/** One slot of a pipeline: the runtime's tally_slot_stats (its name pointer left NULL: the
 * struct is copied around; `name` owns the name). */
struct SlotReport {
    std::string name;
    tally_slot_stats stats{};
};

/** One pipeline: the runtime's tally_pipeline_stats (its string pointers left NULL, as above)
 * and its slots in slot order. */
struct PipelineReport {
    std::string name, target, clock;  // clock: empty when the report does not record it
    tally_pipeline_stats stats{};
    std::vector<SlotReport> slots;
};

/** A whole report, as read from `path`. */
struct Report {
    std::string path;
    std::vector<PipelineReport> pipelines;
    /** The process's device-wait ledger, where the report has one ("device_waits"). */
    std::optional<tally_device_wait_stats> device_waits;
};

/** Reads and checks the JSON report at `path`. Fields this reader does not know are ignored;
 * abi_version must not be newer than this build's TALLY_RUNTIME_ABI_VERSION. Throws ReportError. */
Report load_report(const std::string &path);

/** The same, from text already read (`path` names it in messages). */
Report parse_report(const std::string &text, const std::string &path);

/** The report's text, as the runtime prints it at exit. Throws ReportError if the runtime rejects
 * the numbers. */
std::string format_report_text(const Report &report);

/** Thresholds of diff_reports; an unset one is not checked. Percentages are of the base value. */
struct DiffThresholds {
    /** Wall time per run of a pipeline. */
    std::optional<double> max_time_regression_percent;
    /** Time per run of any one slot (Func or copy). */
    std::optional<double> max_func_time_regression_percent;
    /** Device syncs (injected + explicit) per run, absolute increase. */
    std::optional<double> max_sync_increase;
    /** Copies (both directions) per run, absolute increase. */
    std::optional<double> max_copy_increase;
    /** Kernel launches per run, absolute increase. */
    std::optional<double> max_launch_increase;
    /** Heap peak and device peak, each. */
    std::optional<double> max_memory_regression_percent;
};

/** What diff_reports found: the table it prints, and one line per threshold crossed (also a
 * pipeline of the base missing from the new report, or one without finished runs). */
struct DiffResult {
    std::string text;
    std::vector<std::string> failures;
    bool passed() const { return failures.empty(); }
};

/** Compares `now` against `base`, pipeline by pipeline (matched by name, in order): per-run
 * numbers (time, syncs, copies, copy bytes, launches) and peaks, then each slot's time per run,
 * with deltas, and checks `limits`. */
DiffResult diff_reports(const Report &base, const Report &now, const DiffThresholds &limits);

}  // namespace tally

#endif  // TALLY_SRC_DRIVER_REPORTFILE_H
