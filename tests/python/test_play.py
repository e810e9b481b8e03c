"""python -m gbx.play: the window, headless under Xvfb (else SDL's dummy video driver), driven
by --events through pygame's event queue: screenshots equal the env's observation of the same
frame, F5/F9 round-trip a state, frames are paced at 59.73 a second; bad input is one line."""

import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pygame = pytest.importorskip("pygame", reason="gbx.play needs pygame (pip install 'gbx[play]')")

ARROWS = "builtin:ARROWS"
SCALE = 2
SHADE_RGB = np.array([[0xFF] * 3, [0xAA] * 3, [0x55] * 3, [0x00] * 3], dtype=np.uint8)


def _start_xvfb(fbdir):
    """An Xvfb server on a free display, its screen as an XWD file in ``fbdir`` (black root
    window): (process, display) or None."""
    if shutil.which("Xvfb") is None:
        return None
    r, w = os.pipe()
    proc = subprocess.Popen(
        [
            "Xvfb",
            "-displayfd",
            str(w),
            "-screen",
            "0",
            "640x480x24",
            "-fbdir",
            str(fbdir),
            "-br",
            "-nolisten",
            "tcp",
        ],
        pass_fds=(w,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(w)
    number = b""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not number.endswith(b"\n"):
        ready, _, _ = select.select([r], [], [], 0.5)
        if ready:
            chunk = os.read(r, 16)
            if not chunk:
                break
            number += chunk
        elif proc.poll() is not None:
            break
    os.close(r)
    if not number.strip().isdigit():
        proc.kill()
        proc.wait()
        return None
    return proc, ":" + number.strip().decode()


@pytest.fixture(scope="module")
def display_env(tmp_path_factory):
    """The environment for gbx.play's subprocess: Xvfb's display where there is one (then
    XVFB_FBDIR names the directory of its screen's XWD file)."""
    env = dict(os.environ)
    env.pop("PYGAME_HIDE_SUPPORT_PROMPT", None)
    fbdir = tmp_path_factory.mktemp("xvfb")
    xvfb = _start_xvfb(fbdir)
    if xvfb is not None:
        proc, display = xvfb
        env.update(DISPLAY=display, SDL_VIDEODRIVER="x11", XVFB_FBDIR=str(fbdir))
        yield env
        proc.terminate()
        proc.wait()
        return
    # No Xvfb (scripts/setup.sh installs it): SDL's dummy driver still runs the window code.
    env.update(SDL_VIDEODRIVER="dummy")
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import pygame; pygame.display.init(); pygame.display.set_mode((8, 8))",
        ],
        env=env,
        capture_output=True,
    )
    if probe.returncode != 0:
        pytest.skip(
            "no display: neither Xvfb nor SDL's dummy video driver works "
            f"({probe.stderr.decode().strip().splitlines()[-1:]})"
        )
    yield env


def play(display_env, *args, cwd, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "gbx.play", *args],
        env=display_env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def reference_env(gbx):
    """gbx.play's env: one frame a step, buttons as multibinary, the screen as obs."""
    env = gbx.VecEnv(
        ARROWS, 1, frames_per_step=1, release_after_frames=1, actions="multibinary", obs="pixels"
    )
    env.reset()
    return env


def press(bits=()):
    a = np.zeros((1, 8), dtype=np.int8)
    for b in bits:
        a[0, b] = 1
    return a


def screenshot(path) -> np.ndarray:
    """The saved window as uint8[144 * SCALE, 160 * SCALE, 3]."""
    img = pygame.surfarray.array3d(pygame.image.load(str(path)))
    return img.transpose(1, 0, 2)


def expected(obs) -> np.ndarray:
    rgb = SHADE_RGB[obs[0]]
    return np.repeat(np.repeat(rgb, SCALE, axis=0), SCALE, axis=1)


RIGHT, UP = 4, 6  # gbx.actions bit order: A B SELECT START RIGHT LEFT UP DOWN


def test_screenshots_and_state_round_trip(gbx, display_env, tmp_path):
    (tmp_path / "events.txt").write_text("""
        3 down right        # ARROWS: a press starts a new round with a new arrow
        6 up right
        12 press f5         # save at frame 12
        12 screenshot s12.png
        18 down up
        21 up up
        30 screenshot s30.png
        30 press f9         # back to frame 12's state
        30 screenshot s30b.png
        36 screenshot s36.png
        40 press escape
    """)
    r = play(
        display_env,
        ARROWS,
        "--scale",
        str(SCALE),
        "--events",
        "events.txt",
        "--state-file",
        "my.state",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert "frame 12: saved state to my.state" in r.stdout
    assert "frame 30: loaded state from my.state" in r.stdout
    assert "40 frames in" in r.stdout

    # The same inputs on the env directly: the key held at frame k is the input of step k+1.
    env = reference_env(gbx)
    for k in range(12):
        obs, *_ = env.step(press([RIGHT] if 3 <= k < 6 else []))
    s12 = expected(obs)
    assert (tmp_path / "my.state").read_bytes() == env.save_state(0)  # F5 saved frame 12
    state12 = env.save_state(0)
    for k in range(12, 30):
        obs, *_ = env.step(press([UP] if 18 <= k < 21 else []))
    s30 = expected(obs)
    env.load_state(0, state12)
    for _ in range(6):
        obs, *_ = env.step(press())
    s36 = expected(obs)
    env.close()

    shots = {name: screenshot(tmp_path / f"{name}.png") for name in ("s12", "s30", "s30b", "s36")}
    assert shots["s12"].shape == (144 * SCALE, 160 * SCALE, 3)
    for name, img in shots.items():
        assert len(np.unique(img.reshape(-1, 3), axis=0)) >= 2, f"{name} is blank"
    assert np.array_equal(shots["s12"], s12)
    assert np.array_equal(shots["s30"], s30)
    assert not np.array_equal(s12, s30)  # the second press changed the screen...
    assert np.array_equal(shots["s30b"], s12)  # ...and F9 brought frame 12's back
    assert np.array_equal(shots["s36"], s36)


def read_xwd(path) -> np.ndarray:
    """An X window dump (Xvfb -fbdir's screen, 24-bit TrueColor) as uint8[height, width, 3]."""
    data = Path(path).read_bytes()
    h = np.frombuffer(data[:100], dtype=">u4")
    header_size, version, width, height = int(h[0]), int(h[1]), int(h[4]), int(h[5])
    byte_order, bpp, bytes_per_line, ncolors = int(h[7]), int(h[11]), int(h[12]), int(h[19])
    masks = [int(m) for m in h[14:17]]
    assert version == 7 and bpp == 32, (version, bpp)
    start = header_size + 12 * ncolors
    rows = np.frombuffer(
        data,
        dtype="<u4" if byte_order == 0 else ">u4",
        count=height * bytes_per_line // 4,
        offset=start,
    )
    px = rows.reshape(height, bytes_per_line // 4)[:, :width]
    shifts = [(m & -m).bit_length() - 1 for m in masks]
    return np.stack([(px & m) >> sh for m, sh in zip(masks, shifts)], axis=-1).astype(np.uint8)


def test_the_x_screen_shows_the_observation(gbx, display_env, tmp_path):
    """Under Xvfb: the X server's own framebuffer (not pygame's surface) holds the window
    showing the env's observation, read while the window pauses."""
    if "XVFB_FBDIR" not in display_env:
        pytest.skip("no Xvfb (SDL's dummy driver has no screen to look at)")
    (tmp_path / "events.txt").write_text("5 down right\n8 up right\n20 pause 4\n21 quit\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gbx.play", ARROWS, "--scale", str(SCALE), "--events", "events.txt"],
        env=display_env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "frame 20: pause" in line:
                break
        assert lines and "pause" in lines[-1], (lines, proc.stderr.read())
        time.sleep(1.0)  # the window's last frame reaches the X server
        screen = read_xwd(Path(display_env["XVFB_FBDIR"]) / "Xvfb_screen0")
    finally:
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    env = reference_env(gbx)
    for k in range(20):
        obs, *_ = env.step(press([RIGHT] if 5 <= k < 8 else []))
    env.close()
    want = expected(obs)
    # The window: where the screen is not the black root window (ARROWS' background is white).
    ys, xs = np.nonzero(screen.any(axis=-1))
    assert ys.size, "the X screen is all black: no window"
    y0, x0 = ys.min(), xs.min()
    assert (ys.max() - y0 + 1, xs.max() - x0 + 1) == want.shape[:2]
    assert np.array_equal(screen[y0 : y0 + want.shape[0], x0 : x0 + want.shape[1]], want)


def test_load_state_at_start_and_pacing(gbx, display_env, tmp_path):
    env = reference_env(gbx)
    for k in range(8):
        env.step(press([UP] if k < 3 else []))
    (tmp_path / "start.gbxstate").write_bytes(env.save_state(0))
    for _ in range(90):
        obs, *_ = env.step(press())
    env.close()
    (tmp_path / "events.txt").write_text("90 screenshot end.png\n")
    r = play(
        display_env,
        ARROWS,
        "--scale",
        str(SCALE),
        "--load-state",
        "start.gbxstate",
        "--events",
        "events.txt",
        "--frames",
        "90",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert np.array_equal(screenshot(tmp_path / "end.png"), expected(obs))
    fps = float(r.stdout.rsplit("(", 1)[1].split()[0])
    # Paced at 59.73 frames/s: never faster (90 frames take at least 1.5 s); the lower bound
    # allows a loaded machine (the frames themselves take about a millisecond).
    assert 20.0 < fps < 60.0, r.stdout
    # F9 with no state file yet: a message, and play goes on.
    (tmp_path / "events.txt").write_text("2 press f9\n")
    r = play(
        display_env, ARROWS, "--events", "events.txt", "--frames", "5", "--speed", "0", cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    assert "no state to load from ARROWS.gbxstate" in r.stderr
    assert "5 frames in" in r.stdout


def test_bad_input_is_one_line(display_env, tmp_path):
    (tmp_path / "junk.state").write_bytes(b"not a state")
    (tmp_path / "bad.txt").write_text("3 jump x\n")
    (tmp_path / "badkey.txt").write_text("3 press nosuchkey\n")
    (tmp_path / "badpause.txt").write_text("1 down x\n3 pause soon\n")
    cases = [
        (
            ["/nonexistent/game.gb"],
            "cannot run /nonexistent/game.gb: ROM '/nonexistent/game.gb': no such file",
        ),
        ([ARROWS, "--load-state", "missing.state"], "--load-state: cannot read missing.state"),
        ([ARROWS, "--load-state", "junk.state"], "--load-state junk.state:"),
        ([ARROWS, "--events", "bad.txt"], "bad.txt:1: unknown action 'jump'"),
        ([ARROWS, "--events", "badkey.txt"], "unknown key name 'nosuchkey'"),
        ([ARROWS, "--events", "badpause.txt"], "badpause.txt:2: pause takes seconds"),
        ([ARROWS, "--scale", "0"], "--scale must be 1..16"),
    ]
    for args, message in cases:
        r = play(display_env, *args, cwd=tmp_path)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gbx-play: error: "), (args, r.stderr)
        assert message in lines[0], (args, lines[0])


def test_without_pygame_one_line(monkeypatch, capsys):
    from gbx import play as play_module

    monkeypatch.setitem(sys.modules, "pygame", None)  # import pygame raises ImportError
    assert play_module.main([ARROWS]) == 2
    assert capsys.readouterr().err == (
        "gbx-play: error: gbx.play needs pygame: pip install 'gbx[play]'\n"
    )


def test_console_script():
    exe = Path(sys.executable).parent / "gbx-play"
    assert exe.exists(), "pyproject.toml's [project.scripts] gbx-play is not installed"
    r = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "F5" in r.stdout
