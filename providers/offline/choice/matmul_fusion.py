"""Dual matmuls: a schedule pass that merges two products sharing their left operand into one kernel.

Two products that share their left operand and whose results meet in one pointwise chain (the gate/up
pair of a SwiGLU feed-forward, `silu(x @ Wg.T) * (x @ Wu.T)`) are merged by `fuse_dual_matmuls` into
one kernel (a `DualKernel`): one A tile load feeds two `tl.dot`s into two accumulators, and the
epilogue combines them before the single store, so neither product is written (emit_matmul.MatmulGen
writes it). The policy decides per program whether to fuse (`policy.fuse_allowed`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelwright.providers.offline.choice.schedule import (
    Kernel,
    Schedule,
    shape_eq,
    value_args,
    walk_values,
)
from kernelwright.providers.offline.frontend.ir import Value


@dataclass(eq=False)
class DualKernel(Kernel):
    """A matmul kernel that computes further products with the same A (`extra_anchors`) in its loop."""

    extra_anchors: list[Value] = field(default_factory=list)


def _same_operand(a: Value, b: Value) -> bool:
    """The same tensor: one value, or the same chain of views of one value."""
    if a is b:
        return True
    if a.kind != "view" or b.kind != "view" or a.op != b.op or a.op == "item":
        return False
    if not shape_eq(a.shape, b.shape) or repr(a.attrs) != repr(b.attrs):
        return False
    return _same_operand(a.args[0], b.args[0])


def _reads(sched: Schedule, v: Value, k: Kernel) -> bool:
    """Whether computing `v` (its free pointwise inputs recomputed in place) needs a value `k` owns."""
    stack = value_args(v)
    seen: set[int] = set()
    while stack:
        x = stack.pop()
        if x.id in seen:
            continue
        seen.add(x.id)
        owner = sched.owner.get(x.id)
        if owner is k:
            return True
        if owner is None and x.kind not in ("input", "param"):
            stack.extend(walk_values(x.args))
    return False


def _kernel_reads(sched: Schedule, reader: Kernel, k: Kernel) -> bool:
    return any(_reads(sched, v, k) for v in reader.values if sched.owner.get(v.id) is reader)


def _dual_pair(sched: Schedule, k1: Kernel, k2: Kernel) -> bool:
    """k1 and k2 (later) share A, have equal shapes and dtypes, and only k2's epilogue reads k1's results."""
    if k1.anchor is None or k2.anchor is None or isinstance(k1, DualKernel) or isinstance(k2, DualKernel):
        return False
    (a1, b1), (a2, b2) = k1.anchor.args, k2.anchor.args
    if b1 is b2 or not _same_operand(a1, a2):
        return False
    if not (shape_eq(k1.space, k2.space) and shape_eq(b1.shape, b2.shape)):
        return False
    if (b1.dtype, k1.anchor.dtype) != (b2.dtype, k2.anchor.dtype):
        return False
    if not _kernel_reads(sched, k2, k1):
        return False  # the two results never meet in one kernel: nothing is saved by merging
    if _reads(sched, k2.anchor, k1):
        return False  # an operand of the second product is computed from the first
    # k1's results must not be needed anywhere but in k2 (and as outputs of the forward).
    return not any(k not in (k1, k2) and _kernel_reads(sched, k, k1) for k in sched.kernels)


def fuse_dual_matmuls(sched: Schedule) -> Schedule:
    """Merge each pair of matmul kernels that share their left operand and whose results meet in one
    pointwise chain (gate/up projections) into one DualKernel; other schedules come back unchanged."""
    while True:
        mms = [k for k in sched.kernels if k.kind == "matmul"]
        pair = next(
            ((k1, k2) for i, k1 in enumerate(mms) for k2 in mms[i + 1 :] if _dual_pair(sched, k1, k2)), None
        )
        if pair is None:
            return sched
        k1, k2 = pair
        assert k1.anchor is not None and k2.anchor is not None
        out_ids = {v.id for v in sched.graph.outputs}
        kept = [v for v in k1.outputs if v.id in out_ids]
        merged = DualKernel(
            k2.id, "matmul", values=k1.values + k2.values, outputs=kept + list(k2.outputs), space=k2.space,
            anchor=k1.anchor, family=k2.family or "matmul", extra_anchors=[k2.anchor],
        )  # fmt: skip
        owner = {vid: (merged if k in (k1, k2) else k) for vid, k in sched.owner.items()}
        dropped = {v.id for v in k1.outputs if v.id not in out_ids}
        kernels = [merged if k is k2 else k for k in sched.kernels if k is not k1]
        stored = {vid: dt for vid, dt in sched.stored.items() if vid not in dropped}
        sched = Schedule(sched.graph, kernels, owner, sched.space, sched.materialised - dropped, stored)


__all__ = ["DualKernel", "fuse_dual_matmuls"]
