"""gbx.games: profiles as data, the cartridge check, start recipes; the Pokémon profile's
logic on a stand-in ROM that writes its addresses (its kernel reward checked against the host
terms it replaced); 2048.gb and libbet.gb (from ../shared/games, skipped per case without
them): the score bytes track the game."""

import dataclasses
import hashlib
import os

import numpy as np
import pytest
from romutil import COUNTER_ROM, POKEMON_STANDIN_ROM, assemble, make_rom

GAMES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "games")


def shared_rom(name):
    path = os.path.join(GAMES, name)
    if not os.path.isfile(path):
        pytest.skip(f"{path} not present (../shared/games)")
    return path


# buttons8: 0 noop, 1 A, 2 B, 3 SELECT, 4 START, 5 RIGHT, 6 LEFT, 7 UP, 8 DOWN
NOOP, A, B, SELECT, START, RIGHT, LEFT, UP, DOWN = range(9)


def standin_profile(gbx):
    """The Pokémon Red profile (addresses, reward, intro recipe) for the stand-in,
    with buttons8 actions so that SELECT (the stand-in's level-up) can be pressed."""
    return dataclasses.replace(
        gbx.games.get("pokemon_red"),
        name="pokemon_standin",
        sha1=hashlib.sha1(POKEMON_STANDIN_ROM).hexdigest(),
        actions="buttons8",
    )


def test_profiles_are_data(gbx):
    names = set(gbx.games.PROFILES)
    assert {"arrows", "2048", "libbet", "pokemon_red", "pokemon_blue"} <= names
    red = gbx.games.get("pokemon_red")
    assert red.ram["map_id"] == 0xD35E and red.ram["x"] == 0xD362 and red.ram["y"] == 0xD361
    assert red.ram["badges"] == 0xD356 and red.ram["event_flags"] == (0xD747, 0xD887)
    assert red.ram["party_levels"] == (0xD18C, 0xD1B8, 0xD1E4, 0xD210, 0xD23C, 0xD268)
    assert red.ram["party_hp"][0] == 0xD16C and red.ram["money_bcd"] == (0xD347, 0xD34A)
    assert red.start[-1] == ("until", "ram(0xD35E) == 38", 3600)
    with pytest.raises(ValueError, match="unknown game 'nope'"):
        gbx.games.get("nope")


def test_pokemon_event_flags_are_all_320_bytes(gbx):
    """wEventFlags is 0xA00 flag bits from 0xD747 (pret/pokered): the profile's range and its
    tracked popcount cover 0xD747..0xD886 and nothing beside them. A ROM clears D740-D8FF and
    sets every bit of 0xD746, 0xD747, 0xD886 and 0xD887: the count is the inner two bytes'."""
    lo, hi = gbx.games.POKEMON_RAM["event_flags"]
    assert (lo, hi - lo) == (0xD747, 320)
    events = gbx.games.get("pokemon_red").track[2]
    assert events == "popcount(0xd747, 0xd886)"
    program = [b"\x21\x40\xd7", "clear", b"\xaf\x22\x7c\xfe\xd9", ("jr", 0x20, "clear")]
    program.append(b"\x3e\xff")  # LD A,0xFF; then LD (addr),A for each edge byte
    program += [bytes([0xEA, a & 0xFF, a >> 8]) for a in (0xD746, 0xD747, 0xD886, 0xD887)]
    program += ["spin", ("jr", 0x18, "spin")]
    env = gbx.VecEnv(make_rom(assemble(program)), 1, obs="vec", frames_per_step=1, reward=events)
    env.reset(seed=0)
    _, r, *_ = env.step(np.zeros(1, np.int64))
    assert r[0] == 16.0
    env.close()


def test_wrong_cartridge_is_one_clear_error(gbx):
    with pytest.raises(gbx.games.WrongCartridgeError) as e:
        gbx.make("pokemon_red", 1, rom=POKEMON_STANDIN_ROM)
    msg = str(e.value)
    assert "\n" not in msg and "ea9bcae617fdf159b045185467ae58b2e4a48b9a" in msg
    assert hashlib.sha1(POKEMON_STANDIN_ROM).hexdigest() in msg
    assert isinstance(e.value, ValueError)
    with pytest.raises(gbx.games.WrongCartridgeError, match="game '2048'"):
        gbx.make("2048", 1, rom=COUNTER_ROM)
    with pytest.raises(ValueError, match="needs its cartridge: pass rom=PATH"):
        gbx.make("pokemon_blue", 1)
    with pytest.raises(FileNotFoundError):
        gbx.make("2048", 1, rom="/nonexistent/2048.gb")


def test_recipe_checks(gbx):
    check = gbx.games.check_recipe
    check([("start", 4), ("wait", 60), ("a+b", 2), ("until", "ram(0xD35E) == 38", 600)])
    for bad in (
        [("jump", 4)],
        [("noop", 4)],  # a script holds buttons: ("wait", n) is the step without one
        [("a+a", 4)],
        [("wait", 0)],
        [("a",)],
        [("until", "ram(1)", 0)],
        [("until", "", 10)],
        "start",
        [["wait", True]],
    ):
        with pytest.raises(ValueError, match="start recipe|a start recipe"):
            check(bad)


def test_custom_action_set(gbx):
    env = gbx.VecEnv(
        "builtin:ARROWS", 2, actions=("up", "down", "noop", "b+left"), obs={"ram": [0xC000]}
    )
    assert env.single_action_space.n == 4
    with pytest.raises(ValueError, match="unknown button 'jump'"):
        gbx.VecEnv("builtin:ARROWS", 1, actions=("up", "jump"))
    env.close()


def test_arrows_profile_scores_pressing_the_arrow(gbx):
    env = gbx.make("arrows", 8, obs="ram", seed=1)
    obs, _ = env.reset(seed=1)
    assert obs.shape == (8, 1)
    total = 0.0
    for _ in range(16):
        arrow = env.read_memory(0xC002, 0xC003)[:, 0]
        right = np.array([7, 6, 4, 5], np.int64)[arrow]  # the arrow's own direction
        _, r, *_ = env.step(right)
        total += float(r.sum())
    assert total >= 8 * 14  # every press after the first scores (autoresets aside)
    env.close()


def test_pokemon_profile_on_a_standin(gbx):
    profile = standin_profile(gbx)
    with pytest.raises(
        gbx.games.RecipeTimeout, match="the condition did not hold within 10 frames"
    ):
        gbx.games.start_state(POKEMON_STANDIN_ROM, [("until", "ram(0xD35E) == 99", 10)])
    env = gbx.make(profile, 2, rom=POKEMON_STANDIN_ROM, obs="ram", seed=0)
    assert env.start_state is not None
    obs, _ = env.reset(seed=0)
    # the intro recipe reached the player's room (wCurMap 38), x 3
    mem = env.read_memory(0xD35E, 0xD363)
    assert list(mem[:, 0]) == [38, 38] and list(mem[:, 4]) == [3, 3]
    assert obs.shape == (2, len(profile.obs_ram)) and list(obs[:, 0]) == [38, 38]

    def step(a0, a1=NOOP):
        _, r, term, trunc, info = env.step(np.array([a0, a1]))
        return [round(float(x), 4) for x in r]

    assert step(RIGHT) == [0.1, 0.0]  # a new tile
    assert step(LEFT) == [0.0, 0.0]  # back on the start tile: seen
    assert step(RIGHT) == [0.0, 0.0]  # seen
    assert step(RIGHT, UP) == [0.1, 0.1]  # new tiles
    assert step(B) == [4.0, 0.0]  # one event flag
    assert step(SELECT) == [1.0, 0.0]  # party level 5 -> 6
    assert step(START, START) == [10.0, 10.0]  # a badge
    assert step(NOOP) == [0.0, 0.0]
    # A new episode forgets the tiles it saw: env 0 back at the start state.
    env.reset(options={"reset_mask": np.array([True, False])})
    assert env.read_memory(0xD362, 0xD363)[0, 0] == 3
    assert step(RIGHT, RIGHT) == [0.1, 0.1]  # env 0 again, env 1: x 4 is new to it
    assert step(RIGHT, LEFT) == [0.1, 0.0]
    env.close()


def test_pokemon_levels_cap_and_episode_return(gbx):
    profile = dataclasses.replace(standin_profile(gbx), max_episode_frames=24 * 30)
    env = gbx.make(profile, 1, rom=POKEMON_STANDIN_ROM, obs="ram")
    env.reset(seed=0)
    rewards = []
    for _ in range(29):  # level 5 -> 34: +17 to 22, then a quarter a level
        _, r, term, trunc, info = env.step(np.array([SELECT]))
        rewards.append(float(r[0]))
    assert rewards[:17] == [1.0] * 17 and rewards[17:] == [0.25] * 12
    _, r, term, trunc, info = env.step(np.array([RIGHT]))
    assert trunc[0] and info["_episode"][0]
    assert info["episode"]["r"][0] == pytest.approx(17 + 3 + 0.1)
    env.close()


class _HostTerms:
    """The Pokémon profiles' event and exploration rewards as gbx.games computed them on the
    host before they moved into the kernel: 4 per event-flag bit newly set in [0xD747,
    0xD887) and 0.1 per (map, x, y) new to the episode, from one read_memory after each step,
    restarted from the reset state for envs that reset."""

    LO, HI = 0xD35E, 0xD887
    POPCOUNT = np.array([bin(i).count("1") for i in range(256)], np.int64)

    def __init__(self, mem):
        n = mem.shape[0]
        self.prev = np.zeros(n, np.int64)
        self.seen = [set() for _ in range(n)]
        self.restart(mem, np.ones(n, bool))

    def _events(self, mem):
        return self.POPCOUNT[mem[:, 0xD747 - self.LO : 0xD887 - self.LO]].sum(axis=1)

    def _keys(self, mem):
        m = mem.astype(np.int64)
        return m[:, 0] << 16 | m[:, 0xD362 - self.LO] << 8 | m[:, 0xD361 - self.LO]

    def restart(self, mem, mask):
        self.prev[mask] = self._events(mem)[mask]
        for i in np.flatnonzero(mask):
            self.seen[i] = {int(self._keys(mem)[i])}

    def step(self, mem, resetting):
        events = np.zeros(len(mem), np.float32)
        events[:] = 4.0 * (self._events(mem) - self.prev)
        self.prev = self._events(mem)
        seen = np.zeros(len(mem), np.float32)
        for i, k in enumerate(self._keys(mem).tolist()):
            if k not in self.seen[i]:
                self.seen[i].add(k)
                seen[i] = 0.1
        extra = np.zeros(len(mem), np.float32)
        extra += events
        extra += seen
        if resetting.any():
            self.restart(mem, resetting)
            extra[resetting] = 0.0
        return extra


def test_pokemon_reward_in_the_kernel_equals_the_host_terms(gbx):
    """The Pokémon reward computed in the kernel (popcount, seen) equals, to the bit, the
    kernel part it had before (levels, badges) plus the host terms it replaced, over 300
    random steps of 4 envs with autoresets (40-step episodes) and a masked reset."""
    profile = dataclasses.replace(standin_profile(gbx), max_episode_frames=24 * 40)
    n = 4
    env = gbx.make(profile, n, rom=POKEMON_STANDIN_ROM, obs="ram", seed=0)
    badges = " + ".join(f"((ram(0xd356) >> {b}) & 1)" for b in range(8))
    old = gbx.VecEnv(
        POKEMON_STANDIN_ROM,
        n,
        frames_per_step=profile.frames_per_step,
        release_after_frames=profile.release_after_frames,
        actions=profile.actions,
        max_episode_frames=profile.max_episode_frames,
        obs={"ram": list(profile.obs_ram)},
        track=[profile.track[0], badges],
        reward="(val(0) - prev(0)) + 10 * (val(1) - prev(1))",
    )
    old.set_reset_state(env.start_state)
    env.reset(seed=0)
    old.reset(seed=0)
    terms = _HostTerms(old.read_memory(_HostTerms.LO, _HostTerms.HI))
    rng = np.random.default_rng(7)
    needs_reset = np.zeros(n, bool)
    ret = np.zeros(n)  # the episode returns the host terms gave
    nonzero = 0
    for t in range(300):
        if t == 150:  # a masked reset: env 2 starts over (its terms restart)
            mask = np.array([False, False, True, False])
            env.reset(options={"reset_mask": mask})
            old.reset(options={"reset_mask": mask})
            terms.restart(old.read_memory(_HostTerms.LO, _HostTerms.HI), mask)
            needs_reset &= ~mask
            ret[mask] = 0.0
        actions = rng.integers(0, 9, n)
        _, r, term, trunc, info = env.step(actions)
        _, base, term_old, trunc_old, info_old = old.step(actions)
        want = base + terms.step(old.read_memory(_HostTerms.LO, _HostTerms.HI), needs_reset)
        want[needs_reset] = 0.0
        assert r.dtype == want.dtype == np.float32
        assert np.array_equal(r, want), (t, r, want)
        assert np.array_equal(term | trunc, term_old | trunc_old)
        ret[needs_reset] = 0.0
        ret += want
        if "episode" in info:
            ended = info["_episode"]
            assert np.array_equal(info["episode"]["r"][ended], ret[ended].astype(np.float32))
            assert set(np.flatnonzero(ended)) == set(np.flatnonzero(info_old["_episode"]))
        needs_reset = term | trunc
        nonzero += int((r != 0).sum())
    assert nonzero > 100  # the random walk found new tiles, flags, levels and badges
    env.close()
    old.close()


# -- the homebrew games in ../shared/games ----------------------------------------------------


def _bcd_score(env):
    b = env.read_memory(0xFFB0, 0xFFB3).astype(int)
    return ((b >> 4) * 10 + (b & 15)) @ np.array([10000, 100, 1])


def _score_on_screen(env):
    """2048's score as the screen shows it: the six digit tiles after "Score" on the bottom
    row of the BG map (row 17, columns 3-8; tile 0xE8 + digit; the game does not scroll),
    read from VRAM."""
    row = env.read_memory(0x9800 + 32 * 17 + 3, 0x9800 + 32 * 17 + 9).astype(int) - 0xE8
    assert ((row >= 0) & (row <= 9)).all(), row
    return row @ np.array([100000, 10000, 1000, 100, 10, 1])


def test_2048_score_tracks_the_screen(gbx):
    rom = shared_rom("2048.gb")
    env = gbx.make("2048", 4, rom=rom, obs="ram", seed=3)
    obs, _ = env.reset(seed=3)
    assert (_bcd_score(env) == 0).all() and (obs > 0).sum(axis=1).tolist() == [2] * 4
    rng = np.random.default_rng(3)
    total = np.zeros(4)
    for _t in range(40):
        _, r, term, trunc, _ = env.step(rng.integers(0, 4, 4))
        assert not (term | trunc).any()  # 40 moves cannot fill the grid
        total += r
    score = _bcd_score(env)
    assert (score > 0).all() and len(set(score.tolist())) > 1, score
    assert list(total) == list(score)  # the reward is the score's increase
    assert list(_score_on_screen(env)) == list(score)
    env.close()


def test_2048_ramsearch_finds_the_score(gbx):
    """How the profile's address was found: after a move that merged tiles (fewer tiles than
    before plus the new one) keep the bytes that changed; after any other move, the bytes
    that did not. Two remain: the score's low BCD byte and the high score's."""
    rom = shared_rom("2048.gb")
    env = gbx.make("2048", 1, rom=rom, obs="ram")
    obs, _ = env.reset(seed=0)
    rs = gbx.RamSearch(env, 0xC000, 0x10000)
    for t in range(60):
        before = (obs[0] > 0).sum()
        obs, *_ = env.step(np.array([t % 4]))
        if before + 1 - (obs[0] > 0).sum() > 0:
            rs.changed()
        else:
            rs.equal()
    assert list(rs.candidates) == [0xFFB2, 0xFFB5], rs
    env.close()


def test_2048_game_over_ends_the_episode(gbx):
    rom = shared_rom("2048.gb")
    env = gbx.make("2048", 8, rom=rom, obs="ram", seed=5)
    env.reset(seed=5)
    rng = np.random.default_rng(5)
    for _t in range(400):
        obs, r, term, trunc, info = env.step(rng.integers(0, 4, 8))
        if term.any():
            i = int(np.flatnonzero(term)[0])
            assert info["_episode"][i] and not trunc[i]
            g = obs[i].reshape(4, 4)  # full and no two neighbours equal: no move left
            assert (g > 0).all() and not (g[:, 1:] == g[:, :-1]).any()
            assert not (g[1:] == g[:-1]).any()
            assert info["episode"]["r"][i] == _bcd_score(env)[i] > 0
            break
    else:
        pytest.fail("no random game of 2048 ended in 400 moves")
    env.close()


def test_libbet_progress_byte(gbx):
    """cur_score drives the reward and what the status bar shows: over 60 random rolls on 2
    envs (the first floor and into the second), equal pixels of the number left of "/" (the
    bottom row, x 118-130) never go with two different cur_score values, and several values
    are seen."""
    rom = shared_rom("libbet.gb")
    p = gbx.games.get("libbet")
    addr = p.ram["cur_score"]
    env = gbx.make("libbet", 2, rom=rom, obs={"pixels": "full", "ram": [addr]})
    obs, _ = env.reset(seed=0)
    assert (env.read_memory(p.ram["max_score"], p.ram["max_score"] + 1) > 0).all()
    rng = np.random.default_rng(0)
    prev = obs["ram"][:, 0].astype(int)
    shown = {}
    for t in range(60):
        obs, r, *_ = env.step(rng.integers(0, 4, 2))
        now = obs["ram"][:, 0].astype(int)
        assert list(r) == [max(0, b - a) for a, b in zip(prev, now)]  # increases only
        for i in range(2):
            key = obs["pixels"][i, 136:144, 118:131].tobytes()
            assert shown.setdefault(key, now[i]) == now[i], (t, i, now[i], shown[key])
        prev = now
    assert len(set(shown.values())) >= 3, set(shown.values())
    env.close()
