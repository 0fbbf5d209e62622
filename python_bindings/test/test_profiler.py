"""tally.profiler: stats(), report() and reset() after profiled runs of apps/blur."""

import json
import re

import numpy as np
import pytest

import tally
from conftest import app_stmt

RUNS = 5
W, H = 512, 384


@pytest.fixture
def profiled_blur(clean_profiler):
    """apps/blur compiled for host-profile and run RUNS times; returns the stats of 'blur'."""
    p = tally.parse(app_stmt("blur")).compile("host-profile")
    rng = np.random.default_rng(11)
    inp = rng.integers(0, 65536, size=(H + 2, W + 2), dtype=np.uint16)
    out = np.zeros((H, W), dtype=np.uint16)
    for _ in range(RUNS):
        p(inp, out, W, H)
    return tally.profiler.stats()


def test_stats_of_a_profiled_run(profiled_blur):
    assert list(profiled_blur) == ["blur"]
    s = profiled_blur["blur"]
    assert s["name"] == "blur"
    assert s["target"] == "host-profile"
    assert s["runs"] == RUNS
    assert s["total_ns"] > 0 and s["samples"] >= 0
    assert s["time_per_run_ms"] == pytest.approx(s["total_ms"] / RUNS)
    assert not s["profile_by_timer"]
    # Three sections, in the report's order; slot 0 is overhead, then the Funcs in walk order.
    assert list(s["sections"]) == ["funcs", "copies to device", "copies to host"]
    assert list(s["sections"]["funcs"]) == ["overhead", "blur_x", "blur_y"]
    assert s["sections"]["copies to device"] == {} and s["sections"]["copies to host"] == {}
    assert [slot["name"] for slot in s["slots"]] == ["overhead", "blur_x", "blur_y"]
    assert [slot["id"] for slot in s["slots"]] == [0, 1, 2]
    assert s["num_slots"] == 3
    assert {slot["kind"] for slot in s["slots"]} == {"func"}
    # Slot times add up to the total (rescaled to wall time each run).
    assert sum(slot["time_ns"] for slot in s["slots"]) == pytest.approx(s["total_ns"], rel=0.01)
    assert sum(slot["percent"] for slot in s["slots"]) == pytest.approx(100.0, abs=0.5)
    # blur_x's intermediate: one heap allocation per run of 2 * W * (H + 2) bytes, all freed.
    bx = s["sections"]["funcs"]["blur_x"]
    size = 2 * W * (H + 2)
    assert bx["heap"] == {"current": 0, "peak": size, "allocs": RUNS, "bytes": RUNS * size}
    assert s["heap_peak_bytes"] == size
    for name in ("overhead", "blur_y"):
        assert s["sections"]["funcs"][name]["heap"]["allocs"] == 0
    # No device on this target.
    assert s["device_peak_bytes"] == 0 and s["kernel_launches"] == 0
    assert s["injected_syncs"] == 0 and s["explicit_syncs"] == 0
    assert s["copies_to_device"] == 0 and s["copies_to_host"] == 0


def test_stats_show_every_number_of_the_text_report(profiled_blur):
    """Each number the text report prints equals the matching stats() entry, formatted alike."""
    s = profiled_blur["blur"]
    text = tally.profiler.report()
    lines = text.splitlines()
    assert lines[0] == "pipeline: blur"
    header = {}
    for line in lines[1:]:
        if not line.strip():
            break
        key, value = line.strip().split(":", 1)
        header[key] = value.strip()
    mode = {"exact": "exact (%s)" % s["clock"], "sampling": "sampling (sampler thread)",
            "timer": "sampling (timer signal)"}[s["mode"]]
    assert header == {
        "target": s["target"],
        "mode": mode,
        "total time": "%.3f ms" % s["total_ms"],
        "runs": str(s["runs"]),
        "time per run": "%.3f ms" % s["time_per_run_ms"],
        "samples": str(s["samples"]),
        "average threads": "%.2f" % s["average_threads"],
        "heap peak": "%d bytes" % s["heap_peak_bytes"],
        "device peak": "%d bytes" % s["device_peak_bytes"],
        "kernel launches": str(s["kernel_launches"]),
        "injected syncs": str(s["injected_syncs"]),
        "explicit syncs": str(s["explicit_syncs"]),
        "copies to device": "%d (%d bytes)" % (s["copies_to_device"], s["copies_to_device_bytes"]),
        "copies to host": "%d (%d bytes)" % (s["copies_to_host"], s["copies_to_host_bytes"]),
    }

    # The sections, in order; each row holds the slot's numbers.
    titles = [i for i, l in enumerate(lines) if re.match(r"  (funcs|copies to device|copies to host) +time ms", l)]
    assert [lines[i].split("  ")[1].strip() for i in titles] == ["funcs", "copies to device", "copies to host"]
    func_rows = lines[titles[0] + 1 : titles[1]]
    assert len(func_rows) == 3
    for row in func_rows:
        name, *numbers = row.split()
        slot = s["sections"]["funcs"][name]
        interval = ["%.1f" % slot["ci95_pp"]] if "ci95_pp" in slot else []
        assert numbers == [
            "%.3f" % slot["time_ms"],
            "%.1f" % slot["percent"],
        ] + interval + [
            str(slot["samples"]),
            "%.2f" % slot["average_threads"],
            str(slot["heap"]["current"]),
            str(slot["heap"]["peak"]),
            str(slot["heap"]["allocs"]),
            str(slot["heap"]["bytes"]),
            str(slot["device"]["peak"]),
            str(slot["device"]["allocs"]),
            str(slot["device"]["bytes"]),
        ], name
    assert lines[titles[1] + 1].strip() == "(none)"
    assert lines[titles[2] + 1].strip() == "(none)"


def test_json_report_agrees_with_stats(profiled_blur):
    s = profiled_blur["blur"]
    doc = json.loads(tally.profiler.report(json=True))
    assert doc["abi_version"] == tally.RUNTIME_ABI_VERSION
    (p,) = doc["pipelines"]
    for key, value in p.items():
        if key in ("slots", "warnings"):
            continue
        assert s[key] == pytest.approx(value, abs=1e-3), key
    assert [w["kind"] for w in s["warnings"]] == [w["kind"] for w in p["warnings"]]
    for js, w in zip(p["warnings"], s["warnings"]):
        assert w == dict(js, value=pytest.approx(js["value"], abs=1e-3),
                         threshold=pytest.approx(js["threshold"], abs=1e-3))
    for js, slot in zip(p["slots"], s["slots"]):
        for key, value in js.items():
            assert slot[key] == pytest.approx(value, abs=1e-3), (slot["name"], key)


def test_reset(profiled_blur):
    assert tally.profiler.stats()
    tally.profiler.reset()
    assert tally.profiler.stats() == {}
    assert tally.profiler.report() == ""


def test_pipelines_sharing_a_name(clean_profiler):
    # Two slot layouts of one pipeline name are two registry entries: 'x' and 'x#2'.
    one = """module name=x, target=host-profile
external func x (out: buffer<int32, 1>) {
  produce a {
    out[0] = 1
  }
}
"""
    two = one.replace("  }\n}", "  }\n  produce b {\n    out[1] = 2\n  }\n}")
    out = np.zeros(2, dtype=np.int32)
    tally.parse(one).compile()(out)
    tally.parse(two).compile()(out)
    stats = tally.profiler.stats()
    assert list(stats) == ["x", "x#2"]
    assert list(stats["x"]["sections"]["funcs"]) == ["overhead", "a"]
    assert list(stats["x#2"]["sections"]["funcs"]) == ["overhead", "a", "b"]


def test_sampling_interval():
    old = tally.profiler.interval_us()
    try:
        tally.profiler.set_interval_us(250)
        assert tally.profiler.interval_us() == 250
    finally:
        tally.profiler.set_interval_us(old)
