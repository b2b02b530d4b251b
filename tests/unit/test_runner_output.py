"""The candidate side's output encoding frees outputs as soon as they are dropped (no reference cycle).

At published sizes one output is gigabytes: an output kept alive until the garbage collector runs means
two or three outputs' worth of device memory where one is needed (measured on an H200: the candidate process
held 3x the output while verifying, 1x after the fix)."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from kernelwright.hardware.candidate.guard import Failed
from kernelwright.hardware.candidate.runner import encode_output
from kernelwright.hardware.failures import ERROR_TAIL_CHARS, harness_failure


def test_structure_and_tensors_in_order():
    a, b = torch.zeros(2), torch.ones(3, dtype=torch.int64)
    tensors: list[torch.Tensor] = []
    structure = encode_output(torch, (a, [b, 1.5, None]), tensors, 0)
    assert [t.shape for t in tensors] == [a.shape, b.shape]
    assert structure["U"][0]["T"] == 0 and structure["U"][1]["L"][0]["T"] == 1
    assert structure["U"][1]["L"][1:] == [{"V": 1.5}, {"V": None}]


def test_outputs_are_freed_without_the_garbage_collector():
    gc.disable()
    try:
        out = (torch.randn(64), [torch.randn(8)])
        refs = [weakref.ref(out[0]), weakref.ref(out[1][0])]
        tensors: list[torch.Tensor] = []
        encode_output(torch, out, tensors, 0)
        del out, tensors
        assert [r() for r in refs] == [None, None]
    finally:
        gc.enable()


def test_tensor_subclass_is_refused():
    class Sneaky(torch.Tensor):
        pass

    with pytest.raises(Failed) as info:
        encode_output(torch, torch.zeros(2).as_subclass(Sneaky), [], 0)
    assert info.value.kind == "forbidden"


def test_a_harness_failure_names_its_exception_first():
    """Level 3's 2_ShallowWideMLP failed on an H100 with a report whose first line read only "the candidate-side
    harness failed: Traceback (most recent call last):": the exception first, the traceback's end after, within
    the report's length however long the traceback (here 40 chained exceptions)."""

    def chained(n: int) -> None:
        try:
            if n:
                chained(n - 1)
        finally:
            raise torch.OutOfMemoryError(f"CUDA out of memory ({n}). Tried to allocate 8.00 GiB.")

    for depth in (0, 40):
        try:
            chained(depth)
        except torch.OutOfMemoryError as exc:
            text = harness_failure("candidate-side harness", exc)
        first, rest = text.split("\n", 1)
        assert (
            first == f"the candidate-side harness failed: OutOfMemoryError: CUDA out of memory ({depth}). "
            "Tried to allocate 8.00 GiB."
        ), first
        assert (
            rest.rstrip().endswith(f"({depth}). Tried to allocate 8.00 GiB.")
            and len(text) <= ERROR_TAIL_CHARS
        )
    assert rest.startswith("...")  # the long one's traceback cut at its start
