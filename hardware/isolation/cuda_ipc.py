"""Device memory the judge lends to a candidate process: CUDA virtual-memory allocations shared by fd.

On a GPU the judge owns one set of exchange buffers per input shape: one per forward input and one per
reference output. It allocates them itself with the CUDA driver's virtual memory API (cuMemCreate,
exportable as a POSIX file descriptor), not through torch's caching allocator, so it frees them when it
chooses; it sends their descriptors to each candidate process beside a JSON frame (SCM_RIGHTS), and
reuses them for every trial of every candidate of that task. Descriptors work where legacy CUDA IPC
handles do not: across PID namespaces, which hold the candidate process.

A call then moves no bytes through host memory: the judge copies a trial's pristine inputs into the
input buffers on the device, forward reads them where they are, the candidate side copies its outputs
into the output buffers, and the judge copies those into memory of its own before it compares. Inputs
that forward wrote to are seen by the judge directly, as on CPU.

Where this is not available (an old driver, a sandbox that refuses it), the attach request fails and the
judge stages tensors through host shared memory instead (hardware.isolation.channel).
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

import torch

_ALLOCATION_PINNED = 1
_LOCATION_DEVICE = 1
_HANDLE_POSIX_FD = 1
_ACCESS_READWRITE = 3
_GRANULARITY_MINIMUM = 0
_driver: Any = None


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]  # fmt: skip


class _Prop(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]  # fmt: skip


class _Access(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


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


def _prop(device: int) -> _Prop:
    prop = _Prop()
    prop.type = _ALLOCATION_PINNED
    prop.requestedHandleTypes = _HANDLE_POSIX_FD
    prop.location = _Location(_LOCATION_DEVICE, device)
    return prop


def _map(handle: int, size: int, device: int) -> int:
    """Reserve an address range, map the allocation there, allow this device to read and write it."""
    cu = _cuda()
    ptr = ctypes.c_uint64()
    _check(cu.cuMemAddressReserve(ctypes.byref(ptr), ctypes.c_size_t(size), ctypes.c_size_t(0),
                                  ctypes.c_uint64(0), ctypes.c_uint64(0)), "cuMemAddressReserve")  # fmt: skip
    _check(cu.cuMemMap(ptr, ctypes.c_size_t(size), ctypes.c_size_t(0), ctypes.c_uint64(handle), ctypes.c_uint64(0)),
           "cuMemMap")  # fmt: skip
    access = _Access(_Location(_LOCATION_DEVICE, device), _ACCESS_READWRITE)
    _check(
        cu.cuMemSetAccess(ptr, ctypes.c_size_t(size), ctypes.byref(access), ctypes.c_size_t(1)),
        "cuMemSetAccess",
    )
    return ptr.value


class _Array:
    """A __cuda_array_interface__ over raw device bytes, so torch can wrap them without a copy."""

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 3, "strides": None}  # fmt: skip


def _nbytes(shape: list[int], dtype: torch.dtype) -> int:
    return int(torch.Size(shape).numel()) * torch.empty((), dtype=dtype).element_size()


def wrap(ptr: int, shape: list[int], dtype: torch.dtype) -> torch.Tensor:
    """A torch tensor over device memory at `ptr` (not owned by torch)."""
    n = _nbytes(shape, dtype)
    flat = torch.as_tensor(_Array(ptr, max(n, 1)), device=f"cuda:{torch.cuda.current_device()}")
    return flat[:n].view(dtype).view(shape)


class ExportedBuffer:
    """A device allocation of the judge's with a POSIX fd that exports it; freed by `free()`."""

    def __init__(self, shape: list[int], dtype: torch.dtype) -> None:
        cu = _cuda()
        self.shape, self.dtype = list(shape), dtype
        self.device = torch.cuda.current_device()
        prop = _prop(self.device)
        gran = ctypes.c_size_t()
        _check(cu.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop), _GRANULARITY_MINIMUM),
               "cuMemGetAllocationGranularity")  # fmt: skip
        g = max(int(gran.value), 1)
        self.size = max(g, -(-_nbytes(shape, dtype) // g) * g)
        handle = ctypes.c_uint64()
        _check(cu.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(self.size), ctypes.byref(prop), ctypes.c_uint64(0)),
               "cuMemCreate")  # fmt: skip
        self.handle, self.ptr, self.fd = handle.value, 0, -1
        try:
            self.ptr = _map(self.handle, self.size, self.device)
            fd = ctypes.c_int(-1)
            _check(cu.cuMemExportToShareableHandle(ctypes.byref(fd), ctypes.c_uint64(self.handle), _HANDLE_POSIX_FD,
                                                   ctypes.c_uint64(0)), "cuMemExportToShareableHandle")  # fmt: skip
            self.fd = fd.value
        except RuntimeError:
            self.free()
            raise
        self.tensor = wrap(self.ptr, self.shape, dtype)

    def description(self) -> dict[str, Any]:
        return {"shape": self.shape, "dtype": str(self.dtype).removeprefix("torch."), "size": self.size}

    def free(self) -> None:
        cu = _cuda()
        self.tensor = torch.empty(0)
        if self.ptr:
            torch.cuda.synchronize()
            cu.cuMemUnmap(ctypes.c_uint64(self.ptr), ctypes.c_size_t(self.size))
            cu.cuMemAddressFree(ctypes.c_uint64(self.ptr), ctypes.c_size_t(self.size))
            self.ptr = 0
        if self.handle:
            cu.cuMemRelease(ctypes.c_uint64(self.handle))
            self.handle = 0
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:
            pass


def open_buffer(desc: dict[str, Any], fd: int, dtype: torch.dtype) -> torch.Tensor:
    """In the candidate process: the judge's buffer exported as `fd` (closed here), as a tensor."""
    cu = _cuda()
    device = torch.cuda.current_device()
    handle = ctypes.c_uint64()
    try:
        _check(cu.cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.c_void_p(fd), _HANDLE_POSIX_FD),
               "cuMemImportFromShareableHandle")  # fmt: skip
    finally:
        os.close(fd)
    ptr = _map(handle.value, int(desc["size"]), device)
    return wrap(ptr, list(desc["shape"]), dtype)
