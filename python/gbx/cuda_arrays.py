"""Device arrays of the cuda backend: zero-copy views of a step's outputs on the GPU.

Each output section (``obs_v0``, ``pixels``, ``reward``, ``done``, ``gather``) is a
:class:`CudaArray` that speaks both GPU array protocols, so ``torch.as_tensor(a,
device="cuda")``, ``torch.from_dlpack(a)``, CuPy and Numba share the backend's memory:

- ``__cuda_array_interface__`` (version 3) names the backend's stream in ``"stream"``; the
  consumer orders its reads after it.
- ``__dlpack__(stream=S)`` (``kDLCUDA``) makes the consumer's stream ``S`` wait on the device
  for the backend's stream (an event: the host does not block), as the DLPack protocol asks of
  a producer. ``None`` or ``1`` mean the legacy default stream, ``-1`` no synchronisation.

The memory is the backend's own output block: overwritten by the next step or reset, freed
with the backend. Host copies are ``Backend.output(name)`` (one page-locked transfer per step
for all sections).
"""

from __future__ import annotations

_KDL_CUDA = 2  # DLDeviceType kDLCUDA
_TYPESTR = {"f32": "<f4", "u8": "|u1"}


class CudaArray:
    """One output section of every env, on the device (env-major, C-contiguous)."""

    def __init__(self, native, name: str, ptr: int, shape: tuple, dtype: str, device: int):
        self._native = native  # keeps the backend (and so the memory) alive
        self.name = name
        self.ptr = ptr
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtype
        self.device = device

    @property
    def __cuda_array_interface__(self) -> dict:
        return {
            "shape": self.shape,
            "typestr": _TYPESTR[self.dtype],
            "data": (self.ptr, False),
            "strides": None,  # C-contiguous
            "version": 3,
            "stream": self._native.cuda_stream,
        }

    def __dlpack_device__(self) -> tuple[int, int]:
        return (_KDL_CUDA, self.device)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if copy:
            raise BufferError("CudaArray.__dlpack__: copy=True is not supported (share, then copy)")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(
                f"CudaArray.__dlpack__: the array lives on {self.__dlpack_device__()}"
            )
        if stream is None or stream == 1:
            self._native.cuda_stream_wait(0)  # the legacy default stream
        elif stream == 2:
            raise BufferError(
                "CudaArray.__dlpack__: the per-thread default stream is not supported"
            )
        elif stream != -1:
            self._native.cuda_stream_wait(int(stream))
        # nanobind hands a framework-less device array over as the DLPack capsule itself.
        return self._native.cuda_view(self.name)

    def __repr__(self) -> str:
        return (
            f"CudaArray({self.name!r}, shape={self.shape}, dtype={self.dtype}, ptr={self.ptr:#x})"
        )


def device_arrays(native) -> dict[str, CudaArray]:
    """Every output section of a cuda ``gbx._native.Backend`` as a :class:`CudaArray`."""
    device = native.cuda_device
    return {
        name: CudaArray(native, name, ptr, shape, dtype, device)
        for name, ptr, shape, dtype in native.cuda_outputs()
    }
