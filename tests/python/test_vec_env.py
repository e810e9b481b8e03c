"""gbx.VecEnv against Gymnasium's VectorEnv contract."""

import gymnasium as gym
import numpy as np
import pytest
from conftest import ROM
from gymnasium.vector import AutoresetMode

N = 4


@pytest.fixture(scope="module")
def env(gbx):
    e = gbx.VecEnv(ROM, num_envs=N, obs="vec", frames_per_step=2, release_after_frames=0, seed=0)
    yield e
    e.close()


def test_is_a_gymnasium_vector_env(env):
    assert isinstance(env, gym.vector.VectorEnv)
    assert env.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert env.num_envs == N
    assert env.single_observation_space == gym.spaces.Box(0, 1, (32,), np.float32)
    assert env.observation_space.shape == (N, 32)
    assert env.single_action_space == gym.spaces.Discrete(8)
    assert env.action_space == gym.spaces.MultiDiscrete([8] * N)


def test_reset_and_step_outputs(env):
    obs, info = env.reset(seed=1)
    assert obs.dtype == np.float32 and obs.shape == (N, 32)
    assert isinstance(info, dict)
    assert env.observation_space.contains(obs)
    obs, reward, terminated, truncated, info = env.step(np.zeros(N, dtype=np.int64))
    assert obs.dtype == np.float32 and obs.shape == (N, 32)
    assert reward.dtype == np.float32 and reward.shape == (N,)
    assert terminated.dtype == np.bool_ and terminated.shape == (N,)
    assert truncated.dtype == np.bool_ and truncated.shape == (N,)
    assert isinstance(info, dict)


def test_reset_obs_is_the_reset_state(env, gbx):
    # The observation at reset describes the post-boot state: PC 0x0100, SP 0xFFFE, A 0x01.
    obs, _ = env.reset(seed=0)
    assert obs[0, 0] == pytest.approx(0x0100 / 65535)
    assert obs[0, 1] == pytest.approx(0xFFFE / 65535)
    assert obs[0, 2] == pytest.approx(1 / 255)


@pytest.mark.parametrize(
    "codec,space",
    [
        ("pokemon8", gym.spaces.Discrete(8)),
        ("buttons8", gym.spaces.Discrete(9)),
        ("multibinary", gym.spaces.MultiBinary(8)),
    ],
)
def test_spaces_contain_what_step_returns_after_100_random_steps(gbx, codec, space):
    e = gbx.VecEnv(
        ROM,
        num_envs=N,
        obs="vec",
        frames_per_step=1,
        release_after_frames=0,
        actions=codec,
        seed=3,
        max_episode_frames=7,
        noop_max=3,
        sticky_actions=0.25,
    )
    assert e.single_action_space == space
    e.action_space.seed(5)
    obs, _ = e.reset(seed=5)
    for _ in range(100):
        obs, reward, terminated, truncated, info = e.step(e.action_space.sample())
        assert e.observation_space.contains(obs)
        for i in range(N):
            assert e.single_observation_space.contains(obs[i])
        assert reward.shape == (N,) and reward.dtype == np.float32
    e.close()


def test_truncation_and_next_step_autoreset(gbx):
    e = gbx.VecEnv(
        ROM,
        num_envs=N,
        obs="vec",
        frames_per_step=2,
        release_after_frames=0,
        max_episode_frames=6,
        seed=0,
    )
    obs0, _ = e.reset(seed=0)
    obs0 = obs0.copy()
    acts = np.zeros(N, dtype=np.int32)
    for _step in range(1, 3):
        _, _, term, trunc, info = e.step(acts)
        assert not trunc.any() and not term.any() and "episode" not in info
    obs, reward, term, trunc, info = e.step(acts)  # frame 6: truncated
    assert trunc.all() and not term.any()
    assert info["_episode"].all()
    np.testing.assert_array_equal(info["episode"]["l"], 3)
    # NEXT_STEP: this step resets instead of stepping; obs is the first of the new episode.
    obs, reward, term, trunc, info = e.step(acts)
    np.testing.assert_array_equal(obs, obs0)
    np.testing.assert_array_equal(reward, 0.0)
    assert not term.any() and not trunc.any()
    obs, reward, term, trunc, info = e.step(acts)
    assert not np.array_equal(obs, obs0)
    e.close()


def test_reset_mask_leaves_the_other_envs_untouched(gbx):
    e = gbx.VecEnv(ROM, num_envs=N, obs="vec", frames_per_step=3, release_after_frames=0, seed=0)
    e.reset(seed=0)
    fresh = [e.cpu_state(i) for i in range(N)]
    for _ in range(2):
        e.step(np.zeros(N, dtype=np.int32))
    before = [e.cpu_state(i) for i in range(N)]
    mem_before = e.read_memory(0xC000, 0xE000)
    mask = np.array([True, False, True, False])
    obs, _ = e.reset(options={"reset_mask": mask})
    after = [e.cpu_state(i) for i in range(N)]
    mem_after = e.read_memory(0xC000, 0xE000)
    for i in range(N):
        if mask[i]:
            assert after[i] == fresh[i]
        else:
            assert after[i] == before[i]
            np.testing.assert_array_equal(mem_after[i], mem_before[i])
    np.testing.assert_array_equal(obs[0], obs[2])
    assert not np.array_equal(obs[0], obs[1])
    e.close()


def test_done_expression_terminates_and_autoresets(gbx):
    e = gbx.VecEnv(ROM, num_envs=N, obs="vec", frames_per_step=1, release_after_frames=0, done="1")
    obs0, _ = e.reset(seed=0)
    obs0 = obs0.copy()
    acts = np.zeros(N, dtype=np.int32)
    _, _, term, trunc, info = e.step(acts)
    assert term.all() and not trunc.any() and info["_episode"].all()
    obs, reward, term, trunc, _ = e.step(acts)
    np.testing.assert_array_equal(obs, obs0)
    assert not term.any()
    _, _, term, _, _ = e.step(acts)
    assert term.all()
    e.close()


def test_render_without_render_mode_is_none(env):
    # Gymnasium's convention: no render mode, nothing rendered (with a warning).
    with pytest.warns(UserWarning, match="render_mode='rgb_array'"):
        assert env.render() is None


def test_defaults_are_the_screen_reward_zero_and_fresh_arrays(gbx):
    # No argument beyond the ROM and the count: screen observations (shades), reward 0 and
    # arrays that no later step overwrites. The same envs with reward="v0" score on these
    # steps, so the zeros are the default, not the machine.
    e = gbx.VecEnv(ROM, 2, frames_per_step=1, seed=0)
    v0 = gbx.VecEnv(ROM, 2, frames_per_step=1, seed=0, obs="vec", reward="v0")
    assert e.single_observation_space == gym.spaces.Box(0, 3, (144, 160), np.uint8)
    obs0, _ = e.reset(seed=0)
    v0.reset(seed=0)
    assert obs0.shape == (2, 144, 160) and obs0.dtype == np.uint8
    acts = np.zeros(2, dtype=np.int32)
    obs1, r1, *_ = e.step(acts)
    obs2, r2, *_ = e.step(acts)
    assert set(np.unique(obs1)) == {0, 3}  # the post-boot logo (BGP 0xFC) in the first frame
    scored = [v0.step(acts)[1].copy() for _ in range(2)]
    assert any(s.any() for s in scored)
    np.testing.assert_array_equal(r1, 0.0)
    np.testing.assert_array_equal(r2, 0.0)
    for a, b in ((obs0, obs1), (obs1, obs2), (r1, r2)):
        assert not np.shares_memory(a, b)
    r2[:] = 5.0  # a caller's write does not leak into the next step's reward
    np.testing.assert_array_equal(e.step(acts)[1], 0.0)
    e.close()
    v0.close()


def test_reset_with_a_seed_per_env(gbx):
    # Per-env seeds key each env's no-op stream alone: equal seeds, equal envs (wherever they
    # sit); None keeps an env's stream. Observed through the no-op frames (noop_max).
    e = gbx.VecEnv(ROM, N, obs="vec", frames_per_step=1, noop_max=30, seed=0)
    obs, _ = e.reset(seed=[7, 8, 7, 9])
    np.testing.assert_array_equal(obs[0], obs[2])
    assert not np.array_equal(obs[0], obs[1])
    again, _ = e.reset(seed=[9, 8, 7, 7])
    np.testing.assert_array_equal(again[1], obs[1])
    np.testing.assert_array_equal(again[2], obs[0])
    np.testing.assert_array_equal(again[0], obs[3])
    e.close()


def test_noop_frames_run_in_one_backend_call(gbx):
    e = gbx.VecEnv(ROM, N, obs="vec", frames_per_step=1, noop_max=25, max_episode_frames=2, seed=1)

    class Counting:  # counts the native calls the env makes
        def __init__(self, native):
            self.native, self.calls = native, []

        def __getattr__(self, name):
            fn = getattr(self.native, name)
            if not callable(fn):
                return fn

            def call(*args, **kw):
                self.calls.append(name)
                return fn(*args, **kw)

            return call

    counting = Counting(e._native)
    e._native = counting
    e.reset(seed=1)
    assert counting.calls.count("step_frames") == 1, counting.calls
    acts = np.zeros(N, dtype=np.int32)
    for _ in range(2):  # the second step truncates every env
        e.step(acts)
    counting.calls.clear()
    e.step(acts)  # every env truncated last step: the autoreset, its no-ops in one call
    assert counting.calls.count("reset_envs") == 1, counting.calls
    assert counting.calls.count("step_frames") == 1, counting.calls
    e.close()


def test_gymnasium_make_vec(gbx):
    assert gbx.ENV_ID == "gbx/GameBoy-v0"
    e = gym.make_vec("gbx/GameBoy-v0", num_envs=3, rom=ROM, obs="vec", frames_per_step=1)
    assert isinstance(e.unwrapped, gbx.VecEnv) and e.num_envs == 3
    obs, _ = e.reset(seed=[1, 2, 3])
    assert obs.shape == (3, 32)
    obs, reward, *_ = e.step(e.action_space.sample())
    np.testing.assert_array_equal(reward, 0.0)
    e.close()
