"""gbx.VecEnv: many Game Boys as one Gymnasium 1.x vector environment."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from . import _native
from .actions import encode, get_codec
from .env_options import (
    CacheWarning,  # noqa: F401 (API: gbx.CacheWarning)
    RomWarning,
    check_counts,
    check_expressions,
    check_modes,
    check_seed,
    parse_device,
    parse_hooks,
    rom_source,
    warn_cache,
)
from .env_streams import EnvStreams
from .observations import OBS_V0_DIM, ObsAssembler, parse_obs  # noqa: F401 (OBS_V0_DIM: API)
from .save_states import SaveStates

# Greys for shades 0..3 (runtime/include/gbx/runtime/outputs/screen_image.h kShadeGrey), as RGB.
_SHADE_RGB = np.array([[0xFF] * 3, [0xAA] * 3, [0x55] * 3, [0x00] * 3], dtype=np.uint8)


class VecEnv(SaveStates, gym.vector.VectorEnv):
    """``num_envs`` Game Boys running ``rom``, stepped together by one synthesized kernel.

    Arguments beyond Gymnasium's:

    - ``rom``: a .gb path (str or os.PathLike), ``builtin:NAME`` (e.g. ``builtin:ALU_LOOP``)
      or the ROM's contents (bytes, bytearray or memoryview; never empty).
    - ``device``: ``"cpu"`` (JIT-compiled kernel on all cores), ``"cuda:N"``, or ``"mgba"``
      (the reference emulator, one libmgba core per env: for checking, not for training).
    - ``frames_per_step``: emulated frames (70224 T-cycles each) per ``step``.
    - ``release_after_frames``: a step's buttons are pressed for its first N frames, then
      released (N >= ``frames_per_step``: held for the whole step).
    - ``actions``: action codec, see :mod:`gbx.actions` (pokemon8, buttons8, multibinary,
      or a game's own tuple of button labels such as ``("up", "down", "left", "right")``).
    - ``obs``: ``"pixels"`` (default: the screen, uint8[144, 160]), ``"vec"`` (obs_v0:
      registers and mixes of C000-C00F, 32 float32 in [0, 1], a stage test, docs/guide/python.md)
      or a dict spec ``{"pixels": "full"|"half"|"packed", "ram": [addr, ...], "vec": True}``,
      see :mod:`gbx.observations`. ``frame_stack=k`` stacks the last k observations.
    - ``pixel_values``: ``"shades"`` (default: 0 white .. 3 black, what the kernel writes) or
      ``"luminance"`` (PyBoy's greys: 255 white, 153, 85, 0 black; full and half only).
    - ``reward`` / ``done`` / ``track``: C++ expressions compiled into the kernel, see
      :mod:`gbx.expressions` (builtins popcount, sum, bcd, seen, seen_count, hit: docs/guide/rewards.md).
      Without ``reward`` the reward is 0; ``reward="v0"`` is the
      stage's reward_v0 (a register/RAM mix for stage tests). Without ``done`` episodes end
      only by ``max_episode_frames``.
    - ``seen_capacity``: keys the per-env ``seen(key)`` set holds exactly (1..65536, default
      4096; it exists only when an expression uses seen/seen_count): docs/guide/rewards.md.
    - ``hooks``: addresses (``0x1234``, ``"bank:addr"`` hex, or ``(bank, addr)``) whose
      instruction fetches are counted per env and step: ``info["hits"]`` uint32
      (num_envs, len(hooks)) and ``hit(i)`` in expressions (docs/guide/rewards.md).
    - ``max_episode_frames``: an episode is truncated once it has run this many frames.
    - ``noop_max``: after every reset an env runs a random number of no-op frames in
      [0, noop_max], drawn from ``seed`` (the machine is deterministic; this is what makes
      the seed matter). Every backend; all envs' no-op frames run in one backend call.
    - ``reset_states``: a pool of save states (bytes); every reset (``reset()`` and
      autoreset) puts each reset env into one of them, drawn from its random stream (the
      seed), as ``set_reset_state(pool, pool=True)``.
    - ``sticky_actions``: probability that an env repeats its previous action for a step
      instead of taking the new one (ALE's repeat_action_probability, per step).
    - ``env_offset``: this env's envs are envs ``env_offset ..`` of a larger vector env
      (a shard of :mod:`gbx.distributed`): each env's random draws (no-op frames, sticky
      actions) come from its own stream keyed by ``seed`` and its global index
      (:mod:`gbx.env_streams`), so a shard's envs behave as those envs of the unsharded one.
    - ``copy``: True (default) returns fresh arrays from every ``step``/``reset``; False
      returns observations and rewards as views of the backend's own buffers (cpu device; a
      host copy of the device's block otherwise), overwritten by the next
      ``step``/``reset``/``load_state`` (README "Python": what that saves).
    - ``render_mode``: ``"rgb_array"`` makes the kernel draw the screen every frame, so
      ``render()`` returns env 0's screen (uint8[144, 160, 3]).
    - ``tiered_start`` (cuda): when the optimized kernel is not in the cache yet, start on
      NVRTC's quick compile (steps begin after ~1.5 s instead of ~30 s, but run many times
      slower) while the optimized kernel compiles in the background; it is swapped in between
      steps (``backend.start_tier`` says which runs). ``close()`` waits for a compile still
      running, which lands in the cache for the next run. False: the constructor waits.
    - ``specialize`` (cpu, cuda): ``"off"``, ``"profile:FILE"`` (a profile written by
      ``gbx-synth profile``) or ``"auto[:N]"``: the ROM-specialized kernel (the cartridge's
      hot code compiled into the kernel, bit-identical to the interpreter). With auto the
      first N frames (default 60) run on a profiling interpreter, then the specialized kernel
      compiles in the background and is swapped in between steps; no step waits for it.
      ``backend.specialize_status`` says where it is; ``backend.finish_tier_up()`` waits.
    - ``ppu``: the pixel model compiled into the kernel: ``"fifo"`` (default; the dot-by-dot
      pixel FIFO: registers written during mode 3 land on the right pixels) or ``"line"``
      (each scanline drawn at one dot: a few percent faster where games write no registers
      during mode 3; docs/machine/ppu-fifo.md). Kernels that draw nothing are the same.

    Autoreset is Gymnasium's NEXT_STEP: the ``step`` after an env's episode ended resets that
    env (its action is ignored) and returns its first observation with reward 0 and
    terminated = truncated = False. When an episode ends, ``info["episode"]`` holds ``r``
    (return) and ``l`` (length in steps) for every env, valid where ``info["_episode"]``.

    Save states (``save_state``, ``load_state``, ``copy_state``, ``set_reset_state``):
    :class:`gbx.save_states.SaveStates`; the arguments' checks: :mod:`gbx.env_options`.
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": ["rgb_array"]}

    def __init__(
        self,
        rom: str | bytes,
        num_envs: int,
        device: str = "cpu",
        frames_per_step: int = 24,
        release_after_frames: int = 8,
        actions: str | Sequence[str] = "pokemon8",
        obs: Any = "pixels",
        reward: str | None = None,
        done: str | None = None,
        track: Sequence[str] = (),
        seed: int | None = None,
        max_episode_frames: int | None = None,
        noop_max: int = 0,
        sticky_actions: float = 0.0,
        threads: int = 0,
        copy: bool = True,
        env_offset: int = 0,
        render_mode: str | None = None,
        frame_stack: int = 1,
        tiered_start: bool = False,
        specialize: str = "off",
        pixel_values: str = "shades",
        reset_states: Sequence[bytes] | None = None,
        ppu: str = "fifo",
        seen_capacity: int = 4096,
        hooks: Sequence[int | str | tuple[int, int]] = (),
    ):
        check_counts(
            num_envs, frames_per_step, release_after_frames, noop_max, max_episode_frames, threads
        )
        check_modes(sticky_actions, render_mode, env_offset)
        check_seed(seed)
        rom_spec, rom_bytes = rom_source(rom)
        track = check_expressions(track, reward, done, seen_capacity)
        self.hooks = parse_hooks(hooks)
        # No reward: 0 (the kernel's reward_v0 is a stage test, not a reward; only "v0" asks
        # for it). The expression "v0" is not valid C++ over the machine, so the name is free.
        self._reward_kind = "zero" if reward is None else "v0" if reward == "v0" else "expr"
        self._codec = get_codec(actions)
        self._obs_spec = parse_obs(obs, frame_stack, pixel_values)
        backend, index = parse_device(device)
        if backend == "mgba" and self._obs_spec.pixels:
            raise ValueError(
                "device='mgba' has no pixels output (the default obs): pass obs='vec' or a "
                "'ram' spec"
            )
        try:
            self._native = _native.Backend(
                rom_spec,
                rom_bytes=rom_bytes,
                backend=backend,
                num_envs=int(num_envs),
                frames_per_step=int(frames_per_step),
                release_after_frames=int(release_after_frames),
                threads=int(threads),
                device_index=index,
                reward=reward if self._reward_kind == "expr" else "",
                done=done or "",
                track=track,
                obs_kind=self._obs_spec.kernel_obs,
                obs_format=self._obs_spec.pixels or "full",
                gather=list(self._obs_spec.ram),
                render=render_mode == "rgb_array",
                tiered_start=bool(tiered_start),
                specialize=str(specialize),
                ppu=str(ppu),
                seen_capacity=int(seen_capacity),
                hooks=self.hooks,
            )
        finally:  # a refused cache or a rejected entry: the env runs, not silently
            warn_cache()
        for w in self._native.rom_warnings:  # a wrong header checksum: the env runs, not silently
            warnings.warn(f"ROM {self._native.rom_name}: {w}", RomWarning, stacklevel=2)
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
        # The kernel draws (keeps the framebuffers): pixel observations or render().
        self._draws = bool(self._obs_spec.pixels) or render_mode == "rgb_array"

        self.frame_stack = self._obs_spec.frame_stack
        self.single_observation_space = self._obs_spec.space()
        self._obs = ObsAssembler(self._obs_spec, self._native, self.num_envs, self.copy)
        self.single_action_space = self._codec.space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

        n = self.num_envs
        self.env_offset = int(env_offset)
        self._streams = EnvStreams(seed, n, self.env_offset)
        self._seed = seed
        self._needs_reset = np.zeros(n, dtype=bool)
        self._prev_buttons = np.zeros(n, dtype=np.int32)
        self._ep_return = np.zeros(n, dtype=np.float64)
        self._ep_steps = np.zeros(n, dtype=np.int64)
        self._ep_frames = np.zeros(n, dtype=np.int64)
        self._zero_actions = np.zeros(n, dtype=np.int32)
        self._zero_reward = np.zeros(n, dtype=np.float32)
        self._reset_called = False
        self._pool: list[bytes] | None = None  # reset_states
        self._pool_index: np.ndarray | None = None  # the pool entry each env's image holds
        if reset_states is not None:
            self.set_reset_state(reset_states, pool=True)

    # -- Gymnasium API -------------------------------------------------------------------

    def reset(self, *, seed: int | list | None = None, options: dict | None = None):
        """Resets every env, or only those in ``options["reset_mask"]`` (bool[num_envs]).

        ``seed``: one int for the vector env (env i's random stream is keyed by the seed and
        its global index, :mod:`gbx.env_streams`) or a list of ``num_envs`` ints (or None:
        that env keeps its stream), one per env, each keying its env's stream alone."""
        native = self._live()
        mask = None if not options else options.get("reset_mask")
        if mask is not None:
            mask = np.array(mask, copy=True)
            if mask.shape != (self.num_envs,) or mask.dtype != np.bool_:
                raise ValueError(
                    f"options['reset_mask'] must be a bool array of shape ({self.num_envs},), "
                    f"got {mask.dtype} {mask.shape}"
                )
            if not self._reset_called and not mask.all():
                raise ValueError("the first reset must reset every env (no reset_mask)")
        self._apply_seed(seed)
        self._draw_reset_states(mask)
        if mask is None:
            native.reset(0)  # the outputs refreshed and gathered
            mask = np.ones(self.num_envs, dtype=bool)
            stale = False
        else:
            native.reset_envs(mask.astype(np.uint8), gather=False)
            stale = True
        if self._run_noops(mask) or stale:
            native.gather_outputs()
        self._reset_called = True
        self._clear_episode(mask)
        self._needs_reset[mask] = False
        return self._obs.observe(fresh=mask, stepped=False), {}

    def step(self, actions):
        """Steps every env ``frames_per_step`` frames with ``actions`` (one per env, in the
        action codec's space); returns ``(obs, reward, terminated, truncated, info)``.
        Envs that ended on the previous step are reset instead (autoreset ``NEXT_STEP``)."""
        native = self._live()
        if not self._reset_called:
            raise RuntimeError("call reset() before step()")
        buttons = encode(self._codec, actions, self.num_envs)
        if self.sticky_actions > 0.0:
            stick = self._streams.uniform("sticky") < self.sticky_actions
            buttons = np.where(stick, self._prev_buttons, buttons).astype(np.int32)
        self._prev_buttons = buttons
        resetting = self._needs_reset
        any_reset = bool(resetting.any())
        # With autoresets the host block is copied once, after them: they touch only the
        # resetting envs, whose reward and flags this step are 0 and False anyway.
        native.step(buttons, gather=not any_reset)
        if any_reset:
            # NEXT_STEP autoreset: these envs ended last step; this step starts their next
            # episode (the step just run on them is discarded by the reset).
            self._draw_reset_states(resetting)
            native.reset_envs(resetting.astype(np.uint8), gather=False)
            self._run_noops(resetting)
            native.gather_outputs()

        reward = self._reward_view()
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        if self._has_done:
            terminated |= native.done.view(np.bool_)
        self._ep_steps += 1
        self._ep_frames += self.frames_per_step
        if self.max_episode_frames is not None:
            truncated |= self._ep_frames >= self.max_episode_frames
        info: dict[str, Any] = {}
        if any_reset:
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
        if self.hooks:
            # Per env, instruction fetches at each hook during this step (0 for envs that
            # reset: their step was discarded).
            info["hits"] = np.array(native.output("hits"), copy=True)
        self._needs_reset = ended
        obs = self._obs.observe(fresh=resetting, stepped=True)
        if self.copy:
            reward = reward.copy()
        return obs, reward, terminated, truncated, info

    def _reward_view(self) -> np.ndarray:
        if self._reward_kind == "zero":
            self._zero_reward.fill(0.0)  # a caller may have written into the last one
            return self._zero_reward
        return self._live().reward

    def render(self):
        """Env 0's screen (its last complete frame) as RGB uint8[144, 160, 3], the four DMG
        shades as greys (FF, AA, 55, 00). Needs ``render_mode="rgb_array"`` (Gymnasium's
        convention: without a render mode nothing is rendered and this returns None)."""
        if self.render_mode is None:
            gym.logger.warn(
                "render() called without a render mode: create the env with "
                "render_mode='rgb_array' to get env 0's screen"
            )
            return None
        return _SHADE_RGB[self._live().screen(0)]

    def close_extras(self, **kwargs):
        """Releases the backend (Gymnasium's ``close()`` calls this once)."""
        self._native = None
        self._obs = None

    # -- GBX extras ----------------------------------------------------------------------

    def read_memory(self, lo: int, hi: int) -> np.ndarray:
        """Bytes [lo, hi) of every env's memory view (VRAM and OAM as held even while the PPU
        locks them, I/O as of the env's cycle; no side effects),
        as a fresh uint8[num_envs, hi - lo], read in one native call."""
        for name, v in (("lo", lo), ("hi", hi)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise ValueError(f"read_memory: {name} must be an int (got {v!r})")
        if not 0 <= lo < hi <= 0x10000:
            raise ValueError(
                f"memory range must satisfy 0 <= lo < hi <= 0x10000 (got {lo:#x}:{hi:#x})"
            )
        return self._live().read_memory_all(int(lo), int(hi))

    def _scripted(self, mask: np.ndarray) -> None:
        """After :mod:`gbx.script` ran frames on the masked envs through the backend: they
        start a new episode, as after :meth:`load_state` (outputs gathered, frame stacks
        refilled, a pending autoreset cancelled)."""
        self._live().gather_outputs()
        self._clear_episode(mask)
        self._needs_reset[mask] = False
        self._obs.observe(fresh=mask, stepped=False)

    def device_arrays(self):
        """cuda: this step's outputs on the GPU as ``gbx.cuda_arrays.CudaArray`` by section
        name (``__cuda_array_interface__`` and ``__dlpack__`` on the backend's stream, no copy;
        overwritten by the next step)."""
        from .cuda_arrays import device_arrays

        return device_arrays(self._live())

    def registers(self) -> dict:
        """Registers and counters of every env, one array each (cuda: one bulk copy)."""
        return self._live().registers()

    def cpu_state(self, env: int) -> dict:
        """Registers and counters of one env."""
        return self._live().cpu_state(self._index(env))

    @property
    def kernel_key(self) -> str:
        """The stage hash (cache key) of the kernel this env runs."""
        return self._live().kernel_key

    @property
    def backend(self):
        """The native backend (gbx._native.Backend)."""
        return self._live()

    # -- internals -----------------------------------------------------------------------

    def _live(self):
        if getattr(self, "_native", None) is None:
            raise RuntimeError("this VecEnv is closed (close() was called); make a new one")
        return self._native

    def _apply_seed(self, seed) -> None:
        if seed is None:
            return
        if isinstance(seed, (list, tuple, np.ndarray)):
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(
                    f"reset(seed=[...]) needs one seed per env ({self.num_envs}), got {len(seeds)}"
                )
            for s in seeds:
                check_seed(s, "reset(seed=[...]): each seed")
            self._streams.reseed(seeds)
            self._seed = seeds
            return
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise ValueError(
                f"seed must be an int, a list of ints (one per env) or None, got {seed!r}"
            )
        check_seed(seed)
        self._streams = EnvStreams(seed, self.num_envs, self.env_offset)
        self._seed = seed

    def _index(self, i) -> int:
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"env index must be an int, got {type(i).__name__}")
        if not 0 <= i < self.num_envs:
            raise IndexError(f"env {i} out of range (0..{self.num_envs - 1})")
        return int(i)

    def _run_noops(self, mask: np.ndarray) -> bool:
        """The masked envs' no-op frames (drawn per env), all in one backend call; an env that
        drew 0 is not touched. The host block is not updated (the caller gathers); True when
        frames ran."""
        if self.noop_max == 0 or not mask.any():
            return False
        frames = self._streams.integers("noop", self.noop_max, mask)
        if frames.max() == 0:
            return False
        run = np.where(frames > 0, frames, -1).astype(np.int32)
        self._native.step_frames(self._zero_actions, run, gather=False)
        return True

    def _clear_episode(self, mask: np.ndarray) -> None:
        self._ep_return[mask] = 0.0
        self._ep_steps[mask] = 0
        self._ep_frames[mask] = 0
        self._prev_buttons[mask] = 0
