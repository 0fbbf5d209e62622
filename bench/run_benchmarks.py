#!/usr/bin/env python3
"""Runs every Google Benchmark program in a build's bench/ folder and writes bench/RESULTS.md.

Usage: bench/run_benchmarks.py BUILD_DIR [--repetitions N] [--out PATH] [--filter REGEX]
                               [--only PROGRAM[,PROGRAM...]]
       bench/run_benchmarks.py --methods-only [--out PATH]

Each executable file directly inside BUILD_DIR/bench is run with
  --benchmark_format=json --benchmark_repetitions=N --benchmark_report_aggregates_only=true
and the median of each benchmark goes into Markdown tables, one section per program (split into
several tables where one would have too many counter columns), with the machine (CPU count,
model, load average before and after each program) and the date. A "Targets" section checks the
project's performance targets against the figures (see TARGETS below). Benchmarks that skip
(Google Benchmark's SkipWithError, e.g. no Vulkan device) are listed with their message.
Programs that fail are listed with their exit status; the script then exits non-zero, after
writing what it has.

Each program's section opens with its method, which is written once: the leading comment block
of its source, bench/<program>.cpp, copied here (prose paragraphs as paragraphs, indented blocks
as code blocks). The file's last section, "Earlier findings", is written by hand (figures from
earlier runs that the tables no longer hold) and is kept as it is.

With --only, just the named programs run, and their sections and their rows of the Targets table
replace those in the existing file (the other programs' sections are kept as they were; the
replaced sections say when and from which source they were measured).

With --methods-only (no BUILD_DIR, nothing runs), the existing file's methods are rewritten from
the sources' header comments and everything else is kept: for a header comment that changed.
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import subprocess
import time
import sys
from pathlib import Path

# Keys of a benchmark's JSON record that are not user counters.
STANDARD_KEYS = {
    "name", "family_index", "per_family_instance_index", "run_name", "run_type", "repetitions",
    "repetition_index", "threads", "iterations", "real_time", "cpu_time", "time_unit",
    "aggregate_name", "aggregate_unit", "error_occurred", "error_message", "label",
}


# The folder of this script and of the benchmarks' sources.
BENCH_DIR = Path(__file__).resolve().parent

# The last section of RESULTS.md, written by hand and kept as it is when the script rewrites the
# file: figures from earlier runs that the tables no longer hold.
KEPT_SECTION = "## Earlier findings"


# Programs built from another program's source (one build per Halide version).
SOURCES = {"halide14_bench": "halide_bench", "halide21_bench": "halide_bench"}


def source_of(program):
    """The bench/ source file (without .cpp) that `program` is built from."""
    return SOURCES.get(program, program)


def method_comment(program):
    """The method of `program`: the leading comment block of its source, bench/<source>.cpp
    (every line from the first that starts with `//` up to the first that does not), without the
    `//`s; None when the source or its comment is missing. Each benchmark's method is written
    once, there."""
    try:
        text = (BENCH_DIR / (source_of(program) + ".cpp")).read_text()
    except OSError:
        return None
    out = []
    for line in text.splitlines():
        if not line.startswith("//"):
            break
        line = line[2:]
        out.append(line[1:] if line.startswith(" ") else line)
    return out or None


def escape_markdown(text):
    """`text` with the characters Markdown would read as markup escaped, outside code spans."""
    parts = re.split(r"(`[^`]*`)", text)
    for i in range(0, len(parts), 2):
        s = parts[i].replace("\\", "\\\\").replace("<", "\\<").replace("*", "\\*")
        parts[i] = re.sub(r"(^|[^\w\\])_", r"\1\\_", s)
    return "".join(parts)


def method_lines(program):
    """The Markdown lines of `program`'s method: its source's header comment, each paragraph of
    prose as one line, each indented block (the per-benchmark lists) as a code block."""
    comment = method_comment(program)
    if comment is None:
        return []
    lines = ["How it measures (the header comment of [`bench/%s.cpp`](%s.cpp)):" %
             (source_of(program), source_of(program)), ""]
    prose, code = [], []

    def flush():
        if prose:
            lines.extend([escape_markdown(" ".join(prose)), ""])
            del prose[:]
        if code:
            indent = min(len(c) - len(c.lstrip()) for c in code)
            lines.extend(["```"] + [c[indent:] for c in code] + ["```", ""])
            del code[:]

    for line in comment:
        line = line.rstrip()
        if not line:
            flush()
        elif line.startswith(" "):
            if prose:
                flush()
            code.append(line)
        else:
            if code:
                flush()
            prose.append(line.strip())
    flush()
    return lines


# Columns per table before a program's rows are split into several tables.
MAX_COUNTER_COLUMNS = 6


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_count():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 0


def load_average():
    try:
        return "%.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        return "unknown"


def git_state():
    """The source's commit and the files changed since, as one line (or "unknown")."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                 "--untracked-files=no"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    changed = [line[3:] for line in status if len(line) > 3]
    if not changed:
        return "commit %s" % head
    return "commit %s plus uncommitted changes to %s" % (
        head, ", ".join("`%s`" % c for c in changed))


def find_programs(build_dir):
    bench_dir = Path(build_dir) / "bench"
    if not bench_dir.is_dir():
        return []
    programs = []
    for p in sorted(bench_dir.iterdir()):
        if p.is_file() and os.access(p, os.X_OK) and p.suffix not in (".so", ".a", ".py"):
            programs.append(p)
    return programs


def si(value):
    """Formats a number the way Google Benchmark's console output does (k, M, G)."""
    for factor, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return "%.3g%s" % (value / factor, suffix)
    if value == int(value):
        return "%d" % value
    return "%.3g" % value


def format_time(value, unit):
    if value >= 100:
        return "%.0f %s" % (value, unit)
    if value >= 10:
        return "%.1f %s" % (value, unit)
    return "%.3g %s" % (value, unit)


def format_counter(key, value):
    if key.startswith("ns_per_"):
        # An inverted rate (benchmark::Counter::kIsRate | kInvert): seconds per item in the JSON.
        return "%.0f" % (value * 1e9) if value * 1e9 >= 10 else "%.3g" % (value * 1e9)
    if "ratio" in key or key.startswith("vs_"):
        return "%.3f" % value
    if key.endswith("_pct"):
        return "%.2f" % value
    if key.endswith("_ms"):
        return "%.4g" % value
    if key.endswith("_per_second"):
        unit = "B/s" if key.startswith("bytes") else "/s"
        if key.startswith("bytes"):
            # Bytes use binary prefixes in Google Benchmark's output; keep that.
            for factor, suffix in ((2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki")):
                if value >= factor:
                    return "%.3g %s%s" % (value / factor, suffix, unit)
            return "%.3g %s" % (value, unit)
        return si(value) + unit
    return si(value)


def run_program(program, repetitions, bench_filter):
    cmd = [str(program), "--benchmark_format=json",
           "--benchmark_repetitions=%d" % repetitions,
           "--benchmark_report_aggregates_only=true"]
    if bench_filter:
        cmd.append("--benchmark_filter=" + bench_filter)
    print("running:", " ".join(cmd), file=sys.stderr, flush=True)
    start = time.monotonic()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    print("  %.1f s" % (time.monotonic() - start), file=sys.stderr, flush=True)
    if proc.returncode != 0:
        return None, "exit status %d: %s" % (proc.returncode, proc.stderr.strip()[-500:])
    try:
        return json.loads(proc.stdout), None
    except json.JSONDecodeError as e:
        return None, "unreadable JSON output (%s)" % e


def skipped_rows(report):
    """(name, message) of the benchmarks that stopped with SkipWithError, once each."""
    out = []
    for b in report.get("benchmarks", []):
        if b.get("error_occurred"):
            entry = (b.get("run_name", b["name"]), b.get("error_message", ""))
            if entry not in out:
                out.append(entry)
    return out


def median_rows(report):
    """The median aggregate of each benchmark; with one repetition (no aggregates), its run."""
    benchmarks = report.get("benchmarks", [])
    aggregates = any(b.get("run_type") == "aggregate" for b in benchmarks)
    rows = []
    for b in benchmarks:
        if aggregates and (b.get("run_type") != "aggregate" or
                           b.get("aggregate_name") != "median"):
            continue
        if b.get("error_occurred"):
            continue
        counters = {k: v for k, v in b.items()
                    if k not in STANDARD_KEYS and isinstance(v, (int, float))}
        rows.append({
            "name": b.get("run_name", b["name"]),
            "real_time": b["real_time"],
            "cpu_time": b["cpu_time"],
            "unit": b.get("time_unit", "ns"),
            "counters": counters,
            "label": b.get("label", ""),
        })
    return rows


def find_row(results, program, pattern):
    """The row of `program` whose name matches the regex `pattern` (re.match), or None."""
    for prog, info in results:
        if prog != program:
            continue
        for r in info["rows"]:
            if re.match(pattern, r["name"]):
                return r
    return None


def counter(results, program, pattern, key):
    r = find_row(results, program, pattern)
    if r is None or key not in r["counters"]:
        return None
    return r["counters"][key]


def verdict(ok):
    if ok is None:
        return "not measured"
    return "**met**" if ok else "**missed**"


def halide_rows(results, version, scale, goal):
    """The Tally-vs-Halide `version` (14 or 21) targets at one scale: geometric mean <= 1.00 and
    no pipeline above 1.10, in steady state and on the first and second runs."""
    program = "halide%d_bench" % version
    rows_at = []
    for prog, info in results:
        if prog != program:
            continue
        for r in info["rows"]:
            m = re.match(r"BM_VsHalide%d/([^/]+)/%d(/|$)" % (version, scale), r["name"])
            if m and "ratio" in r["counters"]:
                rows_at.append((m.group(1), r["counters"]))
    by = "%s `BM_VsHalide%d/<pipeline>/%d`" % (program, version, scale)
    what = "scale %d (%s)" % (scale, "inputs tiled 8x per dimension" if scale == 8 else
                              "the committed inputs: per-call costs dominate")
    if not rows_at:
        return [("Tally / Halide %d, %s" % (version, what), by,
                 "n/a (%s not built or run)" % program, verdict(None))]
    out = []
    for key, label in (("ratio", "steady state"), ("first_ratio", "first run"),
                       ("second_ratio", "second run")):
        values = [(c[key], name) for name, c in rows_at]
        counters = dict(rows_at)
        geo = math.exp(sum(math.log(v) for v, _ in values) / len(values))
        worst = sorted(values, reverse=True)
        above = [n for v, n in worst if v > 1.10]
        # First and second runs are one sample per process: a pipeline above 1.10x is shown with
        # its 90 % bootstrap interval, and counts as a miss only when the whole interval is
        # above 1.10x (the steady state's medians over rounds are tight enough to take as
        # they are).
        lo_key, hi_key = key + "_lo", key + "_hi"
        def shown(n):
            c = counters[n]
            if lo_key in c:
                return "%s [%.2f, %.2f]" % (n, c[lo_key], c[hi_key])
            return n
        clearly = [n for n in above if key == "ratio" or counters[n].get(lo_key, 2) > 1.10]
        measured = "geomean %.3fx over %d pipelines; worst %s; %d above 1.10x%s" % (
            geo, len(values), ", ".join("%s %.2fx" % (n, v) for v, n in worst[:3]), len(above),
            (" (%s)" % ", ".join(shown(n) for n in above)) if above else "")
        if geo > 1.0 or clearly:
            result = verdict(False)
        elif above:
            result = ("**not separable** from the goal at this noise: each pipeline above "
                      "1.10x has a 90 % interval reaching below it")
        else:
            result = verdict(True)
        out.append(("Tally / Halide %d run time, %s, %s: geomean <= 1.00x, none above 1.10x" %
                    (version, what, label), "%s `%s`" % (by, key), measured,
                    result if goal else "for reference"))
    # Memory (no numeric target): what each side's runs add to a process of its own.
    mem = [(c["memory_ratio"], name, c["tally_added_mib"], c["halide_added_mib"])
           for name, c in rows_at if "memory_ratio" in c]
    if mem:
        geo = math.exp(sum(math.log(v) for v, _, _, _ in mem) / len(mem))
        worst = sorted(mem, reverse=True)[:3]
        measured = ("geomean %.3fx over %d pipelines; worst %s; in all, Tally %.1f MiB, Halide "
                    "%.1f MiB" % (geo, len(mem), ", ".join(
                        "%s %.2fx (%.1f vs %.1f MiB)" % (n, v, t, h) for v, n, t, h in worst),
                        sum(t for _, _, t, _ in mem), sum(h for _, _, _, h in mem)))
        out.append(("(no target) Memory the runs add, Tally / Halide %d (+1 MiB each), %s" %
                    (version, what),
                    "%s `memory_ratio`, `tally_added_mib`, `halide_added_mib`" % by, measured,
                    "for reference"))
    return out


def targets(results):
    """Rows (target, measured by, measured, verdict) for the project's performance targets, then
    the figures that have no numeric target but belong next to them."""
    rows = []

    # 1. Profiling overhead on a real pipeline.
    pat = r"BM_ProfilingOverhead"
    ratio = counter(results, "apps_bench", pat, "ratio")
    if ratio is None:
        measured, ok = "n/a", None
    else:
        pair = counter(results, "apps_bench", pat, "pair_ratio")
        cpu = counter(results, "apps_bench", pat, "cpu_ratio")
        iqr = counter(results, "apps_bench", pat, "host_iqr_pct")
        measured = ("%.3fx (per-round median %.3fx; in process CPU time %.3fx); run-to-run "
                    "spread of the host runs (IQR) %.1f%%" % (ratio, pair, cpu, iqr))
        ok = verdict(ratio <= 1.02)
        if iqr > 2.0:
            ok += (" by the number, but inconclusive: the runs' own spread (%.1f%%) is wider "
                   "than the 2%% margin" % iqr)
    rows.append(("Profiling overhead <= 1.02x (blur 4096x4096, host-profile / host wall time)",
                 "apps_bench `BM_ProfilingOverhead` `ratio`", measured,
                 ok if isinstance(ok, str) else verdict(ok)))

    # 2. Sampler CPU at 1 kHz, next to the cost of merely waking up at 1 kHz on this machine.
    floor = counter(results, "runtime_bench", r"BM_BareWakeupCpu/1000(/|$)", "wakeup_cpu_pct")
    for runs in (1, 16):
        pct = counter(results, "runtime_bench", r"BM_SamplerCpu/1000/%d(/|$)" % runs,
                      "sampler_cpu_pct")
        if pct is None:
            measured, ok = "n/a", verdict(None)
        else:
            measured = "%.2f%%" % pct
            ok = verdict(pct <= 1.0)
            if floor is not None:
                measured += " (a bare thread waking at 1 kHz: %.2f%%)" % floor
                if pct > 1.0 and floor > 1.0:
                    ok += ("; the bare 1 kHz wakeup alone costs more than 1%% here (%.2f%%), so "
                           "this machine cannot meet it" % floor)
        rows.append(("Sampler CPU <= 1%% of a core at 1 kHz (%d live run%s)" %
                     (runs, "" if runs == 1 else "s"),
                     "runtime_bench `BM_SamplerCpu/1000/%d` `sampler_cpu_pct`" % runs,
                     measured, ok))

    # 2b. Continuous mode: the profiler's threads at 19 and 100 Hz with a pprof window
    # every second, next to the cost of merely waking up at those rates.
    for hz in (19, 100):
        pat = r"BM_ContinuousCpu/%d/1000(/|$)" % hz
        pct = counter(results, "continuous_bench", pat, "profiler_cpu_pct")
        if pct is None:
            measured, ok = "n/a", verdict(None)
        else:
            measured = "%.2f%% (sampler %.2f%%, window writer %.2f%%; %g windows)" % (
                pct, counter(results, "continuous_bench", pat, "sampler_cpu_pct"),
                counter(results, "continuous_bench", pat, "writer_cpu_pct"),
                counter(results, "continuous_bench", pat, "windows"))
            floor = counter(results, "continuous_bench",
                            r"BM_BareWakeupCpu/%d(/|$)" % (1000000 // hz), "wakeup_cpu_pct")
            if floor is not None:
                measured += "; a bare thread waking at %d Hz: %.2f%%" % (hz, floor)
            ok = verdict(pct <= 1.0)
        rows.append(("Continuous mode <= 1%% of a core at %d Hz, a pprof window every 1 s" % hz,
                     "continuous_bench `BM_ContinuousCpu/%d/1000` `profiler_cpu_pct`" % hz,
                     measured, ok))

    # 3. Wall overhead at 10^5 switches/s.
    for mode, what in ((0, "sampler thread, the default"), (1, "timer signal")):
        pat = r"BM_WallOverhead/%d(/|$)" % mode
        wall = counter(results, "runtime_bench", pat, "overhead_pct")
        if wall is None:
            measured, ok = "n/a", verdict(None)
        else:
            cpu = counter(results, "runtime_bench", pat, "cpu_overhead_pct")
            rate = counter(results, "runtime_bench", pat, "switches_per_s")
            measured = "%.2f%% wall (%.2f%% in the workload thread's CPU time) at %s switches/s" % (
                wall, cpu, si(rate))
            ok = verdict(wall <= 1.0)
            if wall < -1.0:
                ok += (" by the number, but a negative overhead means the noise is larger than "
                       "the margin")
            if rate < 1e5:
                ok += ("; the loaded machine reached only %s switches/s, not 10^5" % si(rate))
        rows.append(("Wall overhead <= 1%% at 10^5 slot switches/s (mode %d: %s)" % (mode, what),
                     "runtime_bench `BM_WallOverhead/%d` `overhead_pct`" % mode, measured, ok))

    # 4. Linear pass cost: ns per node flat from 10^4 to 10^6 nodes.
    for bench in ("BM_InjectProfiling", "BM_Lower"):
        per_node = [counter(results, "passes_bench", r"%s/%d(/|$)" % (bench, n), "ns_per_node")
                    for n in (10000, 100000, 1000000)]
        if None in per_node:
            measured, ok = "n/a", None
        else:
            ns = [v * 1e9 for v in per_node]
            measured = "%.0f / %.0f / %.0f ns per node at 10^4 / 10^5 / 10^6 nodes (x%.2f)" % (
                ns[0], ns[1], ns[2], ns[2] / ns[0])
            ok = ns[2] <= 1.5 * ns[0]
        rows.append(("Linear pass cost: ns/node at 10^6 nodes <= 1.5x that at 10^4 (%s)" % bench,
                     "passes_bench `%s` `ns_per_node`" % bench, measured, verdict(ok)))

    # 5. Tally's code against Halide 14's and 21's for the same lowered IR (their conformance
    # corpora). Halide 21's first run counts too (its goal names the first run).
    for version in (14, 21):
        for scale, goal in ((8, True), (1, version == 21)):
            rows += halide_rows(results, version, scale, goal)

    # 6. The profiler's truth: its shares against the stage-alone truth, and its cost.
    rows += truth_targets(results)
    rows += constructed_targets(results)

    rows += gpu_rows(results, "Vulkan")
    rows += gpu_rows(results, "OpenCL")
    rows += bridge_rows(results)
    vs_ref = counter(results, "apps_bench", r"BM_BlurVsReference", "vs_reference")
    if vs_ref is not None:
        vs_halide = counter(results, "apps_bench", r"BM_BlurVsReference", "vs_halide")
        rows.append(("(no target) Generated code: blur 4096x4096, Tally `host` time over others'",
                     "apps_bench `BM_BlurVsReference` `vs_reference`, `vs_halide`",
                     "%.3fx the C++ reference (-O3, one thread); %s" %
                     (vs_ref, "not compared with Halide 14 (not installed at configure time)"
                      if vs_halide is None else "%.3fx Halide 14 (same schedule)" % vs_halide),
                     "for reference"))
    return rows


def bridge_rows(results):
    """The Halide bridge's compile time: Tally's (through the bridge) over Halide 21's own JIT
    compile, no more than 1.5x for every pipeline of the Halide 21 corpus."""
    rows_at, alone = [], []
    for prog, info in results:
        if prog != "bridge_bench":
            continue
        for r in info["rows"]:
            m = re.match(r"BM_BridgeCompile/([^/]+)", r["name"])
            if m and "ratio" in r["counters"]:
                rows_at.append((m.group(1), r["counters"]))
            elif m and "tally_ms" in r["counters"]:
                alone.append(m.group(1))  # Halide's JIT failed (the benchmark's label says how)
    what = "Compile time through the Halide bridge <= 1.5x Halide 21's own JIT compile, every pipeline"
    by = "bridge_bench `BM_BridgeCompile/<pipeline>` `ratio`"
    if not rows_at:
        return [(what, by, "n/a (bridge_bench not built or run)", verdict(None))]
    values = sorted(((c["ratio"], n) for n, c in rows_at), reverse=True)
    geo = math.exp(sum(math.log(v) for v, _ in values) / len(values))
    above = [(v, n) for v, n in values if v > 1.5]
    halide = sum(c["halide_ms"] for _, c in rows_at)
    tally = sum(c["tally_ms"] for _, c in rows_at)
    measured = ("%d pipelines: geometric mean %.2fx, largest %.2fx (`%s`); summed %.0f ms against "
                "Halide's %.0f ms" % (len(values), geo, values[0][0], values[0][1], tally, halide))
    if above:
        measured += "; above 1.5x: " + ", ".join("`%s` %.2fx" % (n, v) for v, n in above)
    for n in sorted(set(alone)):
        measured += "; not compared: `%s` (Halide 21's JIT cannot compile it)" % n
    return [(what, by, measured, verdict(not above))]


def skip_reason(results, program, pattern):
    """The message of the benchmark of `program` matching `pattern` that skipped, or None."""
    for prog, info in results:
        if prog == program:
            for name, why in info.get("skipped", []):
                if re.match(pattern, name):
                    return why
    return None


def gpu_rows(results, api):
    """Rows for apps_bench's GPU benchmarks on one API ("Vulkan" or "OpenCL"; one function in
    apps_bench, BM_<api>Sync and BM_<api>Timestamps): the cost of the injected syncs, for
    reference, and profile_timestamps and sync mode against fenced truth. Vulkan's targets:
    gpu_gpu_cpu's and overlap's profile_timestamps shares within 2 pp and cost <= 1.02x (blur_gpu's
    cost too), sync mode for reference. OpenCL's (set on PoCL): gpu_gpu_cpu's and overlap's shares
    within 2 pp in sync mode and with profile_timestamps, the latter at <= 1.02x; the rest for
    reference. Vulkan rows are left out when not measured; OpenCL's targets say so."""
    rows = []
    prefix = "" if api == "Vulkan" else "%s (PoCL) " % api
    target = "host-%s" % api.lower()
    for app in ("blur_gpu", "gpu_gpu_cpu"):
        pat = r"BM_%sSync/%s(/|$)" % (api, app)
        ratio = counter(results, "apps_bench", pat, "ratio")
        if ratio is None:
            continue
        rows.append(("(no target) %s `%s`: %s-profile / %s" % (api, app, target, target),
                     "apps_bench `BM_%sSync/%s` `ratio`, `sync_ratio`" % (api, app),
                     "%.3fx with the injected syncs; the syncs alone (profile / profile without "
                     "syncs) %.3fx" % (ratio, counter(results, "apps_bench", pat, "sync_ratio")),
                     "for reference"))
    # profile_timestamps: device shares against fenced truth, and the cost.
    for name in ("gpu_gpu_cpu", "overlap", "blur_gpu"):
        bench = "BM_%sTimestamps/%s" % (api, name)
        pat = r"%s(/|$)" % bench
        judged = name != "blur_gpu"  # the two pipelines the targets name
        ts_a = counter(results, "apps_bench", pat, "timestamps_a_pp")
        if ts_a is None:
            if api != "Vulkan" and judged:
                why = skip_reason(results, "apps_bench", pat)
                measured = "n/a" + (" (%s)" % why if why else "")
                for what, keys in (("profile_timestamps `%s`: A and B device shares within 2 "
                                    "pp of truth", "`timestamps_a_pp`, `_b_pp`"),
                                   ("profile_timestamps `%s`: profiled / plain wall <= 1.02x",
                                    "`timestamps_ratio`"),
                                   ("sync mode `%s`: A and B device shares within 2 pp of truth",
                                    "`sync_a_pp`, `_b_pp`, `sync_ratio`")):
                    rows.append((prefix + what % name, "apps_bench `%s` %s" % (bench, keys),
                                 measured, verdict(None)))
            continue
        ts_b = counter(results, "apps_bench", pat, "timestamps_b_pp")
        if not judged:
            # Not one of the two pipelines the targets name: an extra check whose runs are short
            # and spread widely here, so its truth (differences of medians) is checked for sense.
            truths = (counter(results, "apps_bench", pat, "truth_a_pct") +
                      counter(results, "apps_bench", pat, "truth_b_pct"))
            rows.append(("(extra) %sprofile_timestamps `%s`: A and B device shares against "
                         "truth" % (prefix, name),
                         "apps_bench `%s` `timestamps_a_pp`, `_b_pp`, "
                         "`truth_a_pct` + `truth_b_pct`, `plain_iqr_pct`" % bench,
                         "A %.1f pp, B %.1f pp; the two truths sum to %.1f %% of the run, runs "
                         "spread %.0f %% (IQR)" % (ts_a, ts_b, truths, counter(
                             results, "apps_bench", pat, "plain_iqr_pct")),
                         "for reference" + ("" if truths <= 100 else
                                            ": its truth exceeds the run, so it is noise here")))
        else:
            rows.append(("%sprofile_timestamps `%s`: A and B device shares within 2 pp of truth"
                         % (prefix, name),
                         "apps_bench `%s` `timestamps_a_pp`, `_b_pp`" % bench,
                         "A %.1f pp, B %.1f pp" % (ts_a, ts_b), verdict(ts_a <= 2 and ts_b <= 2)))
        ratio = counter(results, "apps_bench", pat, "timestamps_ratio")
        # Profiling cannot make a run faster: a ratio well below 1 is the machine's noise, which
        # then also hides any cost up to that size.
        if api == "Vulkan" or judged:
            ratio_verdict = (verdict(ratio <= 1.02) if ratio >= 0.98
                             else "not measurable here (below 1: the noise)")
            rows.append(("%sprofile_timestamps `%s`: profiled / plain wall <= 1.02x" %
                         (prefix, name),
                         "apps_bench `%s` `timestamps_ratio`" % bench, "%.3fx" % ratio,
                         ratio_verdict))
        else:
            rows.append(("(no target) %sprofile_timestamps `%s`: profiled / plain wall" %
                         (prefix, name),
                         "apps_bench `%s` `timestamps_ratio`" % bench, "%.3fx" % ratio,
                         "for reference"))
        sync_a = counter(results, "apps_bench", pat, "sync_a_pp")
        sync_b = counter(results, "apps_bench", pat, "sync_b_pp")
        sync_ratio = counter(results, "apps_bench", pat, "sync_ratio")
        if api != "Vulkan" and judged:
            rows.append(("%ssync mode `%s`: A and B device shares within 2 pp of truth" %
                         (prefix, name),
                         "apps_bench `%s` `sync_a_pp`, `_b_pp`, `sync_ratio`" % bench,
                         "A %.1f pp, B %.1f pp; sync mode's run %.3fx the plain one" % (
                             sync_a, sync_b, sync_ratio),
                         verdict(sync_a <= 2 and sync_b <= 2)))
        else:
            rows.append(("(no target) %ssync mode `%s`: shares and cost next to it" %
                         (prefix, name),
                         "apps_bench `%s` `sync_a_pp`, `_b_pp`, `sync_ratio`" % bench,
                         "A %.1f pp, B %.1f pp; %.3fx" % (sync_a, sync_b, sync_ratio),
                         "for reference"))
    return rows


def truth_targets(results):
    """Rows (target, measured by, measured, verdict) for the profiler-truth goals:
    exact mode is judged against them; sampling mode is shown next to it."""
    prog = "truth_bench"
    rows = []
    goals = ((0, "long runs accumulated over 21 runs", 0.1),
             (1, "one long run", 0.3),
             (2, "2 ms runs in blocks of 10", 0.5),
             (3, "a single 0.5 ms run", 1.0))
    for scenario, what, goal in goals:
        pat = r"BM_Truth/pipeline:0/scenario:%d/threads:2/hog:0(/|$)" % scenario
        exact = counter(results, prog, pat, "exact_pp")
        if exact is None:
            rows.append(("Share error <= %.1f pp, %s (float_chain)" % (goal, what),
                         "%s `BM_Truth`" % prog, "n/a", verdict(None)))
            continue
        sampling = counter(results, prog, pat, "sampling_pp")
        one = counter(results, prog,
                      r"BM_Truth/pipeline:0/scenario:%d/threads:1/hog:0(/|$)" % scenario,
                      "exact_pp")
        blur = counter(results, prog,
                       r"BM_Truth/pipeline:1/scenario:%d/threads:2/hog:0(/|$)" % scenario,
                       "exact_pp")
        measured = "exact %.2f pp (sampling %.2f pp) with 2 threads" % (exact, sampling)
        floor = counter(results, prog, pat, "floor_pp")
        run_pp = counter(results, prog, pat, "exact_run_pp")
        if floor is not None and run_pp is not None:
            measured += "; a perfect profiler in the same runs: %.2f pp (the floor); " \
                        "accumulation check (the same runs' produce spans, which shows that a " \
                        "profile adds up what it reads, not that its shares are true): exact " \
                        "%.3f pp, sampling %.2f pp" % (
                            floor, run_pp, counter(results, prog, pat, "sampling_run_pp"))
        insitu = counter(results, prog, pat, "exact_insitu_pp")
        if insitu is not None:
            measured += " (against the in-situ truth: exact %.2f pp, sampling %.2f pp; the " \
                        "two truths differ by %.2f pp)" % (
                            insitu, counter(results, prog, pat, "sampling_insitu_pp"),
                            counter(results, prog, pat, "truth_gap_pp"))
        if one is not None:
            measured += "; exact %.2f pp with 1 thread" % one
        if blur is not None:
            measured += "; blur exact %.2f pp" % blur
        v = verdict(exact <= goal)
        if exact > goal and floor is not None and floor > goal:
            # The truth itself cannot be met here: say so next to the miss.
            v += " against this truth, whose floor here (%.2f pp) is above the goal; the " \
                 "constructed truth's rows judge accuracy" % floor
        rows.append(("Share error <= %.1f pp, %s (float_chain, 2 threads)" % (goal, what),
                     "%s `BM_Truth/pipeline:0/scenario:%d` `exact_pp`" % (prog, scenario),
                     measured, v))
        hog = counter(results, prog,
                      r"BM_Truth/pipeline:0/scenario:%d/threads:2/hog:1(/|$)" % scenario,
                      "exact_pp")
        if hog is not None:
            hog_s = counter(results, prog,
                            r"BM_Truth/pipeline:0/scenario:%d/threads:2/hog:1(/|$)" % scenario,
                            "sampling_pp")
            hog_pat = r"BM_Truth/pipeline:0/scenario:%d/threads:2/hog:1(/|$)" % scenario
            hog_measured = "exact %.2f pp vs %.2f pp quiet (sampling %.2f pp vs %.2f pp)" % (
                hog, exact, hog_s, sampling)
            hog_floor = counter(results, prog, hog_pat, "floor_pp")
            hog_run = counter(results, prog, hog_pat, "exact_run_pp")
            if hog_floor is not None and hog_run is not None and floor is not None:
                hog_measured += "; the floor %.2f pp vs %.2f pp quiet; accumulation check: " \
                                "exact %.3f pp vs %.3f pp quiet, sampling %.2f pp" % (
                                    hog_floor, floor, hog_run, run_pp,
                                    counter(results, prog, hog_pat, "sampling_run_pp"))
            hog_v = verdict(hog <= 2 * max(exact, 0.05))
            if hog > 2 * max(exact, 0.05) and hog_floor is not None and floor is not None and \
                    hog_floor > floor:
                hog_v += (" against this truth, whose floor rises from %.2f to %.2f pp under the "
                          "hog" % (floor, hog_floor))
            rows.append(("Under a CPU hog on both cores, %s: error <= 2x the quiet figure" % what,
                         "%s `BM_Truth/pipeline:0/scenario:%d/threads:2/hog:1` `exact_pp`" %
                         (prog, scenario), hog_measured, hog_v))
    for pipeline, name, goal in ((0, "float_chain, 2 threads", 1.01), (1, "blur, 2 threads", 1.005)):
        pat = r"BM_WallRatio/pipeline:%d(/|$)" % pipeline
        ratio = counter(results, prog, pat, "exact_paired_ratio")
        lo = counter(results, prog, pat, "exact_paired_ratio_lo")
        hi = counter(results, prog, pat, "exact_paired_ratio_hi")
        if ratio is None or lo is None or hi is None:
            measured, v = "n/a", verdict(None)
        else:
            measured = ("exact %.3fx, the median of %d rounds' ratios (90 %% interval %.3f-%.3f); "
                        "the ratio of the medians %.3fx (%.3f-%.3f); sampling %.3fx (ratio of "
                        "medians), interleaved in one process; fastest runs: exact %.3fx, "
                        "sampling %.3fx; process CPU time: exact %.3fx, sampling %.3fx" % (
                            ratio, counter(results, prog, pat, "rounds") or 0, lo, hi,
                            counter(results, prog, pat, "exact_ratio"),
                            counter(results, prog, pat, "exact_ratio_lo"),
                            counter(results, prog, pat, "exact_ratio_hi"),
                            counter(results, prog, pat, "sampling_ratio"),
                            counter(results, prog, pat, "exact_min_ratio"),
                            counter(results, prog, pat, "sampling_min_ratio"),
                            counter(results, prog, pat, "exact_cpu_ratio"),
                            counter(results, prog, pat, "sampling_cpu_ratio")))
            v = verdict(ratio <= goal)
            if ratio > goal and lo <= goal:
                v = ("**not separable** from the goal at this noise: the 90 % interval reaches "
                     "below it")
            elif ratio <= goal and hi > goal:
                v += " by the median; the 90 % interval reaches above the goal"
        rows.append(("Profiled / unprofiled wall time <= %sx (%s)" % (goal, name),
                     "%s `BM_WallRatio/pipeline:%d` `exact_paired_ratio`" % (prog, pipeline),
                     measured, v))
    ns = counter(results, prog, r"BM_SwitchCost/mode:0(/|$)", "switch_ns")
    if ns is None:
        measured, ok = "n/a", None
    else:
        e, smp = r"BM_SwitchCost/mode:0(/|$)", r"BM_SwitchCost/mode:1(/|$)"
        measured = "%.1f ns per switch in exact mode (sampling: %.1f ns; one bare rdtsc, the " \
                   "clock read it makes: %.1f ns); what profiling adds to a pool task as " \
                   "inject-profiling's code runs it (the pool opens its context): %.1f ns exact, " \
                   "%.1f ns sampling on 1 thread, %.1f / %.1f ns on 2 (a task making the calls " \
                   "itself: %.0f ns exact; called directly, without the pool's lingering " \
                   "context: %.0f / %.0f ns)" % (
                       ns, counter(results, prog, smp, "switch_ns"),
                       counter(results, prog, e, "rdtsc_ns"),
                       counter(results, prog, e, "pool_task_ns"),
                       counter(results, prog, smp, "pool_task_ns"),
                       counter(results, prog, e, "pool_task_2threads_ns"),
                       counter(results, prog, smp, "pool_task_2threads_ns"),
                       counter(results, prog, e, "pool_task_calls_ns") or 0.0,
                       counter(results, prog, e, "task_ns"),
                       counter(results, prog, smp, "task_ns"))
        ok = ns <= 10.0
    rows.append(("A slot switch costs <= 10 ns (exact mode)",
                 "%s `BM_SwitchCost/mode:0` `switch_ns`" % prog, measured, verdict(ok)))
    return rows


def constructed_targets(results):
    """Rows for the goals against constructed truth (truth_bench `BM_Constructed`): exact mode's
    error per scenario, with sampling and Halide 21's and 14's profilers side by side; under the
    CPU hog; and the profiling cost beside Halide's (`BM_HalideCost`)."""
    prog = "truth_bench"
    rows = []
    goals = ((0, "long runs accumulated over 21 runs", 0.1),
             (1, "one long run", 0.2),
             (2, "2 ms runs in blocks of 10", 0.3),
             (3, "a single 0.5 ms run", 0.5))
    # Halide 21 primed: one unjudged profiled run right before, so that its sampler has no gap
    # since its last sample to bill to the first Func it samples (see docs/exact-and-sampling.md).
    others = (("sampling", "Tally sampling"), ("halide21", "Halide 21"),
              ("halide21_primed", "Halide 21 primed"), ("halide14", "Halide 14"),
              ("halide14_timer", "Halide 14 profile_by_timer"))
    for scenario, what, goal in goals:
        for pipeline, name in ((0, "truth_chain 10/30/60 %"),
                               (1, "truth_inner, a Func inside another's loop"),
                               (2, "truth_par, a parallel stage with uneven halves")):
            pat = r"BM_Constructed/pipeline:%d/scenario:%d/hog:0(/|$)" % (pipeline, scenario)
            exact = counter(results, prog, pat, "exact_pp")
            target = "Constructed truth, %s (%s): exact error <= %.1f pp, and below every " \
                     "Halide profiler's" % (what, name, goal)
            by = "%s `BM_Constructed/pipeline:%d/scenario:%d/hog:0` `exact_pp`" % (
                prog, pipeline, scenario)
            if exact is None:
                rows.append((target, by, "n/a", verdict(None)))
                continue
            parts = ["exact %.3f pp" % exact]
            worse = []
            for key, label in others:
                v = counter(results, prog, pat, key + "_pp")
                if v is None:
                    parts.append("%s not measured" % label)
                    continue
                parts.append("%s %.2f pp" % (label, v))
                if key != "sampling" and v <= exact:
                    worse.append(label)
            parts.append("construction holds to %+.2f %% (Tally's unprofiled run, less the time "
                         "its calls lost, over the set %.3g ms); the calls lost %.2f %% of the "
                         "set time" % (counter(results, prog, pat, "construction_pct"),
                                       counter(results, prog, pat, "set_ms"),
                                       counter(results, prog, pat, "lost_pct") or 0.0))
            ok = exact <= goal and not worse
            v = verdict(ok)
            if worse:
                v += "; not below %s" % ", ".join(worse)
            rows.append((target, by, "; ".join(parts), v))
    # Under the hog: the same rows again, the truth the set times plus what each stage's calls
    # lost (preemptions, interrupts), checked against the kernel's own run delay.
    for scenario, what, goal in goals:
        for pipeline, name in ((0, "truth_chain"), (1, "truth_inner"), (2, "truth_par")):
            quiet = counter(results, prog, r"BM_Constructed/pipeline:%d/scenario:%d/hog:0(/|$)" %
                            (pipeline, scenario), "exact_pp")
            hog_pat = r"BM_Constructed/pipeline:%d/scenario:%d/hog:1(/|$)" % (pipeline, scenario)
            hog = counter(results, prog, hog_pat, "exact_pp")
            if hog is None or quiet is None:
                continue
            parts = ["exact %.3f pp vs %.3f pp quiet" % (hog, quiet)]
            for key, label in others:
                v = counter(results, prog, hog_pat, key + "_pp")
                if v is not None:
                    parts.append("%s %.2f pp" % (label, v))
            parts.append("construction holds to %+.2f %%; the calls lost %.1f %% of the set time "
                         "(the calling thread's run delay, from the kernel: %.1f %%)" % (
                             counter(results, prog, hog_pat, "construction_pct"),
                             counter(results, prog, hog_pat, "lost_pct"),
                             counter(results, prog, hog_pat, "run_delay_pct") or 0.0))
            rows.append(("Constructed truth under a CPU hog on both cores, %s (%s): exact error "
                         "<= 2x quiet (quiet taken as at least 0.05 pp)" % (what, name),
                         "%s `BM_Constructed/pipeline:%d/scenario:%d/hog:1` `exact_pp`" % (
                             prog, pipeline, scenario), "; ".join(parts),
                         verdict(hog <= 2 * max(quiet, 0.05))))
    for api in ("vulkan", "opencl"):
        rows.extend(constructed_gpu_rows(results, api))
    for version in (21, 14):
        pat = r"BM_HalideCost/halide:%d(/|$)" % version
        tally = counter(results, prog, pat, "tally_paired_ratio")
        halide = counter(results, prog, pat, "halide_paired_ratio")
        target = ("Profiling cost no more than Halide %d's (float_chain as Halide %d lowered it, "
                  "2 threads): profiled / unprofiled wall time" % (version, version))
        by = "%s `BM_HalideCost/halide:%d` `tally_paired_ratio`, `halide_paired_ratio`" % (
            prog, version)
        if tally is None or halide is None:
            rows.append((target, by, "n/a (the Halide %d corpus library not built)" % version,
                         verdict(None)))
            continue
        measured = ("Tally exact %.3fx (90 %% interval %.3f-%.3f), Halide %d %.3fx (%.3f-%.3f), "
                    "each the median of the rounds' ratios; the ratios of the medians: Tally "
                    "%.3fx, Halide %.3fx; unprofiled %.2f ms Tally, %.2f ms Halide" % (
                        tally, counter(results, prog, pat, "tally_paired_ratio_lo"),
                        counter(results, prog, pat, "tally_paired_ratio_hi"), version, halide,
                        counter(results, prog, pat, "halide_paired_ratio_lo"),
                        counter(results, prog, pat, "halide_paired_ratio_hi"),
                        counter(results, prog, pat, "tally_ratio"),
                        counter(results, prog, pat, "halide_ratio"),
                        counter(results, prog, pat, "tally_ms"),
                        counter(results, prog, pat, "halide_ms")))
        v = verdict(tally <= halide)
        if tally > halide and counter(results, prog, pat, "tally_paired_ratio_lo") <= \
                counter(results, prog, pat, "halide_paired_ratio_hi"):
            v = "**not separable** at this noise: the two intervals overlap"
        rows.append((target, by, measured, v))
    return rows


def constructed_gpu_rows(results, api):
    """Rows for truth_gpu on one GPU API, "vulkan" or "opencl" (truth_bench
    `BM_ConstructedGpu/<api>`): each Tally GPU mode's device and host shares against the fenced
    truth, beside Halide 21's `-profile` on its own objects for that API, interleaved with the
    other variants and back to back; and the profiled over plain wall time of each."""
    prog = "truth_bench"
    pat = r"BM_ConstructedGpu/%s(/|$)" % api
    by = "%s `BM_ConstructedGpu/%s`" % (prog, api)
    device = {"vulkan": "Vulkan (lavapipe)", "opencl": "OpenCL (PoCL)"}[api]
    exact = counter(results, prog, pat, "exact_pp")
    target = ("GPU constructed truth (truth_gpu: two device stages and a host stage on %s): "
              "every Tally mode within 2 pp (or within the truth's own 90 %% interval, where that "
              "is wider), interleaved and back to back, and below Halide 21's" % device)
    if exact is None:
        return [(target, by, "n/a (no %s device)" % device, verdict(None))]
    modes = (("exact", "exact"), ("sampling", "sampling"), ("timestamps", "timestamps"))
    worst = 0.0
    parts = []
    for key, label in modes:
        a = counter(results, prog, pat, key + "_pp")
        b = counter(results, prog, pat, key + "_b2b_pp")
        worst = max(worst, a, b)
        parts.append("%s %.2f / %.2f pp" % (label, a, b))
    halide = counter(results, prog, pat, "halide21_pp")
    halide_b2b = counter(results, prog, pat, "halide21_b2b_pp")
    truth_ci = counter(results, prog, pat, "truth_ci_pp")
    ok = worst <= max(2.0, truth_ci)
    v = verdict(ok)
    if ok and worst > 2.0:
        v += " at the truth's precision (its shares known to +-%.2f pp)" % truth_ci
    if halide is None:
        parts.append("Halide 21 not measured")
    else:
        halide_ci = counter(results, prog, pat, "halide_truth_ci_pp")
        parts.append("Halide 21 %.2f / %.2f pp" % (halide, halide_b2b))
        if worst >= halide:
            v = verdict(False) + "; not below Halide 21 interleaved"
        elif worst >= halide_b2b:
            v += ("; Halide 21 back to back is as close (%.2f pp): not separable at the truth's "
                  "precision (+-%.2f pp Tally, +-%.2f pp Halide)" % (halide_b2b, truth_ci,
                                                                  halide_ci))
    parts.append("(interleaved / back to back; truth per run: Tally %s ms, known to +-%.2f pp" % (
        ", ".join("%.1f" % counter(results, prog, pat, "truth_%s_ms" % f)
                  for f in ("ga", "gb", "gc")), truth_ci))
    if halide is not None:
        parts[-1] += "; Halide %s ms, +-%.2f pp" % (", ".join(
            "%.1f" % counter(results, prog, pat, "halide_truth_%s_ms" % f)
            for f in ("ga", "gb", "gc")), counter(results, prog, pat, "halide_truth_ci_pp"))
    parts[-1] += ")"
    rows = [(target, by + " `*_pp`, `*_b2b_pp`, `*truth_ci_pp`", "; ".join(parts), v)]

    def ratio(key):
        # The median of the rounds' ratios, then the ratio of the medians.
        return "%.3fx (%.3f-%.3f; of the medians %.3fx)" % (
            counter(results, prog, pat, key + "_paired_ratio"),
            counter(results, prog, pat, key + "_paired_ratio_lo"),
            counter(results, prog, pat, key + "_paired_ratio_hi"),
            counter(results, prog, pat, key + "_ratio"))
    measured = "; ".join("Tally %s %s" % (label, ratio(key)) for key, label in modes)
    if halide is not None:
        measured += "; Halide 21 %s" % ratio("halide21")
        # Judged on exact mode, Tally's default.
        e = counter(results, prog, pat, "exact_paired_ratio")
        h = counter(results, prog, pat, "halide21_paired_ratio")
        v = verdict(e <= h)
        if e > h and counter(results, prog, pat, "exact_paired_ratio_lo") <= \
                counter(results, prog, pat, "halide21_paired_ratio_hi"):
            v = "**not separable** at this noise: the intervals overlap"
    else:
        v = verdict(None)
    measured += "; plain runs %.1f ms Tally" % counter(results, prog, pat, "tally_ms")
    if halide is not None:
        measured += ", %.1f ms Halide" % counter(results, prog, pat, "halide_ms")
    rows.append(("GPU profiling cost no more than Halide 21's (truth_gpu on %s, judged on "
                 "exact mode): profiled / plain wall time, the median of the rounds' ratios, "
                 "90 %% intervals" % device, by + " `*_paired_ratio`", measured, v))
    return rows


def split_tables(rows):
    """Consecutive rows grouped so that no table has more than MAX_COUNTER_COLUMNS counters."""
    tables, keys = [], []
    for r in rows:
        merged = keys + [k for k in r["counters"] if k not in keys]
        if tables and len(merged) > MAX_COUNTER_COLUMNS:
            tables.append([r])
            keys = list(r["counters"])
        else:
            if not tables:
                tables.append([])
            tables[-1].append(r)
            keys = merged
    return tables


def table_lines(rows):
    keys = []
    for r in rows:
        for k in r["counters"]:
            if k not in keys:
                keys.append(k)
    labels = any(r["label"] for r in rows)
    header = ["Benchmark", "Median wall time", "Median CPU time"] + keys
    if labels:
        header.append("Label")
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join(["---"] + ["---:"] * (len(header) - 1 - labels) +
                            ["---"] * labels) + "|"]
    for r in rows:
        cells = ["`%s`" % r["name"],
                 format_time(r["real_time"], r["unit"]),
                 format_time(r["cpu_time"], r["unit"])]
        for k in keys:
            cells.append(format_counter(k, r["counters"][k]) if k in r["counters"] else "")
        if labels:
            cells.append(r["label"])
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def markdown(results, failures, repetitions, kept=()):
    now = datetime.datetime.now().astimezone()
    lines = [
        "# Benchmark results",
        "",
        "Written by `bench/run_benchmarks.py`; do not edit by hand, except the last section, "
        "\"Earlier findings\", which the script keeps as it is. Each program's method comes from "
        "the header comment of its source.",
        "",
        "- Date: %s" % now.strftime("%Y-%m-%d %H:%M %Z"),
        "- Source: %s" % git_state(),
        "- Machine: %d CPUs available, %s" % (cpu_count(), cpu_model()),
        "- Load average (1, 5, 15 min) when the run ended: %s; before and after each program "
        "below" % load_average(),
        "- Each figure is the median of %d repetitions "
        "(`--benchmark_repetitions=%d --benchmark_report_aggregates_only=true`)." %
        (repetitions, repetitions),
        "",
        "Absolute times depend on the machine and on what else it was running (shared build "
        "machines are noisy; wall time can exceed CPU time when the CPUs are busy, and a load "
        "average near or above the CPU count means the benchmarks shared the CPUs with other "
        "work). What matters are the ratios between benchmarks of one run, e.g. parsing versus "
        "printing the same module, or a pipeline with and without profiling measured in "
        "interleaved runs. Rates (`*_per_second`) are computed from the time the benchmark itself "
        "uses: wall time where it calls `UseRealTime()` (parser_bench does, since the library may "
        "work on a helper thread), CPU time otherwise; manual time (`/manual_time`, apps_bench) "
        "is what the benchmark measured itself.",
        "",
    ]
    target_rows = targets(results)
    if target_rows:
        lines += [
            "## Targets",
            "",
            "Checked automatically against the medians below, on this machine and under the load "
            "noted above: a target missed here under heavy load may be met on a quiet machine, "
            "and the other way round for noise that happens to favour it.",
            "",
            "| Target | Measured by | Measured | Verdict |",
            "|---|---|---|---|",
        ]
        for t in target_rows:
            lines.append("| %s | %s | %s | %s |" % t)
        lines.append("")
    for program, info in results:
        lines += program_section(program, info)
    if failures:
        lines.append("## Failures")
        lines.append("")
        for program, why in failures:
            lines.append("- `%s`: %s" % (program, why.replace("\n", " ")))
        lines.append("")
    lines += list(kept)
    return "\n".join(lines).rstrip("\n") + "\n"


def program_section(program, info):
    """The Markdown lines of one program's section."""
    rows = info["rows"]
    lines = ["## %s" % program, ""]
    lines += method_lines(program)
    if info.get("merged"):
        lines += ["Measured %s (source: %s) and merged into this file with `--only`." %
                  (info["merged"], git_state()), ""]
    lines += ["Ran for %.1f s; load average before %s, after %s." %
              (info["seconds"], info["load_before"], info["load_after"]), ""]
    if not rows:
        lines += ["(no benchmarks ran)", ""]
    for table in split_tables(rows):
        lines += table_lines(table)
        lines.append("")
    if info["skipped"]:
        lines += ["Skipped:", ""]
        for name, why in info["skipped"]:
            lines.append("- `%s`: %s" % (name, why))
        lines.append("")
    return lines


def merge(old_text, results):
    """The existing RESULTS.md with the sections of the programs in `results` replaced (or
    appended) and their Targets rows replaced (or appended to the table)."""
    lines = old_text.splitlines()
    programs = [p for p, _ in results]
    # Targets rows: drop the old ones measured by these programs, append the new ones.
    new_rows = [t for t in targets(results)
                if any(t[1].startswith(p + " ") for p in programs)]
    out, in_targets, table_end = [], False, None
    for line in lines:
        if line.startswith("## "):
            in_targets = line == "## Targets"
        if in_targets and line.startswith("| ") and any(
                ("| %s `" % p) in line for p in programs):
            continue
        out.append(line)
        if in_targets and line.startswith("|"):
            table_end = len(out)
    if table_end is not None:
        out[table_end:table_end] = ["| %s | %s | %s | %s |" % t for t in new_rows]
    # Sections.
    for program, info in results:
        section = program_section(program, info)
        start = next((i for i, l in enumerate(out) if l == "## %s" % program), None)
        if start is None:
            at = next((i for i, l in enumerate(out) if l in ("## Failures", KEPT_SECTION)),
                      len(out))
            if at == len(out) and out and out[-1] != "":
                out.append("")
                at = len(out)
            out[at:at] = section
        else:
            end = next((i for i in range(start + 1, len(out)) if out[i].startswith("## ")),
                       len(out))
            out[start:end] = section
    return "\n".join(out).rstrip("\n") + "\n"


def kept_section(old_text):
    """The lines of the hand-written last section of an existing RESULTS.md, or []."""
    lines = old_text.splitlines()
    start = next((i for i, l in enumerate(lines) if l == KEPT_SECTION), None)
    if start is None:
        return []
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
               len(lines))
    return lines[start:end]


def rewrite_methods(old_text):
    """The existing RESULTS.md with each program section's method (the lines between its heading
    and the first line the script writes after the method) rewritten from its source."""
    lines = old_text.splitlines()
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        if not line.startswith("## ") or line in ("## Targets", "## Failures", KEPT_SECTION):
            continue
        program = line[3:]
        end, fenced = i, False
        while end < len(lines) and not lines[end].startswith("## "):
            if lines[end].startswith("```"):
                fenced = not fenced
            elif not fenced and lines[end].startswith(("Measured ", "Ran for ")):
                break
            end += 1
        if end == len(lines) or lines[end].startswith("## "):
            continue  # not a section this script wrote: keep it
        out += [""] + method_lines(program)
        i = end
    return "\n".join(out).rstrip("\n") + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir", nargs="?", help="the CMake build directory")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--filter", default="", help="passed as --benchmark_filter")
    parser.add_argument("--only", default="",
                        help="comma-separated programs to run; their sections and Targets rows "
                             "replace those of the existing --out file")
    parser.add_argument("--out", default=str(BENCH_DIR / "RESULTS.md"),
                        help="where to write the Markdown (default: bench/RESULTS.md)")
    parser.add_argument("--methods-only", action="store_true",
                        help="run nothing: rewrite the --out file's methods from the sources' "
                             "header comments")
    args = parser.parse_args()

    if args.methods_only:
        Path(args.out).write_text(rewrite_methods(Path(args.out).read_text()))
        print("wrote %s" % args.out, file=sys.stderr)
        return 0
    if not args.build_dir:
        parser.error("BUILD_DIR is required (unless --methods-only)")

    programs = find_programs(args.build_dir)
    only = [p for p in args.only.split(",") if p]
    if only:
        programs = [p for p in programs if p.name in only]
    if not programs:
        print("no benchmark programs in %s/bench" % args.build_dir, file=sys.stderr)
        return 1

    results, failures = [], []
    for program in programs:
        load_before = load_average()
        start = time.monotonic()
        report, error = run_program(program, args.repetitions, args.filter)
        if error:
            failures.append((program.name, error))
            print("%s failed: %s" % (program.name, error), file=sys.stderr)
            continue
        results.append((program.name, {
            "rows": median_rows(report),
            "skipped": skipped_rows(report),
            "seconds": time.monotonic() - start,
            "load_before": load_before,
            "load_after": load_average(),
            "merged": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
                      if only else None,
        }))

    old_text = Path(args.out).read_text() if Path(args.out).exists() else ""
    if only and old_text and not failures:
        text = merge(old_text, results)
    else:
        text = markdown(results, failures, args.repetitions, kept_section(old_text))
    Path(args.out).write_text(text)
    print("wrote %s" % args.out, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
