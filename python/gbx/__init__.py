"""GBX: thousands of Game Boy (DMG) emulators at once, as a Gymnasium vector environment.

    import gbx
    env = gbx.VecEnv("game.gb", num_envs=8)      # screen observations, reward 0
    obs, info = env.reset(seed=0)

    import gymnasium                               # the same through Gymnasium's registry
    env = gymnasium.make_vec("gbx/GameBoy-v0", num_envs=8, rom="game.gb")

Kernels are synthesized from the templates shipped inside this package (``gbx/templates``)
and compiled at run time (clang + ORC for the CPU), cached under ``$GBX_CACHE_DIR`` (else
``$XDG_CACHE_HOME/gbx``, else ``~/.cache/gbx``).
"""

from __future__ import annotations

from pathlib import Path

from . import _native

# The kernels are generated from the package's own templates, never from the source tree the
# package was built from ($GBX_TEMPLATE_DIR still wins, for template development).
TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
_native.set_template_root(str(TEMPLATE_DIR))

from . import expressions, games, ramsearch
from ._native import CompileError, NoDeviceError
from .actions import CODECS
from .games import make
from .ramsearch import RamSearch
from .save_states import ScreenlessStateWarning, state_has_screen
from .scripting import Script, ScriptError, ScriptTimeout, script
from .vec_env import CacheWarning, RomWarning, VecEnv
from .video import record_video

# gymnasium.make_vec("gbx/GameBoy-v0", num_envs=N, rom=...) builds a VecEnv (Gymnasium 1.x:
# an id with only a vector entry point is made by calling it with num_envs and the kwargs).
ENV_ID = "gbx/GameBoy-v0"


def _register() -> None:
    import gymnasium

    if ENV_ID not in gymnasium.registry:
        gymnasium.register(id=ENV_ID, vector_entry_point="gbx.vec_env:VecEnv")


_register()

__all__ = [
    "VecEnv",
    "RomWarning",
    "CacheWarning",
    "CompileError",
    "NoDeviceError",
    "CODECS",
    "TEMPLATE_DIR",
    "RamSearch",
    "ramsearch",
    "record_video",
    "expressions",
    "Script",
    "ScriptError",
    "ScriptTimeout",
    "script",
    "ENV_ID",
    "games",
    "make",
    "ScreenlessStateWarning",
    "state_has_screen",
]
__version__ = "0.1.0"
