"""Compiling pipelines and calling them on numpy arrays: results, argument checks, errors."""

import threading

import numpy as np
import pytest

import tally
from conftest import CORPUS_DIR, app_stmt

# Reads its output's extents and strides like Halide-lowered code, so any strides work; writes
# out(x, y) = y * scale + x.
COORDS = """module name=coords, target=host
external func coords (out: buffer<int32, 2>, scale: int32) {
  let out.extent.0 = _halide_buffer_get_extent((halide_buffer_t *)out.buffer, 0)
  let out.extent.1 = _halide_buffer_get_extent((halide_buffer_t *)out.buffer, 1)
  let out.stride.0 = _halide_buffer_get_stride((halide_buffer_t *)out.buffer, 0)
  let out.stride.1 = _halide_buffer_get_stride((halide_buffer_t *)out.buffer, 1)
  produce out {
    for (out.s0.y, 0, out.extent.1) {
      for (out.s0.x, 0, out.extent.0) {
        out[(out.s0.y * out.stride.1) + (out.s0.x * out.stride.0)] = (out.s0.y * scale) + out.s0.x
      }
    }
  }
}
"""

# An explicit check inside a parallel loop: it fails on a worker thread when n < 64.
PAR_CHECK = """module name=par_check, target=host
external func par_check (out: buffer<int32, 1>, n: int32) {
  produce out {
    parallel (out.s0.x, 0, 64) {
      assert(out.s0.x < n, halide_error_param_too_large_i64("x", int64(out.s0.x), int64(n) - (int64)1))
      out[out.s0.x] = out.s0.x * 3
    }
  }
}
"""

# One scalar of every kind, stored to a float64 output so the test can read them back.
SCALARS = """module name=scalars, target=host
external func scalars (out: buffer<float64, 1>, a: int8, b: uint16, c: int64, d: float32, e: float64, f: bool, g: uint64) {
  out[0] = float64(a)
  out[1] = float64(b)
  out[2] = float64(c)
  out[3] = float64(d)
  out[4] = e
  out[5] = select(f, 1.0, 0.0)
  out[6] = float64(g)
}
"""


def blur_reference(inp, w, h):
    """apps/blur: 3x3 box blur in two stages, sums widened to uint32, quotients truncated."""
    i = inp.astype(np.uint32)
    bx = (i[:, 0:w] + i[:, 1 : w + 1] + i[:, 2 : w + 2]) // 3
    bx = bx.astype(np.uint16).astype(np.uint32)
    return ((bx[0:h] + bx[1 : h + 1] + bx[2 : h + 2]) // 3).astype(np.uint16)


@pytest.fixture(scope="module")
def blur():
    return tally.parse(app_stmt("blur")).compile("host")


@pytest.fixture(scope="module")
def coords():
    return tally.parse(COORDS).compile()


@pytest.fixture(scope="module")
def par_check():
    return tally.parse(PAR_CHECK).compile()


# ---- results ------------------------------------------------------------------------------------


@pytest.mark.parametrize("w,h", [(1, 1), (8, 8), (13, 7), (101, 37), (640, 480)])
def test_blur_matches_numpy(blur, w, h):
    rng = np.random.default_rng(w * 1000 + h)
    inp = rng.integers(0, 65536, size=(h + 2, w + 2), dtype=np.uint16)
    out = np.zeros((h, w), dtype=np.uint16)
    assert blur(inp, out, w, h) is None
    np.testing.assert_array_equal(out, blur_reference(inp, w, h))


def test_blur_by_keyword_and_lowered_compile():
    rng = np.random.default_rng(7)
    w, h = 40, 30
    inp = rng.integers(0, 65536, size=(h + 2, w + 2), dtype=np.uint16)
    out = np.zeros((h, w), dtype=np.uint16)
    # tally.compile takes an already lowered module.
    p = tally.compile(tally.lower(tally.parse(app_stmt("blur")), "host"), opt_level=2)
    p(width=w, height=h, output=out, input=inp)
    np.testing.assert_array_equal(out, blur_reference(inp, w, h))


def test_pipeline_attributes(blur):
    assert blur.name == "blur"
    assert [a.name for a in blur.args] == ["input", "output", "width", "height"]
    assert blur.outputs == ["output"]
    assert str(blur.target) == "host"
    assert "tally_profiler_start" not in str(blur.module)
    assert repr(blur).startswith("<tally.Pipeline blur(input: buffer<uint16, 2>")


def test_strided_arrays(coords):
    ref = np.arange(5)[:, None] * 1000 + np.arange(7)[None, :]
    big = np.full((12, 20), -1, dtype=np.int32)
    views = {
        "dense": np.zeros((5, 7), dtype=np.int32),
        "every other row and column": big[1:11:2, 3:17:2],
        "reversed": big[::-1, ::-1][:5, :7],
        "transposed": np.zeros((7, 5), dtype=np.int32).T,
    }
    for name, v in views.items():
        big[...] = -1
        coords(v, 1000)
        np.testing.assert_array_equal(v, ref, err_msg=name)
        if v.base is big or (v.base is not None and v.base.base is big):
            assert (big == -1).sum() == big.size - v.size, name  # nothing else written


def test_halide_lowered_pipeline_with_a_strided_output():
    # mandelbrot.host.stmt is Halide 14's own output: it reads the buffer's mins, extents and
    # strides, and checks them.
    p = tally.parse(CORPUS_DIR / "mandelbrot.host.stmt").compile()
    assert [a.name for a in p.args] == ["x_min", "y_min", "scale", "iters", "mandelbrot"]
    dense = np.zeros((30, 64), dtype=np.uint8)
    p(-2.0, -1.0, 3.0 / 64, 40, dense)
    big = np.full((30, 80), 7, dtype=np.uint8)
    view = big[:, 5:69]
    p(x_min=-2.0, y_min=-1.0, scale=3.0 / 64, iters=40, mandelbrot=view)
    np.testing.assert_array_equal(view, dense)
    assert (big[:, :5] == 7).all() and (big[:, 69:] == 7).all()


def test_scalars_are_converted_to_their_types():
    p = tally.parse(SCALARS).compile()
    out = np.zeros(7, dtype=np.float64)
    p(out, -128, 65535, -(2**62), 0.1, 1e300, True, 2**64 - 1)
    assert out[0] == -128 and out[1] == 65535 and out[2] == float(-(2**62))
    assert out[3] == float(np.float32(0.1))  # rounded to float32
    assert out[4] == 1e300 and out[5] == 1.0 and out[6] == float(2**64 - 1)
    # numpy scalars and ints for floats are fine too.
    p(out, np.int8(5), np.uint16(6), np.int64(7), 2, np.float64(0.5), np.bool_(False), 0)
    assert list(out) == [5, 6, 7, 2, 0.5, 0, 0]


def test_half_precision_scalars_round_once():
    # float16 and bfloat16 scalars are rounded to nearest even straight from the Python float:
    # each value lies just above a tie, which rounding through float32 first would lose (and then
    # round down to even). Past the largest finite value is OverflowError; infinities pass.
    p = tally.parse(
        """module name=halves, target=host
external func halves (out: buffer<float64, 1>, h: float16, b: bfloat16) {
  out[0] = float64(h)
  out[1] = float64(b)
}
"""
    ).compile()
    out = np.zeros(2, dtype=np.float64)
    p(out, 1 + 2**-11 + 2**-40, 1 + 2**-8 + 2**-30)
    assert list(out) == [1 + 2**-10, 1 + 2**-7]
    p(out, 65504.0, -2.5)
    assert list(out) == [65504.0, -2.5]
    with pytest.raises(OverflowError, match="argument 'h' = 65505 is out of range for float16"):
        p(out, 65505.0, 1.0)
    with pytest.raises(OverflowError, match="argument 'b' = 3.4e\\+38 is out of range for bfloat16"):
        p(out, 1.0, 3.4e38)
    p(out, float("inf"), float("-inf"))
    assert out[0] == np.inf and out[1] == -np.inf


def test_concurrent_calls(blur):
    # Calls release the GIL; one Pipeline may run on several threads at once.
    w, h = 300, 200
    rng = np.random.default_rng(3)
    inputs = [rng.integers(0, 65536, size=(h + 2, w + 2), dtype=np.uint16) for _ in range(4)]
    outputs = [np.zeros((h, w), dtype=np.uint16) for _ in range(4)]
    errors = []

    def work(i):
        try:
            for _ in range(5):
                blur(inputs[i], outputs[i], w, h)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i in range(4):
        np.testing.assert_array_equal(outputs[i], blur_reference(inputs[i], w, h))


def test_calls_release_the_gil():
    # One long call on a worker thread: row by row, a serial chain of multiply-adds per element,
    # each element stored when its chain is done. Meanwhile this thread runs Python code that
    # looks at the output: it must catch the call half-way (the first element written, the last
    # not yet), which it cannot if the GIL is held for the whole call. An observation, not a
    # timing: the machine's load cannot make a correct binding fail or a wrong one pass.
    spin = tally.parse(
        """module name=spin, target=host
external func spin (out: buffer<int32, 1>, n: int32, rounds: int32) {
  for (spin.i, 0, n) {
    for (spin.k, 0, rounds) {
      out[spin.i] = (out[spin.i] * 1103515245) + 12345
    }
  }
}
"""
    ).compile()
    n = 64
    out = np.zeros(n, dtype=np.int32)
    worker = threading.Thread(target=lambda: spin(out, n, 8_000_000))
    worker.start()
    half_way = False
    while worker.is_alive() and not half_way:
        half_way = out[0] != 0 and out[n - 1] == 0
    worker.join()
    assert out[n - 1] != 0, "the call did not finish"
    assert half_way, "no Python code ran while the call was in progress"


# ---- argument errors ----------------------------------------------------------------------------


def blur_args(w=8, h=6):
    return np.zeros((h + 2, w + 2), dtype=np.uint16), np.zeros((h, w), dtype=np.uint16), w, h


def test_wrong_dtype(blur):
    inp, out, w, h = blur_args()
    with pytest.raises(TypeError, match="argument 'input' expects a buffer of uint16, got a buffer of float32"):
        blur(inp.astype(np.float32), out, w, h)
    with pytest.raises(TypeError, match="argument 'output' expects a buffer of uint16, got a buffer of int16"):
        blur(inp, out.astype(np.int16), w, h)
    with pytest.raises(TypeError, match="argument 'input' expects a buffer of uint16 with 2 dimensions, got list"):
        blur([[1, 2], [3, 4]], out, w, h)


def test_wrong_rank(blur):
    inp, out, w, h = blur_args()
    with pytest.raises(ValueError, match=r"argument 'input' expects a buffer with 2 dimensions, got 1"):
        blur(inp.ravel(), out, w, h)
    with pytest.raises(ValueError, match=r"argument 'output' expects a buffer with 2 dimensions, got 3"):
        blur(inp, out[None], w, h)


def test_read_only_output(blur):
    inp, out, w, h = blur_args()
    out.flags.writeable = False
    with pytest.raises(ValueError, match="'output' is written by the pipeline, but the buffer given is read-only"):
        blur(inp, out, w, h)
    # A read-only input is fine.
    out.flags.writeable = True
    inp.flags.writeable = False
    blur(inp, out, w, h)


def test_strides_must_be_element_multiples(coords):
    raw = np.zeros(400, dtype=np.uint8)
    odd = np.ndarray(shape=(5, 7), dtype=np.int32, buffer=raw.data, strides=(42, 6))
    with pytest.raises(ValueError, match=r"stride of axis 1 \(6 bytes\) is not a multiple of the element size \(4 bytes\)"):
        coords(odd, 1)


def test_dense_pipelines_need_contiguous_arrays(par_check):
    # par_check never reads its buffer's strides: a strided view would be read as if it were dense.
    wide = np.zeros(128, dtype=np.int32)
    with pytest.raises(ValueError, match=r"'out' must be dense \(strides 1\), got strides 2"):
        par_check(wide[::2], 64)


def test_apps_check_their_buffers(blur):
    # The shipped apps check their buffers as Halide's lowering does (type, rank, the region they
    # touch, and their layout constraints), so a wrong buffer is an error naming it.
    inp, out, w, h = blur_args()
    checks = [
        ((inp[:, :-1], out, w, h), -4,
         f"Input buffer input is accessed at {w + 1}, which is beyond the max ({w}) in dimension 0"),
        ((inp, out[:-1], w, h), -4,
         f"Output buffer output is accessed at {h - 1}, which is beyond the max ({h - 2}) in dimension 1"),
        ((np.zeros((h + 2, 2 * (w + 2)), dtype=np.uint16)[:, ::2], out, w, h), -8,
         "Constraint violated: input.stride.0 (2) == 1 (1)"),
        ((np.zeros((h + 2, w + 3), dtype=np.uint16), out, w, h), -8,
         f"Constraint violated: input.stride.1 ({w + 3}) == width + 2 ({w + 2})"),
        ((inp, out, 0, h), -9, "Parameter width is 0 but must be at least 1"),
    ]
    for args, code, message in checks:
        with pytest.raises(tally.RuntimeError) as info:
            blur(*args)
        assert (str(info.value), info.value.code) == (message, code)


def test_scalar_errors(blur):
    inp, out, w, h = blur_args()
    with pytest.raises(TypeError, match="argument 'width' expects int32, got float"):
        blur(inp, out, 8.0, h)
    with pytest.raises(OverflowError, match="argument 'height' = 4294967296 is out of range for int32"):
        blur(inp, out, w, 2**32)
    with pytest.raises(TypeError, match="argument 'width' expects int32, got str"):
        blur(inp, out, "8", h)


def test_binding_errors(blur):
    inp, out, w, h = blur_args()
    with pytest.raises(TypeError, match=r"missing required argument\(s\): 'height'"):
        blur(inp, out, w)
    with pytest.raises(TypeError, match="takes 4 arguments but 5 were given"):
        blur(inp, out, w, h, 1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'depth'"):
        blur(inp, out, w, h, depth=1)
    with pytest.raises(TypeError, match="multiple values for argument 'input'"):
        blur(inp, out, w, h, input=inp)


# ---- runtime errors -----------------------------------------------------------------------------


def test_runtime_error_from_a_bounds_check():
    # Halide's blur3x3 reads input(x-1 .. x+1, y-1 .. y+1): with all mins 0 the input would have to
    # start at -1, and the pipeline's own bounds check fails.
    p = tally.parse(CORPUS_DIR / "blur3x3.host.stmt").compile()
    inp = np.zeros((40, 300), dtype=np.uint16)
    out = np.zeros((32, 256), dtype=np.uint16)
    with pytest.raises(tally.RuntimeError) as info:
        p(inp, out)
    e = info.value
    assert str(e) == "Input buffer input is accessed at -1, which is before the min (0) in dimension 0"
    assert e.code == -4 and e.code_name == "ERROR_ACCESS_OUT_OF_BOUNDS"
    assert isinstance(e, RuntimeError)


def blur3x3_reference(inp):
    bx = (inp[:, :-2] + inp[:, 1:-1] + inp[:, 2:]) // 3
    return (bx[:-2] + bx[1:-1] + bx[2:]) // 3


def test_buffer_mins_give_a_stencil_its_halo():
    # The same pipeline runs once its input starts at (-1, -1), and matches the 3x3 box blur;
    # the output may start anywhere if the input moves with it.
    p = tally.parse(CORPUS_DIR / "blur3x3.host.stmt").compile()
    rng = np.random.default_rng(7)
    inp = rng.integers(0, 4096, size=(34, 258), dtype=np.uint16)
    out = np.zeros((32, 256), dtype=np.uint16)
    p(tally.Buffer(inp, mins=(-1, -1)), out)
    np.testing.assert_array_equal(out, blur3x3_reference(inp))
    moved = np.zeros_like(out)
    p(tally.Buffer(inp, mins=(9, 4)), tally.Buffer(moved, mins=(10, 5)))
    np.testing.assert_array_equal(moved, out)
    # A halo one short on the right is the pipeline's own bounds error, naming the dimension.
    with pytest.raises(tally.RuntimeError, match="beyond the max .* in dimension 0"):
        p(tally.Buffer(inp[:, :-1], mins=(-1, -1)), out)


def test_buffer_mins_are_checked():
    p = tally.parse(CORPUS_DIR / "blur3x3.host.stmt").compile()
    inp = np.zeros((34, 258), dtype=np.uint16)
    out = np.zeros((32, 256), dtype=np.uint16)
    with pytest.raises(ValueError, match="tally.Buffer gives 1 mins for an array with 2 dimensions"):
        p(tally.Buffer(inp, mins=(-1,)), out)
    with pytest.raises(TypeError, match="tally.Buffer expects an array, got int"):
        tally.Buffer(3, mins=(0,))
    b = tally.Buffer(inp, mins=(-1, -2))
    assert b.mins == [-1, -2] and b.array is inp


def test_runtime_error_on_a_worker_thread(par_check):
    out = np.zeros(64, dtype=np.int32)
    par_check(out, 64)
    np.testing.assert_array_equal(out, np.arange(64) * 3)
    # The failing check runs inside the parallel loop, on the thread pool; its message still
    # reaches the exception, and only once per call.
    for _ in range(3):
        with pytest.raises(tally.RuntimeError, match=r"^Parameter x is \d+ but must be at most 9$") as info:
            par_check(out, 10)
        assert info.value.code_name == "ERROR_PARAM_TOO_LARGE"
    # After a failure the pipeline still works.
    par_check(out, 100)


def test_runtime_errors_are_not_printed_outside_calls(par_check, capfd):
    out = np.zeros(64, dtype=np.int32)
    with pytest.raises(tally.RuntimeError):
        par_check(out, 1)
    assert "Parameter x" not in capfd.readouterr().err


def test_compile_errors():
    with pytest.raises(tally.CompileError):
        tally.parse(app_stmt("blur")).compile("host-metal")  # no Metal back end
    with pytest.raises(TypeError):
        tally.parse(app_stmt("blur")).compile(3)


EMBEDDED = """module name=embedded, target=host
buffer lut = {...}
external func embedded (out: buffer<float32, 1>) {
  let lut = (void *)_halide_buffer_get_host((halide_buffer_t *)lut.buffer)
  let lut.min.0 = _halide_buffer_get_min((halide_buffer_t *)lut.buffer, 0)
  for (x, 0, 8) {
    out[x] = (float32)lut[x % 4] + float32(lut.min.0)
  }
}
"""


def test_buffer_constants_take_an_arrays_contents():
    m = tally.parse(EMBEDDED)
    with pytest.raises(tally.CompileError, match="buffer constant 'lut'"):
        m.compile("host")
    lut = np.array([0.5, 1.5, 2.5, 3.5], dtype=np.float32)
    given = m.with_buffer_constant("lut", lut, mins=[-10])
    lut[:] = 0  # copied: later changes to the array do not reach the module
    out = np.zeros(8, dtype=np.float32)
    given.compile("host")(out)
    np.testing.assert_array_equal(out, np.tile([0.5, 1.5, 2.5, 3.5], 2) - 10)
    with pytest.raises(tally.CompileError, match="no opaque buffer constant"):
        m.with_buffer_constant("lux", lut)
    with pytest.raises(tally.CompileError, match="1 extents but 2 mins"):
        m.with_buffer_constant("lut", lut, mins=[0, 0])
    with pytest.raises(TypeError, match="unsupported element type"):
        m.with_buffer_constant("lut", np.zeros(4, dtype=np.complex64))
