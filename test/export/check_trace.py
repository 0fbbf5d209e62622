#!/usr/bin/env python3
"""The timeline export (TALLY_PROFILE_TRACE), checked against the rules its importers apply.

Runs a profiled pipeline with tally-run (fixed --runs) with TALLY_PROFILE_TRACE and
TALLY_PROFILE_JSON set, then reads the trace as Perfetto's JSON importer and chrome://tracing
would and fails on anything they would drop, misplace or reject:
  - the object form: "traceEvents" (a list), "displayTimeUnit" "ns", "otherData" with
    "dropped_events" 0 (the default ring size must hold a shipped app's run);
  - every event has a known phase and integer pid and tid; every ts, dur and counter value is a
    finite number (JSON has no NaN or Infinity, and Python's parser is told to reject them);
    ts and dur (microseconds) are then taken to whole nanoseconds as Perfetto's importer does;
  - every X has dur >= 0, and the X slices of one track nest properly (a slice starting inside
    another ends inside it);
  - every flow id has exactly one `s` and one `f`, sharing cat and name; the `s` lies inside an X
    slice of a host thread track and the `f` (with "bp":"e") inside an X slice of a device track of
    the same process, and the two slices carry the same slot name (the Func that launched the
    kernel);
  - every pid is named by a process_name M event and every (pid, tid) an event uses by a
    thread_name M event;
  - C events carry numeric args;
  - the names on the host tracks are the report's slot names (or one-time rows), the process
    names the report's pipelines, and every Func the report gives time gets at least one slice.
With --expect-device: the pipeline has a device track with slices, and exactly one flow from a
Func slice per kernel launch the report counts (at most one from a copy slice per copy: a copy
through mapped memory puts nothing on the queue); lavapipe and PoCL run them here. With
--expect-device=TRACK, one of the device tracks is named TRACK ("Vulkan queue", "OpenCL queue").

Exit status 0 on success, 1 on a mismatch (each printed).

Usage: check_trace.py --tally-run BIN --work DIR [--expect-device[=TRACK]] -- PIPELINE.stmt ARGS...
       check_trace.py --self-test   (each rule against a small trace broken in that one way)
"""

import argparse
import bisect
import json
import math
import os
import shutil
import subprocess
import sys
from collections import defaultdict

PHASES = {"X", "M", "C", "s", "f"}
ONE_TIME = {"device init (one-time)", "kernel compilation (one-time)"}

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
    return cond


def reject_constant(name):
    raise ValueError("non-finite number in the trace: " + name)


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def enclosing(slices, starts, t):
    """The innermost slice of a track (sorted by start, starts their ts) that contains t, or None.
    Looks back from the last slice starting at or before t, past the slices nested in others."""
    i = bisect.bisect_right(starts, t) - 1
    while i >= 0:
        s = slices[i]
        if s["ts"] <= t <= s["ts"] + s["dur"]:
            return s
        i -= 1
        if i >= 0 and slices[i]["ts"] + slices[i]["dur"] < s["ts"]:
            break  # nothing earlier can reach past t: slices nest
    return None


def check_trace(trace, report, expect_device):
    check(isinstance(trace, dict), "the trace is not a JSON object")
    events = trace.get("traceEvents")
    if not check(isinstance(events, list), "no traceEvents list"):
        return
    check(trace.get("displayTimeUnit") == "ns", "displayTimeUnit is not \"ns\"")
    other = trace.get("otherData", {})
    check(other.get("dropped_events") == 0,
          "dropped_events is %r, expected 0 at the default ring size" % other.get("dropped_events"))

    process_names = {}
    thread_names = {}
    used_tracks = set()
    slices = defaultdict(list)  # (pid, tid) -> X events
    flows = defaultdict(list)
    for i, e in enumerate(events):
        where = "event %d (%s)" % (i, json.dumps(e)[:200])
        ph = e.get("ph")
        if not check(ph in PHASES, where + ": unknown phase"):
            continue
        if not check(isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int),
                     where + ": pid and tid must be integers"):
            continue
        track = (e["pid"], e["tid"])
        if ph == "M":
            name = e.get("args", {}).get("name") if e.get("name") != "process_labels" else ""
            check(isinstance(name, str), where + ": a metadata name must be a string")
            if e.get("name") == "process_name":
                process_names[e["pid"]] = name
            elif e.get("name") == "thread_name":
                thread_names[track] = name
            continue
        used_tracks.add(track)
        if not check(is_number(e.get("ts")), where + ": ts is not a finite number"):
            continue
        # Microseconds to integer nanoseconds, as Perfetto's importer converts them
        # (llround(ts * 1000)): nesting is then decided on the nanoseconds the file means.
        e["ts_us"] = float(e["ts"])
        e["ts"] = round(e["ts"] * 1000)
        if ph == "X":
            if not check(is_number(e.get("dur")), where + ": X without a numeric dur"):
                continue
            # The end as readers that keep microseconds in doubles compute it (speedscope,
            # chrome://tracing): ts + dur in double arithmetic.
            e["dur_us"] = float(e["dur"])
            e["end_us"] = e["ts_us"] + e["dur_us"]
            e["dur"] = round(e["dur"] * 1000)
            check(e["dur"] >= 0, where + ": negative dur")
            check(isinstance(e.get("name"), str), where + ": X without a name")
            slices[track].append(e)
        elif ph == "C":
            args = e.get("args")
            check(isinstance(args, dict) and args and all(is_number(v) for v in args.values()),
                  where + ": counter args must be numbers")
        else:
            key = (e.get("cat"), e.get("name"), e.get("id"))
            check(e.get("id") is not None, where + ": flow without an id")
            flows[key].append(e)

    # Names.
    for pid, _ in used_tracks:
        check(pid in process_names, "pid %d has no process_name" % pid)
    for track in used_tracks:
        check(track in thread_names, "pid %d tid %d has no thread_name" % track)

    # Nesting, per track.
    for track, xs in slices.items():
        xs.sort(key=lambda s: (s["ts"], -s["dur"]))
        stack = []
        for s in xs:
            end = s["ts"] + s["dur"]
            while stack and stack[-1] <= s["ts"]:
                stack.pop()
            if stack:
                check(end <= stack[-1], "track %s: slice %r [%s, %s] overlaps its parent's end %s"
                      % (track, s["name"], s["ts"], end, stack[-1]))
            stack.append(end)

    # The same in doubles, as readers that keep microseconds in doubles compute it: a slice that
    # ends where the next starts must not end a rounding error past it (speedscope nests every
    # following slice inside such a one). Both ts + dur, and speedscope's (ts - origin) + dur
    # against next ts - origin, origin being the track's earliest ts.
    for track, xs in slices.items():
        origin = min(s["ts_us"] for s in xs)
        for shift in (0.0, origin):
            stack = []
            for s in sorted(xs, key=lambda s: (s["ts_us"], -s["end_us"])):
                start = s["ts_us"] - shift
                end = start + s["dur_us"]
                while stack and stack[-1] <= start:
                    stack.pop()
                if stack:
                    check(end <= stack[-1],
                          "track %s: slice %r [%r, %r] ends past its parent's end %r in double "
                          "arithmetic (less the origin %r)"
                          % (track, s["name"], start, end, stack[-1], shift))
                stack.append(end)

    starts = {track: [x["ts"] for x in xs] for track, xs in slices.items()}

    def is_device(track):
        name = thread_names.get(track, "")
        return name.endswith(" queue") or name.endswith(" stream")

    # Flows.
    num_flows = 0
    launched = defaultdict(int)  # pid -> flows from a Func slice (kernel launches)
    copied = defaultdict(int)    # pid -> flows from a copy slice (staged copies)
    for key, fs in flows.items():
        phases = sorted(f["ph"] for f in fs)
        if not check(phases == ["f", "s"], "flow %s: phases %s, expected one s and one f"
                     % (key, phases)):
            continue
        num_flows += 1
        s = next(f for f in fs if f["ph"] == "s")
        f = next(f for f in fs if f["ph"] == "f")
        check(f.get("bp") == "e", "flow %s: the f event must bind to its enclosing slice" % (key,))
        src_track, dst_track = (s["pid"], s["tid"]), (f["pid"], f["tid"])
        check(not is_device(src_track), "flow %s starts on a device track" % (key,))
        check(is_device(dst_track), "flow %s ends on %r, not a device track"
              % (key, thread_names.get(dst_track)))
        check(src_track[0] == dst_track[0], "flow %s crosses processes" % (key,))
        src = enclosing(slices[src_track], starts.get(src_track, []), s["ts"])
        dst = enclosing(slices[dst_track], starts.get(dst_track, []), f["ts"])
        check(src is not None, "flow %s: no slice on %s encloses its start %s"
              % (key, src_track, s["ts"]))
        check(dst is not None, "flow %s: no slice on %s encloses its end %s"
              % (key, dst_track, f["ts"]))
        if src and dst:
            check(src["name"] == dst["name"], "flow %s: launched in %r, lands on %r"
                  % (key, src["name"], dst["name"]))
            if src.get("cat") == "func":
                launched[src_track[0]] += 1
            else:
                copied[src_track[0]] += 1

    # Against the report of the same process.
    pipelines = {p["name"]: p for p in report["pipelines"]}
    check(set(process_names.values()) == set(pipelines),
          "processes %s, report pipelines %s" % (sorted(process_names.values()), sorted(pipelines)))
    for pid, pname in process_names.items():
        p = pipelines.get(pname)
        if not p:
            continue
        slot_names = {s["name"] for s in p["slots"]}
        host = [t for t in slices if t[0] == pid and not is_device(t)]
        device = [t for t in slices if t[0] == pid and is_device(t)]
        seen = {x["name"] for t in host for x in slices[t]}
        check(seen <= slot_names | ONE_TIME, "pipeline %s: host slices %s are not slots"
              % (pname, sorted(seen - slot_names - ONE_TIME)))
        for s in p["slots"]:
            if s["kind"] == "func" and s["time_ns"] > 0 and s["id"] != 0:
                check(s["name"] in seen, "pipeline %s: Func %r has time but no slice"
                      % (pname, s["name"]))
        dev_names = {x["name"] for t in device for x in slices[t]}
        check(dev_names <= slot_names, "pipeline %s: device slices %s are not slots"
              % (pname, sorted(dev_names - slot_names)))
        if expect_device:
            check(device and sum(len(slices[t]) for t in device) > 0,
                  "pipeline %s: no device track with slices" % pname)
            # One flow per kernel launch, one at most per copy (a copy through mapped memory
            # puts no command on the queue).
            check(launched[pid] == p["kernel_launches"],
                  "pipeline %s: %d flows from Func slices, %d kernel launches"
                  % (pname, launched[pid], p["kernel_launches"]))
            copies = p["copies_to_device"] + p["copies_to_host"]
            check(copied[pid] <= copies, "pipeline %s: %d flows from copy slices, %d copies"
                  % (pname, copied[pid], copies))
    if expect_device:
        check(num_flows > 0, "no launch -> kernel flow")
    return num_flows


def self_test():
    """The checker against small traces, each broken in one way it must catch (and one that is
    valid): a checker that passes everything would prove nothing about the real files."""
    report = {"pipelines": [{"name": "p", "kernel_launches": 1, "copies_to_device": 0,
                             "copies_to_host": 0,
                             "slots": [{"id": 0, "name": "overhead", "kind": "func", "time_ns": 1},
                                       {"id": 1, "name": "f", "kind": "func", "time_ns": 1}]}]}

    def base():
        return {"traceEvents": [
            {"ph": "M", "pid": 1, "tid": 0, "name": "process_name", "args": {"name": "p"}},
            {"ph": "M", "pid": 1, "tid": 1, "name": "thread_name", "args": {"name": "host thread 1"}},
            {"ph": "M", "pid": 1, "tid": 1000, "name": "thread_name",
             "args": {"name": "Vulkan queue"}},
            {"ph": "X", "pid": 1, "tid": 1, "ts": 0.0, "dur": 10.0, "name": "f", "cat": "func"},
            {"ph": "s", "pid": 1, "tid": 1, "ts": 2.0, "name": "launch", "cat": "launch", "id": 1},
            {"ph": "X", "pid": 1, "tid": 1000, "ts": 3.0, "dur": 4.0, "name": "f",
             "cat": "device"},
            {"ph": "f", "pid": 1, "tid": 1000, "ts": 5.0, "name": "launch", "cat": "launch",
             "id": 1, "bp": "e"},
            {"ph": "C", "pid": 1, "tid": 1, "ts": 1.0, "name": "heap", "args": {"bytes": 4}}],
            "displayTimeUnit": "ns", "otherData": {"dropped_events": 0}}

    def broken(change):
        t = base()
        change(t["traceEvents"])
        return t

    cases = [
        ("valid", base(), None),
        ("negative dur", broken(lambda e: e[3].update(dur=-1.0)), "negative dur"),
        ("X without dur", broken(lambda e: e[3].pop("dur")), "X without a numeric dur"),
        ("improper nesting", broken(lambda e: e.append(
            {"ph": "X", "pid": 1, "tid": 1, "ts": 5.0, "dur": 10.0, "name": "f", "cat": "func"})),
         "overlaps its parent's end"),
        ("ts + dur a rounding error past the next ts", broken(lambda e: e.extend([
            {"ph": "X", "pid": 1, "tid": 1, "ts": 10.3, "dur": 0.3, "name": "f", "cat": "func"},
            {"ph": "X", "pid": 1, "tid": 1, "ts": 10.6, "dur": 1.0, "name": "f",
             "cat": "func"}])), "in double arithmetic"),
        ("unnamed thread", broken(lambda e: e[1].update(tid=7)), "tid 1 has no thread_name"),
        ("unnamed process", broken(lambda e: e.pop(0)), "has no process_name"),
        ("flow end missing", broken(lambda e: e.pop(6)), "expected one s and one f"),
        ("flow start outside a slice", broken(lambda e: e[4].update(ts=20.0)),
         "no slice on (1, 1) encloses its start"),
        ("flow ends on a host track", broken(lambda e: e[6].update(tid=1)),
         "not a device track"),
        ("flow name differs", broken(lambda e: e[6].update(name="other")),
         "expected one s and one f"),
        ("counter not numeric", broken(lambda e: e[7].update(args={"bytes": "4"})),
         "counter args must be numbers"),
        ("no launch flow", broken(lambda e: [e.pop(6), e.pop(4)]), "flows from Func slices"),
        ("dropped events", dict(base(), otherData={"dropped_events": 3}), "dropped_events is 3"),
    ]
    bad = 0
    for name, trace, want in cases:
        failures.clear()
        check_trace(json.loads(json.dumps(trace)), report, True)
        caught = [f for f in failures if want and want in f]
        ok = not failures if want is None else bool(caught)
        if not ok:
            bad += 1
            print("SELF-TEST FAIL: %s: expected %s, got %s" % (name, want or "no failure",
                                                              failures or "no failure"))
    failures.clear()
    if bad:
        return 1
    print("OK: %d self-test cases" % len(cases))
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    ap = argparse.ArgumentParser()
    ap.add_argument("--tally-run", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--expect-device", nargs="?", const="", default=None, metavar="TRACK",
                    help="a device track with slices (named TRACK, when given)")
    ap.add_argument("run_args", nargs="+")
    args = ap.parse_args()

    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    files = {k: os.path.join(work, f) for k, f in
             [("json", "report.json"), ("trace", "trace.json"), ("text", "report.txt")]}
    env = dict(os.environ, TALLY_PROFILE_JSON=files["json"], TALLY_PROFILE_TRACE=files["trace"],
               TALLY_PROFILE_OUTPUT=files["text"], MESA_SHADER_CACHE_DISABLE="true")
    env.pop("TALLY_PROFILE_TRACE_EVENTS", None)
    subprocess.run([args.tally_run] + args.run_args, env=env, check=True)
    report = json.load(open(files["json"]))
    with open(files["trace"]) as f:
        trace = json.load(f, parse_constant=reject_constant)
    num_flows = check_trace(trace, report, args.expect_device is not None)
    if args.expect_device:
        names = {e["args"]["name"] for e in trace["traceEvents"]
                 if e.get("ph") == "M" and e.get("name") == "thread_name"}
        check(args.expect_device in names, "no device track named %r (tracks: %s)"
              % (args.expect_device, sorted(names)))
    check(report.get("trace", {}).get("dropped_events") == 0,
          "the report's trace.dropped_events is %r" % report.get("trace"))
    check("trace: 0 events dropped" in open(files["text"]).read(),
          "the text report does not say 'trace: 0 events dropped'")

    if failures:
        for msg in failures:
            print("FAIL: " + msg)
        print("%d failure(s); the trace is in %s" % (len(failures), files["trace"]))
        return 1
    print("OK: %d events, %d flows" % (len(trace["traceEvents"]), num_flows or 0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
