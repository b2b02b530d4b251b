"""The candidate process's watch over candidate code: forward run with fresh memory poisoned, under the
evidence recorder, and checked afterwards for tampering (the recorder, Triton's launcher, torch's mode
stacks, the poisoning switch, the caching allocator, threads left running, torch's float32 precision
switches); the storages and input fingerprints a call compares; and the profiler's view of one more forward (GPU).

It uses only functions captured before the candidate was imported (`Captured.capture`, called by
hardware.candidate.runner's Runner), so a candidate that patches torch's Python modules does not change what is
checked. A new check on what forward does goes in `ForwardGuard.forward`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from kernelwright.hardware.candidate.tripwires import Tripwires
from kernelwright.hardware.failures import classify_exception, format_exception, tail
from kernelwright.hardware.judge.evidence import Recorder, RecordingMode, tensors_reachable


class Failed(Exception):
    """Ends a request with a failure the judge is told about."""

    def __init__(self, stage: str, kind: str, text: str) -> None:
        super().__init__(text)
        self.stage, self.kind, self.text = stage, kind, tail(text)


def fail(stage: str, kind: str, text: str) -> NoReturn:
    raise Failed(stage, kind, text)


@dataclass(frozen=True)
class Captured:
    """torch's functions the harness calls, captured before any candidate code exists, from C types whose
    attributes cannot be replaced where possible (see `capture`)."""

    frames: Callable[[], dict[int, Any]]
    det_enabled: Callable[[], bool]
    set_det: Any
    det_module: Any
    stack_len: Callable[[], int]
    stack_at: Callable[[int], Any]
    fn_stack_len: Callable[[], int]
    push_mode: Any
    pop_mode: Any
    zero: Any
    no_grad: Any
    precision_now: tuple[Callable[[], bool], Callable[[], str]]
    """torch's float32 precision switches, read from C (cuDNN TF32, float32 matmul precision)."""
    precision_set: tuple[Callable[[bool], None], Callable[[str], None]]
    sync: Any = None
    """GPU: a device-wide synchronize; None on CPU."""
    device_frees: Callable[[], int] = lambda: 0
    """GPU: how many times the caching allocator gave memory back to the device."""
    event: Any = None
    record: Any = None
    elapsed: Any = None
    stream: Any = None
    """GPU: the stream the harness times on."""

    @classmethod
    def capture(cls, torch: Any, cuda: bool) -> Captured:
        """Capture them now (the candidate process, before it imports the candidate; on a GPU this also
        initialises CUDA)."""
        import sys

        from torch.utils import _python_dispatch

        gpu: dict[str, Any] = {}
        if cuda:
            torch.cuda.init()
            gpu = {
                "sync": torch._C._cuda_synchronize,
                "event": torch._C._CudaEventBase,
                "record": torch._C._CudaEventBase.record,
                "elapsed": torch._C._CudaEventBase.elapsed_time,
                "stream": torch.cuda.current_stream(),
                "device_frees": lambda: int(torch.cuda.memory_stats().get("num_device_free", 0)),
            }
        return cls(
            frames=sys._current_frames,
            det_enabled=torch.are_deterministic_algorithms_enabled,
            set_det=torch.use_deterministic_algorithms,
            det_module=torch.utils.deterministic,
            stack_len=torch._C._len_torch_dispatch_stack,
            stack_at=torch._C._get_dispatch_stack_at,
            fn_stack_len=torch._C._len_torch_function_stack,
            push_mode=_python_dispatch._push_mode,
            pop_mode=_python_dispatch._pop_mode,
            zero=torch._C.TensorBase.zero_,
            no_grad=torch.no_grad,
            precision_now=(torch._C._get_cudnn_allow_tf32, torch._C._get_float32_matmul_precision),
            precision_set=(torch._C._set_cudnn_allow_tf32, torch._C._set_float32_matmul_precision),
            **gpu,
        )


class ForwardGuard:
    """Runs candidate code under watch (see the module docstring). Made once the harness's own start-up
    work is done (threads running then are the harness's), before the candidate is imported."""

    def __init__(self, torch: Any, cuda: bool, captured: Captured, recorder: Recorder,
                 hooks: list[tuple[Any, Any]], path: str, tripwires: Tripwires | None = None) -> None:  # fmt: skip
        self.torch = torch
        self.cuda = cuda
        self.captured = captured
        self.recorder = recorder
        self.hooks = hooks
        """Triton's launcher classes and the `run` the evidence hooks installed on each."""
        self.path = path
        """The candidate's source file (for tracebacks)."""
        self.tripwires = tripwires
        """What the candidate may not call (hardware.candidate.tripwires), checked after every call."""
        self.module: Any = None
        """The candidate's module, once imported (its globals' tensors exist before forward)."""
        self.precision: tuple[bool, str] | None = None
        """(cuDNN TF32, float32 matmul precision) as `load` set them, None before."""
        self.threads_at_start = set(captured.frames())
        self.thread_state_id = thread_state_counter()
        self.thread_mark = 0
        self.mark_threads()

    def existing(self, args: Any, model: Any) -> list[Any]:
        """Tensors that exist before forward: its inputs, the model's tensors and the module's."""
        from kernelwright.hardware.judge.evidence import tensors_in

        found = list(tensors_in(args)) + list(tensors_reachable(model))
        if self.module is not None:
            found += list(tensors_reachable(list(vars(self.module).values())))
        return found

    def arg_prints(self, args: Any, key: Any) -> list[tuple[int, int]]:
        """Fingerprints of forward's arguments under `key` (one drawn for this call)."""
        from kernelwright.hardware.judge.evidence import tensors_in
        from kernelwright.hardware.judge.fingerprint import fingerprint

        return [fingerprint(t, key) for t in tensors_in(args)]

    def poison(self, nbytes: list[int]) -> None:
        """Pre-fill the CUDA caching allocator with 0xFF bytes (NaN in every float format) in blocks the
        size of the expected outputs, so output memory forward does not write reads as NaN."""
        if not self.cuda:
            return
        torch = self.torch
        blocks = [torch.empty(max(n, 512), dtype=torch.uint8, device="cuda").fill_(255) for n in nbytes]
        del blocks

    def forward(
        self, model: Any, args: list[Any], stage: str, record: bool, existing: list[Any] | None = None
    ) -> Any:
        """One guarded forward; with `record`, under the evidence recorder (`existing`: the tensors there
        before forward, whose contents the recorder fingerprints first)."""
        from kernelwright.hardware.judge.evidence import tensors_in

        frees = self.captured.device_frees() if self.cuda else 0
        mode = RecordingMode(self.recorder) if record else None
        tampered = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.captured.set_det(True, warn_only=True)
            self.captured.det_module.fill_uninitialized_memory = True  # type: ignore[attr-defined]
            if mode is not None:
                self.recorder.start(existing or [])
                self.captured.push_mode(mode)
            try:
                with self.captured.no_grad():
                    out = model(*args)
                if self.captured.sync is not None:
                    self.captured.sync()
                if mode is not None:  # what is returned must be what the recorder last saw written there
                    self.recorder.check(tensors_in(out), "returned by forward")
            except BaseException as exc:  # noqa: B036 - SystemExit and KeyboardInterrupt are the candidate's too
                self.check_tripwires("forward")  # a tripwire's error is a forbidden call, not a crash
                kind = classify_exception(exc) if isinstance(exc, Exception) else "runtime_error"
                where = (
                    "compile" if kind == "compile_error" else ("run" if kind == "runtime_error" else stage)
                )
                fail(where, kind, f"forward raised {format_exception(exc, self.path)}")
            finally:
                poison_on = (
                    self.captured.det_enabled() and self.captured.det_module.fill_uninitialized_memory is True
                )  # type: ignore[attr-defined]
                if record:
                    self.recorder.stop()
                    if self.captured.stack_len() != 1 or self.captured.stack_at(0) is not mode:
                        tampered.append("the dispatch mode stack was changed")
                while self.captured.stack_len():
                    self.captured.pop_mode()
                self.captured.set_det(False)
        if any(getattr(cls, "run", None) is not fn for cls, fn in self.hooks):
            tampered.append("Triton's launcher was replaced")
        if self.captured.fn_stack_len():
            tampered.append("a torch function mode was left on")
        if tampered:
            fail(stage, "forbidden", "forward tampered with the harness's recorder: " + "; ".join(tampered))
        if not poison_on:
            fail(stage, "forbidden", "forward switched off the harness's poisoning of fresh memory "
                  "(torch.use_deterministic_algorithms / fill_uninitialized_memory)")  # fmt: skip
        if self.cuda and self.captured.device_frees() != frees:
            fail(stage, "forbidden", "forward released the CUDA caching allocator's memory (empty_cache), "
                  "which holds the harness's poisoned blocks")  # fmt: skip
        self.check_threads("forward")
        self.check_precision("forward", stage)
        return out

    def check_tripwires(self, when: str) -> None:
        """No tripwire may have been tripped or taken off (hardware.candidate.tripwires)."""
        problem = self.tripwires.problem() if self.tripwires is not None else None
        if problem:
            fail("run", "forbidden", f"{when} {problem}")

    def check_threads(self, when: str) -> None:
        """No thread of the candidate's may be running, and none may have been started since the last
        check, even one that has ended since: every Python thread takes a new thread state, whose ids
        only grow (`thread_state_id`), however it was started. The tripwires are checked first: this
        runs after every call of candidate code."""
        self.check_tripwires(when)
        extra = set(self.captured.frames()) - self.threads_at_start
        if extra:
            fail("run", "forbidden", f"{when} left {len(extra)} thread(s) running; a candidate may not start "
                  "threads (work in them is out of the harness's sight)")  # fmt: skip
        now = self.thread_state_id()
        started, self.thread_mark = now - self.thread_mark - 1, now
        if started > 0:
            fail("run", "forbidden", f"{when} started {started} thread(s) (ended since); a candidate may not "
                  "start threads (work in them is out of the harness's sight)")  # fmt: skip

    def mark_threads(self) -> None:
        """Start counting thread states from here (after the harness's own work that may start some)."""
        self.thread_mark = self.thread_state_id()

    def apply_precision(self, precision: str) -> None:
        """TF32 for cuDNN convolutions and float32 matmuls only where the mode allows it, as the judge runs
        the reference (hardware.judge.device): a torch op the candidate calls runs at the same precision."""
        tf32 = precision != "strict"
        self.precision = (tf32, "high" if tf32 else "highest")
        self.captured.precision_set[0](tf32)
        self.captured.precision_set[1](self.precision[1])

    def check_precision(self, during: str, stage: str) -> None:
        """The candidate may not change the precision its torch ops run at (static_check forbids writing
        those switches; this catches what it cannot see)."""
        if self.precision is None:
            return
        now = (bool(self.captured.precision_now[0]()), str(self.captured.precision_now[1]()))
        if now != self.precision:
            fail(stage, "forbidden",
                  f"{during} changed torch's float32 precision switches (cudnn allow_tf32, float32 matmul "
                  f"precision) from {self.precision} to {now}; the judge sets them to what the precision "
                  "mode allows")  # fmt: skip

    def profile_kernels(
        self, model: Any, args: list[Any], activities: list[Any] | None = None
    ) -> dict[str, int]:
        """GPU kernels one more forward ran, by name, as the CUDA profiler saw them (all threads).
        Its threads are checked as every other call's: the count starts once the profiler has started
        (its own start-up threads are not the candidate's) and is checked before it stops, and what it
        starts while stopping is let go after. `activities`: the profiler's (CUDA; tests on CPU pass CPU)."""
        torch = self.torch
        from torch.profiler import ProfilerActivity, profile

        counts: dict[str, int] = {}
        try:
            with profile(activities=activities or [ProfilerActivity.CUDA]) as prof:
                self.mark_threads()
                with self.captured.no_grad():
                    model(*args)
                if self.captured.sync is not None:
                    self.captured.sync()
                self.check_threads("the profiled forward")
            for e in prof.events():
                if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA:
                    counts[e.name] = counts.get(e.name, 0) + 1
        except Failed:
            raise
        except Exception as exc:  # the profiler is a cross-check; its absence is reported, not fatal
            counts = {"<profiler unavailable>": 1}
            del exc
        self.mark_threads()  # the threads the profiler starts as it stops are not the candidate's
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
