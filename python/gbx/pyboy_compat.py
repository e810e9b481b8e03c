"""Import PyBoy 2.x ``.state`` files as GBX save states.

    import gbx, gbx.pyboy_compat as pc
    blob = pc.import_state("game.state", rom="game.gb")      # GBX save-state bytes
    env = gbx.VecEnv("game.gb", num_envs=64)
    env.reset(seed=0)
    pc.load_into(env, 0, blob)                               # or env.set_reset_state(blob)

PyBoy writes its machine as one stream of component records (``PyBoy.save_state``:
motherboard, CPU, OAM DMA, LCD, sound, renderer, RAM, timer, cartridge, joypad, serial,
SGB). :func:`read_state` parses that stream for the format PyBoy 2.8.x writes (state format
version 29) and :func:`import_state` maps it onto the GBX state fields
(``runtime/include/gbx/runtime/state_fields.h``) over the DMG post-boot state of the same ROM.
The GBX cycle counter takes PyBoy's (``cpu.cycles``); every lazily caught-up clock (timer,
PPU, serial, OAM DMA, RTC) is re-expressed as a cycle epoch from the place PyBoy had caught
it up to, so the lazy catch-up of both emulators continues from the same point; a clock that
a memory access started or reset is moved by ACCESS_LAG, the difference between PyBoy's and
GBX's stamp of an access.

Mapped: CPU registers, IME and the EI delay, HALT/STOP, IE/IF; WRAM, HRAM, VRAM, OAM (and the
unusable FEA0-FEFF bytes), cartridge RAM; DIV's 16-bit system counter, TIMA/TMA/TAC and the
TIMA overflow/reload window; LCDC, STAT interrupt enables, SCY/SCX, LYC, WY/WX, palettes, the
PPU's position in its frame (and the first line after LCD-on); OAM DMA in progress; SB/SC and
an internally clocked transfer in progress; the sound registers as they read back, wave RAM
and the four length counters; joypad select bits and held buttons; MBC1/MBC2/MBC3 (with its
RTC registers)/MBC5 bank registers, RAM enable and MBC1's mode; the window's WY-matched flag.

Not mapped (documented in README "PyBoy save states"): the framebuffer (GBX shows shade 0
until the first VBlank after loading), the window's internal line counter (0), the APU's
frame sequencer phase, envelopes, sweep and wave position (GBX emulates no sound), PyBoy's
``interrupt_queued``, the serial clock's phase within a bit, the MBC3 latched clock copy
(taken equal to the live one) and latch register, SGB state, CGB state (CGB states are
refused). PyBoy 2.8.1 itself loses the MBC5 ROM bank's bit 8 (it saves the bank in one byte)
and shifts a serial byte in 1024 T-cycles (an imported transfer takes the DMG's 4096). States of other PyBoy format versions are refused: load them in PyBoy 2.8.x and
save them again.
"""

from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass, field
from typing import Any

from . import _native

PYBOY_STATE_VERSION = 29  # what PyBoy 2.8.x writes (pyboy/utils.py STATE_VERSION)
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

# Cartridge type byte -> (controller, has RTC, MBC5 rumble), as PyBoy's CARTRIDGE_TABLE.
_CARTS: dict[int, tuple[str, bool, bool]] = {
    0x00: ("none", False, False),
    0x08: ("none", False, False),
    0x09: ("none", False, False),
    0x01: ("mbc1", False, False),
    0x02: ("mbc1", False, False),
    0x03: ("mbc1", False, False),
    0x05: ("mbc2", False, False),
    0x06: ("mbc2", False, False),
    0x0F: ("mbc3", True, False),
    0x10: ("mbc3", True, False),
    0x11: ("mbc3", False, False),
    0x12: ("mbc3", False, False),
    0x13: ("mbc3", False, False),
    0x19: ("mbc5", False, False),
    0x1A: ("mbc5", False, False),
    0x1B: ("mbc5", False, False),
    0x1C: ("mbc5", False, True),
    0x1D: ("mbc5", False, True),
    0x1E: ("mbc5", False, True),
}
# PyBoy keeps this many 8 KiB RAM banks per header RAM-size byte (it allocates one even for
# cartridges without RAM).
_PYBOY_RAM_BANKS = {0x00: 1, 0x01: 1, 0x02: 1, 0x03: 4, 0x04: 16, 0x05: 8}


class PyBoyStateError(ValueError):
    """A PyBoy state this importer cannot read (truncated, another format version, CGB)."""


class _Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def bytes(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise PyBoyStateError(
                f"PyBoy state is truncated: needs {self.pos + n} bytes, has {len(self.data)}"
            )
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b

    def u8(self) -> int:
        return self.bytes(1)[0]

    def u16(self) -> int:
        return int.from_bytes(self.bytes(2), "little")

    def u32(self) -> int:
        return int.from_bytes(self.bytes(4), "little")

    def u64(self) -> int:
        return int.from_bytes(self.bytes(8), "little")

    def f64(self) -> float:
        return struct.unpack("<d", self.bytes(8))[0]

    def fields(self, spec: str) -> dict[str, int]:
        """'name:8 name2:64 ...' (bits; default 8) -> dict, in order."""
        out = {}
        for item in spec.split():
            name, _, bits = item.partition(":")
            out[name] = {"8": self.u8, "16": self.u16, "32": self.u32, "64": self.u64}[
                bits or "8"
            ]()
        return out


@dataclass
class PyBoyState:
    """The parts of a PyBoy state the importer uses, by PyBoy component."""

    version: int
    cpu: dict[str, int]
    dma: dict[str, int]
    lcd: dict[str, Any]
    sound: dict[str, Any]
    wy_activated_frame: int
    wram: bytes
    unusable: bytes  # FEA0-FEFF
    io: bytes  # FF00-FF4B as PyBoy stores them
    hram: bytes  # FF80-FFFE
    timer: dict[str, int]
    cart: dict[str, Any]
    joypad: dict[str, int]
    serial: dict[str, int]
    extra: dict[str, Any] = field(default_factory=dict)


_TONE = (
    "wave_duty init_length_timer envelope_volume envelope_direction envelope_pace "
    "sound_period:16 length_enable enable lengthtimer:64 envelopetimer:64 periodtimer:64 "
    "period:64 waveframe:64 volume:64 sample_suppressed pending_wave_duty duty_update_pending"
)
_SWEEP = (
    "sweep_pace sweep_direction sweep_magnitude sweeptimer:64 sweepchecktimer:64 "
    "sweepcalctimer:64 sweep_restart_hold:64 sweep_negate_used sweepenable shadow:64"
)
_WAVE = (
    "dacpow init_length_timer volreg sound_period:16 length_enable enable lengthtimer:64 "
    "periodtimer:64 period:64 waveframe:64 sample_suppressed volumeshift:64 wave_access "
    "restart_pending sampleframe:64"
)
_NOISE = (
    "init_length_timer envelope_volume envelope_direction envelope_pace clkpow regwid clkdiv "
    "length_enable enable lengthtimer:64 periodtimer:64 envelopetimer:64 period:64 "
    "shiftregister:64 lfsrfeed:64 volume:64 counter:64 counter_countdown:64 alignment:64 "
    "counter_running"
)
_SGB_BYTES = 7 + 4 + 0x2000 + 0x800 + 0x80


def _rom_bytes(rom: str | bytes | os.PathLike) -> tuple[str, bytes]:
    if isinstance(rom, (bytes, bytearray, memoryview)):
        return "bytes", bytes(rom)
    spec = os.fspath(rom)
    return spec, bytes(_native.rom_bytes(spec))


def read_state(data: bytes, rom: str | bytes | os.PathLike) -> PyBoyState:
    """Parses a PyBoy 2.8.x state (bytes) of ``rom`` (path, ``builtin:NAME`` or bytes).

    The ROM is needed because PyBoy's cartridge record is shaped by the cartridge header.
    """
    _, rom_b = _rom_bytes(rom)
    if len(rom_b) < 0x150:
        raise PyBoyStateError(f"ROM is {len(rom_b)} bytes, shorter than a cartridge header")
    r = _Reader(bytes(data))
    version = r.u8()
    if version != PYBOY_STATE_VERSION:
        raise PyBoyStateError(
            f"PyBoy state format version {version} is not supported (this importer reads "
            f"version {PYBOY_STATE_VERSION}, PyBoy 2.8.x); load the state in PyBoy 2.8.x and "
            "save it again"
        )
    mb = r.fields("bootrom_enabled key0 key1 double_speed cgb")
    if mb["cgb"]:
        raise PyBoyStateError("PyBoy state is of a Game Boy Color session; GBX emulates the DMG")
    if mb["bootrom_enabled"]:
        raise PyBoyStateError(
            "PyBoy state was saved while the boot ROM was running; GBX starts after it"
        )
    cpu = r.fields(
        "A F B C D E HL:16 SP:16 PC:16 ime ime_delay halted stopped IE queued IF cycles:64"
    )
    dma = r.fields("active reading source index start_cycle:64")
    lcd: dict[str, Any] = {"VRAM": r.bytes(0x2000), "OAM": r.bytes(0xA0)}
    lcd.update(r.fields("LCDC BGP OBP0 OBP1 STAT LY LYC SCY SCX WY WX object_priority_mode"))
    lcd["scanline"] = r.bytes(144 * 5)
    lcd.update(
        r.fields(
            "cgb downgraded speed_shift frame_done first_frame reset last_cycles:64 clock:64 "
            "clock_target:64 next_stat_mode stat_transition"
        )
    )
    snd: dict[str, Any] = r.fields("audiobuffer_head:64 samples_per_frame:64")
    r.f64()  # cycles per sample
    r.bytes((snd["samples_per_frame"] + 1) * 2)  # the audio buffer
    snd["speed_shift"] = r.u8()
    r.f64(), r.f64()  # sample and 512 Hz targets
    snd.update(
        r.fields(
            "cycles_to_interrupt:64 cycles:64 last_cycles:64 div_apu_counter:64 div_apu:64 "
            "poweron_after_div_write poweron disable_sampling noise_left wave_left tone_left "
            "sweep_left noise_right wave_right tone_right sweep_right NR50"
        )
    )
    snd["ch1"] = r.fields(_TONE)
    snd["ch1"].update(r.fields(_SWEEP))
    snd["ch2"] = r.fields(_TONE)
    snd["wavetable"] = r.bytes(16)
    snd["ch3"] = r.fields(_WAVE)
    snd["ch4"] = r.fields(_NOISE)
    r.bytes(144 * 160 * 5)  # the renderer's RGBA screen and attributes (not mapped)
    wy_activated_frame = r.u8()
    wram, unusable, io, hram = r.bytes(0x2000), r.bytes(0x60), r.bytes(0x4C), r.bytes(0x7F)
    r.u8()  # wram_select (CGB)
    timer = r.fields(
        "DIV TIMA DIV_counter:16 TIMA_counter:16 TMA TAC reload_state last_cycles:64 cycles_to_interrupt:64"
    )

    cart_type, ram_byte = rom_b[0x147], rom_b[0x149]
    if cart_type not in _CARTS:
        raise PyBoyStateError(f"cartridge type 0x{cart_type:02X} is not one PyBoy loads")
    kind, has_rtc, rumble = _CARTS[cart_type]
    cart: dict[str, Any] = {"kind": kind, "type": cart_type, "ram_byte": ram_byte}
    # What is left is shaped by the cartridge: check its length before reading, so a state of
    # another kind of cartridge is named as such rather than as truncated.
    ram_banks = _PYBOY_RAM_BANKS.get(ram_byte, 1)
    cart_bytes = 4 + ram_banks * 0x2000 + (33 if has_rtc else 0) + (2 if kind == "mbc1" else 0)
    if kind == "mbc5":
        at = r.pos + 4 + ram_banks * 0x2000
        cart_bytes += 1 + (1 if at < len(r.data) and r.data[at] else 0)
    want, rest = cart_bytes + 2 + 36 + _SGB_BYTES, len(r.data) - r.pos
    if rest != want:
        raise PyBoyStateError(
            f"PyBoy state does not parse as the state of this ROM's cartridge ({kind}, "
            f"{ram_banks} x 8 KiB RAM in PyBoy): {rest} bytes follow the timer record, expected {want}"
        )
    cart.update(r.fields("rombank_selected rambank_selected rambank_enabled memorymodel"))
    cart["ram"] = r.bytes(ram_banks * 0x2000)
    if has_rtc:
        r.f64()  # host time zero
        cart["rtc"] = r.fields(
            "halt0 carry0 seconds minutes hours day_low day_high halt day_carry cycles:64"
        )
        r.f64()  # host time at save (PyBoy advances its clock by host time; GBX does not)
    if kind == "mbc1":
        cart.update(r.fields("bank1 bank2"))
    elif kind == "mbc5":
        if r.u8():
            r.u8()  # rumble motor
    joypad = r.fields("directional standard")
    serial = r.fields(
        "SB SC transfer_enabled internal_clock last_cycles:64 cycles_to_interrupt:64 clock:64 clock_target:64"
    )
    del rumble
    return PyBoyState(
        version,
        cpu,
        dma,
        lcd,
        snd,
        wy_activated_frame,
        wram,
        unusable,
        io,
        hram,
        timer,
        cart,
        joypad,
        serial,
    )


# -- GBX save-state blobs (runtime/include/gbx/runtime/save_state.h) ---------------------------

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
    put("lcd_flags", (fields["lcd_flags"][0] & ~0x06) | (0x02 if p.wy_activated_frame else 0))

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


# -- Side by side with PyBoy (needs the pyboy package: pip install gbx[pyboy]) ---------------

_REGS = ("a", "f", "b", "c", "d", "e", "h", "l", "sp", "pc")
_REGIONS = {
    "WRAM": (0xC000, 0x2000),
    "HRAM": (0xFF80, 0x7F),
    "VRAM": (0x8000, 0x2000),
    "OAM": (0xFE00, 0xA0),
}


def pyboy_snapshot(p: PyBoyState) -> dict[str, Any]:
    """Registers and WRAM/HRAM/VRAM/OAM of a parsed PyBoy state."""
    c = p.cpu
    regs = {
        "a": c["A"],
        "f": c["F"] & 0xF0,
        "b": c["B"],
        "c": c["C"],
        "d": c["D"],
        "e": c["E"],
        "h": c["HL"] >> 8,
        "l": c["HL"] & 0xFF,
        "sp": c["SP"],
        "pc": c["PC"],
    }
    mem = {"WRAM": p.wram, "HRAM": p.hram, "VRAM": p.lcd["VRAM"], "OAM": p.lcd["OAM"]}
    return {"regs": regs, "mem": mem, "cycles": c["cycles"]}


def gbx_snapshot(blob: bytes) -> dict[str, Any]:
    """The same view of a GBX save-state blob (raw memory: no PPU access blocking)."""
    _, records = _split_blob(blob)
    f = dict(records)
    regs = {r: int.from_bytes(f[r], "little") for r in _REGS}
    m, M = f["mem"], _native
    mem = {
        "WRAM": m[M.MEM_WRAM : M.MEM_WRAM + 0x2000],
        "HRAM": m[M.MEM_IO + 0x80 : M.MEM_IO + 0xFF],
        "VRAM": m[M.MEM_VRAM : M.MEM_VRAM + 0x2000],
        "OAM": m[M.MEM_OAM : M.MEM_OAM + 0xA0],
    }
    return {
        "regs": regs,
        "mem": mem,
        "cycles": int.from_bytes(f["cycle_count"], "little", signed=True),
    }


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """What differs between two snapshots, one short item per register or region."""
    out = [
        f"{r}={a['regs'][r]:#x}/{b['regs'][r]:#x}" for r in _REGS if a["regs"][r] != b["regs"][r]
    ]
    for name, (base, _) in _REGIONS.items():
        x, y = a["mem"][name], b["mem"][name]
        if x != y:
            i = next(k for k in range(len(x)) if x[k] != y[k])
            n = sum(1 for k in range(len(x)) if x[k] != y[k])
            out.append(f"{name}: {n} bytes, first {base + i:#06x}={x[i]:#04x}/{y[i]:#04x}")
    return out


def _pyboy_state(pb) -> bytes:
    import io

    f = io.BytesIO()
    pb.save_state(f)
    return f.getvalue()


def compare_with_pyboy(
    rom: str | bytes | os.PathLike, import_frame: int = 120, frames: int = 300
) -> dict[str, Any]:
    """Runs ``rom`` in PyBoy (headless) for ``import_frame`` frames, imports its state into a
    one-env GBX VecEnv, then steps both one frame at a time for ``frames`` frames.

    Returns ``import_diff`` (differences at the import point: must be empty),
    ``first_divergence`` (the first frame after the import at which registers or
    WRAM/HRAM/VRAM/OAM differ, or None) and ``diff`` (what differed there).
    """
    import tempfile

    import numpy as np
    from pyboy import PyBoy

    from .vec_env import VecEnv

    spec, rom_b = _rom_bytes(rom)
    name = spec.split(":", 1)[1] if spec.startswith("builtin:") else os.path.basename(spec)
    with tempfile.NamedTemporaryFile(suffix=".gb") as f:  # PyBoy opens ROMs by path
        f.write(rom_b)
        f.flush()
        pb = PyBoy(f.name, window="null", cgb=False, log_level="ERROR", sound_emulated=False)
    try:
        pb.tick(import_frame, False)
        state = _pyboy_state(pb)
        blob = import_state(state, rom_b)
        env = VecEnv(rom_b, num_envs=1, frames_per_step=1, release_after_frames=1)
        env.reset(seed=0)
        load_into(env, 0, blob)
        save = lambda: bytes(env.save_state(0))  # noqa: E731
        result = {
            "rom": name,
            "import_frame": import_frame,
            "frames": frames,
            "import_diff": differences(
                pyboy_snapshot(read_state(state, rom_b)), gbx_snapshot(save())
            ),
            "first_divergence": None,
            "diff": [],
        }
        noop = np.zeros(1, dtype=np.int32)
        for k in range(1, frames + 1):
            pb.tick(1, False)
            env.backend.step(noop)
            a = pyboy_snapshot(read_state(_pyboy_state(pb), rom_b))
            b = gbx_snapshot(save())
            d = differences(a, b)
            if d:
                result["first_divergence"] = k
                result["diff"] = d
                result["cycles"] = (a["cycles"], b["cycles"])
                break
        env.close()
        return result
    finally:
        pb.stop(save=False)


def main(argv: list[str] | None = None) -> int:
    """``python -m gbx.pyboy_compat ROM... [--import-frame N] [--frames M]`` (ROM: .gb or builtin:NAME)"""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m gbx.pyboy_compat", description=main.__doc__)
    ap.add_argument("roms", nargs="+")
    ap.add_argument("--import-frame", type=int, default=120)
    ap.add_argument("--frames", type=int, default=300)
    a = ap.parse_args(argv)
    bad = 0
    print(f"{'ROM':<20} {'import point':<14} first divergence (of {a.frames} frames)")
    for rom in a.roms:
        r = compare_with_pyboy(rom, a.import_frame, a.frames)
        at = "equal" if not r["import_diff"] else "DIFFERS: " + "; ".join(r["import_diff"])
        bad += bool(r["import_diff"])
        div = (
            "none"
            if r["first_divergence"] is None
            else f"frame {r['first_divergence']}: " + "; ".join(r["diff"][:4])
        )
        print(f"{r['rom']:<20} {at:<14} {div}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
