"""Game profiles as data: a cartridge, its RAM addresses, a reward, an action set, a start recipe.

    import gbx
    env = gbx.make("2048", num_envs=64, rom="2048.gb")        # a gbx.games.GameEnv (a VecEnv)
    env = gbx.make("arrows", num_envs=32, obs="ram")           # built-in: no ROM needed
    p = gbx.games.get("pokemon_red")                           # the profile itself (data)
    p.ram["map_id"], p.reward, p.start

A :class:`Profile` names its cartridge by SHA-1; :func:`make` refuses any other file with one
:class:`WrongCartridgeError` (a ``ValueError``) naming both hashes, so a profile's addresses
are never read from another revision. The ROM itself is never shipped: the user passes its
path or bytes (``rom=``).

A profile's ``start`` is a *start recipe*, plain data in the format of ``gbx.script``::

    [("start", 4), ("wait", 60), ("a", 4), ("until", "ram(0xD35E) == 38", 600)]

``(button, n)`` holds a button (``a b select start right left up down``, or several joined
with ``+``) for n frames and releases it; ``("wait", n)`` runs n frames with nothing pressed;
``("until", expr, max_frames)`` runs frames with nothing pressed until the expression (the
reward/done language of :mod:`gbx.expressions`, compiled into a kernel) is non-zero, and
raises :class:`RecipeTimeout` if it is still zero after ``max_frames``. :func:`start_state`
runs a recipe from power-on on one env and returns the state; :func:`make` makes every reset
return to it (``set_reset_state``), so episodes start where the recipe ends. The recipe runs
on a kernel that draws, with the env's ``ppu`` model, so the state holds the recipe's last
screen and the first observation after ``reset()`` is that screen (docs/guide/states.md).

Rewards are kernel expressions (``reward`` over ``track``), computed on the device with every
other output: the builtins ``popcount``/``sum``/``bcd``/``seen``/``seen_count``
(docs/guide/rewards.md) say what games need, e.g. Pokémon's event flags
(``popcount(0xD747, 0xD886)``, tracked, its increase rewarded) and exploration
(``seen(map << 16 | x << 8 | y)``: 1 the first time in an episode).

Profiles shipped (:data:`PROFILES`): ``arrows`` (built-in), ``2048`` and ``libbet`` (homebrew,
zlib licence: the files the user has), ``pokemon_red`` and ``pokemon_blue`` (the user's own
cartridge dump). docs/guide/games-and-training.md says how their addresses were found.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import _native
from .scripting import ScriptTimeout, parse_buttons, script
from .vec_env import VecEnv


class WrongCartridgeError(ValueError):
    """A ROM whose SHA-1 is not the one the profile was written for."""


class RecipeTimeout(RuntimeError):
    """An ``("until", expr, max_frames)`` step of a start recipe whose condition stayed false."""


@dataclass(frozen=True)
class Profile:
    """One game, as data. ``ram`` maps names to a bus address, a tuple of addresses, or a
    ``(lo, hi)`` range (documented per profile in ``ram_notes``)."""

    name: str
    title: str
    sha1: str | None  # None: a built-in ROM (``rom``), nothing to check
    rom: str | None = None  # the built-in spec, or the file name the user usually has
    ram: Mapping[str, Any] = field(default_factory=dict)
    ram_notes: str = ""
    track: tuple[str, ...] = ()
    reward: str | None = None
    done: str | None = None
    score: str = ""  # what the episode return measures, in words
    actions: Any = "pokemon8"  # a gbx.actions codec name or a tuple of button labels
    start: tuple[tuple, ...] = ()  # start recipe (gbx.script format)
    frames_per_step: int = 24
    release_after_frames: int = 8
    max_episode_frames: int | None = None
    noop_max: int = 0
    obs_ram: tuple[int, ...] = ()  # the bytes of obs="ram"
    notes: str = ""


# -- the shipped profiles --------------------------------------------------------------------

ARROWS = Profile(
    name="arrows",
    title="ARROWS (GBX built-in micro-game)",
    sha1=None,
    rom="builtin:ARROWS",
    ram={"score": 0xC000, "arrow": 0xC002, "lfsr": 0xC003, "held": 0xC004, "rounds": 0xC005},
    ram_notes="score and rounds are u16 little-endian (README 'The ARROWS game')",
    track=("ram16(0xC000)",),
    reward="val(0) - prev(0)",
    score="correct presses",
    actions="pokemon8",
    frames_per_step=4,
    release_after_frames=2,
    max_episode_frames=4 * 64,
    noop_max=30,
    obs_ram=(0xC002,),
)


# Sanqui's 2048-gb (zlib licence), the revision in ../shared/games (a title screen, a 6-digit
# score). Found with gbx.RamSearch (docs/guide/games-and-training.md; tests/python/test_games.py
# repeats the search and checks the score against the digits on screen): the score is 3 bytes
# of packed BCD, big-endian, at 0xFFB0 (HRAM; the high score follows at 0xFFB3), the 4x4
# grid one byte per cell (log2 of the tile, 0 = empty) at 0xC800, and game over puts the
# "GAME OVER" sprites into the shadow OAM at 0xC200 (0 while playing).
GAME_2048 = Profile(
    name="2048",
    title="2048-gb by Sanqui (zlib licence)",
    sha1="ece57f98d668e46fb29941e688704e346b66feb9",
    rom="2048.gb",
    ram={
        "score_bcd": (0xFFB0, 0xFFB3),
        "high_score_bcd": (0xFFB3, 0xFFB6),
        "grid": (0xC800, 0xC810),
        "game_over": 0xC200,
    },
    ram_notes="score_bcd: [lo, hi) 3 bytes packed BCD, big-endian (the sum of the merged "
    "tiles' values); grid: 16 cells, row-major, log2 of the tile (1 = 2, 2 = 4 ...), "
    "0 empty; game_over: shadow OAM byte, non-zero once the game ended",
    track=("bcd(0xFFB0, 3)",),
    reward="val(0) - prev(0)",
    done="ram(0xC200) != 0",
    score="the game's score (the sum of the merged tiles' values)",
    actions=("up", "down", "left", "right"),
    frames_per_step=24,
    release_after_frames=4,
    max_episode_frames=24 * 1000,
    noop_max=30,
    obs_ram=tuple(range(0xC800, 0xC810)),
    start=(("wait", 60), ("start", 4), ("wait", 30)),
)

# Damian Yerrick's "Libbet and the Magic Floor" v0.08 (zlib licence). Found with gbx.RamSearch
# (docs/guide/games-and-training.md): on the first floor the status bar reads "0/04"; the bytes equal
# to 4 whose next byte is 0 are two, and rolling over cells raises only 0xC4ED (cur_score, the
# left number) 0 -> 4; 0xC4EC is max_score. The disassembly's order (floor_map[64],
# floor_width, floor_height, cursor_x, cursor_y, max_score, cur_score, exit_x, exit_open) puts
# the floor at 0xC4A8 and the cursor at 0xC4EA/0xC4EB.
LIBBET = Profile(
    name="libbet",
    title="Libbet and the Magic Floor v0.08 by Damian Yerrick (zlib licence)",
    sha1="f117089aa056600e2d404bbcbac96b016fc64611",
    rom="libbet.gb",
    ram={
        "floor_map": (0xC4A8, 0xC4E8),
        "floor_width": 0xC4E8,
        "floor_height": 0xC4E9,
        "cursor_x": 0xC4EA,
        "cursor_y": 0xC4EB,
        "max_score": 0xC4EC,
        "cur_score": 0xC4ED,
        "exit_x": 0xC4EE,
        "exit_open": 0xC4EF,
    },
    ram_notes="cur_score: floor cells traced on this floor (back to 0 on the next floor)",
    track=("ram(0xC4ED)",),
    reward="val(0) > prev(0) ? val(0) - prev(0) : 0",
    score="floor cells traced (summed over floors)",
    actions=("up", "down", "left", "right"),
    frames_per_step=24,
    release_after_frames=4,
    max_episode_frames=24 * 600,
    noop_max=30,
    obs_ram=(0xC4E8, 0xC4E9, 0xC4EA, 0xC4EB, 0xC4EC, 0xC4ED, 0xC4EE, 0xC4EF)
    + tuple(range(0xC4A8, 0xC4E8)),
    # power-on: copyright, title (START), story and instructions (A, A), the first floor
    start=(
        ("wait", 120),
        ("start", 4),
        ("wait", 56),
        ("a", 4),
        ("wait", 56),
        ("a", 4),
        ("wait", 56),
        ("a", 4),
        ("until", "ram(0xC4EC) != 0", 600),
        ("wait", 60),
    ),
)

# Pokémon Red / Blue (English, "UE"): addresses from the pret/pokered disassembly's symbols
# (wram.asm; the same in Red and Blue). Party mon structs are 44 bytes from wPartyMon1
# (0xD16B): HP (u16 big-endian) at +1, level at +0x21, max HP at +0x22.
_PARTY = [0xD16B + 44 * i for i in range(6)]
POKEMON_RAM = {
    "map_id": 0xD35E,  # wCurMap (38 = REDS_HOUSE_2F, the player's room)
    "y": 0xD361,  # wYCoord
    "x": 0xD362,  # wXCoord
    "badges": 0xD356,  # wObtainedBadges, one bit per badge
    "party_count": 0xD163,  # wPartyCount
    "party_levels": tuple(a + 0x21 for a in _PARTY),  # wPartyMonNLevel
    "party_hp": tuple(a + 0x01 for a in _PARTY),  # wPartyMonNHP, u16 big-endian
    "party_max_hp": tuple(a + 0x22 for a in _PARTY),  # wPartyMonNMaxHP, u16 big-endian
    # wEventFlags [lo, hi): flag_array NUM_EVENTS, 0xA00 bits = 320 bytes from 0xD747, so its
    # last byte is 0xD886 (pret/pokered ram/wram.asm and constants/event_constants.asm).
    "event_flags": (0xD747, 0xD747 + 320),
    "money_bcd": (0xD347, 0xD34A),  # wPlayerMoney, 3 bytes BCD, big-endian
    "in_battle": 0xD057,  # wIsInBattle
    "player_name": 0xD158,  # wPlayerName
}


def _party_level_sum() -> str:
    n = POKEMON_RAM["party_count"]
    return " + ".join(
        f"(ram({n:#x}) > {i} ? ram({a:#x}) : 0)" for i, a in enumerate(POKEMON_RAM["party_levels"])
    )


_LEVELS = _party_level_sum()
_EVENTS = POKEMON_RAM["event_flags"]
# PokemonRedExperiments' reward: the party's level sum (counted a quarter past 22), 10 a badge,
# 4 an event flag set, and 0.1 each new (map, x, y) of the episode (seen(): the set is cleared
# on reset). float32 throughout: levels and badges, plus events and exploration summed first.
_POKEMON_TRACK = (
    f"({_LEVELS}) > 22 ? 22 + (({_LEVELS}) - 22) / 4 : ({_LEVELS})",
    "popcount(0xD356, 0xD356)",  # wObtainedBadges
    f"popcount({_EVENTS[0]:#x}, {_EVENTS[1] - 1:#x})",  # wEventFlags (inclusive bounds)
)
_POKEMON_REWARD = (
    "(val(0) - prev(0)) + 10 * (val(1) - prev(1)) + (4 * (val(2) - prev(2)) + "
    "0.1f * seen(ram(0xD35E) << 16 | ram(0xD362) << 8 | ram(0xD361)))"
)
_POKEMON_COMMON = dict(
    ram=POKEMON_RAM,
    ram_notes="event_flags and money_bcd are [lo, hi) ranges; party_hp/max_hp are u16 "
    "big-endian; addresses from pret/pokered's symbols (wram.asm)",
    track=_POKEMON_TRACK,
    reward=_POKEMON_REWARD,
    score="exploration + events + levels + badges (PokemonRedExperiments style)",
    actions="pokemon8",
    frames_per_step=24,
    release_after_frames=8,
    max_episode_frames=24 * 2048,
    obs_ram=(0xD35E, 0xD362, 0xD361, 0xD356, 0xD163) + tuple(a + 0x21 for a in _PARTY),
)


def _pokemon_intro() -> tuple[tuple, ...]:
    """From power-on to the player's room: title screen, NEW GAME, Oak's speech, the preset
    names (DOWN then A picks the first preset, RED/BLUE), then until wCurMap == 38.

    DOWN is harmless while text boxes wait for A, so every press is "down, then A": at a
    text box DOWN does nothing and A advances it; at the two name menus DOWN moves the cursor
    from NEW NAME to the first preset name and A picks it. Not yet run on a real cartridge
    (the issue's "after landing" check); the stand-in ROM test runs its mechanics."""
    # START skips the Game Freak intro to the title; START again (once the logo has settled)
    # opens the menu of a cartridge without a save (NEW GAME, OPTION); A picks NEW GAME.
    steps: list[tuple] = [
        ("wait", 400),
        ("start", 4),
        ("wait", 240),
        ("start", 4),
        ("wait", 120),
        ("a", 4),
        ("wait", 120),
    ]
    for _ in range(45):
        steps += [("down", 2), ("wait", 8), ("a", 2), ("wait", 40)]
    steps.append(("until", "ram(0xD35E) == 38", 3600))
    return tuple(steps)


POKEMON_RED = Profile(
    name="pokemon_red",
    title="Pokémon Red (English, UE)",
    sha1="ea9bcae617fdf159b045185467ae58b2e4a48b9a",
    rom="pokered.gb",
    start=_pokemon_intro(),
    **_POKEMON_COMMON,
)
POKEMON_BLUE = dataclasses.replace(
    POKEMON_RED,
    name="pokemon_blue",
    title="Pokémon Blue (English, UE)",
    sha1="d7037c83e1ae5b39bde3c30787637ba1d4c48ce2",
    rom="pokeblue.gb",
)

PROFILES: dict[str, Profile] = {}


def register(profile: Profile) -> Profile:
    """Adds (or replaces) a profile under ``profile.name``."""
    if not isinstance(profile, Profile):
        raise TypeError(f"register takes a gbx.games.Profile, got {type(profile).__name__}")
    check_recipe(profile.start)
    PROFILES[profile.name] = profile
    return profile


def get(name: str) -> Profile:
    """The profile called ``name`` (``gbx.games.PROFILES`` lists them)."""
    if isinstance(name, Profile):
        return name
    if not isinstance(name, str) or name not in PROFILES:
        raise ValueError(f"unknown game {name!r} (profiles: {', '.join(sorted(PROFILES))})")
    return PROFILES[name]


# -- start recipes ---------------------------------------------------------------------------


def check_recipe(recipe: Sequence) -> None:
    """Raises ValueError naming the first malformed step of a start recipe."""
    if isinstance(recipe, (str, bytes)) or not isinstance(recipe, Sequence):
        raise ValueError(f"a start recipe is a list of steps, got {type(recipe).__name__}")
    for i, step in enumerate(recipe):
        bad = f"start recipe step {i} {step!r}: "
        if not isinstance(step, (tuple, list)) or not step or not isinstance(step[0], str):
            raise ValueError(bad + "a step is a tuple (button|'wait'|'until', ...)")
        kind = step[0].lower()
        if kind == "until":
            if (
                len(step) != 3
                or not isinstance(step[1], str)
                or not step[1].strip()
                or not _positive_int(step[2])
            ):
                raise ValueError(bad + "expected ('until', 'expression', max_frames >= 1)")
            continue
        if len(step) != 2 or not _positive_int(step[1]):
            raise ValueError(bad + "expected (button or 'wait', frames >= 1)")
        if kind != "wait":
            try:
                parse_buttons(kind)
            except ValueError as e:
                raise ValueError(bad + str(e)) from None


def _positive_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1


def start_state(rom, recipe: Sequence, device: str = "cpu", ppu: str = "fifo") -> bytes:
    """Runs ``recipe`` (:func:`gbx.script` steps) on one env of ``rom`` from power-on and
    returns its state (bytes); a condition that never holds raises :class:`RecipeTimeout`.

    The recipe runs on a kernel that draws with the pixel model ``ppu`` (``"fifo"`` or
    ``"line"``, as :class:`gbx.VecEnv`), so the state holds the screen at the recipe's end
    as an env with that model shows it (:func:`gbx.save_states.state_has_screen` is True);
    ``device="mgba"`` keeps no screen."""
    check_recipe(recipe)
    draws = device != "mgba"  # mGBA's states carry no GBX framebuffer
    env = VecEnv(
        rom,
        1,
        device=device,
        frames_per_step=1,
        release_after_frames=1,
        obs={"ram": [0xC000]},
        render_mode="rgb_array" if draws else None,
        ppu=ppu,
    )
    try:
        env.reset(seed=0)
        try:
            script(env, [tuple(step) for step in recipe])
        except ScriptTimeout as e:
            raise RecipeTimeout(f"start recipe: {e}") from None
        return env.save_state(0)
    finally:
        env.close()


# -- making an env ---------------------------------------------------------------------------


def rom_sha1(rom) -> str:
    """SHA-1 of a ROM given as a path, ``builtin:NAME`` or bytes."""
    data = (
        bytes(rom)
        if isinstance(rom, (bytes, bytearray, memoryview))
        else _native.rom_bytes(str(rom))
    )
    return hashlib.sha1(data).hexdigest()


def check_rom(profile: Profile, rom) -> Any:
    """The ROM spec to load for ``profile`` (``rom``, or the built-in one); raises
    WrongCartridgeError for a file whose SHA-1 is not the profile's."""
    if rom is None:
        if profile.sha1 is None:
            return profile.rom
        raise ValueError(
            f"game {profile.name!r} ({profile.title}) needs its cartridge: pass rom=PATH "
            f"(a dump whose SHA-1 is {profile.sha1}, usually called {profile.rom})"
        )
    if isinstance(rom, (str, os.PathLike)):
        rom = os.fspath(rom)
        if not rom.startswith("builtin:") and not os.path.isfile(rom):
            raise FileNotFoundError(f"ROM file not found: {rom}")
    elif not isinstance(rom, (bytes, bytearray, memoryview)):
        raise TypeError(f"rom must be a path or bytes, got {type(rom).__name__}")
    want = profile.sha1 if profile.sha1 is not None else rom_sha1(profile.rom)
    got = rom_sha1(rom)
    if got != want:
        what = rom if isinstance(rom, str) else f"{len(rom)} bytes"
        raise WrongCartridgeError(
            f"{what} (SHA-1 {got}) is not the cartridge of game {profile.name!r}: that profile "
            f"is for {profile.title}, SHA-1 {want}"
        )
    return rom if isinstance(rom, str) else bytes(rom)


_START_CACHE: dict[tuple, bytes] = {}


def make(
    game, num_envs: int, rom=None, *, obs: Any = "pixels", start: bool = True, **kwargs
) -> GameEnv:
    """A :class:`GameEnv` (a :class:`gbx.VecEnv`) for ``game`` (a name or a Profile).

    ``rom``: the cartridge (path or bytes; not needed for built-in games), checked against the
    profile's SHA-1. ``obs``: ``"pixels"`` (default), ``"ram"`` (the profile's ``obs_ram``
    bytes, uint8) or any VecEnv ``obs`` spec. ``start=False`` skips the start recipe (resets
    go to power-on). Every other keyword goes to VecEnv and overrides the profile
    (``frames_per_step``, ``max_episode_frames``, ``noop_max``, ``device``, ``seed`` ...)."""
    profile = get(game)
    spec = check_rom(profile, rom)
    if obs == "ram":
        if not profile.obs_ram:
            raise ValueError(f"game {profile.name!r} has no obs_ram addresses; pass an obs spec")
        obs = {"ram": list(profile.obs_ram)}
    args = dict(
        frames_per_step=profile.frames_per_step,
        release_after_frames=profile.release_after_frames,
        actions=profile.actions,
        reward=profile.reward,
        done=profile.done,
        track=list(profile.track),
        max_episode_frames=profile.max_episode_frames,
        noop_max=profile.noop_max,
    )
    args.update(kwargs)
    state = None
    if start and profile.start:
        # Made with the env's pixel model: the first observation after reset() is the screen
        # an env with that model showed at the recipe's end.
        device, ppu = args.get("device", "cpu"), args.get("ppu", "fifo")
        key = (rom_sha1(spec), tuple(tuple(s) for s in profile.start), device, ppu)
        if key not in _START_CACHE:
            _START_CACHE[key] = start_state(spec, profile.start, device=device, ppu=ppu)
        state = _START_CACHE[key]
    env = GameEnv(spec, num_envs, obs=obs, **args)
    env.profile = profile
    env.start_state = state
    if state is not None:
        env.set_reset_state(state)
    return env


class GameEnv(VecEnv):
    """A VecEnv made by :func:`make` for a profile: ``profile`` and ``start_state`` (the
    recipe's state, or None) are attributes."""

    def __init__(self, rom, num_envs: int, **kwargs):
        super().__init__(rom, num_envs, **kwargs)
        self.profile: Profile | None = None
        self.start_state: bytes | None = None


for _p in (ARROWS, GAME_2048, LIBBET, POKEMON_RED, POKEMON_BLUE):
    register(_p)

__all__ = [
    "Profile",
    "PROFILES",
    "get",
    "make",
    "register",
    "start_state",
    "check_recipe",
    "check_rom",
    "rom_sha1",
    "GameEnv",
    "WrongCartridgeError",
    "RecipeTimeout",
]
