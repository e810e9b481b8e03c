#!/usr/bin/env python3
"""Instruction-class micro-ROMs for scripts/bench-classes.sh: what one class of SM83 code costs
GBX and PyBoy, apart from the games' mix.

Each ROM runs one loop forever: interrupts off, LCD on (the post-boot state), no input read,
so every frame runs the same instructions. Hand-assembled here (the opcodes are in the
comments, Pan Docs "CPU Instruction Set"); the loop body is unrolled UNROLL times so the
closing JP is a small share.

    class_roms.py build DIR        writes DIR/<class>.gb, prints "class instrs cycles" a loop
    class_roms.py pyboy ROM SECS   PyBoy 2.8.1 headless, tick(24, False) for SECS seconds:
                                   prints frames/s (the venv: artifacts/.venv-pyboy)

Classes (per loop unit):
    alu        ADD A,B; XOR C; INC B; DEC C; LD B,A; LD A,C; CP D; AND E
    alu_romx   the same from bank 1 (0x4000-0x7FFF), after one MBC write
    copy       LD A,(HL+); LD (DE),A; INC DE in WRAM (HL, DE reset each loop)
    vram_copy  LD A,(HL+); LD (DE),A; INC E from WRAM to VRAM, all through the frame
               (writes in mode 3 are refused: the PPU's access checks are part of it)
    call_ret   CALL to a RET
    push_pop   PUSH BC; POP BC; PUSH HL; POP HL
    cb         BIT 0,(HL); SET 1,(HL); RES 1,(HL); BIT 7,A; SWAP A; SRL A
    jp_hl      LD HL,next; JP HL
    ldh_io     LDH A,(DIV); LDH A,(LY); LDH A,(FF80); LDH (FF81),A
    mbc_write  LD A,1; LD (2000),A; LD A,2; LD (2000),A (MBC3 ROM bank select)
    farcall    Pokemon Red's home-bank trampoline (LD B,bank; LD HL,fn; CALL Bankswitch:
               save the bank from HRAM, write the new one, push a return, JP HL; the banked
               function; then write the old bank back and RET)
"""

import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, "artifacts", ".venv-pyboy")
PYBOY = "pyboy==2.8.1"
UNROLL = 32
LOGO = bytes.fromhex(
    "CEED6666CC0D000B03730083000C000D0008111F8889000EDCCC6EE6DDDDD999BBBB67636E0EECCCDDDC999FBBB9333E"
)


def w16(v):
    return [v & 0xFF, v >> 8]


def rom_image(code, banks=()):
    """A 64 KiB MBC3 ROM: `code` at 0x0150, (bank, bytes) placed at 0x4000 of that bank."""
    rom = bytearray([0xFF]) * 0x10000
    rom[0x100:0x104] = bytes([0x00, 0xC3, 0x50, 0x01])  # NOP; JP 0150
    rom[0x104:0x134] = LOGO
    rom[0x134:0x13F] = b"GBXCLASS\0\0\0"
    rom[0x147], rom[0x148], rom[0x149] = 0x13, 0x01, 0x02  # MBC3+RAM+BATTERY, 64 KiB, 8 KiB
    rom[0x150 : 0x150 + len(code)] = bytes(code)
    for bank, data in banks:
        rom[bank * 0x4000 : bank * 0x4000 + len(data)] = bytes(data)
    x = 0
    for b in rom[0x134:0x14D]:
        x = (x - b - 1) & 0xFF
    rom[0x14D] = x
    s = (sum(rom) - rom[0x14E] - rom[0x14F]) & 0xFFFF
    rom[0x14E], rom[0x14F] = s >> 8, s & 0xFF
    return rom


PRE = [0xF3, 0x31] + w16(0xDFF0)  # DI; LD SP,DFF0


def unrolled(setup, unit, unit_cycles):
    """PRE, setup, then L: unit x UNROLL; JP L. Returns code and the loop's cycles."""
    code = PRE + setup
    top = 0x150 + len(code)
    return code + unit * UNROLL + [0xC3] + w16(top), unit_cycles * UNROLL + 16


def classes():
    out = {}
    alu = [0x80, 0xA9, 0x04, 0x0D, 0x47, 0x79, 0xBA, 0xA3]
    code, cyc = unrolled([], alu, 32)
    out["alu"] = (code, (), 8 * UNROLL + 1, cyc)
    # LD A,1; LD (2000),A; JP 4000 -> bank 1: the alu loop, JP 4000
    out["alu_romx"] = (
        PRE + [0x3E, 0x01, 0xEA, 0x00, 0x20, 0xC3, 0x00, 0x40],
        ((1, alu * UNROLL + [0xC3, 0x00, 0x40]),),
        8 * UNROLL + 1,
        32 * UNROLL + 16,
    )
    # L: LD HL,C000; LD DE,C800; (LD A,(HL+); LD (DE),A; INC DE) x U; JP L
    top = 0x150 + len(PRE)
    body = [0x21] + w16(0xC000) + [0x11] + w16(0xC800) + [0x2A, 0x12, 0x13] * UNROLL
    out["copy"] = (PRE + body + [0xC3] + w16(top), (), 3 + 3 * UNROLL, 24 + 24 * UNROLL + 16)
    # the same to VRAM (9800), INC E
    body = [0x21] + w16(0xC000) + [0x11] + w16(0x9800) + [0x2A, 0x12, 0x1C] * UNROLL
    out["vram_copy"] = (PRE + body + [0xC3] + w16(top), (), 3 + 3 * UNROLL, 24 + 20 * UNROLL + 16)
    # (CALL 0200) x U; JP L; ... 0200: RET
    code = PRE + ([0xCD] + w16(0x0200)) * UNROLL + [0xC3] + w16(top)
    code += [0x00] * (0x0200 - 0x150 - len(code)) + [0xC9]
    out["call_ret"] = (code, (), 2 * UNROLL + 1, 40 * UNROLL + 16)
    code, cyc = unrolled([], [0xC5, 0xC1, 0xE5, 0xE1], 56)
    out["push_pop"] = (code, (), 4 * UNROLL + 1, cyc)
    # LD HL,C000; L: (BIT 0,(HL); SET 1,(HL); RES 1,(HL); BIT 7,A; SWAP A; SRL A) x U
    cb = [0xCB, 0x46, 0xCB, 0xCE, 0xCB, 0x8E, 0xCB, 0x7F, 0xCB, 0x37, 0xCB, 0x3F]
    code, cyc = unrolled([0x21] + w16(0xC000), cb, 68)
    out["cb"] = (code, (), 6 * UNROLL + 1, cyc)
    # (LD HL,next; JP HL) x U, each jumping to the next pair
    body, pc = [], top
    for _ in range(UNROLL):
        body += [0x21] + w16(pc + 4) + [0xE9]
        pc += 4
    out["jp_hl"] = (PRE + body + [0xC3] + w16(top), (), 2 * UNROLL + 1, 16 * UNROLL + 16)
    code, cyc = unrolled([], [0xF0, 0x04, 0xF0, 0x44, 0xF0, 0x80, 0xE0, 0x81], 48)
    out["ldh_io"] = (code, (), 4 * UNROLL + 1, cyc)
    code, cyc = unrolled([], [0x3E, 0x01, 0xEA, 0x00, 0x20, 0x3E, 0x02, 0xEA, 0x00, 0x20], 48)
    out["mbc_write"] = (code, (), 4 * UNROLL + 1, cyc)
    # Bankswitch at 0300 (HRAM B8 holds the loaded bank):
    #   LDH A,(B8); PUSH AF; LD A,B; LDH (B8),A; LD (2000),A; LD BC,0311; PUSH BC; JP HL
    #   0311: POP BC; LD A,B; LDH (B8),A; LD (2000),A; RET
    # bank 2, 4000: ADD A,B; XOR C; INC D; RET
    bs = [0xF0, 0xB8, 0xF5, 0x78, 0xE0, 0xB8, 0xEA, 0x00, 0x20, 0x01] + w16(0x0311) + [0xC5, 0xE9]
    bs += [0x00] * (0x11 - len(bs)) + [0xC1, 0x78, 0xE0, 0xB8, 0xEA, 0x00, 0x20, 0xC9]
    setup = PRE + [0x3E, 0x01, 0xE0, 0xB8]  # LD A,1; LDH (B8),A
    top = 0x150 + len(setup)
    unit = [0x06, 0x02, 0x21] + w16(0x4000) + [0xCD] + w16(0x0300)  # LD B,2; LD HL,4000; CALL
    code = setup + unit * 8 + [0xC3] + w16(top)
    code += [0x00] * (0x0300 - 0x150 - len(code)) + bs
    per_call = 3 + 8 + 4 + 5
    call_cycles = 8 + 12 + 24 + 92 + 28 + 60
    out["farcall"] = (
        code,
        ((2, [0x80, 0xA9, 0x14, 0xC9]),),
        8 * per_call + 1,
        8 * call_cycles + 16,
    )
    return out


def build(directory):
    os.makedirs(directory, exist_ok=True)
    for name, (code, banks, instrs, cycles) in classes().items():
        with open(os.path.join(directory, name + ".gb"), "wb") as f:
            f.write(rom_image(code, banks))
        print(name, instrs, cycles)


def pyboy_rate(rom, seconds):
    py = os.path.join(VENV, "bin", "python")
    if os.path.realpath(sys.prefix) != os.path.realpath(VENV):
        if not os.path.exists(py):
            subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
        if subprocess.run([py, "-c", "import pyboy"], capture_output=True).returncode != 0:
            subprocess.run([py, "-m", "pip", "install", "--quiet", PYBOY], check=True)
        os.execv(py, [py, os.path.abspath(__file__), "pyboy", rom, str(seconds)])
    from pyboy import PyBoy

    pb = PyBoy(rom, window="null", sound_emulated=False, log_level="ERROR")
    pb.set_emulation_speed(0)
    pb.tick(300, False)  # the boot ROM, then a warm-up
    frames, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        pb.tick(24, False)
        frames += 24
    print(f"{frames / (time.perf_counter() - t0):.0f}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "build":
        build(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "pyboy":
        pyboy_rate(sys.argv[2], float(sys.argv[3]))
    else:
        sys.exit("usage: class_roms.py build DIR | pyboy ROM SECONDS")
