"""gbx.pyboy_compat: PyBoy 2.8.x states imported as GBX save states.

Two layers:
- Always: a state PyBoy 2.8.1 saved (ALU_LOOP after 120 frames, tests/python/data, with the
  registers, memory hashes and I/O bytes PyBoy's own API reported at that moment) is imported,
  loaded into a GBX env and compared; malformed states are refused in one line.
- With PyBoy installed (`pip install .[test,pyboy]`, opt-in: scripts/test.sh with
  GBX_TEST_PYBOY=1): the same live, on several built-in ROMs, and both emulators run on.
Banking, RTC, OAM DMA, timer reload and serial states: test_pyboy_fixtures.py.
"""

import gzip
import hashlib
import json
import os
import pathlib

import numpy as np
import pytest

DATA = pathlib.Path(__file__).parent / "data"
FIXTURE = DATA / "ALU_LOOP-f120.pyboy"


@pytest.fixture(scope="module")
def pc(gbx):
    import gbx.pyboy_compat as module

    return module


@pytest.fixture(scope="module")
def fixture_state():
    return gzip.decompress((FIXTURE.parent / (FIXTURE.name + ".state.gz")).read_bytes())


@pytest.fixture(scope="module")
def expected():
    return json.loads((FIXTURE.parent / (FIXTURE.name + ".json")).read_text())


def loaded_env(gbx, pc, rom, blob):
    env = gbx.VecEnv(rom, num_envs=2, frames_per_step=1, release_after_frames=1)
    env.reset(seed=0)
    pc.load_into(env, 1, blob)
    return env


def test_fixture_imports_with_pyboys_registers_and_memory(gbx, pc, fixture_state, expected):
    blob = pc.import_state(fixture_state, expected["rom"])
    env = loaded_env(gbx, pc, expected["rom"], blob)
    st = env.cpu_state(1)
    for reg, value in expected["regs"].items():
        assert st[reg] == value, reg
    raw = pc.gbx_snapshot(bytes(env.save_state(1)))
    for region, digest in expected["mem_sha256"].items():
        assert hashlib.sha256(raw["mem"][region]).hexdigest() == digest, region
    # I/O as the CPU reads it there: DIV, TIMA/TMA/TAC, IF, LCDC, STAT (mode, LYC flag), LY,
    # LYC, BGP, IE.
    for addr, value in expected["io"].items():
        a = int(addr, 16)
        assert env.backend.read_memory(1, a, a + 1)[0] == value, addr
    # Env 0 is untouched (post-boot), and the imported env runs.
    assert env.cpu_state(0)["pc"] == 0x100
    env.step(np.zeros(2, dtype=np.int32))
    assert env.cpu_state(1)["cycle_count"] > expected["frames"] * 70224
    env.close()


def test_blob_round_trips_through_gbx(gbx, pc, fixture_state, expected):
    blob = pc.import_state(fixture_state, expected["rom"])
    env = loaded_env(gbx, pc, expected["rom"], blob)
    assert bytes(env.save_state(1)) == blob
    env.close()


def test_import_from_a_path(pc, fixture_state, expected, tmp_path):
    p = tmp_path / "s.state"
    p.write_bytes(fixture_state)
    assert pc.import_state(p, expected["rom"]) == pc.import_state(fixture_state, expected["rom"])


def one_line(excinfo):
    msg = str(excinfo.value)
    assert msg and "\n" not in msg
    return msg


def test_truncated_state(pc, fixture_state, expected):
    for cut in (0, 1, 100, len(fixture_state) - 1):
        with pytest.raises(pc.PyBoyStateError, match="truncated|does not parse") as ei:
            pc.import_state(fixture_state[:cut], expected["rom"])
        one_line(ei)


def test_trailing_bytes(pc, fixture_state, expected):
    with pytest.raises(pc.PyBoyStateError, match="does not parse") as ei:
        pc.import_state(fixture_state + b"\0", expected["rom"])
    one_line(ei)


def test_other_format_version(pc, fixture_state, expected):
    with pytest.raises(pc.PyBoyStateError, match="version 28 is not supported") as ei:
        pc.import_state(b"\x1c" + fixture_state[1:], expected["rom"])
    one_line(ei)


def test_cgb_state_refused(pc, fixture_state, expected):
    # Byte 5 is the motherboard's CGB flag.
    with pytest.raises(pc.PyBoyStateError, match="Game Boy Color") as ei:
        pc.import_state(fixture_state[:5] + b"\x01" + fixture_state[6:], expected["rom"])
    one_line(ei)


def test_state_of_a_cartridge_with_other_ram_refused(pc, fixture_state):
    # MBC1_BANKS has cartridge RAM, ALU_LOOP has none: PyBoy's record lengths differ.
    with pytest.raises(
        pc.PyBoyStateError, match=r"does not parse as the state of this ROM's cartridge \(mbc1"
    ) as ei:
        pc.import_state(fixture_state, "builtin:MBC1_BANKS")
    one_line(ei)


def test_blob_for_another_rom_refused_by_gbx(gbx, pc, fixture_state, expected):
    blob = pc.import_state(fixture_state, expected["rom"])
    env = gbx.VecEnv("builtin:MEM_RWB", num_envs=1, frames_per_step=1)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="another ROM") as ei:
        pc.load_into(env, 0, blob)
    one_line(ei)
    env.close()


# -- Live PyBoy (opt-in) ---------------------------------------------------------------------

# ROMs PyBoy and GBX both run from the import point on; each must be equal there.
LIVE_ROMS = [
    "ALU_LOOP",
    "MEM_RWB",
    "IRQ_TIMER",
    "TIMER_RELOAD",
    "PPU_MODES",
    "MBC1_BANKS",
    "SERIAL_HELLO",
]


def need_pyboy():
    if os.environ.get("GBX_TEST_PYBOY") == "1":
        import pyboy  # noqa: F401  (asked for: missing is a failure, not a skip)
    else:
        pytest.importorskip("pyboy", reason="opt-in: pip install .[pyboy] (PyBoy 2.8.1)")


@pytest.fixture(scope="module")
def rom_dir(gbx, tmp_path_factory):
    out = tmp_path_factory.mktemp("roms")
    for name in LIVE_ROMS:
        (out / f"{name}.gb").write_bytes(bytes(gbx._native.rom_bytes(f"builtin:{name}")))
    return out


@pytest.mark.parametrize("name", LIVE_ROMS)
def test_live_pyboy_import_point_equal(gbx, pc, rom_dir, name):
    need_pyboy()
    r = pc.compare_with_pyboy(str(rom_dir / f"{name}.gb"), import_frame=120, frames=30)
    assert r["import_diff"] == [], r["import_diff"]
    print(f"{name}: first divergence {r['first_divergence']} {r['diff'][:3]}")
