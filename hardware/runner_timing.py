"""The candidate process's timing requests (GPU): `time`, CUDA events around each call after an L2 flush,
and `loop`, n flushed calls and a device-wide synchronize for the judge's wall clock. Both use only the
functions the Runner captured before the candidate was imported (hardware.runner)."""

from __future__ import annotations

from typing import Any

from kernelwright.hardware.channel import close_fds
from kernelwright.hardware.runner_guard import ForwardGuard, _fail


class TimedCalls(ForwardGuard):
    """The `time` and `loop` requests (see the module docstring)."""

    models: dict[str, Any]
    timing_args: dict[str, list[Any]]
    _flush_buf: Any
    _event: Any
    _record: Any
    _elapsed: Any
    _stream: Any

    def _flush(self, nbytes: int) -> Any:
        if self._flush_buf is None or self._flush_buf.numel() * 4 < nbytes:
            self._flush_buf = self.torch.empty(nbytes // 4, dtype=self.torch.int32, device="cuda")
        return self._flush_buf

    def time(self, msg: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], list[int]]:
        """`reps` calls, each after an L2 flush, between CUDA events on the harness's stream."""
        close_fds(fds)
        key = str(msg["model"])
        model, args = self.models[key], self.timing_args[key]
        flush = self._flush(int(msg["flush_bytes"]))
        warmup, reps = int(msg.get("warmup", 0)), int(msg["reps"])
        starts = [self._event(enable_timing=True) for _ in range(reps)]
        ends = [self._event(enable_timing=True) for _ in range(reps)]
        with self._no_grad():
            for _ in range(warmup):
                self._zero(flush)
                model(*args)
            self._sync()
            for i in range(reps):
                self._zero(flush)
                self._record(starts[i], self._stream)
                model(*args)
                self._record(ends[i], self._stream)
            self._sync()
        samples = [float(self._elapsed(s, e)) for s, e in zip(starts, ends, strict=True)]
        if self._stack_len() or self._fn_stack_len():
            _fail("timing", "forbidden", "forward left a dispatch or function mode on while being timed")
        self._check_threads("timing")
        self._check_precision("timing", "timing")
        return {"op": "timed", "samples": samples}, []

    def loop(self, msg: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], list[int]]:
        """`n` flushed calls and a device-wide synchronize; the judge times the whole request."""
        close_fds(fds)
        key = str(msg["model"])
        model, args = self.models[key], self.timing_args[key]
        flush = self._flush(int(msg["flush_bytes"]))
        with self._no_grad():
            self._sync()
            for _ in range(int(msg["n"])):
                self._zero(flush)
                model(*args)
            self._sync()
        self._check_threads("timing")
        return {"op": "looped"}, []
