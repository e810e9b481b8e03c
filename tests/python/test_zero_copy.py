"""Observations and rewards are views of the cpu backend's own buffers."""
import numpy as np

from conftest import ROM


def addr(a):
    return a.__array_interface__["data"][0]


def test_same_buffer_across_steps(gbx):
    e = gbx.VecEnv(ROM, num_envs=8, frames_per_step=1, release_after_frames=0)
    obs, _ = e.reset(seed=0)
    o_addr = addr(obs)
    acts = np.zeros(8, dtype=np.int32)
    obs1, rew1, *_ = e.step(acts)
    snapshot = obs1.copy()
    obs2, rew2, *_ = e.step(acts)
    assert addr(obs1) == addr(obs2) == o_addr == addr(e.backend.obs)
    assert addr(rew1) == addr(rew2) == addr(e.backend.reward)
    # Documented: a view is overwritten by the next step.
    assert np.array_equal(obs1, obs2) and not np.array_equal(snapshot, obs2)
    e.close()


def test_dlpack_shares_memory(gbx):
    e = gbx.VecEnv(ROM, num_envs=4, frames_per_step=1, release_after_frames=0)
    obs, _ = e.reset(seed=0)
    via = np.from_dlpack(obs)
    assert np.shares_memory(via, e.backend.obs)
    e.step(np.zeros(4, dtype=np.int32))
    np.testing.assert_array_equal(via, e.backend.obs)
    rew = np.from_dlpack(e.backend.reward)
    assert addr(rew) == addr(e.backend.reward)
    e.close()


def test_copy_true_returns_fresh_arrays(gbx):
    e = gbx.VecEnv(ROM, num_envs=4, frames_per_step=1, release_after_frames=0, copy=True)
    obs, _ = e.reset(seed=0)
    obs1, rew1, *_ = e.step(np.zeros(4, dtype=np.int32))
    obs2, rew2, *_ = e.step(np.zeros(4, dtype=np.int32))
    assert not np.shares_memory(obs1, obs2) and not np.shares_memory(obs1, e.backend.obs)
    assert not np.shares_memory(rew1, e.backend.reward)
    assert not np.array_equal(obs1, obs2)
    e.close()


def test_view_keeps_the_backend_alive(gbx):
    e = gbx.VecEnv(ROM, num_envs=2, frames_per_step=1, release_after_frames=0)
    obs, _ = e.reset(seed=0)
    expected = obs.copy()
    e.close()
    del e
    np.testing.assert_array_equal(obs, expected)  # the owner is still referenced by the view
