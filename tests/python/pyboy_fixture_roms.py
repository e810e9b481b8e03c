"""The ROMs behind the PyBoy state fixtures (tests/python/data/*.pyboy.state.gz).

Each fixture is a small program this project assembles (SM83 opcodes from Pan Docs' table),
run in PyBoy 2.8.1 by scripts/make_pyboy_fixtures.py up to a capture point, and saved there
with PyBoy's own ``save_state``. The tests rebuild the same ROM bytes from this module (the
fixture's JSON records the ROM's SHA-256, so an edit here without re-running the script fails
loudly) and check that ``gbx.pyboy_compat`` imports what each program set up.

A fixture: ``rom`` (bytes), ``capture`` (how the script finds the capture point: after a
number of frames, or at a hook address with a condition on PyBoy's parsed state),
``results`` (WRAM bytes the program writes after the capture point, compared between PyBoy's
and GBX's continuation) and ``setup`` (what the program set up, in words and values, asserted
by tests/python/test_pyboy_fixtures.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from romutil import (
    make_cart,
)  # tests/python is on sys.path (pytest, scripts/make_pyboy_fixtures.py)


class Asm:
    """Just enough of an SM83 assembler for these programs; ``org`` is the load address."""

    def __init__(self, org: int = 0x0150):
        self.org = org
        self.code = bytearray()

    def here(self) -> int:
        return self.org + len(self.code)

    def emit(self, *b: int) -> Asm:
        self.code += bytes(b)
        return self

    def ld_a(self, n: int) -> Asm:  # LD A,n
        return self.emit(0x3E, n & 0xFF)

    def ld_b(self, n: int) -> Asm:  # LD B,n
        return self.emit(0x06, n & 0xFF)

    def ld_hl(self, nn: int) -> Asm:  # LD HL,nn
        return self.emit(0x21, nn & 0xFF, nn >> 8)

    def st(self, addr: int) -> Asm:  # LDH (n),A or LD (nn),A
        if addr >= 0xFF00:
            return self.emit(0xE0, addr & 0xFF)
        return self.emit(0xEA, addr & 0xFF, addr >> 8)

    def ld(self, addr: int) -> Asm:  # LDH A,(n) or LD A,(nn)
        if addr >= 0xFF00:
            return self.emit(0xF0, addr & 0xFF)
        return self.emit(0xFA, addr & 0xFF, addr >> 8)

    def poke(self, addr: int, value: int) -> Asm:
        return self.ld_a(value).st(addr)

    def copy(self, src: int, dst: int) -> Asm:
        return self.ld(src).st(dst)

    def nops(self, n: int) -> int:
        """n NOPs; returns the address of the first."""
        at = self.here()
        self.code += bytes(n)
        return at

    def jr(self, target: int, cond: int = 0x18) -> Asm:  # JR / JR NZ (0x20) / JR Z (0x28)
        rel = target - (self.here() + 2)
        assert -128 <= rel <= 127, rel
        return self.emit(cond, rel & 0xFF)

    def wait_ly(self, line: int) -> Asm:  # until LY == line
        top = self.here()
        return self.ld(0xFF44).emit(0xFE, line).jr(top, 0x20)

    def wait_next_frame(self) -> Asm:  # until LY == 144 after LY != 144
        top = self.here()
        self.ld(0xFF44).emit(0xFE, 144).jr(top, 0x28)
        return self.wait_ly(144)

    def fill(self, addr: int, n: int, first: int, step: int) -> Asm:
        """addr..addr+n-1 = first, first+step, ... (LD (HL+),A; ADD A,step; DEC B; JR NZ)."""
        self.ld_hl(addr).ld_b(n).ld_a(first)
        top = self.here()
        return self.emit(0x22, 0xC6, step & 0xFF, 0x05).jr(top, 0x20)

    def inc_mem(self, addr: int) -> Asm:  # LD HL,addr; INC (HL)
        return self.ld_hl(addr).emit(0x34)

    def quiet(self) -> Asm:  # DI; IE = 0: nothing dispatches, IF bits stay visible
        return self.emit(0xF3).poke(0xFFFF, 0x00)

    def forever(self) -> Asm:  # JR -2
        return self.emit(0x18, 0xFE)


@dataclass
class Fixture:
    name: str
    rom: bytes
    # ("frames", N): save after N frames of pyboy.tick. ("hook", addrs, key): hooks at addrs
    # (ROM bank 0); the first hook whose parsed state satisfies the script's condition `key`.
    capture: tuple
    # WRAM addresses the program writes after the capture point, read after each of the
    # run_frames frames that follow it.
    results: list[int] = field(default_factory=list)
    run_frames: int = 30
    setup: dict[str, Any] = field(default_factory=dict)


def _mbc1() -> Fixture:
    # MBC1 + RAM + battery, 2 MiB (128 banks), 32 KiB RAM (4 banks). Mode 1 with BANK2 = 2:
    # 4000-7FFF is bank 0x45, 0000-3FFF bank 0x40, A000-BFFF RAM bank 2 (Pan Docs "MBC1").
    # Mode 1 moves 0000-3FFF while this code runs there, so bank 0 is repeated in banks
    # 0x20, 0x40 and 0x60 (with a different marker at 3FFF).
    a = Asm().poke(0x0000, 0x0A).poke(0x6000, 0x01)  # RAM on, mode 1
    for bank in range(4):
        a.poke(0x4000, bank).poke(0xA000, 0xB0 + bank)
    a.poke(0x4000, 0x02).poke(0x2000, 0x05)
    loop = a.here()
    a.copy(0x4000, 0xC000).copy(0x3FFF, 0xC001).copy(0xA000, 0xC002).inc_mem(0xC003)
    a.wait_next_frame().jr(loop)
    rom = bytearray(
        make_cart(
            bytes(a.code), cart_type=0x03, rom_size_code=0x06, ram_size_code=0x03, title=b"PBMBC1"
        )
    )
    for bank in range(1, 128):
        rom[bank * 0x4000] = bank  # 4000 of each bank reads its number
    for bank in (0x20, 0x40, 0x60):
        rom[bank * 0x4000 : bank * 0x4000 + 0x4000] = rom[0:0x4000]
        rom[bank * 0x4000 + 0x3FFF] = bank
    return Fixture(
        "MBC1",
        bytes(rom),
        ("frames", 100),
        results=[0xC000, 0xC001, 0xC002, 0xC003],
        setup={
            "mbc_rom_bank": 0x05,
            "mbc_ram_bank": 0x02,
            "mbc_mode": 1,
            "mbc_ram_enable": 1,
            "reads": {0x4000: 0x45, 0x3FFF: 0x40, 0xA000: 0xB2},
            "cart_ram": {b * 0x2000: 0xB0 + b for b in range(4)},
        },
    )


RTC_SET = (42, 23, 5, 0x34, 0x01)  # S M H DL DH: day 0x134, 05:23:42, running


def _mbc3_rtc() -> Fixture:
    # MBC3 + timer + RAM + battery, 2 MiB, 32 KiB RAM. The clock is halted, set, restarted and
    # latched (Pan Docs "MBC3": halt before writing the clock registers); then once a frame
    # the program latches it again and copies the latched seconds to C005.
    a = Asm().poke(0x0000, 0x0A).poke(0x2000, 0x65).poke(0x4000, 0x03).poke(0xA000, 0xC3)
    a.poke(0x4000, 0x0C).poke(0xA000, 0x40)  # DH: halt
    for reg, value in zip(range(0x08, 0x0D), RTC_SET):
        a.poke(0x4000, reg).poke(0xA000, value)
    a.poke(0x6000, 0x00).poke(0x6000, 0x01)
    for i, reg in enumerate(range(0x08, 0x0D)):
        a.poke(0x4000, reg).copy(0xA000, 0xC000 + i)
    a.poke(0x4000, 0x08)
    loop = a.here()
    a.poke(0x6000, 0x00).poke(0x6000, 0x01).copy(0xA000, 0xC005).copy(0x4000, 0xC006).inc_mem(
        0xC007
    )
    a.wait_next_frame().jr(loop)
    rom = bytearray(
        make_cart(
            bytes(a.code),
            cart_type=0x10,
            rom_size_code=0x06,
            ram_size_code=0x03,
            title=b"PBMBC3RTC",
        )
    )
    for bank in range(1, 128):
        rom[bank * 0x4000] = bank
    return Fixture(
        "MBC3_RTC",
        bytes(rom),
        ("frames", 100),
        results=[0xC005, 0xC006, 0xC007],
        run_frames=90,
        setup={
            "mbc_rom_bank": 0x65,
            "mbc_ram_bank": 0x08,
            "mbc_ram_enable": 1,
            "rtc": RTC_SET,
            "reads": {0x4000: 0x65, 0xA000: RTC_SET[0]},
            "cart_ram": {3 * 0x2000: 0xC3},
            "wram": {0xC000 + i: v for i, v in enumerate(RTC_SET)},
        },
    )


def _mbc5() -> Fixture:
    # MBC5 + RAM + battery, 8 MiB (512 banks), 128 KiB RAM (16 banks): ROM bank 0x1A5 (the
    # 9th bit from 3000-3FFF), RAM bank 0x0B (Pan Docs "MBC5"). PyBoy 2.8.1 saves the ROM bank
    # in one byte (base_mbc.py save_state writes the uint16 rombank_selected through
    # write(uint8_t)), so its state says bank 0xA5: the import, and PyBoy's own reload, get
    # 0xA5. The loop selects 0x1A5 again every frame, so from there both run on alike.
    a = Asm().poke(0x0000, 0x0A).poke(0x4000, 0x0B).poke(0xA000, 0x5B)
    loop = a.here()
    a.poke(0x2000, 0xA5).poke(0x3000, 0x01)
    a.copy(0x4000, 0xC000).copy(0x4001, 0xC001).copy(0xA000, 0xC002).inc_mem(0xC003)
    a.wait_next_frame().jr(loop)
    rom = bytearray(
        make_cart(
            bytes(a.code), cart_type=0x1B, rom_size_code=0x08, ram_size_code=0x04, title=b"PBMBC5"
        )
    )
    for bank in range(1, 512):
        rom[bank * 0x4000] = bank & 0xFF
        rom[bank * 0x4000 + 1] = bank >> 8
    return Fixture(
        "MBC5",
        bytes(rom),
        ("frames", 100),
        results=[0xC000, 0xC001, 0xC002, 0xC003],
        setup={
            "mbc_rom_bank": 0xA5,
            "mbc_rom_bank_hi": 0,
            "mbc_ram_bank": 0x0B,
            "mbc_ram_enable": 1,
            "reads": {0x4000: 0xA5, 0x4001: 0x00, 0xA000: 0x5B},
            "cart_ram": {0x0B * 0x2000: 0x5B},
            "rom_bank_set": 0x1A5,
            "wram": {0xC000: 0xA5, 0xC001: 0x01, 0xC002: 0x5B},
        },
    )


DMA_FIRST, DMA_STEP = 0x07, 0x03  # the source bytes: 07, 0A, 0D, ...


def _oam_dma() -> Fixture:
    # LCD off (in VBlank), OAM filled with 0x11, VRAM 8000-809F with a pattern; OAM DMA from
    # 8000. The code runs from ROM: the DMA owns the VRAM bus and OAM, not the external bus
    # (Pan Docs "OAM DMA Transfer"). A read of OAM during the DMA gets 0xFF (C000); after it,
    # OAM holds the pattern (C001, C002).
    a = Asm().quiet().wait_ly(144).poke(0xFF40, 0x00)
    a.fill(0xFE00, 160, 0x11, 0).fill(0x8000, 160, DMA_FIRST, DMA_STEP)
    a.poke(0xFF46, 0x80)
    hooks = a.nops(24)
    a.copy(0xFE00, 0xC000)
    a.nops(170)
    a.copy(0xFE00, 0xC001).copy(0xFE9F, 0xC002).forever()
    rom = make_cart(bytes(a.code), title=b"PBDMA")
    return Fixture(
        "OAM_DMA",
        rom,
        ("hook", [hooks + 12], "dma"),
        results=[0xC000, 0xC001, 0xC002],
        run_frames=2,
        setup={
            "dma_source": 0x80,
            "oam": bytes((DMA_FIRST + DMA_STEP * i) & 0xFF for i in range(160)),
            "wram_after": {
                0xC000: 0xFF,
                0xC001: DMA_FIRST,
                0xC002: (DMA_FIRST + DMA_STEP * 159) & 0xFF,
            },
        },
    )


def _oam_dma_end(nops: int) -> Fixture:
    # The DMA's last M-cycle: OAM is read (LD A,(FE00), in its M-cycle 4) `nops` NOPs after the
    # FF46 write. GBX owns OAM from the write's io_time + 8 for 640 T-cycles (bus.h oam_dma):
    # the read at write + 16 + 4 * nops is blocked (FF) for nops <= 157 and sees OAM for
    # 158. Captured mid-DMA, the import must end the DMA where GBX itself would have.
    a = Asm().quiet().wait_ly(144).poke(0xFF40, 0x00)
    a.fill(0xFE00, 160, 0x11, 0).fill(0x8000, 160, DMA_FIRST, DMA_STEP)
    a.poke(0xFF46, 0x80)
    hooks = a.nops(nops)
    a.copy(0xFE00, 0xC000).forever()
    rom = make_cart(bytes(a.code), title=b"PBDMAEND")
    return Fixture(
        f"OAM_DMA_END_{nops}",
        rom,
        ("hook", [hooks + 12], "dma"),
        results=[0xC000],
        run_frames=2,
        setup={"wram_after": {0xC000: 0xFF if nops <= 157 else DMA_FIRST}},
    )


TMA = 0xAB


def _timer(state: int) -> Fixture:
    # TAC = 05 (TIMA counts every 16 T-cycles), TMA = AB, TIMA = FD, then NOPs. The capture is
    # the first NOP at which PyBoy's timer is in the overflow M-cycle (TIMA reads 00, reload
    # pending: state 1) or in the reload M-cycle (state 2) (Pan Docs "Timer overflow
    # behavior"). Then IF (C000) and TIMA (C001) are read; IE = 0, so nothing dispatches.
    a = Asm().quiet().poke(0xFF0F, 0x00).poke(0xFF06, TMA).poke(0xFF07, 0x05).poke(0xFF04, 0x00)
    a.poke(0xFF05, 0xFD)
    hooks = a.nops(64)
    a.copy(0xFF0F, 0xC000).copy(0xFF05, 0xC001).copy(0xFF04, 0xC002).forever()
    rom = make_cart(bytes(a.code), title=b"PBTIMER")
    return Fixture(
        "TIMER_RELOAD_PENDING" if state == 1 else "TIMER_RELOAD_CYCLE",
        rom,
        ("hook", list(range(hooks, hooks + 64)), f"timer{state}"),
        results=[0xC000, 0xC001, 0xC002],
        run_frames=2,
        setup={"tma": TMA, "tac": 0x05, "reload_state": state},
    )


def _serial() -> Fixture:
    # SB = 42, SC = 81: an internally clocked transfer (8 bits at 8192 Hz, Pan Docs "Serial
    # Data Transfer"); captured mid-transfer; then SC is polled until bit 7 clears, and IF
    # (C000), SB (C001) and a marker (C002) are stored.
    a = Asm().quiet().poke(0xFF0F, 0x00).poke(0xFF01, 0x42).poke(0xFF02, 0x81)
    hooks = a.nops(32)
    top = a.here()
    a.ld(0xFF02).emit(0xCB, 0x7F).jr(top, 0x20)  # BIT 7,A; JR NZ
    a.copy(0xFF0F, 0xC000).copy(0xFF01, 0xC001).poke(0xC002, 0x99).forever()
    rom = make_cart(bytes(a.code), title=b"PBSERIAL")
    return Fixture(
        "SERIAL",
        rom,
        ("hook", [hooks + 16], "serial"),
        results=[0xC000, 0xC001, 0xC002],
        run_frames=2,
        setup={"sc": 0x81, "wram_after": {0xC002: 0x99}},
    )


def fixtures() -> list[Fixture]:
    return [
        _mbc1(),
        _mbc3_rtc(),
        _mbc5(),
        _oam_dma(),
        _oam_dma_end(157),
        _oam_dma_end(158),
        _timer(1),
        _timer(2),
        _serial(),
    ]


def by_name(name: str) -> Fixture:
    return next(f for f in fixtures() if f.name == name)
