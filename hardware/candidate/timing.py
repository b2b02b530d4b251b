"""The candidate process's timing requests (GPU): `time`, CUDA events around each call after an L2 flush,
and `loop`, n flushed calls and a device-wide synchronize for the judge's wall clock. Both use only the
functions captured before the candidate was imported (hardware.candidate.guard.Captured), and check the
candidate's threads and precision switches through its ForwardGuard after the calls."""

from __future__ import annotations

from typing import Any

from kernelwright.hardware.candidate.guard import ForwardGuard, fail
from kernelwright.hardware.isolation.channel import close_fds


class TimedCalls:
    """The `time` and `loop` requests (see the module docstring) on the models and timed arguments the
    Runner holds (`models`, and `timing_args` as a call with keep=True left them)."""

    def __init__(
        self, guard: ForwardGuard, models: dict[str, Any], timing_args: dict[str, list[Any]]
    ) -> None:
        self.guard = guard
        self.captured = guard.captured
        self.torch = guard.torch
        self.models = models
        self.timing_args = timing_args
        self._flush_buf: Any = None

    def flush(self, nbytes: int) -> Any:
        """The buffer zeroed before each timed call to flush the L2 cache (at least `nbytes`)."""
        if self._flush_buf is None or self._flush_buf.numel() * 4 < nbytes:
            self._flush_buf = self.torch.empty(nbytes // 4, dtype=self.torch.int32, device="cuda")
        return self._flush_buf

    def time(self, msg: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], list[int]]:
        """`reps` calls, each after an L2 flush, between CUDA events on the harness's stream."""
        close_fds(fds)
        c = self.captured
        key = str(msg["model"])
        model, args = self.models[key], self.timing_args[key]
        flush = self.flush(int(msg["flush_bytes"]))
        warmup, reps = int(msg.get("warmup", 0)), int(msg["reps"])
        starts = [c.event(enable_timing=True) for _ in range(reps)]
        ends = [c.event(enable_timing=True) for _ in range(reps)]
        with c.no_grad():
            for _ in range(warmup):
                c.zero(flush)
                model(*args)
            c.sync()
            for i in range(reps):
                c.zero(flush)
                c.record(starts[i], c.stream)
                model(*args)
                c.record(ends[i], c.stream)
            c.sync()
        samples = [float(c.elapsed(s, e)) for s, e in zip(starts, ends, strict=True)]
        if c.stack_len() or c.fn_stack_len():
            fail("timing", "forbidden", "forward left a dispatch or function mode on while being timed")
        self.guard.check_threads("timing")
        self.guard.check_precision("timing", "timing")
        return {"op": "timed", "samples": samples}, []

    def loop(self, msg: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], list[int]]:
        """`n` flushed calls and a device-wide synchronize; the judge times the whole request."""
        close_fds(fds)
        c = self.captured
        key = str(msg["model"])
        model, args = self.models[key], self.timing_args[key]
        flush = self.flush(int(msg["flush_bytes"]))
        with c.no_grad():
            c.sync()
            for _ in range(int(msg["n"])):
                c.zero(flush)
                model(*args)
            c.sync()
        self.guard.check_threads("timing")
        return {"op": "looped"}, []
