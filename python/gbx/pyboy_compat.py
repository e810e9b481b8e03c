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
(``runtime/include/gbx/runtime/states/state_fields.h``) over the DMG post-boot state of the
same ROM. The GBX cycle counter takes PyBoy's (``cpu.cycles``); every lazily caught-up clock (timer,
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
and shifts a serial byte in 1024 T-cycles (an imported transfer takes the DMG's 4096). States of other PyBoy format
versions are refused: load them in PyBoy 2.8.x and save them again.

Modules: :mod:`gbx.pyboy_state` (the parser), :mod:`gbx.pyboy_import` (the mapping),
:mod:`gbx.pyboy_compare` (the live comparison with PyBoy); their public names are importable
from here.
"""

from __future__ import annotations

from . import _native  # noqa: F401 (the memory layout, as the tests read it from here)
from .pyboy_compare import compare_with_pyboy, differences, gbx_snapshot, main, pyboy_snapshot
from .pyboy_import import (
    ACCESS_LAG,
    FRAME_CYCLES,
    LINE_DOTS,
    SERIAL_TRANSFER_CYCLES,
    _split_blob,  # noqa: F401 (a GBX blob's records, for the tests and scripts)
    import_state,
    load_into,
    rom_sha256,
)
from .pyboy_state import PYBOY_STATE_VERSION, PyBoyState, PyBoyStateError, read_state

__all__ = [
    "ACCESS_LAG",
    "FRAME_CYCLES",
    "LINE_DOTS",
    "PYBOY_STATE_VERSION",
    "SERIAL_TRANSFER_CYCLES",
    "PyBoyState",
    "PyBoyStateError",
    "compare_with_pyboy",
    "differences",
    "gbx_snapshot",
    "import_state",
    "load_into",
    "main",
    "pyboy_snapshot",
    "read_state",
    "rom_sha256",
]
if __name__ == "__main__":
    raise SystemExit(main())
