"""GBX side by side with PyBoy (needs the pyboy package: ``pip install gbx[pyboy]``): snapshots
of registers and memory from both, their differences, and :func:`compare_with_pyboy`, which
imports a PyBoy state and steps both emulators frame by frame
(``python -m gbx.pyboy_compat ROM...``)."""

from __future__ import annotations

import os
from typing import Any

from . import _native
from .pyboy_import import _split_blob, import_state, load_into
from .pyboy_state import PyBoyState, _rom_bytes, read_state

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
