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
    with pytest.raises(ValueError, match="^specialize must be off, profile:FILE, auto") as ei:
        gbx.VecEnv(ROM, num_envs=1, obs="vec", specialize="sometimes")
    one_line(ei)
    with pytest.raises(ValueError, match="^specialize auto:N needs N >= 1") as ei:
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
        # Gymnasium's rule (seeds >= 0), and the 64 bits the streams are keyed by: -1 and
        # 2**64 would otherwise wrap onto the streams of 2**64 - 1 and 0.
        (-1, r"seed must be in \[0, 2\*\*64 - 1\] \(got -1\)"),
        (2**64, r"seed must be in \[0, 2\*\*64 - 1\]"),
        (2**70, r"seed must be in \[0, 2\*\*64 - 1\] \(got 1180591620717411303424\)"),
        (np.int64(-5), r"seed must be in \[0, 2\*\*64 - 1\]"),
        ([0, -1, 2, 3], r"each seed must be in \[0, 2\*\*64 - 1\]"),
        ([0, 1, 2**64, 3], r"each seed must be in \[0, 2\*\*64 - 1\]"),
    ],
)
def test_bad_seeds(env, seed, match):
    with pytest.raises(ValueError, match=match) as ei:
        env.reset(seed=seed)
    one_line(ei)


def test_seed_range_edges(gbx, env):
    env.reset(seed=2**64 - 1)
    env.reset(seed=[0, 2**64 - 1, None, np.uint64(2**64 - 1)])
    for seed in (-1, 2**64):
        with pytest.raises(ValueError, match=r"seed must be in \[0, 2\*\*64 - 1\]") as ei:
            gbx.VecEnv(ROM, num_envs=1, obs="vec", seed=seed)
        one_line(ei)


def test_rom_bytes_are_contents_never_a_path(gbx, tmp_path, monkeypatch):
    """``rom`` as bytes is the cartridge; empty bytes are refused, even beside a file called
    ``bytes``."""
    from romutil import COUNTER_ROM

    monkeypatch.chdir(tmp_path)
    (tmp_path / "bytes").write_bytes(COUNTER_ROM)
    for empty in (b"", bytearray(), memoryview(b"")):
        with pytest.raises(ValueError, match="rom is empty bytes") as ei:
            gbx.VecEnv(empty, num_envs=1, obs="vec")
        one_line(ei)
    with pytest.raises(ValueError, match="rom is an empty path") as ei:
        gbx.VecEnv("", num_envs=1, obs="vec")
    one_line(ei)


@pytest.mark.parametrize("rom", [5, None, 1.5, ["builtin:ALU_LOOP"]])
def test_rom_of_another_type_is_a_type_error(gbx, rom):
    with pytest.raises(TypeError, match="rom must be a path") as ei:
        gbx.VecEnv(rom, num_envs=1, obs="vec")
    one_line(ei)


def test_every_rom_type_runs_the_cartridge(gbx, tmp_path):
    from romutil import COUNTER_ROM

    path = tmp_path / "counter.gb"
    path.write_bytes(COUNTER_ROM)
    for rom in (COUNTER_ROM, bytearray(COUNTER_ROM), memoryview(COUNTER_ROM), path, str(path)):
        e = gbx.VecEnv(rom, num_envs=1, obs="vec", frames_per_step=1, release_after_frames=0)
        e.reset(seed=0)
        e.step(np.zeros(1, dtype=np.int32))
        assert e.read_memory(0xC002, 0xC003)[0, 0] == 0x42, type(rom)
        e.close()


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(threads=-1), r"^threads must be an int >= 0 \(0: all cores\), got -1$"),
        (dict(threads=2**31), "^threads must be an int >= 0"),
        (dict(threads=1.5), "^threads must be an int >= 0"),
        (dict(num_envs=2**31), r"^num_envs must be at most 2147483647 \(got 2147483648\)$"),
        (dict(frames_per_step=2**31), "^frames_per_step must be an int >= 1"),
    ],
)
def test_counts_name_python_parameters(gbx, kw, match):
    args = dict(num_envs=1, obs="vec") | kw
    with pytest.raises(ValueError, match=match) as ei:
        gbx.VecEnv(ROM, **args)
    assert "--" not in one_line(ei)


def test_native_messages_name_python_parameters(gbx):
    """The runtime's checks, shared with the CLI, name its flags (--envs, --threads); from
    Python they name the parameters."""
    with pytest.raises(ValueError, match="^num_envs 1000000000 needs .* of env state") as ei:
        gbx.VecEnv(ROM, num_envs=1_000_000_000, obs="vec")
    assert "--" not in one_line(ei)
    native = gbx._native.Backend
    for kw, match in (
        (dict(threads=-1), "^threads must be >= 0$"),
        (dict(frames_per_step=0), "^frames_per_step must be at least 1$"),
        (dict(num_envs=1_000_000_000), "^num_envs 1000000000 needs "),
    ):
        with pytest.raises(ValueError, match=match) as ei:
            native(ROM, **kw)
        assert "--" not in one_line(ei)


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


_UNDER_A_LIMIT = """
import resource, gbx
vm = int([l for l in open("/proc/self/status") if l.startswith("VmSize")][0].split()[1]) * 1024
limit = vm + (1 << 30)  # 1 GiB more address space than this process has mapped now
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
for share in (0.75, 1.0):  # of the limit, in env state (~32 KiB an env)
    try:
        gbx.VecEnv("builtin:ALU_LOOP", int(share * limit / 32768), obs="vec", threads=1)
    except (MemoryError, ValueError) as e:
        print(type(e).__name__, e)
"""


def test_envs_beyond_a_memory_limit_are_one_python_error(tmp_path):
    """Under an address-space limit (ulimit -v): env state larger than the limit is refused up
    front (ValueError naming num_envs and the limit); state that passes that check but does
    not fit beside what the process holds is a MemoryError, never a crash."""
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-c", _UNDER_A_LIMIT], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2, r.stdout
    assert lines[0].startswith("MemoryError cannot allocate memory for num_envs=")
    assert lines[0].endswith("(std::bad_alloc): lower num_envs")
    assert lines[1].startswith("ValueError num_envs ")
    assert "this process may allocate" in lines[1] and "--" not in lines[1]
