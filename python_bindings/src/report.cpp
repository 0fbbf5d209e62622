// The profile exports and report files from Python: tally.profiler.write_pprof / write_folded /
// write_trace and trace_record (the runtime's tally_profiler_write_pprof / _folded / _trace and
// tally_profiler_trace_record), and tally.report_show / tally.report_diff,
// which are tally-report's show and diff (src/driver/ReportFile.h, the same C++ code).

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <filesystem>

#include "driver/ReportFile.h"
#include "tally_python.h"
#include "tally_runtime.h"

namespace tally_python {

namespace {

/** Runs a runtime export call with the GIL released; raises tally.RuntimeError on failure. */
void write_export(int32_t (*write)(void *, const char *), const std::filesystem::path &file) {
    std::string path = file.string();
    int32_t rc;
    std::string message;
    {
        py::gil_scoped_release nogil;
        ErrorCapture capture;
        rc = write(nullptr, path.c_str());
        message = capture.message();
    }
    if (rc != 0) {
        raise_runtime_error(message.empty() ? "cannot write " + path : message, rc);
    }
}

/** Converts tally::ReportError into ValueError (the file, not the library, is at fault). */
template <typename F>
auto reading_reports(F &&f) {
    try {
        return f();
    } catch (const tally::ReportError &e) {
        throw py::value_error(e.what());
    }
}

}  // namespace

void bind_report(py::module_ &m) {
    py::module_ prof = m.attr("profiler").cast<py::module_>();
    prof.def(
        "write_pprof",
        [](const std::filesystem::path &path) { write_export(tally_profiler_write_pprof, path); },
        py::arg("path"),
        R"doc(Writes every pipeline's totals to `path` as a gzipped pprof profile.

Sample types time (ns), samples, alloc_objects, alloc_space, device_alloc_objects and
device_alloc_space; one sample per slot, its stack pipeline -> Func -> copy. Open it with
`go tool pprof`. Raises tally.RuntimeError if the file cannot be written.)doc");
    prof.def(
        "write_folded",
        [](const std::filesystem::path &path) { write_export(tally_profiler_write_folded, path); },
        py::arg("path"),
        R"doc(Writes every pipeline's totals to `path` as folded stacks ('a;b;c N', N in ns), the
input of flame-graph tools. Raises tally.RuntimeError if the file cannot be written.)doc");

    prof.def(
        "write_trace",
        [](const std::filesystem::path &path) { write_export(tally_profiler_write_trace, path); },
        py::arg("path"),
        R"doc(Writes the timeline recorded so far to `path` as Chrome Trace Event JSON (open it in
Perfetto UI, chrome://tracing or speedscope): a process per pipeline, a track per host thread with
a slice per Func and copy activation, a device track with kernels and copies, launch -> kernel
flows, heap and device memory counters. Nothing is recorded unless trace_record(True) (or
TALLY_PROFILE_TRACE) turned recording on. Raises tally.RuntimeError if the file cannot be
written.)doc");
    prof.def(
        "trace_record",
        [](bool on, uint64_t events_per_thread) {
            ErrorCapture capture;
            int32_t rc = tally_profiler_trace_record(nullptr, on ? 1 : 0, events_per_thread);
            if (rc != 0) {
                raise_runtime_error(capture.message(), rc);
            }
        },
        py::arg("on") = true, py::arg("events_per_thread") = 0,
        R"doc(Turns timeline recording on or off (records made so far are kept; reset() forgets
them). events_per_thread (0: unchanged; default 262144) sizes the ring each thread records into from
then on; a full ring overwrites its oldest records and counts them as dropped (otherData of the
trace, and the report). Raises tally.RuntimeError for a size out of range.)doc");

    py::class_<tally::DiffResult>(m, "ReportDiff",
                                  "The result of tally.report_diff: text, failures, passed.")
        .def_readonly("text", &tally::DiffResult::text, "The table tally-report diff prints.")
        .def_readonly("failures", &tally::DiffResult::failures,
                      "One line per threshold crossed (empty when passed).")
        .def_property_readonly("passed", &tally::DiffResult::passed,
                               "True when no threshold was crossed.")
        .def("__bool__", &tally::DiffResult::passed)
        .def("__repr__", [](const tally::DiffResult &r) {
            return "<tally.ReportDiff " + std::string(r.passed() ? "passed" : "failed") + ", " +
                   std::to_string(r.failures.size()) + " failures>";
        });

    m.def(
        "report_show",
        [](const std::filesystem::path &path) {
            return reading_reports(
                [&] { return tally::format_report_text(tally::load_report(path.string())); });
        },
        py::arg("path"),
        R"doc(The text report of a JSON report file (what TALLY_PROFILE_JSON writes), as the runtime
prints it at exit. Raises ValueError naming the file and field if it is not a report.)doc");
    m.def(
        "report_diff",
        [](const std::filesystem::path &base, const std::filesystem::path &now,
           std::optional<double> max_time_regression,
           std::optional<double> max_func_time_regression, std::optional<double> max_sync_increase,
           std::optional<double> max_copy_increase, std::optional<double> max_launch_increase,
           std::optional<double> max_memory_regression) {
            tally::DiffThresholds limits;
            limits.max_time_regression_percent = max_time_regression;
            limits.max_func_time_regression_percent = max_func_time_regression;
            limits.max_sync_increase = max_sync_increase;
            limits.max_copy_increase = max_copy_increase;
            limits.max_launch_increase = max_launch_increase;
            limits.max_memory_regression_percent = max_memory_regression;
            return reading_reports([&] {
                return tally::diff_reports(tally::load_report(base.string()),
                                           tally::load_report(now.string()), limits);
            });
        },
        py::arg("base"), py::arg("new"), py::kw_only(), py::arg("max_time_regression") = py::none(),
        py::arg("max_func_time_regression") = py::none(), py::arg("max_sync_increase") = py::none(),
        py::arg("max_copy_increase") = py::none(), py::arg("max_launch_increase") = py::none(),
        py::arg("max_memory_regression") = py::none(),
        R"doc(Compares two JSON report files as `tally-report diff` does and returns a ReportDiff.

Percent thresholds (max_time_regression, max_func_time_regression, max_memory_regression) are
numbers of percent of the base value; the others are absolute increases per run. A threshold left
None is not checked. Raises ValueError naming the file and field if a file is not a report.)doc");
}

}  // namespace tally_python
