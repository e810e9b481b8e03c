"""One trajectory on every backend: for the same seed and actions, cuda (on the CUDA driver
double, tests/cuda_double) returns the very (obs, reward, terminated, truncated, info) sequence
of cpu, resets included: the first observation after a reset, autoresets by a done expression
and by truncation, reset no-op frames (noop_max), sticky actions, frame stacks, reward/done
expressions, per-env seeds and a masked reset. The mgba reference backend runs the same
no-op frames (compared with cpu on obs_v0, which both write)."""

import textwrap

import numpy as np
import pytest
from conftest import ROM
from test_cuda_arrays import run_on_double

STEPS = 300

SCRIPT = textwrap.dedent(
    r"""
    import ctypes
    import time
    import numpy as np
    import gbx

    N, STEPS = 3, STEPS_PLACEHOLDER
    # ARROWS: a direction press scores (C000) and counts a round (C005); its LFSR (C003)
    # advances every frame, so no-op frames change what follows. Small kernels: obs_v0 and a
    # RAM gather (no renderer), a few envs.
    KW = dict(obs={"vec": True, "ram": [0xC000, 0xC002, 0xC003, 0xC005]}, frame_stack=3,
              frames_per_step=4, release_after_frames=2, track=["ram16(0xC000)"],
              reward="val(0) - prev(0)", done="ram16(0xC005) >= 3", max_episode_frames=40,
              noop_max=20, sticky_actions=0.25, seed=11)
    t0 = time.monotonic()
    cu = gbx.VecEnv("builtin:ARROWS", N, device="cuda", **KW)
    cpu = gbx.VecEnv("builtin:ARROWS", N, device="cpu", **KW)
    t_make = time.monotonic() - t0

    def same(x, y, what):
        if isinstance(x, dict):
            assert set(x) == set(y), what
            for k in x:
                same(x[k], y[k], f"{what}[{k}]")
            return
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=what)

    o_cu, _ = cu.reset(seed=11)
    o_cpu, _ = cpu.reset(seed=11)
    same(o_cu, o_cpu, "reset")
    # The first observation describes the reset state (PC after the no-op frames), not zeros.
    assert (o_cu["vec"][:, -1, 0] > 0).all(), o_cu["vec"][:, -1, :4]
    rng = np.random.default_rng(3)
    ends = {"terminated": 0, "truncated": 0, "reward": 0}
    first_after_reset = 0
    ended = np.zeros(N, dtype=bool)
    t1 = time.monotonic()
    for t in range(STEPS):
        if t == 150:  # per-env seeds and a masked reset, mid-run
            mask = np.array([True, False, True])
            o_cu, _ = cu.reset(seed=[5, None, 6], options={"reset_mask": mask})
            o_cpu, _ = cpu.reset(seed=[5, None, 6], options={"reset_mask": mask})
            same(o_cu, o_cpu, "masked reset")
            ended[:] = False
        a = rng.integers(0, 8, N)
        r_cu = cu.step(a)
        r_cpu = cpu.step(a)
        for x, y, what in zip(r_cu, r_cpu, ("obs", "reward", "terminated", "truncated", "info")):
            same(x, y, f"step {t} {what}")
        obs, reward, term, trunc, _ = r_cu
        if ended.any():  # NEXT_STEP autoreset: these envs' first observation, not zeros
            assert (obs["vec"][ended, -1, 0] > 0).all(), (t, obs["vec"][ended, -1, :4])
            first_after_reset += int(ended.sum())
        ended = term | trunc
        ends["terminated"] += int(term.sum())
        ends["truncated"] += int(trunc.sum())
        ends["reward"] += int((reward != 0).sum())
    # The compared run went through every path it is meant to cover.
    assert ends["terminated"] > 0 and ends["truncated"] > 0 and ends["reward"] > 0, ends
    assert first_after_reset > 0
    same(cu.read_memory(0xC000, 0xC010), cpu.read_memory(0xC000, 0xC010), "memory")
    # copy_state: env 1's machine into envs 0 and 2 on the device, then the same steps. The
    # double counts what crossed the bus: up only the mask and the refresh's frame counts,
    # down only the output block, never an env's state (its memory alone is 16.5 KiB).
    copied = ctypes.CDLL("libcuda.so.1").gbx_cuda_double_copied_bytes
    copied.restype, copied.argtypes = ctypes.c_uint64, [ctypes.c_int]
    up, down = copied(1), copied(0)
    cu.copy_state(1, np.array([True, True, True]))
    up, down = copied(1) - up, copied(0) - down
    assert up == N + 4 * N and 0 < down < 4096, (up, down)
    cpu.copy_state(1, np.array([True, True, True]))
    assert cu.save_state(0) == cu.save_state(1) == cu.save_state(2)
    for t in range(5):
        a = np.full(N, 4 + t % 4)
        r_cu, r_cpu = cu.step(a), cpu.step(a)
        for x, y, what in zip(r_cu, r_cpu, ("obs", "reward", "terminated", "truncated", "info")):
            same(x, y, f"after copy_state, step {t} {what}")
    print("OK", ends, "autoresets", first_after_reset,
          f"make {t_make:.1f}s steps {time.monotonic() - t1:.1f}s")
    """
).replace("STEPS_PLACEHOLDER", str(STEPS))


@pytest.mark.cuda_double
def test_cuda_equals_cpu_on_the_driver_double():
    out = run_on_double(SCRIPT)
    assert out.strip().splitlines()[-1].startswith("OK"), out
    print(out.strip().splitlines()[-1])


@pytest.mark.mgba
def test_mgba_runs_the_same_noop_frames(gbx):
    # The reference emulator, with resets by truncation and reset no-op frames in one call:
    # obs_v0 (registers and C000-C00F) equals the cpu kernel's at every step.
    kw = dict(
        obs="vec",
        frames_per_step=2,
        release_after_frames=0,
        max_episode_frames=6,
        noop_max=7,
        seed=4,
        threads=1,
    )
    cpu = gbx.VecEnv(ROM, 3, device="cpu", **kw)
    ref = gbx.VecEnv(ROM, 3, device="mgba", **kw)
    same_start = []
    o_cpu, _ = cpu.reset(seed=4)
    o_ref, _ = ref.reset(seed=4)
    np.testing.assert_array_equal(o_cpu, o_ref)
    acts = np.zeros(3, dtype=np.int32)
    for t in range(12):
        o_cpu, _, _, tr_cpu, _ = cpu.step(acts)
        o_ref, _, _, tr_ref, _ = ref.step(acts)
        np.testing.assert_array_equal(o_cpu, o_ref, err_msg=f"step {t}")
        np.testing.assert_array_equal(tr_cpu, tr_ref)
        same_start.append(o_cpu[:, 0].copy())
    # The envs drew different no-op counts: their PCs differ somewhere along the run.
    assert any(len(set(s.tolist())) > 1 for s in same_start)
    cpu.close()
    ref.close()
