"""The cuda backend's arrays from Python, on the CUDA driver double (tests/cuda_double): device
outputs through __cuda_array_interface__ / __dlpack__ (kDLCUDA, the backend's stream), host
arrays from one page-locked bulk copy, equal to cpu. The double's device addresses are not
host-readable, so the device side is checked by its interface (pointers, shapes, dtypes,
stream), not by reading through it. Runs in a subprocess: the double must be on
LD_LIBRARY_PATH when the process starts."""

import os
import subprocess
import sys
import textwrap

import pytest

# Counted apart in the run's summary (conftest.py): CI must show they ran, not skipped.
pytestmark = pytest.mark.cuda_double

HERE = os.path.dirname(os.path.abspath(__file__))
DOUBLE_DIR = os.environ.get(
    "GBX_TEST_CUDA_DOUBLE_DIR", os.path.join(HERE, "..", "..", "build", "cuda-double")
)

SCRIPT = textwrap.dedent(
    r"""
    import ctypes
    import numpy as np
    import gbx
    from gbx.cuda_arrays import CudaArray

    N = 8
    ROM = "builtin:ALU_LOOP"
    cu = gbx.VecEnv(ROM, num_envs=N, obs="vec", device="cuda", frames_per_step=1)
    cpu = gbx.VecEnv(ROM, num_envs=N, obs="vec", device="cpu", frames_per_step=1)
    # Host arrays: views of one page-locked copy of the output block; after a reset both
    # backends refresh them from the reset state.
    np.testing.assert_array_equal(cu.reset(seed=0)[0], cpu.reset(seed=0)[0])
    rng = np.random.default_rng(1)
    for _ in range(4):
        a = rng.integers(0, 8, N)
        o_cu, r_cu, *_ = cu.step(a)
        o_cpu, r_cpu, *_ = cpu.step(a)
        np.testing.assert_array_equal(o_cu, o_cpu)
        np.testing.assert_array_equal(r_cu, r_cpu)
    names = cu.backend.output_names
    assert names == cpu.backend.output_names
    h_cu = {k: cu.backend.output(k) for k in names}
    for k in names:
        np.testing.assert_array_equal(h_cu[k], cpu.backend.output(k))
    g_cu, g_cpu = cu.registers(), cpu.registers()
    for k in ("pc", "sp", "a", "f", "b", "c", "d", "e", "h", "l", "cycle_count", "instr_count"):
        np.testing.assert_array_equal(g_cu[k], g_cpu[k])
    assert g_cu["pc"].shape == (N,) and g_cu["cycle_count"].dtype == np.int64
    np.testing.assert_array_equal(cu.read_memory(0xC000, 0xC010), cpu.read_memory(0xC000, 0xC010))

    # Device arrays: the backend's own output block, described, never read from the host.
    arrs = cu.device_arrays()
    assert set(arrs) == set(h_cu), (set(arrs), set(h_cu))
    native = cu.backend
    stream = native.cuda_stream
    assert stream != 0
    base = min(x.ptr for x in arrs.values())
    assert base >= 0x0000D00000000000  # the double's device range: not host memory
    for name, x in arrs.items():
        assert isinstance(x, CudaArray)
        cai = x.__cuda_array_interface__
        assert cai["version"] == 3 and cai["strides"] is None and cai["stream"] == stream
        assert cai["shape"] == h_cu[name].shape, (name, cai["shape"], h_cu[name].shape)
        assert cai["typestr"] == {"float32": "<f4", "uint8": "|u1"}[str(h_cu[name].dtype)]
        assert cai["data"] == (x.ptr, False)
        assert x.__dlpack_device__() == (2, 0)
    obs = arrs["obs_v0"]
    assert obs.shape == (N, 32)
    assert arrs["reward"].shape == (N,)
    # Sections sit in one block in layout order: obs_v0 before reward (README "Kernel outputs").
    assert obs.ptr < arrs["reward"].ptr < obs.ptr + (1 << 20)

    # __dlpack__: a DLManagedTensor capsule on kDLCUDA pointing at the same memory.
    class DLDevice(ctypes.Structure):
        _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]

    class DLDataType(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]

    class DLTensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                    ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                    ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]

    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    for kw in ({}, {"stream": -1}, {"stream": 1}, {"stream": stream}):
        cap = obs.__dlpack__(**kw)
        t = DLTensor.from_address(get(cap, b"dltensor"))
        assert t.data + t.byte_offset == obs.ptr
        assert (t.device.device_type, t.device.device_id) == (2, 0)
        assert t.ndim == 2 and (t.shape[0], t.shape[1]) == (N, 32)
        assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (2, 32, 1)  # kDLFloat
    try:
        obs.__dlpack__(stream=2)
        raise AssertionError("the per-thread default stream was accepted")
    except BufferError:
        pass
    # The next step reuses the same device memory; host arrays follow it.
    a = rng.integers(0, 8, N)
    o_cu, *_ = cu.step(a)
    o_cpu, *_ = cpu.step(a)
    np.testing.assert_array_equal(o_cu, o_cpu)
    assert cu.device_arrays()["obs_v0"].ptr == obs.ptr
    try:
        cpu.device_arrays()
        raise AssertionError("the cpu backend gave device arrays")
    except ValueError as e:
        assert "cuda backend" in str(e)
    print("OK")
    """
)


def unavailable(why: str) -> None:
    """Skips, saying why; fails instead under GBX_TEST_REQUIRE_CUDA_DOUBLE=1 (scripts/test.sh
    sets it where the double and NVRTC are there, so these tests cannot quietly skip in CI)."""
    if os.environ.get("GBX_TEST_REQUIRE_CUDA_DOUBLE") == "1":
        pytest.fail(why + " (GBX_TEST_REQUIRE_CUDA_DOUBLE=1: this test must run here)")
    pytest.skip(why)


def run_on_double(script: str, **extra_env: str) -> str:
    """Runs `script` in a fresh interpreter with the double as its libcuda; its output (the
    test fails unless it exits 0; skips when there is no double or no NVRTC)."""
    if not os.path.exists(os.path.join(DOUBLE_DIR, "libcuda.so.1")):
        unavailable(f"no CUDA driver double at {DOUBLE_DIR} (build the C++ tree first)")
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = (
        os.path.abspath(DOUBLE_DIR) + os.pathsep + env.get("LD_LIBRARY_PATH", "")
    )
    env.pop("GBX_CUDA_DOUBLE_FAIL", None)
    env.update(extra_env)
    r = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=1500
    )
    out = r.stdout + r.stderr
    if r.returncode != 0 and "CUDA unavailable" in out:
        unavailable("no NVRTC: " + out.strip().splitlines()[-1])
    assert r.returncode == 0, out
    return out


def test_cuda_arrays_on_the_driver_double():
    out = run_on_double(SCRIPT)
    assert out.strip().endswith("OK"), out


TIERED = textwrap.dedent(
    r"""
    import time
    import numpy as np
    import gbx

    N = 2
    ROM = "builtin:IRQ_TIMER"
    cu = gbx.VecEnv(ROM, num_envs=N, obs="vec", device="cuda", frames_per_step=1, tiered_start=True)
    cpu = gbx.VecEnv(ROM, num_envs=N, obs="vec", device="cpu", frames_per_step=1)
    # The cache is empty: the quick compile runs first.
    assert cu.backend.start_tier == "fast", cu.backend.start_tier
    assert cpu.backend.start_tier == "optimized"
    fast_key = cu.backend.kernel_key
    cu.reset(seed=0)
    cpu.reset(seed=0)
    rng = np.random.default_rng(2)
    fast_steps = steps = 0
    deadline = time.monotonic() + 900
    while cu.backend.start_tier != "optimized" or steps < 30:
        assert time.monotonic() < deadline, "the optimized kernel never arrived"
        a = rng.integers(0, 8, N)
        o_cu, r_cu, *_ = cu.step(a)
        o_cpu, r_cpu, *_ = cpu.step(a)
        np.testing.assert_array_equal(o_cu, o_cpu)
        np.testing.assert_array_equal(r_cu, r_cpu)
        steps += 1
        assert not cu.backend.start_tier.startswith("fast ("), cu.backend.start_tier
        fast_steps += cu.backend.start_tier == "fast"
    assert fast_steps >= 1 and cu.backend.kernel_key != fast_key
    np.testing.assert_array_equal(cu.read_memory(0xC000, 0xE000), cpu.read_memory(0xC000, 0xE000))
    print("OK", fast_steps, steps)
    """
)


def test_tiered_start_on_the_driver_double(tmp_path):
    # A cache of its own, so the optimized kernel is certainly not in it (one NVRTC -O3
    # compile, about half a minute, plus the double's host compiles).
    out = run_on_double(TIERED, GBX_CACHE_DIR=str(tmp_path / "cache"))
    assert out.strip().splitlines()[-1].startswith("OK"), out
