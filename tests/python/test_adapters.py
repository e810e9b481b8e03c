"""The trainer adapters (gbx.sb3, gbx.pufferlib) and examples/ppo.py, each run when its package
is installed (stable-baselines3; pufferlib 3; torch) and skipped with the reason otherwise.
Opt-in in CI: PyPI's torch is the CUDA build (~3 GB with its nvidia wheels).
docs/guide/games-and-training.md has the commands."""

import importlib.util
import os

import numpy as np
import pytest

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "ppo.py")
# ARROWS from RAM (the arrow byte): 64-step episodes, one press a step.
ARROWS = dict(obs="ram", seed=0)


def test_sb3_vecenv_api(gbx):
    pytest.importorskip("stable_baselines3", reason="stable-baselines3 not installed")
    import gbx.sb3
    from stable_baselines3.common.vec_env import VecEnv as SB3VecEnv

    venv = gbx.sb3.VecEnv("arrows", 4, **ARROWS)
    assert isinstance(venv, SB3VecEnv) and venv.num_envs == 4
    assert venv.seed(7) == [7, 8, 9, 10]
    obs = venv.reset()
    assert obs.shape == (4, 1)
    assert venv.get_attr("num_envs") == [4] * 4
    assert venv.env_is_wrapped(object) == [False] * 4
    mem = venv.env_method("read_memory", 0xC002, 0xC003, indices=[0])
    assert len(mem) == 1 and mem[0].shape == (4, 1)
    with pytest.raises(IndexError):
        venv.get_attr("num_envs", indices=[4])
    dones_seen = 0
    for t in range(70):  # episodes are 64 steps: SB3 resets in the same step
        arrow = venv.env_method("read_memory", 0xC002, 0xC003, indices=[0])[0][:, 0]
        venv.step_async(np.array([7, 6, 4, 5])[arrow])
        obs, rew, dones, infos = venv.step_wait()
        assert rew.dtype == np.float32 and dones.dtype == bool and len(infos) == 4
        if t < 63:
            assert not dones.any() and (rew == 1.0).all()
        if dones.any():
            dones_seen += 1
            for i in np.flatnonzero(dones):
                assert infos[i]["TimeLimit.truncated"] is True
                assert infos[i]["episode"]["r"] == 64.0 and infos[i]["episode"]["l"] == 64
                assert infos[i]["terminal_observation"].shape == (1,)
        elif t >= 64:
            assert (rew == 1.0).all()  # no reward-free reset step: SB3 saw the reset already
    assert dones_seen == 1
    venv.close()


def test_sb3_ppo_trains_on_it(gbx):
    """SB3's PPO runs its rollouts and updates on the adapter (a smoke run: SB3 on 2 loaded
    cores is slow; examples/ppo.py is the learning check) and sees the episode infos."""
    pytest.importorskip("stable_baselines3", reason="stable-baselines3 not installed")
    import gbx.sb3
    from stable_baselines3 import PPO

    venv = gbx.sb3.VecEnv("arrows", 8, **ARROWS)
    model = PPO("MlpPolicy", venv, n_steps=64, batch_size=128, n_epochs=1, seed=0, verbose=0)
    model.learn(8 * 64 * 2)
    assert model.num_timesteps == 8 * 64 * 2
    assert len(model.ep_info_buffer) == 16  # 128 steps of each env: two 64-step episodes
    assert all(0 <= e["r"] <= 64 and e["l"] == 64 for e in model.ep_info_buffer)
    venv.close()


def test_pufferlib_env_writes_into_its_buffers(gbx):
    pytest.importorskip("pufferlib", reason="pufferlib 3 not installed")
    import gbx.pufferlib
    import pufferlib.vector

    env = gbx.pufferlib.PufferEnv("arrows", 4, **ARROWS)
    obs, infos = env.reset(seed=0)
    assert obs is env.observations and obs.shape == (4, 1) and infos == []
    bufs = (env.observations, env.rewards, env.terminals, env.truncations)
    ends = []
    for t in range(66):
        arrow = env.venv.read_memory(0xC002, 0xC003)[:, 0]
        out = env.step(np.array([7, 6, 4, 5])[arrow])
        assert all(a is b for a, b in zip(out[:4], bufs))  # the same buffers, written in place
        if t < 63:
            assert (env.rewards == 1.0).all() and not env.truncations.any()
        if out[4]:
            ends.append((t, out[4][0]))
    assert ends == [(63, {"episode_return": 64.0, "episode_length": 64.0, "episodes": 4})]
    assert (env.rewards == 1.0).all()  # same-step reset: no reward-free step after the end
    env.close()

    # PufferLib's own vectorization over the adapter (its buffers, Serial backend)
    vec = pufferlib.vector.make(
        gbx.pufferlib.env_creator("arrows"),
        num_envs=2,
        backend=pufferlib.vector.Serial,
        env_kwargs=dict(num_envs=3, obs="ram"),
    )
    vec.async_reset(0)
    o = vec.recv()[0]  # recv's tuple grew a field in pufferlib-core 3.0.x: index it
    assert o.shape == (6, 1) and o is vec.observations
    for _ in range(3):
        vec.send(np.zeros(6, np.int32))
        o, r = vec.recv()[:2]
        # each gbx env wrote its envs' arrow bytes and rewards straight into its slice of
        # PufferLib's buffers
        arrows = np.concatenate([e.venv.read_memory(0xC002, 0xC003) for e in vec.envs])
        assert r.shape == (6,) and (o == arrows).all() and (r == 0).all()  # noop scores 0
    vec.close()


def test_ppo_example_learns_arrows(gbx):
    pytest.importorskip("torch", reason="torch not installed")
    spec = importlib.util.spec_from_file_location("ppo", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    args = mod.parse(
        [
            "--game",
            "arrows",
            "--obs",
            "ram",
            "--envs",
            "8",
            "--steps",
            "64",
            "--total-steps",
            str(8 * 64 * 15),
            "--lr",
            "1e-3",
            "--eval-envs",
            "8",
            "--seed",
            "0",
            "--log-every",
            "100",
        ]
    )
    result = mod.train(args)
    # random: 64 presses of which 1 in 8 scores (8 a 64-step episode); the optimum is 64
    assert 4 < result["random"] < 14, result
    assert result["trained"] > 3 * result["random"], result
