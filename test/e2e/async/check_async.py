#!/usr/bin/env python3
"""Runs Halide's async pipelines (fork and acquire) through tally-run and checks their outputs
against numpy, and their profiles' Func rows.

  check_async.py --bin DIR --work DIR

- async_fork.conceptual.stmt (Halide 21's conceptual statement, see its first lines): on host and
  host-profile, async_out must be sin(input) + cos(input) and the profile must name prod_a,
  prod_b and async_out;
- wait_chain.stmt (tasks that wait on each other's semaphores): many runs at 1, 2 and 8 threads,
  and profiled, every output exactly (in + 1) * 2 + 1.
A deadlock shows as a run that does not finish within its timeout; a race as a wrong output.
Neither depends on timing: the checks are of values only.
"""
import argparse
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# A hang's limit, not a speed check: on a loaded 2-core machine every semaphore hand-off waits for
# a core, and one command of 500 runs took over 120 s with four other processes running.
TIMEOUT_S = 480


def run(cmd, env_extra=None):
    env = dict(os.environ, MESA_SHADER_CACHE_DISABLE="true", TALLY_PROFILE_OUTPUT="stdout")
    env.update(env_extra or {})
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        sys.exit("FAIL (deadlock?): did not finish in %d s: %s" % (TIMEOUT_S, " ".join(cmd)))
    if r.returncode != 0:
        sys.exit("FAIL: exit %d: %s\n%s%s" % (r.returncode, " ".join(cmd), r.stdout, r.stderr))
    return r.stdout


def func_rows(report):
    """The names of the rows of the report's funcs section."""
    rows, inside = [], False
    for line in report.splitlines():
        words = line.split()
        if words[:1] == ["funcs"]:
            inside = True
        elif words[:1] == ["copies"]:
            inside = False
        elif inside and words:
            rows.append(words[0])
    return rows


def check_async_fork(tally_run, work):
    rng = np.random.default_rng(21)
    x = rng.uniform(-3.0, 3.0, size=(48, 64)).astype(np.float32)
    inp = os.path.join(work, "async_fork.input.npy")
    np.save(inp, x)
    ref = np.sin(x.astype(np.float64)) + np.cos(x.astype(np.float64))
    stmt = os.path.join(HERE, "async_fork.conceptual.stmt")
    for target in ("host", "host-profile"):
        out = os.path.join(work, "async_fork.%s.npy" % target)
        report = run([tally_run, stmt, "-target", target, "--input", "input=" + inp,
                      "--size", "async_out=64x48", "--output", "async_out=" + out, "--runs", "20"])
        err = np.abs(np.load(out).astype(np.float64) - ref).max()
        # Halide's float32 sin and cos polynomials: within a few ulp of float64's.
        if not err <= 1e-5:
            sys.exit("FAIL: async_fork on %s: max error %g against sin(x) + cos(x)" % (target, err))
        if target == "host-profile":
            rows = func_rows(report)
            for name in ("prod_a", "prod_b", "async_out"):
                if name not in rows:
                    sys.exit("FAIL: the profile of async_fork has no row %s:\n%s" % (name, report))
        print("async_fork %s: ok (max error %.2g)" % (target, err))


def check_wait_chain(tally_run, work):
    x = (np.arange(16 * 64, dtype=np.float32).reshape(16, 64) - 300.0) / 7.0
    inp = os.path.join(work, "wait_chain.input.npy")
    np.save(inp, x)
    ref = (x + np.float32(1)) * np.float32(2) + np.float32(1)
    stmt = os.path.join(HERE, "wait_chain.stmt")
    for target, threads, runs in (("host", 1, 500), ("host", 2, 500), ("host", 8, 500),
                                  ("host-profile", 4, 200)):
        out = os.path.join(work, "wait_chain.%s.%d.npy" % (target, threads))
        run([tally_run, stmt, "-target", target, "--input", "in=" + inp, "--size", "out=64x16",
             "--output", "out=" + out, "--runs", str(runs)], {"TALLY_NUM_THREADS": str(threads)})
        if not np.array_equal(np.load(out), ref):
            sys.exit("FAIL: wait_chain on %s with %d threads: wrong output" % (target, threads))
        print("wait_chain %s, %d threads, %d runs: ok" % (target, threads, runs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="the folder holding tally-run")
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    tally_run = os.path.join(a.bin, "tally-run")
    check_async_fork(tally_run, a.work)
    check_wait_chain(tally_run, a.work)


if __name__ == "__main__":
    main()
