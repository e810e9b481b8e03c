"""reset() shows the game (docs/guide/states.md "The screen in a state"): the first observation
after reset() to a gbx.make profile's start state is the screen an env that draws showed at the
recipe's end (same ppu model), the recipe replayed here one env.step a frame; a state saved
after a kernel that draws nothing ran says it holds no screen (gbx.state_has_screen), a drawing
env given one warns, and its screen is real again once it has drawn a frame whole (2 frames on);
drawing or not leaves the machine's trajectory as it was. 2048.gb and libbet.gb come from
../shared/games (skipped per case without them)."""

import os
import warnings

import numpy as np
import pytest

GAMES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "games")
# The state records that only a kernel that draws keeps (GbxState's lcd_* fields).
SCREEN_FIELDS = {"lcd_fb", "lcd_flags", "lcd_win_line", "lcd_fifo"}


def shared_rom(name):
    path = os.path.join(GAMES, name)
    if not os.path.isfile(path):
        pytest.skip(f"{path} not present (../shared/games)")
    return path


def replay(gbx, env, recipe):
    """Runs a start recipe on a 1-env drawing env made with frames_per_step=1 and
    actions="multibinary", one env.step per frame (not gbx.script); returns the last obs."""
    from gbx.expressions import HostExpression
    from gbx.scripting import parse_buttons

    obs, _ = env.reset(seed=0)

    def step(byte):
        bits = np.array([[(byte >> i) & 1 for i in range(8)]], dtype=np.int64)
        return env.step(bits)[0]

    for s in recipe:
        if s[0] == "until":
            cond = HostExpression(s[1], "test")
            for _ in range(s[2]):
                if cond.truth(env)[0]:
                    break
                obs = step(0)
            assert cond.truth(env)[0], s
            continue
        byte = 0 if s[0] == "wait" else parse_buttons(s[0])
        for _ in range(s[1]):
            obs = step(byte)
    return obs[0]


@pytest.mark.parametrize(
    "game, rom, ppu", [("2048", "2048.gb", "fifo"), ("libbet", "libbet.gb", "line")]
)
def test_make_resets_to_the_recipes_last_screen(gbx, game, rom, ppu):
    path = shared_rom(rom)
    profile = gbx.games.get(game)
    ref = gbx.VecEnv(
        path, 1, frames_per_step=1, release_after_frames=1, actions="multibinary", ppu=ppu
    )
    want = replay(gbx, ref, profile.start)
    ref.close()
    # The game's screen (a blank one would make the comparison below vacuous).
    assert (want != 0).sum() > 1000, (want != 0).sum()

    # Without the profile's reward expressions (the reset path does not depend on them; the
    # plain pixel kernel is one the other tests compile too) and without no-op frames.
    env = gbx.make(game, 2, rom=path, ppu=ppu, noop_max=0, seed=0, reward=None, done=None, track=())
    obs, _ = env.reset(seed=0)
    for i in range(2):
        np.testing.assert_array_equal(obs[i], want, err_msg=f"{game}: env {i} after reset()")
    assert gbx.state_has_screen(env.start_state) is True
    # A masked reset and an autoreset return to the same screen.
    env.step(np.array([1, 2]))
    obs, _ = env.reset(options={"reset_mask": np.array([False, True])})
    np.testing.assert_array_equal(obs[1], want, err_msg=f"{game}: masked reset")
    env.close()


def _records(gbx, blob):
    from gbx.pyboy_compat import _split_blob

    return dict(_split_blob(blob)[1])


def test_a_state_says_whether_it_holds_the_screen(gbx):
    path = shared_rom("libbet.gb")
    kw = dict(frames_per_step=1, release_after_frames=1, seed=0)
    ram = gbx.VecEnv(path, 1, obs={"ram": [0xC000]}, **kw)
    draw = gbx.VecEnv(path, 1, **kw)  # pixels: draws
    assert gbx.state_has_screen(bytes(gbx._native.post_boot_state(path))) is True
    ram.reset(seed=0)
    draw.reset(seed=0)
    assert gbx.state_has_screen(ram.save_state(0)) is True  # nothing ran yet
    zeros = np.zeros(1, dtype=np.int64)
    for _ in range(150):  # the copyright screen (libbet's first, from frame ~10)
        ram.step(zeros)
        obs_draw = draw.step(zeros)[0]
    screenless, drawn = ram.save_state(0), draw.save_state(0)
    assert gbx.state_has_screen(screenless) is False
    assert gbx.state_has_screen(drawn) is True
    assert (obs_draw[0] != 0).sum() > 200
    # The same machine: only the framebuffers and the renderer's fields differ.
    a, b = _records(gbx, screenless), _records(gbx, drawn)
    assert a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] and {k for k in a if a[k] != b[k]} <= SCREEN_FIELDS

    # A drawing env given a screenless state warns (load_state, set_reset_state, a pool) ...
    with pytest.warns(gbx.ScreenlessStateWarning, match="load_state\\(0\\): the state holds"):
        draw.load_state(0, screenless)
    with pytest.warns(gbx.ScreenlessStateWarning, match="1 of 2 states hold no screen"):
        draw.set_reset_state([screenless, drawn], pool=True)
    with pytest.warns(gbx.ScreenlessStateWarning, match="set_reset_state"):
        draw.set_reset_state(screenless)
    # ... a non-drawing env or a state with a screen does not.
    with warnings.catch_warnings():
        warnings.simplefilter("error", gbx.ScreenlessStateWarning)
        ram.load_state(0, screenless)
        ram.set_reset_state(drawn)
        draw.set_reset_state(drawn)
        draw.load_state(0, drawn)
    # ... and shows the framebuffer the state holds (white: libbet never drew in `ram`) until
    # it has drawn a frame from its top line: the first VBlank after the load shows a frame
    # drawn from mid-screen only, still no screen; the second is the real one.
    with pytest.warns(gbx.ScreenlessStateWarning):
        draw.load_state(0, screenless)
    ref = gbx.VecEnv(path, 1, **kw)
    ref.reset(seed=0)
    ref.load_state(0, drawn)
    assert (draw.backend.screen(0) == 0).all()
    draw.step(zeros)
    ref.step(zeros)
    assert gbx.state_has_screen(draw.save_state(0)) is False
    obs, *_ = draw.step(zeros)
    obs_ref, *_ = ref.step(zeros)
    assert gbx.state_has_screen(draw.save_state(0)) is True
    np.testing.assert_array_equal(obs, obs_ref)

    # A state with a screen run on a kernel that draws nothing: no screen once a frame ran
    # (load_state's output refresh runs none).
    ram.load_state(0, drawn)
    assert gbx.state_has_screen(ram.save_state(0)) is True
    ram.step(zeros)
    assert gbx.state_has_screen(ram.save_state(0)) is False
    for e in (ram, draw, ref):
        e.close()


def test_state_has_screen_bad_input(gbx):
    for bad in (b"", b"GBXS" + bytes(60), b"not a state" * 10):
        with pytest.raises(ValueError, match="not a GBX save state"):
            gbx.state_has_screen(bad)
    with pytest.raises(TypeError, match="a save state is bytes"):
        gbx.state_has_screen("x")
