#!/usr/bin/env python3
"""Reference values of Halide 21's intrinsics, computed by Halide 21 itself, for Tally's
end-to-end test test/e2e/Halide21IntrinsicTest.cpp (which needs no Halide: it reads the file
this script writes).

Each case is one intrinsic on edge inputs (NaN, infinities, signed zeros, ties, the limits of
every integer type and the values just past them). Halide realizes it twice, as scalars and
vectorized by 8, on a fixed x86 target, with and without the strict_float feature. The
reference is strict_float's, which evaluates Halide's lowering of the intrinsic as written (as
Tally does); without it Halide's fast-math flags let LLVM put a NaN elsewhere, so there the
script allows other values for lanes with a NaN input, and notes how many in the file. Any
other disagreement stops the script (Halide's answer would depend on how it is compiled, and be
no reference). The file holds, per case, the call in Tally's text with $a and $b for the
operands, the types, and every input and expected output as hexadecimal bit patterns.

Run with the Python of the virtual environment ./run.sh fills:

  .venv/bin/python tools/halide21/intrinsic_reference.py [OUT]

OUT defaults to test/e2e/data/halide21_intrinsics.txt beside this script's repository.
"""
import itertools
import math
import os
import sys

import halide as hl
import numpy as np

BASE = "x86-64-linux-avx-avx2-fma-f16c-sse41"
TARGETS = [hl.Target(BASE), hl.Target(BASE + "-strict_float")]

NP = {
    "int8": np.int8, "uint8": np.uint8, "int16": np.int16, "uint16": np.uint16,
    "int32": np.int32, "uint32": np.uint32, "int64": np.int64, "uint64": np.uint64,
    "float32": np.float32, "float64": np.float64, "bool": np.bool_,
}
HL = {
    "int8": hl.Int(8), "uint8": hl.UInt(8), "int16": hl.Int(16), "uint16": hl.UInt(16),
    "int32": hl.Int(32), "uint32": hl.UInt(32), "int64": hl.Int(64), "uint64": hl.UInt(64),
    "float32": hl.Float(32), "float64": hl.Float(64), "bool": hl.Bool(),
}
UINT_OF = {1: np.uint8, 8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def bits_of(name):
    return 1 if name == "bool" else int("".join(c for c in name if c.isdigit()))


def int_limits(name):
    b = bits_of(name)
    return (-(1 << (b - 1)), (1 << (b - 1)) - 1) if name.startswith("int") else (0, (1 << b) - 1)


def int_edges(name):
    lo, hi = int_limits(name)
    vals = {lo, lo + 1, -129, -128, -1, 0, 1, 2, 3, 127, 128, 255, 256, 32767, 32768, 65535,
            65536, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1, hi // 2, hi - 1, hi,
            -(2**31), -(2**31) - 1, -32768, -32769, 0x55555555, -0x2AAAAAAB, 12345, -12345}
    return sorted(v for v in vals if lo <= v <= hi)


def float_edges(name):
    f = np.finfo(NP[name])
    vals = [math.nan, math.inf, -math.inf, 0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997,
            -0.49999997, 1.0, -1.0, 1.7, -1.7, 127.0, 127.5, 128.0, 255.0, 255.5, 256.0, -128.0,
            -128.5, -129.0, 32767.0, 32767.5, 32768.0, -32768.0, -32768.5, -32769.0, 65535.0,
            65535.5, 65536.0, 2147483520.0, 2147483647.0, 2147483648.0, -2147483648.0,
            -2147483904.0, 4294967040.0, 4294967295.0, 4294967296.0, 8388609.0, 8388608.5,
            16777217.0, 4503599627370497.0, 9.223372036854775e18, -9.223372036854775e18,
            1.8446744073709552e19, 1e10, -1e10, 1e30, -1e30, float(f.max), float(-f.max),
            float(f.tiny), -float(f.tiny), 3e38, 1e300, -1e300]
    with np.errstate(over="ignore"):
        out = [NP[name](v) for v in vals]  # beyond float32's range: infinity, deduplicated
    # one of each bit pattern, in order
    seen, res = set(), []
    for x in out:
        k = np.array([x], dtype=NP[name]).view(UINT_OF[bits_of(name)])[0]
        if k not in seen:
            seen.add(k)
            res.append(x)
    return res


def edges(name):
    return float_edges(name) if name.startswith("float") else [NP[name](v) for v in int_edges(name)]


def hexes(arr, name):
    u = np.asarray(arr, dtype=NP[name]).view(UINT_OF[bits_of(name)]) if name != "bool" else \
        np.asarray(arr).astype(np.uint8)
    return " ".join("%x" % int(v) for v in u)


def realize(label, expr_fn, out, ins, n):
    """Realizes out(x) = expr_fn(inputs at x) four ways; returns the one result they agree on."""
    results = []
    for target in TARGETS:
        for vec in (False, True):
            # The Python binding has no uint64 buffers: those travel as int64, reinterpreted.
            def wrap(a):
                return a.view(np.int64) if a.dtype == np.uint64 else a
            bufs = [hl.Buffer(np.ascontiguousarray(wrap(a))) for a in ins]
            x = hl.Var("x")
            f = hl.Func("f")
            args = [hl.reinterpret(hl.UInt(64), b[x]) if a.dtype == np.uint64 else b[x]
                    for a, b in zip(ins, bufs)]
            e = expr_fn(*args)
            f[x] = hl.reinterpret(hl.Int(64), e) if out == "uint64" else e
            if vec:
                f.vectorize(x, 8, hl.TailStrategy.GuardWithIf)
            r = f.realize([n], target)
            r = np.array(r).copy()
            results.append(r.view(np.uint64) if out == "uint64" else r)
    # The reference is strict_float's (results[2:]), which evaluates Halide's lowering as
    # written; with fast-math flags a NaN may land elsewhere, which is allowed only there.
    first = results[2]
    nan_in = np.zeros(n, dtype=bool)
    for a in ins:
        if a.dtype.kind == "f":
            nan_in |= np.isnan(a)
    loose = 0
    for k, other in enumerate(results):
        a = first.view(UINT_OF[bits_of(out)]) if out != "bool" else first
        b = other.view(UINT_OF[bits_of(out)]) if out != "bool" else other
        if out.startswith("float"):
            same = (a == b) | (np.isnan(first) & np.isnan(other))
        else:
            same = a == b
        if k < 2:
            loose += int((~same & nan_in).sum())
            same |= nan_in
        if not same.all():
            i = int(np.argmin(same))
            raise SystemExit("Halide's results depend on how it compiles: %s, inputs %s: %s vs "
                             "%s (variant %d)" % (label, [a[i] for a in ins], first[i], other[i], k))
    return first, loose


CASES = []


def case(call, out, a, b=None, fn=None, pairs=None):
    CASES.append((call, out, a, b, fn, pairs))


# saturating_cast from every float and integer type to the others.
for src in ["float32", "float64"]:
    for dst in ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                "float32", "float64", "bool"]:
        case("saturating_cast($a)", dst, src, fn=lambda a, d=dst: hl.saturating_cast(HL[d], a))
for src in ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]:
    for dst in ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                "float32", "float64"]:
        if dst != src:
            case("saturating_cast($a)", dst, src,
                 fn=lambda a, d=dst: hl.saturating_cast(HL[d], a))

# round: to nearest, ties to even.
for t in ["float32", "float64"]:
    case("round($a)", t, t, fn=hl.round)


def no_signed_overflow(op, wide):
    """Halide's int32 and int64 arithmetic must not overflow (IR.h); narrower types wrap."""
    lo, hi = int_limits(wide)

    def ok(x, y):
        if not wide.startswith("int") or bits_of(wide) < 32:
            return True
        r = op(int(x), int(y))
        return lo <= r <= hi
    return ok


# widen_right_*: a op widen(b), in a's type.
for wide, narrow in [("uint16", "uint8"), ("int16", "int8"), ("uint32", "uint16"),
                     ("int32", "int16"), ("uint64", "uint32"), ("int64", "int32")]:
    for name, op, fn in [("widen_right_add", lambda x, y: x + y, hl.widen_right_add),
                         ("widen_right_sub", lambda x, y: x - y, hl.widen_right_sub),
                         ("widen_right_mul", lambda x, y: x * y, hl.widen_right_mul)]:
        case(name + "($a, $b)", wide, wide, narrow, fn=fn, pairs=no_signed_overflow(op, wide))

# concat_bits: the first argument in the low bits (a negative signed one sign-extends).
for t, wide in [("uint8", "uint16"), ("int8", "int16"), ("uint16", "uint32"), ("int16", "int32"),
                ("uint32", "uint64"), ("int32", "int64")]:
    case("concat_bits($a, $b)", wide, t, t, fn=lambda a, b: hl.concat_bits([a, b]))

# extract_bits: the result type's width of bits from b up.
for out, src, lsb in [("uint8", "uint32", "int32"), ("int8", "int32", "int32"),
                      ("uint16", "int16", "uint8"), ("int16", "uint64", "int32"),
                      ("float32", "uint64", "uint32"), ("uint32", "float32", "int32"),
                      ("uint8", "uint8", "int32")]:
    nbits = max(bits_of(src), bits_of(lsb))
    shifts = [s for s in range(-bits_of(src) + 1, bits_of(src))
              if (lsb.startswith("int") or s >= 0) and int_limits(lsb)[0] <= s <= int_limits(lsb)[1]
              and abs(s) < nbits]
    case("extract_bits($a, $b)", out, src, lsb,
         fn=lambda a, b, o=out: hl.extract_bits(HL[o], a, b),
         pairs=("shifts", shifts))

# A few floats of every kind, for the operations on two: every pair of them.
STRICT_VALUES = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.5, 0.1, 3.0, 1e30, -1e-30,
                 3e38, 1e-40]

# strict_*: Halide's strict_float makes these of float arithmetic and comparisons.
for t in ["float32", "float64"]:
    for name, fn, out in [("strict_add", lambda a, b: a + b, t), ("strict_sub", lambda a, b: a - b, t),
                          ("strict_mul", lambda a, b: a * b, t), ("strict_div", lambda a, b: a / b, t),
                          ("strict_min", hl.min, t), ("strict_max", hl.max, t),
                          ("strict_lt", lambda a, b: a < b, "bool"),
                          ("strict_le", lambda a, b: a <= b, "bool"),
                          ("strict_eq", lambda a, b: a == b, "bool")]:
        case(name + "($a, $b)", out, t, t, fn=lambda a, b, f=fn: hl.strict_float(f(a, b)),
             pairs=("values", STRICT_VALUES))


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        root, "test", "e2e", "data", "halide21_intrinsics.txt")
    lines = ["# Halide 21.0.0's values of its intrinsics, written by "
             "tools/halide21/intrinsic_reference.py; do not edit.",
             "# case <call, $a and $b the operands> <result type> <a's type> [<b's type>], then "
             "lines a, b and out of hexadecimal bit patterns."]
    for call, out, a, b, fn, pairs in CASES:
        av = edges(a)
        if b is None:
            ins = [np.array(av, dtype=NP[a])]
        else:
            if isinstance(pairs, tuple) and pairs[0] == "values":
                vals = [NP[a](v) for v in pairs[1]]
                ps = list(itertools.product(vals, vals))
            elif isinstance(pairs, tuple):
                bv = [NP[b](s) for s in pairs[1]]
                ps = list(itertools.product(av[:12] + av[-6:], bv))
            else:
                bvals = edges(b)
                ps = [(x, y) for x, y in itertools.product(av, bvals)
                      if pairs is None or pairs(x, y)]
            ins = [np.array([p[0] for p in ps], dtype=NP[a]), np.array([p[1] for p in ps], dtype=NP[b])]
        n = len(ins[0])
        res, loose = realize("%s -> %s" % (call, out), fn, out, ins, n)
        if loose:
            lines.append("# without strict_float, Halide gives another value for %d of these "
                         "lanes, all with a NaN input" % loose)
        if out == "bool":
            res = res.astype(np.uint8)
        lines.append("case %s %s %s%s" % (call.replace(" ", ""), out, a, "" if b is None else " " + b))
        lines.append("a " + hexes(ins[0], a))
        if b is not None:
            lines.append("b " + hexes(ins[1], b))
        lines.append("out " + hexes(res, out))
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("%d cases written to %s" % (len(CASES), out_path))


if __name__ == "__main__":
    main()
