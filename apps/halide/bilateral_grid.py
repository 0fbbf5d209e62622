"""The bilateral grid (Chen, Paris and Durand), the classic Halide app, written with Halide 21's
Python API and profiled by Tally.

    PYTHONPATH=build/python .venv/bin/python apps/halide/bilateral_grid.py [--size WxH]

An edge-preserving blur: the image is splatted into a coarse 3-D grid (space x intensity) by a
reduction, the grid blurred along each axis, and the result sliced back out by trilinear
interpolation. The output is checked against Halide's realize (within 1e-4: both compile with
fast math and the reduction sums in another order when vectorized).
"""

import argparse

import halide as hl
import numpy as np

import tally

S = 8  # spatial sampling rate
x, y, z, c = hl.Var("x"), hl.Var("y"), hl.Var("z"), hl.Var("c")
inp = hl.ImageParam(hl.Float(32), 2, "input")
r_sigma = hl.Param(hl.Float(32), "r_sigma")

# Splat: each grid cell sums the values (c = 0) and counts the pixels (c = 1) of its S x S
# block that fall in its intensity bin.
clamped = hl.BoundaryConditions.repeat_edge(inp)
r = hl.RDom([(0, S), (0, S)], "r")
val = hl.clamp(clamped[x * S + r.x - S // 2, y * S + r.y - S // 2], 0.0, 1.0)
zi = hl.i32(val * (1.0 / r_sigma) + 0.5)
histogram = hl.Func("histogram")
histogram[x, y, z, c] = 0.0
histogram[x, y, zi, c] += hl.select(c == 0, val, 1.0)

# Blur the grid along z, x and y with [1 4 6 4 1].
def blur5(f, name, axis):
    g = hl.Func(name)
    at = lambda d: [x + d, y, z, c] if axis == 0 else [x, y + d, z, c] if axis == 1 else [x, y, z + d, c]
    g[x, y, z, c] = (f[at(-2)] + 4.0 * f[at(-1)] + 6.0 * f[at(0)] + 4.0 * f[at(1)] + f[at(2)])
    return g

blurz = blur5(histogram, "blurz", 2)
blurx = blur5(blurz, "blurx", 0)
blury = blur5(blurx, "blury", 1)

# Slice: trilinear interpolation in the blurred grid at each pixel's position and intensity.
v = hl.clamp(inp[x, y], 0.0, 1.0)
zv = v * (1.0 / r_sigma)
zi2 = hl.i32(zv)
zf = zv - zi2
xf = hl.f32(x % S) / S
yf = hl.f32(y % S) / S
xi, yi = x // S, y // S
interpolated = hl.Func("interpolated")
interpolated[x, y, c] = hl.lerp(
    hl.lerp(hl.lerp(blury[xi, yi, zi2, c], blury[xi + 1, yi, zi2, c], xf),
            hl.lerp(blury[xi, yi + 1, zi2, c], blury[xi + 1, yi + 1, zi2, c], xf), yf),
    hl.lerp(hl.lerp(blury[xi, yi, zi2 + 1, c], blury[xi + 1, yi, zi2 + 1, c], xf),
            hl.lerp(blury[xi, yi + 1, zi2 + 1, c], blury[xi + 1, yi + 1, zi2 + 1, c], xf), yf),
    zf)
output = hl.Func("bilateral_grid")
output[x, y] = interpolated[x, y, 0] / interpolated[x, y, 1]

# The schedule: the grid per row of cells, each blur computed once over the whole grid.
histogram.compute_at(blurz, y)
histogram.update().reorder(c, r.x, r.y, x, y).unroll(c)
blurz.compute_root().reorder(c, z, x, y).parallel(y).vectorize(x, 8).unroll(c)
blurx.compute_root().reorder(c, x, y, z).parallel(z).vectorize(x, 8).unroll(c)
blury.compute_root().reorder(c, x, y, z).parallel(z).vectorize(x, 8).unroll(c)
output.parallel(y).vectorize(x, 8)

ap = argparse.ArgumentParser()
ap.add_argument("--size", default="1536x1024")
ap.add_argument("--runs", type=int, default=10)
args = ap.parse_args()
w, h = (int(v) for v in args.size.split("x"))

bg = tally.halide.compile(output, target="host-profile", arguments=[inp, r_sigma])
image = np.random.default_rng(2).uniform(0, 1, size=(h, w)).astype(np.float32)
out = np.empty_like(image)
for _ in range(args.runs):
    bg(image, 0.1, out)

inp.set(hl.Buffer(image))
r_sigma.set(0.1)
want = np.asarray(output.realize([w, h]))
diff = float(np.abs(out - want).max())
assert diff <= 1e-4, "Tally differs from Halide by %g" % diff
print("bilateral_grid: %dx%d, %d runs, within %.1e of Halide's realize" % (w, h, args.runs, diff))
