"""Type stubs for gbx._native (python/src/native.cpp)."""

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

ABI_VERSION: int
USER_TRACK_MAX: int

class CompileError(ValueError):
    """A kernel did not compile (usually a reward/done expression); the message names its line."""

class NoDeviceError(RuntimeError):
    """No usable CUDA device."""

def set_template_root(path: str) -> None: ...
def template_root() -> str: ...
def mgba_built_in() -> bool: ...

class Backend:
    """One backend (cpu, cuda or mgba) with num_envs envs and its output buffers."""

    def __init__(
        self,
        rom: str,
        rom_bytes: bytes = b"",
        backend: str = "cpu",
        num_envs: int = 1,
        frames_per_step: int = 1,
        release_after_frames: int = -1,
        threads: int = 0,
        device_index: int = 0,
        stage: str = "full_step",
        reward: str = "",
        done: str = "",
        track: Sequence[str] = ...,
        obs: str = "vec",
        obs_format: str = "full",
        gather: Sequence[int] = ...,
        render: bool = False,
        tiered_start: bool = False,
        specialize: str = "off",
    ) -> None:
        """obs: "vec" | "pixels" (obs_format full | half | packed); gather: bus addresses the
        RAM-gather epilog copies out per env; render: draw the screen every frame;
        tiered_start (cuda): a kernel not in the cache starts as NVRTC's quick compile while
        the optimized one compiles in the background, swapped in between steps."""
    def reset(self, seed: int = 0) -> None:
        """Every env to the post-boot state; outputs refreshed from it (GIL released)."""
    def reset_envs(self, mask: npt.NDArray[np.uint8], gather: bool = True) -> None:
        """Masked envs to their reset state (backend reset(mask)), the others untouched; their
        outputs refreshed from it. gather False: the host block is not updated (non-cpu)."""
    def step(self, actions: npt.NDArray[np.int32], gather: bool = True) -> None:
        """One step of frames_per_step frames; actions are joypad bytes (GIL released)."""
    def step_frames(
        self, actions: npt.NDArray[np.int32], frames: npt.NDArray[np.int32], gather: bool = True
    ) -> None:
        """Env i runs frames[i] frames (0: refresh its outputs; < 0: untouched), one call."""
    def copy_state(self, src: int, mask: npt.NDArray[np.uint8]) -> None:
        """Env src's state into the masked envs (src excepted), on the backend; outputs refreshed."""
    def gather_outputs(self) -> None:
        """The host block brought up to date (non-cpu backends)."""
    @property
    def obs(self) -> npt.NDArray[np.float32]:
        """float32[num_envs, 32] view of the backend's buffer, overwritten by each step."""
    @property
    def reward(self) -> npt.NDArray[np.float32]:
        """float32[num_envs] view, overwritten by each step."""
    @property
    def done(self) -> npt.NDArray[np.uint8]:
        """uint8[num_envs] view of the done expression's output, overwritten by each step."""
    def read_memory(self, env: int, lo: int, hi: int) -> bytes: ...
    def cpu_state(self, env: int) -> dict[str, int]: ...
    def serial(self, env: int) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def kernel_key(self) -> str: ...
    @property
    def start_tier(self) -> str:
        """cuda tiered start: "fast" until the optimized kernel is swapped in, then "optimized"."""
    @property
    def specialize_status(self) -> str:
        """specialize="auto[:N]": "profiling", "compiling", "specialized" or "failed: why"; else "off"."""
    def finish_tier_up(self) -> None:
        """Waits for a kernel compiling in the background and swaps it in for the next step."""
    @property
    def rom_name(self) -> str: ...
    @property
    def rom_sha256(self) -> str: ...
    @property
    def rom_warnings(self) -> list[str]:
        """What the ROM loaded with (a wrong header checksum, padding); VecEnv warns with them."""
    @property
    def num_envs(self) -> int: ...
    @property
    def frames_per_step(self) -> int: ...
    @property
    def obs_dim(self) -> int: ...
    # epy2: output views, screen, save states, bulk memory reads
    def output(self, name: str) -> npt.NDArray:
        """View [num_envs, *shape] of output section `name` (obs_v0 f32, pixels u8, reward f32,
        done u8, gather u8) in the one output block; overwritten by each step/reset."""
    @property
    def output_names(self) -> list[str]: ...
    def screen(self, env: int) -> npt.NDArray[np.uint8]:
        """env's last complete frame, uint8[144, 160] shade indices (a copy); needs render or
        pixels."""
    def save_state(self, env: int) -> bytes: ...
    def save_states(self) -> list[bytes]: ...
    def load_state(self, env: int, blob: bytes) -> None:
        """Loads env's state and refreshes its outputs (cpu); a foreign blob is a ValueError."""
    def set_reset_state(self, blobs: Sequence[bytes]) -> None:
        """0 blobs: power-on; 1: every env; num_envs: one each."""
    def read_memory_all(self, lo: int, hi: int) -> npt.NDArray[np.uint8]:
        """uint8[num_envs, hi - lo], every env's bus view in one call (a fresh array)."""
    # ---- cuda backend arrays (fcuda2; python/gbx/cuda_arrays.py wraps these) ----
    def cuda_outputs(self) -> list[tuple[str, int, tuple[int, ...], str]]:
        """(section name, device address, shape, dtype "f32"|"u8") of every output section."""
    def cuda_view(self, name: str) -> object:
        """One output section as a DLPack capsule of device memory (no stream ordering)."""
    @property
    def cuda_device(self) -> int: ...
    @property
    def cuda_stream(self) -> int:
        """The CUstream every step runs on, as an int."""
    def cuda_stream_wait(self, consumer: int) -> None:
        """The consumer stream (0 = legacy default) waits on the device for the backend's work."""
    def registers(self) -> dict[str, npt.NDArray]:
        """Registers and counters of every env, one array each (cuda: one bulk copy)."""

# -- gbx.pyboy_compat's native helpers -------------------------------------------------------
MEM_VRAM: int
MEM_WRAM: int
MEM_OAM: int
MEM_IO: int
MEM_CART_RAM: int
SAVE_STATE_VERSION: int

def post_boot_state(rom: str, rom_bytes: bytes = b"") -> bytes:
    """The DMG post-boot state of `rom` as a GBX save-state blob (no kernel is compiled)."""

def rom_bytes(rom: str) -> bytes:
    """The bytes of a ROM spec (path or builtin:NAME)."""
