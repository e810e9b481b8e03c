"""Save states from Python: save/load, reset states (autoreset to a saved point),
bulk memory reads, and the errors."""

import numpy as np
import pytest
from romutil import COUNTER_PROGRAM, COUNTER_ROM, make_rom

N = 4
NOOP = np.zeros(N, dtype=np.int64)


def make(gbx, **kw):
    kw.setdefault("frames_per_step", 1)
    kw.setdefault("release_after_frames", 0)
    return gbx.VecEnv(
        COUNTER_ROM, num_envs=N, obs={"vec": True, "ram": [0xC000, 0xC001]}, seed=0, **kw
    )


@pytest.fixture
def env(gbx):
    e = make(gbx)
    e.reset(seed=0)
    yield e
    e.close()


def run(env, steps):
    for _ in range(steps):
        obs, *_ = env.step(NOOP)
    return obs


def test_save_load_roundtrip_restores_machine_and_outputs(env):
    run(env, 3)
    blob = env.save_state(2)
    assert isinstance(blob, bytes) and blob[:4] == b"GBXS"
    mem = env.read_memory(0, 0x10000)[2].copy()
    regs = env.cpu_state(2)
    obs_at_save = {k: v[2].copy() for k, v in env._obs.observe(stepped=False).items()}
    later = run(env, 5)
    assert later["ram"][2, 0] == (int(obs_at_save["ram"][0]) + 5) % 256
    env.load_state(2, blob)
    np.testing.assert_array_equal(env.read_memory(0, 0x10000)[2], mem)
    assert env.cpu_state(2) == regs
    # The outputs (views) are refreshed from the loaded state, the other envs untouched.
    now = env._obs.observe(stepped=False)
    np.testing.assert_array_equal(now["ram"][2], obs_at_save["ram"])
    np.testing.assert_array_equal(now["vec"][2], obs_at_save["vec"])
    assert now["ram"][0, 0] == later["ram"][0, 0]


def test_loaded_state_replays_the_same_trajectory(env):
    run(env, 2)
    blob = env.save_state(0)
    traj = [run(env, 1)["ram"][0].copy() for _ in range(6)]
    mem = env.read_memory(0xC000, 0xE000)[0].copy()
    env.load_state(3, blob)  # into another env
    again = []
    for _ in range(6):
        again.append(run(env, 1)["ram"][3].copy())
    np.testing.assert_array_equal(np.array(again), np.array(traj))
    np.testing.assert_array_equal(env.read_memory(0xC000, 0xE000)[3], mem)


def test_copy_state_clones_one_env_into_others(env, gbx):
    run(env, 3)
    env.reset(options={"reset_mask": np.array([False, True, False, False])})
    run(env, 2)  # env 1 is 3 frames behind the others
    assert env.save_state(1) != env.save_state(0)
    src_blob, other = env.save_state(1), env.save_state(3)
    env.copy_state(1, np.array([True, True, True, False]))
    assert env.save_state(0) == env.save_state(2) == env.save_state(1) == src_blob
    assert env.save_state(3) == other  # not in the mask
    obs = env._obs.observe(stepped=False)  # outputs refreshed from the copied state
    np.testing.assert_array_equal(obs["ram"][0], obs["ram"][1])
    later = run(env, 4)
    np.testing.assert_array_equal(later["ram"][0], later["ram"][1])
    np.testing.assert_array_equal(later["vec"][2], later["vec"][1])
    with pytest.raises(IndexError):
        env.copy_state(N, np.ones(N, dtype=bool))
    with pytest.raises(ValueError, match="dst_mask must be a bool array"):
        env.copy_state(0, np.ones(N - 1, dtype=bool))


@pytest.mark.mgba
def test_copy_state_is_refused_on_mgba(gbx):
    ref = gbx.VecEnv(COUNTER_ROM, num_envs=2, obs="vec", device="mgba")
    with pytest.raises(ValueError, match="cannot copy states between envs"):
        ref.copy_state(0, np.array([False, True]))
    ref.close()


def test_save_states_all_envs(env):
    run(env, 1)
    blobs = env.save_states()
    assert isinstance(blobs, list) and len(blobs) == N
    assert all(b == env.save_state(i) for i, b in enumerate(blobs))


def test_reset_states_pool_drawn_from_the_seed(env, gbx):
    # Three states of the counter ROM (C000 counts frames): every reset puts each env into
    # one of them, drawn from the seed: reproducible, all used, and another seed differs.
    pool, counts = [], []
    for steps in (1, 3, 6):
        run(env, steps)
        pool.append(env.save_state(0))
        counts.append(int(env.read_memory(0xC000, 0xC001)[0, 0]))

    def starts(seed):
        e = make(gbx, reset_states=pool, max_episode_frames=2)
        obs, _ = e.reset(seed=seed)
        seen = [obs["ram"][:, 0].copy()]
        for _ in range(12):  # an autoreset every third step
            obs, _, _, trunc, _ = e.step(NOOP)
            if e._needs_reset.any():
                nxt, *_ = e.step(NOOP)
                seen.append(nxt["ram"][:, 0].copy())
        e.close()
        return np.array(seen)

    a, b, c = starts(3), starts(3), starts(4)
    assert set(np.unique(a)) == set(counts)  # every start is a pool state, each one used
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    with pytest.raises(ValueError, match="needs at least one state"):
        env.set_reset_state([], pool=True)
    with pytest.raises(ValueError, match="reset state pool"):
        env.set_reset_state([pool[0], b"GBXS" + b"\0" * 60], pool=True)


def test_reset_state_shared_by_every_env(env):
    run(env, 7)
    at = env.read_memory(0xC000, 0xC002)[1].copy()
    env.set_reset_state(env.save_state(1))
    run(env, 3)
    obs, _ = env.reset(seed=0)
    assert (env.read_memory(0xC000, 0xC002) == at).all()
    assert (obs["ram"] == at).all()


def test_autoreset_returns_to_the_saved_point(gbx):
    e = make(gbx, max_episode_frames=3)
    e.reset(seed=0)
    run(e, 2)
    e.set_reset_state(e.save_state(0))
    start = e.read_memory(0xC000, 0xC001)[0, 0]
    obs, _ = e.reset(seed=0)  # the first episode starts from the saved point
    assert (obs["ram"][:, 0] == start).all()
    for t in range(3):
        obs, _, term, trunc, _ = e.step(NOOP)
        assert (obs["ram"][:, 0] == (int(start) + t + 1) % 256).all()
    assert trunc.all()
    obs, _, term, trunc, _ = e.step(NOOP)  # NEXT_STEP autoreset: back to the saved point
    assert not trunc.any() and (obs["ram"][:, 0] == start).all()
    e.close()


def test_reset_state_per_env_and_back_to_power_on(env):
    blobs = []
    for _i in range(N):
        run(env, 1)
        blobs.append(env.save_state(0))
    env.set_reset_state(blobs)
    obs, _ = env.reset(seed=0)
    c = obs["ram"][:, 0].astype(int)
    np.testing.assert_array_equal(np.diff(c) % 256, [1] * (N - 1))  # one step apart each
    env.set_reset_state(None)
    obs, _ = env.reset(seed=0)
    assert (obs["ram"] == 0).all()  # power-on WRAM


def test_read_memory_is_one_bulk_array(env):
    run(env, 2)
    m = env.read_memory(0xC000, 0xC010)
    assert m.shape == (N, 16) and m.dtype == np.uint8
    for i in range(N):
        assert m[i].tobytes() == env.backend.read_memory(i, 0xC000, 0xC010)
    full = env.read_memory(0, 0x10000)
    assert full.shape == (N, 0x10000)
    np.testing.assert_array_equal(full[:, 0xC000:0xC010], m)
    assert full[0, 0x147] == 0x00 and full[0, 0x150] == COUNTER_PROGRAM[0]


@pytest.mark.parametrize("lo,hi", [(5, 5), (6, 5), (-1, 4), (0, 0x10001), (0.5, 3)])
def test_read_memory_bad_ranges(env, lo, hi):
    with pytest.raises(ValueError, match="read_memory|range") as ei:
        env.read_memory(lo, hi)
    assert "\n" not in str(ei.value)


def test_errors_are_one_python_exception(gbx, env):
    blob = env.save_state(0)
    for bad in (-1, N, 10**30):
        with pytest.raises(IndexError, match="out of range"):
            env.save_state(bad)
        with pytest.raises(IndexError, match="out of range"):
            env.load_state(bad, blob)
    with pytest.raises(TypeError, match="bytes"):
        env.load_state(0, "not a blob")
    with pytest.raises(TypeError):
        env.save_state("0")
    for junk, msg in (
        (b"", "save state"),
        (b"GBXS" + b"\0" * 10, "save state"),
        (b"\xff" * 4096, "save state"),
        (blob[:-10], "truncated"),
    ):
        with pytest.raises(ValueError, match=msg) as ei:
            env.load_state(1, junk)
        assert "\n" not in str(ei.value)
    # A state of another ROM is refused, and leaves the env untouched.
    other = gbx.VecEnv(
        make_rom(COUNTER_PROGRAM, title=b"OTHER"), num_envs=1, obs="vec", frames_per_step=1
    )
    other.reset(seed=0)
    foreign = other.save_state(0)
    other.close()
    before = env.read_memory(0, 0x10000)[1].copy()
    with pytest.raises(ValueError, match="ROM") as ei:
        env.load_state(1, foreign)
    assert "\n" not in str(ei.value)
    np.testing.assert_array_equal(env.read_memory(0, 0x10000)[1], before)
    with pytest.raises(ValueError, match="ROM"):
        env.set_reset_state(foreign)
    with pytest.raises(ValueError, match="one blob or 4"):
        env.set_reset_state([blob, blob])
    with pytest.raises(ValueError, match="reset state 2"):
        env.set_reset_state([blob, blob, foreign, blob])
    env.step(NOOP)  # still usable


def test_closed_env(gbx):
    e = make(gbx)
    e.reset(seed=0)
    e.close()
    with pytest.raises(RuntimeError, match="closed"):
        e.save_state(0)
    with pytest.raises(RuntimeError, match="closed"):
        e.read_memory(0, 1)
