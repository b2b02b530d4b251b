"""What a task computes and what it costs, found without allocating its full-size tensors.

The full-size inputs and model are built under `torch.device("meta")`, so shapes, dtypes, aten ops and
FLOPs come out of a forward that touches no memory: a task that moves gigabytes on a GPU is analysed in
milliseconds here. The forward is also run for real on CPU at the small size (`get_small_inputs()`), which
is what proves it works and gives `small_signature`.

A task whose forward cannot run on the meta device (data-dependent code such as `.item()`, or an op with
no meta kernel) falls back to the real small run: its ops and families come from there, and its full-size
cost is only a lower bound (`cost_exact=False`).
"""

from __future__ import annotations

import threading
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from pydantic import BaseModel
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils.flop_counter import FlopCounterMode

from kernelwright.tasks.errors import TaskError, describe_exception
from kernelwright.tasks.module import has_small_inputs, task_inputs, task_model
from kernelwright.tasks.op_families import ATEN_FAMILY as _ATEN_FAMILY
from kernelwright.tasks.task import TaskSignature

OP_FAMILIES = ("matmul", "conv", "reduction", "softmax", "norm", "pointwise", "scan", "loss", "pool", "other")

# A task without get_small_inputs() is run for real on CPU at its full size only when it is this cheap.
CPU_CHECK_MAX_BYTES = 64 * 2**20
CPU_CHECK_MAX_FLOPS = 2e9

# Ops that move or describe data without computing on it: recorded in `ops`, but no family of their own.
_NO_FAMILY = set(
    "view _unsafe_view reshape t permute transpose expand expand_as squeeze unsqueeze slice select "
    "as_strided detach alias clone copy _to_copy contiguous lift_fresh lift _local_scalar_dense fill zero "
    "empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like ones ones_like full "
    "full_like new_zeros new_ones new_full scalar_tensor arange linspace randn rand randint normal "
    "uniform random split split_with_sizes unbind chunk cat stack flatten unflatten narrow "
    "_reshape_alias index_select gather index".split()
)


MODEL_LOCK = threading.RLock()
"""Held while this process runs or traces a task's model (task analysis here, the offline writer's
tracing): torch.fx patches `nn.Module.__call__` process-wide while it traces, so a model called by
another thread meanwhile (two runs served by one LangGraph server) breaks both ("module is not
installed as a submodule")."""


def _function_family(func: Callable[..., Any]) -> str | None:
    """The family of a torch-level function whose aten form decomposes and would hide what it is.

    `F.rms_norm`, `F.normalize` and `F.cross_entropy` reach aten as pow/mean/rsqrt, norm/div and
    log_softmax/nll_loss; naming them at the torch level keeps an RMS norm a norm and a cross entropy a loss.
    """
    name = getattr(func, "__name__", "")
    if name.endswith("_loss") or name in ("cross_entropy", "nll_loss", "kl_div"):
        return "loss"
    if name.endswith("_norm") or name == "normalize":
        return "norm"
    if name in ("softmax", "log_softmax"):
        return "softmax"
    if name in ("linear", "bilinear", "scaled_dot_product_attention"):
        return "matmul"
    return None


def family_ops(ops: list[str], family: str) -> set[str]:
    """The ops of `ops` (as a signature names them, "logsumexp" or "aten.logsumexp.default") that belong to
    `family` by name: what a reduction, conv, ... kernel of that family computes ("logsumexp", "mean")."""
    names = {op.removeprefix("aten.").split(".")[0] for op in ops}
    return {n for n in names if _ATEN_FAMILY.get(n[:-1] if n.endswith("_") else n) == family}


def op_family(func: torch._ops.OpOverload) -> str | None:
    """The coarse family of one aten op, or None for ops that only move or describe data."""
    if func.namespace != "aten":
        return "other"
    raw = func.overloadpacket.__name__
    name = raw[:-1] if raw.endswith("_") and not raw.endswith("__") else raw  # in-place add_ is add
    if name in _NO_FAMILY or func.is_view:
        return None
    family = _ATEN_FAMILY.get(name)
    if family is not None:
        return family
    if torch.Tag.pointwise in func.tags:
        return "pointwise"
    return "other"


class _OpRecorder(TorchDispatchMode):
    """Records every aten op the forward runs, and the family each one belongs to."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []
        self.families: list[str] = []
        self.scope: str | None = None  # set while a torch-level function with a known family runs

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        name = func.overloadpacket.__name__ if func.namespace == "aten" else str(func.overloadpacket)
        if name not in self.ops:
            self.ops.append(name)
        family = self.scope or op_family(func)
        if family is not None and family not in self.families:
            self.families.append(family)
        return func(*args, **(kwargs or {}))


class _FamilyScope(TorchFunctionMode):
    """Attributes the aten ops of a decomposing torch function (e.g. F.rms_norm) to its family."""

    def __init__(self, recorder: _OpRecorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        family = _function_family(func)
        if family is None or self.recorder.scope is not None:
            return func(*args, **kwargs)
        self.recorder.scope = family
        try:
            return func(*args, **kwargs)
        finally:
            self.recorder.scope = None


@dataclass
class ForwardTrace:
    """What one forward ran: aten ops in first-seen order, their families, FLOPs, and the raw output."""

    ops: list[str]
    families: list[str]
    flops: float
    output: Any


def trace_forward(model: torch.nn.Module, inputs: Sequence[Any]) -> ForwardTrace:
    """Run `model(*inputs)` once without autograd, recording aten ops, families and FLOPs."""
    with MODEL_LOCK:
        return _trace_forward(model, inputs)


def _trace_forward(model: torch.nn.Module, inputs: Sequence[Any]) -> ForwardTrace:
    recorder = _OpRecorder()
    with torch.no_grad(), FlopCounterMode(display=False) as counter, _FamilyScope(recorder), recorder:
        with meta_recurrences_by_one_step(counter):
            output = model(*inputs)
    families = recorder.families or (["other"] if recorder.ops else [])
    return ForwardTrace(
        ops=recorder.ops, families=families, flops=float(counter.get_total_flops()), output=output
    )


_RECURRENCES = (torch.nn.RNN, torch.nn.LSTM, torch.nn.GRU)


@contextmanager
def meta_recurrences_by_one_step(counter: FlopCounterMode | None = None) -> Iterator[None]:
    """On the meta device a recurrence (nn.LSTM, GRU, RNN) runs torch's python-level loop over its time
    steps: level3/38's bidirectional 6-layer LSTM over 512 steps dispatches 92,000 ops, 12-17 s a forward,
    and loading the task runs a dozen (the size search), past the loader's 60 s. Here a recurrence given a
    meta input runs its first step only (the ops and families of every step), its FLOPs are counted once
    per step (into `counter`'s), and its outputs are the whole sequence's shapes. Real tensors run as they
    are. The classes' forwards are patched process-wide: under MODEL_LOCK, as this module's other patches."""
    from kernelwright.tasks.region_runtime import _recurrence_outputs

    def patched(original: Any) -> Any:
        def forward(self: torch.nn.RNNBase, input: Any, hx: Any = None) -> Any:  # noqa: A002 - torch's name
            if not isinstance(input, torch.Tensor) or not input.is_meta or input.dim() < 2:
                return original(self, input, hx)
            seq_dim = 1 if self.batch_first and input.dim() == 3 else 0
            steps = input.shape[seq_dim]
            flops = counter.flop_counts["Global"] if counter is not None else {}
            before = dict(flops)
            with _disable_current_modes():  # the cut and the outputs are not the task's ops
                first = input.narrow(seq_dim, 0, 1)
            original(self, first, hx)
            for op, n in list(flops.items()):
                flops[op] += (n - before.get(op, 0)) * (steps - 1)
            with _disable_current_modes():
                return _recurrence_outputs(self, input)

        return forward

    with MODEL_LOCK:  # the originals read and put back by one thread at a time
        originals: dict[type, Any] = {cls: cls.forward for cls in _RECURRENCES}
        for cls, original in originals.items():
            cls.forward = patched(original)  # type: ignore[attr-defined]
        try:
            yield
        finally:
            for cls, original in originals.items():
                cls.forward = original  # type: ignore[attr-defined]


def output_tensors(output: Any) -> list[torch.Tensor] | None:
    """The output as a list of tensors, or None when it is not a tensor, a tuple/list of tensors or a dict of
    them with string keys (its values in the order of its sorted keys, as the judge compares them)."""
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, list | tuple) and output and all(isinstance(t, torch.Tensor) for t in output):
        return list(output)
    if (  # a dict subclass too (transformers' ModelOutput), read as the judge reads it: dict's own methods
        isinstance(output, dict)
        and output
        and all(type(k) is str and isinstance(v, torch.Tensor) for k, v in dict.items(output))
    ):
        return [dict.__getitem__(output, k) for k in sorted(dict.keys(output))]
    return None


def _tensors(values: Sequence[Any]) -> list[torch.Tensor]:
    return [v for v in values if isinstance(v, torch.Tensor)]


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes a tensor occupies; an expanded (stride-0) view counts only the storage behind it."""
    dense = t.numel() * t.element_size()
    try:
        return min(dense, t.untyped_storage().nbytes())
    except (RuntimeError, NotImplementedError):
        return dense


def _unique_bytes(tensors: Sequence[torch.Tensor]) -> int:
    seen: set[int] = set()
    total = 0
    for t in tensors:
        if id(t) not in seen:
            seen.add(id(t))
            total += tensor_bytes(t)
    return total


def read_bytes(model: torch.nn.Module, inputs: Sequence[Any]) -> int:
    """Bytes every forward must read at least once: tensor inputs, parameters and buffers."""
    state = list(model.parameters()) + list(model.buffers())
    return _unique_bytes(_tensors(inputs) + state)


def make_signature(
    inputs: Sequence[Any], outputs: Sequence[torch.Tensor], trace: ForwardTrace
) -> TaskSignature:
    """A TaskSignature from a forward's tensor inputs, its outputs and the ops it ran."""
    tensors = _tensors(inputs)
    return TaskSignature(
        op_families=list(trace.families),
        ops=list(trace.ops),
        input_shapes=[list(t.shape) for t in tensors],
        input_dtypes=[_dtype(t) for t in tensors],
        output_shapes=[list(t.shape) for t in outputs],
        output_dtypes=[_dtype(t) for t in outputs],
    )


class TaskAnalysis(BaseModel):
    """Everything `load_task` learns by running a task, besides the module itself."""

    signature: TaskSignature
    small_signature: TaskSignature | None
    flops: float
    min_bytes: float
    cost_exact: bool
    checked_on: str
    """Where the forward ran for real: "cpu-small", "cpu-full", or "meta" (too large to run on CPU)."""


class _Run(BaseModel):
    """One forward of the task: its signature, FLOPs and the bytes it must move."""

    signature: TaskSignature
    flops: float
    min_bytes: float


class _MetaUnsupported(Exception):
    """The task cannot run on the meta device. What was learnt before it failed rides along:
    `inputs` (the full-size tensor inputs, meta) and `read_bytes` (inputs + parameters) when known."""

    def __init__(self, reason: str, inputs: list[torch.Tensor] | None, read_bytes: int | None) -> None:
        super().__init__(reason)
        self.inputs = inputs
        self.read_bytes = read_bytes


class _MetaForwardError(TaskError):
    """The full-size forward raised on the meta device for a reason a GPU would share."""

    def __init__(self, message: str, read_bytes: int) -> None:
        super().__init__(message)
        self.read_bytes = read_bytes


def _is_meta_limitation(exc: BaseException) -> bool:
    # Meta tensors have no data: .item(), branching on values and ops without a meta kernel fail with a
    # message that names the meta device. Anything else (a shape mismatch) would fail the same on a GPU.
    root = exc.__cause__ if isinstance(exc, TaskError) and exc.__cause__ is not None else exc
    text = str(root).lower()
    return isinstance(root, NotImplementedError) or "meta" in text or "data-dependent" in text


def _outputs_or_error(module: types.ModuleType, trace: ForwardTrace) -> list[torch.Tensor]:
    outputs = output_tensors(trace.output)
    if outputs is None:
        got = type(trace.output).__name__
        if isinstance(trace.output, list | tuple):
            inner = sorted({type(v).__name__ for v in trace.output}) or ["nothing"]
            got = f"{got} of {', '.join(inner)}"
        raise TaskError(
            f"{module.__file__}: forward returned {got}; expected a tensor, a tuple/list of tensors or a dict of "
            "them with string keys"
        )
    return outputs


def _finish(module: types.ModuleType, model: torch.nn.Module, inputs: list[Any], trace: ForwardTrace) -> _Run:
    outputs = _outputs_or_error(module, trace)
    written = sum(t.numel() * t.element_size() for t in outputs)
    return _Run(
        signature=make_signature(inputs, outputs, trace),
        flops=trace.flops,
        min_bytes=float(read_bytes(model, inputs) + written),
    )


def _run_cpu(module: types.ModuleType, *, small: bool) -> _Run:
    """Build inputs and model on CPU and run the forward once; failures become TaskError."""
    inputs = task_inputs(module, small=small, seed=0, device="cpu")
    model = task_model(module, small=small, seed=0, device="cpu")
    try:
        trace = trace_forward(model, inputs)
    except Exception as exc:
        raise TaskError(
            f"{module.__file__}: forward raised {describe_exception(exc, module.__file__)}"
        ) from exc
    return _finish(module, model, inputs, trace)


def _run_meta(module: types.ModuleType, *, has_small: bool) -> _Run:
    """The full-size forward on the meta device; _MetaUnsupported when it cannot run there.

    With small inputs the CPU run has already passed, so a failure here is specific to the full size.
    """
    inputs: list[Any] | None = None
    read: int | None = None
    try:
        with torch.device("meta"):
            inputs = task_inputs(module, small=False, seed=None, device="meta")
            read = _unique_bytes(_tensors(inputs))  # a lower bound already, should the model fail here
            model = task_model(module, small=False, seed=None, device="meta")
            read = read_bytes(model, inputs)
            try:
                trace = trace_forward(model, inputs)
            except Exception as exc:
                if _is_meta_limitation(exc):
                    raise
                what = "forward at the full size (get_inputs()) raised" if has_small else "forward raised"
                message = f"{module.__file__}: {what} {describe_exception(exc, module.__file__)}"
                raise _MetaForwardError(message, read) from exc
    except Exception as exc:
        if _is_meta_limitation(exc):
            tensors = _tensors(inputs) if inputs is not None else None
            raise _MetaUnsupported(describe_exception(exc), tensors, read) from exc
        raise
    return _finish(module, model, inputs, trace)


def analyze_task(module: types.ModuleType) -> TaskAnalysis:
    """`_analyze_task` under MODEL_LOCK."""
    with MODEL_LOCK:
        return _analyze_task(module)


def _analyze_task(module: types.ModuleType) -> TaskAnalysis:
    """Check that a task's forward runs, and find its signature and full-size cost.

    The forward runs for real on CPU at the small size when the task has get_small_inputs(), else at the
    full size when that is cheap (CPU_CHECK_MAX_*); a full-size task too large for CPU is checked on the
    meta device only. Raises TaskError when the forward raises or returns something other than tensors.
    torch's global RNG is left as it was.
    """
    with torch.random.fork_rng(devices=[]):
        if has_small_inputs(module):
            small = _run_cpu(module, small=True)
            try:
                full = _run_meta(module, has_small=True)
            except _MetaUnsupported as exc:
                return _fallback(small, exc)
            return TaskAnalysis(
                signature=full.signature,
                small_signature=small.signature,
                flops=full.flops,
                min_bytes=full.min_bytes,
                cost_exact=True,
                checked_on="cpu-small",
            )

        try:
            full = _run_meta(module, has_small=False)
        except _MetaForwardError as exc:
            if exc.read_bytes <= CPU_CHECK_MAX_BYTES:
                # Small enough to run here: report the error as the CPU kernels word it (the meta kernels'
                # messages differ), keeping the meta error if the CPU run somehow passes.
                _run_cpu(module, small=False)
            raise
        except _MetaUnsupported as exc:
            if exc.read_bytes is None or exc.read_bytes > CPU_CHECK_MAX_BYTES:
                size = "unknown size" if exc.read_bytes is None else f"{exc.read_bytes / 2**20:.0f} MiB"
                raise TaskError(
                    f"{module.__file__}: cannot check the forward: it does not run on the meta device ({exc}) "
                    f"and its inputs and parameters ({size}) are too large to run on CPU; define get_small_inputs()"
                ) from exc
            full = _run_cpu(module, small=False)
            return _analysis(full, checked_on="cpu-full")
        if full.min_bytes <= CPU_CHECK_MAX_BYTES and full.flops <= CPU_CHECK_MAX_FLOPS:
            _run_cpu(module, small=False)
            return _analysis(full, checked_on="cpu-full")
        return _analysis(full, checked_on="meta")


def _analysis(full: _Run, *, checked_on: str) -> TaskAnalysis:
    return TaskAnalysis(
        signature=full.signature,
        small_signature=None,
        flops=full.flops,
        min_bytes=full.min_bytes,
        cost_exact=True,
        checked_on=checked_on,
    )


def _fallback(small: _Run, exc: _MetaUnsupported) -> TaskAnalysis:
    """Ops and families from the small run; full-size input shapes when known, cost as a lower bound."""
    update: dict[str, Any] = {"output_shapes": []}
    if exc.inputs is not None:
        update["input_shapes"] = [list(t.shape) for t in exc.inputs]
        update["input_dtypes"] = [_dtype(t) for t in exc.inputs]
    else:
        update["input_shapes"] = update["input_dtypes"] = []
    return TaskAnalysis(
        signature=small.signature.model_copy(update=update),
        small_signature=small.signature,
        flops=0.0,
        min_bytes=float(exc.read_bytes or 0),
        cost_exact=False,
        checked_on="cpu-small",
    )
