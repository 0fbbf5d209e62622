#!/usr/bin/env python3
"""One conformance check of one pipeline of a Halide conformance corpus
(test/conformance/halide14/<pipeline>/ or test/conformance/halide21/<pipeline>/).

    check.py --bin BUILD/bin --corpus test/conformance/halide21 --work DIR --extern-lib LIB.so
             PIPELINE CHECK

--extern-lib is libconformance_externs.so, the C functions of the corpus's extern stages
(extern_stages.c): tally-run gets it as --extern-lib, and the AOT objects are linked with it.

Checks (each a ctest):
  verify   every .stmt file of the pipeline (every variant, lowered, conceptual and GPU) parses
           and verifies (tally-opt --passes=verify)
  host     tally-run on the host variant, with the committed inputs, matches Halide's output
  conceptual  (Halide 21) tally-run on the host variant's conceptual statement
           (<pipeline>.host.conceptual.stmt, which Tally lowers itself) matches Halide's output
           as `host` does
  vulkan   (Halide 21, GPU schedules) tally-run on the Vulkan variant (Halide's own SPIR-V
           kernels in its binary module, unedited) and on its -profile twin (Halide's profiler
           calls), targets host-vulkan and host-vulkan-profile (lavapipe where there is no GPU),
           match Halide's host output; so does the Vulkan variant profiled by Tally
           (host-vulkan-profile), whose report names the pipeline and each func the host code
           produces (not one computed inside a kernel)
  opencl   (Halide 21, GPU schedules) tally-run on the OpenCL variant (Halide's own OpenCL C
           kernels, unedited) and on its -profile twin (Halide's profiler calls), targets
           host-opencl and host-opencl-profile (PoCL where there is no GPU), match Halide's host
           output; and the OpenCL variant profiled by Tally, as for vulkan
  gpu      (Halide 21, GPU schedules) tally-run on the conceptual statement of each GPU variant
           (cuda, opencl, vulkan: Tally offloads their GPU loops itself, retargeted to Vulkan),
           target host-vulkan, matches Halide's host output
  gpu_opencl  the same on OpenCL: target host-opencl (CUDA's and Vulkan's retargeted)
  strict   (float pipelines) tally-run on the strict_float variant is bit-exact with Halide's
           strict_float output
  aot      tallyc compiles every variant to an object and a header; the host (and strict)
           object, linked into a shared object and called through its `_argv` entry point
           with Halide-style buffers over the committed inputs (Tally's runtime from
           libtally.so), matches Halide's output as `host` (and `strict`) do
  profile  tally-run on the profile variant matches Halide's output and its report names the
           pipeline and each of the manifest's funcs
  debug    tally-run on the debug variant matches Halide's output
  bridge   (Halide 21, with the Halide bridge built) the pipeline built from its Halide source
           (tools/corpus/CorpusDefs.cpp) and compiled by the bridge in memory
           (tally::halide::compile, run by test/halide/bridge_corpus.cpp given as --bridge)
           matches Halide's output as `host` does, printed text and files included; for float
           pipelines its strict_float build is bit-exact with Halide's strict_float output
  bridge_gpu  (Halide 21, GPU schedules) the pipeline's GPU schedule through the bridge, on
           host-vulkan and host-opencl (lavapipe and PoCL where there is no GPU), matches
           Halide's host output

Comparison: integer and bool outputs exactly; strict outputs bit for bit; other float outputs
within the manifest's tolerance, |out - ref| <= atol + rtol * |ref|, with NaNs in the same places.

The corpus's xfail.txt lists `<pipeline> <check> <reason>` for checks known to fail today, the
reason naming the outputs expected to differ (`<output>: N of M elements differ; ...`). Like lit's XFAIL,
an xfail check that fails that way passes (printing the reason), and one that passes fails, so
that the list only shrinks when the failure is really fixed; one that fails any other way (a
compile error, other outputs differing) fails.
"""

import argparse
import difflib
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np

VARIANT_TARGETS = {
    "host": "host",
    "profile": "host-profile",
    "debug": "host-debug",
    "strict": "host-strict_float",
    "vulkan": "host-vulkan",
    "vulkan-profile": "host-vulkan-profile",
    "opencl": "host-opencl",
    "opencl-profile": "host-opencl-profile",
}


class CheckFailed(Exception):
    pass


def run(cmd, env=None, timeout=300, cwd=None):
    """Runs `cmd`; returns what it wrote to stdout. (Its stderr is shown, and kept apart: what a
    pipeline prints goes to stdout, as Halide's runtime prints it.)"""
    print("$ " + " ".join(cmd), flush=True)
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                           timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise CheckFailed("timed out after %d s: %s" % (timeout, " ".join(cmd)))
    out = p.stdout.decode("utf-8", "replace")
    err = p.stderr.decode("utf-8", "replace")
    if p.returncode != 0:
        tail = "\n".join((out + err).splitlines()[-20:])
        raise CheckFailed("exit status %d: %s\n%s" % (p.returncode, " ".join(cmd), tail))
    if err:
        print(err, end="" if err.endswith("\n") else "\n")
    return out


def shape_arg(extents, mins):
    return "x".join(str(e) for e in extents) + "@" + ",".join(str(m) for m in mins)


def constant_args(manifest, pdir):
    """--buffer-constant options for the buffers the pipeline embeds (Halide prints them
    `buffer NAME = {...}`, without their data; the corpus carries them as .npy files)."""
    out = []
    for c in manifest.get("buffer_constants", []):
        out += ["--buffer-constant", "%s=%s@%s" % (c["name"], os.path.join(pdir, c["file"]),
                                                   ",".join(str(m) for m in c["mins"]))]
    return out


# Features of a text's target that name its entry points. The -target given to tally-run and
# tallyc replaces the text's target, so these are carried over from it.
NAMING_FEATURES = ("c_plus_plus_name_mangling",)


def variant_target(pdir, name, variant):
    """The -target for a variant (`host`, or `host.conceptual` for its conceptual statement,
    which has no target line: the lowered twin's is read): its VARIANT_TARGETS entry plus the
    text's naming features."""
    lowered = variant.split(".")[0]
    with open(os.path.join(pdir, "%s.%s.stmt" % (name, lowered)), "rb") as f:
        m = re.search(r"\btarget=(\S+)", f.readline().decode("utf-8", "replace"))
    features = m.group(1).split("-") if m else []
    return VARIANT_TARGETS[lowered] + "".join("-" + f for f in NAMING_FEATURES if f in features)


def run_variant(args, manifest, pdir, variant, outdir, env=None, target=None):
    """Runs one variant with tally-run on the committed inputs (for `target`, by default the
    variant's own); returns (what it printed, {output name: file})."""
    name = manifest["pipeline"]
    cmd = [os.path.join(args.bin, "tally-run"), os.path.join(pdir, "%s.%s.stmt" % (name, variant)),
           "-target", target or variant_target(pdir, name, variant),
           "--extern-lib", args.extern_lib, "--runs", str(manifest.get("runs", 1))] + constant_args(manifest, pdir)
    outputs = {}
    os.makedirs(outdir, exist_ok=True)
    for a in manifest["args"]:
        if a["kind"] == "input":
            cmd += ["--input", "%s=%s" % (a["name"], os.path.join(pdir, a["file"]))]
            if any(m != 0 for m in a["mins"]):
                cmd += ["--size", "%s=%s" % (a["name"], shape_arg(a["extents"], a["mins"]))]
        elif a["kind"] == "scalar":
            cmd += ["--scalar", "%s=%s" % (a["name"], a["value"])]
        else:
            path = os.path.join(outdir, a["ref"])
            outputs[a["name"]] = path
            cmd += ["--output", "%s=%s" % (a["name"], path)]
            # A 0-D output is `--size name=` (the text does not give its rank).
            shape = shape_arg(a["extents"], a["mins"]) if a["extents"] else ""
            cmd += ["--size", "%s=%s" % (a["name"], shape)]
    return run(cmd, env=env, cwd=outdir), outputs


# halide_buffer_t and its parts, as runtime/include/tally_runtime.h (and Halide 14 and 21) lay them
# out.
class HalideDimension(ctypes.Structure):
    _fields_ = [("min", ctypes.c_int32), ("extent", ctypes.c_int32),
                ("stride", ctypes.c_int32), ("flags", ctypes.c_uint32)]


class HalideType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class HalideFilterArgument(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("kind", ctypes.c_int32), ("dimensions", ctypes.c_int32),
                ("type", HalideType), ("scalar_def", ctypes.c_void_p),
                ("scalar_min", ctypes.c_void_p), ("scalar_max", ctypes.c_void_p),
                ("scalar_estimate", ctypes.c_void_p), ("buffer_estimates", ctypes.c_void_p)]


class HalideFilterMetadata(ctypes.Structure):
    _fields_ = [("version", ctypes.c_int32), ("num_arguments", ctypes.c_int32),
                ("arguments", ctypes.POINTER(HalideFilterArgument)), ("target", ctypes.c_char_p),
                ("name", ctypes.c_char_p)]


class HalideBuffer(ctypes.Structure):
    _fields_ = [("device", ctypes.c_uint64), ("device_interface", ctypes.c_void_p),
                ("host", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("type", HalideType),
                ("dimensions", ctypes.c_int32), ("dim", ctypes.POINTER(HalideDimension)),
                ("padding", ctypes.c_void_p)]


def numpy_dtype(type_name):
    return np.dtype(np.bool_) if type_name == "bool" else np.dtype(type_name)


def halide_type(type_name):
    if type_name == "bool":
        return HalideType(1, 1, 1)
    dt = np.dtype(type_name)
    return HalideType({"i": 0, "u": 1, "f": 2}[dt.kind], dt.itemsize * 8, 1)


def run_object(args, manifest, pdir, obj, function, mangled, outdir):
    """Links the AOT object `obj` into a shared object, calls `<function>_argv` on the committed
    inputs with Tally's runtime loaded from libtally.so, and returns {output name: .npy file}.
    With `mangled` (c_plus_plus_name_mangling) the entry is the C++ function Halide's object
    defines, `int <function>_argv(void **)`: `_Z<length><function>_argvPPv`."""
    lib = os.path.join(outdir, "lib%s.so" % function)
    externs = os.path.abspath(args.extern_lib)
    run([os.environ.get("CXX", "c++"), "-shared", "-o", lib, obj, externs,
         "-Wl,-rpath," + os.path.dirname(externs)])
    runtime = os.path.join(os.path.dirname(os.path.abspath(args.bin)), "libtally.so")
    ctypes.CDLL(runtime, mode=ctypes.RTLD_GLOBAL)
    symbol = function + "_argv"
    if mangled:
        symbol = "_Z%d%sPPv" % (len(symbol), symbol)
    try:
        loaded = ctypes.CDLL(lib)
    except OSError as e:  # an undefined symbol: a runtime function Tally's runtime lacks
        raise CheckFailed("loading %s: %s" % (lib, e))
    entry = getattr(loaded, symbol)
    check_metadata(loaded, function, mangled, manifest)
    entry.restype = ctypes.c_int
    entry.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    keep, argv, outputs = [], [], {}
    for a in manifest["args"]:
        dt = numpy_dtype(a["type"])
        if a["kind"] == "scalar":
            text = a["value"]
            if a["type"] == "bool":
                value = np.array(text == "true", dtype=np.bool_)
            elif dt.kind == "f":
                value = np.array(float(text), dtype=dt)
            else:
                value = np.array(int(text), dtype=dt)
            keep.append(value)
            argv.append(value.ctypes.data)
            continue
        if a["kind"] == "input":
            data = np.ascontiguousarray(np.load(os.path.join(pdir, a["file"])))
        else:
            data = np.zeros(tuple(reversed(a["extents"])), dtype=dt)
            outputs[a["name"]] = (data, os.path.join(outdir, a["ref"]))
        rank = len(a["extents"])
        dims = (HalideDimension * max(rank, 1))()
        for d in range(rank):  # dimension 0 is numpy's last axis
            axis = rank - 1 - d
            dims[d] = HalideDimension(a["mins"][d], data.shape[axis],
                                      data.strides[axis] // data.itemsize, 0)
        buf = HalideBuffer(0, None, data.ctypes.data, 0, halide_type(a["type"]), rank,
                           ctypes.cast(dims, ctypes.POINTER(HalideDimension)), None)
        keep += [data, dims, buf]
        argv.append(ctypes.addressof(buf))
    home = os.getcwd()
    os.chdir(outdir)  # where the pipeline writes its files (debug_to_file)
    try:
        rc = entry((ctypes.c_void_p * len(argv))(*argv))
    finally:
        os.chdir(home)
    if rc != 0:
        raise CheckFailed("%s_argv returned %d" % (function, rc))
    for name, (data, path) in outputs.items():
        np.save(path, data)
    return {name: path for name, (_, path) in outputs.items()}


def check_metadata(lib, function, mangled, manifest):
    """Tally's `<function>_metadata()` (C++: `_Z<length><function>_metadatav`) describes the
    arguments as Halide's does (the manifest's `metadata`, written from Halide's object): name,
    kind, rank and type of each, a buffer_estimates array where Halide has one, and a scalar's
    range bounds where Halide's has them (its text checks them). Tally gives no default or
    estimate: the text has none. Halide's has the estimates `bound()` sets (demosaic's
    `cam.bound(c, 0, 3)`: `given` 2 in its manifest), which its text carries only as checks."""
    symbol = function + "_metadata"
    if mangled:
        symbol = "_Z%d%sv" % (len(symbol), symbol)
    getter = getattr(lib, symbol)
    getter.restype = ctypes.POINTER(HalideFilterMetadata)
    getter.argtypes = []
    md = getter().contents
    want = manifest["metadata"]
    problems = []
    if md.version != want["version"]:
        problems.append("version %d, Halide's %d" % (md.version, want["version"]))
    if md.name.decode() != function:
        problems.append("name '%s', not '%s'" % (md.name.decode(), function))
    if md.num_arguments != len(want["arguments"]):
        problems.append("%d arguments, Halide's %d" % (md.num_arguments, len(want["arguments"])))
    for i, w in enumerate(want["arguments"][:md.num_arguments]):
        a = md.arguments[i]
        given = sum(1 for p in (a.scalar_def, a.scalar_estimate) if p)
        if a.buffer_estimates:
            entries = ctypes.cast(a.buffer_estimates, ctypes.POINTER(ctypes.c_void_p))
            given += sum(1 for k in range(2 * a.dimensions) if entries[k])
        got = {"name": a.name.decode(), "kind": a.kind, "dimensions": a.dimensions,
               "type": [a.type.code, a.type.bits, a.type.lanes],
               "buffer_estimates": bool(a.buffer_estimates),
               "range": sum(1 for p in (a.scalar_min, a.scalar_max) if p)}
        if given:
            problems.append("argument %d gives %d values the text does not have" % (i, given))
        w = {k: v for k, v in w.items() if k != "given"}
        if got != w:
            problems.append("argument %d is %s, Halide's %s" % (i, got, w))
    if problems:
        raise CheckFailed("%s: %s" % (symbol, "; ".join(problems)))


def compare(manifest, pdir, outputs, strict):
    tol = manifest["tolerance"]
    problems = []
    for a in manifest["args"]:
        if a["kind"] != "output":
            continue
        ref = np.load(os.path.join(pdir, a["ref_strict"] if strict else a["ref"]))
        got = np.load(outputs[a["name"]])
        if got.dtype != ref.dtype or got.shape != ref.shape:
            problems.append("%s: got %s %s, expected %s %s" %
                            (a["name"], got.dtype, got.shape, ref.dtype, ref.shape))
            continue
        if ref.dtype.kind == "f" and not strict:
            g, r = got.astype(np.float64), ref.astype(np.float64)
            bad = ~((np.abs(g - r) <= tol["atol"] + tol["rtol"] * np.abs(r)) |
                    (np.isnan(g) & np.isnan(r)))
        elif ref.dtype.kind == "f":
            bits = np.dtype("u%d" % ref.dtype.itemsize)
            bad = got.view(bits) != ref.view(bits)
        else:
            bad = got != ref
        bad = np.asarray(bad)
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ()
            problems.append("%s: %d of %d elements differ; first at numpy index %s: got %r, "
                            "expected %r" % (a["name"], int(bad.sum()), bad.size, idx,
                                             got[idx].item(), ref[idx].item()))
    if problems:
        how = "bit-exact" if strict else "tolerance rtol=%g atol=%g" % (tol["rtol"], tol["atol"])
        raise CheckFailed("output differs from Halide %s's (%s):\n  %s" %
                          (manifest["halide"], how, "\n  ".join(problems)))


def tiff_short_value_pads(data):
    """Offsets of the two unused bytes after each SHORT value in the TIFF directory of a file
    Halide's debug_to_file wrote: Halide leaves them uninitialized (its tag's value is a union
    of which it sets 2 of 4 bytes), so they are not compared."""
    if len(data) < 10 or data[:2] != b"II":
        return []
    ifd = int.from_bytes(data[4:8], "little")
    count = int.from_bytes(data[ifd:ifd + 2], "little")
    pads = []
    for i in range(count):
        entry = ifd + 2 + 12 * i
        if int.from_bytes(data[entry + 2:entry + 4], "little") == 3:
            pads += [entry + 10, entry + 11]
    return pads


def compare_files(manifest, pdir, outdir):
    """The files the host variant wrote (debug_to_file) against Halide's, byte for byte."""
    for name in manifest.get("files", []):
        path = os.path.join(outdir, name)
        if not os.path.exists(path):
            raise CheckFailed("the pipeline wrote no " + name)
        got = bytearray(open(path, "rb").read())
        want = bytearray(open(os.path.join(pdir, "debug." + name), "rb").read())
        if len(got) != len(want):
            raise CheckFailed("%s: %d bytes, Halide's %d" % (name, len(got), len(want)))
        if name.endswith((".tiff", ".tif")):
            for i in tiff_short_value_pads(want):
                got[i] = want[i]
        diff = [i for i in range(len(got)) if got[i] != want[i]]
        if diff:
            raise CheckFailed("%s differs from Halide's at %d bytes, first at byte %d (%d, Halide "
                              "%d)" % (name, len(diff), diff[0], got[diff[0]], want[diff[0]]))
        print("%s: %d bytes, equal to Halide's" % (name, len(got)))


def compare_printed(manifest, pdir, text):
    """What the host variant printed to stdout (print, print_when, tracing: tally-run prints
    nothing else there when it succeeds) against what Halide's code printed in as many runs."""
    want = open(os.path.join(pdir, manifest["printed"]), encoding="utf-8").read()
    if text == want:
        print("printed text: %d lines, equal to Halide's" % len(want.splitlines()))
        return
    got_lines, want_lines = text.splitlines(), want.splitlines()
    diff = list(difflib.unified_diff(want_lines, got_lines, "halide", "tally", lineterm="", n=1))
    raise CheckFailed("the printed text differs from Halide's (%d lines, Halide %d):\n%s" %
                      (len(got_lines), len(want_lines), "\n".join(diff[:40])))


def run_bridge(args, manifest, pdir, outdir, target, gpu=False):
    """Runs the pipeline through the Halide bridge (bridge_corpus) on the committed inputs for
    `target`; returns (what it printed, {output name: .npy file})."""
    if not args.bridge:
        raise CheckFailed("the bridge checks need --bridge (test/halide's bridge_corpus)")
    os.makedirs(outdir, exist_ok=True)
    cmd = [args.bridge, manifest["pipeline"], pdir, outdir, "--target", target,
           "--extern-lib", os.path.abspath(args.extern_lib), "--runs", str(manifest.get("runs", 1))]
    if gpu:
        cmd.append("--gpu")
    text = run(cmd, cwd=outdir)
    outputs = {a["name"]: os.path.join(outdir, a["ref"])
               for a in manifest["args"] if a["kind"] == "output"}
    return text, outputs


def check_report(report, name, funcs):
    """The profile report tally-run wrote to `report` names the pipeline and each of `funcs`."""
    if not os.path.exists(report):
        raise CheckFailed("tally-run wrote no profile report to " + report)
    text = open(report, encoding="utf-8", errors="replace").read()
    print(text)
    rows = set()
    for line in text.splitlines():
        parts = line.split()
        if parts:
            rows.add(parts[0])
    missing = [f for f in funcs if f not in rows]
    if not any(line.strip() == "pipeline: %s" % name for line in text.splitlines()):
        missing.insert(0, "(the header 'pipeline: %s')" % name)
    if missing:
        raise CheckFailed("the profile report does not name: " + ", ".join(missing))


def check(args, manifest, pdir):
    name = manifest["pipeline"]
    variants = manifest["variants"]
    c = args.check
    if c == "verify":
        # Every file, so that no committed statement goes unread (conceptual and GPU ones too).
        stmts = sorted(f for f in os.listdir(pdir) if f.endswith(".stmt"))
        failures = []
        for f in stmts:
            try:
                run([os.path.join(args.bin, "tally-opt"), os.path.join(pdir, f),
                     "--passes=verify"])
            except CheckFailed as e:
                failures.append("%s: %s" % (f, str(e).splitlines()[-1]))
        if failures:
            raise CheckFailed("%d of %d files fail:\n  %s" %
                              (len(failures), len(stmts), "\n  ".join(failures)))
    elif c in ("host", "debug", "strict", "conceptual"):
        variant = {"conceptual": "host.conceptual"}.get(c, c)
        available = variants + ["%s.conceptual" % v for v in manifest.get("conceptual", [])] + \
            manifest.get("gpu", [])
        if variant not in available:
            raise CheckFailed("pipeline %s has no %s variant" % (name, variant))
        text, outputs = run_variant(args, manifest, pdir, variant, os.path.join(args.work, c))
        compare(manifest, pdir, outputs, strict=(c == "strict"))
        if c in ("host", "conceptual") and "printed" in manifest:
            compare_printed(manifest, pdir, text)
        if c in ("host", "conceptual"):
            compare_files(manifest, pdir, os.path.join(args.work, c))
    elif c in ("vulkan", "opencl"):
        # Halide's kernels as Halide's host code runs them, plain and with Halide's profiler
        # calls; then the plain statement profiled by Tally (its copy slots and syncs around
        # Halide's launches).
        failures = []
        runs = ((c, None), (c + "-profile", None), (c, "host-%s-profile" % c))
        for v, target in runs:
            what = v if not target else "%s on %s" % (v, target)
            try:
                work = os.path.join(args.work, v if not target else "tally-profile")
                report = os.path.join(work, "report.txt")
                env = dict(os.environ, TALLY_PROFILE_OUTPUT=report) if target else None
                _, outputs = run_variant(args, manifest, pdir, v, work, env=env, target=target)
                compare(manifest, pdir, outputs, strict=False)
                if target:
                    # The funcs the host code produces: one computed inside a kernel (in shared
                    # memory, say) is part of Halide's compiled kernel, not of the text.
                    with open(os.path.join(pdir, "%s.%s.stmt" % (name, v)), "rb") as f:
                        text = f.read().decode("utf-8", "replace")
                    funcs = [fn for fn in manifest["funcs"]
                             if re.search(r"\bproduce %s \{" % re.escape(fn), text)]
                    check_report(report, name, funcs)
            except CheckFailed as e:
                failures.append("%s: %s" % (what, str(e).strip().splitlines()[-1]))
        if failures:
            raise CheckFailed("%d of %d %s runs fail:\n  %s" %
                              (len(failures), len(runs), "Vulkan" if c == "vulkan" else "OpenCL",
                               "\n  ".join(failures)))
    elif c in ("gpu", "gpu_opencl"):
        target = "host-vulkan" if c == "gpu" else "host-opencl"
        failures = []
        apis = [v for v in manifest.get("gpu", []) if not v.endswith("-profile")]
        for v in apis:
            try:
                _, outputs = run_variant(args, manifest, pdir, v + ".conceptual",
                                         os.path.join(args.work, v), target=target)
                compare(manifest, pdir, outputs, strict=False)
            except CheckFailed as e:
                failures.append("%s: %s" % (v, str(e).strip().splitlines()[-1]))
        if failures:
            raise CheckFailed("%d of %d GPU variants fail:\n  %s" %
                              (len(failures), len(apis), "\n  ".join(failures)))
    elif c == "aot":
        for v in variants:
            d = os.path.join(args.work, "aot", v)
            os.makedirs(d, exist_ok=True)
            target = variant_target(pdir, name, v)
            run([os.path.join(args.bin, "tallyc"), os.path.join(pdir, "%s.%s.stmt" % (name, v)),
                 "-target", target, "-o", d] + constant_args(manifest, pdir))
            objects = [f for f in os.listdir(d) if f.endswith(".o")]
            if len(objects) != 1:
                raise CheckFailed("tallyc wrote %d objects for the %s variant" % (len(objects), v))
            if v in ("host", "strict"):
                function = objects[0][:-2]
                outputs = run_object(args, manifest, pdir, os.path.join(d, objects[0]), function,
                                     "c_plus_plus_name_mangling" in target, d)
                compare(manifest, pdir, outputs, strict=(v == "strict"))
    elif c == "profile":
        report = os.path.join(args.work, "profile", "report.txt")
        os.makedirs(os.path.dirname(report), exist_ok=True)
        if os.path.exists(report):
            os.remove(report)
        env = dict(os.environ, TALLY_PROFILE_OUTPUT=report)
        _, outputs = run_variant(args, manifest, pdir, "profile",
                                 os.path.join(args.work, "profile"), env=env)
        compare(manifest, pdir, outputs, strict=False)
        check_report(report, name, manifest["funcs"])
    elif c == "bridge":
        text, outputs = run_bridge(args, manifest, pdir, os.path.join(args.work, "host"), "host")
        compare(manifest, pdir, outputs, strict=False)
        if "printed" in manifest:
            compare_printed(manifest, pdir, text)
        compare_files(manifest, pdir, os.path.join(args.work, "host"))
        if manifest.get("float"):
            _, outputs = run_bridge(args, manifest, pdir, os.path.join(args.work, "strict"),
                                    "host-strict_float")
            compare(manifest, pdir, outputs, strict=True)
    elif c == "bridge_gpu":
        failures = []
        for target in ("host-vulkan", "host-opencl"):
            try:
                _, outputs = run_bridge(args, manifest, pdir, os.path.join(args.work, target),
                                        target, gpu=True)
                compare(manifest, pdir, outputs, strict=False)
            except CheckFailed as e:
                failures.append("%s: %s" % (target, str(e).strip().splitlines()[-1]))
        if failures:
            raise CheckFailed("%d of 2 GPU targets fail:\n  %s" %
                              (len(failures), "\n  ".join(failures)))
    else:
        raise CheckFailed("unknown check '%s'" % c)


DIFFERING_OUTPUT = re.compile(r"(\w+): \d+ of \d+ elements differ")


def expected_failure(reason, message):
    """Whether the failure `message` is the one xfail.txt's `reason` expects: outputs differing
    from the reference, exactly those the reason names (`<output>: N of M elements differ`, one
    clause each; the counts may vary with the machine), and nothing else."""
    problems = [line for line in str(message).splitlines()[1:] if line.strip()]
    differing = [m.group(1) for m in map(DIFFERING_OUTPUT.search, problems) if m]
    expected = DIFFERING_OUTPUT.findall(reason)
    return bool(expected) and len(differing) == len(problems) and sorted(differing) == sorted(
        expected)


def read_xfail(path):
    entries = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 2)
            if len(parts) < 3:
                sys.exit("%s:%d: error: expected '<pipeline> <check> <reason>'" % (path, n))
            entries[(parts[0], parts[1])] = parts[2]
    return entries


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="the folder holding tally-run, tally-opt, tallyc")
    ap.add_argument("--corpus", required=True, help="test/conformance")
    ap.add_argument("--work", required=True, help="a scratch folder for this check")
    ap.add_argument("--extern-lib", required=True,
                    help="the shared object with the extern stages' C functions")
    ap.add_argument("--bridge", help="test/halide's bridge_corpus (checks bridge, bridge_gpu)")
    ap.add_argument("pipeline")
    ap.add_argument("check")
    args = ap.parse_args()
    pdir = os.path.join(args.corpus, args.pipeline)
    with open(os.path.join(pdir, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    xfail = read_xfail(os.path.join(args.corpus, "xfail.txt")).get((args.pipeline, args.check))
    # A fresh scratch folder: nothing a previous run left there can pass or fail this one.
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    try:
        check(args, manifest, pdir)
    except CheckFailed as e:
        if xfail is not None and expected_failure(xfail, e):
            print("XFAIL: %s %s failed as expected (%s):\n%s" %
                  (args.pipeline, args.check, xfail, e))
            return 0
        if xfail is not None:
            print("FAIL: %s %s failed, but not as xfail.txt expects (%s): %s" %
                  (args.pipeline, args.check, xfail, e))
            return 1
        print("FAIL: %s %s: %s" % (args.pipeline, args.check, e))
        return 1
    if xfail is not None:
        print("XPASS: %s %s passed but xfail.txt expects a failure (%s); remove the entry" %
              (args.pipeline, args.check, xfail))
        return 1
    print("PASS: %s %s" % (args.pipeline, args.check))
    return 0


if __name__ == "__main__":
    sys.exit(main())
