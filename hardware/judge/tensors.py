"""Tensor helpers for the judge: the tensors in a (nested) value, copies, float64 upcasts and a bitwise
comparison that sees NaN payloads; and whether an exception was the device running out of memory."""

from __future__ import annotations

from typing import Any


def tensors_of(value: Any) -> list[Any]:
    import torch

    from kernelwright.hardware.judge.output_structure import flatten_outputs

    return [v for v in flatten_outputs(value) if isinstance(v, torch.Tensor)]


def map_tensors(value: Any, fn: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, list | tuple):
        return type(value)(map_tensors(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: map_tensors(v, fn) for k, v in value.items()}
    return value


def clone(value: Any) -> Any:
    return map_tensors(value, lambda t: t.clone())


def detach(value: Any) -> Any:
    return map_tensors(value, lambda t: t.detach())


def upcast(t: Any) -> Any:
    import torch

    if t.is_complex():
        return t.to(torch.complex128, copy=True)
    if t.is_floating_point():
        return t.to(torch.float64, copy=True)
    return t.clone()


def bitwise_equal(a: Any, b: Any, chunk: int = 1 << 26) -> bool:
    """Same shape, dtype and bytes (NaN payloads included), compared a chunk of bytes at a time."""
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    x, y = a.detach().reshape(-1), b.detach().to(a.device).reshape(-1)
    if not (x.is_contiguous() and y.is_contiguous()):
        x, y = x.contiguous(), y.contiguous()
    if x.dtype != torch.bool:
        x, y = x.view(torch.uint8), y.view(torch.uint8)
        if x.numel() % 8 == 0:  # the same bytes, compared eight at a time
            x, y = x.view(torch.int64), y.view(torch.int64)
    return all(bool(torch.equal(x[i : i + chunk], y[i : i + chunk])) for i in range(0, x.numel(), chunk))


def out_of_memory(exc: BaseException) -> bool:
    import torch

    from kernelwright.hardware.failures import exception_chain

    return any(isinstance(e, torch.OutOfMemoryError) for e in exception_chain(exc))
