"""The shape of a forward's result, apart from its numbers: its tensors and plain values as a flat list,
where its nesting differs from the reference's, and a value described in a few words for a report."""

from __future__ import annotations

from typing import Any

import torch


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def flatten_outputs(value: Any) -> list[Any]:
    """A forward's result as a flat list: tensors and plain values, nested tuples/lists unrolled, a dict's
    values in the order of its sorted keys (so a dict with the same keys in another order flattens alike)."""
    if isinstance(value, list | tuple):
        return [leaf for item in value for leaf in flatten_outputs(item)]
    if isinstance(value, dict):
        return [leaf for key in sorted(value) for leaf in flatten_outputs(value[key])]
    return [value]


def structure_mismatch(out: Any, ref: Any, where: str = "output") -> str | None:
    """Where the nesting of `out` differs from `ref`'s (a tensor is not a one-element list, a tuple not a
    list, a dict's keys are its keys), or None when both have the same containers and lengths all the way
    down."""
    if isinstance(ref, list | tuple):
        if type(out) is not type(ref):
            return f"{where}: got {describe(out)}, expected a {type(ref).__name__} of {len(ref)}"
        if len(out) != len(ref):
            return f"{where}: got a {type(out).__name__} of {len(out)}, expected {len(ref)}"
        for i, (o, r) in enumerate(zip(out, ref, strict=True)):
            problem = structure_mismatch(o, r, f"{where}[{i}]")
            if problem is not None:
                return problem
        return None
    if isinstance(ref, dict):
        if not isinstance(out, dict):
            return f"{where}: got {describe(out)}, expected a dict with keys {sorted(ref)}"
        if set(out) != set(ref):
            return f"{where}: got a dict with keys {sorted(out)}, expected {sorted(ref)}"
        for key in sorted(ref):
            problem = structure_mismatch(out[key], ref[key], f"{where}[{key!r}]")
            if problem is not None:
                return problem
        return None
    if isinstance(out, list | tuple | dict):
        return f"{where}: got a {type(out).__name__} of {len(out)}, expected {describe(ref)}"
    return None


def describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"tensor{list(value.shape)} {dtype_name(value.dtype)} on {value.device}"
    return type(value).__name__
