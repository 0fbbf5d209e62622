"""tally.report_show / tally.report_diff (tally-report's show and diff, the same C++ code) and
tally.profiler.write_pprof / write_folded / write_trace."""

import gzip
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

import tally
from conftest import SOURCE_DIR, app_stmt

INPUTS = SOURCE_DIR / "test" / "ir" / "tally-report" / "Inputs"
# The build's bin/ next to its python/ (PYTHONPATH), where tally-report lies.
TALLY_REPORT = pathlib.Path(tally.__file__).resolve().parents[1] / "bin" / "tally-report"


def cli(*args):
    """Runs tally-report; returns (exit status, stdout)."""
    r = subprocess.run([str(TALLY_REPORT)] + [str(a) for a in args], capture_output=True,
                       text=True)
    return r.returncode, r.stdout


def test_diff_fails_on_syncs_and_time_passes_when_equal():
    same = tally.report_diff(INPUTS / "base.json", INPUTS / "base.json", max_time_regression=0,
                             max_sync_increase=0, max_memory_regression=0, max_copy_increase=0)
    assert same.passed and bool(same) and same.failures == []
    syncs = tally.report_diff(INPUTS / "base.json", INPUTS / "syncs.json", max_sync_increase=0)
    assert not syncs.passed
    assert syncs.failures == ["pipeline train: syncs per run +23.00 (limit +0.00)"]
    slow = tally.report_diff(INPUTS / "base.json", INPUTS / "slower10.json",
                             max_time_regression=5)
    assert slow.failures == ["pipeline train: time per run +10.0% (limit +5.0%)"]
    # Without thresholds nothing fails, whatever changed.
    assert tally.report_diff(INPUTS / "base.json", INPUTS / "slower10.json").passed


def test_python_and_cli_give_the_same_text():
    if not TALLY_REPORT.exists():
        pytest.skip("tally-report not built next to the module")
    r = tally.report_diff(str(INPUTS / "base.json"), str(INPUTS / "memory.json"),
                          max_memory_regression=50)
    status, out = cli("diff", INPUTS / "base.json", INPUTS / "memory.json",
                      "--max-memory-regression", "50%")
    assert (status, out) == (1, r.text)
    status, out = cli("show", INPUTS / "base.json")
    assert (status, out) == (0, tally.report_show(str(INPUTS / "base.json")))


def test_bad_reports_raise_value_error_naming_file_and_field():
    path = str(INPUTS / "missing_field.json")
    with pytest.raises(ValueError, match=r"missing_field\.json: error: "
                                         r"pipelines\[0\]\.slots\[2\]\.time_ns: missing"):
        tally.report_show(path)
    with pytest.raises(ValueError, match=r"not_json\.json:3:17: error: invalid JSON"):
        tally.report_diff(INPUTS / "base.json", INPUTS / "not_json.json")


def test_show_of_a_real_run_is_the_runtimes_report(clean_profiler, tmp_path):
    p = tally.parse(app_stmt("blur")).compile("host-profile")
    inp = np.random.default_rng(3).integers(0, 65536, size=(130, 258), dtype=np.uint16)
    out = np.zeros((128, 256), dtype=np.uint16)
    for _ in range(3):
        p(inp, out, 256, 128)
    (tmp_path / "r.json").write_text(tally.profiler.report(json=True))
    assert tally.report_show(str(tmp_path / "r.json")) == tally.profiler.report()


def test_write_pprof_and_folded(clean_profiler, tmp_path):
    p = tally.parse(app_stmt("blur")).compile("host-profile")
    inp = np.random.default_rng(5).integers(0, 65536, size=(386, 514), dtype=np.uint16)
    out = np.zeros((384, 512), dtype=np.uint16)
    for _ in range(3):
        p(inp, out, 512, 384)
    stats = tally.profiler.stats()["blur"]
    tally.profiler.write_folded(str(tmp_path / "s.folded"))
    lines = (tmp_path / "s.folded").read_text().splitlines()
    want = ["blur;%s %d" % (s["name"], s["time_ns"]) for s in stats["slots"] if s["time_ns"]]
    assert lines == want
    tally.profiler.write_pprof(str(tmp_path / "p.pb.gz"))
    raw = gzip.decompress((tmp_path / "p.pb.gz").read_bytes())
    assert b"blur_x" in raw and b"alloc_space" in raw
    with pytest.raises(tally.RuntimeError, match="cannot write the pprof profile to"):
        tally.profiler.write_pprof(str(tmp_path / "no" / "such" / "dir.pb.gz"))


def test_write_trace(clean_profiler, tmp_path):
    """A traced run gives a Chrome Trace Event file with the pipeline as a process and a slice for
    each Func; recording off again, nothing more is recorded."""
    p = tally.parse(app_stmt("blur")).compile("host-profile")
    inp = np.random.default_rng(7).integers(0, 65536, size=(130, 258), dtype=np.uint16)
    out = np.zeros((128, 256), dtype=np.uint16)
    tally.profiler.trace_record(True)
    try:
        for _ in range(2):
            p(inp, out, 256, 128)
    finally:
        tally.profiler.trace_record(False)
    tally.profiler.write_trace(str(tmp_path / "t.json"))
    trace = json.loads((tmp_path / "t.json").read_text())
    assert trace["displayTimeUnit"] == "ns"
    assert trace["otherData"]["dropped_events"] == 0
    events = trace["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {"blur"}
    slices = [e for e in events if e["ph"] == "X"]
    assert {"blur_x", "blur_y"} <= {e["name"] for e in slices}
    assert all(e["dur"] >= 0 for e in slices)
    p(inp, out, 256, 128)  # not recorded
    tally.profiler.write_trace(str(tmp_path / "t2.json"))
    assert json.loads((tmp_path / "t2.json").read_text())["traceEvents"] == events
    with pytest.raises(tally.RuntimeError, match="events per thread is out of range"):
        tally.profiler.trace_record(True, 1 << 40)
    with pytest.raises(tally.RuntimeError, match="cannot write the trace to"):
        tally.profiler.write_trace(str(tmp_path / "no" / "such" / "dir.json"))
