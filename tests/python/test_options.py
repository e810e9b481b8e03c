"""The option declaration (runtime/include/gbx/runtime/backends/options.h) against Python's
surfaces: gbx.VecEnv's keywords and defaults, gbx._native.Backend's **options (names, types, errors
naming the Python name) and the stub's generated block. The CLI's: tests/test_options.cpp."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from conftest import ROM

PYI = Path(__file__).resolve().parents[2] / "python" / "gbx" / "_native.pyi"


def test_vecenv_keywords_are_the_declaration(gbx):
    from gbx import _options

    assert _options.vecenv_mismatches() == []
    names = list(inspect.signature(gbx.VecEnv.__init__).parameters)[1:]
    assert names[:2] == ["rom", "num_envs"]  # the two positional ones


def test_a_surface_differing_from_the_declaration_is_caught():
    """The check itself can fail: a VecEnv with a default changed, one keyword dropped and one
    added."""
    from gbx import _options

    def init(self, rom, num_envs, device="cpu", frames_per_step=1, extra=0):
        pass

    problems = "\n".join(_options.vecenv_mismatches(init))
    assert "frames_per_step: VecEnv's default 1, declared 24" in problems
    assert "VecEnv lacks 'ppu'" in problems
    assert "VecEnv has 'extra'" in problems


def test_native_stub_block_is_generated():
    from gbx import _options

    assert _options.stub_block_in(PYI) == _options.native_stub_block(), (
        "python/gbx/_native.pyi is stale: python -m gbx._options --write-pyi python/gbx/_native.pyi"
    )


def test_native_stub_names_every_member(gbx):
    """Every public name of the module and of Backend has a line in the stub."""
    text = PYI.read_text()
    native = gbx._native
    for name in [n for n in dir(native) if not n.startswith("_")]:
        assert f"{name}" in text, f"_native.{name} is missing from _native.pyi"
    for name in [n for n in dir(native.Backend) if not n.startswith("_")]:
        assert f"def {name}(" in text, f"Backend.{name} is missing from _native.pyi"


def test_native_options_are_checked_against_the_declaration(gbx):
    native = gbx._native.Backend
    with pytest.raises(TypeError, match="unexpected keyword argument 'frames'"):
        native(ROM, frames=3)
    with pytest.raises(TypeError, match="^ppu must be str, got int$"):
        native(ROM, ppu=1)
    with pytest.raises(TypeError, match="^num_envs must be an int, got bool$"):
        native(ROM, num_envs=True)
    with pytest.raises(ValueError, match=r"^unknown ppu 'dots' \(line, fifo\)$"):
        native(ROM, ppu="dots")
    with pytest.raises(ValueError, match=r"^unknown obs_kind 'rgb' \(vec, pixels\)$"):
        native(ROM, obs_kind="rgb")
    with pytest.raises(ValueError, match=r"^seen_capacity must be 1\.\.65536 \(got 0\)$"):
        native(ROM, seen_capacity=0)
    b = native(ROM, num_envs=2, frames_per_step=3, threads=1)
    assert (b.num_envs, b.frames_per_step) == (2, 3)


def test_declared_native_defaults_are_what_a_bare_backend_gets(gbx):
    from gbx import _options

    b = gbx._native.Backend(ROM, threads=1)
    on = _options.on("native")
    assert b.num_envs == int(on["num_envs"]["surfaces"]["native"]["default"])
    assert b.frames_per_step == int(on["frames_per_step"]["surfaces"]["native"]["default"])
    assert "obs_v0" in b.output_names  # obs_kind 'vec'
