"""gbx.VecEnv: many Game Boys as one Gymnasium 1.x vector environment."""
from __future__ import annotations

from typing import Any, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from . import _native
from .actions import encode, get_codec
from .env_streams import EnvStreams

OBS_V0_DIM = 32


def _parse_device(device: str) -> tuple[str, int]:
    if device == "cpu":
        return "cpu", 0
    if device == "mgba":  # the reference emulator (libmgba), for checking the kernels
        return "mgba", 0
    if isinstance(device, str) and device.startswith("cuda"):
        rest = device[4:]
        if rest == "":
            return "cuda", 0
        if rest.startswith(":") and rest[1:].isdigit():
            return "cuda", int(rest[1:])
    raise ValueError(f"unknown device {device!r} (cpu, cuda, cuda:N or mgba)")


def _parse_obs(obs) -> tuple[str, ...]:
    """obs="vec" or a dict spec {"vec": True, ...}; returns the observation keys."""
    if obs == "vec":
        return ("vec",)
    if isinstance(obs, dict):
        keys = tuple(k for k, v in obs.items() if v)
        for k in keys:
            if k in ("pixels", "ram"):
                raise NotImplementedError(
                    f"obs {k!r} needs kernel outputs that are not in this build yet "
                    "(pixels and RAM gathers come with the PPU renderer, issue [D]); use obs='vec'"
                )
            if k != "vec":
                raise ValueError(f"unknown observation {k!r} (vec, pixels, ram)")
        if not keys:
            raise ValueError("obs spec selects no observation")
        return keys
    raise ValueError(f"obs must be 'vec' or a dict spec, got {obs!r}")


class VecEnv(gym.vector.VectorEnv):
    """``num_envs`` Game Boys running ``rom``, stepped together by one synthesized kernel.

    Arguments beyond Gymnasium's:

    - ``rom``: a .gb path, ``builtin:NAME`` (e.g. ``builtin:ALU_LOOP``) or the ROM's bytes.
    - ``device``: ``"cpu"`` (JIT-compiled kernel on all cores), ``"cuda:N"``, or ``"mgba"``
      (the reference emulator, one libmgba core per env: for checking, not for training).
    - ``frames_per_step``: emulated frames (70224 T-cycles each) per ``step``.
    - ``release_after_frames``: a step's buttons are pressed for its first N frames, then
      released (N >= ``frames_per_step``: held for the whole step).
    - ``actions``: action codec, see :mod:`gbx.actions` (pokemon8, buttons8, multibinary).
    - ``obs``: ``"vec"`` (obs_v0: 32 float32 in [0, 1], design section 2) or a dict spec.
    - ``reward`` / ``done`` / ``track``: C++ expressions compiled into the kernel, see
      :mod:`gbx.expressions`. Without ``reward`` the stage's reward_v0 is returned; without
      ``done`` episodes end only by ``max_episode_frames``.
    - ``max_episode_frames``: an episode is truncated once it has run this many frames.
    - ``noop_max``: after every reset an env runs a random number of no-op frames in
      [0, noop_max], drawn from ``seed`` (the machine is deterministic; this is what makes
      the seed matter).
    - ``sticky_actions``: probability that an env repeats its previous action for a step
      instead of taking the new one (ALE's repeat_action_probability, per step).
    - ``env_offset``: this env's envs are envs ``env_offset ..`` of a larger vector env
      (a shard of :mod:`gbx.distributed`): each env's random draws (no-op frames, sticky
      actions) come from its own stream keyed by ``seed`` and its global index
      (:mod:`gbx.env_streams`), so a shard's envs behave as those envs of the unsharded one.
    - ``copy``: False (default) returns observations and rewards as views of the backend's
      own buffers (cpu device), overwritten by the next ``step``/``reset``; True returns
      fresh arrays.

    Autoreset is Gymnasium's NEXT_STEP: the ``step`` after an env's episode ended resets that
    env (its action is ignored) and returns its first observation with reward 0 and
    terminated = truncated = False. When an episode ends, ``info["episode"]`` holds ``r``
    (return) and ``l`` (length in steps) for every env, valid where ``info["_episode"]``.
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": ["rgb_array"]}

    def __init__(
        self,
        rom: str | bytes,
        num_envs: int,
        device: str = "cpu",
        frames_per_step: int = 24,
        release_after_frames: int = 8,
        actions: str = "pokemon8",
        obs: Any = "vec",
        reward: str | None = None,
        done: str | None = None,
        track: Sequence[str] = (),
        seed: int | None = None,
        max_episode_frames: int | None = None,
        noop_max: int = 0,
        sticky_actions: float = 0.0,
        threads: int = 0,
        copy: bool = False,
        env_offset: int = 0,
        render_mode: str | None = None,
    ):
        if not isinstance(num_envs, (int, np.integer)) or isinstance(num_envs, bool):
            raise ValueError(f"num_envs must be an int, got {type(num_envs).__name__}")
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1 (got {num_envs})")
        if not isinstance(frames_per_step, (int, np.integer)) or frames_per_step < 1:
            raise ValueError(f"frames_per_step must be an int >= 1 (got {frames_per_step!r})")
        if release_after_frames < 0:
            raise ValueError(f"release_after_frames must be >= 0 (got {release_after_frames})")
        if noop_max < 0:
            raise ValueError(f"noop_max must be >= 0 (got {noop_max})")
        if not 0.0 <= sticky_actions <= 1.0:
            raise ValueError(f"sticky_actions must be a probability in [0, 1] (got {sticky_actions})")
        if max_episode_frames is not None and max_episode_frames < 1:
            raise ValueError(f"max_episode_frames must be >= 1 or None (got {max_episode_frames})")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array' (got {render_mode!r})")
        track = list(track)
        if len(track) > _native.USER_TRACK_MAX:
            raise ValueError(f"at most {_native.USER_TRACK_MAX} tracked values (got {len(track)})")
        for name, expr in (("reward", reward), ("done", done)):
            if expr is not None and (not isinstance(expr, str) or not expr.strip()):
                raise ValueError(f"{name} must be a non-empty C++ expression string or None")
        self._codec = get_codec(actions)
        self._obs_keys = _parse_obs(obs)
        backend, index = _parse_device(device)
        rom_spec, rom_bytes = (rom, b"") if isinstance(rom, str) else ("bytes", bytes(rom))
        self._native = _native.Backend(
            rom_spec,
            rom_bytes=rom_bytes,
            backend=backend,
            num_envs=int(num_envs),
            frames_per_step=int(frames_per_step),
            release_after_frames=int(release_after_frames),
            threads=int(threads),
            device_index=index,
            reward=reward or "",
            done=done or "",
            track=track,
        )
        self.num_envs = int(num_envs)
        self.device = device
        self.frames_per_step = int(frames_per_step)
        self.release_after_frames = int(release_after_frames)
        self.max_episode_frames = max_episode_frames
        self.noop_max = int(noop_max)
        self.sticky_actions = float(sticky_actions)
        self.copy = bool(copy)
        self.render_mode = render_mode
        self._has_done = done is not None

        vec = spaces.Box(0.0, 1.0, shape=(OBS_V0_DIM,), dtype=np.float32)
        if obs == "vec":
            self.single_observation_space = vec
        else:
            self.single_observation_space = spaces.Dict({k: vec for k in self._obs_keys})
        self.single_action_space = self._codec.space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

        n = self.num_envs
        if not isinstance(env_offset, (int, np.integer)) or env_offset < 0:
            raise ValueError(f"env_offset must be an int >= 0 (got {env_offset!r})")
        self.env_offset = int(env_offset)
        self._streams = EnvStreams(seed, n, self.env_offset)
        self._seed = seed
        self._needs_reset = np.zeros(n, dtype=bool)
        self._prev_buttons = np.zeros(n, dtype=np.int32)
        self._ep_return = np.zeros(n, dtype=np.float64)
        self._ep_steps = np.zeros(n, dtype=np.int64)
        self._ep_frames = np.zeros(n, dtype=np.int64)
        self._zero_actions = np.zeros(n, dtype=np.int32)
        self._reset_called = False

    # -- Gymnasium API -------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Resets every env, or only those in ``options["reset_mask"]`` (bool[num_envs])."""
        if seed is not None:
            if isinstance(seed, (list, tuple, np.ndarray)):
                raise ValueError("seed must be one int for the whole vector env")
            self._streams = EnvStreams(seed, self.num_envs, self.env_offset)
            self._seed = seed
        mask = None if not options else options.get("reset_mask")
        if mask is None:
            self._native.reset(0)
            mask = np.ones(self.num_envs, dtype=bool)
        else:
            mask = np.array(mask, copy=True)
            if mask.shape != (self.num_envs,) or mask.dtype != np.bool_:
                raise ValueError(
                    f"options['reset_mask'] must be a bool array of shape ({self.num_envs},), "
                    f"got {mask.dtype} {mask.shape}"
                )
            if not self._reset_called and not mask.all():
                raise ValueError("the first reset must reset every env (no reset_mask)")
            self._reset_masked(mask)
        self._run_noops(mask)
        self._reset_called = True
        self._clear_episode(mask)
        self._needs_reset[mask] = False
        return self._observation(), {}

    def step(self, actions):
        if not self._reset_called:
            raise RuntimeError("call reset() before step()")
        buttons = encode(self._codec, actions, self.num_envs)
        if self.sticky_actions > 0.0:
            stick = self._streams.uniform("sticky") < self.sticky_actions
            buttons = np.where(stick, self._prev_buttons, buttons).astype(np.int32)
        self._prev_buttons = buttons
        self._native.step(buttons)

        reward = self._native.reward
        resetting = self._needs_reset
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        if self._has_done:
            terminated |= self._native.done.view(np.bool_)
        self._ep_steps += 1
        self._ep_frames += self.frames_per_step
        if self.max_episode_frames is not None:
            truncated |= self._ep_frames >= self.max_episode_frames
        info: dict[str, Any] = {}
        if resetting.any():
            # NEXT_STEP autoreset: these envs ended last step; this step starts their next
            # episode (the step just run on them is discarded by the reset).
            self._reset_masked(resetting)
            self._run_noops(resetting)
            reward[resetting] = 0.0
            terminated[resetting] = False
            truncated[resetting] = False
            self._clear_episode(resetting)
        live = ~resetting
        self._ep_return[live] += reward[live]
        ended = (terminated | truncated) & live
        if ended.any():
            info["episode"] = {
                "r": np.where(ended, self._ep_return, 0.0).astype(np.float32),
                "l": np.where(ended, self._ep_steps, 0).astype(np.int32),
            }
            info["_episode"] = ended.copy()
        self._needs_reset = ended
        obs = self._observation()
        if self.copy:
            reward = reward.copy()
        return obs, reward, terminated, truncated, info

    def render(self):
        raise NotImplementedError(
            "render() shows env 0's screen, which needs the pixels kernel output (the PPU "
            "renderer and framebuffer of issue [D]); this build has only the obs_v0 vector"
        )

    def close_extras(self, **kwargs):
        self._native = None

    # -- GBX extras ----------------------------------------------------------------------

    def read_memory(self, lo: int, hi: int) -> np.ndarray:
        """Bytes [lo, hi) of every env's bus view, as uint8[num_envs, hi - lo] (a copy)."""
        out = np.empty((self.num_envs, hi - lo), dtype=np.uint8) if hi > lo else None
        if out is None:
            raise ValueError(f"memory range must satisfy lo < hi <= 0x10000 (got {lo:#x}:{hi:#x})")
        for e in range(self.num_envs):
            out[e] = np.frombuffer(self._native.read_memory(e, lo, hi), dtype=np.uint8)
        return out

    def cpu_state(self, env: int) -> dict:
        """Registers and counters of one env."""
        return self._native.cpu_state(env)

    @property
    def kernel_key(self) -> str:
        """The stage hash (cache key) of the kernel this env runs."""
        return self._native.kernel_key

    @property
    def backend(self):
        """The native backend (gbx._native.Backend)."""
        return self._native

    # -- internals -----------------------------------------------------------------------

    def _reset_masked(self, mask: np.ndarray) -> None:
        self._native.reset_envs(np.ascontiguousarray(mask, dtype=np.uint8))

    def _run_noops(self, mask: np.ndarray) -> None:
        if self.noop_max == 0 or not mask.any():
            return
        frames = self._streams.integers("noop", self.noop_max, mask)
        for k in range(int(frames.max())):
            sub = (frames > k).astype(np.uint8)
            self._native.step_envs(self._zero_actions, 1, sub)

    def _clear_episode(self, mask: np.ndarray) -> None:
        self._ep_return[mask] = 0.0
        self._ep_steps[mask] = 0
        self._ep_frames[mask] = 0
        self._prev_buttons[mask] = 0

    def _observation(self):
        vec = self._native.obs
        if self.copy:
            vec = vec.copy()
        if self._obs_keys == ("vec",) and not isinstance(self.single_observation_space, spaces.Dict):
            return vec
        return {"vec": vec}
