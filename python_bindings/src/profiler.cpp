// tally.profiler: the runtime's sampling profiler seen from Python.
//
// report() returns the text (or JSON) report the runtime prints at exit. stats() returns the same
// numbers as dictionaries, with the JSON report's key names, so that code can move between the
// two: per pipeline the header fields, the slots in slot order, and the three report sections
// (funcs, copies to device, copies to host) as name -> slot dictionaries in slot order. The
// numbers are read through tally_profiler_get_pipeline_stats_by_index and
// tally_profiler_get_slot_stats_by_index; runs that finish while stats() reads may make a
// pipeline's header and slots disagree by that run, so read them when no pipeline is running.

#include <pybind11/stl.h>

#include "tally_python.h"
#include "tally_runtime.h"

namespace tally_python {

namespace {

const char *const section_names[3] = {"funcs", "copies to device", "copies to host"};
const char *const kind_names[3] = {"func", "copy_to_device", "copy_to_host"};

std::string report(bool json) {
    std::string s;
    int32_t error = 0;
    {
        py::gil_scoped_release nogil;
        // The report can grow between sizing and writing (a run ends meanwhile): retry until it
        // fits.
        for (;;) {
            int32_t n = tally_profiler_report_to_buffer(nullptr, 0, json ? 1 : 0);
            if (n < 0) {
                error = n;
                break;
            }
            s.assign(size_t(n) + 1, '\0');
            int32_t m = tally_profiler_report_to_buffer(&s[0], s.size(), json ? 1 : 0);
            if (m < 0) {
                error = m;
                break;
            }
            if (m <= n) {
                s.resize(size_t(m));
                break;
            }
        }
    }
    if (error) {
        raise_runtime_error("tally_profiler_report_to_buffer failed", error);
    }
    return s;
}

py::dict memory_dict(const tally_memory_stats &m) {
    py::dict d;
    d["current"] = m.current;
    d["peak"] = m.peak;
    d["allocs"] = m.num_allocs;
    d["bytes"] = m.total_bytes;
    return d;
}

py::dict slot_dict(const tally_slot_stats &s) {
    py::dict d;
    d["id"] = s.slot;
    d["name"] = s.name ? s.name : "";
    d["kind"] = s.kind >= 0 && s.kind < 3 ? kind_names[s.kind] : "unknown";
    d["parent"] = s.parent;
    d["time_ns"] = s.time_ns;
    d["time_ms"] = double(s.time_ns) / 1e6;
    d["percent"] = s.percent;
    d["samples"] = s.samples;
    d["average_threads"] = s.average_threads;
    d["copies"] = s.copies;
    d["copy_bytes"] = s.copy_bytes;
    d["heap"] = memory_dict(s.heap);
    d["device"] = memory_dict(s.device);
    return d;
}

/** The report's warnings on these numbers, as the JSON report lists them. */
py::list warning_list(const tally_pipeline_stats &p, const std::vector<tally_slot_stats> &slots) {
    int32_t n = tally_profiler_check_warnings(&p, slots.data(), nullptr, 0);
    std::vector<tally_warning> w(size_t(n > 0 ? n : 0));
    if (n > 0) {
        tally_profiler_check_warnings(&p, slots.data(), w.data(), n);
    }
    py::list out;
    for (const tally_warning &x : w) {
        py::dict d;
        d["kind"] = tally_warning_kind_name(x.kind);
        d["slot"] = x.slot;
        d["value"] = x.value;
        d["threshold"] = x.threshold;
        d["message"] = std::string(x.message);
        out.append(d);
    }
    return out;
}

/** One pipeline's numbers; raises RuntimeError if the registry changed under us (reset). */
py::dict pipeline_dict(int32_t index) {
    tally_pipeline_stats p;
    int32_t r = tally_profiler_get_pipeline_stats_by_index(index, &p);
    if (r != 0) {
        raise_runtime_error("tally_profiler_get_pipeline_stats_by_index failed", r);
    }
    py::dict d;
    d["name"] = p.name ? p.name : "";
    d["target"] = p.target ? p.target : "";
    d["runs"] = p.runs;
    d["total_ns"] = p.total_ns;
    d["total_ms"] = double(p.total_ns) / 1e6;
    d["time_per_run_ms"] = p.runs ? double(p.total_ns) / 1e6 / double(p.runs) : 0.0;
    d["samples"] = p.samples;
    d["average_threads"] = p.average_threads;
    d["heap_peak_bytes"] = p.heap_peak;
    d["device_peak_bytes"] = p.device_peak;
    d["kernel_launches"] = p.kernel_launches;
    d["injected_syncs"] = p.injected_syncs;
    d["explicit_syncs"] = p.explicit_syncs;
    d["copies_to_device"] = p.copies_to_device;
    d["copies_to_device_bytes"] = p.copies_to_device_bytes;
    d["copies_to_host"] = p.copies_to_host;
    d["copies_to_host_bytes"] = p.copies_to_host_bytes;
    d["num_slots"] = p.num_slots;
    d["flags"] = p.flags;
    d["profile_by_timer"] = (p.flags & TALLY_PROFILER_FLAG_TIMER) != 0;
    d["mode"] = tally_profiler_mode_name(p.flags);
    d["clock"] = tally_profiler_clock_name();
    const char *const one_time_keys[2] = {"device_init_ns", "kernel_compile_ns"};
    for (int32_t k = 0; k < 2; k++) {
        uint64_t ns = 0;
        r = tally_profiler_get_one_time_ns_by_index(index, k, &ns);
        if (r != 0) {
            raise_runtime_error("tally_profiler_get_one_time_ns_by_index failed", r);
        }
        d[one_time_keys[k]] = ns;
    }
    py::list slots;
    py::dict sections[3];
    std::vector<tally_slot_stats> all(size_t(p.num_slots));
    for (int32_t s = 0; s < p.num_slots; s++) {
        tally_slot_stats &ss = all[size_t(s)];
        r = tally_profiler_get_slot_stats_by_index(index, s, &ss);
        if (r != 0) {
            raise_runtime_error("tally_profiler_get_slot_stats_by_index failed", r);
        }
        py::dict sd = slot_dict(ss);
        double ci95 = -1.0;
        r = tally_profiler_get_slot_ci95_by_index(index, s, &ci95);
        if (r != 0) {
            raise_runtime_error("tally_profiler_get_slot_ci95_by_index failed", r);
        }
        if (ci95 >= 0) {
            sd["ci95_pp"] = ci95;  // sampled pipelines only, as in the JSON report
        }
        slots.append(sd);
        if (ss.kind >= 0 && ss.kind < 3) {
            sections[ss.kind][sd["name"]] = sd;
        }
    }
    d["slots"] = slots;
    py::dict secs;
    for (int k = 0; k < 3; k++) {
        secs[section_names[k]] = sections[k];
    }
    d["sections"] = secs;
    d["warnings"] = warning_list(p, all);
    return d;
}

py::dict stats() {
    py::dict out;
    int32_t n = tally_profiler_num_pipelines();
    for (int32_t i = 0; i < n; i++) {
        py::dict p = pipeline_dict(i);
        std::string key = p["name"].cast<std::string>();
        // Pipelines sharing a name (different slot layouts) keep registration order: name, name#2.
        for (int k = 2; out.contains(key); k++) {
            key = p["name"].cast<std::string>() + "#" + std::to_string(k);
        }
        out[py::str(key)] = p;
    }
    return out;
}

}  // namespace

void bind_profiler(py::module_ &m) {
    py::module_ prof = m.def_submodule("profiler", R"doc(The sampling profiler's numbers and report.

Pipelines compiled for a '-profile' target record into a process-wide registry: per pipeline,
totals over its finished runs. The runtime also prints the text report to stderr when the process
exits (TALLY_PROFILE_OUTPUT, TALLY_PROFILE_JSON and TALLY_PROFILE_INTERVAL_US configure it).)doc");
    prof.def("report", &report, py::arg("json") = false,
             R"doc(The report of every pipeline, as the runtime prints it at exit.

Args:
    json: False for the text report (header, then the sections funcs, copies to device and copies
        to host), True for the same numbers as JSON.)doc");
    prof.def("stats", &stats, R"doc(Every number of the report, as dictionaries.

Returns {pipeline name: pipeline}; a second pipeline with the same name (another slot layout) is
keyed 'name#2'. A pipeline is a dict with the JSON report's keys: name, target, runs, total_ns,
total_ms, time_per_run_ms, samples, average_threads, heap_peak_bytes, device_peak_bytes,
kernel_launches, injected_syncs, explicit_syncs, copies_to_device, copies_to_device_bytes,
copies_to_host, copies_to_host_bytes, num_slots, flags, profile_by_timer, mode ('exact',
'sampling' or 'timer'), clock, device_init_ns, kernel_compile_ns; 'warnings', the report's
warnings (dicts: kind, slot, value, threshold, message); 'slots', the list of
slots in slot order; and 'sections', {'funcs': {...}, 'copies to device': {...},
'copies to host': {...}}, each mapping slot name to slot in slot order. A slot is a dict: id,
name, kind ('func', 'copy_to_device', 'copy_to_host'), time_ns, time_ms, percent, samples,
average_threads, copies, copy_bytes, ci95_pp (sampling modes: the half-width of the share's 95 %
interval, in percentage points), and heap / device: {current, peak, allocs, bytes}.

    s = tally.profiler.stats()["blur"]
    s["runs"], s["sections"]["funcs"]["blur_x"]["time_ms"]
)doc");
    prof.def(
        "reset", [] { tally_profiler_reset(); },
        "Forgets every pipeline's totals (runs in flight are dropped when they end).");
    prof.def(
        "set_interval_us", [](uint32_t us) { tally_profiler_set_interval_us(us); }, py::arg("us"),
        "Sets the sampling interval in microseconds (clamped to [10, 1000000]).");
    prof.def(
        "interval_us", [] { return tally_profiler_get_interval_us(); },
        "The sampling interval in microseconds.");
}

}  // namespace tally_python
