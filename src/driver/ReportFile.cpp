// Reading profiler reports back from JSON, formatting them, comparing two.
//
// Loading checks every field the text report and the diff use, by the JSON report's key names
// (runtime/src/profiler/report.c, write_json_pipeline): a missing field, a string where a number
// belongs, a negative or fractional count all stop the load with the field's path
// (pipelines[1].slots[3].time_ns). Keys it does not know are ignored, so reports with more fields
// still load.
//
// The text is not laid out here: the numbers go back into the runtime's own stats structs and
// tally_profiler_format_text formats them with the code that prints the report at exit, so the
// layout lives in report.c alone.
//
// The diff normalises by runs (two reports rarely have the same number): time, syncs, copies and
// launches per run; memory peaks are per run already. Slots are matched by kind and name.

#include "driver/ReportFile.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tally/Parser.h"

namespace tally {

namespace {

using nlohmann::json;

/** Reads fields of one JSON object, naming `where` (its path in the report) in errors. */
class Fields {
public:
    Fields(const json &object, std::string where, const std::string &path)
        : object_(object), where_(std::move(where)), path_(path) {
        if (!object_.is_object()) {
            fail(where_, "expected an object");
        }
    }

    const json &get(const char *key) const {
        auto it = object_.find(key);
        if (it == object_.end()) {
            fail(at(key), "missing");
        }
        return *it;
    }
    std::string string(const char *key) const {
        const json &v = get(key);
        if (!v.is_string()) {
            fail(at(key), "expected a string, got " + v.dump());
        }
        return v.get<std::string>();
    }
    uint64_t count(const char *key) const {
        const json &v = get(key);
        if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
            fail(at(key), "expected a non-negative integer, got " + v.dump());
        }
        return v.get<uint64_t>();
    }
    int64_t integer(const char *key) const {
        const json &v = get(key);
        if (!v.is_number_integer()) {
            fail(at(key), "expected an integer, got " + v.dump());
        }
        return v.get<int64_t>();
    }
    double real(const char *key) const {
        const json &v = get(key);
        if (!v.is_number() || !(v.get<double>() >= 0)) {
            fail(at(key), "expected a non-negative number, got " + v.dump());
        }
        return v.get<double>();
    }
    const json &array(const char *key) const {
        const json &v = get(key);
        if (!v.is_array()) {
            fail(at(key), "expected an array, got " + v.dump());
        }
        return v;
    }
    bool has(const char *key) const { return object_.find(key) != object_.end(); }
    std::string at(const char *key) const { return where_.empty() ? key : where_ + "." + key; }

    [[noreturn]] void fail(const std::string &field, const std::string &msg) const {
        throw ReportError(path_ + ": error: " + field + ": " + msg);
    }

private:
    const json &object_;
    std::string where_;
    const std::string &path_;
};

tally_memory_stats read_memory(const Fields &slot, const char *key, const std::string &path) {
    Fields m(slot.get(key), slot.at(key), path);
    tally_memory_stats out{};
    out.current = m.integer("current");
    out.peak = m.count("peak");
    out.num_allocs = m.count("allocs");
    out.total_bytes = m.count("bytes");
    return out;
}

int32_t read_kind(const Fields &slot) {
    std::string kind = slot.string("kind");
    if (kind == "func") {
        return TALLY_SLOT_FUNC;
    }
    if (kind == "copy_to_device") {
        return TALLY_SLOT_COPY_TO_DEVICE;
    }
    if (kind == "copy_to_host") {
        return TALLY_SLOT_COPY_TO_HOST;
    }
    slot.fail(slot.at("kind"),
              "expected \"func\", \"copy_to_device\" or \"copy_to_host\", got \"" + kind + "\"");
}

SlotReport read_slot(const json &j, const std::string &where, size_t index,
                     const std::string &path) {
    Fields f(j, where, path);
    SlotReport s;
    if (f.count("id") != index) {
        f.fail(f.at("id"), "expected " + std::to_string(index) + " (slots are listed in order)");
    }
    s.name = f.string("name");
    s.stats.slot = int32_t(index);
    s.stats.kind = read_kind(f);
    // The Func slot a copy slot belongs to; reports written before the runtime was told carry
    // none (-1: the copy stands alone).
    s.stats.parent = f.has("parent") ? int32_t(f.integer("parent")) : -1;
    s.stats.time_ns = f.count("time_ns");
    s.stats.samples = f.count("samples");
    s.stats.average_threads = f.real("average_threads");
    s.stats.copies = f.count("copies");
    s.stats.copy_bytes = f.count("copy_bytes");
    s.stats.heap = read_memory(f, "heap", path);
    s.stats.device = read_memory(f, "device", path);
    return s;
}

PipelineReport read_pipeline(const json &j, const std::string &where, const std::string &path) {
    Fields f(j, where, path);
    PipelineReport p;
    p.name = f.string("name");
    p.target = f.string("target");
    // The mode's flags, by the names tally_profiler_mode_name gives them; reports written before
    // the runtime had modes carry none and were sampled.
    if (f.has("mode")) {
        std::string mode = f.string("mode");
        bool known = false;
        for (int32_t flags :
             {TALLY_PROFILER_FLAG_EXACT, TALLY_PROFILER_FLAG_TIMER, TALLY_PROFILER_FLAG_SAMPLING}) {
            if (mode == tally_profiler_mode_name(flags)) {
                p.stats.flags = flags;
                known = true;
            }
        }
        if (!known) {
            f.fail(f.at("mode"),
                   "expected \"exact\", \"timer\" or \"sampling\", got \"" + mode + "\"");
        }
    }
    // The clock the runs read (reports written before it was recorded carry none).
    if (f.has("clock")) {
        p.clock = f.string("clock");
        if (p.clock != "tsc" && p.clock != "clock_gettime" && p.clock != "test clock") {
            f.fail(f.at("clock"), "expected \"tsc\", \"clock_gettime\" or \"test clock\", got \"" +
                                      p.clock + "\"");
        }
    }
    p.stats.runs = f.count("runs");
    p.stats.total_ns = f.count("total_ns");
    p.stats.samples = f.count("samples");
    p.stats.average_threads = f.real("average_threads");
    p.stats.heap_peak = f.count("heap_peak_bytes");
    p.stats.device_peak = f.count("device_peak_bytes");
    p.stats.kernel_launches = f.count("kernel_launches");
    p.stats.injected_syncs = f.count("injected_syncs");
    p.stats.explicit_syncs = f.count("explicit_syncs");
    p.stats.copies_to_device = f.count("copies_to_device");
    p.stats.copies_to_device_bytes = f.count("copies_to_device_bytes");
    p.stats.copies_to_host = f.count("copies_to_host");
    p.stats.copies_to_host_bytes = f.count("copies_to_host_bytes");
    const json &slots = f.array("slots");
    if (slots.empty()) {
        f.fail(f.at("slots"), "expected at least one slot (slot 0 is the overhead)");
    }
    for (size_t i = 0; i < slots.size(); i++) {
        p.slots.push_back(
            read_slot(slots[i], f.at("slots") + "[" + std::to_string(i) + "]", i, path));
    }
    // As tally_profiler_start checks them: a Func slot has no parent, a copy slot's is a Func.
    for (size_t i = 0; i < p.slots.size(); i++) {
        const tally_slot_stats &s = p.slots[i].stats;
        bool ok = s.parent == -1 || (s.kind != TALLY_SLOT_FUNC && s.parent >= 0 &&
                                     size_t(s.parent) < p.slots.size() &&
                                     p.slots[size_t(s.parent)].stats.kind == TALLY_SLOT_FUNC);
        if (!ok) {
            Fields slot(slots[i], f.at("slots") + "[" + std::to_string(i) + "]", path);
            slot.fail(slot.at("parent"), "expected -1 or the id of a func slot (a copy slot's "
                                         "Func), got " +
                                             std::to_string(s.parent));
        }
    }
    p.stats.num_slots = int32_t(p.slots.size());
    return p;
}

/** Line and column (1-based) of byte `offset` (0-based) of `text`. */
std::pair<size_t, size_t> line_col(const std::string &text, size_t offset) {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < offset && i < text.size(); i++) {
        if (text[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    return {line, col};
}

}  // namespace

Report parse_report(const std::string &text, const std::string &path) {
    json root;
    try {
        root = json::parse(text);
    } catch (const json::parse_error &e) {
        // e.byte is the 1-based offset of the byte that stopped the parser.
        auto [line, col] = line_col(text, e.byte > 0 ? e.byte - 1 : 0);
        std::string msg = e.what();
        size_t colon = msg.find(": ", msg.find("parse_error"));
        throw ReportError(
            path + ":" + std::to_string(line) + ":" + std::to_string(col) +
            ": error: invalid JSON: " + (colon == std::string::npos ? msg : msg.substr(colon + 2)));
    }
    Fields f(root, "", path);
    int64_t abi = f.integer("abi_version");
    if (abi < 1 || abi > TALLY_RUNTIME_ABI_VERSION) {
        f.fail("abi_version", "this tally-report reads versions 1 to " +
                                  std::to_string(TALLY_RUNTIME_ABI_VERSION) + ", not " +
                                  std::to_string(abi));
    }
    Report r;
    r.path = path;
    const json &pipelines = f.array("pipelines");
    for (size_t i = 0; i < pipelines.size(); i++) {
        r.pipelines.push_back(
            read_pipeline(pipelines[i], "pipelines[" + std::to_string(i) + "]", path));
    }
    if (f.has("device_waits")) {
        Fields w(f.get("device_waits"), "device_waits", path);
        tally_device_wait_stats waits{};
        for (int32_t reason = 0; reason < TALLY_NUM_DEVICE_WAIT_REASONS; reason++) {
            const char *name = tally_device_wait_reason_name(reason);
            if (w.has(name)) {  // reports of older runtimes know fewer reasons
                Fields one(w.get(name), w.at(name), path);
                waits.waits[reason] = one.count("count");
                waits.wait_ns[reason] = one.count("ns");
            }
        }
        waits.deferred_frees = w.count("deferred_frees");
        waits.deferred_frees_released = w.count("deferred_frees_released");
        r.device_waits = waits;
    }
    return r;
}

Report load_report(const std::string &path) {
    std::string text;
    try {
        text = tally::read_text_file(path);
    } catch (const tally::CompileError &e) {
        throw ReportError(e.what());
    }
    return parse_report(text, path);
}

std::string format_report_text(const Report &report) {
    // The runtime's structs, their strings pointing into `report`.
    std::vector<tally_pipeline_stats> pipelines;
    std::vector<std::vector<tally_slot_stats>> slots(report.pipelines.size());
    std::vector<const tally_slot_stats *> slot_ptrs;
    for (size_t i = 0; i < report.pipelines.size(); i++) {
        const PipelineReport &p = report.pipelines[i];
        tally_pipeline_stats ps = p.stats;
        ps.name = p.name.c_str();
        ps.target = p.target.c_str();
        ps.clock = p.clock.empty() ? nullptr : p.clock.c_str();
        pipelines.push_back(ps);
        for (const SlotReport &s : p.slots) {
            tally_slot_stats ss = s.stats;
            ss.name = s.name.c_str();
            slots[i].push_back(ss);
        }
        slot_ptrs.push_back(slots[i].data());
    }
    int32_t n = int32_t(pipelines.size());
    int32_t len = tally_profiler_format_text(n, pipelines.data(), slot_ptrs.data(), nullptr, 0);
    if (len < 0) {
        throw ReportError(report.path + ": error: the runtime cannot format this report (" +
                          std::string(tally_error_code_name(len)) + ")");
    }
    std::string text(size_t(len) + 1, '\0');
    tally_profiler_format_text(n, pipelines.data(), slot_ptrs.data(), &text[0], text.size());
    text.resize(size_t(len));
    if (report.device_waits && n > 0) {
        // After the pipelines, as the runtime prints the process's ledger.
        int32_t wlen = tally_profiler_format_device_waits(&*report.device_waits, nullptr, 0);
        if (wlen < 0) {
            throw ReportError(report.path +
                              ": error: the runtime cannot format the device "
                              "waits (" +
                              std::string(tally_error_code_name(wlen)) + ")");
        }
        std::string waits(size_t(wlen) + 1, '\0');
        tally_profiler_format_device_waits(&*report.device_waits, &waits[0], waits.size());
        waits.resize(size_t(wlen));
        text += waits;
    }
    return text;
}

// ---- diff -------------------------------------------------------------------------------

namespace {

std::string fixed(double v, int decimals) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
    return buf;
}

/** "+12.5%", "-3.0%", "+inf%" (from 0 to more), "0.0%" (both 0). */
std::string percent_change(double base, double now) {
    if (base == 0) {
        return now == 0 ? "0.0%" : "+inf%";
    }
    double p = 100.0 * (now - base) / base;
    return (p >= 0 ? "+" : "") + fixed(p, 1) + "%";
}

bool over_percent(double base, double now, double limit) {
    return base == 0 ? now > 0 : 100.0 * (now - base) / base > limit;
}

/** Rows of a table: name, base, new, delta, verdict. */
class Table {
public:
    void row(const std::string &name, const std::string &base, const std::string &now,
             const std::string &delta, const std::string &verdict = "") {
        rows_.push_back({name, base, now, delta, verdict});
    }
    std::string str(const std::string &indent) const {
        size_t width[4] = {0, 0, 0, 0};
        for (const auto &r : rows_) {
            for (int c = 0; c < 4; c++) {
                width[c] = std::max(width[c], r[size_t(c)].size());
            }
        }
        std::string out;
        for (const auto &r : rows_) {
            std::string line = indent + r[0] + std::string(width[0] - r[0].size() + 2, ' ');
            for (int c = 1; c < 4; c++) {
                line += std::string(width[c] - r[size_t(c)].size() + (c > 1 ? 2 : 0), ' ') +
                        r[size_t(c)];
            }
            if (!r[4].empty()) {
                line += "  " + r[4];
            }
            line.erase(line.find_last_not_of(' ') + 1);
            out += line + "\n";
        }
        return out;
    }

private:
    std::vector<std::array<std::string, 5>> rows_;
};

}  // namespace

DiffResult diff_reports(const Report &base, const Report &now, const DiffThresholds &limits) {
    DiffResult result;
    std::string &out = result.text;
    out += "base: " + base.path + "\nnew:  " + now.path + "\n";

    // Pipelines of `now` by name, each name's occurrences in order.
    std::map<std::string, std::vector<const PipelineReport *>> by_name;
    for (const PipelineReport &p : now.pipelines) {
        by_name[p.name].push_back(&p);
    }
    std::map<std::string, size_t> used;
    for (const PipelineReport &b : base.pipelines) {
        out += "\npipeline " + b.name + "\n";
        auto &candidates = by_name[b.name];
        size_t k = used[b.name]++;
        if (k >= candidates.size()) {
            out += "  missing from the new report\n";
            result.failures.push_back("pipeline " + b.name + ": missing from " + now.path);
            continue;
        }
        const PipelineReport &n = *candidates[k];
        if (b.stats.runs == 0 || n.stats.runs == 0) {
            out += "  no finished runs to compare\n";
            result.failures.push_back("pipeline " + b.name + ": no finished runs in " +
                                      (b.stats.runs == 0 ? base.path : now.path));
            continue;
        }
        double br = double(b.stats.runs), nr = double(n.stats.runs);
        Table t;
        t.row("", "base", "new", "delta");
        t.row("runs", std::to_string(b.stats.runs), std::to_string(n.stats.runs), "");

        auto check_percent = [&](const std::string &what, double bv, double nv,
                                 const std::optional<double> &limit) -> std::string {
            if (limit && over_percent(bv, nv, *limit)) {
                result.failures.push_back("pipeline " + b.name + ": " + what + " " +
                                          percent_change(bv, nv) + " (limit +" + fixed(*limit, 1) +
                                          "%)");
                return "FAIL (limit +" + fixed(*limit, 1) + "%)";
            }
            return "";
        };
        auto check_increase = [&](const std::string &what, double bv, double nv,
                                  const std::optional<double> &limit) -> std::string {
            if (limit && nv - bv > *limit) {
                result.failures.push_back("pipeline " + b.name + ": " + what + " +" +
                                          fixed(nv - bv, 2) + " (limit +" + fixed(*limit, 2) + ")");
                return "FAIL (limit +" + fixed(*limit, 2) + ")";
            }
            return "";
        };

        double bt = double(b.stats.total_ns) / br / 1e6, nt = double(n.stats.total_ns) / nr / 1e6;
        t.row("time per run (ms)", fixed(bt, 3), fixed(nt, 3), percent_change(bt, nt),
              check_percent("time per run", bt, nt, limits.max_time_regression_percent));
        double bs = double(b.stats.injected_syncs + b.stats.explicit_syncs) / br;
        double ns = double(n.stats.injected_syncs + n.stats.explicit_syncs) / nr;
        t.row("syncs per run", fixed(bs, 2), fixed(ns, 2),
              (ns >= bs ? "+" : "") + fixed(ns - bs, 2),
              check_increase("syncs per run", bs, ns, limits.max_sync_increase));
        double bc = double(b.stats.copies_to_device + b.stats.copies_to_host) / br;
        double nc = double(n.stats.copies_to_device + n.stats.copies_to_host) / nr;
        t.row("copies per run", fixed(bc, 2), fixed(nc, 2),
              (nc >= bc ? "+" : "") + fixed(nc - bc, 2),
              check_increase("copies per run", bc, nc, limits.max_copy_increase));
        double bb = double(b.stats.copies_to_device_bytes + b.stats.copies_to_host_bytes) / br;
        double nb = double(n.stats.copies_to_device_bytes + n.stats.copies_to_host_bytes) / nr;
        t.row("copy bytes per run", fixed(bb, 0), fixed(nb, 0), percent_change(bb, nb));
        double bl = double(b.stats.kernel_launches) / br, nl = double(n.stats.kernel_launches) / nr;
        t.row("launches per run", fixed(bl, 2), fixed(nl, 2),
              (nl >= bl ? "+" : "") + fixed(nl - bl, 2),
              check_increase("launches per run", bl, nl, limits.max_launch_increase));
        double bh = double(b.stats.heap_peak), nh = double(n.stats.heap_peak);
        t.row("heap peak (bytes)", fixed(bh, 0), fixed(nh, 0), percent_change(bh, nh),
              check_percent("heap peak", bh, nh, limits.max_memory_regression_percent));
        double bd = double(b.stats.device_peak), nd = double(n.stats.device_peak);
        t.row("device peak (bytes)", fixed(bd, 0), fixed(nd, 0), percent_change(bd, nd),
              check_percent("device peak", bd, nd, limits.max_memory_regression_percent));
        out += t.str("  ");

        // Slots, matched by kind and name: the base's in order, then the new report's others.
        Table st;
        st.row("slot time per run (ms)", "base", "new", "delta");
        std::map<std::pair<int32_t, std::string>, const SlotReport *> new_slots;
        for (const SlotReport &s : n.slots) {
            new_slots[{s.stats.kind, s.name}] = &s;
        }
        for (const SlotReport &s : b.slots) {
            const std::string &label = s.name;
            auto it = new_slots.find({s.stats.kind, s.name});
            double bv = double(s.stats.time_ns) / br / 1e6;
            if (it == new_slots.end()) {
                st.row(label, fixed(bv, 3), "-", "gone");
                continue;
            }
            double nv = double(it->second->stats.time_ns) / nr / 1e6;
            new_slots.erase(it);
            st.row(label, fixed(bv, 3), fixed(nv, 3), percent_change(bv, nv),
                   check_percent(label + " time per run", bv, nv,
                                 limits.max_func_time_regression_percent));
        }
        for (const SlotReport &s : n.slots) {
            if (new_slots.count({s.stats.kind, s.name})) {
                st.row(s.name, "-", fixed(double(s.stats.time_ns) / nr / 1e6, 3), "new");
            }
        }
        out += st.str("  ");
    }
    for (const auto &[name, list] : by_name) {
        for (size_t k = used[name]; k < list.size(); k++) {
            out += "\npipeline " + name + "\n  only in the new report\n";
        }
    }
    out += "\n";
    if (result.passed()) {
        out += "result: pass\n";
    } else {
        out += "result: FAIL (" + std::to_string(result.failures.size()) + ")\n";
        for (const std::string &f : result.failures) {
            out += "  " + f + "\n";
        }
    }
    return result;
}

}  // namespace tally
