"""``python -m gbx.play ROM`` (or ``gbx-play ROM``): play a game in a window, save states.

Needs pygame (``pip install 'gbx[play]'``). One env of :class:`gbx.VecEnv` on the cpu (or
``--device``) runs one frame per step at the Game Boy's 59.73 frames a second; the window
shows the env's pixel observation, each Game Boy pixel ``--scale`` x ``--scale`` screen
pixels.

Keys: arrows = d-pad, X = A, Z = B, Enter = START, Backspace or right Shift = SELECT,
F5 = save a GBX save state to ``--state-file`` (default: ``<ROM name>.gbxstate`` in the
current directory), F9 = load it, Esc or closing the window = quit. ``--load-state FILE``
starts from a saved state. A saved state loads into :class:`gbx.VecEnv` as
``env.load_state(i, blob)`` or ``env.set_reset_state(blob)`` (a start state for training).

``--events FILE`` plays a timed list of key events through pygame's event queue, as a player
would press them (for tests and demos; see :func:`read_events`), and ``--frames N`` quits
after N frames.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from .actions import DOWN, LEFT, RIGHT, SELECT, START, UP, A, B

# One DMG frame is 70224 T-cycles at 4194304 Hz.
FRAMES_PER_SECOND = 4194304 / 70224
# Greys for shades 0..3, as gbx.VecEnv.render (FF, AA, 55, 00).
SHADE_RGB = np.array([[0xFF] * 3, [0xAA] * 3, [0x55] * 3, [0x00] * 3], dtype=np.uint8)
# pygame key names -> joypad bits (gbx.actions order).
KEY_MAP = {
    "up": UP,
    "down": DOWN,
    "left": LEFT,
    "right": RIGHT,
    "x": A,
    "z": B,
    "return": START,
    "enter": START,
    "backspace": SELECT,
    "right shift": SELECT,
}
EVENT_ACTIONS = ("down", "up", "press", "screenshot", "pause", "quit")
INSTALL_HINT = "gbx.play needs pygame: pip install 'gbx[play]'"


class PlayError(Exception):
    """A one-line error of the command line (exit status 2)."""


def default_state_file(rom: str) -> Path:
    """``<ROM name>.gbxstate`` in the current directory (``builtin:ARROWS`` -> ARROWS)."""
    name = rom.split(":", 1)[1] if rom.startswith("builtin:") else Path(rom).stem
    return Path(f"{name or 'game'}.gbxstate")


def read_events(path) -> list[tuple[int, str, str]]:
    """A ``--events`` file: one event a line, ``FRAME ACTION [ARG]``; ``#`` starts a comment.

    - ``FRAME``: the frames emulated when the event happens (0: before the first frame);
      events of one frame happen in file order, before that frame's screenshot and the next
      frame is run.
    - ``down KEY`` / ``up KEY``: a key goes down / up (``KEY``: a pygame key name: ``x``,
      ``z``, ``return``, ``backspace``, ``right shift``, ``up``, ``f5``, ``f9``, ``escape``).
    - ``press KEY``: down then up, in that frame (F5, F9 and Esc act on the key going down;
      a game button pressed so is released before the next frame and never seen).
    - ``screenshot PATH``: the window's contents to the image file PATH (PNG).
    - ``pause SECONDS``: the window stays as it is for that long (no frame runs), e.g. for
      a screenshot of the display taken from outside.
    - ``quit``: the window's close button.
    """
    events = []
    for n, raw in enumerate(Path(path).read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split(None, 2)
        where = f"{path}:{n}"
        if len(parts) < 2 or not parts[0].isdigit():
            raise PlayError(f"{where}: expected 'FRAME ACTION [ARG]', got {raw.strip()!r}")
        frame, action = int(parts[0]), parts[1].lower()
        arg = parts[2].strip() if len(parts) == 3 else ""
        if action not in EVENT_ACTIONS:
            raise PlayError(f"{where}: unknown action {parts[1]!r} ({', '.join(EVENT_ACTIONS)})")
        if (action == "quit") == bool(arg):
            raise PlayError(
                f"{where}: {action} "
                + ("takes no argument" if action == "quit" else "needs an argument")
            )
        if action == "pause":
            try:
                seconds = float(arg)
            except ValueError:
                seconds = -1.0
            if not 0 <= seconds <= 3600:
                raise PlayError(f"{where}: pause takes seconds (0..3600), got {arg!r}")
        events.append((frame, action, arg))
    events.sort(key=lambda e: e[0])  # stable: one frame's events keep the file's order
    return events


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gbx-play",
        description="Play a Game Boy game in a window; F5 saves a GBX save state, F9 loads it.",
        epilog="Keys: arrows = d-pad, X = A, Z = B, Enter = START, Backspace/right Shift = "
        "SELECT, F5 = save state, F9 = load state, Esc = quit.",
    )
    p.add_argument("rom", help="a .gb file or builtin:NAME (e.g. builtin:ARROWS)")
    p.add_argument("--scale", type=int, default=3, help="window pixels per Game Boy pixel (3)")
    p.add_argument("--state-file", help="F5/F9's file (default: <ROM name>.gbxstate here)")
    p.add_argument("--load-state", metavar="FILE", help="start from this GBX save state")
    p.add_argument("--device", default="cpu", help="cpu (default), cuda[:N]")
    p.add_argument(
        "--speed",
        type=float,
        default=1.0,
        help="multiple of the Game Boy's 59.73 frames/s (0: as fast as it runs)",
    )
    p.add_argument("--frames", type=int, help="quit after this many frames")
    p.add_argument("--events", metavar="FILE", help="timed key events to play (read_events)")
    return p


def main(argv=None) -> int:
    """``python -m gbx.play`` / ``gbx-play``: plays ``argv`` (default ``sys.argv[1:]``) in a
    window; returns the exit code (0, or 2 with one line on standard error for bad input)."""
    args = _parser().parse_args(argv)
    try:
        return _play(args)
    except PlayError as e:
        print(f"gbx-play: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _play(args) -> int:
    if args.scale < 1 or args.scale > 16:
        raise PlayError(f"--scale must be 1..16 (got {args.scale})")
    if args.speed < 0:
        raise PlayError(f"--speed must be >= 0 (got {args.speed})")
    if args.frames is not None and args.frames < 0:
        raise PlayError(f"--frames must be >= 0 (got {args.frames})")
    events = read_events(args.events) if args.events else []
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    try:
        import pygame
    except ImportError:
        raise PlayError(INSTALL_HINT) from None
    state_file = Path(args.state_file) if args.state_file else default_state_file(args.rom)
    start_blob = None
    if args.load_state:
        try:
            start_blob = Path(args.load_state).read_bytes()
        except OSError as e:
            raise PlayError(f"--load-state: cannot read {args.load_state}: {e.strerror}") from None

    import gbx

    try:
        env = gbx.VecEnv(
            args.rom,
            1,
            device=args.device,
            frames_per_step=1,
            release_after_frames=1,
            actions="multibinary",
            obs="pixels",
            copy=False,
        )
    except (ValueError, OSError, RuntimeError) as e:
        raise PlayError(f"cannot run {args.rom}: {_one_line(e)}") from None
    try:
        obs, _ = env.reset()  # copy=False: a view the env's steps and loads refresh
        if start_blob is not None:
            try:
                env.load_state(0, start_blob)
            except ValueError as e:
                raise PlayError(f"--load-state {args.load_state}: {_one_line(e)}") from None
        frames, secs = _loop(pygame, env, obs, args, events, state_file)
        print(
            f"gbx-play: {frames} frames in {secs:.2f} s ({frames / max(secs, 1e-9):.2f} frames/s)",
            flush=True,
        )
        return 0
    finally:
        pygame.quit()
        env.close()


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def _loop(pygame, env, obs, args, events, state_file: Path) -> int:
    """Runs the window until quit; returns the frames emulated and the seconds from the first
    frame to the quit (the window's set-up not counted)."""
    s = args.scale
    try:
        pygame.display.init()
        screen = pygame.display.set_mode((160 * s, 144 * s))
    except pygame.error as e:
        raise PlayError(
            f"cannot open a window ({e}): run it on a display (DISPLAY, or "
            "SDL_VIDEODRIVER) or under xvfb-run"
        ) from None
    pygame.display.set_caption(f"GBX - {env.backend.rom_name or args.rom}")
    codes = {}
    for name, bit in KEY_MAP.items():
        codes.setdefault(pygame.key.key_code(name), bit)
    key_events = []  # (frame, pygame event), from --events
    screenshot_event = pygame.event.custom_type()
    pause_event = pygame.event.custom_type()
    for frame, action, arg in events:
        if action == "quit":
            key_events.append((frame, pygame.event.Event(pygame.QUIT)))
            continue
        if action == "screenshot":
            key_events.append((frame, pygame.event.Event(screenshot_event, path=arg)))
            continue
        if action == "pause":
            key_events.append((frame, pygame.event.Event(pause_event, seconds=float(arg))))
            continue
        try:
            code = pygame.key.key_code(arg)
        except ValueError:
            raise PlayError(
                f"--events: unknown key name {arg!r} (pygame key names: x, "
                "return, right shift, f5 ...)"
            ) from None
        kinds = {
            "down": [pygame.KEYDOWN],
            "up": [pygame.KEYUP],
            "press": [pygame.KEYDOWN, pygame.KEYUP],
        }[action]
        for kind in kinds:
            key_events.append(
                (frame, pygame.event.Event(kind, key=code, mod=0, scancode=0, unicode=""))
            )

    def draw():
        rgb = SHADE_RGB[obs[0]]  # (144, 160, 3)
        if s > 1:
            rgb = np.repeat(np.repeat(rgb, s, axis=0), s, axis=1)
        pygame.surfarray.blit_array(screen, rgb.transpose(1, 0, 2))
        pygame.display.flip()

    held: set[int] = set()
    action = np.zeros((1, 8), dtype=np.int8)
    period = 1.0 / (FRAMES_PER_SECOND * args.speed) if args.speed > 0 else 0.0
    frame, next_event = 0, 0
    deadline = t_start = time.perf_counter()
    draw()
    while True:
        while next_event < len(key_events) and key_events[next_event][0] <= frame:
            pygame.event.post(key_events[next_event][1])
            next_event += 1
        for ev in pygame.event.get():
            if ev.type == pygame.QUIT:
                return frame, time.perf_counter() - t_start
            if ev.type == screenshot_event:
                pygame.image.save(screen, ev.path)
                print(f"gbx-play: frame {frame}: screenshot {ev.path}", flush=True)
            elif ev.type == pause_event:
                print(f"gbx-play: frame {frame}: pause {ev.seconds:g} s", flush=True)
                time.sleep(ev.seconds)
                deadline = time.perf_counter()
            elif ev.type == pygame.KEYDOWN:
                if ev.key == pygame.K_ESCAPE:
                    return frame, time.perf_counter() - t_start
                if ev.key == pygame.K_F5:
                    _save(env, state_file, frame)
                elif ev.key == pygame.K_F9:
                    if _load(env, state_file, frame):
                        draw()
                elif ev.key in codes:
                    held.add(ev.key)
            elif ev.type == pygame.KEYUP:
                held.discard(ev.key)
            elif ev.type == getattr(pygame, "WINDOWFOCUSLOST", None):
                held.clear()  # a key released in another window would stay down
        if args.frames is not None and frame >= args.frames:
            return frame, time.perf_counter() - t_start
        buttons = 0
        for k in held:
            buttons |= codes[k]
        action[0] = [(buttons >> i) & 1 for i in range(8)]
        obs, *_ = env.step(action)
        frame += 1
        draw()
        if period:
            deadline += period
            wait = deadline - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            elif wait < -0.25:  # far behind (a slow frame, a dragged window): no catching up
                deadline = time.perf_counter()


def _save(env, path: Path, frame: int) -> None:
    blob = env.save_state(0)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_bytes(blob)
        os.replace(tmp, path)
    except OSError as e:
        print(
            f"gbx-play: frame {frame}: cannot save the state to {path}: {e.strerror}",
            file=sys.stderr,
            flush=True,
        )
        return
    print(f"gbx-play: frame {frame}: saved state to {path} ({len(blob)} bytes)", flush=True)


def _load(env, path: Path, frame: int) -> bool:
    try:
        blob = path.read_bytes()
    except OSError as e:
        print(
            f"gbx-play: frame {frame}: no state to load from {path} ({e.strerror}; F5 saves one)",
            file=sys.stderr,
            flush=True,
        )
        return False
    try:
        env.load_state(0, blob)
    except ValueError as e:
        print(
            f"gbx-play: frame {frame}: cannot load {path}: {_one_line(e)}",
            file=sys.stderr,
            flush=True,
        )
        return False
    print(f"gbx-play: frame {frame}: loaded state from {path}", flush=True)
    return True


if __name__ == "__main__":
    sys.exit(main())
