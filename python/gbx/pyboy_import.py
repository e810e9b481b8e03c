"""A parsed PyBoy state mapped onto GBX's save-state fields (:func:`import_state`; the module
doc of :mod:`gbx.pyboy_compat` says what is mapped and how the clocks are re-expressed), and
the GBX save-state blob's records (runtime/include/gbx/runtime/states/save_state.h)."""

from __future__ import annotations

import hashlib
import os
from typing import Any

from . import _native
from .pyboy_state import PyBoyState, PyBoyStateError, _Reader, _rom_bytes, read_state

FRAME_CYCLES = 70224
LINE_DOTS = 456

# PyBoy runs an instruction's memory access at its own cycle counter, which it advances in
# whole M-cycles around the access: the access is stamped 4 T-cycles before the start of the
# M-cycle it happens in on hardware (LDH (n),A: cycles += 4, then the write, in its M-cycle 3;
# pyboy/core/opcodes.py). GBX stamps it 1 T-cycle into that M-cycle (io_time,
# templates/hw/machine.h). A clock that an access started or reset in PyBoy at cycle X (DIV,
# an OAM DMA, a serial transfer, the RTC's second) therefore runs from X + 5 in GBX's
# timeline, which is where GBX itself would have started it.
ACCESS_LAG = 5
SERIAL_TRANSFER_CYCLES = 4096  # DMG: 8 bits at 8192 Hz (Pan Docs "Serial Data Transfer")
_PYBOY_SERIAL_CYCLES = 8 * 128  # PyBoy 2.8.1 clocks a byte in 1024 T-cycles (serial.py)
_PYBOY_DMA_DELAY = 12  # PyBoy: start_cycle = the FF46 write's cycle + 12 (mb.py transfer_DMA)
_GBX_DMA_DELAY = 8  # GBX: the DMA owns the bus from the write's io_time + 8 (templates/hw/bus.h)

_NEVER = 0x7FFFFFFFFFFFFFFF
_NEVER_PAST = -(1 << 62)
_RUN_ACTIVE, _RUN_HALTED, _RUN_STOPPED = 0, 1, 2

# GBX save-state blobs (runtime/include/gbx/runtime/states/save_state.h).
_HEADER = 56


def _split_blob(blob: bytes) -> tuple[bytes, list[tuple[str, bytes]]]:
    r = _Reader(blob)
    header = r.bytes(_HEADER)
    count = r.u32()
    records = []
    for _ in range(count):
        name = r.bytes(r.u8()).decode("ascii")
        records.append((name, r.bytes(r.u32())))
    return header, records


def _join_blob(header: bytes, records: list[tuple[str, bytes]]) -> bytes:
    payload = bytearray(len(records).to_bytes(4, "little"))
    for name, data in records:
        payload += (
            bytes([len(name)]) + name.encode("ascii") + len(data).to_bytes(4, "little") + data
        )
    return header[:48] + len(payload).to_bytes(8, "little") + bytes(payload)


def _le(value: int, size: int) -> bytes:
    return (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")


def _sound_registers(snd: dict[str, Any]) -> dict[int, int]:
    """FF10-FF3F as they read back (PyBoy's Sound.get), which is what GBX keeps in its I/O page."""
    c1, c2, c3, c4 = snd["ch1"], snd["ch2"], snd["ch3"], snd["ch4"]

    def duty(c):
        return (c["pending_wave_duty"] if c["duty_update_pending"] else c["wave_duty"]) << 6 | 0x3F

    def envelope(c):
        return (
            c["envelope_volume"] << 4 | c["envelope_direction"] << 3 | c["envelope_pace"]
        ) & 0xFF

    regs = {
        0xFF10: (c1["sweep_pace"] << 4 | c1["sweep_direction"] << 3 | c1["sweep_magnitude"] | 0x80)
        & 0xFF,
        0xFF11: duty(c1),
        0xFF12: envelope(c1),
        0xFF13: 0xFF,
        0xFF14: (c1["length_enable"] << 6 | 0xBF) & 0xFF,
        0xFF15: 0xFF,
        0xFF16: duty(c2),
        0xFF17: envelope(c2),
        0xFF18: 0xFF,
        0xFF19: (c2["length_enable"] << 6 | 0xBF) & 0xFF,
        0xFF1A: (c3["dacpow"] << 7 | 0x7F) & 0xFF,
        0xFF1B: 0xFF,
        0xFF1C: (c3["volreg"] << 5 | 0x9F) & 0xFF,
        0xFF1D: 0xFF,
        0xFF1E: (c3["length_enable"] << 6 | 0xBF) & 0xFF,
        0xFF1F: 0xFF,
        0xFF20: 0xFF,
        0xFF21: envelope(c4),
        0xFF22: (c4["clkpow"] << 4 | c4["regwid"] << 3 | c4["clkdiv"]) & 0xFF,
        0xFF23: (c4["length_enable"] << 6 | 0xBF) & 0xFF,
        0xFF24: snd["NR50"],
        0xFF25: (
            snd["noise_left"]
            | snd["wave_left"]
            | snd["tone_left"]
            | snd["sweep_left"]
            | snd["noise_right"]
            | snd["wave_right"]
            | snd["tone_right"]
            | snd["sweep_right"]
        )
        & 0xFF,
        0xFF26: (0x70 | snd["poweron"] | c1["enable"] | c2["enable"] | c3["enable"] | c4["enable"])
        & 0xFF,
    }
    for i in range(16):
        regs[0xFF30 + i] = snd["wavetable"][i]
    return regs


def _dma_source_byte(p: PyBoyState, rom_b: bytes, addr: int) -> int:
    """What an OAM DMA reads at ``addr`` in the machine the PyBoy state describes (GBX's
    bus_read_dma: the buses without the CPU's access windows; DMG: E000-FFFF reads WRAM)."""
    cart, kind = p.cart, p.cart["kind"]
    banks = max(1, len(rom_b) // 0x4000)
    if addr < 0x8000:
        if addr >= 0x4000:
            bank = cart["rombank_selected"]
        elif kind == "mbc1" and cart["memorymodel"] & 1:
            bank = (cart["bank2"] & 3) << 5
        else:
            bank = 0
        return rom_b[(bank % banks) * 0x4000 + (addr & 0x3FFF)]
    if addr < 0xA000:
        return p.lcd["VRAM"][addr - 0x8000]
    if addr < 0xC000:
        if kind != "none" and not cart["rambank_enabled"]:
            return 0xFF
        bank = cart["rambank_selected"]
        if kind == "mbc1":
            bank = cart["bank2"] & 3 if cart["memorymodel"] & 1 else 0
        if "rtc" in cart and 0x08 <= bank <= 0x0C:
            rt = cart["rtc"]
            dh = (rt["day_high"] & 1) | (rt["halt"] & 1) << 6 | (rt["day_carry"] & 1) << 7
            return (rt["seconds"], rt["minutes"], rt["hours"], rt["day_low"], dh)[bank - 8]
        ram = cart["ram"]
        if cart["ram_byte"] == 0 and kind != "mbc2":
            return 0xFF
        off = (bank * 0x2000 + (addr - 0xA000)) % len(ram)
        return ram[off]
    return p.wram[(addr - 0xC000) & 0x1FFF]


def import_state(state: bytes | str | os.PathLike, rom: str | bytes | os.PathLike) -> bytes:
    """A PyBoy 2.8.x ``.state`` (bytes or a path) of ``rom`` as a GBX save-state blob.

    The blob loads into any cpu/cuda env running the same ROM (``VecEnv.load_state``,
    ``set_reset_state``, ``gbx-run run --load-state``).
    """
    if not isinstance(state, (bytes, bytearray, memoryview)):
        with open(state, "rb") as f:
            state = f.read()
    spec, rom_b = _rom_bytes(rom)
    p = read_state(bytes(state), rom_b)
    header, records = _split_blob(bytes(_native.post_boot_state(spec, rom_b)))
    fields = dict(records)
    mem = bytearray(fields["mem"])
    cycles = p.cpu["cycles"]
    if cycles >= 1 << 62:
        raise PyBoyStateError(f"PyBoy's cycle counter {cycles} is out of GBX's range")
    out: dict[str, bytes] = {}

    def put(name: str, value: int) -> None:
        out[name] = _le(value, len(fields[name]))

    # CPU.
    c = p.cpu
    for reg in "ABCDE":
        put(reg.lower(), c[reg])
    put("f", c["F"] & 0xF0)
    put("h", c["HL"] >> 8)
    put("l", c["HL"] & 0xFF)
    put("sp", c["SP"])
    put("pc", c["PC"])
    put("ime", 1 if c["ime"] else 0)
    put("ei_delay", 1 if c["ime_delay"] else 0)
    put("run_state", _RUN_STOPPED if c["stopped"] else _RUN_HALTED if c["halted"] else _RUN_ACTIVE)
    put("halt_bug", 0)
    put("cycle_count", cycles)
    put("instr_count", 0)  # PyBoy does not count instructions

    # Frames: PyBoy's frame ends when the PPU starts line 0 (LCD off: every 70224 cycles of its
    # LCD clock). GBX's frame boundary is put at the same cycle, so `N more frames` stop both at
    # the same place.
    lcd = p.lcd
    ppu_pos = (lcd["clock"] + (cycles - lcd["last_cycles"])) % FRAME_CYCLES
    put("cycle_in_frame", ppu_pos)
    lcd_on = bool(lcd["LCDC"] & 0x80)
    # GBX treats line 0 of the frame right after the LCD was switched on specially (no OAM
    # scan); any other frame's epoch lies at least one frame back.
    first_line = lcd_on and lcd["first_frame"] and ppu_pos < LINE_DOTS
    put("ppu_epoch", cycles - ppu_pos - (0 if first_line else FRAME_CYCLES))

    # Timer: DIV's 16-bit counter and TIMA are as of t.last_cycles, on PyBoy's access timeline
    # (ACCESS_LAG); GBX catches up from there.
    t = p.timer
    synced = t["last_cycles"] + ACCESS_LAG
    put("timer_synced", synced)
    put("div_epoch", synced - t["DIV_counter"])
    if t["reload_state"] == 1:  # TIMA overflowed: reads 00 until the reload
        tima, reload_at = 0, synced + t["TIMA_counter"]
    elif t["reload_state"] == 2:  # the reload M-cycle
        tima, reload_at = t["TIMA"], synced - (4 - t["TIMA_counter"])
    else:
        tima, reload_at = t["TIMA"], _NEVER_PAST
    put("tima_reload", reload_at)

    # OAM DMA: PyBoy copies one byte per M-cycle from start_cycle on; GBX owns the bus for
    # 160 M-cycles from its own start and has copied the block when the DMA started, so the
    # bytes PyBoy had not moved yet are completed here from the source.
    d = p.dma
    if d["active"]:
        write = d["start_cycle"] - _PYBOY_DMA_DELAY + ACCESS_LAG
        put("dma_end", write + _GBX_DMA_DELAY + 640)
    else:
        put("dma_end", 0)

    # Serial: only an internally clocked transfer completes by itself. It keeps the start
    # PyBoy gave it and takes the DMG's 4096 T-cycles, not PyBoy's 1024.
    s = p.serial
    if s["transfer_enabled"] and s["internal_clock"]:
        started = s["last_cycles"] - (s["clock"] - (s["clock_target"] - _PYBOY_SERIAL_CYCLES))
        put("serial_event", started + ACCESS_LAG + SERIAL_TRANSFER_CYCLES)
    else:
        put("serial_event", _NEVER)

    # APU length counters, counted from now by GBX's own 256 Hz clock.
    put("apu_synced", cycles)
    lengths = [p.sound[ch]["lengthtimer"] & 0xFFFF for ch in ("ch1", "ch2", "ch3", "ch4")]
    # The words after the four counters (CH1 frequency and sweep, the frame sequencer's step
    # offset, CH3's frequency and wave position: templates/hw/io.h) are not mapped: 0, sweep
    # off, CH3 counted from cycle 0 at frequency 0 (docs/machine/apu.md).
    out["apu_length"] = b"".join(_le(v, 2) for v in lengths).ljust(len(fields["apu_length"]), b"\0")

    # Joypad: GBX holds buttons active-high (A B Select Start Right Left Up Down).
    j = p.joypad
    put("joyp_held", (~j["standard"] & 0x0F) | ((~j["directional"] & 0x0F) << 4))

    # Cartridge controller.
    cart = p.cart
    kind = cart["kind"]
    if kind == "mbc1":
        put("mbc_rom_bank", cart["bank1"] & 0x1F)
        put("mbc_ram_bank", cart["bank2"] & 0x03)
        put("mbc_mode", cart["memorymodel"] & 1)
    elif kind == "mbc2":
        put("mbc_rom_bank", cart["rombank_selected"] & 0x0F)
    elif kind == "mbc3":
        put("mbc_rom_bank", cart["rombank_selected"] & 0x7F)
        put("mbc_ram_bank", cart["rambank_selected"] & 0x0F)
    elif kind == "mbc5":
        put("mbc_rom_bank", cart["rombank_selected"] & 0xFF)
        put("mbc_rom_bank_hi", (cart["rombank_selected"] >> 8) & 1)
        put("mbc_ram_bank", cart["rambank_selected"] & 0x0F)
    if kind != "none":
        put("mbc_ram_enable", 1 if cart["rambank_enabled"] else 0)
    if "rtc" in cart:
        rt = cart["rtc"]
        dh = (rt["day_high"] & 1) | (rt["halt"] & 1) << 6 | (rt["day_carry"] & 1) << 7
        live = bytes([rt["seconds"], rt["minutes"], rt["hours"], rt["day_low"], dh])
        out["rtc_regs"] = live + live
        # PyBoy's fraction of the current second is as of its last access to the clock (it
        # saves no cycle for that): taken as of the save, PyBoy's own reading of it.
        put("rtc_second_start", cycles + ACCESS_LAG - rt["cycles"])

    # PPU flags the renderer keeps: bit 1, the window's WY matched this frame; bit 2 (the frame
    # in progress is the first after an LCD on, not shown) clear: PyBoy's state does not say.
    # Bits 3 and 4 set: the framebuffers are not imported, so the state holds no screen
    # (templates/hw/lcd.h GBX_LCD_FLAG_NO_SCREEN, GBX_LCD_FLAG_BACK_STALE).
    wy = 0x02 if p.wy_activated_frame else 0
    put("lcd_flags", (fields["lcd_flags"][0] & ~0x06) | wy | 0x18)

    # Memory.
    M = _native
    mem[M.MEM_VRAM : M.MEM_VRAM + 0x2000] = lcd["VRAM"]
    mem[M.MEM_WRAM : M.MEM_WRAM + 0x2000] = p.wram
    oam = bytearray(lcd["OAM"])
    if d["active"]:
        for i in range(d["index"], 0xA0):
            oam[i] = _dma_source_byte(p, rom_b, (d["source"] << 8) | i)
    mem[M.MEM_OAM : M.MEM_OAM + 0xA0] = oam
    mem[M.MEM_OAM + 0xA0 : M.MEM_OAM + 0x100] = p.unusable
    # GBX holds the header's RAM size (MBC2: 512) after the fixed regions, no padding (every
    # RAM size is a multiple of the 64-byte alignment).
    ram_len = min(len(mem) - M.MEM_CART_RAM, len(cart["ram"]))
    mem[M.MEM_CART_RAM : M.MEM_CART_RAM + ram_len] = cart["ram"][:ram_len]

    io = M.MEM_IO

    def reg(addr: int, value: int) -> None:
        mem[io + (addr - 0xFF00)] = value & 0xFF

    reg(0xFF00, 0xC0 | (p.io[0] & 0x30) | 0x0F)
    reg(0xFF01, s["SB"])
    reg(0xFF02, s["SC"] | 0x7E)
    reg(0xFF04, (t["DIV_counter"] >> 8))
    reg(0xFF05, tima)
    reg(0xFF06, t["TMA"])
    reg(0xFF07, t["TAC"] | 0xF8)
    reg(0xFF0F, 0xE0 | (c["IF"] & 0x1F))
    for addr, value in _sound_registers(p.sound).items():
        reg(addr, value)
    reg(0xFF40, lcd["LCDC"])
    reg(0xFF41, 0x80 | (lcd["STAT"] & 0x78))
    reg(0xFF42, lcd["SCY"])
    reg(0xFF43, lcd["SCX"])
    reg(0xFF44, lcd["LY"])
    reg(0xFF45, lcd["LYC"])
    reg(0xFF46, d["source"])
    reg(0xFF47, lcd["BGP"])
    reg(0xFF48, lcd["OBP0"])
    reg(0xFF49, lcd["OBP1"])
    reg(0xFF4A, lcd["WY"])
    reg(0xFF4B, lcd["WX"])
    mem[io + 0x80 : io + 0xFF] = p.hram
    reg(0xFFFF, c["IE"])
    out["mem"] = bytes(mem)

    for name, data in out.items():
        if len(data) != len(fields[name]):
            raise AssertionError(f"field {name}: {len(data)} bytes for {len(fields[name])}")
    return _join_blob(header, [(name, out.get(name, data)) for name, data in records])


def load_into(env, index: int, blob: bytes) -> None:
    """Loads a GBX save-state blob into env ``index`` of a :class:`gbx.VecEnv`."""
    env.load_state(index, blob)


def rom_sha256(rom: str | bytes | os.PathLike) -> str:
    """SHA-256 of a ROM spec's bytes (what a GBX blob is keyed by)."""
    return hashlib.sha256(_rom_bytes(rom)[1]).hexdigest()
