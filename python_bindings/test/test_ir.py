"""The IR side: parse, print, verify, targets, passes and lowering."""

import re

import pytest

import tally
from conftest import CORPUS_DIR, app_stmt

# A small host pipeline with a producer, used by the pass tests.
SCALE = """module name=scale, target=host
external func scale (input: buffer<float32, 1>, output: buffer<float32, 1>, n: int32) {
  produce output {
    for (output.s0.x, 0, n) {
      output[output.s0.x] = (float32)input[output.s0.x] * 2.0f
    }
  }
}
"""

# Halide's gpu_gpu_cpu shape before offload: A and B on the GPU, C on the CPU reading B.
GGC_VULKAN = """module name=ggc, target=host-vulkan
external func ggc (in: buffer<float32, 2>, C: buffer<float32, 2>, w: int32, h: int32) {
  allocate A[float32 * w * h]
  produce A {
    gpu_block<Vulkan> (A.s0.y.__block_id_y, 0, h) {
      gpu_thread<Vulkan> (A.s0.x.__thread_id_x, 0, w) {
        A[A.s0.y.__block_id_y*w + A.s0.x.__thread_id_x] = in[A.s0.y.__block_id_y*w + A.s0.x.__thread_id_x] * 2.0f
      }
    }
  }
  allocate B[float32 * w * h]
  produce B {
    consume A {
      gpu_block<Vulkan> (B.s0.y.__block_id_y, 0, h) {
        gpu_thread<Vulkan> (B.s0.x.__thread_id_x, 0, w) {
          B[B.s0.y.__block_id_y*w + B.s0.x.__thread_id_x] = A[B.s0.y.__block_id_y*w + B.s0.x.__thread_id_x] + 1.0f
        }
      }
      free A
    }
  }
  produce C {
    consume B {
      for (C.s0.y, 0, h) {
        for (C.s0.x, 0, w) {
          C[C.s0.y*w + C.s0.x] = B[C.s0.y*w + C.s0.x] * 0.5f
        }
      }
      free B
    }
  }
}
"""

CORPUS_FILES = sorted(CORPUS_DIR.glob("*.stmt")) + sorted(CORPUS_DIR.glob("preoffload/*.stmt"))


def corpus_id(path):
    return str(path.relative_to(CORPUS_DIR))


# ---- parse and print ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", CORPUS_FILES, ids=corpus_id)
def test_corpus_round_trips(path):
    m = tally.parse(path)
    printed = str(m)
    again = tally.parse(printed)
    assert again == m, m.difference(again)
    assert str(again) == printed
    m.verify()


def test_corpus_is_there():
    # The parametrized test above must not pass vacuously.
    assert len(CORPUS_FILES) >= 10


def test_parse_rejects_paths_with_nothing_to_parse(tmp_path):
    # A directory (as a string or a path), an empty file and a file of comments: errors naming
    # the path and the reason, not a module that does nothing.
    (tmp_path / "empty.stmt").write_text("")
    (tmp_path / "comment.stmt").write_text("// a comment\n")
    for source, reason in ((str(tmp_path), "is a directory"), (tmp_path, "is a directory"),
                           (tmp_path / "empty.stmt", "no pipeline"),
                           (str(tmp_path / "comment.stmt"), "no pipeline")):
        with pytest.raises(tally.CompileError, match=reason) as e:
            tally.parse(source)
        assert str(tmp_path) in str(e.value)


def test_parse_text_path_and_pathlike_agree():
    path = app_stmt("blur")
    from_path = tally.parse(path)
    assert tally.parse(str(path)) == from_path
    assert tally.parse(path.read_text()) == from_path


def test_module_attributes():
    m = tally.parse(app_stmt("blur"))
    assert m.name == "blur"
    assert isinstance(m.target, tally.Target) and str(m.target) == "host"
    assert m.kernels == []
    (f,) = m.functions
    assert f.name == "blur" and f.linkage == "external"
    assert [(a.name, a.kind, a.type, a.dims) for a in f.args] == [
        ("input", "buffer", "uint16", 2),
        ("output", "buffer", "uint16", 2),
        ("width", "scalar", "int32", None),
        ("height", "scalar", "int32", None),
    ]
    assert m.function("blur").args == f.args
    with pytest.raises(KeyError):
        m.function("nope")
    assert "blur(input: buffer<uint16, 2>" in repr(f)


def test_halide_function_headers_infer_arguments():
    # Halide prints argument names only; the parser infers kinds, types and ranks.
    m = tally.parse(CORPUS_DIR / "blur3x3.host.stmt")
    entry = m.function("blur_y")
    assert [(a.name, a.kind, a.type, a.dims) for a in entry.args] == [
        ("input", "buffer", "uint16", 2),
        ("blur_y", "buffer", "uint16", 2),
    ]


def test_malformed_ir_raises_compile_error_with_location():
    text = "module name=m, target=host\nexternal func f (out: buffer<int32, 1>) {\n  out[0] = (1 + )\n}\n"
    with pytest.raises(tally.CompileError) as info:
        tally.parse(text)
    assert re.match(r"<string>:3:17: error: expected an expression", str(info.value)), str(info.value)
    with pytest.raises(tally.CompileError, match=r"^bad\.stmt:3:17: error:"):
        tally.parse(text, filename="bad.stmt")


def test_malformed_file_names_the_file(tmp_path):
    path = tmp_path / "broken.stmt"
    path.write_text("module name=m, target=host\nexternal func f (out: buffer<int32, 1>) {\n  out[0] = 1 +\n}\n")
    with pytest.raises(tally.CompileError) as info:
        tally.parse(path)
    assert re.match(re.escape(str(path)) + r":\d+:\d+: error: ", str(info.value)), str(info.value)


def test_missing_file():
    with pytest.raises(FileNotFoundError):
        tally.parse("no/such/pipeline.stmt")


def test_compile_error_is_an_exception():
    assert issubclass(tally.CompileError, Exception)
    assert issubclass(tally.RuntimeError, Exception)
    assert issubclass(tally.RuntimeError, RuntimeError)


def test_verify_reports_the_first_problem():
    m = tally.parse("module name=m, target=host\nexternal func f (out: buffer<int32, 1>) {\n  out[0] = nowhere\n}\n")
    with pytest.raises(tally.CompileError, match="variable 'nowhere' is not bound"):
        m.verify()
    with pytest.raises(tally.CompileError, match="variable 'nowhere' is not bound"):
        tally.passes.verify(m)
    good = tally.parse(SCALE)
    assert tally.passes.verify(good) == good


# ---- targets ------------------------------------------------------------------------------------


def test_target():
    t = tally.Target("host-vulkan-profile")
    assert str(t) == "host-profile-vulkan"  # features sorted, as Halide prints them
    assert t.features == ["profile", "vulkan"]
    assert t.has_feature("vulkan") and not t.has_feature("cuda")
    assert t.profiling
    assert t.gpu_api == "Vulkan"
    assert t == "host-profile-vulkan" and t == tally.Target("host-profile-vulkan")
    assert hash(t) == hash(tally.Target("host-profile-vulkan"))
    assert not tally.Target("host").profiling
    assert tally.Target("host-profile_by_timer").profiling
    assert tally.Target("host").gpu_api is None
    assert str(t.without_feature("profile")) == "host-vulkan"
    assert tally.Target("host").with_feature("profile") == "host-profile"
    assert "profile" in tally.Target.known_features()
    assert repr(t) == "tally.Target('host-profile-vulkan')"


def test_bad_target_raises_compile_error():
    with pytest.raises(tally.CompileError, match="warp_drive"):
        tally.Target("host-warp_drive")
    with pytest.raises(ValueError):
        tally.Target("host").has_feature("warp_drive")
    with pytest.raises(tally.CompileError):
        tally.lower(tally.parse(SCALE), "host-nonsense")
    with pytest.raises(TypeError):
        tally.lower(tally.parse(SCALE), 42)


# ---- passes -------------------------------------------------------------------------------------


def test_inject_profiling():
    m = tally.parse(SCALE.replace("target=host", "target=host-profile"))
    p = tally.passes.inject_profiling(m)
    text = str(p)
    assert "tally_profiler_start" in text
    assert "tally_profiler_end" in text
    # The argument is not changed, and the result round-trips and verifies.
    assert "tally_profiler_start" not in str(m)
    assert tally.parse(text) == p
    p.verify()
    # Running the pass twice changes nothing the second time.
    assert tally.passes.inject_profiling(p) == p


def test_inject_profiling_follows_the_target():
    # Without a profiling target the pass leaves the module alone; `target=` sets one first.
    m = tally.parse(SCALE)
    assert tally.passes.inject_profiling(m) == m
    p = tally.passes.inject_profiling(m, target="host-profile")
    assert str(p.target) == "host-profile"
    assert "tally_profiler_start" in str(p)


def test_gpu_passes():
    m = tally.parse(GGC_VULKAN)
    copies = tally.passes.inject_host_dev_copies(m)
    assert "halide_copy_to_device" in str(copies) and "halide_copy_to_host" in str(copies)
    offloaded = tally.passes.offload_gpu_loops(copies)
    assert len(offloaded.kernels) == 2
    assert {k.device_api for k in offloaded.kernels} == {"Vulkan"}
    assert all(k.args and k.args[0].kind == "buffer" for k in offloaded.kernels)
    assert "halide_vulkan_run" in str(offloaded)
    # The GPU loops now live in the kernels only.
    assert "gpu_block" not in str(offloaded).split("external func ggc", 1)[1]

    synced = tally.passes.inject_profiling(offloaded, target="host-vulkan-profile")
    # One sync after each of the two launches, and one after the copy of `in` to the device.
    assert str(synced).count("halide_device_sync_global(") == 3
    unsynced = tally.passes.inject_profiling(
        offloaded, inject_device_sync=False, target="host-vulkan-profile"
    )
    assert "halide_device_sync_global(" not in str(unsynced)
    assert "tally_profiler_start" in str(unsynced)


def test_lower_matches_the_passes_in_order():
    m = tally.parse(GGC_VULKAN)
    t = tally.Target("host-vulkan-profile")
    by_hand = tally.passes.inject_profiling(
        tally.passes.offload_gpu_loops(tally.passes.inject_host_dev_copies(m, target=t))
    )
    lowered = tally.lower(m, t)
    assert str(lowered.target) == "host-profile-vulkan"
    assert lowered == by_hand, lowered.difference(by_hand)
    assert m.lower("host-vulkan-profile") == lowered
    assert tally.passes.lower(m, tally.Target("host-vulkan-profile")) == lowered


def test_lower_without_profiling_adds_no_probes():
    lowered = tally.lower(tally.parse(SCALE), "host")
    assert "tally_profiler" not in str(lowered)


# ---- documentation ------------------------------------------------------------------------------


def public_members(obj):
    return [(n, getattr(obj, n)) for n in dir(obj) if not n.startswith("_")]


def documented(name, member):
    """True when the docstring says more than pybind11's generated signature line."""
    doc = (getattr(member, "__doc__", None) or "").strip()
    lines = [l for l in doc.splitlines() if not l.startswith(name + "(")]
    return bool("".join(lines).strip())


def test_everything_has_a_docstring():
    missing = []
    owners = [("tally", tally), ("tally.passes", tally.passes), ("tally.profiler", tally.profiler)]
    for owner_name, owner in owners:
        if not documented(owner_name, owner):
            missing.append(owner_name)
        for name, member in public_members(owner):
            if isinstance(member, (int, str)) or name in ("passes", "profiler"):
                continue
            if not documented(name, member):
                missing.append("%s.%s" % (owner_name, name))
            if isinstance(member, type) and not issubclass(member, BaseException):
                for attr, value in vars(member).items():
                    if attr.startswith("_") and attr not in ("__init__", "__call__"):
                        continue
                    if not documented(attr, value):
                        missing.append("%s.%s.%s" % (owner_name, name, attr))
    assert not missing
