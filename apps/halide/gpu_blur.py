"""A GPU pipeline written with Halide 21's Python API, profiled by Tally on Vulkan or OpenCL.

    PYTHONPATH=build/python .venv/bin/python apps/halide/gpu_blur.py [--api vulkan|opencl]
                                                                       [--timestamps]

Two blur passes on the GPU (gpu_tile) and a tone curve on the host after them. Halide's GPU
schedule runs on Tally's back ends (Vulkan: lavapipe here; OpenCL: PoCL), with a copy slot per
buffer and direction and one device sync after each launch so that GPU time lands on the Func
that caused it; --timestamps profiles with device timestamps instead of syncs
(profile_timestamps). The output is checked against Halide's realize of the same algorithm on
the host.
"""

import argparse
import sys

import halide as hl
import numpy as np

import tally

x, y, xi, yi = hl.Var("x"), hl.Var("y"), hl.Var("xi"), hl.Var("yi")
inp = hl.ImageParam(hl.Float(32), 2, "input")


def algorithm():
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    bx, by, tone = hl.Func("blur_x"), hl.Func("blur_y"), hl.Func("tone")
    bx[x, y] = (clamped[x - 1, y] + 2.0 * clamped[x, y] + clamped[x + 1, y]) * 0.25
    by[x, y] = (bx[x, y - 1] + 2.0 * bx[x, y] + bx[x, y + 1]) * 0.25
    tone[x, y] = by[x, y] * by[x, y] * (3.0 - 2.0 * by[x, y])
    return bx, by, tone


ap = argparse.ArgumentParser()
ap.add_argument("--api", choices=["vulkan", "opencl"], default=None)
ap.add_argument("--timestamps", action="store_true")
ap.add_argument("--size", default="1024x768")
ap.add_argument("--runs", type=int, default=10)
args = ap.parse_args()
api = args.api or ("vulkan" if tally.vulkan_available() else "opencl")
if not getattr(tally, api + "_available")():
    sys.exit("gpu_blur: no %s device here" % api)
w, h = (int(v) for v in args.size.split("x"))

# The GPU schedule: both blurs on the device in 16x8 tiles, the tone curve on the host.
bx, by, tone = algorithm()
bx.compute_root().gpu_tile(x, y, xi, yi, 16, 8)
by.compute_root().gpu_tile(x, y, xi, yi, 16, 8)
tone.parallel(y).vectorize(x, 8)

target = "host-%s-profile%s" % (api, "-profile_timestamps" if args.timestamps else "")
p = tally.halide.compile(tone, target=target, name="gpu_blur")
image = np.random.default_rng(4).uniform(0, 1, size=(h, w)).astype(np.float32)
out = np.empty_like(image)
for _ in range(args.runs):
    p(image, out)

# Halide's realize of the same algorithm, scheduled for the host, is the reference.
_, _, host_tone = algorithm()
inp.set(hl.Buffer(image))
want = np.asarray(host_tone.realize([w, h]))
diff = float(np.abs(out - want).max())
assert diff <= 1e-5, "Tally differs from Halide by %g" % diff
s = tally.profiler.stats()["gpu_blur"]
print("gpu_blur on %s: %dx%d, %d runs, within %.1e of Halide's realize; %d launches, %d injected "
      "syncs" % (api, w, h, args.runs, diff, s["kernel_launches"], s["injected_syncs"]))
