"""Tiny test ROMs assembled by hand (SM83 machine code; opcodes from Pan Docs' table)."""

# 0x0150: C002 = 0x42; then once per frame (at LY 144): C000 += 1, C001 -= 1.
COUNTER_PROGRAM = bytes(
    [
        0x3E,
        0x42,  # 0150 LD A,0x42
        0xEA,
        0x02,
        0xC0,  # 0152 LD (0xC002),A
        0xF0,
        0x44,  # 0155 LDH A,(LY)          wait for LY == 144
        0xFE,
        0x90,  # 0157 CP 144
        0x20,
        0xFA,  # 0159 JR NZ,0x0155
        0x21,
        0x00,
        0xC0,  # 015B LD HL,0xC000
        0x34,  # 015E INC (HL)
        0x2C,  # 015F INC L
        0x35,  # 0160 DEC (HL)
        0xF0,
        0x44,  # 0161 LDH A,(LY)          wait for LY != 144
        0xFE,
        0x90,  # 0163 CP 144
        0x28,
        0xFA,  # 0165 JR Z,0x0161
        0x18,
        0xEC,  # 0167 JR 0x0155
    ]
)


def make_cart(
    program: bytes,
    cart_type: int = 0x00,
    rom_size_code: int = 0x00,
    ram_size_code: int = 0x00,
    title: bytes = b"GBXTEST",
) -> bytes:
    """A cartridge of 32 KiB << rom_size_code: entry 0x0100 jumps to `program` at 0x0150; the
    header's type and ROM/RAM size bytes as given (Pan Docs "The Cartridge Header")."""
    rom = bytearray(0x8000 << rom_size_code)
    rom[0x100:0x104] = bytes([0x00, 0xC3, 0x50, 0x01])  # NOP; JP 0x0150
    rom[0x134 : 0x134 + len(title)] = title
    rom[0x147] = cart_type
    rom[0x148] = rom_size_code
    rom[0x149] = ram_size_code
    x = 0
    for b in rom[0x134:0x14D]:
        x = (x - b - 1) & 0xFF
    rom[0x14D] = x
    rom[0x150 : 0x150 + len(program)] = program
    return bytes(rom)


def make_rom(program: bytes, title: bytes = b"GBXTEST") -> bytes:
    """A 32 KiB ROM-only cartridge: entry 0x0100 jumps to `program` at 0x0150."""
    return make_cart(program, title=title)


COUNTER_ROM = make_rom(COUNTER_PROGRAM)


# -- a stand-in for Pokémon Red: writes the profile's addresses (gbx.games.POKEMON_RAM) -------


def assemble(items) -> bytes:
    """Bytes, label strings and ("jr", opcode, label) / ("jp", label) items, placed at 0x0150
    (two passes: JR offsets and JP addresses are resolved from the labels)."""
    labels, pc = {}, 0x150
    for it in items:
        if isinstance(it, str):
            labels[it] = pc
        elif isinstance(it, tuple):
            pc += 2 if it[0] == "jr" else 3
        else:
            pc += len(it)
    out, pc = bytearray(), 0x150
    for it in items:
        if isinstance(it, str):
            continue
        if isinstance(it, tuple) and it[0] == "jr":
            off = labels[it[2]] - (pc + 2)
            assert -128 <= off <= 127, it
            out += bytes([it[1], off & 0xFF])
            pc += 2
        elif isinstance(it, tuple):
            out += bytes([0xC3, labels[it[1]] & 0xFF, labels[it[1]] >> 8])
            pc += 3
        else:
            out += it
            pc += len(it)
    return bytes(out)


def _ld_a_to(addr):  # LD (addr),A
    return bytes([0xEA, addr & 0xFF, addr >> 8])


def _ld_a_from(addr):  # LD A,(addr)
    return bytes([0xFA, addr & 0xFF, addr >> 8])


def _ld_hl(addr):
    return bytes([0x21, addr & 0xFF, addr >> 8])


JR, JR_NZ, JR_Z = 0x18, 0x20, 0x28
MAP, YC, XC, BADGES, COUNT, LEVEL1, EVENTS = 0xD35E, 0xD361, 0xD362, 0xD356, 0xD163, 0xD18C, 0xD747


def _on_new(bit, label, body):  # BIT bit,C; JR Z,label; body; label:
    return [bytes([0xCB, 0x41 + 8 * bit]), ("jr", JR_Z, label), body, label]


# Power-on: C000-DFFF cleared, party of one at level 5, map 0. Once a frame (at LY 144) it reads
# the joypad; newly pressed buttons (not held ones) act:
# - before the "player's room": each START or A press counts; the third puts the player in
#   map 38 (wCurMap of REDS_HOUSE_2F) at x 3, y 6 (what the intro recipe waits for);
# - in map 38: RIGHT/LEFT x +-1, UP/DOWN y -+1, SELECT party mon 1 level +1, B one more event
#   flag bit in 0xD747, START one more badge bit in wObtainedBadges (A does nothing: the
#   intro recipe's extra A presses land here).
POKEMON_STANDIN_PROGRAM = assemble(
    [
        b"\xf3",
        b"\x31\xf0\xdf",  # DI; LD SP,0xDFF0
        _ld_hl(0xC000),
        "clear",
        b"\xaf\x22\x7c\xfe\xe0",
        ("jr", JR_NZ, "clear"),  # XOR A; LD (HL+),A; LD A,H; CP 0xE0
        b"\x3e\x01",
        _ld_a_to(COUNT),
        b"\x3e\x05",
        _ld_a_to(LEVEL1),
        "frame",
        b"\xf0\x44\xfe\x90",
        ("jr", JR_NZ, "frame"),  # wait for LY == 144
        b"\x3e\x20\xe0\x00\xf0\x00\xf0\x00",  # select d-pad; read P1 twice
        b"\x2f\xe6\x0f\xcb\x37\x47",  # CPL; AND 0x0F; SWAP A; LD B,A
        b"\x3e\x10\xe0\x00\xf0\x00\xf0\x00",  # select buttons; read P1 twice
        b"\x2f\xe6\x0f\xb0\x47",  # CPL; AND 0x0F; OR B; LD B,A
        b"\x3e\x30\xe0\x00",  # deselect
        _ld_a_from(0xC001),
        b"\x2f\xa0\x4f",  # C = B & ~old
        b"\x78",
        _ld_a_to(0xC001),  # old = B
        _ld_a_from(MAP),
        b"\xfe\x26",
        ("jr", JR_Z, "play"),
        b"\x79\xe6\x09",
        ("jr", JR_Z, "endframe"),  # A or START pressed?
        _ld_hl(0xC000),
        b"\x34\x7e\xfe\x03",
        ("jr", JR_NZ, "endframe"),
        b"\x3e\x26",
        _ld_a_to(MAP),
        b"\x3e\x03",
        _ld_a_to(XC),
        b"\x3e\x06",
        _ld_a_to(YC),
        ("jr", JR, "endframe"),
        "play",
        *_on_new(4, "r", _ld_hl(XC) + b"\x34"),
        *_on_new(5, "l", _ld_hl(XC) + b"\x35"),
        *_on_new(6, "u", _ld_hl(YC) + b"\x35"),
        *_on_new(7, "d", _ld_hl(YC) + b"\x34"),
        *_on_new(2, "sel", _ld_hl(LEVEL1) + b"\x34"),
        *_on_new(1, "b", _ld_a_from(EVENTS) + b"\x37\x17" + _ld_a_to(EVENTS)),
        *_on_new(3, "s", _ld_a_from(BADGES) + b"\x37\x17" + _ld_a_to(BADGES)),
        "endframe",
        b"\xf0\x44\xfe\x90",
        ("jr", JR_Z, "endframe"),  # wait for LY != 144
        ("jp", "frame"),
    ]
)

POKEMON_STANDIN_ROM = make_rom(POKEMON_STANDIN_PROGRAM, title=b"STANDIN")
