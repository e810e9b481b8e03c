"""obs specs: pixels (full/half/packed), ram gathers, vec, dict specs, frame stacking."""

import gymnasium as gym
import numpy as np
import pytest
from conftest import ROM
from romutil import COUNTER_ROM

N = 3
NOOP = np.zeros(N, dtype=np.int64)
ADDRS = [0xC000, 0xC001, 0xC002, 0xFF44]


def make(gbx, obs, rom=ROM, **kw):
    kw.setdefault("frames_per_step", 1)
    kw.setdefault("release_after_frames", 0)
    return gbx.VecEnv(rom, num_envs=N, obs=obs, seed=0, **kw)


@pytest.fixture(scope="module")
def full(gbx):
    e = make(gbx, "pixels")
    yield e
    e.close()


def check_contains(env, obs):
    assert env.observation_space.contains(obs)
    for i in range(env.num_envs):
        one = {k: v[i] for k, v in obs.items()} if isinstance(obs, dict) else obs[i]
        assert env.single_observation_space.contains(one)


def test_pixels_full(full):
    assert full.single_observation_space == gym.spaces.Box(0, 3, (144, 160), np.uint8)
    obs, _ = full.reset(seed=0)
    check_contains(full, obs)
    obs, *_ = full.step(NOOP)
    assert obs.shape == (N, 144, 160) and obs.dtype == np.uint8
    check_contains(full, obs)
    # Post-boot VRAM holds the cartridge logo the boot ROM scrolled in, BGP 0xFC: the screen
    # is shade 0 with the logo in shade 3 around the middle rows; no other shades.
    assert set(np.unique(obs)) == {0, 3}
    rows = np.where(obs[0].any(axis=1))[0]
    assert 56 <= rows.min() and rows.max() < 88
    assert (obs == obs[0]).all()  # every env is the same machine


def test_pixels_half_and_packed_match_full(gbx, full):
    full.reset(seed=0)
    ref = full.step(NOOP)[0].copy()
    half = make(gbx, {"pixels": "half"})
    packed = make(gbx, {"pixels": "packed"})
    assert half.single_observation_space == gym.spaces.Box(0, 3, (72, 80), np.uint8)
    assert packed.single_observation_space == gym.spaces.Box(0, 255, (144, 40), np.uint8)
    for e in (half, packed):
        e.reset(seed=0)
    h = half.step(NOOP)[0]
    p = packed.step(NOOP)[0]
    check_contains(half, h)
    check_contains(packed, p)
    np.testing.assert_array_equal(h, ref[:, ::2, ::2])  # top-left pixel of each 2x2
    unpacked = np.stack([(p >> s) & 3 for s in (6, 4, 2, 0)], axis=-1).reshape(N, 144, 160)
    np.testing.assert_array_equal(unpacked, ref)  # leftmost pixel in the high bits
    half.close()
    packed.close()


def test_luminance_is_pyboys_palette(gbx, full):
    # The same kernel as shades (a Python mapping): PyBoy's default greys, 255 = white.
    full.reset(seed=0)
    ref = full.step(NOOP)[0].copy()
    for spec, want in (("pixels", ref), ({"pixels": "half"}, ref[:, ::2, ::2])):
        e = make(gbx, spec, pixel_values="luminance", frame_stack=2)
        shape = want.shape[1:]
        assert e.single_observation_space == gym.spaces.Box(0, 255, (2,) + shape, np.uint8)
        e.reset(seed=0)
        obs, *_ = e.step(NOOP)
        check_contains(e, obs)
        lum = np.array([255, 153, 85, 0], dtype=np.uint8)[want]
        np.testing.assert_array_equal(obs[:, -1], lum)
        assert set(np.unique(obs[:, -1])) == {0, 255}  # shades 3 and 0: the logo on white
        e.close()


def test_ram_gather_matches_read_memory(gbx):
    e = make(gbx, {"ram": ADDRS}, rom=COUNTER_ROM)
    assert e.single_observation_space == gym.spaces.Box(0, 255, (4,), np.uint8)
    obs, _ = e.reset(seed=0)
    prev = None
    for _ in range(5):
        obs, *_ = e.step(NOOP)
        assert obs.shape == (N, 4) and obs.dtype == np.uint8
        check_contains(e, obs)
        mem = e.read_memory(0, 0x10000)
        np.testing.assert_array_equal(obs, mem[:, ADDRS])
        assert (obs[:, 2] == 0x42).all()
        if prev is not None:  # the ROM counts frames up in C000 and down in C001
            np.testing.assert_array_equal(obs[:, 0], (prev[:, 0] + 1) % 256)
            np.testing.assert_array_equal(obs[:, 1], (prev[:, 1] - 1) % 256)
        prev = obs.astype(np.int64)
    e.close()


def test_dict_spec_gives_a_dict_space(gbx):
    e = make(gbx, {"vec": True, "ram": ADDRS}, rom=COUNTER_ROM)
    sp = e.single_observation_space
    assert isinstance(sp, gym.spaces.Dict) and set(sp.spaces) == {"vec", "ram"}
    assert sp["vec"] == gym.spaces.Box(0, 1, (32,), np.float32)
    obs, _ = e.reset(seed=0)
    assert set(obs) == {"vec", "ram"}
    e.action_space.seed(0)
    for _ in range(20):
        obs, *_ = e.step(e.action_space.sample())
        assert obs["vec"].dtype == np.float32 and obs["vec"].shape == (N, 32)
        assert obs["ram"].dtype == np.uint8 and obs["ram"].shape == (N, 4)
        check_contains(e, obs)
    e.close()


def test_pixels_with_ram(gbx, full):
    e = make(gbx, {"pixels": True, "ram": [0xFF47]})  # BGP
    obs, _ = e.reset(seed=0)
    obs, *_ = e.step(NOOP)
    check_contains(e, obs)
    assert obs["pixels"].shape == (N, 144, 160)
    assert (obs["ram"] == 0xFC).all()  # post-boot BGP
    e.close()


def test_frame_stack(gbx):
    k = 3
    e = make(gbx, {"ram": [0xC000]}, rom=COUNTER_ROM, frame_stack=k, max_episode_frames=4)
    assert e.single_observation_space == gym.spaces.Box(0, 255, (k, 1), np.uint8)
    obs, _ = e.reset(seed=0)
    assert obs.shape == (N, k, 1)
    assert (obs == obs[:, -1:]).all()  # every slot holds the reset observation
    first = int(obs[0, -1, 0])
    history = [first]
    for t in range(1, 5):
        obs, _, term, trunc, _ = e.step(NOOP)
        history.append(int(obs[0, -1, 0]))
        check_contains(e, obs)
        want = [history[max(0, t - k + 1 + j)] for j in range(k)]  # oldest first
        assert list(obs[0, :, 0]) == want
    assert trunc.all()
    obs, *_ = e.step(NOOP)  # NEXT_STEP autoreset: the stack restarts from the reset obs
    assert (obs == obs[:, -1:]).all() and int(obs[0, -1, 0]) == first
    e.close()


def test_frame_stack_partial_reset_leaves_others(gbx):
    e = make(gbx, "vec", rom=COUNTER_ROM, frame_stack=2)
    e.reset(seed=0)
    for _ in range(3):
        obs, *_ = e.step(NOOP)
    before = obs.copy()
    mask = np.array([True, False, False])
    obs, _ = e.reset(options={"reset_mask": mask})
    np.testing.assert_array_equal(obs[1:], before[1:])
    assert (obs[0, 0] == obs[0, 1]).all()
    e.close()


def test_copy_true_with_a_dict_spec(gbx):
    e = make(gbx, {"vec": True, "ram": [0xC000]}, rom=COUNTER_ROM, copy=True)
    o1, _ = e.reset(seed=0)
    o2, *_ = e.step(NOOP)
    assert not np.shares_memory(o1["ram"], o2["ram"])
    assert o2["ram"][0, 0] == (int(o1["ram"][0, 0]) + 1) % 256
    e.close()


@pytest.mark.parametrize(
    "obs,msg",
    [
        ({"vec": True, "pixels": True}, "exclude each other"),
        ({"pixels": "quarter"}, "obs\\['pixels'\\] must be"),
        ({"ram": []}, "lists no address"),
        ({"ram": [0x10000]}, "out of range"),
        ({"ram": ["0xC000"]}, "must be ints"),
        ({"ram": 0xC000}, "list of bus addresses"),
        ({"rgb": True}, "unknown observation 'rgb'"),
        ({"vec": False}, "selects no observation"),
        ("screen", "obs must be"),
    ],
)
def test_bad_specs(gbx, obs, msg):
    with pytest.raises(ValueError, match=msg) as ei:
        gbx.VecEnv(ROM, num_envs=1, obs=obs)
    assert "\n" not in str(ei.value)


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_bad_frame_stack(gbx, k):
    with pytest.raises(ValueError, match="frame_stack"):
        gbx.VecEnv(ROM, num_envs=1, obs="vec", frame_stack=k)


@pytest.mark.mgba
def test_mgba_backend_gathers_the_same_ram(gbx):
    spec = {"vec": True, "ram": ADDRS}
    cpu = make(gbx, spec, rom=COUNTER_ROM)
    ref = make(gbx, spec, rom=COUNTER_ROM, device="mgba")
    for e in (cpu, ref):
        e.reset(seed=0)
    for _ in range(4):
        a, *_ = cpu.step(NOOP)
        b, *_ = ref.step(NOOP)
        np.testing.assert_array_equal(a["ram"], b["ram"])
        np.testing.assert_array_equal(a["vec"], b["vec"])
    with pytest.raises(ValueError, match="device='mgba' has no pixels output"):
        make(gbx, "pixels", device="mgba")
    cpu.close()
    ref.close()
