"""Device memory the judge lends to a candidate process: allocations exported through CUDA IPC.

On a GPU the judge owns one set of exchange buffers per input shape: one per forward input and one per
reference output. It allocates them itself with the CUDA driver API (not through torch's caching
allocator, so it frees them when it chooses), hands their IPC handles to each candidate process, and
reuses them for every trial of every candidate of that task. A call then moves no bytes through host
memory: the judge copies a trial's pristine inputs into the input buffers on the device, forward reads
them where they are, the candidate side copies its outputs into the output buffers, and the judge
copies those into memory of its own before it compares. Inputs that forward wrote to are seen by the
judge directly, as on CPU.

Where CUDA IPC is not available (a driver or sandbox that refuses it), `ipc_available()` says so and
the judge stages tensors through host shared memory instead (hardware.channel).
"""

from __future__ import annotations

import base64
import ctypes
from typing import Any

import torch

_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1
_driver: Any = None


def _cuda() -> Any:
    global _driver
    if _driver is None:
        _driver = ctypes.CDLL("libcuda.so.1")
    return _driver


def _check(code: int, what: str) -> None:
    if code != 0:
        name = ctypes.c_char_p()
        _cuda().cuGetErrorName(code, ctypes.byref(name))
        raise RuntimeError(f"{what} failed: {name.value.decode() if name.value else code}")


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


class _Array:
    """A __cuda_array_interface__ over raw device bytes, so torch can wrap them without a copy."""

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (ptr, False),
            "version": 3,
            "strides": None,
            "stream": None,
        }


def wrap(ptr: int, shape: list[int], dtype: torch.dtype) -> torch.Tensor:
    """A torch tensor over device memory at `ptr` (not owned by torch)."""
    nbytes = max(1, int(torch.Size(shape).numel()) * torch.empty((), dtype=dtype).element_size())
    flat = torch.as_tensor(_Array(ptr, nbytes), device=f"cuda:{torch.cuda.current_device()}")
    n = int(torch.Size(shape).numel()) * torch.empty((), dtype=dtype).element_size()
    return flat[:n].view(dtype).view(shape)


class ExportedBuffer:
    """A device allocation of the judge's, with its IPC handle; freed by `free()` (or when collected)."""

    def __init__(self, shape: list[int], dtype: torch.dtype) -> None:
        self.shape, self.dtype = list(shape), dtype
        nbytes = int(torch.Size(shape).numel()) * torch.empty((), dtype=dtype).element_size()
        self.nbytes = max(nbytes, 1)
        ptr = ctypes.c_uint64()
        _check(_cuda().cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(self.nbytes)), "cuMemAlloc")
        self.ptr = ptr.value
        handle = _Handle()
        try:
            _check(
                _cuda().cuIpcGetMemHandle(ctypes.byref(handle), ctypes.c_uint64(self.ptr)),
                "cuIpcGetMemHandle",
            )
        except RuntimeError:
            self.free()
            raise
        self.handle = base64.b64encode(bytes(handle.reserved)).decode()
        self.tensor = wrap(self.ptr, self.shape, dtype)

    def description(self) -> dict[str, Any]:
        return {"shape": self.shape, "dtype": str(self.dtype).removeprefix("torch."), "ipc": self.handle}

    def free(self) -> None:
        if getattr(self, "ptr", 0):
            self.tensor = torch.empty(0)
            torch.cuda.synchronize()
            _cuda().cuMemFree_v2(ctypes.c_uint64(self.ptr))
            self.ptr = 0

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:
            pass


def open_buffer(desc: dict[str, Any], dtype: torch.dtype) -> torch.Tensor:
    """In the candidate process: the judge's buffer described by `desc`, as a tensor."""
    raw = base64.b64decode(desc["ipc"])
    if len(raw) != 64:
        raise ValueError("an IPC handle has 64 bytes")
    handle = _Handle()
    ctypes.memmove(handle.reserved, raw, 64)
    ptr = ctypes.c_uint64()
    torch.cuda.current_device()  # the primary context is current on this thread
    _check(
        _cuda().cuIpcOpenMemHandle_v2(
            ctypes.byref(ptr), handle, ctypes.c_uint(_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
        ),
        "cuIpcOpenMemHandle",
    )
    return wrap(ptr.value, list(desc["shape"]), dtype)
