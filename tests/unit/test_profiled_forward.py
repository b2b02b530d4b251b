"""The profiler's extra forward (hardware/candidate/guard.ForwardGuard.profile_kernels, one per GPU job) is
checked for threads as every other call is: a candidate that starts a thread only in that call fails, and
the profiler's own threads do not count. Run here with the CPU profiler in place of the CUDA one."""

from __future__ import annotations

import threading

import pytest
import torch
from torch.profiler import ProfilerActivity

from kernelwright.hardware.candidate.guard import Captured, Failed, ForwardGuard
from kernelwright.hardware.judge.evidence import Recorder


def guard() -> ForwardGuard:
    return ForwardGuard(torch, False, Captured.capture(torch, False), Recorder(), [], "candidate.py")


class Threaded(torch.nn.Module):
    """Does its work in a thread it starts, joined before forward returns, when `in_thread` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.in_thread = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        if self.in_thread:
            worker = threading.Thread(target=lambda: out.copy_(x * 2))
            worker.start()
            worker.join()
        else:
            out.copy_(x * 2)
        return out


def test_a_thread_started_in_the_profiled_forward_fails_the_candidate():
    g, model = guard(), Threaded()
    counts = g.profile_kernels(model, [torch.randn(7)], activities=[ProfilerActivity.CPU])
    assert "<profiler unavailable>" not in counts  # the profiler ran, its own threads let go
    g.check_threads("the next call")
    model.in_thread = True
    with pytest.raises(Failed, match="the profiled forward started 1 thread"):
        g.profile_kernels(model, [torch.randn(7)], activities=[ProfilerActivity.CPU])
