"""Local Laplacian filters (Paris, Hasinoff and Kautz), the classic Halide app, written with
Halide 21's Python API and profiled by Tally.

    PYTHONPATH=build/python .venv/bin/python apps/halide/local_laplacian.py [--size WxH]

A Gaussian pyramid of the gray image, a Laplacian pyramid per intensity level of the remapped
image, the two blended level by level, collapsed, and the color put back. Every pyramid level is
a Func of its own, so Tally's report shows where the time goes level by level. The output is
checked against Halide's realize (within 2 of 65535: both compile with fast math).
"""

import argparse

import halide as hl
import numpy as np

import tally

LEVELS, J = 8, 5  # intensity levels, pyramid levels
x, y, c, k = hl.Var("x"), hl.Var("y"), hl.Var("c"), hl.Var("k")


def down(f, name):
    """Blur with [1 3 3 1] / 8 in x and y, then halve."""
    dx, dy = hl.Func(name + "_dx"), hl.Func(name)
    dx[x, y, k] = (f[2 * x - 1, y, k] + 3.0 * (f[2 * x, y, k] + f[2 * x + 1, y, k]) +
                   f[2 * x + 2, y, k]) / 8.0
    dy[x, y, k] = (dx[x, 2 * y - 1, k] + 3.0 * (dx[x, 2 * y, k] + dx[x, 2 * y + 1, k]) +
                   dx[x, 2 * y + 2, k]) / 8.0
    return dy


def up(f, name):
    """Double, interpolating linearly."""
    ux, uy = hl.Func(name + "_ux"), hl.Func(name)
    ux[x, y, k] = 0.25 * f[(x // 2) - 1 + 2 * (x % 2), y, k] + 0.75 * f[x // 2, y, k]
    uy[x, y, k] = 0.25 * ux[x, (y // 2) - 1 + 2 * (y % 2), k] + 0.75 * ux[x, y // 2, k]
    return uy


inp = hl.ImageParam(hl.UInt(16), 3, "input")
alpha = hl.Param(hl.Float(32), "alpha")
beta = hl.Param(hl.Float(32), "beta")

# The remapping curve, a lookup table over intensity differences.
remap = hl.Func("remap")
fx = hl.f32(x) / 256.0
remap[x] = alpha * fx * hl.exp(-fx * fx / 2.0)

clamped = hl.BoundaryConditions.repeat_edge(inp)
floating = hl.Func("floating")
floating[x, y, c] = clamped[x, y, c] / 65535.0
gray = hl.Func("gray")
gray[x, y, k] = 0.25 * floating[x, y, 0] + 0.5 * floating[x, y, 1] + 0.25 * floating[x, y, 2]

# Level 0 of the processed pyramids: the gray image remapped around each intensity level k.
processed = hl.Func("processed")
level = k * hl.f32(1.0 / (LEVELS - 1))
idx = hl.clamp(hl.i32(gray[x, y, 0] * (LEVELS - 1) * 256.0), 0, (LEVELS - 1) * 256)
processed[x, y, k] = beta * (gray[x, y, 0] - level) + level + remap[idx - 256 * k]

g_pyr = [processed] + [None] * (J - 1)
in_g_pyr = [gray] + [None] * (J - 1)
for j in range(1, J):
    g_pyr[j] = down(g_pyr[j - 1], "g_pyr%d" % j)
    in_g_pyr[j] = down(in_g_pyr[j - 1], "in_g_pyr%d" % j)
l_pyr = [None] * J
l_pyr[J - 1] = g_pyr[J - 1]
for j in range(J - 2, -1, -1):
    l_pyr[j] = hl.Func("l_pyr%d" % j)
    l_pyr[j][x, y, k] = g_pyr[j][x, y, k] - up(g_pyr[j + 1], "up_g%d" % j)[x, y, k]

# Blend: each output Laplacian level interpolates between the two intensity levels nearest to
# the input's gray value there.
out_l_pyr = []
for j in range(J):
    f = hl.Func("out_l_pyr%d" % j)
    lv = in_g_pyr[j][x, y, 0] * (LEVELS - 1)
    li = hl.clamp(hl.i32(lv), 0, LEVELS - 2)
    lf = lv - li
    f[x, y, k] = (1.0 - lf) * l_pyr[j][x, y, li] + lf * l_pyr[j][x, y, li + 1]
    out_l_pyr.append(f)
out_g_pyr = [None] * J
out_g_pyr[J - 1] = out_l_pyr[J - 1]
for j in range(J - 2, -1, -1):
    out_g_pyr[j] = hl.Func("out_g_pyr%d" % j)
    out_g_pyr[j][x, y, k] = up(out_g_pyr[j + 1], "up_out%d" % j)[x, y, k] + out_l_pyr[j][x, y, k]

color = hl.Func("color")
color[x, y, c] = out_g_pyr[0][x, y, 0] * (floating[x, y, c] + hl.f32(0.01)) / (gray[x, y, 0] + hl.f32(0.01))
output = hl.Func("local_laplacian")
output[x, y, c] = hl.u16(hl.clamp(color[x, y, c], 0.0, 1.0) * 65535.0)

# The schedule: every pyramid level computed once, in parallel rows, vectorized.
remap.compute_root()
output.reorder(c, x, y).bound(c, 0, 3).unroll(c).parallel(y, 8).vectorize(x, 8)
gray.compute_root().parallel(y, 8).vectorize(x, 8)
for j in range(J):
    for f in (g_pyr[j], l_pyr[j], in_g_pyr[j], out_l_pyr[j], out_g_pyr[j]):
        if f is not gray:
            f.compute_root().parallel(y, 4).vectorize(x, 8)

ap = argparse.ArgumentParser()
ap.add_argument("--size", default="1024x768")
ap.add_argument("--runs", type=int, default=5)
args = ap.parse_args()
w, h = (int(v) for v in args.size.split("x"))

ll = tally.halide.compile(output, target="host-profile", arguments=[inp, alpha, beta])
image = np.random.default_rng(1).integers(0, 65536, size=(3, h, w), dtype=np.uint16)
out = np.empty_like(image)
for _ in range(args.runs):
    ll(image, 1.0, 1.0, out)

inp.set(hl.Buffer(image))
alpha.set(1.0)
beta.set(1.0)
want = np.asarray(output.realize([w, h, 3]))
diff = int(np.abs(out.astype(np.int32) - want.astype(np.int32)).max())
assert diff <= 2, "Tally differs from Halide by %d" % diff
print("local_laplacian: %dx%dx3, %d runs, within %d of Halide's realize" % (w, h, args.runs, diff))
