"""README's PyBoy import table, computed from the checked-in PyBoy fixtures.

For each fixture (tests/python/pyboy_fixture_roms.py), a PyBoy state field as PyBoy saved it
and the GBX field it becomes after gbx.pyboy_compat.import_state, with both values taken
from the state and the imported blob (never typed), and whether they agree; where they do
not, the row's note says why. scripts/make_pyboy_fixtures.py --table writes it into README;
tests/python/test_pyboy_fixtures.py fails when README's copy is stale.
"""

from __future__ import annotations

import gzip
import json
import pathlib

import pyboy_fixture_roms as roms

DATA = pathlib.Path(__file__).parent / "data"


def _h(v) -> str:
    if isinstance(v, (bytes, bytearray, tuple, list)):
        return " ".join(f"{b:02x}" for b in v)
    return f"{v:#x}" if isinstance(v, int) and v > 9 else str(v)


def _rows(name: str, p, meta: dict, f: dict, read) -> list[tuple]:
    """(PyBoy field, PyBoy value, GBX field, GBX value, note if they differ)."""
    regs = meta["regs"]
    rows = [
        (
            "cpu A F B C D E HL SP PC",
            tuple(regs[r] for r in ("a", "f", "b", "c", "d", "e", "h", "l"))
            + (regs["sp"], regs["pc"]),
            "a f b c d e h l sp pc",
            tuple(f[r] for r in ("a", "f", "b", "c", "d", "e", "h", "l", "sp", "pc")),
            "",
        ),
        ("cpu.cycles", p.cpu["cycles"], "cycle_count", f["cycle_count"], ""),
    ]
    cart, t, d, s = p.cart, p.timer, p.dma, p.serial
    lag = "GBX times accesses 5 T-cycles after PyBoy's stamp"
    if cart["kind"] != "none":
        if cart["kind"] == "mbc1":
            rows.append(
                (
                    "mbc1 bank1 bank2 memorymodel",
                    (cart["bank1"], cart["bank2"], cart["memorymodel"]),
                    "mbc_rom_bank mbc_ram_bank mbc_mode",
                    (f["mbc_rom_bank"], f["mbc_ram_bank"], f["mbc_mode"]),
                    "",
                )
            )
        else:
            rows.append(
                (
                    "rombank_selected",
                    cart["rombank_selected"],
                    "mbc_rom_bank_hi:mbc_rom_bank",
                    f["mbc_rom_bank_hi"] << 8 | f["mbc_rom_bank"],
                    "",
                )
            )
            rows.append(
                (
                    "rambank_selected",
                    cart["rambank_selected"],
                    "mbc_ram_bank",
                    f["mbc_ram_bank"],
                    "",
                )
            )
        rows.append(
            (
                "rambank_enabled",
                int(bool(cart["rambank_enabled"])),
                "mbc_ram_enable",
                f["mbc_ram_enable"],
                "",
            )
        )
        for addr, v in meta["reads"].items():
            reload = meta["reload_reads"].get(addr)
            rows.append(
                (
                    f"read {addr} at the capture (PyBoy's reload: {_h(reload)})",
                    v,
                    f"read {addr}",
                    read(int(addr, 16)),
                    "PyBoy saves the MBC5 ROM bank in one byte: bit 8 is lost (its reload reads the same)",
                )
            )
    if "rtc" in cart:
        rt = cart["rtc"]
        dh = (rt["day_high"] & 1) | (rt["halt"] & 1) << 6 | (rt["day_carry"] & 1) << 7
        live = (rt["seconds"], rt["minutes"], rt["hours"], rt["day_low"], dh)
        rows.append(("rtc S M H DL DH", live, "rtc_regs[0:5]", tuple(f["rtc_regs"][:5]), ""))
        rows.append(
            (
                "(latched copy: not saved)",
                "-",
                "rtc_regs[5:10]",
                tuple(f["rtc_regs"][5:10]),
                "PyBoy saves no latched copy; GBX takes the live clock",
            )
        )
        rows.append(
            (
                "rtc_cycles (into the second)",
                rt["cycles"],
                "cycle_count - rtc_second_start",
                f["cycle_count"] - f["rtc_second_start"],
                lag,
            )
        )
    if d["active"]:
        rows.append(("oam_dma source", d["source"], "read FF46", read(0xFF46), ""))
        rows.append(
            (
                "oam_dma start_cycle",
                d["start_cycle"],
                "dma_end - 640",
                f["dma_end"] - 640,
                "PyBoy moves the first byte 12 T-cycles after its write stamp, GBX 8 after its own (+5)",
            )
        )
        rows.append(
            (
                "oam_dma index (bytes moved)",
                d["index"],
                "OAM bytes from the source",
                160,
                "GBX copies the block when the DMA starts: the import completes it",
            )
        )
    if t["TAC"] & 4:
        rows.append(("timer last_cycles", t["last_cycles"], "timer_synced", f["timer_synced"], lag))
        rows.append(
            (
                "timer DIV_counter",
                t["DIV_counter"],
                "timer_synced - div_epoch",
                f["timer_synced"] - f["div_epoch"],
                "",
            )
        )
        rows.append(
            (
                "timer TIMA as read (reload_state 1: 00)",
                0 if t["reload_state"] == 1 else t["TIMA"],
                "read FF05",
                read(0xFF05),
                "",
            )
        )
        if t["reload_state"]:
            pend = t["TIMA_counter"] if t["reload_state"] == 1 else t["TIMA_counter"] - 4
            rows.append(
                (
                    f"timer reload_state {t['reload_state']}, TIMA_counter {t['TIMA_counter']}: reload in",
                    pend,
                    "tima_reload - timer_synced",
                    f["tima_reload"] - f["timer_synced"],
                    "",
                )
            )
    if s["transfer_enabled"]:
        rows.append(("serial SC", s["SC"], "read FF02", read(0xFF02), ""))
        rows.append(
            (
                "serial clock_target - clock (left)",
                s["clock_target"] - s["clock"],
                "serial_event - cycle_count",
                f["serial_event"] - f["cycle_count"],
                "PyBoy shifts a byte in 1024 T-cycles, the DMG in 4096 (+5)",
            )
        )
    return [(name,) + r for r in rows]


def collect(gbx) -> list[tuple]:
    import gbx.pyboy_compat as pc

    out = []
    for fx in roms.fixtures():
        state = gzip.decompress((DATA / f"{fx.name}.pyboy.state.gz").read_bytes())
        meta = json.loads((DATA / f"{fx.name}.pyboy.json").read_text())
        p = pc.read_state(state, fx.rom)
        blob = pc.import_state(state, fx.rom)
        env = gbx.VecEnv(
            fx.rom,
            num_envs=1,
            frames_per_step=1,
            release_after_frames=1,
            obs="vec",
            reward="0",
            copy=True,
        )
        try:
            env.reset(seed=0)
            pc.load_into(env, 0, blob)
            f = {}
            for k, v in pc._split_blob(bytes(env.save_state(0)))[1]:
                f[k] = int.from_bytes(v, "little", signed=len(v) == 8) if len(v) <= 8 else v
            out += _rows(
                fx.name, p, meta, f, lambda a, env=env: env.backend.read_memory(0, a, a + 1)[0]
            )
        finally:
            env.close()
    return out


def markdown(gbx=None) -> str:
    if gbx is None:
        import gbx
    lines = [
        "| fixture | PyBoy 2.8.1 state | PyBoy | GBX after import | GBX | |",
        "|---|---|---|---|---|---|",
    ]
    for name, pf, pv, gf, gv, note in collect(gbx):
        agree = "equal" if pv == gv else f"differs: {note}" if note else "**DIFFERS**"
        lines.append(f"| {name} | {pf} | {_h(pv)} | {gf} | {_h(gv)} | {agree} |")
    return "\n".join(lines) + "\n"
