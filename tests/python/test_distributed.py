"""gbx.distributed: K VecEnv shards as Ray actors equal one unsharded VecEnv (same seed)."""

import numpy as np
import pytest

ROM = "builtin:ARROWS"
N = 6
# Short episodes (10 steps), reset no-ops and sticky actions: the seed-driven paths run.
KW = dict(
    obs="vec",
    frames_per_step=4,
    release_after_frames=2,
    track=["ram16(0xC000)"],
    reward="val(0) - prev(0)",
    max_episode_frames=40,
    noop_max=20,
    sticky_actions=0.25,
)


def run(env, steps, seed, mask_at=None):
    """Observations, rewards, dones and episode infos of `steps` fixed random steps."""
    rng = np.random.default_rng(123)
    out = []
    obs, _ = env.reset(seed=seed)
    out.append(("reset", np.array(obs)))
    for t in range(steps):
        if t == mask_at:
            mask = np.zeros(env.num_envs, dtype=bool)
            mask[[1, 4]] = True
            obs, _ = env.reset(options={"reset_mask": mask})
            out.append(("masked reset", np.array(obs)))
        obs, r, term, trunc, info = env.step(rng.integers(0, 8, env.num_envs))
        ep = info.get("episode", {})
        out.append(
            (
                t,
                np.array(obs),
                np.array(r),
                np.array(term),
                np.array(trunc),
                np.array(info.get("_episode", np.zeros(env.num_envs, bool))),
                np.array(ep.get("r", np.zeros(env.num_envs))),
                np.array(ep.get("l", np.zeros(env.num_envs))),
            )
        )
    return out


def assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x[0] == y[0]
        for u, v in zip(x[1:], y[1:]):
            np.testing.assert_array_equal(u, v, err_msg=f"at {x[0]}")


def test_shards_without_ray_equal_the_whole(gbx):
    """Two VecEnvs with env_offset 0 and 3 behave as envs 0-2 and 3-5 of one VecEnv."""
    whole = gbx.VecEnv(ROM, N, seed=5, copy=True, threads=1, **KW)
    parts = [gbx.VecEnv(ROM, 3, seed=5, copy=True, threads=1, env_offset=o, **KW) for o in (0, 3)]
    rng = np.random.default_rng(1)
    o = whole.reset(seed=5)[0]
    assert np.array_equal(o, np.concatenate([p.reset(seed=5)[0] for p in parts]))
    saw_reward = saw_end = False
    for _ in range(30):
        a = rng.integers(0, 8, N)
        ow, rw, tw, uw, _ = whole.step(a)
        res = [p.step(a[k * 3 : (k + 1) * 3]) for k, p in enumerate(parts)]
        np.testing.assert_array_equal(ow, np.concatenate([r[0] for r in res]))
        np.testing.assert_array_equal(rw, np.concatenate([r[1] for r in res]))
        np.testing.assert_array_equal(uw, np.concatenate([r[3] for r in res]))
        saw_reward |= bool(rw.any())
        saw_end |= bool(uw.any())
    assert saw_reward and saw_end  # the compared run scored and autoreset


@pytest.fixture(scope="module")
def ray_local():
    import ray  # in the test extra: pip install .[test]

    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    yield ray
    ray.shutdown()


def test_sharded_env_equals_unsharded(gbx, ray_local):
    import gymnasium
    from gbx.distributed import ShardedVecEnv

    ref = gbx.VecEnv(ROM, N, seed=7, copy=True, threads=1, **KW)
    env = ShardedVecEnv(ROM, N, num_shards=2, seed=7, **KW)
    try:
        assert isinstance(env, gymnasium.vector.VectorEnv)
        assert env.sizes == [3, 3]
        assert env.single_observation_space == ref.single_observation_space
        assert env.single_action_space == ref.single_action_space
        assert env.observation_space == ref.observation_space
        a = run(ref, 40, seed=7, mask_at=17)
        b = run(env, 40, seed=7, mask_at=17)
        assert_same(a, b)
        assert any(x[2].any() for x in a if x[0] not in ("reset", "masked reset"))  # scored
        assert any(x[5].any() for x in a if x[0] not in ("reset", "masked reset"))  # ended
        np.testing.assert_array_equal(
            env.read_memory(0xC000, 0xC007), ref.read_memory(0xC000, 0xC007)
        )
        for x in b[1:]:
            if x[0] != "masked reset":
                assert all(env.single_observation_space.contains(o) for o in x[1])
        # Another seed: other no-op frames and sticky coins, so other trajectories.
        c = run(env, 40, seed=8)
        assert any(not np.array_equal(x[1], y[1]) for x, y in zip(a, c))
    finally:
        env.close()
        ref.close()


def test_uneven_shards_and_bad_arguments(gbx, ray_local):
    from gbx.distributed import ShardedVecEnv, split_envs

    assert split_envs(7, 3) == [3, 2, 2]
    with pytest.raises(ValueError, match="num_shards"):
        ShardedVecEnv(ROM, 4, num_shards=0)
    with pytest.raises(ValueError, match="num_envs"):
        ShardedVecEnv(ROM, 1, num_shards=2)
    with pytest.raises(ValueError, match="device"):
        ShardedVecEnv(ROM, 4, device="tpu")
    env = ShardedVecEnv(ROM, 5, num_shards=2, seed=1, obs="vec", frames_per_step=4)
    try:
        assert env.sizes == [3, 2] and env.offsets == [0, 3]
        obs, _ = env.reset(seed=1)
        assert obs.shape == (5,) + env.single_observation_space.shape
        with pytest.raises(ValueError, match="5 rows"):
            env.step(np.zeros(4, dtype=np.int64))
    finally:
        env.close()
