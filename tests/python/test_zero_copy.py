"""copy=False: observations and rewards are views of the cpu backend's own buffers; the
default (copy=True) returns fresh arrays."""

import numpy as np
from conftest import ROM


def addr(a):
    return a.__array_interface__["data"][0]


def test_same_buffer_across_steps(gbx):
    e = gbx.VecEnv(
        ROM,
        num_envs=8,
        obs="vec",
        frames_per_step=1,
        release_after_frames=0,
        copy=False,
        reward="v0",
    )
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
    e = gbx.VecEnv(
        ROM, num_envs=4, obs="vec", frames_per_step=1, release_after_frames=0, copy=False
    )
    obs, _ = e.reset(seed=0)
    via = np.from_dlpack(obs)
    assert np.shares_memory(via, e.backend.obs)
    e.step(np.zeros(4, dtype=np.int32))
    np.testing.assert_array_equal(via, e.backend.obs)
    rew = np.from_dlpack(e.backend.reward)
    assert addr(rew) == addr(e.backend.reward)
    e.close()


def test_copy_by_default_returns_fresh_arrays(gbx):
    e = gbx.VecEnv(
        ROM, num_envs=4, obs="vec", frames_per_step=1, release_after_frames=0, reward="v0"
    )
    obs, _ = e.reset(seed=0)
    obs1, rew1, *_ = e.step(np.zeros(4, dtype=np.int32))
    obs2, rew2, *_ = e.step(np.zeros(4, dtype=np.int32))
    assert not np.shares_memory(obs1, obs2) and not np.shares_memory(obs1, e.backend.obs)
    assert not np.shares_memory(rew1, e.backend.reward)
    assert not np.array_equal(obs1, obs2)
    e.close()


def test_view_keeps_the_backend_alive(gbx):
    e = gbx.VecEnv(
        ROM, num_envs=2, obs="vec", frames_per_step=1, release_after_frames=0, copy=False
    )
    obs, _ = e.reset(seed=0)
    expected = obs.copy()
    e.close()
    del e
    np.testing.assert_array_equal(obs, expected)  # the owner is still referenced by the view


def test_pixels_and_ram_are_views_of_the_output_block(gbx):
    e = gbx.VecEnv(
        ROM,
        num_envs=3,
        frames_per_step=1,
        release_after_frames=0,
        obs={"pixels": True, "ram": [0xFF44, 0xFF47]},
        copy=False,
    )
    obs, _ = e.reset(seed=0)
    acts = np.zeros(3, dtype=np.int32)
    o1, *_ = e.step(acts)
    o2, *_ = e.step(acts)
    for k, sec in (("pixels", "pixels"), ("ram", "gather")):
        assert addr(obs[k]) == addr(o1[k]) == addr(o2[k]) == addr(e.backend.output(sec))
        via = np.from_dlpack(o2[k])
        assert np.shares_memory(via, e.backend.output(sec))
    # Every output lives in one block: the sections' addresses are offsets into it.
    block = np.array([addr(e.backend.output(s)) for s in e.backend.output_names])
    assert e.backend.output_names == ["pixels", "reward", "done", "gather"]
    assert (np.diff(block) > 0).all() and ((block - block[0]) % 64 == 0).all()
    e.close()


def test_frame_stack_buffer_is_reused(gbx):
    e = gbx.VecEnv(
        ROM,
        num_envs=2,
        obs="vec",
        frames_per_step=1,
        release_after_frames=0,
        frame_stack=4,
        copy=False,
    )
    obs, _ = e.reset(seed=0)
    o1, *_ = e.step(np.zeros(2, dtype=np.int32))
    assert addr(obs) == addr(o1) and obs.shape == (2, 4, 32)
    assert np.shares_memory(np.from_dlpack(o1), obs)
    e.close()
