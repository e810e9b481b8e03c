"""gbx.RamSearch narrows candidate addresses the way cheat finders do."""

import numpy as np
import pytest
from romutil import COUNTER_ROM

N = 3
NOOP = np.zeros(N, dtype=np.int64)


@pytest.fixture
def env(gbx):
    e = gbx.VecEnv(COUNTER_ROM, num_envs=N, obs="vec", frames_per_step=1, release_after_frames=0)
    e.reset(seed=0)
    for _ in range(3):  # past the first frame, where C001 wraps from 0x00 to 0xFF
        e.step(NOOP)
    yield e
    e.close()


def test_finds_the_counters(gbx, env):
    # The ROM counts frames up in C000, down in C001, and keeps 0x42 in C002.
    rs = gbx.RamSearch(env, 0xC000, 0xE000)
    assert len(rs) == 0x2000
    env.step(NOOP)
    assert list(rs.increased()) == [0xC000]
    env.step(NOOP)
    assert list(rs.increased(by=1)) == [0xC000]
    np.testing.assert_array_equal(rs.values(), env.read_memory(0xC000, 0xC001))

    down = gbx.RamSearch(env, 0xC000, 0xE000)
    env.step(NOOP)
    assert list(down.decreased()) == [0xC001]
    env.step(NOOP)
    assert list(down.decreased(by=1)) == [0xC001]

    const = gbx.RamSearch(env, 0xC000, 0xE000)
    env.step(NOOP)
    eq = const.equal()
    assert 0xC002 in eq and 0xC000 not in eq and 0xC001 not in eq
    assert list(const.equal(0x42)) == [0xC002]
    assert const.history[0] == ("start", 0x2000) and const.history[-1] == ("equal 0x42", 1)


def test_changed_and_snapshot(gbx, env):
    rs = gbx.RamSearch(env, 0xC000, 0xC010)
    env.step(NOOP)
    assert list(rs.changed()) == [0xC000, 0xC001]
    env.step(NOOP)
    rs.snapshot()  # a new baseline: no step since, so nothing changed
    assert list(rs.changed()) == []
    assert "0 candidates" in repr(rs)


def test_every_searched_env_must_agree(gbx, env):
    # Env 1 back to an older state: its counter goes down relative to the snapshot, so
    # "increased" fails there and C000 is dropped when env 1 is searched.
    old = env.save_state(1)
    env.step(NOOP)
    env.step(NOOP)
    everywhere = gbx.RamSearch(env, 0xC000, 0xC004)
    only0 = gbx.RamSearch(env, 0xC000, 0xC004, envs=[0])
    only1 = gbx.RamSearch(env, 0xC000, 0xC004, envs=[1])
    env.load_state(1, old)
    assert list(only1.decreased()) == [0xC000]  # env 1 went back two frames
    assert list(only0.increased()) == []  # nothing stepped: env 0 is unchanged
    assert list(everywhere.decreased()) == []  # env 0 unchanged, so no address everywhere
    env.step(NOOP)
    assert list(gbx.RamSearch(env, 0xC000, 0xC004, envs=[1]).equal(0x42)) == [0xC002]


@pytest.mark.parametrize(
    "kw,msg",
    [
        ({"lo": 5, "hi": 5}, "range"),
        ({"lo": 0, "hi": 0x10001}, "range"),
        ({"envs": []}, "envs"),
        ({"envs": [N]}, "envs"),
    ],
)
def test_bad_arguments(gbx, env, kw, msg):
    with pytest.raises(ValueError, match=msg):
        gbx.RamSearch(env, **kw)


@pytest.mark.parametrize("value", [256, -1, 1.5, True])
def test_bad_values(gbx, env, value):
    rs = gbx.RamSearch(env, 0xC000, 0xC004)
    with pytest.raises(ValueError, match="0..255"):
        rs.equal(value)
