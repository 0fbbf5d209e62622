#!/usr/bin/env python3
"""Probe pipelines for Halide 21's text: writes the lowered and conceptual statements Halide 21
prints for 15 classic pipelines and schedules (blur, histogram, local Laplacian, bilateral grid,
specialize, async, compute_with, memoize, atomics, vector reductions, boundary conditions, GPU
tiles, float16/bfloat16, nested vectorization, a split by a Param) on host, -profile, -debug and
GPU targets. docs/halide21.md lists what Tally's parser makes of them. Not the conformance corpus
(that one is generated against Halide 21's C++ API, with reference outputs); a quick way to see
Halide 21's text. Run with the Python of the virtual environment ./run.sh fills:

  .venv/bin/python tools/halide21/probe.py                 every (pipeline, target) pair
  .venv/bin/python tools/halide21/probe.py PIPELINE        one pipeline, every target
  .venv/bin/python tools/halide21/probe.py PIPELINE TAG    one pair (what the driver runs)

Outputs: $TALLY_PROBE_OUT (default ./halide21-probe)/<pipeline>.<tag>.{lowered,conceptual}.stmt
Base target: x86-64-linux-avx2-sse41-fma-f16c (fixed, host-independent).
"""
import os
import subprocess
import sys

import halide as hl

BASE = "x86-64-linux-avx2-sse41-fma-f16c"
TAGS = {
    "host": BASE,
    "profile": BASE + "-profile",
    "debug": BASE + "-debug",
    "cuda": BASE + "-cuda",
    "cuda-profile": BASE + "-cuda-profile",
    "opencl": BASE + "-opencl",
    "vulkan": BASE + "-vulkan-vk_int8-vk_int16-vk_float16",
    "webgpu": BASE + "-webgpu",
}
OUT = os.path.abspath(os.environ.get("TALLY_PROBE_OUT", "halide21-probe"))

x, y, c, z = hl.Var("x"), hl.Var("y"), hl.Var("c"), hl.Var("z")
xo, yo, xi, yi = hl.Var("xo"), hl.Var("yo"), hl.Var("xi"), hl.Var("yi")


def blur3x3(tag):
    inp = hl.ImageParam(hl.UInt(16), 2, "input")
    bx = hl.Func("blur_x")
    by = hl.Func("blur_y")
    bx[x, y] = (inp[x - 1, y] + inp[x, y] + inp[x + 1, y]) / 3
    by[x, y] = (bx[x, y - 1] + bx[x, y] + bx[x, y + 1]) / 3
    by.split(y, yo, yi, 32).parallel(yo).vectorize(x, 8)
    bx.store_at(by, yo).compute_at(by, yi).vectorize(x, 8)
    # a store_root stage computed inside a serial loop of the output
    sh = hl.Func("sharpen")
    sh[x, y] = by[x, y] * 2 - by[x + 1, y]
    out = hl.Func("blur_out")
    out[x, y] = sh[x, y - 1] + sh[x, y + 1]
    by.compute_root()
    sh.store_root().compute_at(out, y).vectorize(x, 8)
    out.vectorize(x, 8)
    return hl.Pipeline(out), [inp]


def histogram(tag):
    inp = hl.ImageParam(hl.UInt(8), 2, "input")
    r = hl.RDom([(0, inp.width()), (0, inp.height())], "r")
    hist = hl.Func("hist")
    hist[x] = 0
    hist[hl.clamp(hl.i32(inp[r.x, r.y]), 0, 255)] += 1
    cdf = hl.Func("cdf")
    ri = hl.RDom([(1, 255)], "ri")
    cdf[x] = hist[0]
    cdf[ri.x] = cdf[ri.x - 1] + hist[ri.x]
    out = hl.Func("equalized")
    out[x, y] = hl.u8(hl.clamp(cdf[hl.i32(inp[x, y])] * 255 / hl.max(cdf[255], 1), 0, 255))
    hist.compute_root()
    cdf.compute_root()
    out.vectorize(x, 16).parallel(y)
    return hl.Pipeline(out), [inp]


def local_laplacian(tag):
    J = 3
    inp = hl.ImageParam(hl.Float(32), 2, "input")
    alpha = hl.Param(hl.Float(32), "alpha", 1.0)
    clamped = hl.BoundaryConditions.repeat_edge(inp)

    def down(f, name):
        d = hl.Func(name)
        d[x, y] = (f[2 * x - 1, 2 * y] + 2.0 * f[2 * x, 2 * y] + f[2 * x + 1, 2 * y]) * 0.25
        return d

    def up(f, name):
        u = hl.Func(name)
        u[x, y] = 0.5 * (f[x // 2, y // 2] + f[(x + 1) // 2, (y + 1) // 2])
        return u

    g = [clamped]
    for j in range(1, J):
        g.append(down(g[j - 1], "gPyr%d" % j))
    lap = [None] * J
    lap[J - 1] = g[J - 1]
    for j in range(J - 2, -1, -1):
        l = hl.Func("lPyr%d" % j)
        u = up(g[j + 1], "up%d" % j)
        l[x, y] = g[j][x, y] - u[x, y]
        lap[j] = l
    remap = [None] * J
    for j in range(J):
        rf = hl.Func("remap%d" % j)
        v = lap[j][x, y]
        rf[x, y] = v * alpha * hl.exp(-v * v * 10.0)
        remap[j] = rf
    outp = [None] * J
    outp[J - 1] = remap[J - 1]
    for j in range(J - 2, -1, -1):
        o = hl.Func("outPyr%d" % j)
        u = up(outp[j + 1], "oup%d" % j)
        o[x, y] = u[x, y] + remap[j][x, y]
        outp[j] = o
    out = hl.Func("local_laplacian")
    out[x, y] = outp[0][x, y]
    out.split(y, yo, yi, 16).parallel(yo).vectorize(x, 8)
    for j in range(1, J):
        g[j].compute_root().parallel(y).vectorize(x, 8)
        outp[j].compute_root().vectorize(x, 8) if j < J - 1 else None
        remap[j].compute_root()
    lap[0].compute_at(out, yo).vectorize(x, 8)
    return hl.Pipeline(out), [inp, alpha]


def bilateral_grid(tag):
    s_sigma = 8
    inp = hl.ImageParam(hl.Float(32), 2, "input")
    r_sigma = hl.Param(hl.Float(32), "r_sigma", 0.1)
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    r = hl.RDom([(0, s_sigma), (0, s_sigma)], "r")
    val = clamped[x * s_sigma + r.x - s_sigma // 2, y * s_sigma + r.y - s_sigma // 2]
    val = hl.clamp(val, 0.0, 1.0)
    zi = hl.i32(val / r_sigma + 0.5)
    histo = hl.Func("histogram")
    histo[x, y, z, c] = 0.0
    histo[x, y, zi, c] += hl.select(c == 0, val, 1.0)
    blurz = hl.Func("blurz")
    blurz[x, y, z, c] = (histo[x, y, z - 1, c] + histo[x, y, z, c] * 4 + histo[x, y, z + 1, c])
    blurx = hl.Func("blurx")
    blurx[x, y, z, c] = (blurz[x - 1, y, z, c] + blurz[x, y, z, c] * 4 + blurz[x + 1, y, z, c])
    blury = hl.Func("blury")
    blury[x, y, z, c] = (blurx[x, y - 1, z, c] + blurx[x, y, z, c] * 4 + blurx[x, y + 1, z, c])
    v = clamped[x, y]
    zv = v / r_sigma
    zi2 = hl.clamp(hl.i32(zv), 0, 15)
    zf = zv - zi2
    xf = hl.f32(x % s_sigma) / s_sigma
    yf = hl.f32(y % s_sigma) / s_sigma
    xi_ = x // s_sigma
    yi_ = y // s_sigma
    interp = hl.Func("interpolated")
    interp[x, y, c] = hl.lerp(hl.lerp(blury[xi_, yi_, zi2, c], blury[xi_ + 1, yi_, zi2, c], xf),
                              hl.lerp(blury[xi_, yi_ + 1, zi2 + 1, c], blury[xi_ + 1, yi_ + 1, zi2 + 1, c], yf), zf)
    out = hl.Func("bilateral_grid")
    out[x, y] = interp[x, y, 0] / hl.max(interp[x, y, 1], hl.f32(1e-7))
    histo.compute_root().reorder(c, z, x, y).parallel(y)
    histo.update().reorder(c, r.x, r.y, x, y).unroll(c).parallel(y)
    blurz.compute_root().reorder(c, z, x, y).parallel(y).vectorize(x, 8).unroll(c)
    blurx.compute_root().reorder(c, x, y, z).parallel(z).vectorize(x, 8).unroll(c)
    blury.compute_root().reorder(c, x, y, z).parallel(z).vectorize(x, 8).unroll(c)
    out.compute_root().parallel(y).vectorize(x, 8)
    return hl.Pipeline(out), [inp, r_sigma]


def specialized(tag):
    inp = hl.ImageParam(hl.Float(32), 2, "input")
    use_fast = hl.Param(hl.Bool(), "use_fast", False)
    scale = hl.Param(hl.Float(32), "scale", 1.0)
    f = hl.Func("spec_out")
    f[x, y] = hl.select(use_fast, inp[x, y] * scale, hl.sqrt(hl.abs(inp[x, y])) * scale)
    f.specialize(use_fast).vectorize(x, 8)
    f.specialize(inp.width() >= 64).vectorize(x, 16).parallel(y)
    return hl.Pipeline(f), [inp, use_fast, scale]


def async_fork(tag):
    inp = hl.ImageParam(hl.Float(32), 2, "input")
    p1 = hl.Func("prod_a")
    p2 = hl.Func("prod_b")
    cons = hl.Func("async_out")
    p1[x, y] = hl.sin(inp[x, y])
    p2[x, y] = hl.cos(inp[x, y])
    cons[x, y] = p1[x, y] + p2[x, y]
    cons.split(y, yo, yi, 8).parallel(yo)
    p1.compute_at(cons, yo).async_()
    p2.compute_at(cons, yo).async_()
    return hl.Pipeline(cons), [inp]


def compute_with(tag):
    inp = hl.ImageParam(hl.Float(32), 2, "input")
    f = hl.Func("cw_f")
    g = hl.Func("cw_g")
    f[x, y] = inp[x, y] * 2.0
    g[x, y] = inp[x, y] + 1.0
    f.compute_root()
    g.compute_root().compute_with(f, y)
    p = hl.Pipeline([f, g])
    return p, [inp]


def memoized(tag):
    inp = hl.ImageParam(hl.Float(32), 2, "input")
    k = hl.Param(hl.Float(32), "k", 1.0)
    expensive = hl.Func("expensive")
    expensive[x, y] = hl.exp(hl.f32(x) * k + hl.f32(y))
    out = hl.Func("memo_out")
    out[x, y] = inp[x, y] * (expensive[x, y] + expensive[x + 1, y])
    expensive.compute_root().memoize()
    out.vectorize(x, 8)
    return hl.Pipeline(out), [inp, k]


def atomic_update(tag):
    inp = hl.ImageParam(hl.UInt(8), 2, "input")
    r = hl.RDom([(0, inp.width()), (0, inp.height())], "r")
    h = hl.Func("atomic_hist")
    h[x] = hl.u32(0)
    h[hl.i32(inp[r.x, r.y])] += hl.u32(1)
    h.update().atomic().parallel(r.y)
    # an atomic reduction onto a float scalar: needs a mutex-free CAS loop or a mutex for tuples
    s = hl.Func("atomic_sum")
    s[x] = hl.f32(0)
    s[0] += hl.f32(inp[r.x, r.y])
    s.compute_root()
    s.update().atomic().parallel(r.y)
    t = hl.Func("atomic_tuple")
    t[x] = (hl.f32(0), hl.i32(0))
    t[0] = (t[0][0] + hl.f32(inp[r.x, r.y]), t[0][1] + 1)
    t.compute_root()
    t.update().atomic(True).parallel(r.y)
    out = hl.Func("atomic_out")
    out[x] = hl.f32(h[x]) + s[0] + t[0][0] + hl.f32(t[0][1])
    h.compute_root()
    return hl.Pipeline(out), [inp]


def vector_reduce(tag):
    # dot product with a vectorized RVar: produces VectorReduce nodes
    A = hl.ImageParam(hl.Float(32), 2, "A")
    B = hl.ImageParam(hl.Float(32), 1, "B")
    K = 64
    r = hl.RDom([(0, K)], "r")
    dot = hl.Func("dot")
    dot[y] = hl.f32(0)
    dot[y] += A[r.x, y] * B[r.x]
    rxo, rxi = hl.RVar("rxo"), hl.RVar("rxi")
    dot.update().split(r.x, rxo, rxi, 8).atomic().vectorize(rxi)
    out = hl.Func("vred_out")
    ri = hl.RDom([(0, 16)], "ri")
    iv = hl.ImageParam(hl.Int(16), 1, "iv")
    acc = hl.Func("acc")
    acc[x] = hl.i32(0)
    acc[x] += hl.i32(iv[x * 16 + ri.x]) * 3
    acc.update().atomic().vectorize(ri.x)
    out[y] = dot[y] + hl.f32(acc[y])
    dot.compute_root()
    acc.compute_root()
    return hl.Pipeline(out), [A, B, iv]


def boundary_unroll(tag):
    inp = hl.ImageParam(hl.UInt(8), 2, "input")
    b = hl.BoundaryConditions.constant_exterior(inp, 0)
    m = hl.BoundaryConditions.mirror_interior(inp)
    f = hl.Func("bnd_out")
    acc = 0
    for dy in range(-1, 2):
        for dx in range(-1, 2):
            acc = acc + hl.u16(b[x + dx, y + dy]) + hl.u16(m[x + 2 * dx, y])
    f[x, y] = hl.u8(acc / 18)
    f.split(x, xo, xi, 4).unroll(xi).split(y, yo, yi, 2).unroll(yi)
    return hl.Pipeline(f), [inp]


def gpu_tiled(tag):
    inp = hl.ImageParam(hl.Float(32), 2, "input")
    bx = hl.Func("gblur_x")
    by = hl.Func("gblur_y")
    bx[x, y] = (inp[x - 1, y] + inp[x, y] + inp[x + 1, y]) / 3.0
    by[x, y] = (bx[x, y - 1] + bx[x, y] + bx[x, y + 1]) / 3.0
    tx, ty = hl.Var("tx"), hl.Var("ty")
    by.gpu_tile(x, y, xo, yo, tx, ty, 16, 16)
    bx.compute_at(by, xo).gpu_threads(x, y)
    cpu = hl.Func("cpu_after")
    cpu[x, y] = by[x, y] * 2.0
    by.compute_root()
    cpu.parallel(y).vectorize(x, 8)
    return hl.Pipeline(cpu), [inp]


def halfs(tag):
    inp = hl.ImageParam(hl.Float(16), 2, "input")
    inb = hl.ImageParam(hl.BFloat(16), 2, "inb")
    wt = hl.Param(hl.Float(32), "wt", 0.5)
    a = hl.Func("half_a")
    a[x, y] = hl.lerp(hl.f32(inp[x, y]), hl.f32(inb[x, y]), wt)
    b = hl.Func("half_out")
    b[x, y] = (hl.saturating_cast(hl.UInt(8), hl.round(a[x, y] * 255.0)),
               hl.cast(hl.Float(16), a[x, y] * hl.f32(1e-8)),
               hl.cast(hl.BFloat(16), a[x, y] + 1.0),
               hl.saturating_add(hl.u8(inp[x, y]), hl.u8(3)),
               hl.rounding_shift_right(hl.u16(inp[x, y]), 2),
               hl.lerp(hl.u8(inp[x, y]), hl.u8(inb[x, y]), hl.u8(100)))
    a.compute_at(b, x).vectorize(x)
    b.vectorize(x, 16).parallel(y)
    return hl.Pipeline(b), [inp, inb, wt]


def misc(tag):
    # nested vectorization (Broadcast of a vector -> Shuffle::make_broadcast in
    # FlattenNestedRamps), an RGB interleave, prefetch, hoist_storage, ring_buffer-free
    # argmax with a mutex-protected atomic tuple update.
    inp = hl.ImageParam(hl.Float(32), 2, "input")
    g = hl.Func("rowvec")
    g[x] = hl.sqrt(hl.f32(x))
    nv = hl.Func("nested_vec")
    nv[x, y] = g[x] * inp[x, y] + hl.f32(y)
    nv.compute_root().tile(x, y, xi, yi, 4, 4).vectorize(xi).vectorize(yi)
    g.compute_root()
    rgb = hl.Func("rgb")
    rgb[c, x, y] = nv[x, y] * hl.f32(c + 1)
    rgb.compute_root().bound(c, 0, 3).reorder(c, x, y).vectorize(x, 8).unroll(c).prefetch(nv, y, y, 2)
    rev = hl.Func("reversed")
    rev[x, y] = inp[100 - x, y]
    hs = hl.Func("hoisted")
    hs[x, y] = rev[x, y] + 1.0
    rev.compute_at(hs, y).hoist_storage_root().vectorize(x, 8)
    hs.compute_root().vectorize(x, 8)
    r = hl.RDom([(0, 100)], "r")
    am = hl.Func("argmax")
    am[x] = (hl.f32(-1e30), hl.i32(0))
    v = inp[r.x, x]
    am[x] = (hl.select(v > am[x][0], v, am[x][0]), hl.select(v > am[x][0], r.x, am[x][1]))
    am.compute_root()
    am.update().atomic(True).parallel(r.x)
    # strided loads from an internal allocation: StageStridedLoads densifies them and pads
    # the allocation (Allocate::padding)
    pre = hl.Func("pre")
    pre[x, y] = inp[x, y] * 2.0
    ds = hl.Func("downsampled")
    ds[x, y] = pre[3 * x, y] + pre[3 * x + 1, y]
    pre.compute_at(ds, y)
    ds.compute_root().vectorize(x, 8)
    out = hl.Func("misc_out")
    out[x, y] = rgb[0, x, y] + rgb[2, x, y] + hs[x, y] + am[y][0] + hl.f32(am[y][1]) + ds[x, y]
    return hl.Pipeline(out), [inp]


def param_split(tag):
    # a split by a Param factor: Halide 21 checks it (AddSplitFactorChecks:
    # halide_error_split_factor_not_positive)
    inp = hl.ImageParam(hl.Float(32), 2, "input")
    factor = hl.Param(hl.Int(32), "factor", 16)
    f = hl.Func("psplit_out")
    f[x, y] = inp[x, y] * 3.0
    f.split(x, xo, xi, factor).parallel(y)
    return hl.Pipeline(f), [inp, factor]


PIPELINES = {
    "blur3x3": (blur3x3, ["host", "profile", "debug"]),
    "histogram": (histogram, ["host", "profile"]),
    "local_laplacian": (local_laplacian, ["host"]),
    "bilateral_grid": (bilateral_grid, ["host", "profile"]),
    "specialize": (specialized, ["host"]),
    "async_fork": (async_fork, ["host", "profile"]),
    "compute_with": (compute_with, ["host"]),
    "memoize": (memoized, ["host"]),
    "atomic": (atomic_update, ["host"]),
    "vector_reduce": (vector_reduce, ["host"]),
    "boundary_unroll": (boundary_unroll, ["host", "debug"]),
    "gpu_tile": (gpu_tiled, ["cuda", "cuda-profile", "opencl", "vulkan", "webgpu"]),
    "halfs": (halfs, ["host"]),
    "misc": (misc, ["host"]),
    "param_split": (param_split, ["host"]),
}


def one(name, tag):
    fn, _ = PIPELINES[name]
    p, args = fn(tag)
    t = hl.Target(TAGS[tag])
    base = os.path.join(OUT, "%s.%s" % (name, tag))
    p.compile_to_lowered_stmt(base + ".lowered.stmt", args, hl.StmtOutputFormat.Text, t)
    p.compile_to_conceptual_stmt(base + ".conceptual.stmt", args, hl.StmtOutputFormat.Text, t)


def main():
    if len(sys.argv) == 2:
        os.makedirs(OUT, exist_ok=True)
        for tag in PIPELINES[sys.argv[1]][1]:
            r = subprocess.run([sys.executable, __file__, sys.argv[1], tag], capture_output=True, text=True)
            print(sys.argv[1], tag, "ok" if r.returncode == 0 else r.stderr[-2000:])
        return
    if len(sys.argv) == 3:
        one(sys.argv[1], sys.argv[2])
        return
    os.makedirs(OUT, exist_ok=True)
    log = open(os.path.join(OUT, "gen.log"), "w")
    for name, (_, tags) in PIPELINES.items():
        for tag in tags:
            r = subprocess.run([sys.executable, __file__, name, tag], capture_output=True, text=True)
            status = "ok" if r.returncode == 0 else "FAILED rc=%d" % r.returncode
            print(name, tag, status, flush=True)
            log.write("%s %s %s\n%s\n" % (name, tag, status, r.stderr[-3000:] if r.returncode else ""))
    log.close()


if __name__ == "__main__":
    main()
