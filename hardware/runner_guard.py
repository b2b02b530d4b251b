"""The candidate process's watch over candidate code: forward run with fresh memory poisoned, under the
evidence recorder, and checked afterwards for tampering (the recorder, Triton's launcher, torch's mode
stacks, the poisoning switch, the caching allocator, threads left running, torch's float32 precision
switches); the storages and input fingerprints a call compares; and the profiler's view of one more forward (GPU).

It uses only functions the Runner captured before the candidate was imported (hardware.runner), so a
candidate that patches torch's Python modules does not change what is checked.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, NoReturn

from kernelwright.hardware.evidence import Recorder, RecordingMode, tensors_reachable
from kernelwright.hardware.failures import classify_exception, format_exception, tail


class _Failed(Exception):
    """Ends a request with a failure the judge is told about."""

    def __init__(self, stage: str, kind: str, text: str) -> None:
        super().__init__(text)
        self.stage, self.kind, self.text = stage, kind, tail(text)


def _fail(stage: str, kind: str, text: str) -> NoReturn:
    raise _Failed(stage, kind, text)


class ForwardGuard:
    """Runs candidate code under watch (see the module docstring); the state is set by Runner.__init__."""

    torch: Any
    cuda: bool
    path: str
    """The candidate's source file (for tracebacks)."""
    module: Any
    recorder: Recorder
    _hooks: list[tuple[Any, Any]]
    _threads_at_start: set[int]
    # Captured before any candidate code existed (Runner.__init__):
    _frames: Callable[[], dict[int, Any]]
    _det_enabled: Callable[[], bool]
    _set_det: Any
    _det_module: Any
    _stack_len: Callable[[], int]
    _stack_at: Callable[[int], Any]
    _fn_stack_len: Callable[[], int]
    _push_mode: Any
    _pop_mode: Any
    _zero: Any
    _no_grad: Any
    _sync: Any
    _device_frees: Callable[[], int]
    _precision_now: tuple[Callable[[], bool], Callable[[], str]]
    _precision_set: tuple[Callable[[bool], None], Callable[[str], None]]
    _precision: tuple[bool, str] | None
    """(cuDNN TF32, float32 matmul precision) as `load` set them, None before."""
    _thread_state_id: Callable[[], int]
    _thread_mark: int

    def _existing(self, args: Any, model: Any) -> list[Any]:
        """Tensors that exist before forward: its inputs, the model's tensors and the module's."""
        from kernelwright.hardware.evidence import _tensors_in

        found = list(_tensors_in(args)) + list(tensors_reachable(model))
        if self.module is not None:
            found += list(tensors_reachable(list(vars(self.module).values())))
        return found

    def _arg_prints(self, args: Any) -> list[tuple[int, int]]:
        from kernelwright.hardware.evidence import _tensors_in, fingerprint

        return [fingerprint(t) for t in _tensors_in(args)]

    def _poison(self, nbytes: list[int]) -> None:
        """Pre-fill the CUDA caching allocator with 0xFF bytes (NaN in every float format) in blocks the
        size of the expected outputs, so output memory forward does not write reads as NaN."""
        if not self.cuda:
            return
        torch = self.torch
        blocks = [torch.empty(max(n, 512), dtype=torch.uint8, device="cuda").fill_(255) for n in nbytes]
        del blocks

    def _forward(
        self, model: Any, args: list[Any], stage: str, record: bool, existing: list[Any] | None = None
    ) -> Any:
        """One guarded forward; with `record`, under the evidence recorder (`existing`: the tensors there
        before forward, whose contents the recorder fingerprints first)."""
        from kernelwright.hardware.evidence import _tensors_in

        frees = self._device_frees() if self.cuda else 0
        mode = RecordingMode(self.recorder) if record else None
        tampered = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._set_det(True, warn_only=True)
            self._det_module.fill_uninitialized_memory = True  # type: ignore[attr-defined]
            if mode is not None:
                self.recorder.start(existing or [])
                self._push_mode(mode)
            try:
                with self._no_grad():
                    out = model(*args)
                if self._sync is not None:
                    self._sync()
                if mode is not None:  # what is returned must be what the recorder last saw written there
                    self.recorder.check(_tensors_in(out), "returned by forward")
            except BaseException as exc:  # noqa: B036 - SystemExit and KeyboardInterrupt are the candidate's too
                kind = classify_exception(exc) if isinstance(exc, Exception) else "runtime_error"
                where = (
                    "compile" if kind == "compile_error" else ("run" if kind == "runtime_error" else stage)
                )
                _fail(where, kind, f"forward raised {format_exception(exc, self.path)}")
            finally:
                poison_on = self._det_enabled() and self._det_module.fill_uninitialized_memory is True  # type: ignore[attr-defined]
                if record:
                    self.recorder.stop()
                    if self._stack_len() != 1 or self._stack_at(0) is not mode:
                        tampered.append("the dispatch mode stack was changed")
                while self._stack_len():
                    self._pop_mode()
                self._set_det(False)
        if any(getattr(cls, "run", None) is not fn for cls, fn in self._hooks):
            tampered.append("Triton's launcher was replaced")
        if self._fn_stack_len():
            tampered.append("a torch function mode was left on")
        if tampered:
            _fail(stage, "forbidden", "forward tampered with the harness's recorder: " + "; ".join(tampered))
        if not poison_on:
            _fail(stage, "forbidden", "forward switched off the harness's poisoning of fresh memory "
                  "(torch.use_deterministic_algorithms / fill_uninitialized_memory)")  # fmt: skip
        if self.cuda and self._device_frees() != frees:
            _fail(stage, "forbidden", "forward released the CUDA caching allocator's memory (empty_cache), "
                  "which holds the harness's poisoned blocks")  # fmt: skip
        self._check_threads("forward")
        self._check_precision("forward", stage)
        return out

    def _check_threads(self, when: str) -> None:
        """No thread of the candidate's may be running, and none may have been started since the last
        check, even one that has ended since: every Python thread takes a new thread state, whose ids
        only grow (`_thread_state_id`), however it was started."""
        extra = set(self._frames()) - self._threads_at_start
        if extra:
            _fail("run", "forbidden", f"{when} left {len(extra)} thread(s) running; a candidate may not start "
                  "threads (work in them is out of the harness's sight)")  # fmt: skip
        now = self._thread_state_id()
        started, self._thread_mark = now - self._thread_mark - 1, now
        if started > 0:
            _fail("run", "forbidden", f"{when} started {started} thread(s) (ended since); a candidate may not "
                  "start threads (work in them is out of the harness's sight)")  # fmt: skip

    def _mark_threads(self) -> None:
        """Start counting thread states from here (after the harness's own work that may start some)."""
        self._thread_mark = self._thread_state_id()

    def _apply_precision(self, precision: str) -> None:
        """TF32 for cuDNN convolutions and float32 matmuls only where the mode allows it, as the judge runs
        the reference (hardware.judge_base): a torch op the candidate calls runs at the same precision."""
        tf32 = precision != "strict"
        self._precision = (tf32, "high" if tf32 else "highest")
        self._precision_set[0](tf32)
        self._precision_set[1](self._precision[1])

    def _check_precision(self, during: str, stage: str) -> None:
        """The candidate may not change the precision its torch ops run at (static_check forbids writing
        those switches; this catches what it cannot see)."""
        if self._precision is None:
            return
        now = (bool(self._precision_now[0]()), str(self._precision_now[1]()))
        if now != self._precision:
            _fail(stage, "forbidden",
                  f"{during} changed torch's float32 precision switches (cudnn allow_tf32, float32 matmul "
                  f"precision) from {self._precision} to {now}; the judge sets them to what the precision "
                  "mode allows")  # fmt: skip

    def _profile_kernels(self, model: Any, args: list[Any]) -> dict[str, int]:
        """GPU kernels one more forward ran, by name, as the CUDA profiler saw them (all threads)."""
        torch = self.torch
        from torch.profiler import ProfilerActivity, profile

        counts: dict[str, int] = {}
        try:
            with profile(activities=[ProfilerActivity.CUDA]) as prof, self._no_grad():
                model(*args)
                self._sync()
            for e in prof.events():
                if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA:
                    counts[e.name] = counts.get(e.name, 0) + 1
        except Exception as exc:  # the profiler is a cross-check; its absence is reported, not fatal
            counts = {"<profiler unavailable>": 1}
            del exc
        self._mark_threads()  # the profiler's own threads are not the candidate's
        return counts


def thread_state_counter() -> Callable[[], int]:
    """A function that returns a new Python thread state's id: ids only grow, by one per thread state
    made, so two calls more than one apart mean a thread was started in between (by any means: threading,
    _thread, a fresh copy of the _thread module, a pool), even if it has ended. Captured from the C API
    before any candidate code exists."""
    import ctypes

    api = ctypes.pythonapi
    interp, new, get_id = api.PyInterpreterState_Get, api.PyThreadState_New, api.PyThreadState_GetID
    clear, delete = api.PyThreadState_Clear, api.PyThreadState_Delete
    interp.restype, interp.argtypes = ctypes.c_void_p, []
    new.restype, new.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
    get_id.restype, get_id.argtypes = ctypes.c_uint64, [ctypes.c_void_p]
    clear.restype, clear.argtypes = None, [ctypes.c_void_p]
    delete.restype, delete.argtypes = None, [ctypes.c_void_p]

    def next_id() -> int:
        state = new(interp())
        try:
            return int(get_id(state))
        finally:
            clear(state)
            delete(state)

    return next_id
