"""Runtime evidence of what a candidate's forward did, and the judge's reading of it.

Two halves:
- `Recorder` runs inside the candidate process, installed before the candidate is imported. During
  one forward it records every aten op dispatched on the calling thread (a TorchDispatchMode) and
  every Triton launch (a wrapper around the launchers): for an op, the storages it read and wrote
  (from its schema: fresh outputs and arguments marked as written); for a launch, the tensors it was
  given, and which of them it really changed (a fingerprint of each before and after the launch).
  It also lists the storages that were there before forward (inputs, the model's and the module's
  tensors). The report is plain JSON.
  It also checks that memory holds what the recorder last saw in it: every storage there before
  forward is fingerprinted when forward starts, every storage a recorded op or launch writes after it,
  and every storage a recorded op or launch reads (and every output, when forward returns) is
  fingerprinted again and compared. A difference is a write nobody recorded (`unseen`): torch in
  another thread, numpy on a tensor's memory, a library outside torch. A fingerprint weighs every 32-bit
  word by a weight of its position drawn from a key the recorder draws from the OS at every recorded call
  (`FingerprintKey`), so a write that keeps plain sums (two elements swapped, +d here and -d there) is seen.
- `analyse` runs in the judge. It follows each output back through the recorded writes: an output
  must depend on a write by a Triton kernel (else the kernels were decoration: `torch_fallback`), must
  not depend on storage that no recorded op produced and that was not there before forward, nor on
  memory changed out of the recorder's sight (work done out of sight, e.g. in a thread), and forward
  must not run every compute op the reference runs, each as many times (the reference's own computation
  with a kernel beside it). The torch ops that ran are reported.

What this can prove and what it cannot is written in the README ("How a candidate is judged"); in
short: it sees what runs on the forward's thread through PyTorch's dispatcher and Triton's launchers,
and what anything else wrote into memory that a recorded op then read; the candidate process also
fails a candidate that starts a thread at all. A candidate that rewrites its own process's memory (the
recorder's included), or takes the recorder off and puts it back within forward, can hide work from
it; on a GPU, the kernels the profiler saw in one more forward are cross-checked against the record.
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kernelwright.hardware.judge.fingerprint import FingerprintKey, fingerprint

MAX_EVENTS = 20000

MOVEMENT_OPS = frozenset(
    """copy_ _to_copy clone _copy_from _copy_from_and_resize contiguous to lift_fresh lift_fresh_copy
    expand_copy permute_copy view_copy slice_copy select_copy transpose_copy t_copy unsqueeze_copy
    squeeze_copy as_strided_copy detach_copy alias_copy _unsafe_view resize_ set_ _reshape_alias
    index_select_backward""".split()
)
"""aten ops that move or reshape data without computing: followed for provenance, not counted as work."""
CONSTANT_OPS = frozenset(
    """empty empty_like empty_strided empty_permuted new_empty new_empty_strided zeros zeros_like ones
    ones_like full full_like new_zeros new_ones new_full arange linspace logspace scalar_tensor
    fill_ zero_ rand rand_like randn randn_like randint randint_like normal_ uniform_ random_ bernoulli_
    eye tensor _local_scalar_dense item""".split()
)
"""aten ops that make values from nothing (or only from scalars): sources, not work."""


def _op_name(func: Any) -> str:
    return func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)


def storage_key(t: torch.Tensor) -> int | None:
    try:
        ptr = t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return None
    return int(ptr) if ptr else None


def tensors_in(value: Any, depth: int = 0) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif depth < 4 and isinstance(value, list | tuple):
        for v in value:
            yield from tensors_in(v, depth + 1)
    elif depth < 4 and isinstance(value, dict):
        for v in value.values():
            yield from tensors_in(v, depth + 1)


def tensors_reachable(obj: Any, depth: int = 0, seen: set[int] | None = None) -> Iterator[torch.Tensor]:
    """Tensors held by a module (parameters, buffers, attributes, containers of them), a few levels deep."""
    seen = set() if seen is None else seen
    if id(obj) in seen or depth > 6:
        return
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, torch.nn.Module):
        yield from obj.parameters()
        yield from obj.buffers()
        for v in vars(obj).values():
            yield from tensors_reachable(v, depth + 1, seen)
    elif isinstance(obj, list | tuple | set):
        for v in obj:
            yield from tensors_reachable(v, depth + 1, seen)
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from tensors_reachable(v, depth + 1, seen)


@dataclass
class Recorder:
    """Records one forward's aten ops and Triton launches (see the module docstring)."""

    sync: Any = None
    """A function that waits for the device (GPU), so fingerprints after a launch see its writes."""
    events: list[list[Any]] = field(default_factory=list)
    truncated: bool = False
    active: bool = False
    depth: int = 0
    launches: Counter[str] = field(default_factory=Counter)
    mode: Any = None
    known: dict[int, tuple[tuple[int, int], Any]] = field(default_factory=dict)
    """Per storage: its fingerprint when forward started or after the last recorded write to it, and a weak
    reference to the storage (memory freed and given to another storage is that one's, not a change)."""
    touched: set[int] = field(default_factory=set)
    """Every storage a recorded op was given or returned in this forward, written or not."""
    unseen: list[list[Any]] = field(default_factory=list)
    """[event index, storage, what found it]: memory that changed with no recorded write to it."""
    secret: FingerprintKey = field(default_factory=FingerprintKey)
    """The fingerprints' key, drawn again from the OS at every `start`: a write that keeps what the
    recorder would see the same must be made knowing it."""

    def start(self, before: Any = ()) -> None:
        """Start recording; `before`: the tensors that exist before forward (fingerprinted now)."""
        self.events, self.truncated, self.launches = [], False, Counter()
        self.known, self.unseen, self.touched = {}, [], set()
        self.secret = FingerprintKey()
        self.active, self.depth = True, 0
        self.depth += 1  # the fingerprints' own ops are not forward's
        try:
            if self.sync is not None:
                self.sync()
            for t in before:
                key = storage_key(t)
                if key is not None and key not in self.known:
                    self._remember(key, t, fingerprint(t, self.secret))
        finally:
            self.depth -= 1

    def _remember(self, key: int, t: torch.Tensor, print_: tuple[int, int]) -> None:
        self.known[key] = (print_, weakref.ref(t.untyped_storage()))

    def _last_seen(self, key: int, t: torch.Tensor) -> tuple[int, int] | None:
        """The fingerprint the recorder last saw in `t`'s storage, None if it has seen none (or only that
        of an earlier storage at the same address, since freed)."""
        entry = self.known.get(key)
        if entry is None or entry[1]() is not t.untyped_storage():
            return None
        return entry[0]

    def stop(self) -> None:
        self.active = False

    def check(self, tensors: Any, where: str) -> None:
        """Whether each of `tensors` still holds what the recorder last saw in its storage; a change is
        noted in `unseen` (and the new fingerprint kept, so one unseen write is reported once)."""
        if not self.active or self.depth:
            return
        self.depth += 1
        try:
            if self.sync is not None:
                self.sync()
            for t in tensors:
                key = storage_key(t)
                seen = None if key is None else self._last_seen(key, t)
                if key is None or seen is None:
                    continue
                now = fingerprint(t, self.secret)
                if now != seen:
                    self.unseen.append([len(self.events), key, where])
                    self._remember(key, t, now)
        finally:
            self.depth -= 1

    def _note_written(self, tensors: Any) -> None:
        self.depth += 1
        try:
            if self.sync is not None:
                self.sync()
            for t in tensors:
                key = storage_key(t)
                if key is not None:
                    self._remember(key, t, fingerprint(t, self.secret))
        finally:
            self.depth -= 1

    def _add(self, kind: str, name: str, reads: list[int], writes: list[int]) -> None:
        if len(self.events) >= MAX_EVENTS:
            self.truncated = True
            return
        self.events.append([kind, name, sorted(set(reads)), sorted(set(writes))])

    def on_aten(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        if not self.active or self.depth:
            return
        schema = func._schema
        reads = [k for t in tensors_in((args, kwargs)) if (k := storage_key(t)) is not None]
        self.touched.update(reads)
        self.touched.update(k for t in tensors_in(out) if (k := storage_key(t)) is not None)
        writes: list[int] = []
        written_args = {
            a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write
        } | UNMARKED_WRITES.get(schema.name, set())
        written: list[torch.Tensor] = []
        if written_args:
            for i, a in enumerate(schema.arguments):
                if a.name in written_args:
                    written.extend(tensors_in(args[i] if i < len(args) else kwargs.get(a.name)))
        fresh = all(r.alias_info is None for r in schema.returns)
        if schema.name in PYTHON_NUMBER_OPS and isinstance(out, torch.Tensor) and out.numel() <= 1:
            reads, fresh = [], True  # a number from the source made a tensor: a constant, as `full` is
        if fresh:
            written.extend(tensors_in(out))
        writes.extend(k for t in written if (k := storage_key(t)) is not None)
        if not writes:
            return  # a view, a query, or an op that returns no tensor
        self._add("aten", _op_name(func), reads, writes)
        self._note_written(written)

    def wrap_launch(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], run: Any) -> Any:
        """Run one Triton launch; when recording, note its tensors and which of them it changed."""
        if not self.active or self.depth:
            return run()
        # One entry per storage: a launch may be given the same buffer (or views of one storage) more than
        # once, e.g. as a placeholder for an unused pointer. Each storage is fingerprinted once before and
        # once after, and every comparison with what the recorder last saw is made before any `after` is
        # remembered: remembering the first argument's `after` and then comparing the second argument's
        # `before` with it would read the launch's own write as an unseen one.
        tensors, keys, storages = [], [], set()
        for t in _launch_tensors(args, kwargs):
            k = storage_key(t)
            if k is not None and (k, t.untyped_storage().nbytes()) not in storages:
                storages.add((k, t.untyped_storage().nbytes()))
                tensors.append(t)
                keys.append(k)
        self.depth += 1
        try:
            if self.sync is not None:
                self.sync()
            filled = []
            for t, k in zip(tensors, keys, strict=True):
                if self._last_seen(k, t) is None and k not in self.touched:
                    _fill_unknown(t)
                    filled.append(k)
            before = [fingerprint(t, self.secret) for t in tensors]
            result = run()
            if self.sync is not None:
                self.sync()
            after = [fingerprint(t, self.secret) for t in tensors]
        finally:
            self.depth -= 1
        reads = list(keys)
        writes = [k for k, b, a in zip(keys, before, after, strict=True) if b != a]
        for t, k, b in zip(tensors, keys, before, strict=True):
            seen = self._last_seen(k, t)  # what it read must be what the recorder last saw there
            if seen is not None and seen != b:
                self.unseen.append([len(self.events), k, f"read by Triton kernel {name}"])
        for t, k, a in zip(tensors, keys, after, strict=True):
            self._remember(k, t, a)
        for k in filled:  # written: the rest is a constant the harness made there, as torch.empty's fill is
            if k in writes:
                self._add("aten", "fill_", [], [k])
        self.launches[name] += 1
        self._add("triton", name, reads, writes)
        return result


def _fill_unknown(t: torch.Tensor) -> None:
    """Fill the storage of a launch's tensor that the recorder has not seen (not there before forward, and no
    recorded op or launch has touched it yet) with 0xFF bytes (NaN in every float format) before the launch.

    Which tensors a launch writes is read from their fingerprints before and after it, so a launch that
    writes what the memory held already would seem to write nothing. Memory the recorder knows cannot hold
    that (its contents are this forward's), but memory kept between calls out of its sight can: a replay's
    arena, a cached workspace, where a weight's transform writes the same values at every call. Filled
    first, that write is seen, and the fill is recorded as the harness's constant (as torch.empty's fill of
    fresh memory is, under `fill_uninitialized_memory`): what the launch does not write then holds NaN, not
    what the memory held before, so a candidate cannot pass results kept out of sight through a launch that
    leaves them be (and the call's output is compared with the reference's). An honest launch reads none of
    that memory's old contents. Memory a recorded op was given or made in this forward (`torch.tensor` of a
    list's numbers) is not filled: it was made in forward, out of sight, and what reads it fails as it did."""
    storage = t.untyped_storage()
    n = storage.nbytes()
    if n:
        torch.empty(0, dtype=torch.uint8, device=t.device).set_(storage, 0, (n,), (1,)).fill_(255)


def _launch_tensors(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    for v in list(args) + list(kwargs.values()):
        if isinstance(v, torch.Tensor):
            found.append(v)
        elif isinstance(getattr(v, "base", None), torch.Tensor):  # Triton's TensorDescriptor
            found.append(v.base)
    return found


UNMARKED_WRITES: dict[str, set[str]] = {
    name: {"running_mean", "running_var"}
    for name in (
        "aten::native_batch_norm",
        "aten::cudnn_batch_norm",
        "aten::miopen_batch_norm",
        "aten::batch_norm",
    )
}
"""Ops that write arguments their schema does not mark as written (`Tensor(a!)`): the batch norms that update
their running statistics in place in train mode. Counted as writes, so a later read of those statistics
(the same BatchNorm used twice in one forward, a kernel reading them) is not taken for work out of sight."""


PYTHON_NUMBER_OPS = frozenset({"aten::lift_fresh", "aten::lift_fresh_copy"})
"""What `torch.tensor(data)` dispatches, after its data was copied into a new tensor out of the dispatcher's
sight. For one number (`torch.tensor(1.0 / 0.01, device=x.device)`, as level3/30's reference writes) the
tensor is recorded as a constant made in forward, as `torch.full` is; for more than one it stays memory no
recorded op wrote (a list or an array computed in Python, outside the recorder's view)."""


class RecordingMode(TorchDispatchMode):
    """The dispatch mode that feeds a Recorder; every op runs as it would without it."""

    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        # What the op reads must be what the recorder last saw there (checked before it runs: an
        # in-place op reads what it then writes).
        self.recorder.check(tensors_in((args, kwargs)), f"read by aten::{_op_name(func)}")
        out = func(*args, **kwargs)
        self.recorder.on_aten(func, args, kwargs, out)
        return out


def install_launch_hooks(recorder: Recorder) -> list[tuple[Any, Any]]:
    """Route every Triton launch (JIT, interpreter, compiled kernel) through the recorder; returns what was
    replaced, as (class, the hook now in its `run`).

    `kernel[grid](...)`, `kernel.run(...)` and autotuned launches all go through `run`; a warm-up
    (compile only) is not a launch.
    """
    from triton.runtime.jit import JITFunction

    classes: list[Any] = [JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:
        pass
    replaced = []
    for cls in classes:
        original = cls.run

        def run(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            if not recorder.active or recorder.depth or kwargs.get("warmup", False):
                return _original(self, *args, **kwargs)  # (wrap_launch would run it as is)
            fn = getattr(self, "fn", None)
            name = getattr(fn, "__name__", None) or getattr(self, "__name__", "kernel")
            return recorder.wrap_launch(str(name), args, kwargs, lambda: _original(self, *args, **kwargs))

        cls.run = run
        replaced.append((cls, run))
    compiled = _hook_compiled_kernels(recorder)
    if compiled is not None:
        replaced.append(compiled)
    return replaced


def _hook_compiled_kernels(recorder: Recorder) -> tuple[Any, Any] | None:
    """Route launches of a compiled kernel (`compiled[grid](...)`, `compiled.run(...)`: what Triton's JIT
    itself calls, and what a program calls to skip the JIT's per-launch binding) through the recorder too.

    `CompiledKernel.run` is a property that returns the launcher; it now returns the launcher behind a
    recording wrapper, named as the JIT names the launch. Inside a JIT launch the recorder is already
    recording that launch (its depth), so nothing is counted twice. While nothing records (the timed calls)
    the wrapper calls the launcher at once, the state read at each call (a launcher read then and kept is
    recorded when called in a recorded forward): the recording's further Python calls a launch would be host
    time that eager, timed in the judge's process, does not pay."""
    try:
        from triton.compiler.compiler import CompiledKernel
    except ImportError:
        return None
    prop = CompiledKernel.__dict__.get("run")
    if not isinstance(prop, property) or prop.fget is None:
        return None
    launcher_of = prop.fget

    def recorded_launcher(self: Any) -> Any:
        launch = launcher_of(self)

        def recorded(*args: Any, **kwargs: Any) -> Any:
            if not recorder.active or recorder.depth:
                return launch(*args, **kwargs)
            name = str(getattr(self, "name", None) or "kernel")
            return recorder.wrap_launch(name, args, kwargs, lambda: launch(*args, **kwargs))

        return recorded

    hooked = property(recorded_launcher)
    CompiledKernel.run = hooked  # type: ignore[method-assign,assignment]
    return CompiledKernel, hooked


def classify_op(name: str) -> str:
    """'movement', 'constant' or 'compute' for an aten op packet name."""
    if name in MOVEMENT_OPS:
        return "movement"
    if name in CONSTANT_OPS:
        return "constant"
    return "compute"


def compute_ops(events: list[list[Any]]) -> Counter[str]:
    """aten compute ops (not data movement, not constants) in recorded events, with counts."""
    return Counter(e[1] for e in events if e[0] == "aten" and classify_op(e[1]) == "compute")


@dataclass
class Provenance:
    """What the judge concludes from a recorded forward."""

    ok: bool
    error_kind: str | None = None
    """"torch_fallback" or "forbidden" when not ok."""
    reason: str = ""
    torch_ops: list[str] = field(default_factory=list)
    """Compute ops that ran through torch in forward, as "aten::mm x2"."""
    triton_launches: int = 0
    triton_writes: int = 0


def analyse(report: dict[str, Any], reference_ops: dict[str, int] | None = None) -> Provenance:
    """Judge a Recorder report (as JSON from the candidate process): see the module docstring.
    `reference_ops`: the compute ops the reference runs, with how many times."""
    events = report.get("events")
    if not isinstance(events, list):
        return Provenance(False, "forbidden", "the evidence report is malformed")
    clean: list[tuple[str, str, list[int], list[int]]] = []
    for e in events:
        if (
            not isinstance(e, list) or len(e) != 4 or e[0] not in ("aten", "triton") or not isinstance(e[1], str)
            or not all(isinstance(x, list) and all(isinstance(k, int) for k in x) for x in e[2:])
        ):  # fmt: skip
            return Provenance(False, "forbidden", "the evidence report is malformed")
        clean.append((e[0], e[1], e[2], e[3]))
    before = {k for k in report.get("before", []) if isinstance(k, int)}
    outputs = [k for k in report.get("outputs", []) if isinstance(k, int)]
    ops = compute_ops([list(e) for e in clean])
    torch_ops = [f"aten::{name} x{n}" for name, n in sorted(ops.items())]
    launches = sum(1 for e in clean if e[0] == "triton")
    triton_writes = sum(1 for e in clean if e[0] == "triton" and e[3])

    def verdict(ok: bool, kind: str | None = None, reason: str = "") -> Provenance:
        return Provenance(
            ok, kind, reason, torch_ops=torch_ops, triton_launches=launches, triton_writes=triton_writes
        )

    if report.get("truncated"):
        return verdict(False, "forbidden", f"forward dispatched over {MAX_EVENTS} torch ops")
    unseen = report.get("unseen")
    if unseen:
        where = unseen[0][2] if isinstance(unseen[0], list) and len(unseen[0]) == 3 else "?"
        return verdict(
            False,
            "forbidden",
            f"memory changed with no recorded op writing it ({len(unseen)} time(s); first found when "
            f"{str(where)[:120]}): work done out of the harness's sight (another thread, numpy on a "
            "tensor's memory, a library outside torch)",
        )
    if launches == 0:
        return verdict(False, "torch_fallback", "forward launched no Triton kernel")
    # Every compute op of the reference, each at least as many times: its own computation with a kernel
    # beside it. (A whole model that keeps one of its six convolutions in torch is not that.)
    if reference_ops and all(ops[name] >= n for name, n in reference_ops.items()):
        names = ", ".join(f"aten::{n}" for n in sorted(reference_ops))
        return verdict(
            False,
            "torch_fallback",
            f"forward ran every compute op the reference runs ({names}) through torch: the Triton "
            "kernels beside them are not doing the work",
        )
    writers: dict[int, list[int]] = {}
    for i, (_, _, _, writes) in enumerate(clean):
        for k in writes:
            writers.setdefault(k, []).append(i)

    def last_writer(key: int, before_index: int) -> int | None:
        found = None
        for i in writers.get(key, []):
            if i < before_index:
                found = i
            else:
                break
        return found

    for n, out in enumerate(outputs):
        reaches_triton, unaccounted = False, set()
        stack: list[tuple[int, int]] = [(out, len(clean))]
        seen: set[tuple[int, int | None]] = set()
        while stack:
            key, at = stack.pop()
            w = last_writer(key, at)
            if (key, w) in seen:
                continue
            seen.add((key, w))
            if w is None:
                if key not in before:
                    unaccounted.add(key)
                continue
            kind, _, reads, _ = clean[w]
            if kind == "triton":
                reaches_triton = True
            stack.extend((r, w) for r in reads)
        if unaccounted:
            return verdict(
                False,
                "forbidden",
                f"output {n} depends on memory that no recorded op wrote and that did not exist before "
                "forward (work done out of the harness's sight, e.g. in another thread)",
            )
        if not reaches_triton:
            return verdict(
                False,
                "torch_fallback",
                f"output {n} does not depend on anything a Triton kernel wrote: it was computed by torch "
                f"({', '.join(torch_ops) or 'no compute op: an input or a parameter returned as it is'})",
            )
    return verdict(True)
