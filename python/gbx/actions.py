"""Action codecs: how an agent's action becomes the joypad byte the kernel reads.

The joypad byte (one int32 per env, see templates/hw/io.h ``joyp_read``) has one bit per
button, 1 = pressed:

====  ======  ====  ======  =====  ====  ==  ====
bit0  bit1    bit2  bit3    bit4   bit5  6   7
A     B       SEL   START   RIGHT  LEFT  UP  DOWN
====  ======  ====  ======  =====  ====  ==  ====

Codecs (``actions=`` of :class:`gbx.VecEnv`):

=============  ======================  ==================================================
name           space                   action -> buttons
=============  ======================  ==================================================
``pokemon8``   ``Discrete(8)``         0 noop, 1 A, 2 B, 3 START, 4 UP, 5 DOWN, 6 LEFT,
                                       7 RIGHT
``buttons8``   ``Discrete(9)``         0 noop, then one button each in bit order:
                                       1 A, 2 B, 3 SELECT, 4 START, 5 RIGHT, 6 LEFT, 7 UP,
                                       8 DOWN
``multibinary`` ``MultiBinary(8)``     element i presses bit i (any combination)
=============  ======================  ==================================================

A game's own action set (``gbx.games`` profiles use it): a sequence of button names (case
does not matter), each one action, ``"noop"`` for none and ``"+"`` for buttons pressed
together, e.g. ``actions=("up", "down", "left", "right")`` is ``Discrete(4)`` and
``("noop", "a", "b+left")`` is ``Discrete(3)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

A, B, SELECT, START, RIGHT, LEFT, UP, DOWN = (1 << i for i in range(8))
BUTTON_NAMES = ("A", "B", "SELECT", "START", "RIGHT", "LEFT", "UP", "DOWN")


@dataclass(frozen=True)
class DiscreteCodec:
    """A discrete action set: action i presses the buttons of joypad byte ``buttons[i]``."""

    name: str
    buttons: tuple[int, ...]  # joypad byte of each action
    labels: tuple[str, ...]

    @property
    def space(self) -> spaces.Space:
        """The Gymnasium space of one env's action: ``Discrete(len(buttons))``."""
        return spaces.Discrete(len(self.buttons))


@dataclass(frozen=True)
class MultiBinaryCodec:
    """Eight independent buttons per env: bit i of the action is button i (A, B, SELECT,
    START, RIGHT, LEFT, UP, DOWN)."""

    name: str = "multibinary"

    @property
    def space(self) -> spaces.Space:
        """The Gymnasium space of one env's action: ``MultiBinary(8)``."""
        return spaces.MultiBinary(8)


CODECS = {
    "pokemon8": DiscreteCodec(
        "pokemon8",
        (0, A, B, START, UP, DOWN, LEFT, RIGHT),
        ("noop", "A", "B", "START", "UP", "DOWN", "LEFT", "RIGHT"),
    ),
    "buttons8": DiscreteCodec(
        "buttons8", (0, A, B, SELECT, START, RIGHT, LEFT, UP, DOWN), ("noop",) + BUTTON_NAMES
    ),
    "multibinary": MultiBinaryCodec(),
}


def button_mask(label: str) -> int:
    """The joypad byte of ``"noop"``, one button name (``"a"``, ``"start"``, ``"up"`` ...) or
    several joined with ``+`` (``"b+left"``); case does not matter."""
    if not isinstance(label, str) or not label.strip():
        raise ValueError(f"a button label is a non-empty string, got {label!r}")
    if label.strip().lower() == "noop":
        return 0
    mask = 0
    for part in label.split("+"):
        name = part.strip().upper()
        if name not in BUTTON_NAMES:
            raise ValueError(
                f"unknown button {part.strip()!r} in {label!r} (buttons: "
                f"{', '.join(n.lower() for n in BUTTON_NAMES)}, or noop)"
            )
        mask |= 1 << BUTTON_NAMES.index(name)
    return mask


def get_codec(name):
    """The action codec named ``name`` (a key of :data:`CODECS`), or a custom discrete set from
    a tuple of button labels (see :func:`button_mask`); ValueError otherwise."""
    if isinstance(name, (list, tuple)):
        if not name:
            raise ValueError("an action set needs at least one action")
        labels = tuple(str(x) for x in name)
        return DiscreteCodec("custom", tuple(button_mask(x) for x in name), labels)
    if not isinstance(name, str) or name not in CODECS:
        raise ValueError(
            f"unknown action codec {name!r} (choose one of {', '.join(CODECS)}, or a tuple of "
            "button labels such as ('up', 'down', 'left', 'right'))"
        )
    return CODECS[name]


def encode(codec, actions, num_envs: int) -> np.ndarray:
    """Checks a batch of actions and returns the int32 joypad byte of each env."""
    a = np.asarray(actions)
    if isinstance(codec, DiscreteCodec):
        n = len(codec.buttons)
        if a.shape != (num_envs,):
            raise ValueError(
                f"actions must have shape ({num_envs},) for {num_envs} envs "
                f"(codec {codec.name}), got {a.shape}"
            )
        if not np.issubdtype(a.dtype, np.integer):
            raise ValueError(f"actions must be integers (codec {codec.name}), got dtype {a.dtype}")
        if a.size and (a.min() < 0 or a.max() >= n):
            bad = a[(a < 0) | (a >= n)][0]
            raise ValueError(f"action {bad} out of range for codec {codec.name} (0..{n - 1})")
        return np.asarray(codec.buttons, dtype=np.int32)[a]
    if a.shape != (num_envs, 8):
        raise ValueError(
            f"actions must have shape ({num_envs}, 8) for {num_envs} envs (codec multibinary), "
            f"got {a.shape}"
        )
    if not (np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_):
        raise ValueError(
            f"actions must be 0/1 integers or bools (codec multibinary), got dtype {a.dtype}"
        )
    a = a.astype(np.int32)
    if a.size and (a.min() < 0 or a.max() > 1):
        raise ValueError("multibinary actions must be 0 or 1")
    return (a << np.arange(8, dtype=np.int32)).sum(axis=1, dtype=np.int32)
