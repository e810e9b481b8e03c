"""Type stubs for gbx._native (python/src/native.cpp)."""
from typing import Sequence

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
    ) -> None: ...
    def reset(self, seed: int = 0) -> None:
        """Every env to the post-boot state; outputs refreshed from it (GIL released)."""
    def reset_envs(self, mask: npt.NDArray[np.uint8]) -> None:
        """Masked envs to their reset state (backend reset(mask)), the others untouched."""
    def step(self, actions: npt.NDArray[np.int32]) -> None:
        """One step of frames_per_step frames; actions are joypad bytes (GIL released)."""
    def step_envs(
        self, actions: npt.NDArray[np.int32], frames: int, mask: npt.NDArray[np.uint8]
    ) -> None:
        """`frames` frames (0: refresh outputs) on the masked envs (cpu backend)."""
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
    def rom_name(self) -> str: ...
    @property
    def rom_sha256(self) -> str: ...
    @property
    def num_envs(self) -> int: ...
    @property
    def frames_per_step(self) -> int: ...
    @property
    def obs_dim(self) -> int: ...
    # ---- cuda backend arrays (fcuda2; python/gbx/cuda_arrays.py wraps these) ----
    def cuda_outputs(self) -> list[tuple[str, int, tuple[int, ...], str]]:
        """(section name, device address, shape, dtype "f32"|"u8") of every output section."""
    def cuda_view(self, name: str) -> object:
        """One output section as a DLPack view of device memory (no stream ordering)."""
    @property
    def cuda_device(self) -> int: ...
    @property
    def cuda_stream(self) -> int:
        """The CUstream every step runs on, as an int."""
    def cuda_stream_wait(self, consumer: int) -> None:
        """The consumer stream (0 = legacy default) waits on the device for the backend's work."""
    def registers(self) -> dict[str, npt.NDArray]:
        """Registers and counters of every env, one array each (cuda: one bulk copy)."""
