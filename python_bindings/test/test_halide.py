"""tally.halide: Halide 21 pipelines written in Python, compiled and profiled by Tally.

Needs Halide 21's Python bindings (the halide==21.0.0 wheel in ./run.sh's virtual environment) and
the bridge's module (_tally_halide). ctest runs this file with that environment's python
(python.halide, TALLY_REQUIRE_HALIDE=1: a missing halide fails instead of skipping); the main
python.pytest run skips it where halide is not importable.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

import tally

try:
    import halide as hl
except ImportError:  # pragma: no cover - only where the environment has no Halide
    if os.environ.get("TALLY_REQUIRE_HALIDE") == "1":
        raise
    pytest.skip("halide (Halide 21's Python bindings) is not importable here",
                allow_module_level=True)

W, H = 64, 48


def blur_pipeline():
    """A separable 3x3 blur of uint16 with a clamped edge, vectorized and parallel."""
    x, y = hl.Var("x"), hl.Var("y")
    inp = hl.ImageParam(hl.UInt(16), 2, "inp")
    c = hl.BoundaryConditions.repeat_edge(inp)
    bx, by = hl.Func("blur_x"), hl.Func("blur_y")
    bx[x, y] = (c[x - 1, y] + c[x, y] + c[x + 1, y]) // 3
    by[x, y] = (bx[x, y - 1] + bx[x, y] + bx[x, y + 1]) // 3
    by.vectorize(x, 8).parallel(y)
    bx.compute_at(by, y).vectorize(x, 8)
    return inp, by


def blur_input():
    return np.random.default_rng(7).integers(0, 4096, size=(H, W)).astype(np.uint16)


def halide_realize(inp, func, array):
    inp.set(hl.Buffer(array))
    return np.asarray(func.realize([array.shape[1], array.shape[0]]))


def test_blur_matches_halide_on_numpy_and_halide_buffers():
    inp, by = blur_pipeline()
    p = tally.halide.compile(by)
    assert [a.name for a in p.args] == [inp.name(), by.name()]
    a = blur_input()
    want = halide_realize(inp, by, a)
    out = np.zeros_like(a)
    p(a, out)
    np.testing.assert_array_equal(out, want)
    hb = hl.Buffer(hl.UInt(16), [W, H])
    p(hl.Buffer(a), hb)
    np.testing.assert_array_equal(np.asarray(hb), want)
    # By name, as any tally.Pipeline.
    out[...] = 0
    p(**{inp.name(): a, by.name(): out})
    np.testing.assert_array_equal(out, want)


def test_profiled_pipeline_reports_its_funcs(clean_profiler):
    inp, by = blur_pipeline()
    p = tally.halide.compile(by, target="host-profile", name="py_blur")
    a = blur_input()
    out = np.zeros_like(a)
    for _ in range(3):
        p(a, out)
    np.testing.assert_array_equal(out, halide_realize(inp, by, a))
    s = tally.profiler.stats()["py_blur"]
    assert s["runs"] == 3
    funcs = list(s["sections"]["funcs"])
    assert funcs[0] == "overhead"
    assert by.name() in funcs and "blur_x" in "".join(funcs)
    assert "pipeline: py_blur" in tally.profiler.report()


def test_scalar_params_and_explicit_arguments():
    x = hl.Var("x")
    inp = hl.ImageParam(hl.Float(32), 1, "inp")
    gain = hl.Param(hl.Float(32), "gain")
    offset = hl.Param(hl.Int(32), "offset")
    f = hl.Func("affine")
    f[x] = inp[x + offset] * gain + 0.25
    p = tally.halide.compile(f, arguments=[inp, gain, offset])
    assert [a.name for a in p.args] == ["inp", "gain", "offset", "affine"]
    a = np.arange(40, dtype=np.float32) * 0.5
    out = np.zeros(30, dtype=np.float32)
    p(a, 1.5, 4, out)
    np.testing.assert_array_equal(out, a[4:34] * np.float32(1.5) + np.float32(0.25))


def test_float_constants_are_bit_exact_under_strict_float():
    # 1/255 and 0.1 are not exact in the 6 decimals Halide prints; the bridge carries the value.
    x = hl.Var("x")
    inp = hl.ImageParam(hl.Float(32), 1, "inp")
    f = hl.Func("norm")
    f[x] = hl.strict_float(inp[x] * (1.0 / 255.0) + 0.1)
    a = (np.arange(16, dtype=np.float32) * 17 + 3).astype(np.float32)
    inp.set(hl.Buffer(a))
    want = np.asarray(f.realize([16], hl.get_jit_target_from_environment().with_feature(
        hl.TargetFeature.StrictFloat)))
    out = np.zeros(16, dtype=np.float32)
    tally.halide.compile(f, target="host-strict_float")(a, out)
    np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32))


def test_translate_gives_a_module_before_tallys_lowering():
    inp, by = blur_pipeline()
    m = tally.halide.translate(by, "host-profile")
    assert isinstance(m, tally.Module)
    text = str(m)
    # Halide lowered without its profiler; Tally's probes come with Tally's lowering.
    assert "halide_profiler" not in text and "tally_profiler" not in text
    assert "tally_profiler" in str(tally.lower(m, "host-profile"))


def test_errors_name_what_is_wrong_and_compile_nothing():
    inp, by = blur_pipeline()
    with pytest.raises(tally.CompileError, match="metal"):
        tally.halide.compile(by, target="host-metal")
    with pytest.raises(tally.CompileError, match="no_such_feature"):
        tally.halide.compile(by, target="host-no_such_feature")
    with pytest.raises(TypeError, match="halide.Func"):
        tally.halide.compile(42)
    with pytest.raises(TypeError, match="ImageParam"):
        tally.halide.compile(by, arguments=[3])
    # Halide's own complaint about a schedule comes as Halide raises it.
    x, y = hl.Var("x"), hl.Var("y")
    g, f = hl.Func("g"), hl.Func("f")
    g[x, y] = x + y
    f[x] = g[x, 0]
    g.compute_at(f, y)  # f has no loop over y: Halide finds out when it lowers
    with pytest.raises(hl.HalideError, match="invalid location"):
        tally.halide.compile(f)
    # A wrong buffer is the tally.Pipeline's usual TypeError, and the pipeline still works.
    p = tally.halide.compile(by)
    with pytest.raises(TypeError):
        p(np.zeros((H, W), np.float32), np.zeros((H, W), np.uint16))
    a = blur_input()
    out = np.zeros_like(a)
    p(a, out)
    np.testing.assert_array_equal(out, halide_realize(inp, by, a))


def test_a_schedule_tally_cannot_run_is_named_and_leaves_nothing_behind(clean_profiler):
    """A float histogram whose atomic update runs in a Vulkan kernel: Vulkan kernels' atomics take
    32-bit integers, so the compile fails naming the kernel, the Func and the type. Nothing of it
    is left (no pipeline in the profiler's registry), and the process goes on compiling and
    running, the same pipeline on the host included."""
    x = hl.Var("x")
    inp = hl.ImageParam(hl.Float(32), 2, "hist_in")
    r = hl.RDom([hl.Range(0, 16), hl.Range(0, 8)])
    h = hl.Func("fhist")
    h[x] = 0.0
    h[hl.clamp(hl.cast(hl.Int(32), inp[r.x, r.y]), 0, 7)] += 1.0
    rxo, rxi = hl.RVar("rxo"), hl.RVar("rxi")
    h.update().atomic().split(r.x, rxo, rxi, 4).gpu_blocks(rxo).gpu_threads(rxi)
    with pytest.raises(tally.CompileError,
                       match=r"atomic update of 'fhist' \(float32\); Vulkan kernels' atomic "
                             r"updates take 32-bit integers"):
        tally.halide.compile(h, target="host-vulkan-profile", name="failed_hist")
    assert "failed_hist" not in tally.profiler.stats()
    a = np.random.default_rng(5).integers(0, 8, size=(8, 16)).astype(np.float32)
    host = hl.Func("fhist_host")
    host[x] = 0.0
    host[hl.clamp(hl.cast(hl.Int(32), inp[r.x, r.y]), 0, 7)] += 1.0
    p = tally.halide.compile(host, target="host-profile", name="host_hist")
    out = np.zeros(8, np.float32)
    p(a, out)
    np.testing.assert_array_equal(out, np.bincount(a.astype(int).ravel(), minlength=8))
    assert list(tally.profiler.stats()) == ["host_hist"]


def test_import_tally_does_not_load_halide():
    code = "import sys, tally; assert 'halide' not in sys.modules; print('ok')"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def gpu_blur_pipeline():
    """The blur with a GPU schedule: both stages gpu_tile'd, so two launches per run."""
    x, y, xi, yi = hl.Var("x"), hl.Var("y"), hl.Var("xi"), hl.Var("yi")
    inp = hl.ImageParam(hl.Float(32), 2, "ginp")
    c = hl.BoundaryConditions.repeat_edge(inp)
    bx, by = hl.Func("gblur_x"), hl.Func("gblur_y")
    bx[x, y] = (c[x - 1, y] + c[x, y] + c[x + 1, y]) * 0.25
    by[x, y] = (bx[x, y - 1] + bx[x, y] + bx[x, y + 1]) * 0.25
    bx.compute_root().gpu_tile(x, y, xi, yi, 16, 8)
    by.gpu_tile(x, y, xi, yi, 16, 8)
    return inp, by


@pytest.mark.parametrize("api", ["vulkan", "opencl"])
@pytest.mark.parametrize("variant", ["-profile", "-profile-profile_timestamps"])
def test_gpu_schedule_runs_on_tallys_back_ends(clean_profiler, api, variant):
    if not getattr(tally, api + "_available")():
        pytest.skip("no %s device here" % api)
    inp, by = gpu_blur_pipeline()
    a = np.random.default_rng(3).uniform(0, 1, size=(H, W)).astype(np.float32)
    # Halide's host realize of the same algorithm is the reference.
    x, y = hl.Var("x"), hl.Var("y")
    c = hl.BoundaryConditions.repeat_edge(inp)
    hbx, hby = hl.Func("hbx"), hl.Func("hby")
    hbx[x, y] = (c[x - 1, y] + c[x, y] + c[x + 1, y]) * 0.25
    hby[x, y] = (hbx[x, y - 1] + hbx[x, y] + hbx[x, y + 1]) * 0.25
    want = halide_realize(inp, hby, a)

    name = "gpu_blur_" + api
    p = tally.halide.compile(by, target="host-" + api + variant, name=name)
    out = np.zeros_like(a)
    runs = 2
    for _ in range(runs):
        p(a, out)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
    s = tally.profiler.stats()[name]
    assert s["kernel_launches"] == 2 * runs
    assert s["copies_to_device"] == runs
    copies = s["sections"]["copies to device"]
    assert copies["ginp (copy to device)"]["copies"] == runs
    if "profile_timestamps" in variant:
        assert s["injected_syncs"] == 0
    else:
        # One sync per launch and one per copy to the device: the input's, and the output's
        # (which allocates it on the device and moves nothing, so it counts no copy).
        assert s["injected_syncs"] == s["kernel_launches"] + 2 * runs
