"""A GPU pipeline run from Python, on Vulkan (lavapipe on machines without a GPU) and on OpenCL
(PoCL on machines without a GPU).

Uses an inline pipeline of apps/gpu_gpu_cpu's shape (A and B on the GPU, C on the CPU reading B),
whose GPU loops are Default_GPU: the target picks the API. Each test runs once per API and skips,
with the reason, when the runtime has no device for it; any other failure fails.
"""

import numpy as np
import pytest

import tally

# The inline stand-in: C = (input * 2 + 1) * 0.5, A and B on the GPU.
GGC = """module name=ggc, target=host
external func ggc (input: buffer<float32, 2>, C: buffer<float32, 2>, width: int32, height: int32) {
  allocate A[float32 * width * height]
  produce A {
    gpu_block<Default_GPU> (A.s0.y.__block_id_y, 0, height) {
      gpu_thread<Default_GPU> (A.s0.x.__thread_id_x, 0, width) {
        A[A.s0.y.__block_id_y*width + A.s0.x.__thread_id_x] = input[A.s0.y.__block_id_y*width + A.s0.x.__thread_id_x] * 2.0f
      }
    }
  }
  allocate B[float32 * width * height]
  produce B {
    consume A {
      gpu_block<Default_GPU> (B.s0.y.__block_id_y, 0, height) {
        gpu_thread<Default_GPU> (B.s0.x.__thread_id_x, 0, width) {
          B[B.s0.y.__block_id_y*width + B.s0.x.__thread_id_x] = A[B.s0.y.__block_id_y*width + B.s0.x.__thread_id_x] + 1.0f
        }
      }
      free A
    }
  }
  produce C {
    consume B {
      for (C.s0.y, 0, height) {
        for (C.s0.x, 0, width) {
          C[C.s0.y*width + C.s0.x] = B[C.s0.y*width + C.s0.x] * 0.5f
        }
      }
      free B
    }
  }
}
"""

W, H = 64, 48


def app():
    """(module, extra scalar args, reference function, GPU Funcs)."""
    # The inline pipeline: its reference is exact and independent of how the app evolves
    # (apps/gpu_gpu_cpu has its own C++ e2e tests).
    return tally.parse(GGC), (), lambda x: (x * np.float32(2) + np.float32(1)) * np.float32(0.5), ["A", "B"]


APIS = ["vulkan", "opencl"]


def compile_or_skip(module, api, variant=""):
    available = getattr(tally, api + "_available")
    if not available():
        pytest.skip("no %s device here (tally.%s_available() is False)" % (api, api))
    return module.compile("host-" + api + variant)


@pytest.mark.parametrize("api", APIS)
def test_gpu_pipeline_matches_numpy(api):
    module, extra, reference, _ = app()
    p = compile_or_skip(module, api)
    rng = np.random.default_rng(5)
    inp = rng.uniform(-1, 1, size=(H, W)).astype(np.float32)
    out = np.zeros((H, W), dtype=np.float32)
    for _ in range(2):  # twice: device state from the first call must not leak into the second
        out[...] = 0
        p(inp, out, W, H, *extra)
        np.testing.assert_allclose(out, reference(inp), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("api", APIS)
def test_gpu_profile_counts_launches_syncs_and_copies(clean_profiler, api):
    module, extra, reference, gpu_funcs = app()
    p = compile_or_skip(module, api, "-profile")
    inp = np.ones((H, W), dtype=np.float32)
    out = np.zeros((H, W), dtype=np.float32)
    runs = 3
    for _ in range(runs):
        p(inp, out, W, H, *extra)
    np.testing.assert_allclose(out, reference(inp), rtol=1e-4, atol=1e-5)
    s = tally.profiler.stats()[module.name]
    assert s["runs"] == runs
    assert s["kernel_launches"] == len(gpu_funcs) * runs
    # The input goes to the device once per run (the output C is written on the host, B is copied
    # back for it); one injected sync per launch and one per copy to the device.
    assert s["copies_to_device"] == runs and s["copies_to_device_bytes"] == runs * W * H * 4
    assert s["copies_to_host"] == runs and s["copies_to_host_bytes"] == runs * W * H * 4
    assert s["injected_syncs"] == s["kernel_launches"] + s["copies_to_device"]
    assert list(s["sections"]) == ["funcs", "copies to device", "copies to host"]
    funcs = list(s["sections"]["funcs"])
    assert funcs[0] == "overhead" and all(f in funcs for f in gpu_funcs + ["C"])
    assert s["sections"]["copies to device"]["input (copy to device)"]["copies"] == runs
    assert s["sections"]["copies to host"]["B (copy to host)"]["copies"] == runs
    assert all(name.endswith(" (copy to device)") for name in s["sections"]["copies to device"])
    assert all(name.endswith(" (copy to host)") for name in s["sections"]["copies to host"])
    assert s["device_peak_bytes"] > 0
