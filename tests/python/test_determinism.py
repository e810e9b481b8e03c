"""Same seed, same trajectory; the cpu kernel agrees with the mGBA reference on obs_v0."""

import numpy as np
import pytest
from conftest import ROM


def rollout(gbx, seed, steps=30):
    e = gbx.VecEnv(
        ROM,
        num_envs=4,
        obs="vec",
        frames_per_step=1,
        release_after_frames=0,
        seed=seed,
        noop_max=20,
        sticky_actions=0.3,
        max_episode_frames=9,
        copy=True,
    )
    rng = np.random.default_rng(seed)
    obs, _ = e.reset(seed=seed)
    traj = [obs]
    for _ in range(steps):
        obs, reward, term, trunc, _ = e.step(rng.integers(0, 8, 4))
        traj += [obs, reward, term, trunc]
    e.close()
    return traj


def test_same_seed_same_trajectory(gbx):
    a, b = rollout(gbx, 7), rollout(gbx, 7)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_seed_matters_through_noops(gbx):
    a, b = rollout(gbx, 7), rollout(gbx, 8)
    assert any(not np.array_equal(x, y) for x, y in zip(a, b))


@pytest.mark.mgba
def test_cpu_kernel_matches_mgba_on_obs_v0(gbx):
    cpu = gbx._native.Backend(ROM, backend="cpu", num_envs=2, frames_per_step=3, threads=1)
    ref = gbx._native.Backend(ROM, backend="mgba", num_envs=2, frames_per_step=3, threads=1)
    cpu.reset(0)
    ref.reset(0)
    acts = np.zeros(2, dtype=np.int32)
    for _ in range(20):
        cpu.step(acts)
        ref.step(acts)
        np.testing.assert_array_equal(cpu.obs, ref.obs)
        np.testing.assert_array_equal(cpu.reward, ref.reward)


def test_specialized_kernel_keeps_the_trajectory(gbx):
    # specialize="auto:4": 4 frames on the profiling interpreter, then the ROM-specialized
    # kernel (finish_tier_up waits for its compile, as a step never does); every step's
    # observation and the final save states equal the plain interpreter's.
    rom, n = "builtin:ARROWS", 3
    plain = gbx._native.Backend(rom, num_envs=n, frames_per_step=2, threads=1, render=True)
    spec = gbx._native.Backend(
        rom, num_envs=n, frames_per_step=2, threads=1, render=True, specialize="auto:4"
    )
    plain.reset(0)
    spec.reset(0)
    assert spec.specialize_status == "profiling"
    assert plain.specialize_status == "off"
    interpreter_key = spec.kernel_key
    rng = np.random.default_rng(5)
    for _ in range(40):
        acts = rng.integers(0, 256, n, dtype=np.int32)
        plain.step(acts)
        spec.step(acts)
        if spec.specialize_status == "compiling":
            spec.finish_tier_up()
        np.testing.assert_array_equal(plain.obs, spec.obs)
    assert spec.specialize_status == "specialized"
    assert spec.kernel_key != interpreter_key
    for env in range(n):
        assert plain.save_state(env) == spec.save_state(env)
