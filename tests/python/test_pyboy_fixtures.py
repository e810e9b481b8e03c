"""gbx.pyboy_compat on PyBoy-made states of the parts a micro-ROM at frame 120 never shows:
MBC1/MBC3+RTC/MBC5 banking, an OAM DMA in progress, the timer's overflow and reload M-cycles,
a serial transfer in progress.

The states were saved by PyBoy 2.8.1 (scripts/make_pyboy_fixtures.py) while running this
project's own ROMs (tests/python/pyboy_fixture_roms.py); no PyBoy is needed here. The tests
assert the imported GBX fields against what the ROM set up (the values in
pyboy_fixture_roms.py) and against PyBoy's saved clocks with the documented conversions, then
run the imported state on in GBX and compare the bytes the program writes, and the cycle
each frame ends at, frame by frame with what PyBoy's own continuation did.
"""

import gzip
import hashlib
import json
import pathlib

import numpy as np
import pyboy_fixture_roms as roms
import pytest

DATA = pathlib.Path(__file__).parent / "data"
RTC_SECOND = 4194304  # T-cycles (Pan Docs "MBC3": the clock counts at 32768 Hz / 2^15)
# PyBoy stamps a memory access 4 T-cycles before its M-cycle starts (pyboy/core/opcodes.py:
# LDH (n),A adds 4, then writes, in M-cycle 3), GBX 1 T-cycle into it (io_time): a clock an
# access started or reset at PyBoy cycle X runs from X + 5 in GBX.
LAG = 5


@pytest.fixture(scope="module")
def pc(gbx):
    import gbx.pyboy_compat as module

    return module


@pytest.fixture(scope="module")
def fixtures():
    return {f.name: f for f in roms.fixtures()}


class Loaded:
    """A fixture imported into env 0 of a one-env VecEnv."""

    def __init__(self, gbx, pc, fx):
        self.fx = fx
        self.state = gzip.decompress((DATA / f"{fx.name}.pyboy.state.gz").read_bytes())
        self.meta = json.loads((DATA / f"{fx.name}.pyboy.json").read_text())
        assert hashlib.sha256(fx.rom).hexdigest() == self.meta["rom_sha256"], (
            f"{fx.name}: the ROM in pyboy_fixture_roms.py changed; re-run scripts/make_pyboy_fixtures.py"
        )
        self.p = pc.read_state(self.state, fx.rom)
        self.blob = pc.import_state(self.state, fx.rom)
        self.pc = pc
        # obs/reward/copy explicit: the defaults are not this test's business.
        self.env = gbx.VecEnv(
            fx.rom,
            num_envs=1,
            frames_per_step=1,
            release_after_frames=1,
            obs="vec",
            reward="0",
            copy=True,
        )
        self.env.reset(seed=0)
        pc.load_into(self.env, 0, self.blob)

    def fields(self) -> dict:
        _, records = self.pc._split_blob(bytes(self.env.save_state(0)))
        out = {}
        for name, data in records:
            out[name] = (
                int.from_bytes(data, "little", signed=len(data) == 8) if len(data) <= 8 else data
            )
        return out

    def read(self, addr: int) -> int:
        return self.env.backend.read_memory(0, addr, addr + 1)[0]

    def step(self) -> None:
        self.env.step(np.zeros(1, dtype=np.int32))

    def run_on(self, from_frame: int = 1) -> list:
        """Steps frame by frame; the first frame (from `from_frame` on) whose result bytes
        differ from PyBoy's, or []."""
        at = [int(a, 16) for a in self.meta["results_at"]]
        for k, (want, end) in enumerate(zip(self.meta["results"], self.meta["frame_end_cycles"])):
            self.step()
            got = [self.read(a) for a in at]
            if k + 1 >= from_frame and got != want:
                return [f"frame {k + 1}: GBX {got} PyBoy {want} at {self.meta['results_at']}"]
            # The import puts GBX's frame boundary where PyBoy's frame ends; both stop at the
            # first instruction boundary past it.
            cycles = self.fields()["cycle_count"]
            if abs(cycles - end) > 24:
                return [f"frame {k + 1} ends at cycle {cycles} in GBX, {end} in PyBoy"]
        return []

    def close(self):
        self.env.close()


@pytest.fixture
def load(gbx, pc, fixtures):
    opened = []

    def make(name):
        opened.append(Loaded(gbx, pc, fixtures[name]))
        return opened[-1]

    yield make
    for x in opened:
        x.close()


ALL = [f.name for f in roms.fixtures()]


@pytest.mark.parametrize("name", ALL)
def test_registers_cycles_and_round_trip(load, name):
    x = load(name)
    f = x.fields()
    for reg, value in x.meta["regs"].items():  # what PyBoy's state holds
        assert f[reg] == value, reg
    assert f["cycle_count"] == x.meta["cycles"]
    # GBX saves back what was loaded (user_prev*: the reward expression's own bookkeeping).
    _, loaded = x.pc._split_blob(x.blob)
    saved = dict(x.pc._split_blob(bytes(x.env.save_state(0)))[1])
    for field, data in loaded:
        if not field.startswith("user_prev"):
            assert saved[field] == data, field


# SERIAL: PyBoy's transfer is 4x short (below). OAM_DMA_END_158: PyBoy's DMA blocks OAM one
# M-cycle longer than GBX's (the read 158 NOPs after the write gets FF in PyBoy).
@pytest.mark.parametrize("name", [n for n in ALL if n not in ("SERIAL", "OAM_DMA_END_158")])
def test_runs_on_as_pyboy_did(load, name):
    x = load(name)
    assert x.run_on() == []


def check_mbc(x, setup):
    f = x.fields()
    for key in ("mbc_rom_bank", "mbc_rom_bank_hi", "mbc_ram_bank", "mbc_mode", "mbc_ram_enable"):
        if key in setup:
            assert f[key] == setup[key], key
    for addr, value in setup["reads"].items():  # through GBX's banking
        assert x.read(addr) == value, hex(addr)
    ram = f["mem"][x.pc._native.MEM_CART_RAM :]
    for offset, value in setup["cart_ram"].items():
        assert ram[offset] == value, hex(offset)
    # PyBoy's own reads after it loaded this state (where its state loses nothing, the same
    # as its reads at the capture point).
    for addr, value in x.meta["reload_reads"].items():
        assert x.read(int(addr, 16)) == value, addr


def test_mbc1_banks_mode_and_ram(load, fixtures):
    check_mbc(load("MBC1"), fixtures["MBC1"].setup)


def test_mbc5_rom_bank_and_ram_bank(load, fixtures):
    setup = fixtures["MBC5"].setup
    x = load("MBC5")
    # The ROM selected bank 0x1A5, which PyBoy saved as 0xA5 (one byte): the import, like
    # PyBoy's reload, selects 0xA5; at the capture point PyBoy itself was reading bank 0x1A5.
    assert setup["rom_bank_set"] == 0x1A5 and x.p.cart["rombank_selected"] == 0xA5
    assert x.meta["reads"]["0x4001"] == 0x01 and x.meta["reload_reads"]["0x4001"] == 0x00
    check_mbc(x, setup)
    # The loop selects 0x1A5 again: GBX's 9-bit bank register then reads bank 0x1A5.
    x.step()
    for addr, value in setup["wram"].items():
        assert x.read(addr) == value, hex(addr)


def test_mbc3_banks_and_rtc_registers(load, fixtures):
    setup = fixtures["MBC3_RTC"].setup
    x = load("MBC3_RTC")
    check_mbc(x, setup)
    f = x.fields()
    rtc = f["rtc_regs"]
    # The clock was set to 05:23:42 day 0x134 under a second before the capture: PyBoy's record
    # holds it unchanged (it catches up on access only) with the fraction of the second.
    assert tuple(rtc[:5]) == setup["rtc"]
    # PyBoy saves no latched copy: GBX's is the live clock, which is what the ROM latched.
    assert tuple(rtc[5:10]) == setup["rtc"]
    for addr, value in setup["wram"].items():
        assert x.read(addr) == value, hex(addr)
    frac = x.p.cart["rtc"]["cycles"]
    assert 0 < frac < RTC_SECOND
    assert f["rtc_second_start"] == f["cycle_count"] + LAG - frac


def test_mbc3_rtc_counts_on_from_the_imported_second(load):
    x = load("MBC3_RTC")
    f0 = x.fields()
    boundary = f0["rtc_second_start"] + RTC_SECOND
    seen = set()
    for _ in range(80):
        x.step()
        f = x.fields()
        # GBX catches its clock up at every step's end.
        want = 42 + (f["cycle_count"] - (boundary - RTC_SECOND)) // RTC_SECOND
        assert f["rtc_regs"][0] == want, f["cycle_count"] - boundary
        seen.add(want)
    assert {42, 43} <= seen  # a second boundary fell inside the run


def test_oam_dma_in_progress(load, fixtures):
    setup = fixtures["OAM_DMA"].setup
    x = load("OAM_DMA")
    d = x.p.dma
    assert d["active"] and 0 < d["index"] < 160 and d["source"] == setup["dma_source"]
    f = x.fields()
    # PyBoy starts moving bytes 12 T-cycles after its FF46 write's stamp (mb.py transfer_DMA),
    # GBX owns the bus from 8 T-cycles after its io_time for 160 M-cycles (bus.h oam_dma).
    assert f["dma_end"] == d["start_cycle"] - 12 + LAG + 8 + 640
    assert f["cycle_count"] < f["dma_end"]
    assert x.read(0xFF46) == setup["dma_source"]
    # GBX copies the whole block when a DMA starts; the import completes what PyBoy had not
    # moved yet from the source (VRAM 8000-809F).
    oam = f["mem"][x.pc._native.MEM_OAM : x.pc._native.MEM_OAM + 160]
    assert bytes(oam) == setup["oam"]
    assert x.run_on() == []
    for addr, value in setup["wram_after"].items():  # an OAM read during the DMA is FF
        assert x.read(addr) == value, hex(addr)


@pytest.mark.parametrize("nops", [157, 158])
def test_oam_dma_ends_where_gbx_would_end_it(gbx, load, fixtures, nops):
    # The imported DMA ends at the M-cycle GBX's own run of the same ROM ends it (the ROM's
    # timing is relative to its FF46 write, so a run from GBX's post-boot state is the
    # reference): the read 157 NOPs after the write is blocked, 158 is not.
    name = f"OAM_DMA_END_{nops}"
    x = load(name)
    for _ in range(3):
        x.step()
    native = gbx.VecEnv(
        fixtures[name].rom,
        num_envs=1,
        frames_per_step=1,
        release_after_frames=1,
        obs="vec",
        reward="0",
        copy=True,
    )
    native.reset(seed=0)
    for _ in range(80):
        native.step(np.zeros(1, dtype=np.int32))
    want = fixtures[name].setup["wram_after"][0xC000]
    assert native.backend.read_memory(0, 0xC000, 0xC001)[0] == want
    native.close()
    assert x.read(0xC000) == want


def timer_common(x, setup):
    f = x.fields()
    assert x.read(0xFF06) == setup["tma"]
    assert x.read(0xFF07) == 0xF8 | setup["tac"]
    assert x.p.timer["reload_state"] == setup["reload_state"]
    return f


def test_timer_overflow_cycle_reload_pending(load, fixtures):
    x = load("TIMER_RELOAD_PENDING")
    f = timer_common(x, fixtures["TIMER_RELOAD_PENDING"].setup)
    t = x.p.timer
    # TIMA overflowed: it reads 00 and the reload (TIMA = TMA, IF bit 2) is 1-4 T-cycles away.
    assert x.read(0xFF05) == 0x00
    assert x.read(0xFF0F) & 0x04 == 0
    assert f["timer_synced"] == t["last_cycles"] + LAG
    assert f["tima_reload"] == f["timer_synced"] + t["TIMA_counter"]
    assert 0 < f["tima_reload"] - f["timer_synced"] <= 4
    x.step()
    assert x.read(0xFF0F) & 0x04


def test_timer_reload_cycle(load, fixtures):
    x = load("TIMER_RELOAD_CYCLE")
    f = timer_common(x, fixtures["TIMER_RELOAD_CYCLE"].setup)
    # The reload M-cycle: TIMA holds TMA, IF bit 2 is set, and the reload lies 1-4 T-cycles
    # back (a TIMA write now is ignored).
    assert x.read(0xFF05) == fixtures["TIMER_RELOAD_CYCLE"].setup["tma"]
    assert x.read(0xFF0F) & 0x04
    assert f["timer_synced"] == x.p.timer["last_cycles"] + LAG
    assert 0 <= f["timer_synced"] - f["tima_reload"] < 4


def test_serial_transfer_in_progress(load, fixtures):
    setup = fixtures["SERIAL"].setup
    x = load("SERIAL")
    s = x.p.serial
    assert s["transfer_enabled"] and s["internal_clock"]
    f = x.fields()
    # PyBoy shifts a byte out in 8 x 128 T-cycles (serial.py CYCLES_8192HZ); the DMG takes
    # 8 x 512 (8192 Hz, Pan Docs "Serial Data Transfer"), as GBX does: the import keeps the
    # transfer's start and gives it the DMG's length.
    started = s["last_cycles"] - (s["clock"] - (s["clock_target"] - 8 * 128))
    assert f["serial_event"] == started + LAG + 4096
    assert 0 < f["serial_event"] - f["cycle_count"] < 4096
    assert x.read(0xFF02) == 0x7E | setup["sc"]
    # PyBoy's transfer ends in the capture frame, GBX's 3072 T-cycles later: equal from the
    # second frame on.
    assert x.run_on(from_frame=2) == []
    assert x.read(0xFF0F) & 0x08  # the transfer's interrupt request
    for addr, value in setup["wram_after"].items():
        assert x.read(addr) == value, hex(addr)


def test_readme_import_table_is_the_generated_one(gbx):
    import pyboy_fixture_table

    marker = "pyboy-import-table"
    begin = f"<!-- {marker}: begin (generated by scripts/make_pyboy_fixtures.py) -->\n"
    readme = (pathlib.Path(__file__).parents[2] / "docs" / "guide" / "pyboy-states.md").read_text()
    assert begin in readme, "docs/guide/pyboy-states.md lost its pyboy-import-table markers"
    section = readme.split(begin, 1)[1].split(f"<!-- {marker}: end -->", 1)[0]
    assert section == pyboy_fixture_table.markdown(gbx), (
        "docs/guide/pyboy-states.md's PyBoy import table is stale: run scripts/make_pyboy_fixtures.py --table"
    )
