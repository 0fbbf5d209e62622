#!/usr/bin/env python3
"""Runs every Google Benchmark program in a build's bench/ folder and writes bench/RESULTS.md.

Usage: bench/run_benchmarks.py BUILD_DIR [--repetitions N] [--out PATH] [--filter REGEX]

Each executable file directly inside BUILD_DIR/bench is run with
  --benchmark_format=json --benchmark_repetitions=N --benchmark_report_aggregates_only=true
and the median of each benchmark goes into one Markdown table per program, with the machine
(CPU count and model) and the date. Programs that fail are listed with their exit status; the
script then exits non-zero, after writing what it has.
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

# Keys of a benchmark's JSON record that are not user counters.
STANDARD_KEYS = {
    "name", "family_index", "per_family_instance_index", "run_name", "run_type", "repetitions",
    "repetition_index", "threads", "iterations", "real_time", "cpu_time", "time_unit",
    "aggregate_name", "aggregate_unit", "error_occurred", "error_message", "label",
}


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
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        return None, "exit status %d: %s" % (proc.returncode, proc.stderr.strip()[-500:])
    try:
        return json.loads(proc.stdout), None
    except json.JSONDecodeError as e:
        return None, "unreadable JSON output (%s)" % e


def median_rows(report):
    rows = []
    for b in report.get("benchmarks", []):
        if b.get("run_type") != "aggregate" or b.get("aggregate_name") != "median":
            continue
        counters = {k: v for k, v in b.items()
                    if k not in STANDARD_KEYS and isinstance(v, (int, float))}
        rows.append({
            "name": b.get("run_name", b["name"]),
            "real_time": b["real_time"],
            "cpu_time": b["cpu_time"],
            "unit": b.get("time_unit", "ns"),
            "counters": counters,
        })
    return rows


def markdown(results, failures, repetitions):
    now = datetime.datetime.now().astimezone()
    lines = [
        "# Benchmark results",
        "",
        "Written by `bench/run_benchmarks.py`; do not edit by hand.",
        "",
        "- Date: %s" % now.strftime("%Y-%m-%d %H:%M %Z"),
        "- Machine: %d CPUs available, %s" % (cpu_count(), cpu_model()),
        "- Load average when the run ended: %s" % load_average(),
        "- Each figure is the median of %d repetitions "
        "(`--benchmark_repetitions=%d --benchmark_report_aggregates_only=true`)." %
        (repetitions, repetitions),
        "",
        "Absolute times depend on the machine and on what else it was running (shared build "
        "machines are noisy; wall time can exceed CPU time when the CPUs are busy). What matters "
        "are the ratios between benchmarks of one run, e.g. parsing versus printing the same "
        "module. Rates (`*_per_second`) are computed from the time the benchmark itself uses: wall "
        "time where it calls `UseRealTime()` (parser_bench does, since the library may work on a "
        "helper thread), CPU time otherwise.",
        "",
    ]
    for program, rows in results:
        lines.append("## %s" % program)
        lines.append("")
        if not rows:
            lines.append("(no benchmarks ran)")
            lines.append("")
            continue
        keys = []
        for r in rows:
            for k in r["counters"]:
                if k not in keys:
                    keys.append(k)
        header = ["Benchmark", "Median wall time", "Median CPU time"] + keys
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
        for r in rows:
            cells = ["`%s`" % r["name"],
                     format_time(r["real_time"], r["unit"]),
                     format_time(r["cpu_time"], r["unit"])]
            for k in keys:
                cells.append(format_counter(k, r["counters"][k]) if k in r["counters"] else "")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    if failures:
        lines.append("## Failures")
        lines.append("")
        for program, why in failures:
            lines.append("- `%s`: %s" % (program, why.replace("\n", " ")))
        lines.append("")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir", help="the CMake build directory")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--filter", default="", help="passed as --benchmark_filter")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "RESULTS.md"),
                        help="where to write the Markdown (default: bench/RESULTS.md)")
    args = parser.parse_args()

    programs = find_programs(args.build_dir)
    if not programs:
        print("no benchmark programs in %s/bench" % args.build_dir, file=sys.stderr)
        return 1

    results, failures = [], []
    for program in programs:
        report, error = run_program(program, args.repetitions, args.filter)
        if error:
            failures.append((program.name, error))
            print("%s failed: %s" % (program.name, error), file=sys.stderr)
            continue
        results.append((program.name, median_rows(report)))

    text = markdown(results, failures, args.repetitions)
    Path(args.out).write_text(text)
    print("wrote %s" % args.out, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
