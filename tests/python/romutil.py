"""Tiny test ROMs assembled by hand (SM83 machine code; opcodes from Pan Docs' table)."""

# 0x0150: C002 = 0x42; then once per frame (at LY 144): C000 += 1, C001 -= 1.
COUNTER_PROGRAM = bytes([
    0x3E, 0x42,        # 0150 LD A,0x42
    0xEA, 0x02, 0xC0,  # 0152 LD (0xC002),A
    0xF0, 0x44,        # 0155 LDH A,(LY)          wait for LY == 144
    0xFE, 0x90,        # 0157 CP 144
    0x20, 0xFA,        # 0159 JR NZ,0x0155
    0x21, 0x00, 0xC0,  # 015B LD HL,0xC000
    0x34,              # 015E INC (HL)
    0x2C,              # 015F INC L
    0x35,              # 0160 DEC (HL)
    0xF0, 0x44,        # 0161 LDH A,(LY)          wait for LY != 144
    0xFE, 0x90,        # 0163 CP 144
    0x28, 0xFA,        # 0165 JR Z,0x0161
    0x18, 0xEC,        # 0167 JR 0x0155
])


def make_cart(program: bytes, cart_type: int = 0x00, rom_size_code: int = 0x00,
              ram_size_code: int = 0x00, title: bytes = b"GBXTEST") -> bytes:
    """A cartridge of 32 KiB << rom_size_code: entry 0x0100 jumps to `program` at 0x0150; the
    header's type and ROM/RAM size bytes as given (Pan Docs "The Cartridge Header")."""
    rom = bytearray(0x8000 << rom_size_code)
    rom[0x100:0x104] = bytes([0x00, 0xC3, 0x50, 0x01])  # NOP; JP 0x0150
    rom[0x134:0x134 + len(title)] = title
    rom[0x147] = cart_type
    rom[0x148] = rom_size_code
    rom[0x149] = ram_size_code
    x = 0
    for b in rom[0x134:0x14D]:
        x = (x - b - 1) & 0xFF
    rom[0x14D] = x
    rom[0x150:0x150 + len(program)] = program
    return bytes(rom)


def make_rom(program: bytes, title: bytes = b"GBXTEST") -> bytes:
    """A 32 KiB ROM-only cartridge: entry 0x0100 jumps to `program` at 0x0150."""
    return make_cart(program, title=title)


COUNTER_ROM = make_rom(COUNTER_PROGRAM)
