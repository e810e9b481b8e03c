"""Observation specs: what ``gbx.VecEnv(obs=...)`` returns, and its Gymnasium spaces.

``obs`` is a string or a dict spec; every array comes from the kernel's one output block
(``runtime/src/outputs/outputs.cpp``), written by the stage epilog after each step:

=======================  ==========================  =======================================
spec key                 per-env array               what
=======================  ==========================  =======================================
``"pixels": "full"``     uint8[144, 160], 0..3       the last complete frame, shade indices
                                                     (0 white .. 3 black); ``True`` = full
``"pixels": "half"``     uint8[72, 80], 0..3         top-left pixel of each 2x2 block
``"pixels": "packed"``   uint8[144, 40], 0..255      4 pixels a byte, leftmost in bits 7-6
``"ram": [addr, ...]``   uint8[len(addrs)]           the bytes at those bus addresses (the
                                                     memory view; RAM-gather epilog)
``"vec": True``          float32[32] in [0, 1]       obs_v0, registers and mixes of
                                                     C000-C00F: a stage test (the obs_v0
                                                     epilog), not a game observation
=======================  ==========================  =======================================

Pixel values (``VecEnv(pixel_values=...)``), full and half formats:

==================  =====  ========  ========  =====  ====================================
``pixel_values``    white  light     dark      black  what
==================  =====  ========  ========  =====  ====================================
``"shades"``        0      1         2         3      what the kernel writes (default)
``"luminance"``     255    153       85        0      PyBoy's default palette (FFFFFF,
                                                      999999, 555555, 000000), one channel
==================  =====  ========  ========  =====  ====================================

``obs="pixels"`` (the default) and ``obs="vec"`` are shorthands for a one-key spec. A one-key
spec returns that array (``[num_envs, ...]``); several keys return a dict of them (a Gymnasium
``Dict`` space). ``"pixels"`` and ``"vec"`` exclude each other: the kernel writes one of the two in
its obs slot (``SynthParams::obs``); combine either with ``"ram"``.

``frame_stack=k`` (k > 1) stacks the last k observations of every key on a new axis after
the env axis, oldest first: ``[num_envs, k, ...]``. After a reset all k slots hold the reset
observation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

OBS_V0_DIM = 32
PIXEL_SHAPES = {"full": (144, 160), "half": (72, 80), "packed": (144, 40)}
PIXEL_VALUES = ("shades", "luminance")
# Shade index -> PyBoy's default palette (pyboy.PyBoy color_palette=(0xFFFFFF, 0x999999,
# 0x555555, 0x000000)), one channel: what PyBoy users read from screen.ndarray.
LUMINANCE = np.array([255, 153, 85, 0], dtype=np.uint8)
# Output-block section each spec key reads (runtime/src/outputs/outputs.cpp).
SECTION = {"vec": "obs_v0", "pixels": "pixels", "ram": "gather"}
KEYS = ("vec", "pixels", "ram")


@dataclass(frozen=True)
class ObsSpec:
    """A parsed observation spec: which arrays each step returns and how they are shaped."""

    keys: tuple[str, ...]  # in the order given
    pixels: str | None = None  # format, when "pixels" is a key
    ram: tuple[int, ...] = ()
    single: bool = True  # return the one array instead of a dict
    frame_stack: int = 1
    pixel_values: str = "shades"

    @property
    def luminance(self) -> bool:
        """Whether pixels are returned as luminance (255 white) instead of shade indices."""
        return self.pixels is not None and self.pixel_values == "luminance"

    @property
    def kernel_obs(self) -> str:
        """The observation epilog the kernel is synthesized with: ``"pixels"`` or ``"vec"``."""
        return "pixels" if self.pixels else "vec"

    def single_space(self, key: str) -> spaces.Box:
        """The Box space of one env's array ``key`` (frame stacking included)."""
        if key == "vec":
            shape, low, high, dtype = (OBS_V0_DIM,), 0.0, 1.0, np.float32
        elif key == "pixels":
            shape, low, dtype = PIXEL_SHAPES[self.pixels], 0, np.uint8
            high = 255 if self.pixels == "packed" or self.luminance else 3
        else:
            shape, low, high, dtype = (len(self.ram),), 0, 255, np.uint8
        if self.frame_stack > 1:
            shape = (self.frame_stack,) + shape
        return spaces.Box(low, high, shape=shape, dtype=dtype)

    def space(self) -> spaces.Space:
        """One env's observation space: a Box for a one-key spec, else a Dict of Boxes."""
        if self.single:
            return self.single_space(self.keys[0])
        return spaces.Dict({k: self.single_space(k) for k in self.keys})


def parse_obs(obs, frame_stack: int = 1, pixel_values: str = "shades") -> ObsSpec:
    """Checks an ``obs=`` argument of :class:`gbx.VecEnv` and returns its :class:`ObsSpec`;
    a malformed spec raises one ValueError naming the problem."""
    if isinstance(frame_stack, bool) or not isinstance(frame_stack, (int, np.integer)):
        raise ValueError(f"frame_stack must be an int >= 1 (got {frame_stack!r})")
    if frame_stack < 1:
        raise ValueError(f"frame_stack must be >= 1 (got {frame_stack})")
    if pixel_values not in PIXEL_VALUES:
        raise ValueError(f"pixel_values must be 'shades' or 'luminance' (got {pixel_values!r})")
    spec = _parse_keys(obs, int(frame_stack))
    if pixel_values == "luminance":
        if spec.pixels is None:
            raise ValueError("pixel_values='luminance' needs a pixels observation")
        if spec.pixels == "packed":
            raise ValueError(
                "pixel_values='luminance' needs pixels 'full' or 'half' "
                "(packed holds 4 pixels a byte)"
            )
        spec = ObsSpec(
            spec.keys, spec.pixels, spec.ram, spec.single, spec.frame_stack, pixel_values
        )
    return spec


def _parse_keys(obs, frame_stack: int) -> ObsSpec:
    if isinstance(obs, str) and obs == "vec":
        return ObsSpec(("vec",), frame_stack=frame_stack)
    if isinstance(obs, str) and obs == "pixels":
        return ObsSpec(("pixels",), pixels="full", frame_stack=frame_stack)
    if not isinstance(obs, dict):
        raise ValueError(f"obs must be 'vec', 'pixels' or a dict spec, got {obs!r}")
    keys, pixels, ram = [], None, ()
    for k, v in obs.items():
        if k not in KEYS:
            raise ValueError(f"unknown observation {k!r} (vec, pixels, ram)")
        if v is None or v is False:
            continue
        if k == "vec":
            if v is not True:
                raise ValueError(f"obs['vec'] must be True, False or None (got {v!r})")
        elif k == "pixels":
            pixels = "full" if v is True else v
            if pixels not in PIXEL_SHAPES:
                raise ValueError(
                    f"obs['pixels'] must be True or one of {', '.join(PIXEL_SHAPES)} (got {v!r})"
                )
        else:
            ram = _parse_addrs(v)
        keys.append(k)
    if not keys:
        raise ValueError("obs spec selects no observation")
    if "vec" in keys and "pixels" in keys:
        raise ValueError(
            "obs 'vec' and 'pixels' exclude each other (the kernel writes one of them); "
            "combine either with 'ram'"
        )
    return ObsSpec(tuple(keys), pixels, ram, single=len(keys) == 1, frame_stack=frame_stack)


def _parse_addrs(v) -> tuple[int, ...]:
    if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
        raise ValueError(f"obs['ram'] must be a list of bus addresses, got {v!r}")
    out = []
    for a in v:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
            raise ValueError(f"obs['ram'] addresses must be ints, got {a!r}")
        if not 0 <= a <= 0xFFFF:
            raise ValueError(f"obs['ram'] address {a:#x} out of range (0..0xFFFF)")
        out.append(int(a))
    if not out:
        raise ValueError("obs['ram'] lists no address")
    return tuple(out)


class ObsAssembler:
    """Builds each step's observation from the backend's output views (and frame stacks)."""

    def __init__(self, spec: ObsSpec, native, num_envs: int, copy: bool):
        self.spec = spec
        self.copy = copy
        # The block never moves (cpu: the backend's buffer; others: a host copy), so the views
        # are made once.
        self.views = {k: native.output(SECTION[k]) for k in spec.keys}
        # Luminance: the shades mapped through LUMINANCE into a buffer of our own each time.
        self.mapped = {}
        if spec.luminance:
            v = self.views["pixels"]
            self.mapped["pixels"] = np.empty(v.shape, dtype=np.uint8)
        self.stacks = {}
        if spec.frame_stack > 1:
            for k, v in self.views.items():
                self.stacks[k] = np.zeros((num_envs, spec.frame_stack) + v.shape[1:], dtype=v.dtype)

    def observe(self, fresh: np.ndarray | None = None, stepped: bool = True):
        """The current observation. ``stepped``: every env moved on (a step), so every stack
        shifts; else only the ``fresh`` envs changed (a reset). Envs where ``fresh`` is set
        (just reset) get every stack slot set to their current observation."""
        out = {}
        for k, v in self.views.items():
            if k in self.mapped:
                v = np.take(LUMINANCE, v, out=self.mapped[k])
            if self.spec.frame_stack > 1:
                s = self.stacks[k]
                if stepped:
                    s[:, :-1] = s[:, 1:]
                    s[:, -1] = v
                if fresh is not None and fresh.any():
                    s[fresh] = v[fresh][:, None]
                v = s
            out[k] = v.copy() if self.copy else v
        if self.spec.single:
            return out[self.spec.keys[0]]
        return out
