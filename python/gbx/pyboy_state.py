"""PyBoy 2.8.x ``.state`` files parsed (:func:`read_state`): the records PyBoy writes
(``PyBoy.save_state``: motherboard, CPU, OAM DMA, LCD, sound, renderer, RAM, timer, cartridge,
joypad, serial, SGB) for state format version 29, as a :class:`PyBoyState`. Used by
:mod:`gbx.pyboy_compat` (the importer); it needs no PyBoy."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import Any

from . import _native

PYBOY_STATE_VERSION = 29  # what PyBoy 2.8.x writes (pyboy/utils.py STATE_VERSION)

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
