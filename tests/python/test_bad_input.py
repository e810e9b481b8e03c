"""Bad input: one Python exception with one clear message, never a crash."""

import numpy as np
import pytest
from conftest import ROM


@pytest.fixture(scope="module")
def env(gbx):
    e = gbx.VecEnv(ROM, num_envs=4, obs="vec", frames_per_step=1, release_after_frames=0)
    e.reset(seed=0)
    yield e
    e.close()


def one_line(excinfo):
    msg = str(excinfo.value)
    assert msg and "\n" not in msg
    return msg


def test_unknown_action_codec(gbx):
    with pytest.raises(ValueError, match="unknown action codec 'qwerty'") as ei:
        gbx.VecEnv(ROM, num_envs=1, obs="vec", actions="qwerty")
    one_line(ei)


@pytest.mark.parametrize("n", [0, -3])
def test_num_envs_below_one(gbx, n):
    with pytest.raises(ValueError, match="num_envs must be at least 1") as ei:
        gbx.VecEnv(ROM, num_envs=n, obs="vec")
    one_line(ei)


def test_unknown_rom(gbx, tmp_path):
    with pytest.raises(ValueError) as ei:
        gbx.VecEnv(str(tmp_path / "missing.gb"), num_envs=1, obs="vec")
    one_line(ei)
    with pytest.raises(ValueError) as ei:
        gbx.VecEnv("builtin:NOPE", num_envs=1, obs="vec")
    one_line(ei)
    with pytest.raises(ValueError) as ei:
        gbx.VecEnv(b"\x00" * 100, num_envs=1, obs="vec")
    one_line(ei)


def test_unknown_device_and_obs(gbx):
    with pytest.raises(ValueError, match="unknown device"):
        gbx.VecEnv(ROM, num_envs=1, obs="vec", device="tpu")
    with pytest.raises(ValueError, match="unknown observation"):
        gbx.VecEnv(ROM, num_envs=1, obs={"screen": "full"})


@pytest.mark.parametrize(
    "actions,match",
    [
        (np.zeros(3, dtype=np.int32), r"shape \(4,\)"),
        (np.zeros((4, 1), dtype=np.int32), r"shape \(4,\)"),
        (np.zeros(4, dtype=np.float32), "integers"),
        (np.array([0, 1, 8, 0]), "action 8 out of range"),
        (np.array([0, -1, 0, 0]), "action -1 out of range"),
        ("up", r"shape \(4,\)"),
    ],
)
def test_bad_actions(env, actions, match):
    with pytest.raises(ValueError, match=match) as ei:
        env.step(actions)
    one_line(ei)
    env.step(np.zeros(4, dtype=np.int32))  # still usable


def test_bad_multibinary_actions(gbx):
    e = gbx.VecEnv(
        ROM, num_envs=2, obs="vec", frames_per_step=1, release_after_frames=0, actions="multibinary"
    )
    e.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \(2, 8\)"):
        e.step(np.zeros(2, dtype=np.int32))
    with pytest.raises(ValueError, match="0 or 1"):
        e.step(np.full((2, 8), 2))
    e.step(np.ones((2, 8), dtype=bool))
    e.close()


def test_bad_reset_mask(env):
    with pytest.raises(ValueError, match="reset_mask"):
        env.reset(options={"reset_mask": np.ones(3, dtype=bool)})
    with pytest.raises(ValueError, match="reset_mask"):
        env.reset(options={"reset_mask": np.ones(4, dtype=np.int32)})


def test_step_before_reset(gbx):
    e = gbx.VecEnv(ROM, num_envs=1, obs="vec", frames_per_step=1, release_after_frames=0)
    with pytest.raises(RuntimeError, match="reset"):
        e.step(np.zeros(1, dtype=np.int32))


def test_native_checks_sizes_too(env):
    with pytest.raises(ValueError, match="actions for 4 envs"):
        env.backend.step(np.zeros(3, dtype=np.int32))
    with pytest.raises(ValueError, match="out of range"):
        env.backend.read_memory(9, 0, 1)


def test_cuda_without_a_device_is_one_clear_error(gbx):
    try:
        e = gbx.VecEnv(
            ROM, num_envs=2, obs="vec", device="cuda:0", frames_per_step=1, release_after_frames=0
        )
    except gbx.NoDeviceError as ei:
        assert str(ei) and "\n" not in str(ei)
        return
    # A machine with a GPU: the env runs.
    obs, _ = e.reset(seed=0)
    assert obs.shape == (2, 32)
    e.close()


def test_bad_specialize_option(gbx, tmp_path):
    with pytest.raises(ValueError, match="--specialize must be off, profile:FILE, auto") as ei:
        gbx.VecEnv(ROM, num_envs=1, obs="vec", specialize="sometimes")
    one_line(ei)
    with pytest.raises(ValueError, match="auto:N needs N >= 1") as ei:
        gbx.VecEnv(ROM, num_envs=1, obs="vec", specialize="auto:0")
    one_line(ei)
    with pytest.raises(ValueError) as ei:
        gbx.VecEnv(ROM, num_envs=1, obs="vec", specialize=f"profile:{tmp_path / 'missing.json'}")
    one_line(ei)


def test_a_closed_env_says_so_before_any_work(gbx):
    e = gbx.VecEnv(ROM, num_envs=2, obs="vec", frames_per_step=1)
    e.reset(seed=0)
    e.close()
    calls = [
        lambda: e.step(np.zeros(2, dtype=np.int32)),
        lambda: e.reset(seed=0),
        lambda: e.read_memory(0, 1),
        lambda: e.save_state(0),
        lambda: e.registers(),
        lambda: e.cpu_state(0),
        lambda: e.backend,
    ]
    for call in calls:
        with pytest.raises(RuntimeError, match="this VecEnv is closed") as ei:
            call()
        one_line(ei)
    e.close()  # a second close is fine (Gymnasium's contract)


@pytest.mark.parametrize("offset", [-1, 1.5, True, "0"])
def test_env_offset_is_checked_before_the_rom_and_the_kernel(gbx, offset):
    # The ROM does not exist either: the env_offset error comes first, before any native work.
    with pytest.raises(ValueError, match="env_offset must be an int >= 0") as ei:
        gbx.VecEnv("builtin:NOPE", num_envs=1, env_offset=offset)
    one_line(ei)


@pytest.mark.parametrize(
    "seed,match",
    [
        ([1, 2], "one seed per env"),
        ([1, 2, "x", 4], "each seed must be an int or None"),
        (1.5, "seed must be an int"),
    ],
)
def test_bad_seeds(env, seed, match):
    with pytest.raises(ValueError, match=match) as ei:
        env.reset(seed=seed)
    one_line(ei)


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(pixel_values="rgb"), "pixel_values must be"),
        (dict(obs="vec", pixel_values="luminance"), "needs a pixels observation"),
        (dict(obs={"pixels": "packed"}, pixel_values="luminance"), "full' or 'half'"),
        (dict(device="mgba"), "device='mgba' has no pixels output"),
    ],
)
def test_bad_pixel_options(gbx, kw, match):
    with pytest.raises(ValueError, match=match) as ei:
        gbx.VecEnv("builtin:NOPE", num_envs=1, **kw)  # refused before the ROM is looked at
    one_line(ei)


def _with_header(rom: bytes, **fields: int) -> bytes:
    """`rom` with header bytes replaced (offset=value) and its header checksum made right."""
    b = bytearray(rom)
    for offset, value in fields.items():
        b[int(offset, 16)] = value
    x = 0
    for v in b[0x134:0x14D]:
        x = (x - v - 1) & 0xFF
    b[0x14D] = x
    return bytes(b)


def test_wrong_header_checksum_warns_and_runs(gbx):
    from romutil import COUNTER_ROM

    bad = bytearray(COUNTER_ROM)
    bad[0x14D] ^= 0x5A
    with pytest.warns(gbx.RomWarning, match="header checksum mismatch: 0x14D holds") as rec:
        e = gbx.VecEnv(bytes(bad), num_envs=1, frames_per_step=1, release_after_frames=0)
    assert len(rec) == 1 and "\n" not in str(rec[0].message)
    e.reset(seed=0)
    for _ in range(3):
        e.step(np.zeros(1, dtype=np.int32))
    assert e.backend.read_memory(0, 0xC000, 0xC003)[2] == 0x42  # the ROM ran
    e.close()


@pytest.mark.parametrize(
    "fields,match",
    [
        ({"0x148": 0x02}, "header ROM size code 0x02 says 128 KiB but the file is 32768 bytes"),
        ({"0x148": 0x0A}, "invalid ROM size code 0x0A at 0x148"),
        ({"0x147": 0x42}, "unknown cartridge type 0x42 at 0x147"),
        ({"0x147": 0xFE}, r"unsupported cartridge type 0xFE \(HuC3\)"),
    ],
)
def test_header_that_disagrees_is_one_value_error(gbx, fields, match):
    from romutil import COUNTER_ROM

    with pytest.raises(ValueError, match=match) as ei:
        gbx.VecEnv(_with_header(COUNTER_ROM, **fields), num_envs=1)
    one_line(ei)


def test_rom_larger_than_its_size_byte(gbx, tmp_path):
    from romutil import COUNTER_ROM

    path = tmp_path / "doubled.gb"
    path.write_bytes(COUNTER_ROM + COUNTER_ROM)  # 64 KiB, the header says 32 KiB
    with pytest.raises(ValueError, match="says 32 KiB but the file is 65536 bytes") as ei:
        gbx.VecEnv(str(path), num_envs=1)
    one_line(ei)


def test_a_wheel_without_mgba_says_how_to_get_it(gbx):
    """Built without libmgba-dev (pip install . on a machine without it), device='mgba' is one
    clear line naming the package. The wheel CI builds has the device: this case runs in a wheel
    built with -DGBX_WITH_MGBA=OFF (or AUTO without the package)."""
    if gbx._native.mgba_built_in():
        pytest.skip("this wheel has the mgba device")
    with pytest.raises(Exception, match="install the Debian package libmgba-dev") as e:
        gbx.VecEnv("builtin:ALU_LOOP", num_envs=1, obs="vec", device="mgba")
    assert "\n" not in str(e.value)
