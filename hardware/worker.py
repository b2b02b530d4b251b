"""The evaluation worker: a separate Python process that imports candidates and runs them.

Started by `hardware.sandbox.WorkerPool` as `python -m hardware.worker FD DEVICE TMPDIR PARENT_PID` in its
own session, with stdout/stderr going to a log file the parent reads when the worker dies. torch and
triton are imported once; on CPU the parent sets TRITON_INTERPRET=1 in the environment before that import.

Protocol over the connection (multiprocessing.connection, pickled tuples):
- worker -> parent: ("ready", info) once; per job ("stage", job_id, stage) at every stage change
  (reference, compile, correctness, timing, baseline: see hardware.config.WorkerStage),
  ("partial", job_id, result) once the candidate is verified (so a timeout while timing keeps the
  verdict), and ("result", job_id, result, restart) at the end; `restart` asks the parent to replace
  the worker (CUDA error or out-of-memory: the CUDA context can no longer be trusted).
- parent -> worker: ("eval", job) or ("stop",) (the pool itself simply kills a worker it is done with).

The parent enforces every time limit; the worker only reports where it is. One job at a time.

Verification (see hardware.verify for the tolerance table):
- the reference `Model` and `ModelNew` are built from the task's init inputs with torch seeded the same
  before each, and the reference's state_dict is copied into ModelNew when the keys and shapes match;
- every trial uses fresh inputs from seed + trial; on GPU both the full inputs and the task's small
  inputs are checked, on CPU (the Triton interpreter) only the small ones;
- before each candidate call, fresh allocations are poisoned: torch's deterministic mode fills every
  `torch.empty*` result with NaN (integers with their max value), and on GPU the caching allocator is
  also pre-filled with 0xFF bytes (NaN in every float format), so unwritten output elements fail;
- the model instance is kept across trials, so a result cached from an earlier call fails a later one;
- each forward must launch at least one Triton kernel (counted by wrapping the kernel launchers);
- after timing, the timed input tensors get new contents in place and the answer must follow (a
  candidate that remembers results per input tensor would otherwise time as fast as a lookup);
- the reference runs under the same precision mode as the candidate is judged by (strict: TF32 off);
- in strict precision, for float32 outputs, the reference also runs in float64 (a deep copy of the
  reference model made .double(), same parameters, floating inputs upcast), and outputs are compared
  against that run with an allowance of 16x the float32 reference's own error scale (see
  hardware.verify). If the float64 run fails (an op without float64 support, a tensor attribute that
  .double() does not convert, out of memory) or would take too long, the comparison is against the
  float32 reference alone, as before, and the result's notes and extra["float64_reference"] say why.

Reference inputs and outputs, the float64 outputs included, are cached per (task, shape, seed, trial,
precision) for the worker's life, so evaluating many candidates of one task pays for the reference
once. The float64 run is the costly part of that first time (on GPU float64 runs at ~1/2 of float32 on
CUDA cores, near float32 speed in cuBLAS GEMMs on FP64 tensor cores, slower in cuDNN convolutions, and
holds a float64 copy of the parameters while it runs); it is bounded by a share of the reference
stage's time limit, and warm evaluation does not repeat it: per candidate only the comparison (a few
elementwise passes and one k-th value selection over each output) is added.
"""

from __future__ import annotations

import copy
import faulthandler
import hashlib
import importlib.util
import os
import shutil
import sys
import threading
import time
import traceback
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, NoReturn

from hardware.config import EvalConfig
from hardware.result import EvalResult, Versions

ERROR_TAIL_CHARS = 2000
# The float64 reference runs within this share of the reference stage's time limit (all its runs in one
# job together). Before the first run its cost is estimated as the float32 run's time times
# _FP64_COST_FACTOR (pessimistic: cuDNN float64 convolutions and CPU kernels are several times slower);
# later runs use the measured time.
_FP64_BUDGET_SHARE = 0.25
_FP64_COST_FACTOR = 32.0
_TASK_CACHE_SIZE = 3
_launches = [0]  # Triton kernel launches since the last reset; bumped by the wrapped launchers


class _Stop(Exception):
    """Ends a job early; the result it carries is already filled in."""


def tail(text: str, limit: int = ERROR_TAIL_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-(limit - 3) :]


def install_launch_counter() -> None:
    """Count Triton kernel launches by wrapping JITFunction.run (and the interpreter's equivalent).

    `kernel[grid](...)`, `kernel.run(...)` and autotuned launches all go through `run`; a warm-up
    (compile only) does not count.
    """
    from triton.runtime.jit import JITFunction

    classes: list[Any] = [JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:  # triton without the interpreter
        pass
    for cls in classes:
        original = cls.run

        def run(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            if not kwargs.get("warmup", False):
                _launches[0] += 1
            return _original(self, *args, **kwargs)

        cls.run = run


def classify_exception(exc: BaseException) -> tuple[str, bool]:
    """(error_kind, restart_worker) for an exception raised by a candidate's code."""
    import torch
    from triton.errors import TritonError

    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in chain:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    if any(isinstance(e, torch.OutOfMemoryError) for e in chain):
        return "crash", True
    text = " ".join(f"{type(e).__name__}: {e}" for e in chain)
    cuda_markers = ("CUDA error", "CUDA driver error", "illegal memory access", "device-side assert",
                    "Triton Error [CUDA]", "AcceleratorError", "cudaError", "unspecified launch failure")  # fmt: skip
    if any(m in text for m in cuda_markers):
        return "crash", True
    # Triton raises CompilationError (and under the interpreter, InterpreterError for anything wrong in a
    # kernel body) at the first launch; OutOfResources too is decided when compiling for the device.
    if any(isinstance(e, TritonError) for e in chain):
        return "compile_error", False
    return "runtime_error", False


def format_exception(exc: BaseException, candidate_file: str | None = None) -> str:
    """What a candidate's author needs: the error, its cause, and the candidate's own frames.

    Harness and library frames are left out; under the interpreter the frame inside the kernel body (the
    line Triton rejects) is among the candidate's frames, found in the chained cause.
    """
    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in chain:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    lines = [f"{type(exc).__name__}: {str(exc)[:1000]}"]
    if len(chain) > 1:
        inner = chain[-1]
        lines.append(f"caused by {type(inner).__name__}: {str(inner)[:1000]}")
    frames = []
    for e in chain:
        for fr in traceback.extract_tb(e.__traceback__):
            if candidate_file and fr.filename == candidate_file:
                frames.append(f"  candidate.py, line {fr.lineno}, in {fr.name}: {(fr.line or '').strip()}")
    if frames:
        lines.append("in the candidate (outermost first):")
        lines.extend(dict.fromkeys(frames))
    elif exc.__traceback__ is not None:
        last = traceback.extract_tb(exc.__traceback__)[-1]
        lines.append(f"  at {last.filename}, line {last.lineno}, in {last.name}")
    text = "\n".join(line for line in lines if line)
    if candidate_file:
        text = text.replace(candidate_file, "candidate.py")
    return tail(text)


@dataclass
class _Reference:
    """One shape of one task: the reference model and its cached inputs and outputs per seed."""

    small: bool
    init_inputs: list[Any]
    model: Any
    samples: dict[tuple[int, str], _Sample] = field(default_factory=dict)
    fp64_s: float | None = None
    """Seconds the last float64 run of this reference took (its cost estimate for the next one)."""
    fp64_failure: str | None = None
    """Why a float64 run of this reference failed; later trials do not try again."""


@dataclass
class _Sample:
    """One trial's pristine inputs and the reference's outputs, float32 and (where used) float64."""

    inputs: list[Any]
    out: Any
    out64: Any = None
    fp64_status: str | None = None
    """None: not tried; "used"; "not used: ..." (not applicable); "unavailable: ..." (it failed)."""


@dataclass
class _TaskState:
    module: Any
    name: str
    digest: str
    refs: dict[tuple[bool, int], _Reference] = field(default_factory=dict)
    """Per (small, seed): the reference is built with the seed ModelNew is built with."""
    baseline_ms: dict[str, float | None] = field(default_factory=dict)


class Runner:
    """Runs jobs inside the worker; holds the caches that make warm evaluation fast."""

    def __init__(self, conn: Connection, device: str, tmpdir: str) -> None:
        import torch
        import triton

        self.conn = conn
        self.torch = torch
        self.device = device
        self.tmpdir = tmpdir
        self.tasks: OrderedDict[str, _TaskState] = OrderedDict()
        self.counter = 0
        install_launch_counter()
        if device == "cuda":
            torch.cuda.init()
            self.device_name = torch.cuda.get_device_name(0)
        else:
            self.device_name = "cpu (Triton interpreter)"
        self.interpret = os.environ.get("TRITON_INTERPRET") == "1"
        self.versions = Versions(
            torch=torch.__version__,
            triton=triton.__version__,
            python=sys.version.split()[0],
            cuda=torch.version.cuda if device == "cuda" else None,
        )
        self.target, self.target_profile = self._detect_target()

    def _detect_target(self) -> tuple[str, dict[str, Any] | None]:
        """The target profile's name (and the profile, for the parent's roofline) of this device."""
        fallback = "cpu-interpreter" if self.device == "cpu" else self.device_name
        try:
            from hardware.targets import detect_target
        except ImportError:
            return fallback, None
        try:
            target = detect_target(self.device)
        except Exception as exc:  # an unknown device must not stop evaluation; its name still identifies it
            print(f"detect_target failed: {exc}", file=sys.stderr)
            return fallback, None
        return target.name, target.model_dump(mode="json")

    def info(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "device": self.device,
            "device_name": self.device_name,
            "target": self.target,
            "target_profile": self.target_profile,
            "versions": self.versions.model_dump(),
            "interpret": self.interpret,
        }

    # ----------------------------------------------------------------- protocol
    def serve(self) -> None:
        self.conn.send(("ready", self.info()))
        while True:
            try:
                msg = self.conn.recv()
            except (EOFError, OSError):
                return
            if msg[0] == "stop":
                return
            if msg[0] == "eval":
                job = msg[1]
                result, restart = self.run_job(job)
                self.conn.send(("result", job["job_id"], result.model_dump(mode="json"), restart))
                if restart:
                    return

    def _stage(self, job_id: int, stage: str) -> None:
        self.conn.send(("stage", job_id, stage))

    # ----------------------------------------------------------------- one job
    def run_job(self, job: dict[str, Any]) -> tuple[EvalResult, bool]:
        cfg = EvalConfig.model_validate(job["config"])
        res = EvalResult(
            stage="compile",
            precision=cfg.precision,
            device=self.device_name,
            target=self.target,
            versions=self.versions,
        )
        res.extra["notes"] = []
        self._restart = False
        self._candidate: tuple[str, str] | None = None  # (module name, file) once imported
        self._fp64_budget_s = cfg.stage_timeout("reference") * _FP64_BUDGET_SHARE
        os.ftruncate(1, 0)  # the log holds this job's output only (stdout and stderr share it, O_APPEND)
        try:
            self._apply_precision(cfg.precision)
            self._run(job, cfg, res)
        except _Stop:
            pass
        except Exception as exc:
            # A CUDA error surfacing outside the candidate's call still poisons this process's context.
            self._restart = classify_exception(exc)[1]
            res.correct = False
            res.error_kind = "harness_error"
            res.error = tail(f"the harness failed: {traceback.format_exc()}")
        finally:
            self.torch.use_deterministic_algorithms(False)
            if self._candidate is not None:
                sys.modules.pop(self._candidate[0], None)
                os.unlink(self._candidate[1])
        return res, self._restart

    def _fail(self, res: EvalResult, stage: str, kind: str, error: str, *, restart: bool = False) -> NoReturn:
        res.correct = False
        res.stage = stage  # type: ignore[assignment]
        res.error_kind = kind  # type: ignore[assignment]
        res.error = tail(error)
        self._restart = restart
        raise _Stop

    def _apply_precision(self, precision: str) -> None:
        """TF32 for matmul and cuDNN conv only where the precision mode allows it, reference included."""
        tf32 = precision != "strict"
        self.torch.set_float32_matmul_precision("high" if tf32 else "highest")
        self.torch.backends.cudnn.allow_tf32 = tf32

    def _task(self, job: dict[str, Any]) -> _TaskState:
        from tasks import exec_task_module

        digest = hashlib.sha256(job["task_source"].encode()).hexdigest()[:16]
        state = self.tasks.get(digest)
        if state is None:
            state = _TaskState(
                exec_task_module(job["task_source"], job["task_name"]), job["task_name"], digest
            )
            self.tasks[digest] = state
            while len(self.tasks) > _TASK_CACHE_SIZE:
                self.tasks.popitem(last=False)
        self.tasks.move_to_end(digest)
        return state

    def _reference(self, task: _TaskState, small: bool, seed: int) -> _Reference:
        from tasks import task_init_inputs, task_model

        ref = task.refs.get((small, seed))
        if ref is None:
            model = task_model(task.module, small=small, seed=seed, device=self.device)
            ref = _Reference(small, task_init_inputs(task.module, small=small), model)
            task.refs[(small, seed)] = ref
        return ref

    def _sample(
        self, task: _TaskState, ref: _Reference, seed: int, precision: str, *, fp64: bool = True
    ) -> _Sample:
        """Pristine inputs and the reference outputs for one trial, computed once per worker.

        `fp64`: also run the reference in float64 where hardware.verify would use it (once; a sample
        cached without it gets it when a later job asks).
        """
        from hardware.verify import needs_float64_reference
        from tasks import task_inputs

        key = (seed, precision)
        sample = ref.samples.get(key)
        t32 = 0.0
        if sample is None:
            inputs = task_inputs(task.module, small=ref.small, seed=seed, device=self.device)
            t0 = time.perf_counter()
            with self.torch.no_grad():
                out = ref.model(*_clone(inputs))
            self._sync()
            t32 = time.perf_counter() - t0
            sample = ref.samples[key] = _Sample(inputs, _detach(out))
        if fp64 and sample.fp64_status is None:
            if not needs_float64_reference(sample.out, precision):  # type: ignore[arg-type]
                sample.fp64_status = (
                    f"not used: TF32 is on for the reference in {precision} precision"
                    if precision != "strict"
                    else "not used: no float32 output"
                )
            else:
                self._reference64(ref, sample, t32)
        return sample

    def _reference64(self, ref: _Reference, sample: _Sample, t32: float) -> None:
        """Run a float64 copy of the reference model on upcast inputs; on failure say why, never raise.

        A CUDA error other than out-of-memory still raises: the context can no longer be trusted.
        """
        torch = self.torch
        if ref.fp64_failure is not None:
            sample.fp64_status = ref.fp64_failure
            return
        estimate = ref.fp64_s if ref.fp64_s is not None else t32 * _FP64_COST_FACTOR
        if estimate > self._fp64_budget_s:
            sample.fp64_status = (
                f"unavailable: a float64 run would take ~{estimate:.3g} s, over its {self._fp64_budget_s:.3g} s "
                "share of the reference time limit"
            )
            return
        model64: Any = None
        t0 = time.perf_counter()
        try:
            model64 = copy.deepcopy(ref.model).double()
            with torch.no_grad():
                out64 = model64(*_map_tensors(sample.inputs, _upcast))
            self._sync()
            sample.out64, sample.fp64_status = _detach(out64), "used"
        except Exception as exc:
            if _out_of_memory(exc):
                sample.fp64_status = "unavailable: out of memory"
                return
            if classify_exception(exc)[1]:
                raise
            first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
            sample.fp64_status = f"unavailable: {type(exc).__name__}: {first}"
        finally:
            del model64
            if self.device == "cuda" and sample.fp64_status != "used":
                torch.cuda.empty_cache()  # what the failed run held must not crowd the candidate
            spent = time.perf_counter() - t0
            ref.fp64_s = spent
            if sample.fp64_status != "used":
                ref.fp64_failure = sample.fp64_status
            self._fp64_budget_s = max(0.0, self._fp64_budget_s - spent)

    def _sync(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def _import_candidate(self, job: dict[str, Any], res: EvalResult) -> tuple[Any, str]:
        self.counter += 1
        digest = hashlib.sha256(job["candidate_source"].encode()).hexdigest()[:12]
        name = f"kw_candidate_{digest}_{self.counter}"
        path = os.path.join(self.tmpdir, f"{name}.py")
        with open(path, "w") as f:
            f.write(job["candidate_source"])
        self._candidate = (name, path)
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # triton and dataclasses look modules up by name
        try:
            spec.loader.exec_module(module)
        except SyntaxError as exc:
            self._fail(res, "parse", "syntax_error", format_exception(exc, path))
        except BaseException as exc:  # noqa: B036 - SystemExit from a candidate is a failed import too
            kind, restart = classify_exception(exc) if isinstance(exc, Exception) else ("import_error", False)
            kind = "import_error" if kind == "runtime_error" else kind
            self._fail(
                res,
                "compile",
                kind,
                f"importing the candidate failed: {format_exception(exc, path)}",
                restart=restart,
            )
        return module, path

    def _poison(self, ref_out: Any) -> None:
        """Pre-fill the CUDA caching allocator with 0xFF bytes in blocks the size of the outputs."""
        if self.device != "cuda":
            return
        torch = self.torch
        blocks = []
        for t in _tensors(ref_out):
            nbytes = max(t.numel() * t.element_size(), 512)
            for _ in range(2):
                blocks.append(torch.empty(nbytes, dtype=torch.uint8, device="cuda").fill_(255))
        del blocks

    def _call_candidate(self, model: Any, inputs: list[Any], ref_out: Any, path: str, res: EvalResult,
                        stage: str, *, clone: bool = True) -> Any:  # fmt: skip
        torch = self.torch
        args = _clone(inputs) if clone else inputs
        self._poison(ref_out)
        _launches[0] = 0
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.use_deterministic_algorithms(True, warn_only=True)
                torch.utils.deterministic.fill_uninitialized_memory = True  # type: ignore[attr-defined]
                with torch.no_grad():
                    out = model(*args)
                self._sync()
        except Exception as exc:
            kind, restart = classify_exception(exc)
            where = "compile" if kind == "compile_error" else ("run" if kind == "runtime_error" else stage)
            self._fail(res, where, kind, f"forward raised {format_exception(exc, path)}", restart=restart)
        finally:
            torch.use_deterministic_algorithms(False)
        res.kernel_launches = _launches[0]
        if _launches[0] == 0:
            self._fail(
                res,
                "run",
                "static_check",
                "forward launched no Triton kernel: the work must be done by a @triton.jit kernel "
                "(torch ops found: " + (", ".join(res.torch_ops_remaining) or "none") + ")",
            )
        return out

    def _run(self, job: dict[str, Any], cfg: EvalConfig, res: EvalResult) -> None:
        from hardware.verify import compare_outputs

        job_id = job["job_id"]
        res.torch_ops_remaining = list(job.get("torch_ops_remaining", []))
        notes: list[str] = res.extra["notes"]
        notes.append(
            f"precision {cfg.precision}: TF32 {'on' if cfg.precision != 'strict' else 'off'} for matmul and "
            "cuDNN conv, reference included"
        )
        # The reference first, under its own time limit: a slow reference is not the candidate's fault.
        self._stage(job_id, "reference")
        try:
            task = self._task(job)
            has_small = callable(getattr(task.module, "get_small_inputs", None))
            if self.device == "cuda":
                sizes = [False, True] if has_small and cfg.second_shape else [False]
            else:
                sizes = [True] if has_small else [False]
            refs = {small: self._reference(task, small, cfg.seed) for small in sizes}
            for small in sizes:
                for trial in range(cfg.trials):
                    self._sample(task, refs[small], cfg.seed + trial, cfg.precision, fp64=cfg.reference_fp64)
        except Exception as exc:
            self._fail(res, "compile", "harness_error", f"the reference could not run: {exc}")
        if self.device != "cuda":
            notes.append(
                "CPU: verified on get_small_inputs() only"
                if has_small
                else "CPU: the task has no get_small_inputs(); verified on the full inputs"
            )

        self._stage(job_id, "compile")
        module, path = self._import_candidate(job, res)
        model_cls = getattr(module, "ModelNew", None)
        if not isinstance(model_cls, type):
            self._fail(res, "parse", "static_check", "the candidate defines no ModelNew class")

        from tasks import task_model

        first = True
        models: dict[tuple[str, ...], Any] = {}
        max_abs = max_rel = 0.0
        tolerances = []
        for small in sizes:
            ref = refs[small]
            key = tuple(map(repr, ref.init_inputs))
            model: Any = models.get(key)
            if model is None:
                try:
                    model = task_model(
                        task.module, small=small, seed=cfg.seed, device=self.device, cls=model_cls
                    )
                except Exception as exc:
                    kind, restart = classify_exception(exc)
                    self._fail(res, "compile", kind, f"ModelNew(*init_inputs) raised {format_exception(exc, path)}",
                               restart=restart)  # fmt: skip
                ref_state, new_state = ref.model.state_dict(), model.state_dict()
                if (
                    ref_state
                    and list(ref_state) == list(new_state)
                    and all(ref_state[k].shape == new_state[k].shape for k in ref_state)
                ):
                    model.load_state_dict(ref_state)
                    if "state_dict copied from the reference" not in notes:
                        notes.append("state_dict copied from the reference")
                models[key] = model
            shape_label = "small" if small else "full"
            for trial in range(cfg.trials):
                seed = cfg.seed + trial
                sample = self._sample(task, ref, seed, cfg.precision, fp64=cfg.reference_fp64)
                inputs, ref_out = sample.inputs, sample.out
                if trial == 0:
                    res.shapes_checked.append([list(t.shape) for t in _tensors(inputs)])
                out = self._call_candidate(
                    model, inputs, ref_out, path, res, "compile" if first else "correctness"
                )
                if first:
                    first = False
                    res.stage = "correctness"
                    self._stage(job_id, "correctness")
                ref64 = sample.out64 if cfg.reference_fp64 else None  # cached by an earlier job
                cmp = compare_outputs(out, ref_out, cfg.precision, rtol=cfg.rtol, atol=cfg.atol, ref64=ref64)
                if trial == 0:
                    self._note_fp64(res, shape_label, sample if cfg.reference_fp64 else None, cmp.notes)
                res.trials = max(res.trials, trial + 1)
                if not cmp.ok:
                    res.max_abs_error, res.max_rel_error = cmp.max_abs_error, cmp.max_rel_error
                    res.mismatched = cmp.mismatched or None
                    res.tolerance = cmp.tolerances[-1] if cmp.tolerances else None
                    shapes = [list(t.shape) for t in _tensors(inputs)]
                    self._fail(
                        res,
                        "correctness",
                        cmp.error_kind or "mismatch",
                        f"{cmp.report}\n({shape_label} inputs {shapes}, trial {trial + 1}/{cfg.trials}, seed {seed})",
                    )
                max_abs, max_rel = max(max_abs, cmp.max_abs_error), max(max_rel, cmp.max_rel_error)
                tolerances.extend(cmp.tolerances)
                del out
        res.max_abs_error, res.max_rel_error = max_abs, max_rel
        if tolerances:
            # The loosest row applied (largest effective atol, allowance included) bounded the verdict.
            res.tolerance = max(
                tolerances,
                key=lambda t: (
                    t.rtol,
                    t.atol * t.atol_scale + (t.allowance_factor or 0) * (t.reference_error or 0),
                ),
            )
        res.correct = True
        if self.device != "cuda" or not cfg.time:
            res.stage = "done"
            res.timing_meaningful = False
            res.timing_note = (
                "not timed: the Triton interpreter on CPU says nothing about GPU speed"
                if self.device != "cuda"
                else "not timed (time=False)"
            )
            return
        self._time(job_id, task, models, path, cfg, res)

    def _note_fp64(
        self, res: EvalResult, shape_label: str, sample: _Sample | None, cmp_notes: list[str]
    ) -> None:
        """Say, once per input shape, what the values were compared against and with what allowance."""
        status = (sample and sample.fp64_status) or "not used: switched off (reference_fp64=False)"
        res.extra.setdefault("float64_reference", {})[shape_label] = status
        notes: list[str] = res.extra["notes"]
        if status.startswith("unavailable"):
            notes.append(
                f"{shape_label} inputs: float64 reference {status}; compared against the float32 reference "
                "alone (no reference-error allowance)"
            )
        notes.extend(f"{shape_label} inputs (trial 1): {n}" for n in cmp_notes)

    # ----------------------------------------------------------------- timing (GPU)
    def _time(
        self,
        job_id: int,
        task: _TaskState,
        models: dict[tuple[str, ...], Any],
        path: str,
        cfg: EvalConfig,
        res: EvalResult,
    ) -> None:
        from hardware.timing import bench_interleaved, paired_speedup, summarize
        from hardware.verify import compare_outputs

        torch = self.torch
        res.stage = "timing"
        self.conn.send(("partial", job_id, res.model_dump(mode="json")))
        self._stage(job_id, "timing")
        ref = task.refs[(False, cfg.seed)]
        model = models[tuple(map(repr, ref.init_inputs))]
        inputs = self._sample(task, ref, cfg.seed, cfg.precision, fp64=cfg.reference_fp64).inputs
        args_c, args_r = _clone(inputs), _clone(inputs)
        self._apply_precision(cfg.precision)
        with torch.no_grad():
            samples = bench_interleaved(
                {"candidate": lambda: model(*args_c), "eager": lambda: ref.model(*args_r)},
                warmup_ms=cfg.warmup_ms,
                rep_ms=cfg.rep_ms,
            )
        # A candidate that remembers its answer per input tensor would look fast on the repeated calls
        # above; give the timed tensors new contents in place and check that the answer follows.
        other = self._sample(task, ref, cfg.seed + 1, cfg.precision, fp64=cfg.reference_fp64)
        for dst, src in zip(_tensors(args_c), _tensors(other.inputs), strict=True):
            dst.copy_(src)
        out = self._call_candidate(model, args_c, other.out, path, res, "timing", clone=False)
        ref64 = other.out64 if cfg.reference_fp64 else None
        cmp = compare_outputs(out, other.out, cfg.precision, rtol=cfg.rtol, atol=cfg.atol, ref64=ref64)
        if not cmp.ok:
            self._fail(
                res,
                "timing",
                cmp.error_kind or "mismatch",
                "the timed input tensors, given new contents, produced a wrong answer (a result remembered "
                f"per input tensor?):\n{cmp.report}",
            )
        cand, eager = summarize(samples["candidate"]), summarize(samples["eager"])
        res.runtime_ms, res.runtime_ci_ms = cand.median_ms, cand.ci_ms
        res.runtime_p20_ms, res.runtime_p80_ms = cand.p20_ms, cand.p80_ms
        res.eager_ms = eager.median_ms
        res.speedup_vs_eager, res.speedup_vs_eager_ci = paired_speedup(samples["eager"], samples["candidate"])
        res.timing_reps = cand.reps
        res.timing_meaningful = True
        res.extra["eager_ci_ms"] = list(eager.ci_ms)
        res.timing_note = (
            f"CUDA events, L2 flushed, {cand.reps} interleaved rounds, precision {cfg.precision}"
        )
        if cfg.compile_baseline:
            res.stage = "timing"
            self.conn.send(("partial", job_id, res.model_dump(mode="json")))
            self._stage(job_id, "baseline")
            res.compile_ms = self._compile_baseline(task, ref, inputs, cfg)
            if res.compile_ms:
                res.speedup_vs_compile = res.compile_ms / res.runtime_ms
            else:
                res.timing_note += "; torch.compile baseline unavailable"
        res.stage = "done"

    def _compile_baseline(
        self, task: _TaskState, ref: _Reference, inputs: list[Any], cfg: EvalConfig
    ) -> float | None:
        """torch.compile'd reference time, once per (task, shapes, precision) per worker, cached on disk."""
        from hardware.timing import BaselineCache, bench_interleaved, summarize

        torch = self.torch
        shapes = "x".join(str(list(t.shape)) for t in _tensors(inputs))
        key = f"{task.digest}|{shapes}|{cfg.precision}"
        if key in task.baseline_ms:
            return task.baseline_ms[key]
        scope = f"{self.device_name}|torch {torch.__version__}|triton {self.versions.triton}"
        cache = BaselineCache()
        entry = cache.get(scope, key)
        if entry is not None:
            task.baseline_ms[key] = entry.get("compile_ms")
            return task.baseline_ms[key]
        import torch._dynamo
        import torch._inductor.config as inductor_config

        inductor_config.compile_threads = 1  # no compile subprocesses inside a worker that may be killed
        args = _clone(inputs)
        value: float | None
        try:
            compiled = torch.compile(ref.model)
            with torch.no_grad():
                compiled(*args)
                torch.cuda.synchronize()
                samples = bench_interleaved(
                    {"compiled": lambda: compiled(*args)}, warmup_ms=cfg.warmup_ms, rep_ms=cfg.rep_ms
                )
            value = summarize(samples["compiled"]).median_ms
            cache.put(scope, key, {"compile_ms": value, "task": task.name, "time": time.time()})
        except Exception as exc:  # the baseline failing is not the candidate's fault; the result says so
            print(f"torch.compile baseline failed: {exc}", file=sys.stderr)
            value = None
        finally:
            torch._dynamo.reset()
        task.baseline_ms[key] = value
        return value


def _tensors(value: Any) -> list[Any]:
    """The tensors in a (nested) input list or forward result, in order."""
    import torch

    from hardware.verify import flatten_outputs

    return [v for v in flatten_outputs(value) if isinstance(v, torch.Tensor)]


def _map_tensors(value: Any, fn: Any) -> Any:
    """`value` with fn applied to every tensor in it (nested lists and tuples kept as they are)."""
    import torch

    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, list | tuple):
        return type(value)(_map_tensors(v, fn) for v in value)
    return value


def _out_of_memory(exc: BaseException) -> bool:
    import torch

    cur: BaseException | None = exc
    seen: list[BaseException] = []
    while cur is not None and cur not in seen:
        if isinstance(cur, torch.OutOfMemoryError):
            return True
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return False


def _upcast(t: Any) -> Any:
    """A float64 (complex128) copy of a floating (complex) tensor; other tensors cloned as they are."""
    import torch

    if t.is_complex():
        return t.to(torch.complex128, copy=True)
    if t.is_floating_point():
        return t.to(torch.float64, copy=True)
    return t.clone()


def _clone(value: Any) -> Any:
    return _map_tensors(value, lambda t: t.clone())


def _detach(value: Any) -> Any:
    return _map_tensors(value, lambda t: t.detach())


def _watch_parent(parent_pid: int, tmpdir: str) -> None:
    """Exit when the parent is gone, even while a candidate spins in an endless loop."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent_pid:
            shutil.rmtree(tmpdir, ignore_errors=True)  # nobody else will
            os._exit(3)


def main(argv: list[str]) -> None:
    fd, device, tmpdir, parent_pid = int(argv[0]), argv[1], argv[2], int(argv[3])
    conn = Connection(fd)
    faulthandler.enable(file=sys.stderr, all_threads=False)
    threading.Thread(target=_watch_parent, args=(parent_pid, tmpdir), daemon=True).start()
    try:
        try:
            runner = Runner(conn, device, tmpdir)
        except Exception:
            traceback.print_exc()
            conn.send(("failed", traceback.format_exc()))
            return
        runner.serve()
    except OSError:  # the parent closed its end: it is gone or done with this worker
        pass
    finally:
        if os.getppid() != parent_pid:  # orphaned: nobody else will remove the directory
            shutil.rmtree(tmpdir, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
