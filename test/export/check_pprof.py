#!/usr/bin/env python3
"""The pprof and folded-stack exports, read back by their real consumer.

Runs a profiled pipeline with tally-run (fixed --runs) with TALLY_PROFILE_JSON,
TALLY_PROFILE_PPROF and TALLY_PROFILE_FOLDED set, then decodes the profile with
`go tool pprof -raw` and `go tool pprof -top` and checks that it holds the report's numbers:
  - -raw: the sample types, one sample per slot with a nonzero value, its stack (pipeline ; Func
    [; copy]) and its eight values equal to the JSON's (time_ns, samples, heap allocs and bytes,
    device allocs and bytes, copies and copy bytes), its target/mode/kind labels, and nothing else;
  - -top (time, then alloc_space): the total and each function's flat value equal the JSON's
    sums;
  - the folded file: one line per slot with time, its stack and time_ns.
Every comparison is exact: the three files come from the same process.

Exit status 0 on success, 1 on a mismatch (printed), 77 (ctest SKIP_RETURN_CODE) when `go` is
absent. Go runs offline with its caches inside --work (GOCACHE, GOPATH, HOME), GOFLAGS=-mod=mod
and GOTOOLCHAIN=local.

Usage: check_pprof.py --tally-run BIN --work DIR [--go GO] -- PIPELINE.stmt ARGS...
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

SAMPLE_TYPES = ["time/nanoseconds", "samples/count", "alloc_objects/count", "alloc_space/bytes",
                "device_alloc_objects/count", "device_alloc_space/bytes", "copies/count",
                "copy_space/bytes"]
KIND_LABEL = {"func": "func", "copy_to_device": "copy_to_device", "copy_to_host": "copy_to_host"}
COPY_LEAF = {"copy_to_device": "copy to device", "copy_to_host": "copy to host"}

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)


def expected_stack(pipeline, slot):
    """The stack of a slot, root first (the rule of tally_runtime.h's export section)."""
    if slot["kind"] == "func":
        return [pipeline["name"], slot["name"]]
    parents = [s["name"] for s in pipeline["slots"]
               if s["kind"] == "func" and s["id"] != 0 and slot["name"].startswith(s["name"] + " ")]
    if parents:
        return [pipeline["name"], max(parents, key=len), COPY_LEAF[slot["kind"]]]
    return [pipeline["name"], slot["name"]]


def slot_values(slot):
    return [slot["time_ns"], slot["samples"], slot["heap"]["allocs"], slot["heap"]["bytes"],
            slot["device"]["allocs"], slot["device"]["bytes"], slot["copies"], slot["copy_bytes"]]


def parse_raw(text):
    """Returns (sample type header, [(values, [location ids], labels text)], {id: name})."""
    lines = text.splitlines()
    i = lines.index("Samples:")
    header = lines[i + 1].split()
    samples, names = [], {}
    i += 2
    while lines[i] != "Locations":
        m = re.match(r"^((?:\s+-?\d+)+): ((?:\d+ )*)$", lines[i])
        if not m:
            raise ValueError("unexpected sample line: %r" % lines[i])
        values = [int(v) for v in m.group(1).split()]
        ids = [int(v) for v in m.group(2).split()]
        labels = ""
        while lines[i + 1].startswith("                "):
            i += 1
            labels += lines[i].strip() + " "
        samples.append((values, ids, labels))
        i += 1
    i += 1
    while i < len(lines) and lines[i] != "Mappings":
        # go1.19 prints "name :0 s=0", newer pprof adds the column: "name :0:0 s=0".
        m = re.match(r"^\s*(\d+): 0x[0-9a-f]+ (?:M=\d+ )?(.*) :0(?::0)? s=0$", lines[i])
        if not m:
            raise ValueError("unexpected location line: %r" % lines[i])
        names[int(m.group(1))] = m.group(2)
        i += 1
    return header, samples, names


def parse_top(text, unit):
    """Returns (total, {function: flat}) from `-top -unit=<unit>` output."""
    total = None
    flat = {}
    for line in text.splitlines():
        m = re.match(r"^Showing nodes accounting for .* of (\d+)%s total" % unit, line)
        if m:
            total = int(m.group(1))
        m = re.match(r"^\s*(\d+)%s\s+\S+%%\s+\S+%%\s+(\d+)%s\s+\S+%%\s+(.*)$" % (unit, unit), line)
        if m:
            flat[m.group(3)] = int(m.group(1))
    return total, flat


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tally-run", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--go", default=shutil.which("go"))
    ap.add_argument("run_args", nargs="+")
    args = ap.parse_args()
    if not args.go or not os.path.exists(args.go):
        print("SKIP: go not found (install Debian golang-go: ./run.sh deps)")
        return 77

    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "home"))
    files = {k: os.path.join(work, f) for k, f in
             [("json", "report.json"), ("pprof", "profile.pb.gz"), ("folded", "stacks.folded"),
              ("text", "report.txt")]}
    env = dict(os.environ, TALLY_PROFILE_JSON=files["json"], TALLY_PROFILE_PPROF=files["pprof"],
               TALLY_PROFILE_FOLDED=files["folded"], TALLY_PROFILE_OUTPUT=files["text"])
    subprocess.run([args.tally_run] + args.run_args, env=env, check=True)
    report = json.load(open(files["json"]))

    go_env = dict(os.environ, GOCACHE=os.path.join(work, "gocache"),
                  GOPATH=os.path.join(work, "gopath"), HOME=os.path.join(work, "home"),
                  GOFLAGS="-mod=mod", GOTOOLCHAIN="local", GOPROXY="off", GO111MODULE="on")

    def pprof(*opts):
        cmd = [args.go, "tool", "pprof", "-symbolize=none"] + list(opts) + [files["pprof"]]
        r = subprocess.run(cmd, env=go_env, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("FAIL: %s exited with %d:\n%s" % (" ".join(cmd), r.returncode, r.stderr))
        return r.stdout

    # -raw: every sample, exactly.
    header, samples, names = parse_raw(pprof("-raw"))
    check([h.replace("[dflt]", "") for h in header] == SAMPLE_TYPES,
          "sample types %s, expected %s" % (header, SAMPLE_TYPES))
    check(header[0].endswith("[dflt]"), "time is not the default sample type: %s" % header)
    got = {}
    for values, ids, labels in samples:
        stack = tuple(names[i] for i in reversed(ids))
        check(stack not in got, "two samples for the stack %s" % (stack,))
        got[stack] = (values, labels)
    expected = {}
    for p in report["pipelines"]:
        mode = p["mode"]  # the report's mode name is the label's value
        for s in p["slots"]:
            values = slot_values(s)
            if any(values):
                expected[tuple(expected_stack(p, s))] = (values, p["target"], mode, s["kind"],
                                                          p["runs"])
    check(set(got) == set(expected),
          "stacks differ: only in pprof %s, only in the report %s" %
          (sorted(set(got) - set(expected)), sorted(set(expected) - set(got))))
    for stack, (values, target, mode, kind, runs) in expected.items():
        if stack not in got:
            continue
        gvalues, labels = got[stack]
        check(gvalues == values, "%s: pprof values %s, report %s" % (";".join(stack), gvalues,
                                                                      values))
        for label in ["target:[%s]" % target, "mode:[%s]" % mode, "kind:[%s]" % KIND_LABEL[kind],
                      "runs:[%d]" % runs]:
            check(label in labels, "%s: label %s missing from %r" % (";".join(stack), label,
                                                                    labels))

    # -top: totals and flat values per function, for time, heap bytes and copied bytes.
    checked_top = []
    for index, unit, key in [("time", "ns", lambda s: s["time_ns"]),
                             ("alloc_space", "B", lambda s: s["heap"]["bytes"]),
                             ("copy_space", "B", lambda s: s["copy_bytes"])]:
        want_flat = {}
        for p in report["pipelines"]:
            for s in p["slots"]:
                leaf = expected_stack(p, s)[-1]
                want_flat[leaf] = want_flat.get(leaf, 0) + key(s)
        want_total = sum(want_flat.values())
        if want_total == 0:
            continue  # pprof prints an empty profile without units: nothing to compare
        checked_top.append(index)
        total, flat = parse_top(pprof("-top", "-sample_index=" + index, "-unit=" + unit,
                                      "-nodefraction=0", "-nodecount=100000"), unit)
        check(total == want_total, "-top %s: total %s, report %d" % (index, total, want_total))
        want_flat = {k: v for k, v in want_flat.items() if v}
        got_flat = {k: v for k, v in flat.items() if v}
        check(got_flat == want_flat, "-top %s: flat %s, report %s" % (index, got_flat, want_flat))

    # Folded stacks: the same stacks and times.
    folded = {}
    for line in open(files["folded"]).read().splitlines():
        stack, _, count = line.rpartition(" ")
        folded[tuple(stack.split(";"))] = int(count)
    want_folded = {k: v[0][0] for k, v in expected.items() if v[0][0]}
    check(folded == want_folded, "folded %s, report %s" % (folded, want_folded))
    check(len(want_folded) >= 2, "the run billed time to fewer than two slots: %s" % want_folded)

    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("OK: %d samples, %d pipelines, -top checked for %s" %
              (len(samples), len(report["pipelines"]), ", ".join(checked_top)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
