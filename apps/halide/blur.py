"""A Halide pipeline profiled by Tally: the classic 3x3 blur, written with Halide 21's Python API.

    PYTHONPATH=build/python .venv/bin/python apps/halide/blur.py [--size WxH] [--runs N]

Tally compiles the Func (tally.halide.compile), the pipeline runs on numpy arrays, and Tally's
report prints when the process exits. The output is checked against Halide's own realize.
"""

import argparse

import halide as hl
import numpy as np

import tally

# The algorithm: two separable passes over a uint16 image with a clamped edge.
x, y = hl.Var("x"), hl.Var("y")
inp = hl.ImageParam(hl.UInt(16), 2, "input")
clamped = hl.BoundaryConditions.repeat_edge(inp)
blur_x, blur_y = hl.Func("blur_x"), hl.Func("blur_y")
blur_x[x, y] = (clamped[x - 1, y] + clamped[x, y] + clamped[x + 1, y]) // 3
blur_y[x, y] = (blur_x[x, y - 1] + blur_x[x, y] + blur_x[x, y + 1]) // 3

# The schedule: strips of 32 rows in parallel, blur_x computed per strip, both vectorized.
yo, yi = hl.Var("yo"), hl.Var("yi")
blur_y.split(y, yo, yi, 32).parallel(yo).vectorize(x, 8)
blur_x.compute_at(blur_y, yo).vectorize(x, 8)

ap = argparse.ArgumentParser()
ap.add_argument("--size", default="2048x1536")
ap.add_argument("--runs", type=int, default=50)
args = ap.parse_args()
w, h = (int(v) for v in args.size.split("x"))

# Profile it with Tally: one call, then call it like a function.
blur = tally.halide.compile(blur_y, target="host-profile", name="blur")
image = np.random.default_rng(0).integers(0, 65536, size=(h, w), dtype=np.uint16)
out = np.empty_like(image)
for _ in range(args.runs):
    blur(image, out)

inp.set(hl.Buffer(image))
assert np.array_equal(out, np.asarray(blur_y.realize([w, h]))), "Tally differs from Halide"
print("blur: %dx%d, %d runs, equal to Halide's realize" % (w, h, args.runs))
# The report prints when the process exits; tally.profiler.report() returns it now, and
# tally.profiler.stats()["blur"] has the numbers.
