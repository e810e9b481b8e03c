"""``gbx.script`` (module ``gbx.scripting``): scripted input for deterministic intros and
start states.

A script is a list of steps run frame by frame on a :class:`gbx.VecEnv`::

    gbx.script(env, [
        ("start", 4),                            # hold START for 4 frames, then release
        ("wait", 60),                            # 60 frames with nothing pressed
        ("a+b", 2),                              # A and B together for 2 frames
        ("until", "ram(0xD35E) == 38", 600),     # run until the condition holds (<= 600 frames)
        ("until", "ram(0xC104) >= 8", 120, "right"),  # ... holding RIGHT meanwhile
    ])
    start = env.save_state(0)                    # e.g. a start state for training

Steps (tuples or lists, so a script can be stored as JSON):

- ``(buttons, frames)``: ``buttons`` is a button name or several joined by ``+``
  (``"a"``, ``"start"``, ``"up+b"``; names ``a b select start right left up down``, any
  case), held for ``frames`` (>= 1) frames and released at the end of the step.
- ``("wait", frames)``: ``frames`` (>= 0) frames with nothing pressed.
- ``("until", expr, max_frames[, buttons])``: ``expr`` is an expression of the reward
  language (:mod:`gbx.expressions`: ``ram(addr)``, ``ram16(addr)``, registers, C++
  operators), evaluated on the host, so it needs no kernel compile and works on every backend.
  It is checked before the step's first frame and after each frame; an env where it holds
  stops there (it runs no more frames in this step) while the others go on. If it does not
  hold in some env within ``max_frames`` (>= 1) frames, :class:`ScriptTimeout` is raised,
  naming the step and the envs. ``buttons`` (optional) are held meanwhile.

Every step is checked (names, frame counts, the expressions parsed) when the
:class:`Script` is made, before any frame runs: a bad step is one :class:`ScriptError`
naming the step. Running is deterministic: the same script from the same state gives the
same state (the machine is deterministic; nothing is drawn at random). Frames are real
emulated frames (70224 T-cycles), independent of the env's ``frames_per_step``.

Input timing: a held button is pressed from the start of the step's first frame and released
at the start of the frame after the step (one frame boundary to the next, as a player holding
a key). The env's ``release_after_frames`` would release a button after that many frames of a
backend call, so a long hold runs as several calls of ``release_after_frames`` frames each,
with the button pressed again at each call's start, on the same cycle the previous call
released it (no instruction runs in between: the game sees one continuous press). An env
made with ``release_after_frames=0`` cannot hold buttons: a script that presses one raises.

After a run the envs it ran on start a new episode, as after :meth:`gbx.VecEnv.load_state`:
their observations (the arrays the last ``step``/``reset`` returned, when made with
``copy=False``), frame stacks and episode counters are refreshed; a pending autoreset is
cancelled. The env must have been reset once (``env.reset()``) before.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from .actions import BUTTON_NAMES, button_mask
from .expressions import HostExpression

# Button name -> joypad bit (:mod:`gbx.actions` bit order).
BUTTONS = {name.lower(): 1 << i for i, name in enumerate(BUTTON_NAMES)}


class ScriptError(ValueError):
    """A script step that is not well formed (raised before any frame runs)."""


class ScriptTimeout(RuntimeError):
    """An ``until`` step whose condition did not hold within its frame limit.

    ``step`` is the step's index, ``envs`` the env indices where it did not hold, ``frames``
    every env's frames run by the script up to then (the envs have run them)."""

    def __init__(self, message: str, step: int, envs: list[int], frames: np.ndarray):
        super().__init__(message)
        self.step, self.envs, self.frames = step, envs, frames


def parse_buttons(text: str) -> int:
    """``"a"``, ``"up+b"`` ... -> the joypad byte (:mod:`gbx.actions` bit order); ValueError
    for an unknown or repeated name. Unlike :func:`gbx.actions.button_mask` (action sets), a
    script names only buttons: ``"noop"`` is no button here (a step without one is
    ``("wait", frames)``), and a button named twice is an error."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"buttons must be a name like 'a' or 'up+b', got {text!r}")
    byte = 0
    for part in text.split("+"):
        name = part.strip().lower()
        bit = _button_bit(name)
        if not bit:
            raise ValueError(
                f"unknown button {part.strip()!r} in {text!r} (buttons: {', '.join(BUTTONS)}; "
                "join several with '+')"
            )
        if byte & bit:
            raise ValueError(f"button {name!r} named twice in {text!r}")
        byte |= bit
    return byte


def _button_bit(name: str) -> int:
    """The joypad bit of one button name (gbx.actions.button_mask), 0 for anything else."""
    if name == "noop":
        return 0
    try:
        return button_mask(name)
    except ValueError:
        return 0


def _frames_arg(v, what: str, minimum: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum:
        raise ValueError(f"{what} must be an int >= {minimum}, got {v!r}")
    return int(v)


class _Step:
    __slots__ = ("kind", "buttons", "frames", "expr", "source")

    def __init__(self, kind, buttons, frames, expr, source):
        self.kind, self.buttons, self.frames, self.expr, self.source = (
            kind,
            buttons,
            frames,
            expr,
            source,
        )


class Script:
    """A checked, reusable script: ``Script(steps).run(env)`` (see the module doc for the
    steps). ``steps`` holds the steps as given, as tuples."""

    def __init__(self, steps: Iterable[Sequence]):
        if isinstance(steps, (str, bytes)) or not hasattr(steps, "__iter__"):
            raise ScriptError(f"a script is a list of steps, got {type(steps).__name__}")
        self.steps: tuple[tuple, ...] = ()
        parsed = []
        for i, step in enumerate(steps):
            if not isinstance(step, (tuple, list)):
                raise ScriptError(
                    f"script step {i} {step!r}: a step is a tuple like ('a', 4), ('wait', 60) "
                    "or ('until', 'ram(0xC000) == 1', 600)"
                )
            step = tuple(step)
            try:
                parsed.append(self._parse(i, step))
            except ValueError as e:
                raise ScriptError(f"script step {i} {step!r}: {e}") from None
            self.steps += (step,)
        self._parsed = tuple(parsed)

    @staticmethod
    def _parse(i: int, step: tuple) -> _Step:
        if not step or not isinstance(step[0], str):
            raise ValueError("a step starts with a button name, 'wait' or 'until'")
        kind = step[0].strip().lower()
        if kind == "wait":
            if len(step) != 2:
                raise ValueError("('wait', frames) takes one frame count")
            return _Step("frames", 0, _frames_arg(step[1], "frames", 0), None, step)
        if kind == "until":
            if len(step) not in (3, 4):
                raise ValueError("('until', expr, max_frames[, buttons]) takes 2 or 3 arguments")
            if not isinstance(step[1], str):
                raise ValueError(f"the condition must be an expression string, got {step[1]!r}")
            expr = HostExpression(step[1], f"script step {i}")
            limit = _frames_arg(step[2], "max_frames", 1)
            buttons = parse_buttons(step[3]) if len(step) == 4 else 0
            return _Step("until", buttons, limit, expr, step)
        if len(step) != 2:
            raise ValueError("(buttons, frames) takes one frame count")
        return _Step(
            "frames", parse_buttons(step[0]), _frames_arg(step[1], "frames", 1), None, step
        )

    def __len__(self) -> int:
        return len(self.steps)

    def __repr__(self) -> str:
        return f"Script({list(self.steps)!r})"

    def run(self, env, envs=None) -> np.ndarray:
        """Runs the script on ``env`` (a :class:`gbx.VecEnv` on any device): on every env
        (``envs=None``), one env (an int), several (a list of indices) or a bool mask of
        ``num_envs``; the others are untouched. Returns int64[num_envs]: the frames each env
        ran (0 for the untouched). Raises :class:`ScriptTimeout` when an ``until`` step's
        condition does not hold in time."""
        mask = _env_mask(env, envs)
        if not getattr(env, "_reset_called", False):
            raise RuntimeError("call env.reset() before running a script on it")
        release = int(env.release_after_frames)
        if release == 0 and any(s.buttons for s in self._parsed):
            raise ValueError(
                "this env was made with release_after_frames=0, which releases every button "
                "at once: a script cannot hold one (make the env with release_after_frames >= 1)"
            )
        native = env.backend
        n = env.num_envs
        ran = np.zeros(n, dtype=np.int64)
        try:
            for i, step in enumerate(self._parsed):
                if step.kind == "frames":
                    _run_frames(native, mask, step.buttons, step.frames, release, ran)
                    continue
                waiting = mask & ~step.expr.truth(env)
                for _ in range(step.frames):
                    if not waiting.any():
                        break
                    _run_frames(native, waiting, step.buttons, 1, release, ran)
                    waiting &= ~step.expr.truth(env)
                if waiting.any():
                    bad = np.flatnonzero(waiting).tolist()
                    shown = ", ".join(map(str, bad[:10])) + (" ..." if len(bad) > 10 else "")
                    raise ScriptTimeout(
                        f"script step {i} {step.source!r}: the condition did not hold within "
                        f"{step.frames} frames in {len(bad)} of {int(mask.sum())} env(s) "
                        f"(env {shown})",
                        i,
                        bad,
                        ran.copy(),
                    )
        finally:
            env._scripted(mask)
        return ran


def script(env, steps, envs=None) -> np.ndarray:
    """Runs ``steps`` (a list of steps or a :class:`Script`) on ``env``; see the module doc
    and :meth:`Script.run` (``envs``: which envs, default all). Returns the frames each env
    ran."""
    return (steps if isinstance(steps, Script) else Script(steps)).run(env, envs)


def _env_mask(env, envs) -> np.ndarray:
    n = env.num_envs
    if envs is None:
        return np.ones(n, dtype=bool)
    if isinstance(envs, (int, np.integer)) and not isinstance(envs, bool):
        envs = [envs]
    a = np.asarray(envs)
    if a.dtype == np.bool_:
        if a.shape != (n,):
            raise ValueError(f"envs: a bool mask needs shape ({n},), got {a.shape}")
        if not a.any():
            raise ValueError("envs: the mask selects no env")
        return a.copy()
    if a.ndim != 1 or a.size == 0 or not np.issubdtype(a.dtype, np.integer):
        raise ValueError(
            f"envs must be None, an env index, a list of them or a bool mask, got {envs!r}"
        )
    if a.min() < 0 or a.max() >= n:
        raise ValueError(f"envs: index out of range (0..{n - 1}) in {a.tolist()}")
    mask = np.zeros(n, dtype=bool)
    mask[a] = True
    return mask


# Frames at the end of a run that go one backend call each (see _run_frames): the frame on
# the screen, the one before it (the back buffer) and the one in progress.
_SINGLE_TAIL = 3


def _run_frames(
    native, mask: np.ndarray, buttons: int, frames: int, release: int, ran: np.ndarray
) -> None:
    """The masked envs run ``frames`` frames holding ``buttons`` (others untouched), in calls
    of at most ``release`` frames when buttons are held (see the module doc).

    The last ``_SINGLE_TAIL`` frames run one call each. A call of several frames draws only
    the frames on the screen at its end (templates/hw/lcd.h ``lcd_frame_needed``): the top
    lines of the frame in progress at its end are left undrawn, and would show in the
    observation if the next call were a single frame (gbx.play, ``frames_per_step=1``).
    Single-frame calls at the end leave the screen buffers as frame-by-frame stepping does:
    the state is byte-equal to that of ``env.step`` one frame at a time with the same
    buttons and ``release_after_frames`` (a state holds the pending release of the last
    press; tests/python/test_script.py)."""
    actions = np.where(mask, buttons, 0).astype(np.int32)
    chunk = frames if buttons == 0 or release < 0 else release
    body = max(frames - _SINGLE_TAIL, 0)
    calls = []
    while body > 0:
        calls.append(min(chunk, body))
        body -= calls[-1]
    calls += [1] * min(frames, _SINGLE_TAIL)
    for k in calls:
        native.step_frames(actions, np.where(mask, k, -1).astype(np.int32), gather=False)
    ran[mask] += frames
