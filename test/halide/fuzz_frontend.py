#!/usr/bin/env python3
"""Fuzzes the Halide front end: random Halide 21 pipelines with random schedules, each compiled by
Tally through the bridge (tally.halide.compile) and checked against Halide's own realize.

    fuzz_frontend.py [--seed S] [--first K] [--cases N] [--seconds T] [--save DIR] [--isolated]
                     [--replay FILE...] [--print K]

Each case is a pipeline written as Python source by a generator of its own (seeded: case K of seed
S is the same program everywhere), so a failing case is kept as a file that runs on its own:
`--save DIR` writes every failing case's source there, `--replay FILE...` runs kept cases
(test/halide/fuzz_regressions/, replayed by ctest). What a case holds:

- an input ImageParam of uint8, uint16, int32 or float32 (2-D, 17 to 64 by 9 to 40), read through
  a boundary condition (repeat_edge, constant_exterior, mirror_interior) or clamped coordinates;
- one to four Funcs, each a typed expression tree (casts, + - *, integer division and modulo by
  any value, including zero, which Halide defines, min, max, select, comparisons, absd, shifts,
  bitwise operations, float sqrt, floor, ceil, float division by constants) kept clear of
  what Halide leaves undefined (a float cast to an integer type out of its range, int32
  overflow, NaN). Not float lerp: Halide computes it with its fast-math flags even for a
  strict_float target (zero + (one - zero) * w, where its own lowering says zero * (1 - w) +
  one * w, which Tally computes), so a cast of it to an integer can differ by one
  (test/halide/fuzz_findings/) over the input and earlier Funcs at small
  offsets, some with an update definition over an RDom;
- a schedule for each: inlined, compute_root or compute_at the output (with store_root: sliding
  windows), split, tile, vectorize, unroll, parallel, reorder, fuse, update definitions scheduled
  too, and sometimes async producers and a specialization on the input's width.

A case that computes in floating point is compiled for strict_float on both sides (Halide's
non-strict code may reassociate, which changes float results and, through a cast, integers). A
case passes when Tally's output equals Halide's (integers exactly; floats to 1e-4 relative, NaN
where Halide has NaN), both writing into an output of exactly W x H, or when Halide itself
rejects the case (an invalid compute_at when it compiles, a RoundUp tail that writes outside the
output when it runs) and Tally does too: such a case is counted as rejected. Where the outputs
differ, Halide's realize of the case's algorithm alone (its schedule left out) decides: if Tally's
output is that one, Halide's scheduled code is what is wrong (counted as "Halide differs from
its own algorithm", saved with --save, not a failure of Tally's). Any other outcome fails: Tally
raising where Halide compiled, a wrong value, a crash (the process dies: the driver sees it).
After a Tally error the process must stay usable: the next case compiles in the same process.

`--isolated` (for campaigns) runs the cases in child processes: a case that kills its process is
run again with Halide's realize alone, which says whose crash it is (Halide's own, or Tally's),
and the campaign goes on after it.

Prints one line per failing case and a summary (cases, rejected, failed, seconds, cases a
second). Exit status 1 if any case failed. `--check-the-check` changes one value of Tally's output
in every case and exits 0 only if every case that ran was then caught: the comparison can fail.
"""

import argparse
import pathlib
import random
import sys
import time
import traceback

import warnings

import numpy as np

import halide as hl
import tally

TYPES = {"u8": "hl.UInt(8)", "u16": "hl.UInt(16)", "i32": "hl.Int(32)", "f32": "hl.Float(32)"}
NP_TYPES = {"u8": np.uint8, "u16": np.uint16, "i32": np.int32, "f32": np.float32}


class Generator:
    """Writes one random pipeline as Python source: `inp`, the Funcs, `out`, and W, H."""

    def __init__(self, rng):
        self.rng = rng
        self.lines = []
        self.funcs = []  # (name, type)

    def emit(self, line):
        self.lines.append(line)

    def const(self, t):
        r = self.rng
        if t == "f32":
            return repr(round(r.uniform(-4, 4), 3))
        if t == "u8":
            return str(r.randint(0, 255))
        if t == "u16":
            return str(r.randint(0, 65535) if r.random() < 0.2 else r.randint(0, 300))
        return str(r.randint(-300, 300))

    @staticmethod
    def cast(t, e, from_type):
        """e as type t. A float is clamped into t's range first: Halide leaves a float to integer
        cast out of range undefined."""
        if from_type == t:
            return f"hl.Expr({e})"  # not a FuncRef: select() of FuncRefs makes a Tuple
        if from_type == "f32" and t != "f32":
            lo, hi = {"u8": (0, 255), "u16": (0, 65535), "i32": (-2**20, 2**20)}[t]
            e = f"hl.clamp({e}, {lo}.0, {hi}.0)"
        return f"hl.cast({TYPES[t]}, {e})"

    def leaf(self, t):
        r = self.rng
        choice = r.random()
        dx, dy = r.randint(-2, 2), r.randint(-2, 2)
        if choice < 0.45 or not self.funcs:
            return self.cast(t, f"src[x + {dx}, y + {dy}]", self.in_type)
        if choice < 0.8:
            name, ft = r.choice(self.funcs)
            return self.cast(t, f"{name}[x + {dx}, y + {dy}]", ft)
        if choice < 0.9:
            return f"hl.cast({TYPES[t]}, {r.choice(['x', 'y', 'x + y', 'x * 3 - y'])})"
        return f"hl.cast({TYPES[t]}, {self.const(t)})"

    def expr(self, t, depth):
        r = self.rng
        if depth <= 0 or r.random() < 0.25:
            return self.leaf(t)
        a = self.expr(t, depth - 1)
        b = self.expr(t, depth - 1)
        ops = ["+", "-", "min", "max", "select"]
        if t == "f32":
            ops += ["*", "/", "sqrt", "floor", "ceil", "cast_int"]
        else:
            ops += ["*c", "//", "%", "absd", "shift", "cast_wide"]
            if t != "i32":
                ops += ["*", "&", "|", "^"]
        op = r.choice(ops)
        if op in ("+", "-", "*", "&", "|", "^"):
            return f"({a} {op} {b})"
        if op == "*c":
            return f"({a} * {r.randint(0, 5)})"
        if op in ("min", "max"):
            return f"hl.{op}({a}, {b})"
        if op == "select":
            cmp = r.choice(["<", "<=", "==", "!=", ">"])
            c1, c2 = self.expr(t, depth - 1), self.expr(t, depth - 1)
            return f"hl.select({c1} {cmp} {c2}, {a}, {b})"
        if op == "/":  # by a constant away from 0: no inf or NaN, whose min and max differ
            return f"({a} / {r.choice(['-', ''])}{round(r.uniform(0.25, 4), 3)!r})"
        if op == "//":
            return f"({a} // {b})"  # by zero too: Halide defines it as 0
        if op == "%":
            return f"({a} % {b})"
        if op == "sqrt":
            return f"hl.sqrt(hl.abs({a}))"
        if op in ("floor", "ceil"):
            return f"hl.{op}({a})"
        if op == "cast_int":
            return f"hl.cast(hl.Float(32), hl.cast(hl.Int(16), hl.clamp({a}, -30000.0, 30000.0)))"
        if op == "absd":
            return f"hl.cast({TYPES[t]}, hl.absd({a}, {b}))"
        if op == "shift":
            return f"({a} {r.choice(['>>', '<<'])} {r.randint(0, 3)})" if t != "i32" else \
                f"({a} >> {r.randint(0, 3)})"
        if op == "cast_wide":  # widen, average, narrow back: the usual rounding idiom
            wide = {"u8": "hl.UInt(16)", "u16": "hl.UInt(32)", "i32": "hl.Int(64)"}[t]
            return (f"hl.cast({TYPES[t]}, (hl.cast({wide}, {a}) + hl.cast({wide}, {b}) + 1) "
                    f"// 2)")
        raise AssertionError(op)

    def pipeline(self):
        r = self.rng
        self.in_type = r.choice(list(TYPES))
        width, height = r.randint(17, 64), r.randint(9, 40)
        self.emit(f"W, H = {width}, {height}")
        self.emit(f"IN_TYPE = {self.in_type!r}")
        self.emit("x, y = hl.Var('x'), hl.Var('y')")
        self.emit(f"inp = hl.ImageParam({TYPES[self.in_type]}, 2, 'inp')")
        boundary = r.choice(["repeat_edge", "constant_exterior", "mirror_interior", "clamp"])
        if boundary == "clamp":
            self.emit("src = hl.Func('src')")
            self.emit("src[x, y] = inp[hl.clamp(x, 0, inp.width() - 1), "
                      "hl.clamp(y, 0, inp.height() - 1)]")
        elif boundary == "constant_exterior":
            self.emit(f"src = hl.BoundaryConditions.constant_exterior(inp, "
                      f"{self.const(self.in_type)})")
        else:
            self.emit(f"src = hl.BoundaryConditions.{boundary}(inp)")
        n = r.randint(1, 4)
        updated = set()
        for i in range(n):
            t = r.choice(list(TYPES))
            name = f"f{i}"
            self.emit(f"{name} = hl.Func('{name}')")
            self.emit(f"{name}[x, y] = {self.expr(t, r.randint(1, 3))}")
            if r.random() < 0.25:
                self.emit(f"r{i} = hl.RDom([hl.Range({r.randint(-2, 0)}, {r.randint(1, 3)})])")
                self.emit(f"{name}[x, y] = {name}[x, y] + "
                          f"{self.cast(t, f'src[x + r{i}.x, y]', self.in_type)}")
                updated.add(name)
            self.funcs.append((name, t))
        out_name, out_type = self.funcs[-1]
        self.emit(f"out = {out_name}")
        self.emit(f"OUT_TYPE = {out_type!r}")
        # Schedules: producers first, then the output.
        xo, yo, xi, yi, t_ = "hl.Var('xo')", "hl.Var('yo')", "hl.Var('xi')", "hl.Var('yi')", \
            "hl.Var('t')"
        self.emit(f"xo, yo, xi, yi, t = {xo}, {yo}, {xi}, {yi}, {t_}")
        for name, _ in self.funcs[:-1]:
            where = r.choice(["inline", "root", "root", "at_y", "at_x", "sliding"])
            if where == "inline" and name not in updated:
                continue
            if where == "root" or where == "inline":
                line = f"{name}.compute_root()"
            elif where == "at_y":
                line = f"{name}.compute_at(out, y)"
            elif where == "at_x":
                line = f"{name}.compute_at(out, x)"
            else:
                line = f"{name}.store_root().compute_at(out, y)"
            line += self.loop_schedule(allow_parallel=where == "root")
            if r.random() < 0.1 and where == "root":
                line += ".async_()"
            self.emit(line)
            if name in updated:
                schedule = self.loop_schedule(allow_parallel=False) or ".unscheduled()"
                self.emit(f"{name}.update(){schedule}")
        self.emit(f"out{self.output_schedule()}")
        if out_name in updated:
            self.emit(f"out.update(){self.loop_schedule(allow_parallel=True) or '.unscheduled()'}")
        if r.random() < 0.15:
            self.emit("out.specialize(inp.width() >= 32)")
        return "\n".join(self.lines) + "\n"

    def loop_schedule(self, allow_parallel):
        r = self.rng
        s = ""
        if r.random() < 0.4:
            s += f".vectorize(x, {r.choice([2, 4, 8, 16])})"
        elif r.random() < 0.2:
            s += f".unroll(x, {r.choice([2, 3, 4])})"
        if allow_parallel and r.random() < 0.4:
            s += ".parallel(y)"
        return s

    def output_schedule(self):
        r = self.rng
        choice = r.random()
        tail = r.choice(["hl.TailStrategy.GuardWithIf", "hl.TailStrategy.ShiftInwards",
                         "hl.TailStrategy.Auto"])
        if choice < 0.3:
            s = f".tile(x, y, xo, yo, xi, yi, {r.choice([4, 8, 16])}, {r.choice([2, 4, 8])}, {tail})"
            if r.random() < 0.5:
                s += f".vectorize(xi, {r.choice([4, 8])})"
            if r.random() < 0.5:
                s += ".fuse(xo, yo, t).parallel(t)"
            return s
        if choice < 0.5:
            s = f".split(x, xo, xi, {r.choice([3, 4, 8])}, {tail}).reorder(xi, y, xo)"
            return s + (".parallel(xo)" if r.random() < 0.5 else "")
        if choice < 0.6:
            return ".reorder(y, x)" + (".parallel(x)" if r.random() < 0.5 else "")
        return self.loop_schedule(allow_parallel=True)


def without_comments(source):
    """The case without the comment lines --save puts first (its data seed is its length)."""
    while source.startswith("#"):
        source = source.split("\n", 1)[1] if "\n" in source else ""
    return source


def case_source(seed, k):
    return Generator(random.Random(f"{seed}:{k}")).pipeline()


def input_array(ns, seed):
    rng = np.random.default_rng(seed)
    shape = (ns["H"] + 3, ns["W"] + 5)
    t = ns["IN_TYPE"]
    if t == "f32":
        return (rng.standard_normal(shape) * 50).astype(np.float32)
    if t == "i32":
        return rng.integers(-1000, 1000, size=shape).astype(np.int32)
    info = np.iinfo(NP_TYPES[t])
    return rng.integers(0, int(info.max) + 1, size=shape).astype(NP_TYPES[t])


# Set by --check-the-check: Tally's output is changed in one element before the comparison.
PERTURB = False


def run_case(source, data_seed, halide_only=False):
    """'ok' or 'rejected'; raises AssertionError saying what differs. `halide_only`: Halide's
    realize alone ('ok' whatever it does, unless the process dies)."""
    ns = {"hl": hl}
    exec(compile(source, "<case>", "exec"), ns)
    inp, out = ns["inp"], ns["out"]
    a = input_array(ns, data_seed)
    if halide_only:
        try:
            inp.set(hl.Buffer(a))
            out.realize([ns["W"], ns["H"]])
        except (hl.HalideError, RuntimeError):
            pass
        return "ok"
    out_type = NP_TYPES[ns["OUT_TYPE"]]
    strict = "Float(32)" in source
    halide_target = hl.get_jit_target_from_environment()
    if strict:
        halide_target = halide_target.with_feature(hl.TargetFeature.StrictFloat)
    # Both write into an output of exactly W x H (Halide's realize(sizes) would first grow it by
    # a bounds query, and crop the result: a schedule that writes outside, such as a RoundUp
    # tail, then works for Halide alone).
    halide_error = tally_error = None
    out_halide_type = getattr(hl, {"u": "UInt", "i": "Int", "f": "Float"}[ns["OUT_TYPE"][0]])(
        int(ns["OUT_TYPE"][1:]))
    want = hl.Buffer(out_halide_type, [ns["W"], ns["H"]])
    try:
        inp.set(hl.Buffer(a))
        out.realize(want, halide_target)
    except (hl.HalideError, RuntimeError) as e:
        halide_error = e
    got = np.zeros((ns["H"], ns["W"]), dtype=out_type)
    try:
        tally.halide.compile(out, target="host-strict_float" if strict else "host",
                             arguments=[inp])(a, got)
    except (hl.HalideError, tally.CompileError, tally.RuntimeError) as e:
        tally_error = e
    if halide_error and tally_error:
        return "rejected"
    if halide_error:
        raise AssertionError(f"Halide failed ({halide_error}) but Tally ran")
    if tally_error:
        raise AssertionError(f"Tally failed where Halide ran: {type(tally_error).__name__}: "
                             f"{tally_error}")
    want = np.asarray(want)
    if PERTURB:  # --check-the-check: one value off must be caught
        i = len(source) % got.size
        got.flat[i] = got.flat[i] * 1.01 + 1 if ns["OUT_TYPE"] == "f32" else got.flat[i] + 1
    def same_as(reference):
        if ns["OUT_TYPE"] == "f32":
            return np.isclose(got, reference, rtol=1e-4, atol=1e-4, equal_nan=True)
        return got == reference

    same = same_as(want)
    if not same.all():
        # Halide's realize of the algorithm alone (the same case without its schedule).
        algorithm = {"hl": hl}
        exec(compile(source.split("\nxo, yo, xi, yi, t =")[0], "<algorithm>", "exec"),
             algorithm)
        plain = hl.Buffer(out_halide_type, [ns["W"], ns["H"]])
        algorithm["inp"].set(hl.Buffer(a))
        algorithm["out"].realize(plain, halide_target)
        if same_as(np.asarray(plain)).all() and not PERTURB:
            return "halide_differs"
        ys, xs = np.nonzero(~same)
        raise AssertionError(
            f"{len(ys)} of {got.size} values differ; first at x={xs[0]}, y={ys[0]}: "
            f"Tally {got[ys[0], xs[0]]!r}, Halide {want[ys[0], xs[0]]!r}")
    return "ok"


def isolated(args):
    """Runs the cases in child processes, a chunk at a time; when a child dies by a signal, the
    case it was running is run again alone with Halide's realize only: if that dies too, the crash
    is Halide's own (counted, and the case saved with --save, not a failure of Tally's); else it is
    Tally's (a failure). Then the run goes on after that case."""
    import re
    import subprocess
    import tempfile
    start = time.monotonic()
    totals = {"ok": 0, "rejected": 0, "halide_differs": 0, "failed": 0}
    halide_crashes = tally_crashes = 0
    first, end = args.first, args.first + args.cases
    me = [sys.executable, __file__, "--seed", args.seed]
    with tempfile.TemporaryDirectory() as tmp:
        progress = pathlib.Path(tmp) / "progress"
        while first < end:
            left = args.seconds - (time.monotonic() - start) if args.seconds else 0
            if args.seconds and left <= 0:
                break
            cmd = me + ["--first", str(first), "--cases", str(end - first), "--progress",
                        str(progress)] + (["--seconds", str(left)] if args.seconds else []) + \
                (["--save", str(args.save)] if args.save else [])
            progress.write_text("")
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            for line in r.stdout.splitlines():
                if line.startswith(("FAILED", "NOTE")):
                    print(line, flush=True)
            m = re.search(r"front-end fuzz: (\d+) cases \((\d+) matched Halide, (\d+) rejected "
                          r"by both, (\d+) where Halide differs from its own algorithm, (\d+) "
                          r"failed\)", r.stdout)
            if m:  # the child finished its cases
                for key, group in (("ok", 2), ("rejected", 3), ("halide_differs", 4),
                                   ("failed", 5)):
                    totals[key] += int(m.group(group))
                break
            # The child died in the case its progress file names, after the counts there.
            words = progress.read_text().split()
            if not words:
                raise SystemExit(f"the child died before its first case (status {r.returncode})")
            for key, count in zip(("ok", "rejected", "halide_differs", "failed"), words[:4]):
                totals[key] += int(count)
            k = int(words[-1])
            source = case_source(args.seed, k)
            alone = subprocess.run(me + ["--first", str(k), "--cases", "1", "--halide-only"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            whose = "Halide's own realize" if alone.returncode < 0 else "Tally"
            if alone.returncode < 0:
                halide_crashes += 1
            else:
                tally_crashes += 1
            print(f"CRASH seed {args.seed} case {k} (signal {-r.returncode}): {whose} dies on it",
                  flush=True)
            if args.save:
                args.save.mkdir(parents=True, exist_ok=True)
                (args.save / f"crash_{args.seed}_{k}.py").write_text(
                    f"# crashes {whose}\n" + source)
            first = k + 1
    elapsed = time.monotonic() - start
    total = sum(totals.values()) + halide_crashes + tally_crashes
    print(f"front-end fuzz (isolated): {total} cases ({totals['ok']} matched Halide, "
          f"{totals['rejected']} rejected by both, {totals['halide_differs']} where Halide "
          f"differs from its own algorithm, {totals['failed']} failed, {tally_crashes} "
          f"crashed Tally, {halide_crashes} crashed Halide's own realize too) in {elapsed:.1f} s "
          f"({total / max(elapsed, 1e-9):.2f} cases/s)")
    return 1 if totals["failed"] or tally_crashes else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", default="1")
    ap.add_argument("--cases", type=int, default=20)
    ap.add_argument("--first", type=int, default=0, help="start at case K (a campaign resumed)")
    ap.add_argument("--progress", type=pathlib.Path,
                    help="before each case, write the counts so far and the case's name to this "
                         "file, so that a case that kills the process (a crash) is known")
    ap.add_argument("--seconds", type=float, default=0, help="stop after this long (0: no limit)")
    ap.add_argument("--save", type=pathlib.Path, help="write failing cases here")
    ap.add_argument("--replay", nargs="*", type=pathlib.Path, default=None)
    ap.add_argument("--print", type=int, metavar="K", help="print case K's source and exit")
    ap.add_argument("--check-the-check", action="store_true",
                    help="change one value of Tally's output in every case: each case that runs "
                         "must then fail (exit 0 if all did)")
    ap.add_argument("--isolated", action="store_true",
                    help="run the cases in child processes of this script, so that a case that "
                         "kills its process is reported and the run goes on (for campaigns)")
    ap.add_argument("--halide-only", action="store_true",
                    help="only Halide's realize of each case (used by --isolated to tell whose "
                         "crash a crash is)")
    args = ap.parse_args(argv)
    if args.isolated:
        return isolated(args)
    global PERTURB
    PERTURB = args.check_the_check
    if args.print is not None:
        sys.stdout.write(case_source(args.seed, args.print))
        return 0
    if args.replay is not None:
        cases = [(str(f), f.read_text()) for f in args.replay]
    else:
        cases = ((f"seed {args.seed} case {k}", case_source(args.seed, k))
                 for k in range(args.first, args.first + args.cases))
    warnings.simplefilter("ignore")  # Halide's notes on float literals in the generated source
    start = time.monotonic()
    counts = {"ok": 0, "rejected": 0, "halide_differs": 0, "failed": 0}
    for name, source in cases:
        if args.seconds and time.monotonic() - start > args.seconds:
            break
        if args.progress:  # the case about to run, after the counts of those before it
            args.progress.write_text(f"{counts['ok']} {counts['rejected']} "
                                     f"{counts['halide_differs']} {counts['failed']} "
                                     f"{name}\n")
        try:
            outcome = run_case(source, data_seed=len(without_comments(source)),
                               halide_only=args.halide_only)
            counts[outcome] += 1
            if outcome == "halide_differs":
                print(f"NOTE {name}: Halide's scheduled code differs from its own algorithm; "
                      f"Tally's output is the algorithm's", flush=True)
                if args.save:
                    args.save.mkdir(parents=True, exist_ok=True)
                    (args.save / f"{name.replace(' ', '_')}.py").write_text(
                        "# Halide's scheduled code differs from its own algorithm\n" + source)
        except Exception as e:  # a failing case: say it, keep it, go on
            counts["failed"] += 1
            detail = str(e) if isinstance(e, AssertionError) else traceback.format_exc()
            print(f"FAILED {name}: {detail}", flush=True)
            if args.save:
                args.save.mkdir(parents=True, exist_ok=True)
                safe = name.replace(" ", "_")
                (args.save / f"{safe}.py").write_text(f"# {detail.splitlines()[0]}\n" + source)
    elapsed = time.monotonic() - start
    total = sum(counts.values())
    print(f"front-end fuzz: {total} cases ({counts['ok']} matched Halide, {counts['rejected']} "
          f"rejected by both, {counts['halide_differs']} where Halide differs from its own "
          f"algorithm, {counts['failed']} failed) in {elapsed:.1f} s "
          f"({total / max(elapsed, 1e-9):.2f} cases/s)")
    if PERTURB:  # every case that ran must have been caught
        ran = total - counts["rejected"]
        caught = counts["failed"] == ran and counts["failed"] > 0
        print(f"check of the check: {counts['failed']} of {ran} changed "
              f"outputs caught")
        return 0 if caught else 1
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
