#!/usr/bin/env python3
"""Makes the README's timeline picture from a real run: gpu_gpu_cpu on the Vulkan device
(lavapipe where there is no GPU), profiled, its steady-state runs recorded as a Chrome trace
(TALLY's timeline export) and opened in speedscope in headless Chromium by
test/viewers/speedscope_check.py, which screenshots the host thread (C) and the device queue
(A and B).

Usage: PYTHONPATH=build/python python3 docs/timeline_picture.py OUT_DIR
Writes OUT_DIR/timeline.json, OUT_DIR/timeline.png (the host thread) and timeline-2.png (the
Vulkan queue); the README shows them as docs/img/timeline-host.png and timeline-device.png.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import tally

ROOT = Path(__file__).resolve().parent.parent


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs" / "img")
    out.mkdir(parents=True, exist_ok=True)
    p = tally.parse((ROOT / "apps" / "gpu_gpu_cpu" / "gpu_gpu_cpu.stmt").read_text()).compile(
        "host-vulkan-profile")
    n = 1024
    inp = np.random.default_rng(1).random((n, n), dtype=np.float32)
    c = np.zeros((n, n), dtype=np.float32)
    p(inp, c, n, n, 1)  # device initialisation and kernel compilation stay out of the picture
    tally.profiler.reset()
    tally.profiler.trace_record(True)
    for _ in range(3):
        p(inp, c, n, n, 1)
    tally.profiler.trace_record(False)
    trace = out / "timeline.json"
    tally.profiler.write_trace(str(trace))
    check = ROOT / "test" / "viewers" / "speedscope_check.py"
    return subprocess.call([sys.executable, str(check), str(trace), "--expect", "C", "--expect",
                            "A", "--expect", "B", "--screenshot", str(out / "timeline.png"), "--all-profiles",
                            "--timeout", "200"])


if __name__ == "__main__":
    sys.exit(main())
