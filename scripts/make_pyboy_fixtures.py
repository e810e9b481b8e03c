#!/usr/bin/env python3
"""Makes the PyBoy state fixtures of tests/python/test_pyboy_fixtures.py, and the docs page (docs/guide/pyboy-states.md)'s PyBoy
import table from them.

    # once, with the pinned PyBoy (pyproject.toml's `pyboy` extra) and gbx in one venv:
    python -m venv /tmp/pyboy-venv && /tmp/pyboy-venv/bin/pip install ".[pyboy]"
    /tmp/pyboy-venv/bin/python scripts/make_pyboy_fixtures.py            # writes the fixtures
    build/pyvenv/bin/python scripts/make_pyboy_fixtures.py --table         # README table (no PyBoy)
    /tmp/pyboy-venv/bin/python scripts/make_pyboy_fixtures.py --live       # README live table
    /tmp/pyboy-venv/bin/python scripts/make_pyboy_fixtures.py --sweep TIMER_RELOAD_PENDING [--lag 0]

Each fixture ROM (tests/python/pyboy_fixture_roms.py, assembled here, never a commercial ROM)
runs in PyBoy headless up to its capture point: after N frames, or at the first of a list of
hook addresses (PyBoy's `hook_register`, ROM bank 0) where PyBoy's parsed state shows what the
fixture is about (an OAM DMA in progress, the timer in its overflow or reload M-cycle, a serial
transfer in progress). The state PyBoy saves there is written gzipped to
tests/python/data/<NAME>.pyboy.state.gz; <NAME>.pyboy.json holds the ROM's SHA-256, the
capture point, PyBoy's registers and reads there (its own API), and the WRAM bytes the program
writes after it, read after each of the `run_frames` frames PyBoy runs on from there, which
GBX's continuation must match frame by frame, with PyBoy's cycle counter at each of those
frame ends.

Re-running rewrites every fixture; only MBC3_RTC's state changes (PyBoy's RTC record holds two
host-time doubles, which the import ignores).

--table imports every fixture with gbx.pyboy_compat and writes, between README's
`pyboy-import-table` markers, each state field PyBoy saved, what GBX holds after the import,
and whether they agree (tests/python/pyboy_fixture_table.py; the tests fail when README's copy
is stale). --live runs the built-in ROMs in PyBoy, imports each at a frame and runs both on
(gbx.pyboy_compat.compare_with_pyboy), and writes the `pyboy-live-table` section.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import pathlib
import re
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "python"))
DATA = ROOT / "tests" / "python" / "data"

import pyboy_fixture_roms as roms  # noqa: E402


def pinned_pyboy() -> str:
    m = re.search(r'"pyboy==([0-9.]+)"', (ROOT / "pyproject.toml").read_text())
    if not m:
        raise SystemExit("error: pyproject.toml pins no pyboy version")
    return m.group(1)


def _save(pb) -> bytes:
    f = io.BytesIO()
    pb.save_state(f)
    return f.getvalue()


def _condition(key: str, p) -> bool:
    """Whether a parsed PyBoy state is the moment fixture `key` is about."""
    if key == "dma":
        return bool(p.dma["active"]) and 0 < p.dma["index"] < 160
    if key in ("timer1", "timer2"):
        return p.timer["reload_state"] == int(key[-1])
    if key == "serial":
        return bool(p.serial["transfer_enabled"] and p.serial["internal_clock"])
    raise ValueError(key)


def _pyboy(rom: bytes):
    from pyboy import PyBoy

    with tempfile.NamedTemporaryFile(suffix=".gb") as f:  # PyBoy opens ROMs by path
        f.write(rom)
        f.flush()
        return PyBoy(f.name, window="null", cgb=False, log_level="ERROR", sound_emulated=False)


def _reload_reads(fx: roms.Fixture, state: bytes) -> dict:
    """The setup's reads in a fresh PyBoy that loaded the saved state (PyBoy's own reload)."""
    pb = _pyboy(fx.rom)
    try:
        pb.tick(70, False)  # past the boot ROM
        pb.load_state(io.BytesIO(state))
        return {f"{a:#06x}": pb.memory[a] for a in sorted(fx.setup.get("reads", {}))}
    finally:
        pb.stop(save=False)


def make(fx: roms.Fixture, pyboy_version: str) -> dict:
    import gbx.pyboy_compat as pc

    pb = _pyboy(fx.rom)
    try:
        state, point = None, {}
        if fx.capture[0] == "frames":
            pb.tick(fx.capture[1], False)
            state = _save(pb)
            point = {"frames": fx.capture[1]}
            reads = {f"{a:#06x}": pb.memory[a] for a in sorted(fx.setup.get("reads", {}))}
        else:
            _, addrs, key = fx.capture
            got: list = []

            def hook(addr):
                if got:
                    return
                s = _save(pb)
                if _condition(key, pc.read_state(s, fx.rom)):
                    got.append((addr, s))

            for addr in addrs:
                pb.hook_register(0, addr, hook, addr)
            frames = 0
            while not got and frames < 300:
                pb.tick(1, False)
                frames += 1
            if not got:
                raise SystemExit(f"error: {fx.name}: no hook in {frames} frames met '{key}'")
            for addr in addrs:
                pb.hook_deregister(0, addr)
            point = {"hook": got[0][0], "frame": frames}
            state = got[0][1]
            reads = {}
            reload_reads = {}
        p = pc.read_state(state, fx.rom)
        if fx.capture[0] == "frames":
            reload_reads = _reload_reads(fx, state)
        # The result bytes at each of the run_frames frame ends after the capture point (a
        # hook's capture frame has ended already: the first of them).
        results, frame_ends = [], []

        def frame_end():
            results.append([pb.memory[a] for a in fx.results])
            frame_ends.append(pc.read_state(_save(pb), fx.rom).cpu["cycles"])

        if fx.capture[0] != "frames":
            frame_end()
        while len(results) < fx.run_frames:
            pb.tick(1, False)
            frame_end()
    finally:
        pb.stop(save=False)
    snap = pc.pyboy_snapshot(p)
    return {
        "state": state,
        "json": {
            "pyboy": pyboy_version,
            "rom_sha256": hashlib.sha256(fx.rom).hexdigest(),
            "capture": point,
            "cycles": p.cpu["cycles"],
            "regs": snap["regs"],
            "reads": reads,
            "reload_reads": reload_reads,
            "results_at": [f"{a:#06x}" for a in fx.results],
            "results": results,
            "frame_end_cycles": frame_ends,
        },
    }


def sweep(name: str, lag: int | None) -> int:
    """Imports fixture `name` at every one of its hook addresses (not only the first that
    meets its condition), runs PyBoy and GBX on 3 frames, and counts the capture points whose
    result bytes differ after frame 1 or 3. `lag` overrides gbx.pyboy_import.ACCESS_LAG (the
    importer reads it there; gbx.pyboy_compat re-exports its value)."""
    import gbx
    import gbx.pyboy_compat as pc
    import gbx.pyboy_import as importer
    import numpy as np

    if lag is not None:
        importer.ACCESS_LAG = lag
    fx = roms.by_name(name)
    if fx.capture[0] != "hook":
        raise SystemExit(
            f"error: {name} is captured after whole frames; --sweep takes a hooked fixture"
        )
    env = gbx.VecEnv(
        fx.rom,
        num_envs=1,
        frames_per_step=1,
        release_after_frames=1,
        obs="vec",
        reward="0",
        copy=True,
    )
    noop, bad = np.zeros(1, np.int32), 0
    for addr in fx.capture[1]:
        pb, got = _pyboy(fx.rom), []
        pb.hook_register(0, addr, lambda _, got=got, pb=pb: got or got.append(_save(pb)), None)
        while not got:
            pb.tick(1, False)
        pb.hook_deregister(0, addr)
        want = [[pb.memory[a] for a in fx.results]]
        pb.tick(2, False)
        want.append([pb.memory[a] for a in fx.results])
        pb.stop(save=False)
        env.reset(seed=0)
        pc.load_into(env, 0, pc.import_state(got[0], fx.rom))
        have = []
        for frames in (1, 2):
            for _ in range(frames):
                env.step(noop)
            have.append([env.backend.read_memory(0, a, a + 1)[0] for a in fx.results])
        if have != want:
            bad += 1
            print(f"hook {addr:#06x}: GBX {have} PyBoy {want}")
    env.close()
    print(
        f"{name}, access lag {importer.ACCESS_LAG}: {bad} of {len(fx.capture[1])} capture points differ"
    )
    return bad


def write_fixtures(names: list[str]) -> None:
    import pyboy

    want = pinned_pyboy()
    have = getattr(pyboy, "__version__", None)
    if have is None:
        from importlib.metadata import version

        have = version("pyboy")
    if have != want:
        raise SystemExit(
            f"error: PyBoy {have} is installed; the fixtures are made with {want} (pyproject.toml)"
        )
    for fx in roms.fixtures():
        if names and fx.name not in names:
            continue
        out = make(fx, have)
        gz = DATA / f"{fx.name}.pyboy.state.gz"
        gz.write_bytes(gzip.compress(out["state"], 9, mtime=0))
        (DATA / f"{fx.name}.pyboy.json").write_text(json.dumps(out["json"], indent=1) + "\n")
        print(
            f"{fx.name:<22} {len(out['state']):7d} bytes, {gz.stat().st_size:6d} gzipped  capture {out['json']['capture']}"
        )


# -- README table -------------------------------------------------------------------------------

IMPORT_TABLE = (
    "pyboy-import-table"  # README markers: <!-- NAME: begin ... --> ... <!-- NAME: end -->
)
LIVE_TABLE = "pyboy-live-table"
# The built-in ROMs of README's live comparison (python -m gbx.pyboy_compat).
LIVE_ROMS = [
    "ALU_LOOP",
    "MEM_RWB",
    "SERIAL_HELLO",
    "IRQ_TIMER",
    "IRQ_PRIORITY",
    "HALT_BUG",
    "EI_DELAY",
    "MBC1_BANKS",
    "TIMER_RELOAD",
    "PPU_MODES",
    "PPU_TIMING",
    "STAT_BLOCK",
    "DMA_CONFLICT",
    "IE_PUSH",
    "APU_REGS",
    "JOYPAD_IRQ",
    "PPU_BENCH",
]


def live_table(import_frame: int, frames: int) -> str:
    """Markdown: each built-in ROM imported from PyBoy at `import_frame`, then both run on."""
    import gbx.pyboy_compat as pc

    lines = ["| ROM | import point | first divergence |", "|---|---|---|"]
    for name in LIVE_ROMS:
        r = pc.compare_with_pyboy(f"builtin:{name}", import_frame, frames)
        at = "equal" if not r["import_diff"] else "DIFFERS: " + "; ".join(r["import_diff"])
        div = (
            "none"
            if r["first_divergence"] is None
            else (f"`frame {r['first_divergence']}: " + "; ".join(r["diff"][:4]) + "` (PyBoy/GBX)")
        )
        lines.append(f"| {name} | {at} | {div} |")
        print(lines[-1], flush=True)
    return (
        f"Measured by `scripts/make_pyboy_fixtures.py --live` (PyBoy {pinned_pyboy()}, import at frame "
        f"{import_frame}, then {frames} frames):\n\n" + "\n".join(lines) + "\n"
    )


def write_section(readme: pathlib.Path, marker: str, body: str) -> None:
    begin, end = (
        f"<!-- {marker}: begin (generated by scripts/make_pyboy_fixtures.py) -->",
        f"<!-- {marker}: end -->",
    )
    text = readme.read_text()
    if begin not in text or end not in text:
        raise SystemExit(f"error: {readme} has no '{begin}' ... '{end}' markers")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    readme.write_text(head + begin + "\n" + body + end + tail)
    print(f"wrote {marker} into {readme}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="fixtures to (re)make (default: all)")
    ap.add_argument(
        "--table",
        action="store_true",
        help="write README's import table from the fixtures (no PyBoy)",
    )
    ap.add_argument(
        "--live",
        action="store_true",
        help="write README's live comparison table (PyBoy runs the built-in ROMs)",
    )
    ap.add_argument("--import-frame", type=int, default=120)
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--readme", default=str(ROOT / "docs" / "guide" / "pyboy-states.md"))
    ap.add_argument(
        "--sweep", metavar="NAME", help="import a hooked fixture at each of its hooks (needs PyBoy)"
    )
    ap.add_argument(
        "--lag", type=int, help="with --sweep: the access lag to try instead of ACCESS_LAG"
    )
    a = ap.parse_args()
    os.chdir(ROOT)
    if a.sweep:
        return 1 if sweep(a.sweep, a.lag) else 0
    if a.table:
        import pyboy_fixture_table

        write_section(pathlib.Path(a.readme), IMPORT_TABLE, pyboy_fixture_table.markdown())
    if a.live:
        write_section(pathlib.Path(a.readme), LIVE_TABLE, live_table(a.import_frame, a.frames))
    if not (a.table or a.live):
        write_fixtures(a.names)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
